// A kernel's optional bias vector, f32 or bf16 as the checkpoint stores it: the kind the host passes and the read
// every kernel with a bias makes (the small-M linear, the fused norm + router, the MoE expert kernels).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "core/tensor.h"
#include "ops/cuda/cuda_check.h"

namespace day0 {

enum BiasKind : int { kNoBias = 0, kBiasF32 = 1, kBiasBf16 = 2 };

// The kind of `bias` (undefined or empty: none); its dtype is checked by the caller.
inline int bias_kind_of(const Tensor& bias) {
  if (!has_values(bias)) return kNoBias;
  return bias.dtype() == DType::f32 ? kBiasF32 : kBiasBf16;
}

// Element i of the bias as f32; 0 without one.
__device__ __forceinline__ float bias_value(const void* bias, int kind, std::int64_t i) {
  if (kind == kBiasF32) return static_cast<const float*>(bias)[i];
  if (kind == kBiasBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[i]);
  return 0.f;
}

}  // namespace day0
