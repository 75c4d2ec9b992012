// day0 bench-moe: the routed-expert kernels at gpt-oss-20b and -120b shapes (random MXFP4 experts, random top-k
// routing, uniform or with --skew uneven) from decode to prefill token counts, against the ceilings measured on the
// same GPU. Per point its routing's load, then (all three rows' kinds are `--parts moe`):
//   matmul  the fused MXFP4 grouped matmul alone on the down shape (H x I), as llama.cpp's mul_mat_id figure,
//           and the tiled grouped GEMM (prefill sizes) on the same shape; the FP8 GEMMs also on the gate_up shape
//           (2I x H, SwiGLU epilogue);
//   group   the device token-to-expert grouping (once per layer, shared by both matmuls);
//   moe     the whole expert block (gate_up, SwiGLU, down, weighted sum) per path: fused MXFP4, online BF16
//           (convert routed experts + cuBLASLt), online FP8 (convert + quantise + cuBLASLt FP8).
// `--parts fp8-gemms` times the FP8 GEMMs' rows alone, for comparing builds of those kernels (all of `moe` took
// 80-90 s a run at 4,096 tokens on the H200, v33; its two warp-specialised rows ~8 s).
// The fused rows are also timed as replays of a CUDA graph of the same calls ("graph": device time without the
// host's launch cost, as a captured decode step runs them). Timed as the median of samples of back-to-back calls
// that cycle through 8 routings, so successive calls touch different experts and the expert bytes mostly come
// from HBM, not the L2. GB/s counts the routed experts' bytes as stored (MXFP4) once per call; TFLOP/s counts
// 2 x assignments x out x in per matrix. Then the dense decode linears (apps/day0/bench_linear.h) and the sampling
// picks (bench_sampling.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "apps/day0/bench_attention.h"
#include "apps/day0/bench_linear.h"
#include "apps/day0/bench_operands.h"
#include "apps/day0/bench_report.h"
#include "apps/day0/bench_sampling.h"
#include "apps/day0/commands.h"
#include "apps/day0/expert_load.h"
#include "ops/cuda/ceilings.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/expert_grouping_cuda.h"
#include "ops/cuda/moe_cuda.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_gemm_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"
#include "ops/cuda/timing.h"
#include "quant/mxfp4.h"

