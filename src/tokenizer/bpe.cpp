// The BPE model (the reference's models/bpe): vocabulary and merge tables, the per-word merge loop
// (lowest rank first, leftmost on ties), byte_fallback / unk handling, ignore_merges and the word cache.
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace day0::tok {
namespace {

constexpr std::int64_t kMaxId = 1 << 24;              // far above any real vocabulary; bounds the id table
constexpr std::size_t kCacheMaxWordBytes = 256;       // the reference caches words shorter than this
constexpr std::size_t kCacheCapacity = 1 << 16;       // entries; the cache is cleared when full
constexpr std::size_t kSmallWordSymbols = 48;         // up to here a linear scan beats the heap
constexpr std::size_t kKeepScratchSymbols = 1 << 16;  // per-thread scratch kept between words

}  // namespace

Result<std::unique_ptr<Bpe>> Bpe::build(Config config, std::vector<std::pair<std::string, std::int64_t>>& vocab,
                                        const std::vector<std::pair<std::string, std::string>>& merges) {
  auto bpe = std::make_unique<Bpe>();
  bpe->config_ = std::move(config);
  std::size_t key_bytes = 0;
  std::int64_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id >= kMaxId) {
      return make_error("model.vocab: id " + std::to_string(id) + " of token \"" + token + "\" is out of range");
    }
    key_bytes += token.size();
    max_id = std::max(max_id, id);
  }
  bpe->vocab_.reserve(vocab.size(), key_bytes);
  bpe->token_arena_.reserve(key_bytes);
  bpe->tokens_.assign(static_cast<std::size_t>(max_id + 1), {0, -1});
  for (const auto& [token, id] : vocab) bpe->vocab_.insert(token, static_cast<std::int32_t>(id));
  for (const auto& [token, id] : vocab) {
    // A repeated token keeps its last id; two tokens on one id: the first keeps the reverse entry.
    if (bpe->vocab_.find(token) != id) continue;
    auto& slot = bpe->tokens_[static_cast<std::size_t>(id)];
    if (slot.second >= 0) continue;
    slot = {static_cast<std::uint32_t>(bpe->token_arena_.size()), static_cast<std::int32_t>(token.size())};
    bpe->token_arena_ += token;
  }
  vocab.clear();
  vocab.shrink_to_fit();

  const std::string& prefix = bpe->config_.continuing_subword_prefix;
  bpe->merges_.reserve(merges.size());
  std::string merged;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const std::int32_t a_id = bpe->vocab_.find(a);
    const std::int32_t b_id = bpe->vocab_.find(b);
    if (a_id < 0 || b_id < 0) {
      return make_error("model.merges[" + std::to_string(rank) + "]: token \"" + (a_id < 0 ? a : b) +
                        "\" is not in the vocabulary");
    }
    // With a continuing-subword prefix, the right part drops its first prefix-length bytes when
    // merged ("a" + "##b" = "ab"), as the reference slices them off unconditionally.
    if (b.size() < prefix.size() ||
        (b.size() > prefix.size() && utf8_len(static_cast<unsigned char>(b[prefix.size()])) == 1 &&
         (static_cast<unsigned char>(b[prefix.size()]) & 0xC0) == 0x80)) {
      return make_error("model.merges[" + std::to_string(rank) + "]: token \"" + b +
                        "\" cannot lose the continuing_subword_prefix");
    }
    merged.assign(a);
    merged.append(b, prefix.size(), std::string::npos);
    const std::int32_t new_id = bpe->vocab_.find(merged);
    if (new_id < 0) {
      return make_error("model.merges[" + std::to_string(rank) + "]: merged token \"" + merged +
                        "\" is not in the vocabulary");
    }
    bpe->merges_.insert(a_id, b_id, PairMap::Value{static_cast<std::uint32_t>(rank), new_id});
  }

  for (int byte = 0; byte < 256; ++byte) {
    static const char* hex = "0123456789ABCDEF";
    const char name[7] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>', 0};
    bpe->byte_ids_[static_cast<std::size_t>(byte)] = bpe->vocab_.find(name);
  }
  if (bpe->config_.unk_token) bpe->unk_id_ = bpe->vocab_.find(*bpe->config_.unk_token);
  if (prefix.empty() && bpe->config_.end_of_word_suffix.empty()) {
    // Single characters below U+0800 (all of the byte-level alphabet) resolve without hashing.
    bpe->small_char_ids_.assign(0x800, -1);
    std::string s;
    for (char32_t c = 0; c < 0x800; ++c) {
      s.clear();
      append_utf8(s, c);
      bpe->small_char_ids_[c] = bpe->vocab_.find(s);
    }
  }
  return bpe;
}

std::optional<std::string_view> Bpe::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || tokens_[static_cast<std::size_t>(id)].second < 0) {
    return std::nullopt;
  }
  const auto& [offset, length] = tokens_[static_cast<std::size_t>(id)];
  return std::string_view(token_arena_).substr(offset, static_cast<std::size_t>(length));
}

std::int32_t Bpe::char_id(std::string_view word, std::size_t pos, std::size_t len, bool first, bool last,
                          std::string& scratch) const {
  if (!small_char_ids_.empty()) {
    if (len <= 2) {
      std::size_t n = 0;
      return small_char_ids_[decode_at(word, pos, &n)];
    }
    return vocab_.find(word.substr(pos, len));
  }
  scratch.clear();
  if (!first) scratch += config_.continuing_subword_prefix;
  scratch.append(word, pos, len);
  if (last) scratch += config_.end_of_word_suffix;
  return vocab_.find(scratch);
}

