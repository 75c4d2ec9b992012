// Single-sequence KV cache: per attention layer, contiguous f32 K and V rows reserved up front.
// The simple reference layout; the paged pool (block tables, prefix sharing) is tested against it.
// Storage may live on any device: the cache only does bookkeeping and hands out row views; write() copies
// on the CPU, other devices copy into slots() themselves.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

class ContiguousKvCache {
 public:
  // One entry per layer: its K/V row width (kv_heads * head_dim), 0 for layers without KV.
  ContiguousKvCache(const std::vector<std::int64_t>& row_widths, std::int64_t max_tokens);
  // Over storage someone allocated: keys[l], values[l] f32 [max_tokens, width_l] (width 0: no KV in layer l).
  ContiguousKvCache(std::vector<Tensor> keys, std::vector<Tensor> values, std::int64_t max_tokens);

  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t length() const { return length_; }
  // Writes k, v [n, width] at rows [length, length + n) of `layer`; commit() advances length once per step.
  Status write(int layer, const Tensor& k, const Tensor& v);
  // The K and V row views [length, length + n) of `layer` that the next step writes (any device).
  Result<std::pair<Tensor, Tensor>> slots(int layer, std::int64_t n) const;
  void commit(std::int64_t n) { length_ += n; }
  void clear() { length_ = 0; }
  // Views of rows [0, rows) of a layer's keys and values.
  Tensor keys(int layer, std::int64_t rows) const { return k_[layer].slice_rows(0, rows); }
  Tensor values(int layer, std::int64_t rows) const { return v_[layer].slice_rows(0, rows); }
  std::size_t bytes() const;

 private:
  std::vector<Tensor> k_, v_;
  std::int64_t max_tokens_ = 0;
  std::int64_t length_ = 0;
};

}  // namespace day0
