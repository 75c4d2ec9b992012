// day0 run: greedy generation from token ids, text or chat messages, with timing; text streams as it decodes.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/day0/commands.h"
#include "model/greedy.h"
#include "apps/day0/model_loading.h"
#include "ops/cuda/kernel_trace.h"

namespace day0::app {

int run(const RunOptions& o) {
  auto tokenizer = load_tokenizer(o.dir);
  if (!tokenizer.ok()) return fail(tokenizer.error().message);
  const Tokenizer* tok = *tokenizer ? &**tokenizer : nullptr;
  auto prompt = resolve_prompt(o.dir, o.prompt, tok);
  if (!prompt.ok()) return fail(prompt.error().message);
  const std::vector<std::int32_t>& ids = prompt->ids;
  if (ids.empty()) return fail("the prompt has no tokens");
  auto model = load_for_command(o.dir, o.engine, static_cast<std::int64_t>(ids.size()) + o.max_tokens);
  if (!model.ok()) return fail(model.error().message);
  for (auto id : ids)
    if (id >= model->spec.vocab_size)
      return fail("prompt token id " + std::to_string(id) + (o.prompt.ids.empty() ? " (from the tokenizer)" : " (--prompt-ids)") +
                  " is outside the model's vocabulary of " +
                  std::to_string(model->spec.vocab_size));

  std::printf("prompt ids: ");
  for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? "," : "", ids[i]);
  std::printf("\n");
  std::optional<IncrementalDetokenizer> detok;
  if (tok) {
    auto text = tok->decode(ids);
    if (text.ok()) std::printf("prompt:     %s\n", text->c_str());
    detok.emplace(*tok);
    std::printf("generated:  ");
    std::fflush(stdout);
  }
  Status stream_status;
  const TokenFn stream = [&](std::int32_t token) {
    if (!detok || !stream_status.ok()) return;
    auto piece = detok->push(token);
    if (!piece.ok()) {
      stream_status = piece.error();
      return;
    }
    std::fputs(piece->c_str(), stdout);
    std::fflush(stdout);
  };
  if (o.engine.profile) {
    // The spans time warm work: one untimed pass first, as kernels load lazily on first launch and cuBLASLt plans
    // each new shape on first use (a fresh process's 4,096-token prefill put ~65 ms into its first q GEMMs).
    model->ops->enable_profiling(false);
    auto warm = greedy_generate(*model->executor, ids, o.max_tokens, false);
    if (!warm.ok()) return fail(warm.error().message);
    model->executor->reset();
    model->ops->enable_profiling(true);
  }
  // On the GPU the profile also lists every kernel's device time (CUPTI), what the spans are made of.
  std::unique_ptr<KernelTrace> trace;
  std::string trace_error;
  if (o.engine.profile && o.engine.backend == "cuda") {
    auto t = KernelTrace::start();
    if (t.ok()) trace = std::move(*t);
    else trace_error = t.error().message;
  }
  auto out = greedy_generate(*model->executor, ids, o.max_tokens, false, stream);
  if (!out.ok()) return fail(out.error().message);
  if (detok) {
    auto tail = detok->finish();
    if (tail.ok()) std::fputs(tail->c_str(), stdout);
    std::printf("\n");
    if (!stream_status.ok()) return fail(stream_status.error().message);
  }
  std::printf("generated ids: ");
  for (size_t i = 0; i < out->tokens.size(); ++i) std::printf("%s%d", i ? "," : "", out->tokens[i]);
  const double decode_steps = out->tokens.size() > 1 ? double(out->tokens.size() - 1) : 0;
  std::printf("\nload %.3f s (%.1f MB); prefill %zu tokens in %.3f s (%.1f tok/s); decode %zu tokens in %.3f s "
              "(%.1f tok/s); backend %s\n",
              model->load_seconds, model->weight_bytes / 1e6, ids.size(), out->prefill_seconds,
              ids.size() / out->prefill_seconds, out->tokens.size(), out->decode_seconds,
              decode_steps > 0 ? decode_steps / out->decode_seconds : 0.0, o.engine.backend.c_str());
  print_memory_report(*model->ops);
  if (o.engine.profile)
    if (Status st = print_profile(*model->ops); !st.ok()) return fail(st.error().message);
  if (trace) {
    auto kernels = trace->finish();
    if (!kernels.ok()) return fail(kernels.error().message);
    print_kernel_times(*kernels, "the profiled generation");
    print_host_calls(trace->host());
  } else if (!trace_error.empty()) {
    std::printf("kernels: not traced (%s)\n", trace_error.c_str());
  }
  return 0;
}

}  // namespace day0::app
