// Shape, dtype and device checks for the CUDA launchers: each returns an Error that names the op, the
// argument, what was expected and what was given (launchers validate; kernels trust their arguments).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

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

inline bool has_values(const Tensor& t) { return t.defined() && t.numel() > 0; }

inline bool aligned_to(const void* p, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace day0
