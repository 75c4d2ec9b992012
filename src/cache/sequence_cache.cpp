// SequenceCache: block tables, prefix reuse, copy-on-write, forks, state slots, and the invariant audit.
#include "cache/sequence_cache.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace day0 {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::string seq_name(SeqId seq) { return "sequence " + std::to_string(seq); }
}  // namespace

SequenceCache::SequenceCache(SequenceCacheConfig config)
    : block_size_(std::max<std::int64_t>(config.block_size, 1)),
      prefix_caching_(config.prefix_caching && config.n_state_slots == 0),
      pool_(config.n_blocks),
      prefix_(config.n_blocks, block_size_, std::move(config.hasher)),
      slots_(config.n_state_slots) {}

const SequenceCache::Sequence* SequenceCache::find(SeqId seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}
SequenceCache::Sequence* SequenceCache::find(SeqId seq) {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

std::optional<BlockId> SequenceCache::allocate_block() {
  if (auto id = pool_.allocate()) return id;
  if (auto id = prefix_.evict_lru()) {
    pool_.acquire(*id);  // 0 -> 1: the evicted block is on no list
    return id;
  }
  return std::nullopt;
}

void SequenceCache::release_block(BlockId id) {
  if (pool_.release(id) > 0) return;
  if (prefix_.is_cached(id))
    prefix_.park(id);
  else
    pool_.push_free(id);
}

std::vector<BlockId> SequenceCache::match_prefix(std::span<const TokenId> prompt, PrefixCache::Link& link) {
  std::vector<BlockId> hits;
  link = PrefixCache::root();
  if (!prefix_caching_ || prompt.empty()) return hits;
  // The last prompt token is always computed (its logits start decoding), so only blocks before it can be hits.
  const std::int64_t matchable = (static_cast<std::int64_t>(prompt.size()) - 1) / block_size_;
  for (std::int64_t i = 0; i < matchable; ++i) {
    const auto m = prefix_.lookup(
        link, prompt.subspan(static_cast<std::size_t>(i * block_size_), static_cast<std::size_t>(block_size_)));
    if (!m) break;
    hits.push_back(m->block);
    link = m->link;
  }
  return hits;
}

std::int32_t SequenceCache::blocks_needed_to_allocate(std::span<const TokenId> prompt) {
  PrefixCache::Link link;
  const std::vector<BlockId> hits = match_prefix(prompt, link);
  std::int64_t needed =
      ceil_div(static_cast<std::int64_t>(prompt.size()), block_size_) - static_cast<std::int64_t>(hits.size());
  // Reviving a parked hit takes it out of the evictable count.
  for (BlockId b : hits) needed += prefix_.is_parked(b) ? 1 : 0;
  return static_cast<std::int32_t>(needed);
}

Result<std::int64_t> SequenceCache::allocate(SeqId seq, std::span<const TokenId> prompt) {
  if (prompt.empty()) return make_error("kv cache: " + seq_name(seq) + " has an empty prompt");
  if (contains(seq)) return make_error("kv cache: " + seq_name(seq) + " is already allocated");
  PrefixCache::Link link;
  const std::vector<BlockId> hits = match_prefix(prompt, link);
  const std::int64_t n_table = ceil_div(static_cast<std::int64_t>(prompt.size()), block_size_);
  std::int64_t n_parked_hits = 0;
  for (BlockId b : hits) n_parked_hits += prefix_.is_parked(b) ? 1 : 0;
  const std::int64_t n_new = n_table - static_cast<std::int64_t>(hits.size());
  if (n_new + n_parked_hits > n_available_blocks())
    return make_error("kv cache: " + seq_name(seq) + " needs " + std::to_string(n_new) + " new blocks (+" +
                      std::to_string(n_parked_hits) + " revived), " + std::to_string(n_free_blocks()) + " free and " +
                      std::to_string(n_evictable_blocks()) + " evictable");
  if (slots_.n_slots() > 0 && slots_.n_free() == 0)
    return make_error("kv cache: no recurrent-state slot free for " + seq_name(seq) + " (all " +
                      std::to_string(slots_.n_slots()) + " in use)");

  Sequence s;
  s.table.reserve(static_cast<std::size_t>(n_table));
  for (BlockId b : hits) {
    if (prefix_.is_parked(b)) prefix_.unpark(b);
    pool_.acquire(b);
    s.table.push_back(b);
  }
  for (std::int64_t i = 0; i < n_new; ++i) {
    const auto b = allocate_block();
    assert(b && "availability checked above");
    s.table.push_back(*b);
  }
  s.tokens.assign(prompt.begin(), prompt.end());
  s.n_computed = static_cast<std::int64_t>(hits.size()) * block_size_;
  s.n_hashed_blocks = static_cast<std::int32_t>(hits.size());
  s.chain = link;
  if (slots_.n_slots() > 0) {
    s.state_slot = slots_.allocate();
    ops_.state_resets.push_back(*s.state_slot);
  }
  if (prefix_caching_) {
    PrefixCacheStats& st = prefix_.stats();
    st.prompt_tokens += static_cast<std::int64_t>(prompt.size());
    st.hit_tokens += s.n_computed;
    st.hit_blocks += static_cast<std::int64_t>(hits.size());
    st.miss_blocks +=
        static_cast<std::int64_t>(hits.size()) < (static_cast<std::int64_t>(prompt.size()) - 1) / block_size_;
  }
  const std::int64_t n_hit = s.n_computed;
  seqs_.emplace(seq, std::move(s));
  return n_hit;
}

std::int32_t SequenceCache::blocks_needed_to_append(SeqId seq, std::int64_t n_tokens) const {
  const Sequence* s = find(seq);
  if (s == nullptr || n_tokens <= 0) return 0;
  const std::int64_t len = static_cast<std::int64_t>(s->tokens.size());
  std::int64_t needed = ceil_div(len + n_tokens, block_size_) - static_cast<std::int64_t>(s->table.size());
  if (len % block_size_ != 0 && pool_.ref_count(s->table.back()) > 1) ++needed;  // copy-on-write
  return static_cast<std::int32_t>(std::max<std::int64_t>(needed, 0));  // reserved room: none
}

Status SequenceCache::reserve(SeqId seq, std::int64_t n_tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return make_error("kv cache: reserve for unknown " + seq_name(seq));
  if (n_tokens <= s->reserved) return Status::success();
  const std::int32_t needed = blocks_needed_to_append(seq, n_tokens);
  if (needed > n_available_blocks())
    return make_error("kv cache: room for " + std::to_string(n_tokens) + " tokens in " + seq_name(seq) + " needs " +
                      std::to_string(needed) + " blocks, " + std::to_string(n_available_blocks()) + " available");
  make_room(*s, static_cast<std::int64_t>(s->tokens.size()) + n_tokens);
  s->reserved = n_tokens;
  return Status::success();
}

void SequenceCache::make_room(Sequence& s, std::int64_t n_tokens) {
  const std::int64_t len = static_cast<std::int64_t>(s.tokens.size());
  if (len % block_size_ != 0 && pool_.ref_count(s.table.back()) > 1) {
    // The partial last block is shared (fork): this sequence takes a private copy of its filled rows.
    const BlockId shared = s.table.back();
    const auto fresh = allocate_block();
    assert(fresh);
    ops_.block_copies.push_back(BlockCopy{shared, *fresh, len % block_size_});
    release_block(shared);  // stays referenced by the other holder(s)
    s.table.back() = *fresh;
  }
  while (static_cast<std::int64_t>(s.table.size()) < ceil_div(n_tokens, block_size_)) {
    const auto b = allocate_block();
    assert(b);
    s.table.push_back(*b);
  }
}

Status SequenceCache::append(SeqId seq, std::span<const TokenId> tokens) {
  Sequence* s = find(seq);
  if (s == nullptr) return make_error("kv cache: append to unknown " + seq_name(seq));
  if (tokens.empty()) return Status::success();
  const std::int32_t needed = blocks_needed_to_append(seq, static_cast<std::int64_t>(tokens.size()));
  if (needed > n_available_blocks())
    return make_error("kv cache: appending " + std::to_string(tokens.size()) + " tokens to " + seq_name(seq) +
                      " needs " + std::to_string(needed) + " blocks, " + std::to_string(n_available_blocks()) +
                      " available");
  make_room(*s, static_cast<std::int64_t>(s->tokens.size() + tokens.size()));
  s->tokens.insert(s->tokens.end(), tokens.begin(), tokens.end());
  s->reserved = std::max<std::int64_t>(s->reserved - static_cast<std::int64_t>(tokens.size()), 0);
  return Status::success();
}

Status SequenceCache::mark_computed(SeqId seq, std::int64_t n_computed) {
  Sequence* s = find(seq);
  if (s == nullptr) return make_error("kv cache: mark_computed on unknown " + seq_name(seq));
  const std::int64_t len = static_cast<std::int64_t>(s->tokens.size());
  if (n_computed < s->n_computed || n_computed > len)
    return make_error("kv cache: " + seq_name(seq) + " cannot have " + std::to_string(n_computed) +
                      " computed tokens (had " + std::to_string(s->n_computed) + ", holds " + std::to_string(len) +
                      ")");
  s->n_computed = n_computed;
  if (!prefix_caching_) return Status::success();
  const std::int64_t n_full = n_computed / block_size_;
  for (; s->n_hashed_blocks < n_full; ++s->n_hashed_blocks) {
    if (!s->chain) continue;  // broken by a collision: later blocks are not registrable
    const std::size_t first = static_cast<std::size_t>(s->n_hashed_blocks) * static_cast<std::size_t>(block_size_);
    s->chain = prefix_.insert(*s->chain, std::span<const TokenId>(s->tokens).subspan(first, block_size_),
                              s->table[static_cast<std::size_t>(s->n_hashed_blocks)]);
  }
  return Status::success();
}

Status SequenceCache::fork(SeqId parent, SeqId child) {
  const Sequence* p = find(parent);
  if (p == nullptr) return make_error("kv cache: fork of unknown " + seq_name(parent));
  if (contains(child)) return make_error("kv cache: fork target " + seq_name(child) + " already exists");
  if (p->reserved > 0) return make_error("kv cache: fork of " + seq_name(parent) + " while it holds reserved room");
  if (p->n_computed != static_cast<std::int64_t>(p->tokens.size()))
    return make_error("kv cache: fork of " + seq_name(parent) + " before its " +
                      std::to_string(p->tokens.size() - static_cast<std::size_t>(p->n_computed)) +
                      " pending tokens are computed");
  Sequence c = *p;
  if (slots_.n_slots() > 0) {
    c.state_slot = slots_.allocate();
    if (!c.state_slot) return make_error("kv cache: no recurrent-state slot free to fork " + seq_name(parent));
    ops_.state_copies.push_back(SlotCopy{*p->state_slot, *c.state_slot});
  }
  for (BlockId b : c.table) pool_.acquire(b);
  seqs_.emplace(child, std::move(c));
  return Status::success();
}

Status SequenceCache::free(SeqId seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: free of unknown " + seq_name(seq));
  // Tail first: the tail of a prefix is the least likely to be shared, so it is parked first and evicted first.
  for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b) release_block(*b);
  if (it->second.state_slot) slots_.free(*it->second.state_slot);
  seqs_.erase(it);
  return Status::success();
}

