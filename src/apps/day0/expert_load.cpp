// The routed experts' load: see expert_load.h.
#include "apps/day0/expert_load.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

namespace day0::app {

ExpertLoad expert_load_of(std::vector<int> per_expert, int tile_tokens) {
  ExpertLoad load;
  for (int n : per_expert) {
    load.assignments += n;
    load.tiles += (n + tile_tokens - 1) / tile_tokens;
  }
  std::sort(per_expert.begin(), per_expert.end());
  load.least = per_expert.front();
  load.median = per_expert[per_expert.size() / 2];
  load.most = per_expert.back();
  return load;
}

Result<ExpertLoad> expert_load(int layer, const Tensor& indices, int n_experts, int tile_tokens) {
  if (indices.dtype() != DType::i32 || indices.device() != Device::cpu || n_experts <= 0 || tile_tokens <= 0)
    return make_error("expert_load: layer " + std::to_string(layer) + " needs host i32 indices, experts and a tile");
  std::vector<int> per_expert(static_cast<std::size_t>(n_experts), 0);
  const std::int32_t* ids = indices.data<std::int32_t>();
  for (std::int64_t i = 0; i < indices.numel(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_experts)
      return make_error("expert_load: layer " + std::to_string(layer) + " routes to expert " + std::to_string(ids[i]) +
                        " of " + std::to_string(n_experts));
    ++per_expert[static_cast<std::size_t>(ids[i])];
  }
  ExpertLoad load = expert_load_of(std::move(per_expert), tile_tokens);
  load.layer = layer;
  return load;
}

void report_expert_load(const std::vector<ExpertLoad>& layers, int tile_tokens, nlohmann::ordered_json& node) {
  if (layers.empty()) {
    std::printf("\nexpert load: the model has no routed experts\n");
    return;
  }
  std::printf("\nexpert load (tokens an expert; tiles: of %d tokens, filled expert by expert)\n", tile_tokens);
  std::printf("%8s %6s %10s %8s %8s %8s %8s\n", "layer", "step", "routed", "least", "median", "most", "tiles");
  for (const ExpertLoad& l : layers) {
    std::printf("%8d %6d %10lld %8d %8d %8d %8lld\n", l.layer, l.step, static_cast<long long>(l.assignments), l.least,
                l.median, l.most, static_cast<long long>(l.tiles));
    node["expert_load"].push_back({{"layer", l.layer},
                                   {"step", l.step},
                                   {"assignments", l.assignments},
                                   {"least", l.least},
                                   {"median", l.median},
                                   {"most", l.most},
                                   {"tiles", l.tiles},
                                   {"tile_tokens", tile_tokens}});
  }
}

}  // namespace day0::app
