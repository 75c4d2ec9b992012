// Internal pipeline of Tokenizer: the component interfaces (normalizer, pre-tokenizer, BPE model,
// added vocabulary, post-processor, decoder) and Tokenizer::Impl, which owns one of each.
// Each component mirrors the reference (huggingface/tokenizers) type of the same name.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/hash_maps.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace day0::tok {

// ---- Pieces: the pre-tokenizer's working set (the reference's PreTokenizedString, minus offsets) ----

struct Span {
  std::uint32_t begin = 0, end = 0;
  // The piece starts at original offset 0 (Metaspace's prepend_scheme "first" asks this).
  bool at_origin = false;
};

struct Pieces {
  std::string buf;          // text the spans index into
  std::vector<Span> spans;  // non-empty, in order
  std::string_view text(const Span& s) const { return std::string_view(buf).substr(s.begin, s.end - s.begin); }
};

// ---- Normalizers ----

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual Status normalize(std::string& s) const = 0;
};

// ---- Pre-tokenizers ----

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual Status pre_tokenize(Pieces& pieces) const = 0;
};

// ---- Model ----

class Bpe {
 public:
  struct Config {
    std::optional<std::string> unk_token;
    std::string continuing_subword_prefix, end_of_word_suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  };
  // Takes the vocabulary (token, id) and merges (left, right); errors name the bad entry.
  static Result<std::unique_ptr<Bpe>> build(Config config, std::vector<std::pair<std::string, std::int64_t>>& vocab,
                                            const std::vector<std::pair<std::string, std::string>>& merges);

  // Appends the ids of one pre-token. Fails only when unk_token is needed but not in the vocabulary.
  Status tokenize(std::string_view word, std::vector<std::int32_t>& out) const;

  std::int32_t token_to_id(std::string_view token) const { return vocab_.find(token); }
  // Empty optional for ids without a token.
  std::optional<std::string_view> id_to_token(std::int32_t id) const;
  std::int32_t max_id() const { return static_cast<std::int32_t>(tokens_.size()) - 1; }
  // Number of distinct tokens (the reference's get_vocab_size, which numbers new added tokens).
  std::size_t size() const { return vocab_.size(); }

 private:
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    std::uint32_t len;  // bytes; 0 once merged into its left neighbour
  };
  Status merge_word(std::string_view word, std::vector<std::int32_t>& out) const;
  void merge_symbols(std::vector<Symbol>& symbols) const;
  std::int32_t char_id(std::string_view word, std::size_t pos, std::size_t len, bool first, bool last,
                       std::string& scratch) const;

  Config config_;
  StringIdMap vocab_;
  std::string token_arena_;
  std::vector<std::pair<std::uint32_t, std::int32_t>> tokens_;  // id -> (offset, length or -1)
  PairMap merges_;
  std::array<std::int32_t, 256> byte_ids_{};  // "<0xNN>" ids for byte_fallback, -1 if absent
  std::vector<std::int32_t> small_char_ids_;  // code point < 0x800 -> id (-1 absent); empty if affixes set
  std::int32_t unk_id_ = -1;

  // Per-word cache, as the reference's (bounded; cleared when full). try_lock: a busy cache is skipped.
  struct SvHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return hash_bytes(s); }
  };
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, SvHash, std::equal_to<>> cache_;
};

// ---- Added tokens ----

struct AddedToken {
  std::string content;
  std::int32_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

struct Segment {
  std::uint32_t begin, end;
  std::int32_t id;  // added token id, or -1 for text still to tokenize
};

class AddedVocab {
 public:
  // Adds the tokens one by one as the reference's deserializer does: a token whose content is
  // already known (an earlier added token or the model's vocabulary) takes that id, others get the
  // next free id; the "id" written in tokenizer.json is not used. `normalizer` (may be null)
  // normalizes the patterns of normalized=true tokens.
  Status build(const std::vector<AddedToken>& tokens, const Normalizer* normalizer, const Bpe& model);
  // Splits `s` on the tokens of one matcher (normalized=false tokens on raw text, normalized=true
  // ones on normalized text), as the reference's find_matches; the segments cover all of `s`.
  void split(std::string_view s, bool normalized, std::vector<Segment>& out) const;