std::int64_t SequenceCache::n_tokens(SeqId seq) const {
  const Sequence* s = find(seq);
  return s ? static_cast<std::int64_t>(s->tokens.size()) : 0;
}
std::int64_t SequenceCache::n_computed(SeqId seq) const {
  const Sequence* s = find(seq);
  return s ? s->n_computed : 0;
}
std::span<const BlockId> SequenceCache::block_table(SeqId seq) const {
  const Sequence* s = find(seq);
  return s ? std::span<const BlockId>(s->table) : std::span<const BlockId>();
}
std::span<const TokenId> SequenceCache::tokens(SeqId seq) const {
  const Sequence* s = find(seq);
  return s ? std::span<const TokenId>(s->tokens) : std::span<const TokenId>();
}
std::optional<StateSlot> SequenceCache::state_slot(SeqId seq) const {
  const Sequence* s = find(seq);
  return s ? s->state_slot : std::nullopt;
}

KvSlot SequenceCache::slot_of(SeqId seq, std::int64_t pos) const {
  const Sequence* s = find(seq);
  assert(s && pos >= 0 && pos < static_cast<std::int64_t>(s->table.size()) * block_size_);
  return KvSlot{s->table[static_cast<std::size_t>(pos / block_size_)], pos % block_size_};
}

