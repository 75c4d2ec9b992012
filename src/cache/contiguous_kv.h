// Single-sequence KV cache: per attention layer, contiguous f32 K and V rows reserved up front.
// The simple reference layout; the paged pool (block tables, prefix sharing) is tested against it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

class ContiguousKvCache {
 public:
  // One entry per layer: its K/V row width (kv_heads * head_dim), 0 for layers without KV.
  ContiguousKvCache(const std::vector<std::int64_t>& row_widths, std::int64_t max_tokens);

  std::int64_t max_tokens() const { return max_tokens_; }
  std::int64_t length() const { return length_; }
  // Writes k, v [n, width] at rows [length, length + n) of `layer`; commit() advances length once per step.
  Status write(int layer, const Tensor& k, const Tensor& v);
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
