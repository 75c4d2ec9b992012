// Opens a model directory for execution: config -> ModelSpec, checkpoint validated and bound, backend, executor.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "arch/registry.h"
#include "io/checkpoint.h"
#include "model/executor.h"
#include "ops/registry.h"

namespace day0 {

struct LoadedModel {
  ModelSpec spec;
  std::unique_ptr<Ops> ops;  // declared before executor: outlives it
  std::unique_ptr<Executor> executor;
  std::uint64_t weight_bytes = 0;
  double load_seconds = 0;
};

// max_tokens <= 0 means the model's max_position_embeddings.
Result<LoadedModel> load_model(const std::string& dir, std::string_view backend, std::int64_t max_tokens);

}  // namespace day0
