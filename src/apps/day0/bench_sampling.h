// The device's picks at gpt-oss's vocabulary timed by bench-moe: greedy_tokens alone, and with draw_tokens for
// temperature-only rows and rows with top-k / top-p / min-p (the cutoff in the row's cluster).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/status.h"
#include "ops/cuda/ceilings.h"
#include "ops/cuda/cuda_context.h"

namespace day0::app {

Status bench_token_draws(CudaContext& ctx, const std::vector<std::int64_t>& rows, const DeviceCeilings& ceil,
                         nlohmann::json& report);

}  // namespace day0::app
