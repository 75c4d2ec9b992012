// Tokenizer's public API over Tokenizer::Impl: the encode pipeline (raw added tokens -> normalizer ->
// normalized added tokens -> pre-tokenizer -> BPE -> post-processor), decode and vocabulary queries.
#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace day0 {

namespace {
constexpr std::size_t kMaxEncodeBytes = std::size_t{1} << 30;  // span offsets are 32-bit; byte-level doubles text
}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::from_file(const std::string& tokenizer_json_path) {
  D0_ASSIGN_OR_RETURN(auto impl, tok::load_tokenizer_json(tokenizer_json_path));
  return Tokenizer(std::move(impl));
}

Status Tokenizer::Impl::encode_segment(std::string_view text, bool at_origin, std::vector<std::int32_t>& ids) const {
  std::string normalized(text);
  if (normalizer) D0_RETURN_IF_ERROR(normalizer->normalize(normalized));
  std::vector<tok::Segment> segments;
  added.split(normalized, /*normalized=*/true, segments);
  tok::Pieces pieces;
  for (const tok::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pieces.buf.assign(normalized, seg.begin, seg.end - seg.begin);
    pieces.spans.assign(1, tok::Span{0, seg.end - seg.begin, at_origin && seg.begin == 0});
    if (pre_tokenizer) D0_RETURN_IF_ERROR(pre_tokenizer->pre_tokenize(pieces));
    for (const tok::Span& span : pieces.spans) D0_RETURN_IF_ERROR(model->tokenize(pieces.text(span), ids));
  }
  return Status::success();
}

Result<std::vector<std::int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = utf8_first_invalid(text)) {
    return make_error("encode: invalid UTF-8 at byte offset " + std::to_string(*bad));
  }
  if (text.size() > kMaxEncodeBytes) {
    return make_error("encode: input of " + std::to_string(text.size()) + " bytes is over the 1 GiB limit");
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 4 + 4);
  std::vector<tok::Segment> segments;
  impl_->added.split(text, /*normalized=*/false, segments);
  for (const tok::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    const Status s = impl_->encode_segment(text.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, ids);
    if (!s.ok()) return make_error("encode: " + s.error().message);
  }
  if (impl_->post_processor) impl_->post_processor->process(ids, add_special_tokens);
  return ids;
}

Result<std::string> Tokenizer::decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_token.size() || !impl_->id_to_token[id]) {
      return make_error("decode: id " + std::to_string(id) + " is not in the vocabulary (size " +
                        std::to_string(impl_->id_to_token.size()) + ")");
    }
    if (skip_special_tokens && impl_->special[static_cast<std::size_t>(id)]) continue;
    tokens.emplace_back(*impl_->id_to_token[static_cast<std::size_t>(id)]);
  }
  std::string out;
  if (!impl_->decoder) {
    // No decoder: the reference joins the tokens with spaces.
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  const Status s = impl_->decoder->decode_chain(tokens, /*last=*/true);
  if (!s.ok()) return make_error("decode: " + s.error().message);
  for (const std::string& t : tokens) out += t;
  return out;
}

Result<std::string> Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const {
  D0_ASSIGN_OR_RETURN(std::string bytes, decode_bytes(ids, skip_special_tokens));
  return utf8_lossy(bytes);
}

bool Tokenizer::decode_is_concatenative() const { return impl_->concatenative; }

std::int32_t Tokenizer::vocab_size() const { return static_cast<std::int32_t>(impl_->id_to_token.size()); }

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  std::int32_t id = impl_->added.find(token);
  if (id < 0) id = impl_->model->token_to_id(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string> Tokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->id_to_token.size() || !impl_->id_to_token[id]) {
    return std::nullopt;
  }
  return std::string(*impl_->id_to_token[static_cast<std::size_t>(id)]);
}

bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() &&
         impl_->special[static_cast<std::size_t>(id)];
}

}  // namespace day0
