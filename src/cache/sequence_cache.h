// SequenceCache: per-sequence block tables over a BlockPool, with prefix reuse through a PrefixCache, and one
// recurrent-state slot per sequence for linear-attention layers. Bookkeeping only (device-agnostic): the byte
// movements it decides (copy-on-write, state copies and resets) are handed out as CacheOps for the executor.
// Contract: src/cache/README.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache/block_pool.h"
#include "cache/prefix_cache.h"
#include "cache/recurrent_state.h"
#include "core/status.h"

namespace day0 {

using SeqId = std::int64_t;

struct SequenceCacheConfig {
  std::int32_t n_blocks = 0;  // from kv_blocks_for_budget; 0 for models without KV layers
  std::int64_t block_size = 16;
  bool prefix_caching = true;      // forced off while n_state_slots > 0 (no state snapshots yet, see README)
  std::int32_t n_state_slots = 0;  // max running sequences if the model has linear-attention layers, else 0
  BlockHasher hasher = default_block_hash;
};

// Byte movements decided by the bookkeeping; apply them (in order) before the next forward pass.
struct CacheOps {
  std::vector<BlockCopy> block_copies;  // KvBlockStorage::apply
  std::vector<SlotCopy> state_copies;   // RecurrentStateStorage::apply
  std::vector<StateSlot> state_resets;  // RecurrentStateStorage::reset
  bool empty() const { return block_copies.empty() && state_copies.empty() && state_resets.empty(); }
};

// Where token position `pos` of a sequence lives: slot = block * block_size + offset.
struct KvSlot {
  BlockId block = -1;
  std::int64_t offset = 0;
};

class SequenceCache {
 public:
  explicit SequenceCache(SequenceCacheConfig config);

  // Admits a sequence: reuses cached full blocks of the prompt's prefix, allocates the rest. Returns the number of
  // tokens already computed (the prefix hit, a multiple of block_size, always < prompt size so that at least one
  // token is computed and yields logits). Out of blocks or slots: an error and no change (the scheduler waits or
  // preempts). An empty prompt or a known id is an error.
  Result<std::int64_t> allocate(SeqId seq, std::span<const TokenId> prompt);
  // Appends token ids (a sampled token, or more prompt): allocates blocks when the last fills, copy-on-write when
  // the partial last block is shared (after a fork). Out of blocks: an error and no change.
  Status append(SeqId seq, std::span<const TokenId> tokens);
  // Room for the K/V of n tokens not yet known (a step queued before its tokens are read back): the blocks, and the
  // copy-on-write, that appending them would take, taken now; appending them later takes none. Out of blocks: an
  // error and no change.
  Status reserve(SeqId seq, std::int64_t n_tokens);
  // K/V of the first n_computed tokens are now written: full blocks among them enter the prefix cache.
  Status mark_computed(SeqId seq, std::int64_t n_computed);
  // A child sharing every block of a fully computed parent (n > 1 sampling); its state slot is a copy.
  Status fork(SeqId parent, SeqId child);
  // Releases every block (cached ones become evictable) and the state slot. Finished, aborted or preempted.
  Status free(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  std::int64_t n_tokens(SeqId seq) const;
  std::int64_t n_computed(SeqId seq) const;  // tokens whose K/V are written (includes the prefix hit)
  std::span<const BlockId> block_table(SeqId seq) const;
  std::span<const TokenId> tokens(SeqId seq) const;
  std::optional<StateSlot> state_slot(SeqId seq) const;
  KvSlot slot_of(SeqId seq, std::int64_t pos) const;
  // Flat slot indices of positions [begin, end) (the slot mapping a KV-write kernel takes); appended to `out`.
  void slots(SeqId seq, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& out) const;

  // Would these fit right now (free + evictable blocks)? For the scheduler's admission and preemption decisions.
  std::int32_t blocks_needed_to_allocate(std::span<const TokenId> prompt);
  std::int32_t blocks_needed_to_append(SeqId seq, std::int64_t n_tokens) const;

  CacheOps take_ops();

  std::int64_t block_size() const { return block_size_; }
  std::int32_t n_blocks() const { return pool_.n_blocks(); }
  std::int32_t n_free_blocks() const { return pool_.n_free(); }
  std::int32_t n_evictable_blocks() const { return prefix_.n_evictable(); }
  std::int32_t n_used_blocks() const { return n_blocks() - n_free_blocks() - n_evictable_blocks(); }
  std::int32_t n_available_blocks() const { return n_free_blocks() + n_evictable_blocks(); }
  std::int32_t n_free_state_slots() const { return slots_.n_free(); }
  bool prefix_caching() const { return prefix_caching_; }
  const BlockPool& pool() const { return pool_; }
  const PrefixCache& prefix_cache() const { return prefix_; }
  const PrefixCacheStats& stats() const { return prefix_.stats(); }

  // Checks every invariant of README.md (ref counts = table references, block states partition the pool, ...).
  // O(blocks + tokens): for tests and debug checks, not the hot path.
  Status audit() const;

 private:
  struct Sequence {
    std::vector<BlockId> table;
    std::vector<TokenId> tokens;
    std::int64_t n_computed = 0;
    std::int64_t reserved = 0;               // tokens of room past `tokens` that reserve() took
    std::int32_t n_hashed_blocks = 0;        // full computed blocks already offered to the prefix cache
    std::optional<PrefixCache::Link> chain;  // link of the last hashed block; nullopt: chain broken
    std::optional<StateSlot> state_slot;
  };
  // Matches the prompt's prefix without changing anything: the blocks and the link after them.
  std::vector<BlockId> match_prefix(std::span<const TokenId> prompt, PrefixCache::Link& link);
  // Blocks for n_tokens in s's table (append's and reserve's): a private copy of a shared partial last block
  // first (copy-on-write), then new blocks. The caller has checked that enough are available.
  void make_room(Sequence& s, std::int64_t n_tokens);
  std::optional<BlockId> allocate_block();
  void release_block(BlockId id);
  const Sequence* find(SeqId seq) const;
  Sequence* find(SeqId seq);

  std::int64_t block_size_;
  bool prefix_caching_;
  BlockPool pool_;
  PrefixCache prefix_;
  StateSlotPool slots_;
  std::unordered_map<SeqId, Sequence> seqs_;
  CacheOps ops_;
};

}  // namespace day0
