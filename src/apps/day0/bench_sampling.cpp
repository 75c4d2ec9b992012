// bench-moe's sampling section: a decode step's picks over 201,088-id logits rows, as CUDA-graph replays (device
// time), and with each row's logprobs (row_logprobs_cuda: its pick's and its top n). The logits are uniform in
// [-8, 8) (every row's top-p set is then thousands of ids: a slow case for the cutoff's passes). GB/s counts the
// logits once per call, against the copy ceiling.
#include "apps/day0/bench_sampling.h"

#include <cstdio>
#include <string>

#include "apps/day0/bench_operands.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/timing.h"
#include "ops/token_draw.h"

namespace day0::app {
namespace {

struct DrawCase {
  const char* name;
  bool drawn;
  std::int32_t top_k;
  double top_p, min_p;
  std::int32_t logprob_top = -1;  // >= 0: each row's logprobs too, with this many top
};

}  // namespace

Status bench_token_draws(CudaContext& ctx, const std::vector<std::int64_t>& rows, const DeviceCeilings& ceil,
                         nlohmann::json& report) {
  constexpr std::int64_t V = 201088;
  const DrawCase cases[] = {{"greedy", false, 0, 1.0, 0.0},
                            {"temperature 1", true, 0, 1.0, 0.0},
                            {"min-p 0.05", true, 0, 1.0, 0.05},
                            {"top-p 0.9", true, 0, 0.9, 0.0},
                            {"top-k 50", true, 50, 1.0, 0.0},
                            {"top-k 50, top-p 0.9", true, 50, 0.9, 0.0},
                            {"greedy, logprobs", false, 0, 1.0, 0.0, 0},
                            {"greedy, 5 top logprobs", false, 0, 1.0, 0.0, 5},
                            {"greedy, 20 top logprobs", false, 0, 1.0, 0.0, 20}};
  std::printf("\nsampling: greedy_tokens then draw_tokens over %lld-id f32 logits rows, CUDA-graph replays:\n",
              static_cast<long long>(V));
  std::printf("%7s %-24s %10s %10s %10s %10s\n", "rows", "rows' filter", "us", "logits MB", "GB/s", "of copy");
  DeviceArena& arena = ctx.arena();
  std::uint64_t seed = 300;
  for (const std::int64_t R : rows) {
    const DeviceArena::Mark mark = arena.mark();
    D0_ASSIGN_OR_RETURN(Tensor logits, random_operand(ctx, {R, V}, DType::f32, 8.f, seed, "bench logits"));
    D0_ASSIGN_OR_RETURN(Tensor out, arena.allocate({R, 2}, DType::i32, "bench picks"));
    D0_ASSIGN_OR_RETURN(Tensor tokens, arena.allocate({R}, DType::i32, "bench tokens"));
    D0_ASSIGN_OR_RETURN(Tensor records, arena.allocate({R, kLogprobRecordWords}, DType::i32, "bench records"));
    for (const DrawCase& c : cases) {
      std::vector<TokenDraw> draws;
      if (c.drawn)
        for (std::int64_t r = 0; r < R; ++r)
          draws.push_back({static_cast<std::int32_t>(r), 1.f, 0.37 + 0.6 * static_cast<double>(r) / R, c.top_k,
                           c.top_p, c.min_p});
      std::vector<LogprobRequest> logprobs;
      if (c.logprob_top >= 0)
        for (std::int64_t r = 0; r < R; ++r) logprobs.push_back({static_cast<std::int32_t>(r), c.logprob_top});
      auto pick = [&]() -> Status {
        D0_RETURN_IF_ERROR(greedy_tokens_cuda(logits, out, &tokens, ctx.stream()));
        if (!draws.empty()) D0_RETURN_IF_ERROR(draw_tokens_cuda(logits, draws, out, &tokens, ctx.stream()));
        return logprobs.empty() ? Status::success() : row_logprobs_cuda(logits, logprobs, out, records, ctx.stream());
      };
      D0_RETURN_IF_ERROR(pick());  // checks the operands outside the capture
      D0_ASSIGN_OR_RETURN(double s, time_graph_median(ctx, 9, pick, 8));
      const double bytes = 4.0 * static_cast<double>(R * V), bw = bytes / s;
      std::printf("%7lld %-24s %10.1f %10.1f %10.0f %9.1f%%\n", static_cast<long long>(R), c.name, s * 1e6,
                  bytes / 1e6, bw / 1e9, 100 * bw / ceil.copy_bytes_per_s);
      report["token_draws"].push_back({{"rows", R},
                                       {"filter", c.name},
                                       {"seconds", s},
                                       {"logits_bytes", bytes},
                                       {"bytes_per_s", bw},
                                       {"of_copy_bandwidth", bw / ceil.copy_bytes_per_s}});
    }
    D0_RETURN_IF_ERROR(ctx.synchronize());
    D0_RETURN_IF_ERROR(arena.release(mark));
  }
  return Status::success();
}

}  // namespace day0::app