namespace day0::app {
namespace {

constexpr int kRoutings = 8;

struct MoeShape {
  const char* name;
  int E, k;
  std::int64_t H, I;
};

// Random MXFP4 experts [E, out, in] on the device: random nibbles, scale codes 119..123 (|w| up to 6 * 2^-4),
// bf16 bias; with `tiles` the blocks in the tiled order (ExpertStorage::mxfp4_tiled, the device repack placement
// uses).
Result<ExpertWeights> random_experts(CudaContext& ctx, int E, std::int64_t out, std::int64_t in, std::mt19937& rng,
                                     const std::string& what, bool tiles) {
  ExpertWeights w;
  w.n_experts = E, w.out = static_cast<int>(out), w.in = static_cast<int>(in);
  const std::int64_t groups = in / kMxfp4GroupSize;
  Tensor blocks = Tensor::zeros({E, out, groups, kMxfp4GroupBytes}, DType::u8);
  Tensor scales = Tensor::zeros({E, out, groups}, DType::u8);
  Tensor bias = Tensor::zeros({E, out}, DType::bf16);
  std::uint64_t state = rng() | (std::uint64_t(rng()) << 32);
  auto* b64 = reinterpret_cast<std::uint64_t*>(blocks.raw());
  for (std::size_t i = 0; i < blocks.nbytes() / 8; ++i)
    b64[i] = state = state * 6364136223846793005ull + 1442695040888963407ull;
  for (std::int64_t i = 0; i < scales.numel(); ++i) scales.data<std::uint8_t>()[i] = std::uint8_t(119 + rng() % 5);
  for (std::int64_t i = 0; i < bias.numel(); ++i) bias.data<std::uint16_t>()[i] = std::uint16_t(0x3c00 + rng() % 256);
  D0_ASSIGN_OR_RETURN(w.blocks, device_copy(ctx, blocks, what + " blocks"));
  D0_ASSIGN_OR_RETURN(w.scales, device_copy(ctx, scales, what + " scales"));
  D0_ASSIGN_OR_RETURN(w.bias, device_copy(ctx, bias, what + " bias"));
  if (tiles) {
    D0_ASSIGN_OR_RETURN(Tensor tiled, ctx.arena().allocate(mxfp4_tiled_blocks_shape(w.blocks.shape()), DType::u8,
                                                           what + " tiled blocks"));
    D0_RETURN_IF_ERROR(mxfp4_to_tiles_cuda(w.blocks, tiled, ctx.stream()));
    w.blocks = tiled;
    w.storage = ExpertStorage::mxfp4_tiled;
  }
  return w;
}

double mxfp4_bytes(std::int64_t out, std::int64_t in) { return double(out) * in * (0.5 + 1.0 / kMxfp4GroupSize); }

// One routing of S tokens: indices/weights on the device and its grouping, how many experts it touches, and its
// tokens an expert (host copy).
struct Routing {
  Tensor indices, weights;
  Tensor counts, offsets, rows, assignments, experts, n_routed, flag;
  Tensor item_counter;  // the warp-specialised FP8 GEMM's item claims (zero between launches)
  int distinct = 0;
  std::vector<int> per_expert;
  // claims false: that GEMM's CTAs take fixed shares of its items (the A/B row)
  DeviceExpertGroups groups(bool claims = true) const {
    return {offsets, rows, assignments, experts, claims ? item_counter : Tensor()};
  }
};

// Each token's k distinct experts: uniformly, or with skew > 0 in proportion to popularities exp(skew x), x standard
// normal, drawn once for the routing: an uneven load like a trained (or random-weight) router's. H200, v33: skew 0.75
// gives 120b at 4,096 tokens 8 / 97 / 1,308 tokens an expert (least / median / most) and 157.6 tiles of 192, near
// the synthetic 120b's deeper layers (152-159 tiles); uniform routing gives 93 / 128 / 176 and 128 tiles.
Result<Routing> random_routing(CudaContext& ctx, std::int64_t S, const MoeShape& m, double skew, std::mt19937& rng) {
  Routing r;
  Tensor idx = Tensor::zeros({S, m.k}, DType::i32), wts = Tensor::zeros({S, m.k}, DType::f32);
  std::vector<double> popularity(m.E, 1.0);
  std::normal_distribution<double> normal;
  if (skew > 0)
    for (double& p : popularity) p = std::exp(skew * normal(rng));
  std::uniform_real_distribution<double> uniform;
  r.per_expert.assign(m.E, 0);
  std::vector<int> order(m.E);
  std::vector<double> left(m.E);
  for (std::int64_t s = 0; s < S; ++s) {
    for (int e = 0; e < m.E; ++e) order[e] = e;
    left = popularity;
    for (int j = 0; j < m.k; ++j) {
      int pick = 0;
      if (skew > 0) {  // in proportion to what is left: k distinct (the last one left if rounding runs past)
        double total = 0;
        for (double p : left) total += p;
        double x = uniform(rng) * total;
        for (int e = 0; e < m.E; ++e)
          if (left[e] > 0) {
            pick = e;
            if ((x -= left[e]) < 0) break;
          }
        left[pick] = 0;
      } else {  // a partial shuffle
        std::swap(order[j], order[j + rng() % (m.E - j)]);
        pick = order[j];
      }
      idx.data<std::int32_t>()[s * m.k + j] = pick;
      wts.data<float>()[s * m.k + j] = 1.0f / m.k;
      ++r.per_expert[pick];
    }
  }
  r.distinct = static_cast<int>(std::count_if(r.per_expert.begin(), r.per_expert.end(), [](int n) { return n > 0; }));
  DeviceArena& arena = ctx.arena();
  const std::int64_t A = S * m.k;
  D0_ASSIGN_OR_RETURN(r.indices, device_copy(ctx, idx, "routing indices"));
  D0_ASSIGN_OR_RETURN(r.weights, device_copy(ctx, wts, "routing weights"));
  D0_ASSIGN_OR_RETURN(r.counts, arena.allocate({m.E}, DType::i32, "routing counts"));
  D0_ASSIGN_OR_RETURN(r.offsets, arena.allocate({m.E + 1}, DType::i32, "routing offsets"));
  D0_ASSIGN_OR_RETURN(r.rows, arena.allocate({A}, DType::i32, "routing rows"));
  D0_ASSIGN_OR_RETURN(r.assignments, arena.allocate({A}, DType::i32, "routing assignments"));
  D0_ASSIGN_OR_RETURN(r.experts, arena.allocate({m.E}, DType::i32, "routing experts"));
  D0_ASSIGN_OR_RETURN(r.n_routed, arena.allocate({1}, DType::i32, "routing count"));
  D0_ASSIGN_OR_RETURN(r.flag, arena.allocate({1}, DType::i32, "routing flag"));
  D0_ASSIGN_OR_RETURN(r.item_counter, arena.allocate({1}, DType::i32, "routing gemm item claims"));
  D0_CUDA_RETURN_IF_ERROR(cudaMemset(r.flag.raw(), 0, sizeof(std::int32_t)));
  D0_CUDA_RETURN_IF_ERROR(cudaMemset(r.item_counter.raw(), 0, sizeof(std::int32_t)));
  D0_RETURN_IF_ERROR(group_by_expert_cuda(r.indices, m.E, r.counts, r.offsets, r.rows, r.assignments, r.experts,
                                          r.n_routed, r.flag, ctx.stream()));
  return r;
}

// The routings' load: tokens an expert (smallest, median, largest over the routings) and token tiles of the
// warp-specialised FP8 GEMM's width, each taking a tile's fixed cost (its weights converted again).
void report_load(std::int64_t S, const std::vector<Routing>& routings, nlohmann::json& report, const char* shape) {
  std::vector<int> all;
  for (const Routing& r : routings) all.insert(all.end(), r.per_expert.begin(), r.per_expert.end());
  const ExpertLoad load = expert_load_of(std::move(all), kWsFp8TileTokens);
  const double tiles = double(load.tiles) / double(routings.size());  // a routing's, on average
  std::printf("%7lld routing: tokens an expert %d / %d / %d (least / median / most), %.1f tiles of %d\n",
              static_cast<long long>(S), load.least, load.median, load.most, tiles, kWsFp8TileTokens);
  report["moe_routing"].push_back({{"shape", shape},
                                   {"tokens", S},
                                   {"least", load.least},
                                   {"median", load.median},
                                   {"most", load.most},
                                   {"tiles", tiles}});
}

Status bench_shape(CudaContext& ctx, const MoeShape& m, const std::vector<std::int64_t>& token_counts, double skew,
                   bool fp8_gemms_only, bool tiles, const DeviceCeilings& ceil, nlohmann::json& report) {
  std::mt19937 rng(77);
  DeviceArena& arena = ctx.arena();
  const DeviceArena::Mark mark = arena.mark();
  D0_ASSIGN_OR_RETURN(ExpertWeights gate_up, random_experts(ctx, m.E, 2 * m.I, m.H, rng, "gate_up", tiles));
  D0_ASSIGN_OR_RETURN(ExpertWeights down, random_experts(ctx, m.E, m.H, m.I, rng, "down", tiles));
  std::int64_t max_s = 1;
  for (auto s : token_counts) max_s = std::max(max_s, s);
  MoeWorkspaceShape fused{m.E, m.k, m.H, m.I, max_s, ExpertCompute::bf16, ExpertStorage::mxfp4, max_s};
  MoeWorkspaceShape bf16 = fused, fp8 = fused;
  bf16.fused_max_tokens = fp8.fused_max_tokens = 0;
  fp8.compute = ExpertCompute::fp8;
  D0_ASSIGN_OR_RETURN(MoeWorkspace ws_fused, MoeWorkspace::plan(arena, fused));
  D0_ASSIGN_OR_RETURN(MoeWorkspace ws_bf16, MoeWorkspace::plan(arena, bf16));
  D0_ASSIGN_OR_RETURN(MoeWorkspace ws_fp8, MoeWorkspace::plan(arena, fp8));
  MoeGemms gemms(ctx);
  SwigluParams p;
  p.interleaved = true;
  const double gu_bytes = mxfp4_bytes(2 * m.I, m.H), down_bytes = mxfp4_bytes(m.H, m.I);

  std::printf("\n%s: %d experts, top-%d, H %lld, I %lld (expert: gate_up %.1f MB + down %.1f MB as MXFP4, %s)\n",
              m.name, m.E, m.k, static_cast<long long>(m.H), static_cast<long long>(m.I), gu_bytes / 1e6,
              down_bytes / 1e6, tiles ? "tile by tile" : "row-major");
  std::printf("%7s %-22s %10s %12s %10s %10s %10s\n", "tokens", "kernel", "us", "expert MB", "GB/s", "of copy",
              "TFLOP/s");
  for (std::int64_t S : token_counts) {
    const DeviceArena::Mark point = arena.mark();
    std::vector<Routing> routings;
    double distinct = 0;
    for (int r = 0; r < kRoutings; ++r) {
      D0_ASSIGN_OR_RETURN(Routing rt, random_routing(ctx, S, m, skew, rng));
      distinct += rt.distinct / double(kRoutings);
      routings.push_back(std::move(rt));
    }
    report_load(S, routings, report, m.name);
    D0_ASSIGN_OR_RETURN(Tensor x, arena.allocate({S, m.H}, DType::f32, "bench x"));
    D0_ASSIGN_OR_RETURN(Tensor xb, arena.allocate({S, m.I}, DType::bf16, "bench x bf16"));
    D0_ASSIGN_OR_RETURN(Tensor y, arena.allocate({S * m.k, m.H}, DType::f32, "bench y"));
    D0_ASSIGN_OR_RETURN(Tensor out, arena.allocate({S, m.H}, DType::f32, "bench out"));
    D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x.raw(), 0x3c, x.nbytes(), ctx.stream()));  // ~0.01 (0x3c3c3c3c f32)
    D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(xb.raw(), 0x3c, xb.nbytes(), ctx.stream()));
    const double A = double(S) * m.k;
    auto report_row = [&](const char* kernel, double seconds, double bytes, double flops) {
      const double bw = bytes / seconds;
      std::printf("%7lld %-22s %10.1f %12.1f %10.0f %9.1f%% %10.1f\n", static_cast<long long>(S), kernel, seconds * 1e6,
                  bytes / 1e6, bw / 1e9, 100 * bw / ceil.copy_bytes_per_s, flops / seconds / 1e12);
      report["moe_kernels"].push_back({{"shape", m.name}, {"tokens", S}, {"kernel", kernel}, {"seconds", seconds},
                                       {"expert_bytes", bytes}, {"bytes_per_s", bw},
                                       {"of_copy_bandwidth", bw / ceil.copy_bytes_per_s},
                                       {"flops_per_s", flops / seconds}});
    };
    int i = 0;
    auto next = [&]() -> Routing& { return routings[static_cast<size_t>(i++ % kRoutings)]; };
    const int calls = kRoutings * 4;