void SequenceCache::slots(SeqId seq, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& out) const {
  for (std::int64_t p = begin; p < end; ++p) {
    const KvSlot k = slot_of(seq, p);
    out.push_back(static_cast<std::int64_t>(k.block) * block_size_ + k.offset);
  }
}

CacheOps SequenceCache::take_ops() {
  CacheOps out;
  std::swap(out, ops_);
  return out;
}

Status SequenceCache::audit() const {
  const std::int32_t n = pool_.n_blocks();
  std::vector<std::int32_t> refs(static_cast<std::size_t>(n), 0);
  for (const auto& [id, s] : seqs_) {
    const std::int64_t len = static_cast<std::int64_t>(s.tokens.size());
    if (static_cast<std::int64_t>(s.table.size()) != ceil_div(len + s.reserved, block_size_))
      return make_error("audit: " + seq_name(id) + " holds " + std::to_string(len) + " tokens and room for " +
                        std::to_string(s.reserved) + " more in " + std::to_string(s.table.size()) + " blocks");
    if (s.n_computed < 0 || s.n_computed > len) return make_error("audit: " + seq_name(id) + " computed count");
    for (std::size_t i = 0; i < s.table.size(); ++i) {
      const BlockId b = s.table[i];
      if (!pool_.valid(b)) return make_error("audit: " + seq_name(id) + " holds invalid block " + std::to_string(b));
      ++refs[static_cast<std::size_t>(b)];
      // Only full, computed blocks are ever cached: blocks still being written are private to their writers.
      if (prefix_.is_cached(b) && static_cast<std::int64_t>(i + 1) * block_size_ > s.n_computed)
        return make_error("audit: " + seq_name(id) + " block " + std::to_string(i) + " is cached but not computed");
    }
    if (slots_.n_slots() > 0 && (!s.state_slot || !slots_.in_use(*s.state_slot)))
      return make_error("audit: " + seq_name(id) + " has no state slot in use");
  }
  std::int32_t n_free = 0, n_parked = 0, n_used = 0;
  for (BlockId b = 0; b < n; ++b) {
    const std::int32_t rc = pool_.ref_count(b);
    if (rc != refs[static_cast<std::size_t>(b)])
      return make_error("audit: block " + std::to_string(b) + " has ref count " + std::to_string(rc) + " but " +
                        std::to_string(refs[static_cast<std::size_t>(b)]) + " table references");
    const bool free = pool_.is_free(b), parked = prefix_.is_parked(b), cached = prefix_.is_cached(b);
    if (free + parked + (rc > 0) != 1)
      return make_error("audit: block " + std::to_string(b) + " is in " + std::to_string(free + parked + (rc > 0)) +
                        " states (free " + std::to_string(free) + ", parked " + std::to_string(parked) + ", ref " +
                        std::to_string(rc) + ")");
    if (parked && !cached) return make_error("audit: block " + std::to_string(b) + " parked but not cached");
    if (free && cached) return make_error("audit: block " + std::to_string(b) + " free but still cached");
    n_free += free;
    n_parked += parked;
    n_used += rc > 0;
  }
  if (n_free != pool_.n_free() || n_parked != prefix_.n_evictable() || n_free + n_parked + n_used != n)
    return make_error("audit: free " + std::to_string(n_free) + " + used " + std::to_string(n_used) + " + evictable " +
                      std::to_string(n_parked) + " != " + std::to_string(n) + " blocks");
  // Every registered block sits at its hash, and no two blocks claim one hash.
  std::int32_t n_cached = 0;
  for (BlockId b = 0; b < n; ++b) n_cached += prefix_.is_cached(b);
  if (n_cached != prefix_.n_cached())
    return make_error("audit: " + std::to_string(n_cached) + " cached blocks but " +
                      std::to_string(prefix_.n_cached()) + " hash entries");
  std::int32_t slots_used = 0;
  for (StateSlot i = 0; i < slots_.n_slots(); ++i) slots_used += slots_.in_use(i);
  if (slots_.n_slots() > 0 && slots_used != static_cast<std::int32_t>(seqs_.size()))
    return make_error("audit: " + std::to_string(slots_used) + " state slots in use for " +
                      std::to_string(seqs_.size()) + " sequences");
  return Status::success();
}

}  // namespace day0
