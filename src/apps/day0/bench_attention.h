// gpt-oss's decode attention timed by bench-moe next to the expert kernels and the dense linears: the kernels
// CudaOps runs for a step of one query a sequence (split count as attention_splits picks it, the merge included),
// over block tables sized for a capacity that may exceed the context (a server sized for long prompts); and its
// prefill attention on the tensor cores.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status.h"
#include "ops/cuda/ceilings.h"
#include "ops/cuda/cuda_context.h"

namespace day0::app {

Status bench_decode_attention(CudaContext& ctx, const DeviceCeilings& ceil, nlohmann::json& report);

// Prefill attention of one sequence of each token count in `tokens` (those the tensor-core kernel takes).
Status bench_prefill_attention(CudaContext& ctx, const DeviceCeilings& ceil, const std::vector<std::int64_t>& tokens,
                               nlohmann::json& report);

}  // namespace day0::app
