// BlockPool: the bookkeeping of the paged KV cache — a fixed set of block ids, a free list and reference counts.
// Device-agnostic (ids only; the bytes live in KvBlockStorage on the CPU or a CUDA pool); sized once, never grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace day0 {

using BlockId = std::int32_t;

// A copy-on-write order: copy rows [0, n_rows) of block src into block dst, in every layer.
struct BlockCopy {
  BlockId src = -1;
  BlockId dst = -1;
  std::int64_t n_rows = 0;
};

// Shape of the KV rows that one token occupies across layers.
struct KvLayout {
  std::vector<std::int64_t> row_widths;  // per layer: kv_heads * head_dim; 0 for layers without KV (linear attention)
  std::int64_t block_size = 16;          // tokens per block
  DType dtype = DType::f32;
};

// K and V bytes of one token across all layers: sum over layers of 2 * width * dtype bytes.
// Errors for a layout that cannot hold tokens (block_size < 1, negative widths, sub-byte dtypes, overflow).
Result<std::int64_t> kv_bytes_per_token(const KvLayout& layout);
// How many whole blocks a memory budget holds; an error if not even one (names the bytes needed per block).
Result<std::int32_t> kv_blocks_for_budget(const KvLayout& layout, std::size_t budget_bytes);
// Success where a pool of `blocks` fits `free_bytes`; else an error that says what the pool needs, what is left, how
// many tokens would fit, and what to lower: the context length where `context` > 0 (the pool is the one sequence of
// that many tokens it cannot go below), else the pool's size.
Status check_kv_pool_fits(const KvLayout& layout, std::int64_t blocks, std::size_t free_bytes, std::int64_t context);

// How a KV pool is sized against the memory a backend has left (KvPoolRequest), and what it came to.
enum class KvPoolFit {
  as_asked,  // pool_tokens, or an error where they do not fit
  shrink,    // pool_tokens, or the whole blocks that fit (at least one sequence)
  fill,      // every whole block that fits (at least one sequence): a server's pool
};
struct KvPoolRequest {
  std::int64_t max_tokens = 0;   // one sequence's longest length: the pool holds at least one such sequence
  std::int64_t pool_tokens = 0;  // slots asked for (at least max_tokens)
  std::int64_t pad_blocks = 0;   // blocks past the pool that its memory also holds (step graphs' padding rows)
  KvPoolFit fit = KvPoolFit::as_asked;
  std::int64_t reserve_bytes = 0;  // kept back for step scratch where the pool or max_tokens is fitted
  bool fit_max_tokens = false;     // max_tokens lowered where not even one such sequence fits
};
struct KvPoolSize {
  std::int64_t max_tokens = 0;  // as asked, or lowered (KvPoolRequest::fit_max_tokens)
  std::int64_t blocks = 0;      // the pool's blocks, pad blocks not counted
};
// The pool for `request` where `free_bytes` are left (unknown: as asked), or check_kv_pool_fits' error. A lowered
// max_tokens is whole blocks; an error where not one block fits.
Result<KvPoolSize> size_kv_pool(const KvLayout& layout, const KvPoolRequest& request,
                                std::optional<std::size_t> free_bytes);

class BlockPool {
 public:
  explicit BlockPool(std::int32_t n_blocks);

  std::int32_t n_blocks() const { return static_cast<std::int32_t>(ref_counts_.size()); }
  std::int32_t n_free() const { return static_cast<std::int32_t>(free_.size()); }

  // Pops a free block and gives it ref count 1; nullopt when the free list is empty (never throws).
  std::optional<BlockId> allocate();
  // One more holder of a block that is not on the free list (a shared prefix block, a fork, a cache revival).
  void acquire(BlockId id);
  // One holder fewer; returns the new count. At 0 the block is on no list: the caller either parks it in the
  // prefix cache (evictable) or returns it with push_free.
  std::int32_t release(BlockId id);
  // Returns an unreferenced block to the free list.
  void push_free(BlockId id);

  std::int32_t ref_count(BlockId id) const { return ref_counts_[static_cast<std::size_t>(id)]; }
  bool is_free(BlockId id) const { return on_free_list_[static_cast<std::size_t>(id)] != 0; }
  bool valid(BlockId id) const { return id >= 0 && id < n_blocks(); }

 private:
  std::vector<std::int32_t> ref_counts_;
  std::vector<std::uint8_t> on_free_list_;
  std::vector<BlockId> free_;  // a stack: the most recently freed block is reused first (warm in caches)
};

}  // namespace day0
