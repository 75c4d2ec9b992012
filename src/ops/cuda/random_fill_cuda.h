// Benchmark operands on the device: uniform values from a counter-based hash of (seed, index). Tensor cores draw
// less power on constant operands than on a model's activations and weights, and run faster for it, so ceilings
// and kernel benchmarks measured on memset data overstate what a model sees.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

// t (f32, bf16 or f8_e4m3, on the device, contiguous) = uniform in [-scale, scale), rounded to t's dtype; the same
// (seed, index) always gives the same value.
Status fill_uniform_cuda(Tensor& t, std::uint64_t seed, float scale, cudaStream_t stream);

}  // namespace day0
