// Executor: runs one sequence through a ModelSpec's block graph on an Ops backend — prefill (in chunks of at
// most max_step_tokens), then token-by-token decode over a KV cache — and reports named intermediates ("taps")
// on request. It knows blocks (GQA attention, MoE), not families, and not devices: every tensor it uses is
// allocated by the backend, per step from scratch memory that is rewound when the step ends.
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

// Called with each intermediate (a host tensor): "embed", "layers.{i}.attn", "layers.{i}.router_indices"
// (i32 [S, k]), "layers.{i}.router_weights", "layers.{i}.moe", "layers.{i}.out", "final_norm", "logits".
// A prompt longer than one step reports each step's taps in turn.
using TapFn = std::function<void(std::string_view name, const Tensor& value)>;

struct ExecutorOptions {
  std::int64_t max_tokens = 0;         // prompt + generated; the KV cache is reserved for it
  std::int64_t max_step_tokens = 2048;  // tokens per forward step (longer prompts prefill in chunks)
};

class Executor {
 public:
  // `weights` must already be placed by `ops` (Ops::place_weights). Reserves the KV cache and the backend's
  // workspaces now.
  static Result<std::unique_ptr<Executor>> create(const ModelSpec& spec, ModelWeights weights, Ops& ops,
                                                  const ExecutorOptions& options);

  // Appends `tokens` at positions length()..length()+S-1 and returns host logits: [S, V] if all_logits, else
  // [1, V] for the last token. On error the sequence is left as it was before the failing step.
  Result<Tensor> forward(std::span<const std::int32_t> tokens, bool all_logits = false, const TapFn& tap = {});
  std::int64_t length() const { return cache_.length(); }
  void reset() { cache_.clear(); }
  const ModelSpec& spec() const { return spec_; }
  std::size_t kv_cache_bytes() const { return cache_.bytes(); }
  std::int64_t max_tokens() const { return cache_.max_tokens(); }
  std::int64_t max_step_tokens() const { return max_step_tokens_; }
  Ops& ops() { return ops_; }

 private:
  Executor(const ModelSpec& spec, ModelWeights weights, Ops& ops, ContiguousKvCache cache, std::vector<Tensor> inv_freq,
           std::int64_t max_step);
  Result<Tensor> step(std::span<const std::int32_t> tokens, bool all_logits, const TapFn& tap);
  Status emit(const TapFn& tap, std::string_view name, const Tensor& value);
  Status token_mixer(int layer, const Tensor& h, const Tensor& positions, Tensor& out);
  Status attention_block(int layer, const Tensor& h, const Tensor& positions, Tensor& out);
  Status channel_mixer(int layer, const Tensor& h, Tensor& out, const TapFn& tap);
  Status moe_block(int layer, const Tensor& h, Tensor& out, const TapFn& tap);

  ModelSpec spec_;
  ModelWeights weights_;
  Ops& ops_;
  ContiguousKvCache cache_;
  std::int64_t max_step_tokens_ = 0;
  std::vector<Tensor> inv_freq_;  // per layer, f32 [rotary_dim / 2] in backend memory
};

}  // namespace day0
