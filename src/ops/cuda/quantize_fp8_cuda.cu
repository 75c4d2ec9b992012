// Gather + per-row FP8 quantisation of f32 activations (the FP8 analogue of the MoE's gather + bf16 cast): one
// block per output row; a block max of |x|, then q = e4m3_rne(x / scale) with the rounding of quant/e4m3_rne.h,
// so codes and scales equal fp8_quantize_row's bit for bit (max is order-free; the divisions are IEEE). Rows of a
// multiple of 4 values up to kVecValues are read once, as float4s held in registers, and written 4 codes a store
// (the scalar form read each value twice and stored bytes: 118 us a 16,384 x 2,880 call on the H200).
// quantize_scatter_fp8_cuda: the same rows by grouped entry, each token read and quantised once.
// Fp8RowOrder::staged: the same codes, each row's 4-byte words moved to where quant/fp8_row_order.h puts them.
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/fp8_moe_math.cuh"
#include "quant/e4m3_rne.h"
#include "quant/fp8_experts.h"

namespace day0 {
namespace {

constexpr int kThreads = fp8_moe::kRowThreads;
constexpr int kVecPerThread = fp8_moe::kRowVecs;          // float4s a thread holds
constexpr int kVecValues = 4 * kVecPerThread * kThreads;  // 4,096

// The source row of output row r (a bad id is clamped and flagged).
__device__ __forceinline__ const float* source_row(const float* x, const std::int32_t* rows, std::int64_t n_src,
                                                   std::int64_t H, std::int64_t r, std::int32_t* error_flag) {
  return x + fp8_moe::gathered_row(rows, n_src, r, error_flag) * H;
}

template <Fp8RowOrder kOrder>
__global__ void gather_quantize_fp8_vec_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ rows,
                                               std::int64_t n_src, std::int64_t H, std::uint8_t* __restrict__ q,
                                               float* __restrict__ scales, std::int32_t* error_flag) {
  __shared__ float warp_max[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const float4* xr = reinterpret_cast<const float4*>(source_row(x, rows, n_src, H, r, error_flag));
  const int n4 = static_cast<int>(H / 4);
  float4 v[kVecPerThread];
  fp8_moe::load_held_row<kThreads>(xr, n4, v);
  fp8_moe::quantize_held_row<kThreads, kVecPerThread, kOrder>(v, n4, warp_max, q + r * H, scales + r);
}

// Token row s quantised once, its codes and scale stored at each entry its assignments were grouped to: entries[s
// k + j] (-1: ungrouped, nothing stored; n_out or more: flagged, nothing stored).
__global__ void quantize_scatter_fp8_vec_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ entries,
                                                int k, std::int64_t n_out, std::int64_t H, std::uint8_t* __restrict__ q,
                                                float* __restrict__ scales, std::int32_t* error_flag) {
  __shared__ float warp_max[kThreads / 32];
  const std::int64_t s = blockIdx.x;
  const float4* xr = reinterpret_cast<const float4*>(x + s * H);
  const int n4 = static_cast<int>(H / 4);
  float4 v[kVecPerThread];
  fp8_moe::load_held_row<kThreads>(xr, n4, v);
  const float scale = fp8_moe::held_row_scale<kThreads>(v, warp_max);
  std::uint32_t codes[kVecPerThread];
  fp8_moe::held_row_codes<kThreads>(v, n4, scale, codes);
  for (int j = 0; j < k; ++j) {
    const std::int32_t p = entries[s * k + j];
    if (p < 0) continue;
    if (p >= n_out) {
      if (threadIdx.x == 0) *error_flag = 1;
      continue;
    }
    if (threadIdx.x == 0) scales[p] = scale;
    fp8_moe::store_held_codes<kThreads>(codes, n4, q + p * H);
  }
}

__global__ void gather_quantize_fp8_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ rows,
                                           std::int64_t n_src, std::int64_t H, std::uint8_t* __restrict__ q,
                                           float* __restrict__ scales, std::int32_t* error_flag) {
  __shared__ float warp_max[kThreads / 32];
  const std::int64_t r = blockIdx.x;
  const float* xr = source_row(x, rows, n_src, H, r, error_flag);
  float amax = 0.0f;
  for (std::int64_t c = threadIdx.x; c < H; c += kThreads) amax = fmaxf(amax, fabsf(xr[c]));
  amax = fp8_moe::block_max<kThreads>(amax, warp_max);
  const float scale = fp8_moe::row_scale(amax);
  if (threadIdx.x == 0) scales[r] = scale;
  std::uint8_t* qr = q + r * H;
  for (std::int64_t c = threadIdx.x; c < H; c += kThreads) qr[c] = fp8_moe::quantize(xr[c], scale);
}

}  // namespace

