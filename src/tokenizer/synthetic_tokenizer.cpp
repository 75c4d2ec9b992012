// A tokenizer.json for a synthetic checkpoint: see the header.
#include "tokenizer/synthetic_tokenizer.h"

#include <limits>
#include <set>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace day0 {
namespace {

// splitmix64: a seeded stream with no state beyond one word.
struct Stream {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

// Raw bytes in the byte-level alphabet the vocabulary and merges are written in.
std::string byte_level(const std::string& raw) {
  std::string out;
  for (unsigned char b : raw) tok::append_utf8(out, tok::byte_to_char()[b]);
  return out;
}

}  // namespace

Result<std::string> synthetic_tokenizer_json(std::int64_t vocab_size, std::span<const std::int32_t> special_ids,
                                             std::uint64_t seed) {
  const std::set<std::int32_t> special(special_ids.begin(), special_ids.end());
  for (std::int32_t id : special)
    if (id < 0 || id >= vocab_size)
      return make_error("synthetic tokenizer: special id " + std::to_string(id) + " outside the vocabulary of " +
                        std::to_string(vocab_size));
  const std::int64_t regular = vocab_size - static_cast<std::int64_t>(special.size());
  if (regular < 256 || vocab_size > std::numeric_limits<std::int32_t>::max())
    return make_error("synthetic tokenizer: a vocabulary of " + std::to_string(vocab_size) + " with " +
                      std::to_string(special.size()) + " special ids cannot hold the 256 byte tokens");

  // The regular ids in ascending order: the bytes, then the merges' words.
  std::vector<std::string> tokens;  // raw bytes, by regular index
  tokens.reserve(static_cast<std::size_t>(regular));
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  std::vector<std::size_t> words;  // indices of the tokens a merge may extend: " " and the words
  words.push_back(static_cast<std::size_t>(' '));
  for (char c = 'a'; c <= 'z'; ++c) words.push_back(static_cast<std::size_t>(c));
  std::vector<std::pair<std::size_t, std::size_t>> merges;
  Stream rng{seed};
  while (static_cast<std::int64_t>(tokens.size()) < regular) {
    const std::size_t left = words[rng.below(words.size())];
    const std::size_t letter = static_cast<std::size_t>('a' + rng.below(26));
    std::string word = tokens[left] + tokens[letter];
    if (!seen.insert(word).second) continue;  // already a token: draw again (rare once words are long)
    merges.emplace_back(left, letter);
    words.push_back(tokens.size());
    tokens.push_back(std::move(word));
  }

  nlohmann::json vocab = nlohmann::json::object(), merge_list = nlohmann::json::array(),
                 added = nlohmann::json::array();
  std::int32_t id = 0;
  for (const std::string& t : tokens) {
    while (special.count(id)) ++id;
    vocab[byte_level(t)] = id++;
  }
  for (const auto& [a, b] : merges) merge_list.push_back(byte_level(tokens[a]) + " " + byte_level(tokens[b]));
  // A special token is in the model's vocabulary too: added tokens take the id their content has there (else
  // the next id after it), as the reference's added vocabulary does.
  for (std::int32_t s : special) {
    const std::string content = "<|synthetic_special_" + std::to_string(s) + "|>";
    vocab[content] = s;
    added.push_back({{"id", s},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const nlohmann::json byte_level_step = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const nlohmann::json doc = {{"version", "1.0"},
                              {"truncation", nullptr},
                              {"padding", nullptr},
                              {"added_tokens", added},
                              {"normalizer", nullptr},
                              {"pre_tokenizer", byte_level_step},
                              {"post_processor", byte_level_step},
                              {"decoder", byte_level_step},
                              {"model",
                               {{"type", "BPE"},
                                {"dropout", nullptr},
                                {"unk_token", nullptr},
                                {"continuing_subword_prefix", nullptr},
                                {"end_of_word_suffix", nullptr},
                                {"fuse_unk", false},
                                {"byte_fallback", false},
                                {"ignore_merges", false},
                                {"vocab", std::move(vocab)},
                                {"merges", std::move(merge_list)}}}};
  return doc.dump() + "\n";
}

}  // namespace day0
