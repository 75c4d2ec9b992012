// Executor: runs one sequence through a ModelSpec's block graph on an Ops backend — prefill, then
// token-by-token decode over a KV cache — and reports named intermediates ("taps") on request.
// It knows blocks (GQA attention, MoE), not families.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "arch/model_spec.h"
#include "cache/contiguous_kv.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace day0 {

// Called with each intermediate: "embed", "layers.{i}.attn", "layers.{i}.router_indices" (i32 [S, k]),
// "layers.{i}.router_weights", "layers.{i}.moe", "layers.{i}.out", "final_norm", "logits".
using TapFn = std::function<void(std::string_view name, const Tensor& value)>;

class Executor {
 public:
  // `max_tokens` bounds the sequence (prompt + generated); the KV cache is reserved for it now.
  static Result<std::unique_ptr<Executor>> create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                  std::int64_t max_tokens);

  // Appends `tokens` at positions length()..length()+S-1 and returns logits: [S, V] if all_logits,
  // else [1, V] for the last token. On error the sequence is left unchanged.
  Result<Tensor> forward(std::span<const std::int32_t> tokens, bool all_logits = false, const TapFn& tap = {});
  std::int64_t length() const { return cache_.length(); }
  void reset() { cache_.clear(); }
  const ModelSpec& spec() const { return spec_; }
  std::size_t kv_cache_bytes() const { return cache_.bytes(); }

 private:
  Executor(const ModelSpec& spec, ModelWeights weights, Ops& ops, std::int64_t max_tokens);
  Status token_mixer(int layer, const Tensor& h, const Tensor& positions, Tensor& out);
  Status attention_block(int layer, const Tensor& h, const Tensor& positions, Tensor& out);
  Status channel_mixer(int layer, const Tensor& h, Tensor& out, const TapFn& tap);
  Status moe_block(int layer, const Tensor& h, Tensor& out, const TapFn& tap);

  ModelSpec spec_;
  ModelWeights weights_;
  Ops& ops_;
  ContiguousKvCache cache_;
  std::vector<std::vector<float>> inv_freq_;  // per layer
};

}  // namespace day0
