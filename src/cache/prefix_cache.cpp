// PrefixCache: chained content hashes, verified lookups, an intrusive LRU of unreferenced cached blocks.
#include "cache/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace day0 {

BlockHash default_block_hash(BlockHash parent, std::span<const TokenId> tokens) {
  // FNV-1a over the parent hash and the token ids, then a splitmix64 finaliser to spread the bits.
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t x) {
    for (int i = 0; i < 8; ++i) {
      h ^= (x >> (8 * i)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  };
  mix(parent);
  mix(tokens.size());
  for (TokenId t : tokens) mix(static_cast<std::uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

PrefixCache::PrefixCache(std::int32_t n_blocks, std::int64_t block_size, BlockHasher hasher)
    : block_size_(block_size), hasher_(std::move(hasher)), entries_(static_cast<std::size_t>(std::max(n_blocks, 0))) {
  for (Entry& e : entries_) e.tokens.reserve(static_cast<std::size_t>(block_size));
  by_hash_.reserve(entries_.size());
}

bool PrefixCache::matches(const Entry& e, const Link& parent, std::span<const TokenId> tokens) const {
  return e.cached && e.parent_serial == parent.serial &&
         std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end());
}

std::optional<PrefixCache::Match> PrefixCache::lookup(const Link& parent, std::span<const TokenId> tokens) {
  assert(static_cast<std::int64_t>(tokens.size()) == block_size_);
  const BlockHash h = hasher_(parent.hash, tokens);
  const auto it = by_hash_.find(h);
  if (it == by_hash_.end()) return std::nullopt;
  const Entry& e = entries_[static_cast<std::size_t>(it->second)];
  if (!matches(e, parent, tokens)) {
    ++stats_.collisions;
    return std::nullopt;
  }
  return Match{it->second, Link{h, e.serial}};
}

std::optional<PrefixCache::Link> PrefixCache::insert(const Link& parent, std::span<const TokenId> tokens,
                                                     BlockId block) {
  assert(static_cast<std::int64_t>(tokens.size()) == block_size_);
  const BlockHash h = hasher_(parent.hash, tokens);
  const auto it = by_hash_.find(h);
  if (it != by_hash_.end()) {
    const Entry& e = entries_[static_cast<std::size_t>(it->second)];
    if (matches(e, parent, tokens)) return Link{h, e.serial};
    ++stats_.collisions;
    return std::nullopt;
  }
  Entry& e = entries_[static_cast<std::size_t>(block)];
  assert(!e.cached && "a full block is registered once");
  e.cached = true;
  e.hash = h;
  e.parent_serial = parent.serial;
  e.serial = next_serial_++;
  e.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(h, block);
  return Link{h, e.serial};
}

void PrefixCache::park(BlockId id) {
  Entry& e = entries_[static_cast<std::size_t>(id)];
  assert(e.cached && !e.parked);
  e.parked = true;
  e.prev = lru_tail_;
  e.next = -1;
  if (lru_tail_ >= 0)
    entries_[static_cast<std::size_t>(lru_tail_)].next = id;
  else
    lru_head_ = id;
  lru_tail_ = id;
  ++n_parked_;
}

void PrefixCache::unlink(BlockId id) {
  Entry& e = entries_[static_cast<std::size_t>(id)];
  if (e.prev >= 0)
    entries_[static_cast<std::size_t>(e.prev)].next = e.next;
  else
    lru_head_ = e.next;
  if (e.next >= 0)
    entries_[static_cast<std::size_t>(e.next)].prev = e.prev;
  else
    lru_tail_ = e.prev;
  e.prev = e.next = -1;
  e.parked = false;
  --n_parked_;
}

void PrefixCache::unpark(BlockId id) {
  assert(entries_[static_cast<std::size_t>(id)].parked);
  unlink(id);
}

std::optional<BlockId> PrefixCache::evict_lru() {
  if (lru_head_ < 0) return std::nullopt;
  const BlockId id = lru_head_;
  unlink(id);
  Entry& e = entries_[static_cast<std::size_t>(id)];
  by_hash_.erase(e.hash);
  e.cached = false;
  e.tokens.clear();  // keeps its capacity
  ++stats_.evictions;
  return id;
}

std::vector<BlockId> PrefixCache::lru_order() const {
  std::vector<BlockId> out;
  for (BlockId id = lru_head_; id >= 0; id = entries_[static_cast<std::size_t>(id)].next) out.push_back(id);
  return out;
}

}  // namespace day0
