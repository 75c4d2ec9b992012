// measure_ceilings: median of timed repetitions after a warm-up, CUDA events on the context's stream.
#include "ops/cuda/ceilings.h"

#include "ops/cuda/cuda_status.h"
#include "ops/cuda/gemm_bf16.h"
#include "ops/cuda/gemm_fp8.h"
#include "ops/cuda/random_fill_cuda.h"
#include "ops/cuda/timing.h"

namespace day0 {

Result<DeviceCeilings> measure_ceilings(CudaContext& ctx) {
  DeviceCeilings c;
  c.device = ctx.device_summary();
  DeviceArena& arena = ctx.arena();
  const DeviceArena::Mark mark = arena.mark();
  Status st = [&]() -> Status {
    const std::size_t copy_bytes = std::size_t(1) << 30;
    D0_ASSIGN_OR_RETURN(void* src, arena.allocate_bytes(copy_bytes, "ceiling copy source"));
    D0_ASSIGN_OR_RETURN(void* dst, arena.allocate_bytes(copy_bytes, "ceiling copy destination"));
    D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(src, 1, copy_bytes, ctx.stream()));
    D0_ASSIGN_OR_RETURN(double copy_s, time_median(ctx, 10, [&]() -> Status {
      D0_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
      return Status::success();
    }));
    c.copy_bytes_per_s = 2.0 * double(copy_bytes) / copy_s;

    const std::int64_t n = 8192;
    c.gemm_size = n;
    const double flops = 2.0 * double(n) * n * n;
    {
      D0_ASSIGN_OR_RETURN(Tensor x, arena.allocate({n, n}, DType::bf16, "ceiling x"));
      D0_ASSIGN_OR_RETURN(Tensor w, arena.allocate({n, n}, DType::bf16, "ceiling w"));
      D0_ASSIGN_OR_RETURN(Tensor y, arena.allocate({n, n}, DType::bf16, "ceiling y"));
      // Random operands: constant ones draw less power and run faster than any model's data.
      D0_RETURN_IF_ERROR(fill_uniform_cuda(x, 1, 1.f, ctx.stream()));
      D0_RETURN_IF_ERROR(fill_uniform_cuda(w, 2, 1.f, ctx.stream()));
      GemmBf16 gemm(ctx);
      D0_ASSIGN_OR_RETURN(double s, time_median(ctx, 10, [&] { return gemm.run(x, w, Tensor(), y); }));
      c.bf16_flops = flops / s;
    }
    {
      D0_ASSIGN_OR_RETURN(Tensor x, arena.allocate({n, n}, DType::f8_e4m3, "ceiling x8"));
      D0_ASSIGN_OR_RETURN(Tensor w, arena.allocate({n, n}, DType::f8_e4m3, "ceiling w8"));
      D0_ASSIGN_OR_RETURN(Tensor sx, arena.allocate({n}, DType::f32, "ceiling sx"));
      D0_ASSIGN_OR_RETURN(Tensor sw, arena.allocate({n}, DType::f32, "ceiling sw"));
      D0_ASSIGN_OR_RETURN(Tensor y, arena.allocate({n, n}, DType::f32, "ceiling y32"));
      D0_RETURN_IF_ERROR(fill_uniform_cuda(x, 3, 448.f, ctx.stream()));  // e4m3's whole range
      D0_RETURN_IF_ERROR(fill_uniform_cuda(w, 4, 448.f, ctx.stream()));
      D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sx.raw(), 0, sx.nbytes(), ctx.stream()));
      D0_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sw.raw(), 0, sw.nbytes(), ctx.stream()));
      GemmFp8 gemm(ctx);
      D0_ASSIGN_OR_RETURN(double s, time_median(ctx, 10, [&] { return gemm.run(x, sx, w, sw, Tensor(), y); }));
      c.fp8_flops = flops / s;
    }
    return Status::success();
  }();
  Status released = arena.release(mark);
  if (!st.ok()) return st.error();
  if (!released.ok()) return released.error();
  return c;
}

}  // namespace day0