Status Bpe::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return Status::success();
  if (config_.ignore_merges) {
    // ignore_merges: a pre-token that is itself a token is emitted whole, whatever the merges say.
    const std::int32_t id = vocab_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return Status::success();
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::unique_lock lock(cache_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      const auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return Status::success();
      }
    }
  }
  const std::size_t before = out.size();
  D0_RETURN_IF_ERROR(merge_word(word, out));
  if (cacheable) {
    std::unique_lock lock(cache_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      if (cache_.size() >= kCacheCapacity) cache_.clear();
      cache_.emplace(std::string(word),
                     std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(before), out.end()));
    }
  }
  return Status::success();
}

Status Bpe::merge_word(std::string_view word, std::vector<std::int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::string scratch;
  symbols.clear();
  const auto add = [&](std::int32_t id, std::size_t len) {
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, index + 1, static_cast<std::uint32_t>(len)});
  };
  // Pending unknown run (id, bytes), as the reference's merge_word keeps it for fuse_unk.
  std::int32_t unk_id = -1;
  std::size_t unk_len = 0;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t len = utf8_len(static_cast<unsigned char>(word[i]));
    const bool last = i + len >= word.size();
    const std::int32_t id = char_id(word, i, len, i == 0, last, scratch);
    if (id >= 0) {
      if (unk_id >= 0) add(unk_id, unk_len), unk_id = -1;
      add(id, len);
      i += len;
      continue;
    }
    if (config_.byte_fallback) {
      // Every byte of the (affixed) character must have its <0xNN> token, else fall through to unk.
      const std::string_view s = small_char_ids_.empty() ? std::string_view(scratch) : word.substr(i, len);
      bool all = true;
      for (const char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // As in the reference, a pending unk is not flushed here: it lands after these bytes.
        for (const char c : s) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        i += len;
        continue;
      }
    }
    if (config_.unk_token) {
      if (unk_id_ < 0) return make_error("unk_token \"" + *config_.unk_token + "\" is not in the vocabulary");
      if (unk_id >= 0 && config_.fuse_unk) {
        unk_len += len;
      } else {
        if (unk_id >= 0) add(unk_id, unk_len);
        unk_id = unk_id_;
        unk_len = len;
      }
    }
    // Without unk_token or byte_fallback the reference drops the character.
    i += len;
  }
  if (unk_id >= 0) add(unk_id, unk_len);
  if (symbols.empty()) return Status::success();
  symbols.back().next = -1;
  merge_symbols(symbols);
  for (const Symbol& s : symbols) {
    if (s.len != 0) out.push_back(s.id);
  }
  if (symbols.capacity() > kKeepScratchSymbols) std::vector<Symbol>().swap(symbols);  // after a huge word
  return Status::success();
}

void Bpe::merge_symbols(std::vector<Symbol>& symbols) const {
  const std::size_t n = symbols.size();
  if (n < 2) return;
  if (n <= kSmallWordSymbols) {
    // Linear scan for the lowest-rank adjacent pair, leftmost on ties (what the reference's heap
    // pops first); ranks are cached per left symbol and refreshed only around each merge.
    thread_local std::vector<PairMap::Value> best;
    best.assign(n, PairMap::Value{UINT32_MAX, -1});
    const auto refresh = [&](std::int32_t pos) {
      const Symbol& s = symbols[static_cast<std::size_t>(pos)];
      const PairMap::Value* m =
          s.next >= 0 ? merges_.find(s.id, symbols[static_cast<std::size_t>(s.next)].id) : nullptr;
      best[static_cast<std::size_t>(pos)] = m ? *m : PairMap::Value{UINT32_MAX, -1};
    };
    for (std::size_t i = 0; i + 1 < n; ++i) refresh(static_cast<std::int32_t>(i));
    for (;;) {
      std::int32_t pos = -1;
      std::uint32_t rank = UINT32_MAX;
      for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
        if (best[static_cast<std::size_t>(i)].rank < rank) rank = best[static_cast<std::size_t>(i)].rank, pos = i;
      }
      if (pos < 0) break;
      Symbol& left = symbols[static_cast<std::size_t>(pos)];
      Symbol& right = symbols[static_cast<std::size_t>(left.next)];
      left.id = best[static_cast<std::size_t>(pos)].id;
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = pos;
      refresh(pos);
      if (left.prev >= 0) refresh(left.prev);
    }
    return;
  }

  // Long words: the reference's binary heap of candidate merges, with stale entries skipped.
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos, id;
  };
  const auto worse = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;  // min-heap on (rank, pos)
  };
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [&](std::int32_t pos) {
    const Symbol& s = symbols[static_cast<std::size_t>(pos)];
    if (s.next < 0) return;
    if (const PairMap::Value* m = merges_.find(s.id, symbols[static_cast<std::size_t>(s.next)].id)) {
      heap.push_back(Candidate{m->rank, pos, m->id});
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) push(static_cast<std::int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), worse);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const PairMap::Value* m = merges_.find(left.id, right.id);
    if (!m || m->id != top.id) continue;  // stale: a neighbour changed since this entry was pushed
    left.id = top.id;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  if (heap.capacity() > kKeepScratchSymbols) std::vector<Candidate>().swap(heap);
}

}  // namespace day0::tok