bool fp8_held_rows_fit(std::int64_t H, const Tensor& x, const Tensor& q, Fp8RowOrder order) {
  return H % (order == Fp8RowOrder::staged ? 32 : 4) == 0 && H <= kVecValues && aligned_to(x.raw(), 16) &&
         aligned_to(q.raw(), 4);
}

Status quantize_scatter_fp8_cuda(const Tensor& x, const Tensor& entries, Tensor& q, Tensor& scales, Tensor& error_flag,
                                 cudaStream_t stream) {
  const char* op = "quantize_scatter_fp8_cuda";
  if (x.dim() != 2 || entries.dim() != 2 || entries.size(0) != x.size(0))
    return make_error(std::string(op) + ": x must be [S, H] and entries [S, k], got " + shape_to_string(x.shape()) +
                      " and " + shape_to_string(entries.shape()));
  if (q.dim() != 2) return make_error(std::string(op) + ": q must be [n, H], got " + shape_to_string(q.shape()));
  const std::int64_t S = x.size(0), H = x.size(1), k = entries.size(1), n = q.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {S, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(entries, op, "entries", {DType::i32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f8_e4m3}, {n, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(scales, op, "scales", {DType::f32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (!fp8_held_rows_fit(H, x, q, Fp8RowOrder::natural))
    return make_error(std::string(op) + ": needs H a multiple of 4 up to " + std::to_string(kVecValues) +
                      " and 16-byte aligned rows, got H " + std::to_string(H));
  if (S == 0 || H == 0 || k == 0) return Status::success();
  if (S > 2147483647 || k > 2147483647) return make_error(std::string(op) + ": more than 2^31 rows in one launch");
  quantize_scatter_fp8_vec_kernel<<<static_cast<unsigned>(S), kThreads, 0, stream>>>(
      x.data<float>(), entries.data<std::int32_t>(), static_cast<int>(k), n, H, static_cast<std::uint8_t*>(q.raw()),
      scales.data<float>(), error_flag.data<std::int32_t>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("quantize_scatter_fp8_vec_kernel");
  return Status::success();
}

Status gather_quantize_fp8_cuda(const Tensor& x, const Tensor& rows, Tensor& q, Tensor& scales, Tensor& error_flag,
                                cudaStream_t stream, Fp8RowOrder order) {
  const char* op = "gather_quantize_fp8_cuda";
  if (x.dim() != 2) return make_error(std::string(op) + ": x must be 2-D [S, H], got " + shape_to_string(x.shape()));
  const std::int64_t S = x.size(0), H = x.size(1);
  const bool gather = rows.defined() && rows.dim() > 0;
  if (gather && rows.dim() != 1) return make_error(std::string(op) + ": rows must be 1-D");
  const std::int64_t n = gather ? rows.size(0) : S;
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {S, H}));
  if (gather) D0_RETURN_IF_ERROR(check_cuda_tensor(rows, op, "rows", {DType::i32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f8_e4m3}, {n, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(scales, op, "scales", {DType::f32}, {n}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (n == 0 || H == 0) return Status::success();
  if (S == 0) return make_error(std::string(op) + ": rows to gather from an empty x");
  if (n > 2147483647) return make_error(std::string(op) + ": more than 2^31 rows in one launch");
  const bool vec = fp8_held_rows_fit(H, x, q, Fp8RowOrder::natural);
  const bool staged = order == Fp8RowOrder::staged;
  if (staged && !fp8_held_rows_fit(H, x, q, order))
    return make_error(std::string(op) + ": the staged order needs H a multiple of 32 up to " +
                      std::to_string(kVecValues) + ", x 16-byte aligned and q 4-byte aligned, got H " +
                      std::to_string(H) + (aligned_to(q.raw(), 4) ? "" : " and q off its 4-byte word"));
  auto* kernel = staged ? gather_quantize_fp8_vec_kernel<Fp8RowOrder::staged>
                 : vec  ? gather_quantize_fp8_vec_kernel<Fp8RowOrder::natural>
                        : gather_quantize_fp8_kernel;
  kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(x.data<float>(),
                                                             gather ? rows.data<std::int32_t>() : nullptr, S, H,
                                                             static_cast<std::uint8_t*>(q.raw()),
                                                             scales.data<float>(), error_flag.data<std::int32_t>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("gather_quantize_fp8_kernel");
  return Status::success();
}

}  // namespace day0
