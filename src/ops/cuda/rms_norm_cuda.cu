// Residual add fused with RMSNorm on the GPU: one block per row; pass 1 adds the residual, writes x back
// and sums squares; a block reduction; pass 2 re-reads x (hot in L1/L2) and writes the normalised row.
// Rows of up to 4,096 values (H % 4 == 0) take the vector form: a thread's float4s and weights stay in registers,
// all loaded before the reduction (decode: one round of memory latency instead of three).
// The residual is a row of a tensor, or a token's k MoE expert outputs, weighted and summed in ascending expert
// order as moe_combine_cuda sums them (the same bits as that kernel followed by the plain add).
#include <cuda_bf16.h>

#include <climits>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/rms_norm_math.cuh"

namespace day0 {
namespace {

using namespace rms_norm_math;

constexpr int kThreads = kNormThreads;
constexpr int kMaxSlots = 64;  // as moe_combine_cuda

// Where row s's residual comes from: `rows` [S, H], or (slots, k > 0) y [S k, H] by assignment with the router's
// ids and weights [S, k].
struct Residual {
  const float* rows;
  const float* y;
  const std::int32_t* ids;
  const float* route;
  int k;
};

// The block's slots of token s in ascending expert order (ties by slot, as moe_combine_kernel), with their
// weights, in shared memory; every thread calls it.
__device__ void order_slots(const Residual& r, std::int64_t s, int* order, float* weight) {
  if (threadIdx.x == 0) {
    const std::int32_t* ids = r.ids + s * r.k;
    int prev_e = INT_MIN, prev_j = -1;
    for (int n = 0; n < r.k; ++n) {
      int best_j = -1, best_e = INT_MAX;
      for (int j = 0; j < r.k; ++j) {
        const int ej = ids[j];
        const bool after = ej > prev_e || (ej == prev_e && j > prev_j);
        if (after && (best_j < 0 || ej < best_e)) best_j = j, best_e = ej;
      }
      order[n] = best_j;
      weight[n] = r.route[s * r.k + best_j];
      prev_e = best_e;
      prev_j = best_j;
    }
  }
  __syncthreads();
}

// Element i (in units of T: float or float4) of token s's weighted expert sum: separate multiplies and adds.
__device__ __forceinline__ float combined(const Residual& r, const int* order, const float* weight, std::int64_t s,
                                          std::int64_t H, std::int64_t i) {
  float acc = 0.f;
  for (int n = 0; n < r.k; ++n) acc = __fadd_rn(acc, __fmul_rn(r.y[(s * r.k + order[n]) * H + i], weight[n]));
  return acc;
}
__device__ __forceinline__ float4 combined4(const Residual& r, const int* order, const float* weight, std::int64_t s,
                                            int H, int i) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int n = 0; n < r.k; ++n)
    add_product(acc, reinterpret_cast<const float4*>(r.y + (s * r.k + order[n]) * H)[i], weight[n]);
  return acc;
}

// Sum over the block; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  return rms_norm_math::block_sum<kThreads / 32>(v, warp_sums);
}

// Output float4 i of a row, and where a bf16 copy is asked for (brow: the row's bf16 pairs), its rounding to nearest
// even (convert_f32_to_bf16_cuda's: the same bits).
__device__ __forceinline__ void store_normed(float4* orow, __nv_bfloat162* brow, int i, float4 o) {
  if (orow) orow[i] = o;  // null: the bf16 rows alone
  if (brow) {
    brow[2 * i] = __floats2bfloat162_rn(o.x, o.y);
    brow[2 * i + 1] = __floats2bfloat162_rn(o.z, o.w);
  }
}

