// Opens a model directory for execution: config -> ModelSpec, checkpoint validated and bound, backend created,
// weights placed on it (uploaded, for a GPU), executor with its KV cache and workspaces reserved.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "arch/registry.h"
#include "io/checkpoint.h"
#include "model/executor.h"
#include "ops/registry.h"

namespace day0 {

struct LoadOptions {
  std::string backend = "cpu";
  std::int64_t max_tokens = 0;         // <= 0: the model's max_position_embeddings
  std::int64_t max_step_tokens = 2048;
  std::int64_t kv_pool_tokens = 0;     // paged KV pool; 0: max_tokens (one sequence)
  KvPoolFit kv_pool_fit = KvPoolFit::as_asked;  // ExecutorOptions::kv_pool_fit
  std::int64_t kv_pool_reserve_bytes = 0;       // ExecutorOptions::kv_pool_reserve_bytes
  bool fit_max_tokens = false;                  // ExecutorOptions::fit_max_tokens
  std::int64_t block_size = 16;
  std::int64_t graph_max_batch = 64;   // decode steps up to this many sequences replay step graphs (CUDA); 0: off
  BackendOptions backend_options;
  ProgressFn progress;                 // weight placement progress (bytes)
  // Random weights made in host memory from the directory's config.json (model/synth.h), no checkpoint read:
  // rehearse a model before its weights exist, or benchmark without writing them to disk.
  bool synthetic = false;
  std::uint64_t synthetic_seed = 0;
  bool profile = false;  // time the executor's spans (Ops::enable_profiling); step graphs stay off
};

struct LoadedModel {
  ModelSpec spec;
  std::unique_ptr<Ops> ops;  // declared before executor: outlives it
  std::unique_ptr<Executor> executor;
  std::uint64_t weight_bytes = 0;
  double load_seconds = 0;       // everything: open, check, place, reserve
  double place_seconds = 0;      // placing the weights on the backend (the upload, for a GPU)
  double synth_seconds = 0;      // making synthetic weights (LoadOptions::synthetic), part of load_seconds
};

Result<LoadedModel> load_model(const std::string& dir, const LoadOptions& options);
// The CPU-default shorthand used by tools and tests.
Result<LoadedModel> load_model(const std::string& dir, std::string_view backend, std::int64_t max_tokens);

}  // namespace day0
