// The routed experts' load of one forward: how many of its tokens each layer's router sends to each expert. An
// uneven load costs a grouped expert GEMM more than its FLOPs say: each expert's tokens fill tiles of a fixed
// width, and every tile converts its expert's weights again (docs/perf-notes/v33.md: the synthetic gpt-oss-120b
// routes 4,096 tokens to 10-515 a layer-5 expert, 159 tiles of 192 where an even load takes 128).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"

namespace day0::app {

struct ExpertLoad {
  int layer = 0;
  int step = 0;  // a prompt past the step size prefills in chunks: each step's call has its own load
  std::int64_t assignments = 0;         // tokens x top-k
  int least = 0, median = 0, most = 0;  // tokens an expert
  std::int64_t tiles = 0;               // tiles of tile_tokens tokens the experts' tokens fill, expert by expert
};

// The load of tokens-an-expert counts (at least one): least, median, most and tiles; assignments is their sum.
ExpertLoad expert_load_of(std::vector<int> per_expert, int tile_tokens);

// One layer's load from its router's indices ([tokens, k] i32 on the host); an id outside [0, n_experts) is an
// error that names the layer and the id.
Result<ExpertLoad> expert_load(int layer, const Tensor& indices, int n_experts, int tile_tokens);

// A table of the layers' loads, and the same in `node["expert_load"]`.
void report_expert_load(const std::vector<ExpertLoad>& layers, int tile_tokens, nlohmann::ordered_json& node);

}  // namespace day0::app