template <class W>
__global__ void __launch_bounds__(kThreads)
    rms_norm_residual_kernel(float* __restrict__ x, Residual residual, const W* __restrict__ w, std::int64_t H,
                             float eps, float w_offset, float* __restrict__ out) {
  __shared__ int order[kMaxSlots];
  __shared__ float weight[kMaxSlots];
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x;
  if (residual.k > 0) order_slots(residual, s, order, weight);
  float* xr = x + s * H;
  const float* rr = residual.rows ? residual.rows + s * H : nullptr;
  float* orow = out + s * H;
  float sum_sq = 0.f;
  // Unrolled: a row's loads can go out together; the sum keeps its order (decode: 8.8 -> 8.4 us measured).
#pragma unroll 4
  for (std::int64_t h = threadIdx.x; h < H; h += kThreads) {
    float v = xr[h];
    if (rr || residual.k > 0) {
      v += rr ? rr[h] : combined(residual, order, weight, s, H, h);
      xr[h] = v;
    }
    sum_sq += v * v;
  }
  sum_sq = block_sum(sum_sq);
  const float inv_rms = inverse_rms(sum_sq, static_cast<float>(H), eps);
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed before pass 2.
#pragma unroll 4
  for (std::int64_t h = threadIdx.x; h < H; h += kThreads) {
    const float weight = widen(w[h]) + w_offset;
    orow[h] = weight * (xr[h] * inv_rms);
  }
}

constexpr int kVecPerThread = kNormVecPerThread;  // float4s per thread: rows of up to 4 * 4 * kThreads values

template <class W>
__global__ void __launch_bounds__(kThreads)
    rms_norm_residual_vec_kernel(float* __restrict__ x, Residual residual, const W* __restrict__ w, int H, float eps,
                                 float w_offset, float* __restrict__ out, __nv_bfloat162* __restrict__ out_bf16) {
  __shared__ int order[kMaxSlots];
  __shared__ float weight[kMaxSlots];
  const int n4 = H / 4;
  float4 v[kVecPerThread], wv[kVecPerThread];
  // Weights are not written during a step: loaded before waiting for the kernel before.
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j)
    if (threadIdx.x + j * kThreads < n4) wv[j] = load_weights4(w, threadIdx.x + j * kThreads);
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x;
  if (residual.k > 0) order_slots(residual, s, order, weight);
  float4* xr = reinterpret_cast<float4*>(x + s * H);
  const float4* rr = residual.rows ? reinterpret_cast<const float4*>(residual.rows + s * H) : nullptr;
  float4* orow = out ? reinterpret_cast<float4*>(out + s * H) : nullptr;
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= n4) break;
    v[j] = xr[i];
    if (rr || residual.k > 0) {
      const float4 r = rr ? rr[i] : combined4(residual, order, weight, s, H, i);
      v[j].x += r.x, v[j].y += r.y, v[j].z += r.z, v[j].w += r.w;
      xr[i] = v[j];
    }
    add_squares(sum_sq, v[j]);
  }
  sum_sq = block_sum(sum_sq);
  const float inv_rms = inverse_rms(sum_sq, static_cast<float>(H), eps);
  __nv_bfloat162* brow = out_bf16 ? out_bf16 + s * H / 2 : nullptr;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= n4) break;
    store_normed(orow, brow, i, normalised(wv[j], w_offset, v[j], inv_rms));
  }
}

// The MoE form for k <= kMoeFastSlots (gpt-oss: 4) on the vector layout: x, every slot's row, the ids and the
// weights are loaded together (one round of memory latency; the generic form waits for thread 0 to order the
// slots first, then loads), and each thread orders the slots itself in registers (moe_fast_slots).
template <class W>
__global__ void __launch_bounds__(kThreads)
    rms_norm_moe_vec_kernel(float* __restrict__ x, Residual r, const W* __restrict__ w, int H, float eps,
                            float w_offset, float* __restrict__ out, __nv_bfloat162* __restrict__ out_bf16) {
  const int n4 = H / 4;
  float4 v[kVecPerThread], wv[kVecPerThread], ys[kVecPerThread][kMoeFastSlots];
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j)
    if (threadIdx.x + j * kThreads < n4) wv[j] = load_weights4(w, threadIdx.x + j * kThreads);
  begin_dependent_grid();
  const std::int64_t s = blockIdx.x;
  const MoeFastSlots slots = moe_fast_slots(r.ids + s * r.k, r.route + s * r.k, r.k);
  float4* xr = reinterpret_cast<float4*>(x + s * H);
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= n4) break;
    v[j] = xr[i];
