// Embedding gather on the GPU: one block per token row, bf16/f32 table rows widened to f32; ids out of range
// are clamped and flagged (the host cannot see device ids before launch).
#include <cuda_bf16.h>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ std::int64_t checked_id(const std::int32_t* ids, std::int64_t s, std::int64_t V,
                                                   std::int32_t* error_flag) {
  std::int64_t id = ids[s];
  if (id < 0 || id >= V) {
    // Every offender writes the same value, so the race is benign.
    if (threadIdx.x == 0) *error_flag = 1;
    id = id < 0 ? 0 : V - 1;
  }
  return id;
}

// Scalar path: any H, any alignment.
template <class T>
__global__ void embedding_kernel(const T* __restrict__ table, const std::int32_t* ids, std::int64_t V, std::int64_t H,
                                 float* __restrict__ out, std::int32_t* error_flag) {
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x;
  const std::int64_t id = checked_id(ids, s, V, error_flag);
  const T* row = table + id * H;
  float* o = out + s * H;
  for (std::int64_t h = threadIdx.x; h < H; h += blockDim.x) o[h] = widen(row[h]);
}

// Vector path for bf16 tables with H % 8 == 0: one 16-byte load (8 bf16) and two 16-byte stores per thread.
__global__ void embedding_bf16x8_kernel(const __nv_bfloat16* __restrict__ table, const std::int32_t* ids,
                                        std::int64_t V, std::int64_t H, float* __restrict__ out,
                                        std::int32_t* error_flag) {
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x;
  const std::int64_t id = checked_id(ids, s, V, error_flag);
  const uint4* row = reinterpret_cast<const uint4*>(table + id * H);
  float4* o = reinterpret_cast<float4*>(out + s * H);
  for (std::int64_t v = threadIdx.x; v < H / 8; v += blockDim.x) {
    const uint4 packed = row[v];
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&packed);
    const float2 a = __bfloat1622float2(p[0]), b = __bfloat1622float2(p[1]);
    const float2 c = __bfloat1622float2(p[2]), d = __bfloat1622float2(p[3]);
    o[2 * v] = make_float4(a.x, a.y, b.x, b.y);
    o[2 * v + 1] = make_float4(c.x, c.y, d.x, d.y);
  }
}

}  // namespace

Status embedding_cuda(const Tensor& table, const Tensor& ids, Tensor& out, Tensor& error_flag, cudaStream_t stream) {
  if (table.dim() != 2) return make_error("embedding_cuda: table must be 2-D, got " + shape_to_string(table.shape()));
  const std::int64_t V = table.size(0), H = table.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(table, "embedding_cuda", "table", {DType::bf16, DType::f32}, {V, H}));
  if (ids.dim() != 1) return make_error("embedding_cuda: ids must be 1-D, got " + shape_to_string(ids.shape()));
  const std::int64_t S = ids.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(ids, "embedding_cuda", "ids", {DType::i32}, {S}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, "embedding_cuda", "out", {DType::f32}, {S, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, "embedding_cuda", "error_flag", {DType::i32}, {1}));
  if (V == 0) return make_error("embedding_cuda: the table has no rows");
  if (S == 0 || H == 0) return Status::success();
  if (S > 2147483647) return make_error("embedding_cuda: too many tokens for one grid");
  constexpr int kThreads = 256;
  auto* flag = error_flag.data<std::int32_t>();
  const unsigned grid = static_cast<unsigned>(S);
  if (table.dtype() == DType::bf16 && H % 8 == 0 && aligned_to(table.raw(), 16) && aligned_to(out.raw(), 16)) {
    const int threads = static_cast<int>(std::min<std::int64_t>(kThreads, (H / 8 + 31) / 32 * 32));
    launch_dependent(embedding_bf16x8_kernel, grid, threads, 0, stream, static_cast<const __nv_bfloat16*>(table.raw()),
                     ids.data<std::int32_t>(), V, H, out.data<float>(), flag);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("embedding_bf16x8_kernel");
  } else if (table.dtype() == DType::bf16) {
    launch_dependent(embedding_kernel<__nv_bfloat16>, grid, kThreads, 0, stream,
                     static_cast<const __nv_bfloat16*>(table.raw()), ids.data<std::int32_t>(), V, H, out.data<float>(),
                     flag);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("embedding_kernel<bf16>");
  } else {
    launch_dependent(embedding_kernel<float>, grid, kThreads, 0, stream, table.data<float>(), ids.data<std::int32_t>(),
                     V, H, out.data<float>(), flag);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("embedding_kernel<f32>");
  }
  return Status::success();
}

}  // namespace day0
