// Added tokens (the reference's tokenizer/added_vocabulary.rs): two leftmost-longest matchers, one
// for raw text (normalized=false tokens, usually the special ones) and one for normalized text, and
// the find_matches rules: single_word boundaries, lstrip/rstrip swallowing adjacent whitespace.
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace day0::tok {
namespace {

// Last code point of s (non-empty, valid UTF-8).
char32_t last_char(std::string_view s) {
  std::size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  std::size_t len = 0;
  return decode_at(s, i, &len);
}

// Start of the whitespace run that ends `s` (the reference's `\s*$`).
std::size_t trailing_space_start(std::string_view s) {
  std::size_t e = s.size();
  while (e > 0) {
    std::size_t i = e - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    std::size_t len = 0;
    if (!is_white_space(decode_at(s, i, &len))) break;
    e = i;
  }
  return e;
}

// Length of the whitespace run that starts `s` (the reference's `^\s*`).
std::size_t leading_space_len(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len = 0;
    if (!is_white_space(decode_at(s, i, &len))) break;
    i += len;
  }
  return i;
}

}  // namespace

void AddedVocab::add_pattern(Trie& trie, std::string_view pattern, std::int32_t index) {
  std::int32_t node = 0;
  for (const char ch : pattern) {
    const auto byte = static_cast<std::int32_t>(static_cast<unsigned char>(ch));
    if (const PairMap::Value* child = trie.edges.find(node, byte)) {
      node = child->id;
      continue;
    }
    const auto child = static_cast<std::int32_t>(trie.term.size());
    trie.term.push_back(-1);
    trie.edges.insert(node, byte, PairMap::Value{0, child});
    node = child;
  }
  if (trie.term[static_cast<std::size_t>(node)] < 0) trie.term[static_cast<std::size_t>(node)] = index;
  trie.first[static_cast<unsigned char>(pattern.front())] = true;
}

namespace {
bool same_token(const AddedToken& a, const AddedToken& b) {
  return a.content == b.content && a.single_word == b.single_word && a.lstrip == b.lstrip && a.rstrip == b.rstrip &&
         a.normalized == b.normalized && a.special == b.special;
}
}  // namespace

Status AddedVocab::build(const std::vector<AddedToken>& tokens, const Normalizer* normalizer, const Bpe& model) {
  std::vector<const AddedToken*> specials, classics;  // the reference's special_tokens / added_tokens
  std::int32_t max_added = -1;
  const auto model_size = static_cast<std::int64_t>(model.size());
  for (const AddedToken& t : tokens) {
    if (t.special && !t.content.empty() && !is_special_content(t.content)) {
      specials.push_back(&t);
      special_contents_.insert(t.content, 0);
    }
    if (t.content.empty()) continue;
    // An identical token is already registered (only under its content's id can it be).
    std::int32_t id = by_content_.find(t.content);
    if (id >= 0 && same_token(by_id_.at(id), t)) continue;
    if (id < 0) id = model.token_to_id(t.content);
    if (id < 0) {
      // Next free id: after the model's vocabulary, or after the largest added id beyond it.
      id = max_added < 0                                  ? static_cast<std::int32_t>(model_size)
           : (max_added >= model_size || model_size == 0) ? max_added + 1
                                                          : static_cast<std::int32_t>(model_size);
    }
    by_content_.insert(t.content, id);
    AddedToken stored = t;
    stored.id = id;
    by_id_[id] = stored;
    max_added = std::max(max_added, id);
    if (!is_special_content(t.content)) classics.push_back(&t);
  }
  for (const auto& [id, t] : by_id_) {
    std::string form = t.content;
    if (t.normalized && normalizer) D0_RETURN_IF_ERROR(normalizer->normalize(form));
    decode_form_[id] = std::move(form);
  }
  raw_.term.assign(1, -1);
  normalized_.term.assign(1, -1);
  for (const auto* list : {&specials, &classics}) {
    for (const AddedToken* t : *list) {
      AddedToken entry = by_id_.at(by_content_.find(t->content));  // flags come from the id's entry
      const auto index = static_cast<std::int32_t>(patterns_.size());
      if (!t->normalized) {
        add_pattern(raw_, t->content, index);
      } else {
        std::string pattern = t->content;
        if (normalizer) D0_RETURN_IF_ERROR(normalizer->normalize(pattern));
        if (pattern.empty()) continue;
        add_pattern(normalized_, pattern, index);
      }
      patterns_.push_back(std::move(entry));
    }
  }
  return Status::success();
}

void AddedVocab::split(std::string_view s, bool normalized, std::vector<Segment>& out) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  const auto n = static_cast<std::uint32_t>(s.size());
  if (n == 0) return;
  if (trie.empty()) {
    out.push_back(Segment{0, n, -1});
    return;
  }
  std::uint32_t start_offset = 0;
  std::uint32_t pos = 0;
  while (pos < n) {
    if (!trie.first[static_cast<unsigned char>(s[pos])]) {
      ++pos;
      continue;
    }
    // Longest pattern starting here; the first position with one is the leftmost-longest match.
    std::int32_t node = 0, best = -1;
    std::uint32_t best_end = 0;
    for (std::uint32_t k = pos; k < n; ++k) {
      const PairMap::Value* child = trie.edges.find(node, static_cast<unsigned char>(s[k]));
      if (!child) break;
      node = child->id;
      if (trie.term[static_cast<std::size_t>(node)] >= 0)
        best = trie.term[static_cast<std::size_t>(node)], best_end = k + 1;
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    std::uint32_t start = pos, stop = best_end;
    pos = best_end;  // the matcher resumes after the match, whatever the checks below decide
    const AddedToken& token = patterns_[static_cast<std::size_t>(best)];
    if (token.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(s.substr(0, start)));
      std::size_t len = 0;
      const bool stop_space = stop == n || !is_word_char(decode_at(s, stop, &len));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) {
      // Whitespace an earlier match already took stays with it.
      start = std::max(static_cast<std::uint32_t>(trailing_space_start(s.substr(0, start))), start_offset);
    }
    if (token.rstrip) stop += static_cast<std::uint32_t>(leading_space_len(s.substr(stop)));
    if (start_offset < start) out.push_back(Segment{start_offset, start, -1});
    out.push_back(Segment{start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != n) out.push_back(Segment{start_offset, n, -1});
}

}  // namespace day0::tok
