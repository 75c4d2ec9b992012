// bench-moe's dense section: gpt-oss-20b's decode linears at a few row counts, per path, as CUDA-graph replays
// (device time). Weights and inputs are random (fill_uniform_cuda), with enough copies cycled that each call reads
// them from HBM, not the L2 (60 MB on an H200). GB/s counts the weight bytes once per call.
#include "apps/day0/bench_linear.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "apps/day0/bench_operands.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/cuda/linear_small_cuda.h"
#include "ops/cuda/timing.h"

namespace day0::app {
namespace {

struct DenseShape {
  const char* name;
  std::vector<std::int64_t> outs;  // one launch over these weights (q, k, v)
  std::int64_t in;
};

}  // namespace

Status bench_dense_linears(CudaContext& ctx, const std::vector<std::int64_t>& rows, const DeviceCeilings& ceil,
                           nlohmann::json& report) {
  const DenseShape shapes[] = {{"q/k/v (one launch)", {4096, 512, 512}, 2880},
                               {"o projection", {2880}, 4096},
                               {"router", {32}, 2880},
                               {"lm_head", {201088}, 2880}};
  std::printf("\ngpt-oss-20b dense linears (bf16 weights, f32 in and out), CUDA-graph replays:\n");
  std::printf("%7s %-20s %-16s %10s %10s %10s %10s\n", "rows", "linear", "path", "us", "weight MB", "GB/s", "of copy");
  GemmBf16 gemm(ctx);
  DeviceArena& arena = ctx.arena();
  std::uint64_t seed = 100;
  for (const DenseShape& d : shapes) {
    const DeviceArena::Mark mark = arena.mark();
    double bytes = 0;
    for (std::int64_t n : d.outs) bytes += 2.0 * n * d.in;
    const int copies = static_cast<int>(std::max(1.0, std::min(16.0, 240e6 / bytes)));  // > 4x the L2
    std::vector<std::vector<LinearTarget>> sets(copies);
    for (int c = 0; c < copies; ++c)
      for (std::int64_t n : d.outs) {
        D0_ASSIGN_OR_RETURN(Tensor w, random_operand(ctx, {n, d.in}, DType::bf16, 0.05f, seed, "bench weight"));
        D0_ASSIGN_OR_RETURN(Tensor b, random_operand(ctx, {n}, DType::bf16, 0.1f, seed, "bench bias"));
        sets[c].push_back({w, b, Tensor()});
      }
    for (std::int64_t M : rows) {
      const DeviceArena::Mark point = arena.mark();
      D0_ASSIGN_OR_RETURN(Tensor x, random_operand(ctx, {M, d.in}, DType::f32, 1.f, seed, "bench x"));
      D0_ASSIGN_OR_RETURN(Tensor xb, random_operand(ctx, {M, d.in}, DType::bf16, 1.f, seed, "bench x bf16"));
      for (auto& set : sets)
        for (LinearTarget& t : set) {
          D0_ASSIGN_OR_RETURN(t.out, arena.allocate({M, t.w.size(0)}, DType::f32, "bench out"));
        }
      int i = 0;
      auto small = [&] {
        return linear_small_cuda(x, sets[static_cast<size_t>(i++ % copies)], ctx.sm_count(), ctx.stream());
      };
      auto cublas = [&]() -> Status {
        D0_RETURN_IF_ERROR(convert_f32_to_bf16_cuda(x, xb, ctx.stream()));
        for (LinearTarget& t : sets[static_cast<size_t>(i++ % copies)])
          D0_RETURN_IF_ERROR(gemm.run(xb, t.w, t.bias, t.out));
        return Status::success();
      };
      D0_RETURN_IF_ERROR(cublas());  // plans the GEMMs outside the capture
      struct Path {
        const char* name;
        std::function<Status()> fn;
        bool fits;
      };
      // The small-M kernel past 16 rows runs slices of 16, each reading the weights again (from L2 where they fit).
      for (const Path& p : {Path{"small-M kernel", small, M <= 128}, Path{"cuBLASLt", cublas, true}}) {
        if (!p.fits) continue;
        D0_ASSIGN_OR_RETURN(double s, time_graph_median(ctx, 9, p.fn, 4 * copies));
        const double bw = bytes / s;
        std::printf("%7lld %-20s %-16s %10.1f %10.1f %10.0f %9.1f%%\n", static_cast<long long>(M), d.name, p.name,
                    s * 1e6, bytes / 1e6, bw / 1e9, 100 * bw / ceil.copy_bytes_per_s);
        report["dense_linears"].push_back({{"linear", d.name},
                                           {"rows", M},
                                           {"path", p.name},
                                           {"seconds", s},
                                           {"weight_bytes", bytes},
                                           {"bytes_per_s", bw},
                                           {"of_copy_bandwidth", bw / ceil.copy_bytes_per_s}});
      }
      D0_RETURN_IF_ERROR(ctx.synchronize());
      D0_RETURN_IF_ERROR(arena.release(point));
    }
    D0_RETURN_IF_ERROR(arena.release(mark));
  }
  return Status::success();
}

}  // namespace day0::app