  // The reference's added_tokens_map_r: id -> token (content and flags).
  const std::unordered_map<std::int32_t, AddedToken>& by_id() const { return by_id_; }
  // What decode (and id_to_token) give for an added id: its content, or for a normalized=true
  // token its normalized content (its matching pattern), as the reference does.
  const std::string& decode_form(std::int32_t id) const { return decode_form_.at(id); }
  std::int32_t find(std::string_view content) const { return by_content_.find(content); }
  bool is_special_content(std::string_view content) const { return special_contents_.find(content) >= 0; }

 private:
  // Byte trie for leftmost-longest matching.
  struct Trie {
    PairMap edges;                   // (node, byte) -> child node (in Value::id)
    std::vector<std::int32_t> term;  // node -> index into patterns_, or -1
    std::array<bool, 256> first{};   // bytes that start some pattern
    bool empty() const { return term.size() <= 1; }
  };
  static void add_pattern(Trie& trie, std::string_view pattern, std::int32_t index);

  std::unordered_map<std::int32_t, AddedToken> by_id_;
  std::unordered_map<std::int32_t, std::string> decode_form_;
  StringIdMap by_content_;            // the reference's added_tokens_map
  StringIdMap special_contents_;      // the reference's special_tokens_set (value unused)
  std::vector<AddedToken> patterns_;  // matcher entries: resolved id, flags of by_id_[id]
  Trie raw_, normalized_;
};

// ---- Post-processors and decoders ----

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings in place (the reference's decode_chain). `last` says no decoder
  // follows: ByteLevel then leaves raw bytes (possibly invalid UTF-8) instead of repairing them.
  virtual Status decode_chain(std::vector<std::string>& tokens, bool last) const = 0;
  // Maps each token on its own (Replace, Strip): splitting the id list commutes with it.
  virtual bool per_token() const { return false; }
  // Joins its tokens into one (ByteLevel, Fuse): fine as the last step of a streamed decode.
  virtual bool concatenates() const { return false; }
};

// ---- Construction from tokenizer.json (each in its component's file) ----
// `file` prefixes error messages, e.g. "<file>: pre_tokenizer type \"X\" is not supported".
// A null JSON value gives a null component.

Result<std::unique_ptr<Normalizer>> normalizer_from_json(const nlohmann::json& j, const std::string& file);
Result<std::unique_ptr<PreTokenizer>> pre_tokenizer_from_json(const nlohmann::json& j, const std::string& file);
Result<std::unique_ptr<PostProcessor>> post_processor_from_json(const nlohmann::json& j, const std::string& file);
Result<std::unique_ptr<Decoder>> decoder_from_json(const nlohmann::json& j, const std::string& file);

// The GPT-2 byte <-> printable character table shared by the ByteLevel pre-tokenizer and decoder.
const std::array<char32_t, 256>& byte_to_char();
// Inverse of byte_to_char(); -1 for characters outside the table.
int char_to_byte(char32_t c);

}  // namespace day0::tok

namespace day0 {

struct Tokenizer::Impl {
  std::string path;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Bpe> model;
  std::unique_ptr<tok::PostProcessor> post_processor;
  std::unique_ptr<tok::Decoder> decoder;
  tok::AddedVocab added;

  // id -> token string as decode sees it (added tokens first, then the model's vocabulary); views
  // into the model's token arena or the added vocabulary's decode forms (both fixed after loading).
  std::vector<std::optional<std::string_view>> id_to_token;
  std::vector<std::uint8_t> special;  // id -> its token string is a special token's content
  bool concatenative = false;

  // Normalizes one stretch of text between raw added tokens, splits out normalized added tokens,
  // pre-tokenizes and runs the model; appends the ids.
  Status encode_segment(std::string_view text, bool at_origin, std::vector<std::int32_t>& ids) const;
};

namespace tok {
// Reads, parses and validates tokenizer.json (tokenizer_json.cpp).
Result<std::unique_ptr<Tokenizer::Impl>> load_tokenizer_json(const std::string& path);
}  // namespace tok

}  // namespace day0
