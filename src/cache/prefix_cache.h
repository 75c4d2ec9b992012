// PrefixCache: content-addressed FULL blocks, chained — a block's key is hash(parent key, its token ids) — so a new
// sequence whose prompt starts with a cached prefix reuses those blocks. Unreferenced cached blocks wait in an LRU
// list and are evicted only when the pool's free list is empty. Holds no reference counts (see README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"

namespace day0 {

using TokenId = std::int32_t;
using BlockHash = std::uint64_t;
// hash(parent block's hash, this block's token ids). Injectable so that tests can force collisions.
using BlockHasher = std::function<BlockHash(BlockHash parent, std::span<const TokenId> tokens)>;
BlockHash default_block_hash(BlockHash parent, std::span<const TokenId> tokens);

// Counters for /metrics. hit_rate = reused tokens / prompt tokens looked up.
struct PrefixCacheStats {
  std::int64_t prompt_tokens = 0;  // tokens of prompts that were looked up
  std::int64_t hit_tokens = 0;     // of those, tokens served from cached blocks
  std::int64_t hit_blocks = 0;
  std::int64_t miss_blocks = 0;  // the first lookup that failed per prompt, if any
  std::int64_t evictions = 0;
  std::int64_t collisions = 0;  // a hash matched but the stored content did not
  double hit_rate() const { return prompt_tokens > 0 ? static_cast<double>(hit_tokens) / prompt_tokens : 0.0; }
};

class PrefixCache {
 public:
  // Identity of a block's content *with its whole prefix*: the chain hash plus the serial number of the cache entry
  // that holds it. Serials are never reused, so a child entry matches only under the very parent entry it was
  // registered under — a collision anywhere up the chain cannot splice foreign blocks into a prefix.
  struct Link {
    BlockHash hash = 0;
    std::uint64_t serial = 0;
  };
  // The (empty) prefix before the first block.
  static Link root() { return Link{}; }
  struct Match {
    BlockId block = -1;
    Link link;
  };

  PrefixCache(std::int32_t n_blocks, std::int64_t block_size, BlockHasher hasher = default_block_hash);

  // The cached block holding `tokens` (block_size of them) right after the prefix `parent`, verified against the
  // stored token ids and parent serial; nullopt on a miss or a collision.
  std::optional<Match> lookup(const Link& parent, std::span<const TokenId> tokens);
  // Registers a full, computed `block` as holding `tokens` after `parent`. Returns the Link of that content: the new
  // entry's, or an existing identical entry's (the block then stays unregistered: a private duplicate). nullopt when
  // a different content owns the hash: the chain is broken and later blocks of that sequence are not registered.
  std::optional<Link> insert(const Link& parent, std::span<const TokenId> tokens, BlockId block);

  bool is_cached(BlockId id) const { return entries_[static_cast<std::size_t>(id)].cached; }
  // A cached block's ref count reached 0: it becomes evictable, most recently used.
  void park(BlockId id);
  // A parked block is reused by a hit: no longer evictable.
  void unpark(BlockId id);
  bool is_parked(BlockId id) const { return entries_[static_cast<std::size_t>(id)].parked; }
  // Drops the least recently used parked block from the cache and returns it (ref count 0, on no list).
  std::optional<BlockId> evict_lru();

  std::int32_t n_evictable() const { return n_parked_; }
  std::int32_t n_cached() const { return static_cast<std::int32_t>(by_hash_.size()); }
  // Parked blocks, least recently used first (for tests and dumps).
  std::vector<BlockId> lru_order() const;

  PrefixCacheStats& stats() { return stats_; }
  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    bool cached = false;
    bool parked = false;
    BlockHash hash = 0;
    std::uint64_t parent_serial = 0;
    std::uint64_t serial = 0;
    std::vector<TokenId> tokens;   // capacity block_size, reserved up front
    BlockId prev = -1, next = -1;  // intrusive LRU list: no allocation when blocks park and unpark
  };
  bool matches(const Entry& e, const Link& parent, std::span<const TokenId> tokens) const;
  void unlink(BlockId id);

  std::int64_t block_size_;
  BlockHasher hasher_;
  std::vector<Entry> entries_;  // indexed by block id
  std::unordered_map<BlockHash, BlockId> by_hash_;
  BlockId lru_head_ = -1, lru_tail_ = -1;  // head = least recently used
  std::int32_t n_parked_ = 0;
  std::uint64_t next_serial_ = 1;  // 0 is the root
  PrefixCacheStats stats_;
};

}  // namespace day0
