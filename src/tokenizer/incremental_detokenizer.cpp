// IncrementalDetokenizer: emit only complete UTF-8, hold back an incomplete tail, and make the joined
// pieces equal the full decode.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace day0 {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

// Splitting raw bytes before an incomplete-but-valid tail never splits a maximal invalid subpart, so
// utf8_lossy(head) + utf8_lossy(rest) == utf8_lossy(head + rest).
Result<std::string> IncrementalDetokenizer::push(std::int32_t id) {
  if (tokenizer_.decode_is_concatenative()) {
    D0_ASSIGN_OR_RETURN(std::string bytes, tokenizer_.decode_bytes(std::span(&id, 1), skip_special_));
    pending_ += bytes;
    const std::size_t ready = pending_.size() - utf8_incomplete_tail(pending_);
    std::string out = utf8_lossy(std::string_view(pending_).substr(0, ready));
    pending_.erase(0, ready);
    return out;
  }
  ids_.push_back(id);
  D0_ASSIGN_OR_RETURN(std::string all, tokenizer_.decode_bytes(ids_, skip_special_));
  // A non-concatenative decoder re-decodes all ids; emitting only past what was emitted assumes those
  // bytes stay unchanged as ids follow (true of Metaspace and Strip, which touch only the start; a
  // ByteFallback byte run that turns invalid later can break it).
  // Decoders such as ByteFallback already turned an incomplete character into U+FFFD; like the
  // reference's DecodeStream, hold everything back while the text ends in one (finish() flushes).
  if (std::string_view(all).ends_with("\xEF\xBF\xBD")) return std::string();
  const std::size_t ready = all.size() - utf8_incomplete_tail(all);
  if (ready <= emitted_bytes_) return std::string();
  std::string out = utf8_lossy(std::string_view(all).substr(emitted_bytes_, ready - emitted_bytes_));
  emitted_bytes_ = ready;
  return out;
}

Result<std::string> IncrementalDetokenizer::finish() {
  if (tokenizer_.decode_is_concatenative()) {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  D0_ASSIGN_OR_RETURN(std::string all, tokenizer_.decode_bytes(ids_, skip_special_));
  std::string out = all.size() > emitted_bytes_ ? utf8_lossy(std::string_view(all).substr(emitted_bytes_)) : "";
  emitted_bytes_ = all.size();
  return out;
}

}  // namespace day0
