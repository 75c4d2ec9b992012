// KvBlockStorage: the bytes of the paged KV pool on the CPU — per layer one K and one V tensor
// [n_blocks, block_size, width]. Addressed by slot = block * block_size + offset, as a kernel would be.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/block_pool.h"
#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

class KvBlockStorage {
 public:
  // Reserves n_blocks blocks for every layer of `layout` (zero-filled). Errors on an invalid layout.
  static Result<KvBlockStorage> create(const KvLayout& layout, std::int32_t n_blocks);

  const KvLayout& layout() const { return layout_; }
  std::int32_t n_blocks() const { return n_blocks_; }
  int n_layers() const { return static_cast<int>(k_.size()); }
  // The whole pool of one layer: [n_blocks, block_size, width] (width 0 for layers without KV).
  const Tensor& keys(int layer) const { return k_[static_cast<std::size_t>(layer)]; }
  const Tensor& values(int layer) const { return v_[static_cast<std::size_t>(layer)]; }

  // Scatters rows k, v [n, width] of `layer` to slots[i] (vLLM's reshape_and_cache). slots.size() must be n.
  Status write(int layer, std::span<const std::int64_t> slots, const Tensor& k, const Tensor& v);
  // Gathers the first n_rows token rows of a block table into contiguous K and V [n_rows, width].
  Status gather(int layer, std::span<const BlockId> block_table, std::int64_t n_rows, Tensor& k_out,
                Tensor& v_out) const;
  // Applies copy-on-write orders from SequenceCache::take_block_copies, in order.
  Status apply(std::span<const BlockCopy> copies);

  std::size_t bytes() const;

 private:
  KvLayout layout_;
  std::int32_t n_blocks_ = 0;
  std::int64_t elem_bytes_ = 0;
  std::vector<Tensor> k_, v_;
};

}  // namespace day0
