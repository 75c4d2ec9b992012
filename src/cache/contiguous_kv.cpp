// ContiguousKvCache.
#include "cache/contiguous_kv.h"

#include <cstring>
#include <string>

namespace day0 {

ContiguousKvCache::ContiguousKvCache(const std::vector<std::int64_t>& row_widths, std::int64_t max_tokens)
    : max_tokens_(max_tokens) {
  for (std::int64_t w : row_widths) {
    k_.push_back(Tensor::zeros({w > 0 ? max_tokens : 0, w}, DType::f32));
    v_.push_back(Tensor::zeros({w > 0 ? max_tokens : 0, w}, DType::f32));
  }
}

Status ContiguousKvCache::write(int layer, const Tensor& k, const Tensor& v) {
  if (layer < 0 || layer >= static_cast<int>(k_.size())) return make_error("kv cache: no layer " + std::to_string(layer));
  const Tensor& K = k_[layer];
  const std::int64_t n = k.size(0), width = K.size(1);
  if (k.shape() != Shape{n, width} || v.shape() != k.shape() || k.dtype() != DType::f32 || v.dtype() != DType::f32)
    return make_error("kv cache: layer " + std::to_string(layer) + " expects f32 [n, " + std::to_string(width) + "]");
  if (length_ + n > max_tokens_)
    return make_error("kv cache: sequence of " + std::to_string(length_ + n) + " tokens exceeds the reserved " +
                      std::to_string(max_tokens_));
  std::memcpy(k_[layer].data<float>() + length_ * width, k.data<float>(), n * width * sizeof(float));
  std::memcpy(v_[layer].data<float>() + length_ * width, v.data<float>(), n * width * sizeof(float));
  return Status::success();
}

std::size_t ContiguousKvCache::bytes() const {
  std::size_t b = 0;
  for (size_t i = 0; i < k_.size(); ++i) b += k_[i].nbytes() + v_[i].nbytes();
  return b;
}

}  // namespace day0
