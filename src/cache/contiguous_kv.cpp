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

ContiguousKvCache::ContiguousKvCache(std::vector<Tensor> keys, std::vector<Tensor> values, std::int64_t max_tokens)
    : k_(std::move(keys)), v_(std::move(values)), max_tokens_(max_tokens) {}

Result<std::pair<Tensor, Tensor>> ContiguousKvCache::slots(int layer, std::int64_t n) const {
  if (layer < 0 || layer >= static_cast<int>(k_.size())) return make_error("kv cache: no layer " + std::to_string(layer));
  if (n < 0 || length_ + n > max_tokens_)
    return make_error("kv cache: sequence of " + std::to_string(length_ + n) + " tokens exceeds the reserved " +
                      std::to_string(max_tokens_));
  return std::pair{k_[layer].slice_rows(length_, length_ + n), v_[layer].slice_rows(length_, length_ + n)};
}

Status ContiguousKvCache::write(int layer, const Tensor& k, const Tensor& v) {
  D0_ASSIGN_OR_RETURN(auto dst, slots(layer, k.dim() == 2 ? k.size(0) : -1));
  auto& [K, V] = dst;
  if (k.shape() != K.shape() || v.shape() != k.shape() || k.dtype() != DType::f32 || v.dtype() != DType::f32)
    return make_error("kv cache: layer " + std::to_string(layer) + " expects f32 [n, " + std::to_string(K.size(1)) +
                      "], got " + shape_to_string(k.shape()));
  if (K.device() != Device::cpu || k.device() != Device::cpu || v.device() != Device::cpu)
    return make_error("kv cache: write() copies on the cpu; copy into slots() on other devices");
  std::memcpy(K.raw(), k.raw(), k.nbytes());
  std::memcpy(V.raw(), v.raw(), v.nbytes());
  return Status::success();
}

std::size_t ContiguousKvCache::bytes() const {
  std::size_t b = 0;
  for (size_t i = 0; i < k_.size(); ++i) b += k_[i].nbytes() + v_[i].nbytes();
  return b;
}

}  // namespace day0
