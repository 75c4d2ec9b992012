// day0 inspect: architecture summary, parameter counts, bytes by dtype, op coverage, weight check.
// Works from config.json alone; with weights present it also checks every expected tensor.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "apps/day0/commands.h"
#include "arch/registry.h"
#include "io/checkpoint.h"
#include "model/executor.h"
#include "model/op_plan.h"
#include "model/weights.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/registry.h"
#include "quant/mxfp4_tiles.h"
#include "tokenizer/chat_template.h"

namespace day0::app {

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

namespace {

// Parameter counts: billions for real models, exact below a million (tiny fixtures).
std::string billions(double n) {
  char buf[32];
  if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.3f B", n / 1e9);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

std::string gigabytes(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, n >= 1e8 ? "%.2f GB" : "%.1f KB", n >= 1e8 ? n / 1e9 : n / 1e3);
  return buf;
}

void print_summary(const ModelSpec& spec) {
  std::map<std::string, int> types;
  for (const auto& L : spec.layers) ++types[L.layer_type];
  std::printf("family        %s (%s)\n", spec.family.c_str(), spec.architecture.c_str());
  std::printf("layers        %zu:", spec.layers.size());
  for (auto& [t, n] : types) std::printf(" %d %s", n, t.c_str());
  std::printf("\nhidden        %d, vocab %d, max positions %d, embeddings %s\n", spec.hidden_size, spec.vocab_size,
              spec.max_position, spec.tie_embeddings ? "tied" : "untied");
  if (!spec.layers.empty()) {
    const AttentionSpec& a = spec.layers[0].mixer.attention;
    const MoESpec& m = spec.layers[0].channel.moe;
    std::printf("attention     %d heads / %d kv heads, head_dim %d%s", a.n_heads, a.n_kv_heads, a.head_dim,
                a.sinks ? ", sinks" : "");
    for (const auto& L : spec.layers)
      if (L.mixer.attention.sliding_window > 0) {
        std::printf(", sliding window %d", L.mixer.attention.sliding_window);
        break;
      }
    if (a.rope.kind == RopeKind::yarn)
      std::printf(", YaRN theta %g factor %g (attention factor %.4f)", a.rope.theta, a.rope.factor,
                  a.rope.attention_factor);
    const std::string format(expert_format_name(m.gate_up.format));
    const bool converted = spec.quantization == kConvertedQuantMethod;
    std::printf("\nmoe           %d experts, top-%d, intermediate %d, %s experts%s, swiglu limit %g\n", m.n_experts,
                m.top_k, m.intermediate, format.c_str(), converted ? " (converted from mxfp4 by day0 convert)" : "",
                m.swiglu_limit);
  }
}

// Parameters and bytes; dtypes come from the checkpoint when present, else the first accepted dtype.
void print_sizes(const ModelSpec& spec, const Checkpoint* checkpoint) {
  const std::set<std::string> expert_storage = expert_tensor_names(spec);
  const std::string format =
      spec.layers.empty() ? "" : std::string(expert_format_name(spec.layers[0].channel.moe.gate_up.format));
  double total = 0, active = 0;
  std::map<std::string, double> by_group;
  std::map<std::string, double> bytes_by_dtype;
  for (const auto& w : spec.weights) {
    total += w.logical_params;
    by_group[w.group] += w.logical_params;
    // Active = what one token's forward multiplies by: routed experts count k/E; the embedding table is
    // only indexed (the published model cards count it out too), unless it doubles as the tied lm_head.
    double share = (w.group == "embedding" && !spec.tie_embeddings) ? 0.0 : 1.0;
    if (w.expert && !spec.layers.empty())
      share = double(spec.layers[0].channel.moe.top_k) / spec.layers[0].channel.moe.n_experts;
    active += w.logical_params * share;
    DType dt = w.dtypes.front();
    if (checkpoint)
      if (const auto* e = checkpoint->find(w.name)) dt = e->info->dtype;
    double numel = 1;
    for (auto d : w.shape) numel *= double(d);
    std::string key(dtype_name(dt));
    if (expert_storage.count(w.name))
      key += dt == DType::u8    ? " (mxfp4 blocks+scales)"
             : dt == DType::f32 ? " (" + format + " row scales)"
                                : " (" + format + " experts)";
    bytes_by_dtype[key] += numel * dtype_bits(dt) / 8;
  }
  std::printf("parameters    %s total, %s active per token\n", billions(total).c_str(), billions(active).c_str());
  for (auto& [g, n] : by_group) std::printf("  %-11s %s\n", g.c_str(), billions(n).c_str());
  double all = 0;
  for (auto& [d, b] : bytes_by_dtype) all += b;
  std::printf("bytes         %s%s\n", gigabytes(all).c_str(), checkpoint ? "" : " (published layout, from config)");
  for (auto& [d, b] : bytes_by_dtype) std::printf("  %-25s %s\n", d.c_str(), gigabytes(b).c_str());
}

bool print_coverage(const ModelSpec& spec, const std::string& backend) {
  std::printf("op coverage   backend %s\n", backend.c_str());
  bool complete = true;
  for (const auto& use : ops_used(spec)) {
    auto entry = op_coverage(backend, use.kind);
    if (!entry.ok()) {
      fail(entry.error().message);
      return false;
    }
    complete &= *entry != OpEntry::missing;
    std::printf("  %-20s %-9s %s\n", std::string(op_kind_name(use.kind)).c_str(),
                std::string(op_entry_name(*entry)).c_str(), use.detail.c_str());
  }
  if (!complete) std::printf("  (ops marked missing must be implemented before this backend can run the model)\n");
  return true;
}

// What the CUDA backend reserves for this model besides the KV cache, computed without a GPU: weights as
// placed (experts as stored, MXFP4 blocks in the default order, dense matrices bf16), the one MoE workspace, and KV
// bytes per token.
bool print_cuda_plan(const ModelSpec& spec, ExpertCompute compute) {
  const std::set<std::string> expert_storage = expert_tensor_names(spec);
  // MXFP4 blocks tiled (K padded to whole tiles) as CudaOps::place_weights decides by default.
  auto mxfp4_blocks = [&](const WeightDecl& w) {
    return expert_storage.count(w.name) && is_mxfp4_blocks(w.dtypes.front(), w.shape);
  };
  std::vector<Mxfp4BlocksTensor> blocks;
  for (const auto& w : spec.weights)
    if (mxfp4_blocks(w)) blocks.push_back({w.name, w.shape[1]});
  const Result<bool> tiled_order = mxfp4_places_tiled(Mxfp4Order::automatic, blocks);  // automatic never errs
  const bool tiled = tiled_order.ok() && *tiled_order;
  double experts = 0, dense = 0;
  for (const auto& w : spec.weights) {
    double n = 1;
    for (auto d : w.shape) n *= double(d);
    if (tiled && mxfp4_blocks(w)) experts += double(mxfp4_tiled_bytes(w.shape[0] * w.shape[1], w.shape[2]));
    else if (expert_storage.count(w.name)) experts += n * dtype_bits(w.dtypes.front()) / 8;
    else dense += n * 2;
  }
  const std::int64_t max_step = ExecutorOptions{}.max_step_tokens;
  const OpsPlan plan = ops_plan(spec, max_step);
  std::printf("cuda plan     weights on device %s (experts %s %s, dense as bf16 %s)\n",
              gigabytes(experts + dense).c_str(), tiled ? "in the tiled MXFP4 order" : "as stored",
              gigabytes(experts).c_str(), gigabytes(dense).c_str());
  if (plan.n_experts > 0) {
    if (Status st = check_expert_compute(plan.expert_storage, compute); !st.ok()) {
      compute = compute == ExpertCompute::bf16 ? ExpertCompute::fp8 : ExpertCompute::bf16;
      std::printf("  note          %s; planned with %s\n", st.error().message.c_str(),
                  std::string(expert_compute_name(compute)).c_str());
    }
    BackendOptions defaults;
    defaults.expert_compute = compute;
    const MoeWorkspaceShape shape{plan.n_experts, plan.top_k,          plan.hidden,
                                  plan.intermediate, max_step,         compute,
                                  plan.expert_storage, defaults.fused_moe_tokens()};
    auto bytes = moe_workspace_bytes(shape);
    if (!bytes.ok()) {
      fail(bytes.error().message);
      return false;
    }
    const std::int64_t routed = std::min<std::int64_t>(plan.n_experts, max_step * plan.top_k);
    if (plan.expert_storage == ExpertStorage::mxfp4)
      std::printf("  moe workspace %s once for all layers: %lld routed experts converted online (%s) at %lld tokens "
                  "per step%s\n",
                  format_bytes(*bytes).c_str(), static_cast<long long>(routed),
                  std::string(expert_compute_name(compute)).c_str(), static_cast<long long>(max_step),
                  (", and the fused MXFP4 path's buffers up to " +
                   std::to_string(std::min(max_step, defaults.fused_moe_tokens())) + " tokens (bf16 compute)")
                      .c_str());
    else
      std::printf("  moe workspace %s once for all layers: experts stored as %s, read in place (%s GEMMs) at %lld "
                  "tokens per step\n",
                  format_bytes(*bytes).c_str(), std::string(expert_storage_name(plan.expert_storage)).c_str(),
                  std::string(expert_compute_name(compute)).c_str(), static_cast<long long>(max_step));
  }
  auto kv = kv_bytes_per_token(kv_layout(spec, 16, DType::bf16));
  if (!kv.ok()) {
    fail(kv.error().message);
    return false;
  }
  std::printf("  kv cache      %s per token (bf16 K and V, the default, %zu layers; twice with --kv-cache-dtype f32)\n",
              format_bytes(std::size_t(*kv)).c_str(), spec.layers.size());
  return true;
}

// Tokenizer summary, and how the given prompt (if any) renders and tokenizes.
bool print_tokenizer(const InspectOptions& o) {
  auto tokenizer = load_tokenizer(o.dir);
  if (!tokenizer.ok()) {
    fail(tokenizer.error().message);
    return false;
  }
  const Tokenizer* tok = *tokenizer ? &**tokenizer : nullptr;
  if (tok) {
    auto chat = ChatTemplate::from_dir(o.dir);
    if (!chat.ok()) {
      fail(chat.error().message);
      return false;
    }
    std::printf("tokenizer     vocab %d, chat template %s\n", tok->vocab_size(), chat->has_value() ? "yes" : "no");
  }
  if (!o.prompt.given()) return true;
  auto prompt = resolve_prompt(o.dir, o.prompt, tok);
  if (!prompt.ok()) {
    fail(prompt.error().message);
    return false;
  }
  if (!prompt->rendered.empty()) std::printf("rendered      %s\n", prompt->rendered.c_str());
  std::printf("prompt        %zu tokens:", prompt->ids.size());
  for (auto id : prompt->ids) std::printf(" %d", id);
  std::printf("\n");
  return true;
}

}  // namespace

int inspect(const InspectOptions& o) {
  auto compute = parse_expert_compute(o.expert_compute);
  if (!compute.ok()) return fail(compute.error().message);
  auto spec = model_spec_from_dir(o.dir);
  if (!spec.ok()) return fail(spec.error().message);
  std::printf("model         %s\n", o.dir.c_str());
  print_summary(*spec);
  if (!print_tokenizer(o)) return 1;
  if (!Checkpoint::has_weights(o.dir)) {
    print_sizes(*spec, nullptr);
    if (!print_coverage(*spec, o.backend)) return 1;
    if (o.backend == "cuda" && !print_cuda_plan(*spec, *compute)) return 1;
    std::printf("weights       none in %s (config-only inspection)\n", o.dir.c_str());
    return 0;
  }
  auto checkpoint = Checkpoint::open_dir(o.dir);
  if (!checkpoint.ok()) return fail(checkpoint.error().message);
  print_sizes(*spec, &*checkpoint);
  if (!print_coverage(*spec, o.backend)) return 1;
  if (o.backend == "cuda" && !print_cuda_plan(*spec, *compute)) return 1;
  const WeightCheck check = check_weights(*spec, *checkpoint);
  std::printf("weights       %zu files, %zu tensors expected, %zu problems, %zu unexpected\n",
              checkpoint->files().size(), spec->weights.size(), check.problems.size(), check.unexpected.size());
  for (const auto& p : check.problems) std::printf("  problem     %s: %s\n", p.name.c_str(), p.fault.c_str());
  for (const auto& n : check.unexpected) std::printf("  unexpected  %s\n", n.c_str());
  if (!check.ok())
    return fail(std::to_string(check.problems.size()) + " weight problem(s) in " + o.dir + "; first: " +
                check.problems[0].name + ": " + check.problems[0].fault);
  return 0;
}

}  // namespace day0::app
