// load_model.
#include "model/load.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "model/synth.h"

namespace day0 {

Result<LoadedModel> load_model(const std::string& dir, const LoadOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  LoadedModel m;
  D0_ASSIGN_OR_RETURN(m.spec, model_spec_from_dir(dir));
  D0_ASSIGN_OR_RETURN(m.ops, make_ops(options.backend, options.backend_options));
  m.ops->enable_profiling(options.profile);
  // The host tensors: the checkpoint's (memory-mapped, checked against the spec) or synthetic ones.
  std::optional<Checkpoint> checkpoint;
  NamedTensors host;
  if (options.synthetic) {
    D0_ASSIGN_OR_RETURN(host, synth_tensors(m.spec, options.synthetic_seed));
    for (const auto& [name, t] : host) m.weight_bytes += t.nbytes();
    m.synth_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  } else {
    D0_ASSIGN_OR_RETURN(checkpoint, Checkpoint::open_dir(dir));
    m.weight_bytes = checkpoint->total_bytes();
    D0_ASSIGN_OR_RETURN(ModelWeights bound, ModelWeights::bind(m.spec, *checkpoint));
    host = bound.tensors();
  }
  const auto t_place = clock::now();
  D0_ASSIGN_OR_RETURN(NamedTensors placed, m.ops->place_weights(host, weight_roles(m.spec), options.progress));
  m.place_seconds = std::chrono::duration<double>(clock::now() - t_place).count();
  ExecutorOptions eo;
  eo.max_tokens = options.max_tokens > 0 ? std::min<std::int64_t>(options.max_tokens, m.spec.max_position)
                                         : m.spec.max_position;
  eo.max_step_tokens = options.max_step_tokens;
  eo.kv_pool_tokens = options.kv_pool_tokens;
  eo.kv_pool_fit = options.kv_pool_fit;
  eo.kv_pool_reserve_bytes = options.kv_pool_reserve_bytes;
  eo.fit_max_tokens = options.fit_max_tokens;
  eo.block_size = options.block_size;
  eo.graph_max_batch = options.graph_max_batch;
  D0_ASSIGN_OR_RETURN(m.executor,
                      Executor::create(m.spec, ModelWeights::from_tensors(std::move(placed)), *m.ops, eo));
  m.load_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return m;
}

Result<LoadedModel> load_model(const std::string& dir, std::string_view backend, std::int64_t max_tokens) {
  LoadOptions options;
  options.backend = std::string(backend);
  options.max_tokens = max_tokens;
  return load_model(dir, options);
}

}  // namespace day0