#pragma unroll
    for (int n = 0; n < kMoeFastSlots; ++n)
      if (n < r.k) ys[j][n] = reinterpret_cast<const float4*>(r.y + (s * r.k + n) * H)[i];
  }
  float sum_sq = 0.f;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= n4) break;
    const float4 acc = moe_weighted_sum4(ys[j], slots);
    v[j].x += acc.x, v[j].y += acc.y, v[j].z += acc.z, v[j].w += acc.w;
    xr[i] = v[j];
    add_squares(sum_sq, v[j]);
  }
  sum_sq = block_sum(sum_sq);
  const float inv_rms = inverse_rms(sum_sq, static_cast<float>(H), eps);
  float4* orow = out ? reinterpret_cast<float4*>(out + s * H) : nullptr;
  __nv_bfloat162* brow = out_bf16 ? out_bf16 + s * H / 2 : nullptr;
#pragma unroll
  for (int j = 0; j < kVecPerThread; ++j) {
    const int i = threadIdx.x + j * kThreads;
    if (i >= n4) break;
    store_normed(orow, brow, i, normalised(wv[j], w_offset, v[j], inv_rms));
  }
}

// The checks both entry points share and the launch; `what` names the caller in errors.
Status launch_norm(const char* what, Tensor& x, const Residual& res, bool residual_16b_aligned, const Tensor& w,
                   float eps, bool plus_one, Tensor& out, cudaStream_t stream, Tensor* out_bf16 = nullptr) {
  const std::int64_t S = x.size(0), H = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(w, what, "weight", {DType::bf16, DType::f32}, {H}));
  const bool bf16_alone = !out.defined();  // the bf16 rows only (the vector kernels, which write them as they go)
  if (bf16_alone && !out_bf16) return make_error(std::string(what) + ": no out and no out_bf16");
  if (!bf16_alone) D0_RETURN_IF_ERROR(check_cuda_tensor(out, what, "out", {DType::f32}, {S, H}));
  if (out_bf16) D0_RETURN_IF_ERROR(check_cuda_tensor(*out_bf16, what, "out_bf16", {DType::bf16}, {S, H}));
  if (out.raw() == x.raw() && (res.rows || res.k > 0))
    return make_error(std::string(what) + ": out must not alias x when a residual is added (x keeps the sum)");
  if (S == 0 || H == 0) return Status::success();
  if (S > 2147483647) return make_error(std::string(what) + ": too many rows for one grid");
  const float w_offset = plus_one ? 1.f : 0.f;
  const unsigned grid = static_cast<unsigned>(S);
  const bool vec = H % 4 == 0 && H <= 4 * kVecPerThread * kThreads && aligned_to(x.raw(), 16) &&
                   (bf16_alone || aligned_to(out.raw(), 16)) && aligned_to(w.raw(), 16) && residual_16b_aligned;
  // The vector kernels write the bf16 copy as they go (8-byte aligned rows of pairs); the others leave it to a
  // conversion after.
  auto* bf16_pairs = out_bf16 && vec && res.k <= kMoeFastSlots && aligned_to(out_bf16->raw(), 8)
                         ? static_cast<__nv_bfloat162*>(out_bf16->raw())
                         : nullptr;
  if (bf16_alone && !bf16_pairs)
    return make_error(std::string(what) + ": the bf16 rows alone need the vector kernels (H a multiple of 4 up to " +
                      std::to_string(4 * kVecPerThread * kThreads) + ", 16-byte aligned rows, k <= " +
                      std::to_string(kMoeFastSlots) + ")");
  float* out_f32 = bf16_alone ? nullptr : out.data<float>();
  if (vec && res.k > 0 && res.k <= kMoeFastSlots && w.dtype() == DType::bf16) {
    launch_dependent(rms_norm_moe_vec_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, x.data<float>(), res,
                     static_cast<const __nv_bfloat16*>(w.raw()), static_cast<int>(H), eps, w_offset, out_f32,
                     bf16_pairs);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_moe_vec_kernel<bf16>");
  } else if (vec && res.k > 0 && res.k <= kMoeFastSlots) {
    launch_dependent(rms_norm_moe_vec_kernel<float>, grid, kThreads, 0, stream, x.data<float>(), res, w.data<float>(),
                     static_cast<int>(H), eps, w_offset, out_f32, bf16_pairs);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_moe_vec_kernel<f32>");
  } else if (vec && w.dtype() == DType::bf16) {
    launch_dependent(rms_norm_residual_vec_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, x.data<float>(), res,
                     static_cast<const __nv_bfloat16*>(w.raw()), static_cast<int>(H), eps, w_offset, out_f32,
                     bf16_pairs);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_residual_vec_kernel<bf16>");
  } else if (vec) {
    launch_dependent(rms_norm_residual_vec_kernel<float>, grid, kThreads, 0, stream, x.data<float>(), res,
                     w.data<float>(), static_cast<int>(H), eps, w_offset, out_f32, bf16_pairs);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_residual_vec_kernel<f32>");
  } else if (w.dtype() == DType::bf16) {
    launch_dependent(rms_norm_residual_kernel<__nv_bfloat16>, grid, kThreads, 0, stream, x.data<float>(), res,
                     static_cast<const __nv_bfloat16*>(w.raw()), H, eps, w_offset, out.data<float>());
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_residual_kernel<bf16>");
  } else {
    launch_dependent(rms_norm_residual_kernel<float>, grid, kThreads, 0, stream, x.data<float>(), res, w.data<float>(),
                     H, eps, w_offset, out.data<float>());
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("rms_norm_residual_kernel<f32>");
  }
  if (out_bf16 && !bf16_pairs) return convert_f32_to_bf16_cuda(out, *out_bf16, stream);
  return Status::success();
}

}  // namespace

