// The kernel benchmarks' operands in the context's arena: random ones (random_fill_cuda.h says why not memset
// ones), and copies of ones made on the host.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/random_fill_cuda.h"

namespace day0::app {

// Uniform in [-scale, scale); each operand takes the next seed, so no two are alike.
inline Result<Tensor> random_operand(CudaContext& ctx, const Shape& shape, DType dtype, float scale,
                                     std::uint64_t& seed, const std::string& what) {
  D0_ASSIGN_OR_RETURN(Tensor t, ctx.arena().allocate(shape, dtype, what));
  D0_RETURN_IF_ERROR(fill_uniform_cuda(t, seed++, scale, ctx.stream()));
  return t;
}

// host (a contiguous cpu tensor) copied to the device; synchronous, so host may go at once.
inline Result<Tensor> device_copy(CudaContext& ctx, const Tensor& host, const std::string& what) {
  D0_ASSIGN_OR_RETURN(Tensor d, ctx.arena().allocate(host.shape(), host.dtype(), what));
  D0_CUDA_RETURN_IF_ERROR(cudaMemcpy(d.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice));
  return d;
}

}  // namespace day0::app
