// Shape, dtype and device checks for the CUDA launchers: each returns an Error that names the op, the
// argument, what was expected and what was given (launchers validate; kernels trust their arguments).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/expert_weights.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {

inline std::string cuda_dtype_list(std::initializer_list<DType> dtypes) {
  std::string s;
  for (DType d : dtypes) {
    if (!s.empty()) s += '/';
    s += dtype_name(d);
  }
  return s;
}

// t must be contiguous, on the CUDA device, of one of `dtypes` and exactly `shape`.
inline Status check_cuda_tensor(const Tensor& t, const char* op, const char* what, std::initializer_list<DType> dtypes,
                                const Shape& shape) {
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok |= t.dtype() == d;
  if (!dtype_ok || t.shape() != shape || !t.is_contiguous() || t.device() != Device::cuda ||
      (t.raw() == nullptr && t.numel() > 0))
    return make_error(std::string(op) + ": " + what + " must be a contiguous " + cuda_dtype_list(dtypes) + " tensor " +
                      shape_to_string(shape) + " on cuda, got " + std::string(dtype_name(t.dtype())) + " " +
                      shape_to_string(t.shape()) + " on " + std::string(device_name(t.device())) +
                      (t.is_contiguous() ? "" : " (not contiguous)"));
  return Status::success();
}

// The checks of a routed-expert conversion launcher: MXFP4 experts (either block order) on the device with a valid
// shape (check_expert_weights), and expert_ids i32 [n] on the device. Returns n.
inline Result<std::int64_t> check_mxfp4_selection(const ExpertWeights& w, const Tensor& expert_ids, const char* op) {
  if (!is_mxfp4(w.storage))
    return make_error(std::string(op) + ": converts MXFP4 experts, got " + std::string(expert_storage_name(w.storage)));
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cuda));
  if (expert_ids.dim() != 1) return make_error(std::string(op) + ": expert_ids must be 1-D");
  const std::int64_t n = expert_ids.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(expert_ids, op, "expert_ids", {DType::i32}, {n}));
  return n;
}

inline bool has_values(const Tensor& t) { return t.defined() && t.numel() > 0; }

inline bool aligned_to(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace day0