Status rms_norm_residual_cuda(Tensor& x, const Tensor& residual, const Tensor& w, float eps, bool plus_one, Tensor& out,
                              cudaStream_t stream, Tensor* out_bf16) {
  const char* what = "rms_norm_residual_cuda";
  if (x.dim() != 2) return make_error(std::string(what) + ": x must be 2-D, got " + shape_to_string(x.shape()));
  const std::int64_t S = x.size(0), H = x.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, what, "x", {DType::f32}, {S, H}));
  Residual res{};
  if (has_values(residual)) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(residual, what, "residual", {DType::f32}, {S, H}));
    res.rows = residual.data<float>();
  }
  return launch_norm(what, x, res, res.rows == nullptr || aligned_to(res.rows, 16), w, eps, plus_one, out, stream,
                     out_bf16);
}

Status rms_norm_moe_residual_cuda(Tensor& x, const Tensor& y, const Tensor& indices, const Tensor& weights,
                                  const Tensor& w, float eps, bool plus_one, Tensor& out, cudaStream_t stream,
                                  Tensor* out_bf16) {
  const char* what = "rms_norm_moe_residual_cuda";
  if (x.dim() != 2 || indices.dim() != 2) return make_error(std::string(what) + ": x and indices must be 2-D");
  const std::int64_t S = x.size(0), H = x.size(1), k = indices.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, what, "x", {DType::f32}, {S, H}));
  if (k < 1 || k > kMaxSlots) return make_error(std::string(what) + ": k must be in [1, 64]");
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, what, "indices", {DType::i32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights, what, "weights", {DType::f32}, {S, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, what, "y", {DType::f32}, {S * k, H}));
  const Residual res{nullptr, y.data<float>(), indices.data<std::int32_t>(), weights.data<float>(),
                     static_cast<int>(k)};
  return launch_norm(what, x, res, aligned_to(y.raw(), 16), w, eps, plus_one, out, stream, out_bf16);
}

}  // namespace day0
