// load_model.
#include "model/load.h"

#include <algorithm>
#include <chrono>

namespace day0 {

Result<LoadedModel> load_model(const std::string& dir, std::string_view backend, std::int64_t max_tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel m;
  D0_ASSIGN_OR_RETURN(m.spec, model_spec_from_dir(dir));
  D0_ASSIGN_OR_RETURN(m.ops, make_ops(backend));
  D0_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open_dir(dir));
  m.weight_bytes = checkpoint.total_bytes();
  D0_ASSIGN_OR_RETURN(ModelWeights weights, ModelWeights::bind(m.spec, checkpoint));
  D0_ASSIGN_OR_RETURN(m.executor, Executor::create(m.spec, std::move(weights), *m.ops,
                                                   max_tokens > 0 ? std::min<std::int64_t>(max_tokens, m.spec.max_position) : m.spec.max_position));
  m.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

}  // namespace day0
