// day0 bench: the measured ceilings of the GPU, then prefill and decode speed of a model on it, each figure
// also as a fraction of its ceiling (bytes a step must move over the copy bandwidth; matmul FLOPs over the BF16
// matmul rate). Decode at batch B and context C: B sequences, each with its own copy of one prefilled context (as
// distinct requests: a shared one would be read from L2) and private blocks for the tokens it decodes; the KV
// pool takes what the points need or what fits, and a point needing more rows than it holds is reported skipped.
// A decode step returns each row's greedy pick (StepOutput::greedy), as the engine's steps do where every row
// decodes greedily, and is queued before the last one's picks are read, fed them on the device (as run and serve do;
// --decode-wait-each waits for each step first); --decode-logits returns the logits instead (sampling on the host: at
// batch 64 and gpt-oss's vocabulary, 51 MB a step over PCIe). A step's time is a run of steps' over their number.
// Prints a table and, with --json, writes the figures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/day0/bench_report.h"
#include "apps/day0/commands.h"
#include "apps/day0/expert_load.h"
#include "apps/day0/model_loading.h"
#include "model/op_plan.h"
#include "ops/cuda/ceilings.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/kernel_trace.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/cuda/nvtx_range.h"
#include "quant/mxfp4.h"

namespace day0::app {
namespace {

using clock = std::chrono::steady_clock;

// GPU memory the KV pool leaves for step scratch when the points ask for more than fits: the scratch peaked at
// 0.18 GiB for 20b at 2,048-token steps; this leaves room for 120b, 4,096-token steps and batch-128 logits.
constexpr std::int64_t kScratchReserve = std::int64_t{4} << 30;

double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

// Bytes of weights one decode step reads at batch B: every dense tensor as placed (bf16 matrices), except the
// embedding table (B rows only), plus the routed experts expected to be touched: E (1 - (1 - k/E)^B) of E.
double step_weight_bytes(const ModelSpec& spec, std::int64_t batch) {
  double dense = 0, experts = 0;
  int E = 0, k = 0;
  for (const auto& L : spec.layers) E = L.channel.moe.n_experts, k = L.channel.moe.top_k;
  for (const auto& w : spec.weights) {
    double n = 1;
    for (auto d : w.shape) n *= double(d);
    if (w.expert) experts += n * dtype_bits(w.dtypes.front()) / 8;  // as stored (MXFP4 bytes, bf16, fp8)
    else if (w.name != spec.embedding || spec.tie_embeddings) dense += 2 * n;
  }
  const double touched = E > 0 ? 1.0 - std::pow(1.0 - double(k) / E, double(batch)) : 0.0;
  return dense + experts * touched;
}

// The matmul FLOPs of one sequence's prefill of `tokens` tokens: 2 x parameters used per token (experts at their
// active share) for every token, but the lm_head for the last token only (a prefill samples one token: counting
// it for all overstated 120b's figure by ~11% at 4,096 tokens, v31); plus attention's two products, 2 x 2 x heads
// x head_dim a (query, key) pair attended (causal, a sliding window's last `window` keys).
double prefill_flops(const ModelSpec& spec, std::int64_t tokens) {
  double active = 0, head = 0;
  for (const auto& w : spec.weights) {
    if (w.name == spec.lm_head) {
      head += double(w.logical_params);
      continue;
    }
    if (w.name == spec.embedding) continue;  // a lookup
    double share = 1;
    if (w.expert)
      for (const auto& L : spec.layers) share = double(L.channel.moe.top_k) / L.channel.moe.n_experts;
    active += double(w.logical_params) * share;
  }
  const double T = double(tokens);
  double attention = 0;
  for (const auto& L : spec.layers) {
    const AttentionSpec& a = L.mixer.attention;
    const double W = a.sliding_window > 0 && a.sliding_window < tokens ? double(a.sliding_window) : T;
    const double pairs = W * (W + 1) / 2 + (T - W) * W;  // query q attends min(q + 1, W) keys
    attention += 4.0 * a.n_heads * a.head_dim * pairs;
  }
  return 2.0 * active * T + 2.0 * head + attention;
}

// K and V bytes one decode query reads at context C: every layer's rows, a sliding-window layer's last `window`.
double kv_bytes_read(const ModelSpec& spec, std::int64_t C, DType kv) {
  double b = 0;
  for (const auto& L : spec.layers) {
    const AttentionSpec& a = L.mixer.attention;
    const std::int64_t keys = a.sliding_window > 0 ? std::min<std::int64_t>(C, a.sliding_window) : C;
    b += 2.0 * a.n_kv_heads * a.head_dim * (dtype_bits(kv) / 8) * double(keys);
  }
  return b;
}

// n random token ids from a generator seeded by what they are for and the point's size and batch: a point's inputs,
// and so the experts its tokens route to, are the same whichever other points the command runs. (One generator for
// all drew the decode's context and tokens after every prompt, so `--prefill 512 4096` and `--prefill 128` decoded
// different tokens at the same batch; v70's B64 differed by ~1.5% between the two.)
enum class TokensFor : std::uint32_t { prompt = 1, decode_context = 2, decode_tokens = 3 };
std::vector<std::int32_t> random_tokens(TokensFor what, std::int64_t size, std::int64_t batch, std::int64_t n,
                                        int vocab) {
  std::seed_seq seed{std::uint32_t{1234}, static_cast<std::uint32_t>(what), static_cast<std::uint32_t>(size),
                     static_cast<std::uint32_t>(batch)};
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

}  // namespace

int bench(const BenchOptions& o) {
  nlohmann::ordered_json report;
  DeviceCeilings ceil;
  const std::int64_t max_context = std::max(*std::max_element(o.prefill.begin(), o.prefill.end()),
                                            *std::max_element(o.contexts.begin(), o.contexts.end()));
  const std::int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const std::int64_t max_decode_context = *std::max_element(o.contexts.begin(), o.contexts.end());
  const int kWarmup = 2, kSteps = o.decode_steps;
  BackendCliOptions engine = o.engine;
  // "auto" (bench's default): the GPU where there is one; a 20b bench on the CPU backend would run for hours.
  if (engine.backend == "auto") engine.backend = cuda_device_available() ? "cuda" : "cpu";
  const bool trace_kernels = o.kernels && engine.backend == "cuda";
  if (o.kernels && !trace_kernels)
    std::printf("kernels     not traced on the %s backend (CUPTI: GPU only)\n", engine.backend.c_str());
  const int kTraced = trace_kernels ? kSteps : 0;  // steps after the timed ones, traced kernel by kernel
  // The solo region holds the longest prefill; then each batch row's region: its own copy of the decode context
  // (as distinct requests would have: a shared one would be read from L2 by every row) and its private blocks.
  const std::int64_t block = 16;
  const std::int64_t private_tokens = (kWarmup + kSteps + kTraced + block) / block * block;
  for (std::int64_t C : o.contexts)
    if (C % block != 0) return fail("--contexts: each must be a multiple of " + std::to_string(block) + ", got " +
                                    std::to_string(C));
  const std::int64_t private_blocks = private_tokens / block;
  auto model = [&]() {
    LoadOptions lo;
    lo.backend = engine.backend;
    lo.max_tokens = max_context + private_tokens;
    // As many rows as the points ask, or as fit: a point needing more rows than the pool holds is reported skipped.
    lo.kv_pool_tokens = lo.max_tokens + max_batch * (max_decode_context + private_tokens);
    lo.kv_pool_fit = KvPoolFit::shrink;
    lo.kv_pool_reserve_bytes = kScratchReserve;
    lo.block_size = block;
    lo.max_step_tokens = std::max<std::int64_t>(engine.max_step_tokens, max_batch);
    auto bo = backend_options(engine);
    if (!bo.ok()) return Result<LoadedModel>(bo.error());
    lo.backend_options = *bo;
    lo.synthetic = o.synthetic;
    lo.graph_max_batch = engine.graph_batch;
    const auto t0 = clock::now();
    auto m = load_model(o.dir, lo);
    if (!m.ok()) return m;
    if (o.synthetic)
      std::printf("synthetic   %.2f GB of random weights made in memory in %.2f s\n", m->weight_bytes / 1e9,
                  m->synth_seconds);
    std::printf("graphs      %s\n", m->executor->graph_status().c_str());
    std::printf("load        %.2f GB in %.2f s (%.2f GB/s placing)\n", m->weight_bytes / 1e9,
                seconds_since(t0) - m->synth_seconds, m->weight_bytes / 1e9 / m->place_seconds);
    return m;
  }();
  if (!model.ok()) return fail(model.error().message);
  const ModelSpec& spec = model->spec;
  Executor& ex = *model->executor;
  report["model"] = o.dir;
  report["backend"] = engine.backend;
  report["expert_compute"] = engine.expert_compute;
  report["kv_cache_dtype"] = std::string(dtype_name(model->ops->kv_cache_dtype()));
  report["expert_storage"] =
      std::string(expert_storage_name(model->ops->placed_expert_storage(ops_plan(spec, 1).expert_storage)));
  report["load"] = {{"bytes", model->weight_bytes}, {"seconds", model->place_seconds},
                    {"synthetic", o.synthetic}, {"step_graphs", model->executor->graph_status()}};
  if (auto* cuda = dynamic_cast<CudaOps*>(model->ops.get())) {
    auto c = measure_ceilings(cuda->context());
    if (!c.ok()) return fail(c.error().message);
    ceil = *c;
    report_ceilings(ceil, report);
  } else {
    std::printf("ceilings    not measured on the %s backend\n", engine.backend.c_str());
  }

  // A prefill's time is also the time to first token of that prompt (its last row's logits give the token). The
  // first run of a size is cold (CUDA loads kernels lazily, cuBLASLt plans each new shape): reported apart; the
  // figure is the median of the warm runs, as llama-bench and vLLM's benchmarks warm up first.
  std::printf("\n%-8s %10s %12s %14s %12s %12s %12s\n", "prefill", "tokens", "TTFT s", "tok/s", "of bf16 rate",
              "of fp8 rate", "cold TTFT s");
  // --kernels: each traced table also lands in the JSON entry that `node` names.
  const std::string launches_note = o.engine.no_dependent_launch
                                        ? ""
                                        : "; dependent launches: a kernel's time includes its wait for the one "
                                          "before, --no-dependent-launch separates them";
  auto report_trace = [&](KernelTrace& trace, const std::string& what, nlohmann::ordered_json& node) -> Status {
    auto kernels = trace.finish();
    if (!kernels.ok()) return kernels.error();
    print_kernel_times(*kernels, what + launches_note);
    print_host_calls(trace.host());
    for (const KernelTime& k : *kernels)
      node["kernels"].push_back({{"name", k.name},
                                 {"grid", k.grid},
                                 {"calls", k.calls},
                                 {"seconds", k.seconds},
                                 {"exposed_seconds", k.exposed_seconds},
                                 {"idle_before_seconds", k.idle_before_seconds},
                                 {"largest_idle_before_seconds", k.largest_idle_before_seconds},
                                 {"largest_idle_after", k.largest_idle_after}});
    for (const HostCallTime& c : trace.host().calls)
      node["host_calls"].push_back(
          {{"name", c.name}, {"calls", c.calls}, {"seconds", c.seconds}, {"largest_seconds", c.largest_seconds}});
    for (const HostGap& g : trace.host().gaps)
      node["host_gaps"].push_back({{"after", g.after}, {"before", g.before}, {"seconds", g.seconds}});
    return Status::success();
  };
  constexpr int kPrefillRuns = 3;
  for (std::int64_t n : o.prefill) {
    const NvtxRange range("prefill " + std::to_string(n));
    const auto prompt = random_tokens(TokensFor::prompt, n, 0, n, spec.vocab_size);
    std::vector<double> runs;
    for (int run = 0; run <= kPrefillRuns; ++run) {
      ex.reset();
      const auto t0 = clock::now();
      auto r = ex.forward(prompt);
      if (!r.ok()) return fail(r.error().message);
      runs.push_back(seconds_since(t0));
    }
    const double cold = runs.front();
    runs.erase(runs.begin());
    std::sort(runs.begin(), runs.end());
    const double s = runs[runs.size() / 2];
    const double frac = ceil.bf16_flops > 0 ? prefill_flops(spec, n) / s / ceil.bf16_flops : 0;
    const double frac8 = ceil.fp8_flops > 0 ? prefill_flops(spec, n) / s / ceil.fp8_flops : 0;
    std::printf("%-8s %10lld %12.4f %14.1f %11.1f%% %11.1f%% %12.4f\n", "", static_cast<long long>(n), s, n / s,
                100 * frac, 100 * frac8, cold);
    report["prefill"].push_back({{"tokens", n},
                                 {"seconds", s},
                                 {"tokens_per_s", n / s},
                                 {"of_bf16_rate", frac},
                                 {"of_fp8_rate", frac8},
                                 {"cold_seconds", cold},
                                 {"warm_runs", kPrefillRuns}});
    if (trace_kernels) {  // one more run, after the timed ones, traced kernel by kernel
      auto t = KernelTrace::start();
      if (!t.ok()) return fail(t.error().message);
      ex.reset();
      if (auto r = ex.forward(prompt); !r.ok()) return fail(r.error().message);
      const std::string what = "one prefill of " + std::to_string(n) + " tokens";
      if (Status st = report_trace(**t, what, report["prefill"].back()); !st.ok()) return fail(st.error().message);
    }
    if (o.expert_load) {  // one more run, its routers' indices downloaded layer by layer
      std::vector<ExpertLoad> loads;
      Status bad = Status::success();
      auto tap = [&](std::string_view name, const Tensor& value) {
        constexpr std::string_view kPrefix = "layers.", kSuffix = ".router_indices";
        if (!bad.ok() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return;
        const int layer = std::stoi(std::string(name.substr(kPrefix.size())));
        auto load = expert_load(layer, value, spec.layers[layer].channel.moe.n_experts, kWsFp8TileTokens);
        if (!load.ok()) {
          bad = load.error();
          return;
        }
        // The executor taps each step in turn: a layer seen before is the next chunk's.
        load->step = static_cast<int>(
            std::count_if(loads.begin(), loads.end(), [&](const ExpertLoad& l) { return l.layer == layer; }));
        loads.push_back(*load);
      };
      ex.reset();
      if (auto r = ex.forward(prompt, false, tap); !r.ok()) return fail(r.error().message);
      if (!bad.ok()) return fail(bad.error().message);
      report_expert_load(loads, kWsFp8TileTokens, report["prefill"].back());
    }
  }
  const StepOutput decode_output = o.decode_logits ? StepOutput::logits : StepOutput::greedy;
  const bool ahead = !o.decode_logits && !o.decode_wait_each;  // greedy steps launched ahead (queue_decode)
  const char* returns = o.decode_logits ? "its logits"
                        : ahead         ? "greedy picks made on the device, queued one step ahead"
                                        : "greedy picks made on the device, waited for before the next";
  std::printf("\n%-8s %8s %8s %12s %14s %16s   (each step returns %s)\n", "decode", "context", "batch", "ms/step",
              "tok/s", "of copy bw", returns);
  const std::int64_t solo_blocks = (max_context + private_tokens) / block;
  for (std::int64_t C : o.contexts) {
    ex.reset();
    if (auto r = ex.forward(random_tokens(TokensFor::decode_context, C, 0, C, spec.vocab_size)); !r.ok())
      return fail(r.error().message);
    // Row b's region: its copy of the context, then its private blocks.
    const std::int64_t context_blocks = C / block, row_blocks = context_blocks + private_blocks;
    const std::int64_t rows = std::min(max_batch, (ex.n_blocks() - solo_blocks) / row_blocks);
    auto row_block = [&](std::int64_t b, std::int64_t i) {
      return static_cast<BlockId>(solo_blocks + b * row_blocks + i);
    };
    for (std::int64_t b = 0; b < rows; ++b)
      if (Status st = ex.copy_block_range(0, row_block(b, 0), static_cast<std::int32_t>(context_blocks)); !st.ok())
        return fail(st.error().message);
    for (std::int64_t B : o.batches) {
      if (B > rows) {
        const std::string why = "needs " + std::to_string(B * row_blocks * block) + " KV tokens (each row its own " +
                                "context), the pool holds " + std::to_string(rows * row_blocks * block) +
                                " for rows besides the prefill's (GPU memory)";
        std::printf("%-8s %8lld %8lld   skipped: %s\n", "", static_cast<long long>(C), static_cast<long long>(B),
                    why.c_str());
        report["decode"].push_back({{"context", C}, {"batch", B}, {"skipped", why}});
        continue;
      }
      std::vector<std::vector<BlockId>> tables(static_cast<size_t>(B));
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t i = 0; i < row_blocks; ++i) tables[b].push_back(row_block(b, i));
      std::vector<std::int32_t> tokens = random_tokens(TokensFor::decode_tokens, C, B, B, spec.vocab_size);
      auto batch_at = [&](int step, bool fed) {
        std::vector<SequenceStep> batch;
        for (std::int64_t b = 0; b < B; ++b)
          batch.push_back({fed ? std::span<const std::int32_t>() : std::span<const std::int32_t>(&tokens[b], 1),
                           C + step, tables[b], SequenceStep::Logits::last});
        return batch;
      };
      // Steps first .. first + count - 1, all done on return. Launched ahead: each queued before the last one's
      // picks are read, fed them on the device (the first takes `tokens`).
      auto decode_steps = [&](int first, int count) -> Status {
        if (!ahead) {
          for (int step = first; step < first + count; ++step) {
            D0_ASSIGN_OR_RETURN(const Tensor out, ex.step(batch_at(step, false), {}, decode_output));
          }
          return Status::success();
        }
        D0_ASSIGN_OR_RETURN(QueuedDecode next, ex.queue_decode(batch_at(first, false), false));
        for (int step = first; step < first + count; ++step) {
          const QueuedDecode current = next;
          if (step + 1 < first + count) {
            D0_ASSIGN_OR_RETURN(next, ex.queue_decode(batch_at(step + 1, true), true));
          }
          D0_ASSIGN_OR_RETURN(const Tensor picks, ex.wait_decode(current));
        }
        return Status::success();
      };
      // Named for a profiler (scripts/gpu-profile's GPU_PROFILE_NVTX): "decode c1024 b64".
      const NvtxRange range("decode c" + std::to_string(C) + " b" + std::to_string(B));
      if (Status st = decode_steps(0, kWarmup); !st.ok()) return fail(st.error().message);
      const auto t0 = clock::now();
      if (Status st = decode_steps(kWarmup, kSteps); !st.ok()) return fail(st.error().message);
      const double per_step = seconds_since(t0) / kSteps;
      // The traced steps come after the timed ones: CUPTI's records do not touch the timed figure.
      std::unique_ptr<KernelTrace> trace;
      if (kTraced > 0) {
        auto t = KernelTrace::start();
        if (!t.ok()) return fail(t.error().message);
        trace = std::move(*t);
        if (Status st = decode_steps(kWarmup + kSteps, kTraced); !st.ok()) return fail(st.error().message);
      }
      const double bytes =
          step_weight_bytes(spec, B) + double(B) * kv_bytes_read(spec, C, model->ops->kv_cache_dtype());
      // The copy rate counts every byte moved (read + write): the HBM's rate for any mix, reads alone included.
      const double frac = ceil.copy_bytes_per_s > 0 ? bytes / per_step / ceil.copy_bytes_per_s : 0;
      std::printf("%-8s %8lld %8lld %12.3f %14.1f %15.1f%%\n", "", static_cast<long long>(C),
                  static_cast<long long>(B), per_step * 1e3, B / per_step, 100 * frac);
      const char* what = o.decode_logits ? "logits" : ahead ? "greedy, launched ahead" : "greedy";
      report["decode"].push_back({{"context", C}, {"batch", B}, {"returns", what},
                                  {"seconds_per_step", per_step},
                                  {"tokens_per_s", B / per_step}, {"bytes_per_step", bytes},
                                  {"of_copy_bandwidth", frac}});
      if (trace) {
        const std::string what = std::to_string(kTraced) + " decode steps at context " + std::to_string(C) +
                                 ", batch " + std::to_string(B);
        if (Status st = report_trace(*trace, what, report["decode"].back()); !st.ok()) return fail(st.error().message);
      }
    }
  }
  std::printf("\n");
  print_memory_report(*model->ops);
  for (const MemoryUse& u : model->ops->memory_report()) report["memory"][u.what] = u.bytes;
  if (Status st = write_json_report(o.json, report); !st.ok()) return fail(st.error().message);
  return 0;
}

}  // namespace day0::app
