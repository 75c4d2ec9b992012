// The dense decode linears of gpt-oss (q/k/v in one launch, o, router, lm_head) timed by bench-moe next to the
// expert kernels: the small-M tensor-core kernel against cuBLASLt (with its f32 -> bf16 input conversion).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status.h"
#include "ops/cuda/ceilings.h"
#include "ops/cuda/cuda_context.h"

namespace day0::app {

Status bench_dense_linears(CudaContext& ctx, const std::vector<std::int64_t>& rows, const DeviceCeilings& ceil,
                           nlohmann::json& report);

}  // namespace day0::app