    bool wide = fused_moe_wide_split(S, false);
    int pass_tokens = 0;  // the kernel's own choice
    auto matmul = [&] {
      Routing& r = next();
      const DeviceExpertGroups g = r.groups();
      return mxfp4_grouped_matmul_cuda(xb, true, down, g, wide, std::min<std::int64_t>(m.E, S * m.k), nullptr, y,
                                       ctx.stream(), pass_tokens);
    };
    auto group = [&] {
      Routing& r = next();
      return group_by_expert_cuda(r.indices, m.E, r.counts, r.offsets, r.rows, r.assignments, r.experts, r.n_routed,
                                  r.flag, ctx.stream());
    };
    auto fused_moe = [&] {
      Routing& r = next();
      return moe_experts_cuda(x, r.indices, r.weights, gate_up, down, p, ws_fused, gemms, out, ctx.stream());
    };
    if (!fp8_gemms_only) {  // the bf16 and fused kernels
      // "graph": the same calls replayed from a CUDA graph (device time; how a captured decode step runs them).
      D0_ASSIGN_OR_RETURN(double t_matmul_graph, time_graph_median(ctx, 9, matmul, calls));
      report_row("matmul fused (graph)", t_matmul_graph, distinct * down_bytes, 2 * A * m.H * m.I);
      if (wide) {  // the 4-warp form at one token: what batch-invariant mode runs, and fused_moe_wide_split's check
        wide = false;
        D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, matmul, calls));
        report_row("  4 warps (graph)", t, distinct * down_bytes, 2 * A * m.H * m.I);
        wide = true;
      }
      if (!wide) {  // both pass widths of the 4-warp form
        for (int pass : {8, 16}) {
          pass_tokens = pass;
          D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, matmul, calls));
          const std::string name = "  " + std::to_string(pass) + "-token passes";
          report_row(name.c_str(), t, distinct * down_bytes, 2 * A * m.H * m.I);
        }
        pass_tokens = 0;
      }
      if (S == 1) {  // the token kernel (no grouping), both forms (moe_experts runs f16 groups): a row per slot
        D0_ASSIGN_OR_RETURN(Tensor xk, arena.allocate({m.k, m.I}, DType::bf16, "bench slot rows"));
        D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(xk.raw(), 0x3c, xk.nbytes(), ctx.stream()));
        auto token = [&] {
          Routing& r = next();
          return mxfp4_token_matmul_cuda(xk, r.indices, down, nullptr, y, r.flag, ctx.stream(), {.slots = true});
        };
        D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, token, calls));
        report_row("matmul token (graph)", t, distinct * down_bytes, 2 * A * m.H * m.I);
        // The f16-groups form (the one moe_experts runs: f16 MMAs, block scales on each group's sum), on the down
        // shape and on gate_up's (SwiGLU, the token as the norm leaves it: f32), where the step spends most.
        D0_ASSIGN_OR_RETURN(Tensor hk, arena.allocate({m.k, m.I}, DType::bf16, "bench slot h"));
        auto down_f16 = [&] {
          Routing& r = next();
          return mxfp4_token_matmul_cuda(xk, r.indices, down, nullptr, y, r.flag, ctx.stream(), {.slots = true},
                                         TokenForm::f16_groups);
        };
        D0_ASSIGN_OR_RETURN(double t_down, time_graph_median(ctx, 9, down_f16, calls));
        report_row("matmul token f16 groups (graph)", t_down, distinct * down_bytes, 2 * A * m.H * m.I);
        auto gate_up_f16 = [&] {
          Routing& r = next();
          return mxfp4_token_matmul_cuda(x, r.indices, gate_up, &p, hk, r.flag, ctx.stream(), {.slots = true},
                                         TokenForm::f16_groups);
        };
        D0_ASSIGN_OR_RETURN(double t_gate_up, time_graph_median(ctx, 9, gate_up_f16, calls));
        report_row("gate_up token f16 groups (graph)", t_gate_up, distinct * gu_bytes, 4 * A * m.H * m.I);
      }
      auto tiled = [&] {
        Routing& r = next();
        const DeviceExpertGroups g = r.groups();
        const std::int64_t slots = mxfp4_gemm_launch_slots(std::min<std::int64_t>(m.E, S * m.k), S * m.k);
        return mxfp4_grouped_gemm_cuda(xb, true, down, g, slots, nullptr, y, ctx.stream());
      };
      D0_ASSIGN_OR_RETURN(double t_tiled, time_graph_median(ctx, 9, tiled, calls));
      report_row("matmul tiled (graph)", t_tiled, distinct * down_bytes, 2 * A * m.H * m.I);
      for (int tile : {32, 64, 128}) {  // the warpgroup-MMA GEMM, every token tile
        auto wgmma = [&] {
          Routing& r = next();
          const DeviceExpertGroups g = r.groups();
          const std::int64_t slots = mxfp4_wgmma_launch_slots(std::min<std::int64_t>(m.E, S * m.k), S * m.k, tile);
          return mxfp4_grouped_gemm_wgmma_cuda(xb, true, down, g, tile, slots, nullptr, y, ctx.stream());
        };
        D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, wgmma, calls));
        const std::string name = "matmul wgmma " + std::to_string(tile) + " (graph)";
        report_row(name.c_str(), t, distinct * down_bytes, 2 * A * m.H * m.I);
      }
    }
    {  // the FP8 warpgroup-MMA GEMM on quantised token rows (E4M3 1.0, scales 0: timing only)
      D0_ASSIGN_OR_RETURN(Tensor x8, arena.allocate({S * m.k, m.I}, DType::f8_e4m3, "bench x fp8"));
      D0_ASSIGN_OR_RETURN(Tensor sx, arena.allocate({S * m.k}, DType::f32, "bench x fp8 scales"));
      D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(x8.raw(), 0x38, x8.nbytes(), ctx.stream()));
      D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sx.raw(), 0, sx.nbytes(), ctx.stream()));
      // 16: the decode-sized form (weights converted in registers); 192: the warp-specialised form, its items
      // claimed as CTAs free up, then in fixed shares (the A/B row)
      for (const auto& [tile, claims] : {std::pair{16, true}, std::pair{64, true}, std::pair{128, true},
                                         std::pair{192, true}, std::pair{192, false}}) {
        auto fp8 = [&, tile = tile, claims = claims] {
          Routing& r = next();
          const DeviceExpertGroups g = r.groups(claims);
          const std::int64_t slots = mxfp4_wgmma_launch_slots(std::min<std::int64_t>(m.E, S * m.k), S * m.k, tile);
          return mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, false, down, g, tile, slots, nullptr, y, ctx.stream());
        };
        D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, fp8, calls));
        const std::string name =
            "matmul wgmma fp8 " + std::to_string(tile) + (claims ? "" : " fixed items") + " (graph)";
        report_row(name.c_str(), t, distinct * down_bytes, 2 * A * m.H * m.I);
      }
      // gate_up with SwiGLU (its halves out in f32 by entry) on token rows, as the MoE routes it below
      // kWsFp8MinTokensPerExpert tokens an expert (16: the decode-sized form; 128: the 2-CTA GEMM), and the
      // warp-specialised form on rows by entry.
      for (const auto& [tile, by_token] : {std::pair{16, true}, std::pair{128, true}, std::pair{192, false}}) {
        auto fp8 = [&] {
          Routing& r = next();
          const DeviceExpertGroups g = r.groups();
          const std::int64_t slots = mxfp4_wgmma_launch_slots(std::min<std::int64_t>(m.E, S * m.k), S * m.k, tile);
          return mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, by_token, gate_up, g, tile, slots, &p, y, ctx.stream());
        };
        D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, fp8, calls));
        const std::string name = "gate_up fp8 " + std::to_string(tile) + " (graph)";
        report_row(name.c_str(), t, distinct * gu_bytes, 4 * A * m.H * m.I);
      }
      {  // the same without the SwiGLU epilogue (both halves out, f32 by assignment), on either form, then SwiGLU in
         // the quantisation of h: the MoE's route on the warp-specialised form (its inputs quantised by entry, not
         // timed here)
        D0_ASSIGN_OR_RETURN(Tensor gu, arena.allocate({S * m.k, 2 * m.I}, DType::f32, "bench gate_up f32"));
        D0_ASSIGN_OR_RETURN(Tensor h8, arena.allocate({S * m.k, m.I}, DType::f8_e4m3, "bench h fp8"));
        D0_ASSIGN_OR_RETURN(Tensor sh, arena.allocate({S * m.k}, DType::f32, "bench h fp8 scales"));
        // claims false: the warp-specialised form's fixed shares of its items (the A/B row)
        auto plain_on = [&](Routing& r, int tile, bool by_token, bool claims) {
          const std::int64_t slots = mxfp4_wgmma_launch_slots(std::min<std::int64_t>(m.E, S * m.k), S * m.k, tile);
          return mxfp4_grouped_gemm_wgmma_fp8_cuda(x8, sx, by_token, gate_up, r.groups(claims), tile, slots, nullptr,
                                                   gu, ctx.stream());
        };
        for (const auto& [tile, by_token] : {std::pair{128, true}, std::pair{192, false}}) {
          auto plain = [&, tile = tile, by_token = by_token] { return plain_on(next(), tile, by_token, true); };
          D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, plain, calls));
          const std::string name = "gate_up fp8 " + std::to_string(tile) + " plain (graph)";
          report_row(name.c_str(), t, distinct * gu_bytes, 4 * A * m.H * m.I);
          // and with that SwiGLU and quantisation pass after it (entry p from row assignments[p]): what the SwiGLU
          // epilogue and the quantisation of h do on the other route
          auto plain_swiglu_after = [&, tile = tile, by_token = by_token]() -> Status {
            Routing& r = next();
            D0_RETURN_IF_ERROR(plain_on(r, tile, by_token, true));
            return gather_swiglu_quantize_fp8_cuda(gu, r.assignments, p, h8, sh, r.flag, ctx.stream());
          };
          D0_ASSIGN_OR_RETURN(double t2, time_graph_median(ctx, 9, plain_swiglu_after, calls));
          report_row("  + swiglu-quantise (graph)", t2, distinct * gu_bytes, 4 * A * m.H * m.I);
        }
        auto plain_fixed = [&] { return plain_on(next(), 192, false, false); };
        D0_ASSIGN_OR_RETURN(double t_fixed, time_graph_median(ctx, 9, plain_fixed, calls));
        report_row("gate_up fp8 192 plain fixed items (graph)", t_fixed, distinct * gu_bytes, 4 * A * m.H * m.I);
      }
    }
    if (!fp8_gemms_only) {  // the grouping and the whole expert block by path
      D0_ASSIGN_OR_RETURN(double t_matmul, time_median(ctx, 9, matmul, calls));
      report_row("matmul fused mxfp4", t_matmul, distinct * down_bytes, 2 * A * m.H * m.I);
      D0_ASSIGN_OR_RETURN(double t_group_graph, time_graph_median(ctx, 9, group, calls));
      report_row("group (graph)", t_group_graph, 0, 0);
      D0_ASSIGN_OR_RETURN(double t_group, time_median(ctx, 9, group, calls));
      report_row("group (device)", t_group, 0, 0);

      const double moe_bytes = distinct * (gu_bytes + down_bytes), moe_flops = 2 * A * 3 * m.H * m.I;
      D0_RETURN_IF_ERROR(fused_moe());  // zeroes the error flag outside the capture
      D0_ASSIGN_OR_RETURN(double t_moe_graph, time_graph_median(ctx, 9, fused_moe, calls));
      report_row("moe fused (graph)", t_moe_graph, moe_bytes, moe_flops);
      struct Path {
        const char* name;
        MoeWorkspace* ws;
      };
      for (const Path& path : {Path{"moe fused mxfp4", &ws_fused}, Path{"moe online bf16", &ws_bf16},
                               Path{"moe online fp8", &ws_fp8}}) {
        D0_ASSIGN_OR_RETURN(double t, time_median(ctx, 9, [&] {
          Routing& r = next();
          return moe_experts_cuda(x, r.indices, r.weights, gate_up, down, p, *path.ws, gemms, out, ctx.stream());
        }, calls));
        report_row(path.name, t, moe_bytes, moe_flops);
      }
    }
    D0_RETURN_IF_ERROR(ctx.synchronize());
    D0_RETURN_IF_ERROR(arena.release(point));
  }
  D0_RETURN_IF_ERROR(arena.release(mark));
  return Status::success();
}

}  // namespace

