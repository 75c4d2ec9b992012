// bench-moe's decode attention section: gpt-oss's attention (64 query heads over 8 KV heads, head_dim 64, sinks,
// bf16 KV cache in blocks of 16) for a step of B sequences with one query each at `context` keys, their block
// tables `capacity` keys wide, full and sliding (128-key) layers, as CUDA-graph replays (device time). Random
// operands (fill_uniform_cuda); enough copies of the KV blocks cycled that each call reads them from HBM, not the
// L2. KV bytes: the key and value rows each query reads once.
// Its prefill section: one sequence of S prompt tokens on the tensor-core kernel as CudaOps runs a prefill step
// (bf16 operands from the bf16 pool, sinks), full and sliding layers; the KV rows were just written, so they are
// read from the L2 as in a prefill. FLOPs: the scores and weighted sums of the keys each query sees.
#include "apps/day0/bench_attention.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "apps/day0/bench_operands.h"
#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_tc_cuda.h"
#include "ops/cuda/timing.h"

namespace day0::app {
namespace {

constexpr std::int64_t kBlock = 16;

struct AttentionPoint {
  std::int64_t batch, context, capacity;
  int forced_splits;  // 0: attention_splits' choice
};

}  // namespace

Status bench_decode_attention(CudaContext& ctx, const DeviceCeilings& ceil, nlohmann::json& report) {
  const AttentionPoint points[] = {{1, 1024, 1024, 0}, {1, 1024, 1024, 1}, {1, 1024, 8192, 0},  {1, 8192, 8192, 0},
                                   {8, 1024, 1024, 0}, {8, 1024, 8192, 0}, {64, 1024, 1024, 0}, {64, 8192, 8192, 0}};
  std::printf("\ngpt-oss decode attention (64 heads over 8, d 64, bf16 KV, sinks), CUDA-graph replays:\n");
  std::printf("%6s %8s %9s %8s %7s %10s %10s %10s %10s\n", "batch", "context", "capacity", "window", "splits", "us",
              "KV MB", "GB/s", "of copy");
  DeviceArena& arena = ctx.arena();
  std::uint64_t seed = 500;
  for (const AttentionPoint& pt : points)
    for (int window : {0, 128}) {
      const DeviceArena::Mark mark = arena.mark();
      const AttentionParams p{64, 8, 64, window, 0.125f};
      const std::int64_t B = pt.batch, blocks_per_seq = pt.capacity / kBlock, width = p.n_kv_heads * p.head_dim;
      const std::int64_t keys_read = window > 0 ? std::min<std::int64_t>(window, pt.context) : pt.context;
      const double kv_bytes = 2.0 * B * keys_read * width * 2;  // K and V, bf16
      const std::int64_t pool_bytes = 2 * B * pt.capacity * width * 2;
      const int copies =
          static_cast<int>(std::clamp<double>(240e6 / kv_bytes, 1, std::max<double>(1, 4e9 / pool_bytes)));
      const std::int64_t rows = copies * B * pt.capacity;
      D0_ASSIGN_OR_RETURN(Tensor k_pool, random_operand(ctx, {rows, width}, DType::bf16, 1.f, seed, "bench k pool"));
      D0_ASSIGN_OR_RETURN(Tensor v_pool, random_operand(ctx, {rows, width}, DType::bf16, 1.f, seed, "bench v pool"));
      D0_ASSIGN_OR_RETURN(Tensor q, random_operand(ctx, {B, p.n_heads * p.head_dim}, DType::f32, 1.f, seed, "bench q"));
      D0_ASSIGN_OR_RETURN(Tensor sinks, random_operand(ctx, {p.n_heads}, DType::bf16, 1.f, seed, "bench sinks"));
      D0_ASSIGN_OR_RETURN(Tensor out, arena.allocate({B, p.n_heads * p.head_dim}, DType::f32, "bench out"));
      Tensor pos = Tensor::zeros({B}, DType::i32), seq = Tensor::zeros({B}, DType::i32);
      for (std::int64_t b = 0; b < B; ++b) {
        pos.data<std::int32_t>()[b] = static_cast<std::int32_t>(pt.context - 1);
        seq.data<std::int32_t>()[b] = static_cast<std::int32_t>(b);
      }
      D0_ASSIGN_OR_RETURN(Tensor q_pos, device_copy(ctx, pos, "bench positions"));
      D0_ASSIGN_OR_RETURN(Tensor q_seq, device_copy(ctx, seq, "bench sequences"));
      std::vector<PagedKv> tables;  // copy c: its own blocks of the pool
      for (int c = 0; c < copies; ++c) {
        Tensor t = Tensor::zeros({B, blocks_per_seq}, DType::i32);
        for (std::int64_t i = 0; i < t.numel(); ++i)
          t.data<std::int32_t>()[i] = static_cast<std::int32_t>(c * B * blocks_per_seq + i);
        D0_ASSIGN_OR_RETURN(Tensor bt, device_copy(ctx, t, "bench block tables"));
        tables.push_back({bt, q_seq, kBlock});
      }
      AttentionSplit split;
      split.splits = pt.forced_splits > 0 ? pt.forced_splits : attention_splits(B, p, pt.capacity, ctx.sm_count());
      if (split.splits > 1) {
        D0_ASSIGN_OR_RETURN(split.partials, arena.allocate({attention_partials_floats(B, p, split.splits)}, DType::f32,
                                                           "bench attention partials"));
      }
      int i = 0;
      auto step = [&] {
        return paged_attention_cuda(q, k_pool, v_pool, q_pos, tables[static_cast<size_t>(i++ % copies)], sinks, p, out,
                                    ctx.stream(), split);
      };
      D0_ASSIGN_OR_RETURN(double s, time_graph_median(ctx, 9, step, 4 * copies));
      const double bw = kv_bytes / s;
      std::printf("%6lld %8lld %9lld %8d %7d %10.1f %10.2f %10.0f %9.1f%%%s\n", static_cast<long long>(B),
                  static_cast<long long>(pt.context), static_cast<long long>(pt.capacity), window, split.splits,
                  s * 1e6, kv_bytes / 1e6, bw / 1e9, 100 * bw / ceil.copy_bytes_per_s,
                  pt.forced_splits > 0 ? "  (split count forced)" : "");
      report["decode_attention"].push_back({{"batch", B},
                                            {"context", pt.context},
                                            {"capacity", pt.capacity},
                                            {"window", window},
                                            {"splits", split.splits},
                                            {"forced", pt.forced_splits > 0},
                                            {"seconds", s},
                                            {"kv_bytes", kv_bytes},
                                            {"bytes_per_s", bw},
                                            {"of_copy_bandwidth", bw / ceil.copy_bytes_per_s}});
      D0_RETURN_IF_ERROR(ctx.synchronize());
      D0_RETURN_IF_ERROR(arena.release(mark));
    }
  return Status::success();
}

Status bench_prefill_attention(CudaContext& ctx, const DeviceCeilings& ceil, const std::vector<std::int64_t>& tokens,
                               nlohmann::json& report) {
  std::printf("\ngpt-oss prefill attention (one sequence, 64 heads over 8, d 64, bf16 KV and operands, sinks, "
              "bf16 output only), CUDA-graph replays:\n");
  std::printf("%8s %8s %10s %10s %10s %10s\n", "tokens", "window", "us", "GFLOP", "TFLOP/s", "of bf16");
  DeviceArena& arena = ctx.arena();
  std::uint64_t seed = 900;
  for (const std::int64_t S : tokens) {
    const AttentionParams p{64, 8, 64, 0, 0.125f};
    if (!attention_tc_fits(S, p)) continue;  // shorter prompts take the per-query kernel: decode's figures
    for (int window : {0, 128}) {
      const DeviceArena::Mark mark = arena.mark();
      AttentionParams pw = p;
      pw.sliding_window = window;
      const std::int64_t blocks = (S + kBlock - 1) / kBlock, width = p.n_kv_heads * p.head_dim;
      D0_ASSIGN_OR_RETURN(Tensor k_pool, random_operand(ctx, {blocks * kBlock, width}, DType::bf16, 1.f, seed, "bench k"));
      D0_ASSIGN_OR_RETURN(Tensor v_pool, random_operand(ctx, {blocks * kBlock, width}, DType::bf16, 1.f, seed, "bench v"));
      D0_ASSIGN_OR_RETURN(Tensor q, random_operand(ctx, {S, p.n_heads * p.head_dim}, DType::f32, 1.f, seed, "bench q"));
      D0_ASSIGN_OR_RETURN(Tensor sinks, random_operand(ctx, {p.n_heads}, DType::bf16, 1.f, seed, "bench sinks"));
      D0_ASSIGN_OR_RETURN(Tensor out, arena.allocate({S, p.n_heads * p.head_dim}, DType::f32, "bench out"));
      D0_ASSIGN_OR_RETURN(Tensor out_bf16, arena.allocate({S, p.n_heads * p.head_dim}, DType::bf16, "bench out bf16"));
      Tensor pos = Tensor::zeros({S}, DType::i32), table = Tensor::zeros({1, blocks}, DType::i32);
      double keys_seen = 0;
      for (std::int64_t s = 0; s < S; ++s) {
        pos.data<std::int32_t>()[s] = static_cast<std::int32_t>(s);
        keys_seen += window > 0 ? std::min<std::int64_t>(s + 1, window) : s + 1;
      }
      for (std::int64_t b = 0; b < blocks; ++b) table.data<std::int32_t>()[b] = static_cast<std::int32_t>(b);
      D0_ASSIGN_OR_RETURN(Tensor q_pos, device_copy(ctx, pos, "bench positions"));
      D0_ASSIGN_OR_RETURN(Tensor q_seq, device_copy(ctx, Tensor::zeros({S}, DType::i32), "bench sequences"));
      D0_ASSIGN_OR_RETURN(Tensor bt, device_copy(ctx, table, "bench block table"));
      const PagedKv kv{bt, q_seq, kBlock};
      AttentionSplit split;  // as a prefill runs it: only the o projection's bf16 input written
      split.tensor_cores = split.bf16_operands = split.bf16_only = true;
      split.out_bf16 = out_bf16;
      auto step = [&] { return paged_attention_cuda(q, k_pool, v_pool, q_pos, kv, sinks, pw, out, ctx.stream(), split); };
      D0_ASSIGN_OR_RETURN(double t, time_graph_median(ctx, 9, step, 4));
      const double flops = 4.0 * p.head_dim * p.n_heads * keys_seen;  // QK^T and PV, 2 FLOPs a multiply-add
      std::printf("%8lld %8d %10.1f %10.1f %10.1f %9.1f%%\n", static_cast<long long>(S), window, t * 1e6, flops / 1e9,
                  flops / t / 1e12, 100 * flops / t / ceil.bf16_flops);
      report["prefill_attention"].push_back({{"tokens", S},
                                             {"window", window},
                                             {"seconds", t},
                                             {"flops", flops},
                                             {"of_bf16_rate", flops / t / ceil.bf16_flops}});
      D0_RETURN_IF_ERROR(ctx.synchronize());
      D0_RETURN_IF_ERROR(arena.release(mark));
    }
  }
  return Status::success();
}

}  // namespace day0::app
