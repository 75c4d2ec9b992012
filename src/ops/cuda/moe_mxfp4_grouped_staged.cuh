// The fused grouped matmul's staged form (moe_mxfp4_grouped_staged_cuda.cu), for mxfp4_grouped_matmul_cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/expert_weights.h"

namespace day0 {

// MXFP4 experts with out a multiple of 16, in a multiple of 32 up to 4,096, 16-byte aligned blocks and scales.
bool mxfp4_grouped_staged_fits(const ExpertWeights& w);

// The 4-warp split on a's checked arguments (grouped_kernel_args), passes of pass_tokens (8 or 16), launch_slots
// CTAs a row block. `settled`: the grouping was written two or more launches back (dependent_launch.h).
Status mxfp4_grouped_staged_matmul_cuda(const mxfp4_kernels::KernelArgs& a, const ExpertWeights& w, bool swiglu,
                                        int pass_tokens, bool settled, std::int64_t launch_slots, cudaStream_t stream);

}  // namespace day0