int bench_moe(const BenchMoeOptions& o) {
  CudaContextOptions co;
  co.arena_bytes = static_cast<std::size_t>(o.arena_gib * double(std::size_t(1) << 30));
  auto ctx = CudaContext::create(co);
  if (!ctx.ok()) return fail(ctx.error().message);
  auto ceil = measure_ceilings(**ctx);
  if (!ceil.ok()) return fail(ceil.error().message);
  nlohmann::json report;
  report_ceilings(*ceil, report);
  const bool tiles = o.mxfp4_order != "rows";
  report["mxfp4_order"] = tiles ? "tiles" : "rows";
  auto wanted = [&](const char* part) { return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end(); };
  const MoeShape shapes[] = {{"gpt-oss-20b", 32, 4, 2880, 2880}, {"gpt-oss-120b", 128, 4, 2880, 2880}};
  if (wanted("moe") || wanted("fp8-gemms"))
    for (const MoeShape& m : shapes)
      if (Status st = bench_shape(**ctx, m, o.tokens, o.skew, !wanted("moe"), tiles, *ceil, report); !st.ok())
        return fail(st.error().message);
  if (wanted("linears"))
    if (Status st = bench_dense_linears(**ctx, {1, 8, 16, 32, 64, 128, 2048}, *ceil, report); !st.ok())
      return fail(st.error().message);
  if (wanted("sampling"))
    if (Status st = bench_token_draws(**ctx, {1, 8, 64}, *ceil, report); !st.ok()) return fail(st.error().message);
  if (wanted("decode-attention"))
    if (Status st = bench_decode_attention(**ctx, *ceil, report); !st.ok()) return fail(st.error().message);
  if (wanted("prefill-attention"))
    if (Status st = bench_prefill_attention(**ctx, *ceil, o.tokens, report); !st.ok())
      return fail(st.error().message);
  if (Status st = write_json_report(o.json, report); !st.ok()) return fail(st.error().message);
  return 0;
}

}  // namespace day0::app
