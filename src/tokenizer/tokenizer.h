// Hugging Face tokenizer.json for byte-level BPE models: normalizer, added/special tokens (matched
// before pre-tokenization), pre-tokenizers (Split on PCRE2, ByteLevel, Sequence, Digits, Metaspace),
// the BPE model (merges, ignore_merges), post-processor and decoder. Encodes to the same ids as the reference.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace day0 {

class Tokenizer {
 public:
  // Reads and validates tokenizer.json; errors name the file and the unsupported or malformed part.
  static Result<Tokenizer> from_file(const std::string& tokenizer_json_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Invalid UTF-8 input is an error naming the byte offset. add_special_tokens runs the post-processor
  // (e.g. TemplateProcessing's BOS), as the reference's encode(text) does by default.
  Result<std::vector<std::int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  // Decoder output as text: decode_bytes() with invalid UTF-8 replaced by U+FFFD per maximal invalid
  // subpart (as the reference's lossy conversion does). Ids outside the vocabulary are an error.
  Result<std::string> decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;
  // The decoder's raw bytes, before UTF-8 repair (byte-level tokens can split a character).
  Result<std::string> decode_bytes(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;
  // True when decode_bytes(a + b) == decode_bytes(a) + decode_bytes(b) for all id lists (ByteLevel
  // decoders); streaming then decodes only the new ids.
  bool decode_is_concatenative() const;

  std::int32_t vocab_size() const;  // largest id + 1, added tokens included
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;  // the vocabulary string (byte-level form)
  bool is_special(std::int32_t id) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Streaming decode: push ids one at a time, get back only complete UTF-8; the pieces joined (plus
// finish()) equal decode() of all ids.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  Result<std::string> push(std::int32_t id);
  // Whatever is held back at the end (an incomplete UTF-8 tail decodes as the reference would).
  Result<std::string> finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  // all ids (non-concatenative decoders re-decode them)
  std::string pending_;            // concatenative: raw bytes not yet emitted
  std::size_t emitted_bytes_ = 0;  // non-concatenative: raw bytes already emitted
};

}  // namespace day0
