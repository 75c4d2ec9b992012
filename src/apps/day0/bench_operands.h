// The kernel benchmarks' random operands (random_fill_cuda.h says why not memset ones), in the context's arena.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/random_fill_cuda.h"

namespace day0::app {

// Uniform in [-scale, scale); each operand takes the next seed, so no two are alike.
inline Result<Tensor> random_operand(CudaContext& ctx, const Shape& shape, DType dtype, float scale,
                                     std::uint64_t& seed, const std::string& what) {
  D0_ASSIGN_OR_RETURN(Tensor t, ctx.arena().allocate(shape, dtype, what));
  D0_RETURN_IF_ERROR(fill_uniform_cuda(t, seed++, scale, ctx.stream()));
  return t;
}

}  // namespace day0::app
