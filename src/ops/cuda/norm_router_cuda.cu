// The MoE block's norm and router in one launch: see the header.
#include "ops/cuda/norm_router_cuda.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <string>
#include <type_traits>

#include "ops/cuda/bias_kind.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/linear_small_tile.cuh"
#include "ops/cuda/rms_norm_math.cuh"
#include "ops/cuda/router_topk.cuh"

namespace day0 {
namespace {

namespace cg = cooperative_groups;
using namespace rms_norm_math;

// linear_small_cuda's wide shape (the one its router takes): 16 split-K warps, 8 k blocks in flight a lane, so a
// row tile of K <= 4,096 is one round of loads, issued before the wait.
constexpr int kWarps = 16, kInFlight = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kNormWarps = kNormThreads / 32;  // a row's norm runs on 256 threads, as its own kernel's block
static_assert(kThreads == kNormRouterRowsPerCluster * kNormThreads, "a row for each 256 threads");
static_assert(kNormRouterMaxHidden <= 4 * kNormVecPerThread * kNormThreads);
static_assert(kNormRouterExpertsPerCta == small_m::kRowsPerCta, "a CTA's experts are one row tile");

struct NormRouterArgs {
  float* x;
  const float* y;
  const void* norm_w;
  float eps, w_offset;
  float* out;
  const __nv_bfloat16* router_w;
  const void* bias;
  int bias_kind;
  float* logits;
  std::int32_t* indices;
  float* weights;
  int H, E, k, M;
};

// Cluster y: tokens kRows y .. kRows y + kRows - 1 (kRows 1 or 2), each normalised by its half of the threads (256,
// the norm kernel's block; with one row the other half only joins the MMAs); CTA r of the cluster: experts
// 16 r .. 16 r + 15 of each, as MMA columns. Every CTA reads x and y and normalises the rows (the same bits in
// each); the first writes x and out, the latter once every CTA has read x (after the cluster barrier). One token
// keeps kRows = 1: the second half's norm weights and row buffer cost batch 1 1.7% (H100).
template <class W, int kRows>
__global__ void __launch_bounds__(kThreads, 1) norm_router_kernel(NormRouterArgs a) {
  static_assert(kRows == 1 || kRows == kNormRouterRowsPerCluster);
  __shared__ __align__(16) float h_s[kRows][kNormRouterMaxHidden];
  __shared__ float partial[kWarps][1][32][4];
  __shared__ float warp_sums[kRows * kNormWarps];
  __shared__ float logits_s[kRows][kNormRouterMaxExperts];  // the first CTA's: every CTA's logits
  cg::cluster_group cluster = cg::this_cluster();
  const bool first = cluster.block_rank() == 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int half = threadIdx.x / kNormThreads, tid = threadIdx.x % kNormThreads;  // this thread's row, its place
  const int token0 = static_cast<int>(blockIdx.y) * kRows, token = token0 + half;
  const bool has_row = half < kRows && token < a.M;
  const int row0 = static_cast<int>(blockIdx.x) * small_m::kRowsPerCta, n4 = a.H / 4;
  float* const x = a.x + static_cast<std::int64_t>(token) * a.H;
  const float* const y = a.y + static_cast<std::int64_t>(token) * a.H;

  // Weights first: no kernel writes them during a step.
  const small_m::WeightRows rows = small_m::weight_rows(a.router_w, a.E, a.H, row0, g);
  small_m::WeightRound<kInFlight> round;
  small_m::load_round(round, rows, warp * kInFlight);
  float4 v[kNormVecPerThread], wv[kNormVecPerThread];
  if (half < kRows) {
#pragma unroll
    for (int j = 0; j < kNormVecPerThread; ++j)
      if (tid + j * kNormThreads < n4) wv[j] = load_weights4(static_cast<const W*>(a.norm_w), tid + j * kNormThreads);
  }
  begin_dependent_grid();

  // rms_norm_residual_vec_kernel's row: x + y, squares, the block sum, the normalised float4s.
  float sum_sq = 0.f;
  if (has_row) {
#pragma unroll
    for (int j = 0; j < kNormVecPerThread; ++j) {
      const int i = tid + j * kNormThreads;
      if (i >= n4) break;
      v[j] = reinterpret_cast<const float4*>(x)[i];
      const float4 r = reinterpret_cast<const float4*>(y)[i];
      v[j].x += r.x, v[j].y += r.y, v[j].z += r.z, v[j].w += r.w;
      add_squares(sum_sq, v[j]);
    }
  }
  sum_sq = group_sum<kNormWarps, kRows>(sum_sq, warp_sums);
  const float inv_rms = inverse_rms(sum_sq, static_cast<float>(a.H), a.eps);
  if (has_row) {
    float* const out = a.out + static_cast<std::int64_t>(token) * a.H;
#pragma unroll
    for (int j = 0; j < kNormVecPerThread; ++j) {
      const int i = tid + j * kNormThreads;
      if (i >= n4) break;
      const float4 o = normalised(wv[j], a.w_offset, v[j], inv_rms);
      reinterpret_cast<float4*>(h_s[half])[i] = o;
      if (first) reinterpret_cast<float4*>(out)[i] = o;
    }
  }
  __syncthreads();

  // linear_small_kernel<1, 16, 8, true> on the normalised rows (token 2 y + c: the lanes of MMA column g = c).
  float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
  const float* const x_row[1] = {g < kRows && token0 + g < a.M ? h_s[g] : nullptr};
  small_m::split_k_sums<1, kWarps, kInFlight, /*kSharedX=*/true>(acc, round, rows, x_row);
  float s[4];
  if (small_m::reduce_split_k<1, kWarps>(acc, partial, s) && t == 0) {
#pragma unroll
    for (int c = 0; c < kRows; ++c) {  // column c: s[c] (row g) and s[c + 2] (row g + 8)
      if (token0 + c >= a.M) break;
      float* gathered = cluster.map_shared_rank(logits_s[c], 0);
#pragma unroll
      for (int j = c; j < 4; j += 2) {
        const int row = row0 + g + (j < 2 ? 0 : 8);
        if (row >= a.E) continue;
        const float logit = s[j] + bias_value(a.bias, a.bias_kind, row);
        a.logits[static_cast<std::int64_t>(token0 + c) * a.E + row] = logit;
        gathered[row] = logit;
      }
    }
  }
  cluster.sync();  // every CTA's logits are in the first one's shared memory, and every CTA has read x
  if (!first) return;
  if (warp < kRows && token0 + warp < a.M)
    router_topk_softmax_warp<true>(logits_s[warp], a.E, a.k, a.indices + static_cast<std::int64_t>(token0 + warp) * a.k,
                                   a.weights + static_cast<std::int64_t>(token0 + warp) * a.k);
  if (has_row) {
#pragma unroll
    for (int j = 0; j < kNormVecPerThread; ++j) {
      const int i = tid + j * kNormThreads;
      if (i >= n4) break;
      reinterpret_cast<float4*>(x)[i] = v[j];
    }
  }
}

}  // namespace

bool norm_router_fits(const Tensor& x, const Tensor& y, const Tensor& norm_w, Tensor& out, const LinearTarget& router,
                      int k) {
  if (x.dim() != 2 || x.size(0) < 1 || x.size(0) > kNormRouterMaxRows || x.dtype() != DType::f32) return false;
  const std::int64_t H = x.size(1);
  if (H % 8 != 0 || H < 8 || H > kNormRouterMaxHidden) return false;
  if (router.w.dim() != 2 || router.w.dtype() != DType::bf16 || router.w.size(1) != H) return false;
  const std::int64_t E = router.w.size(0);
  if (E < 1 || E > kNormRouterMaxExperts || k < 1 || k > kRouterMaxK || k > E) return false;
  if (norm_w.dtype() != DType::bf16 && norm_w.dtype() != DType::f32) return false;
  return aligned_to(x.raw(), 16) && aligned_to(y.raw(), 16) && aligned_to(out.raw(), 16) &&
         aligned_to(norm_w.raw(), 16) && aligned_to(router.w.raw(), 16);
}

Status norm_router_cuda(Tensor& x, const Tensor& y, const Tensor& norm_w, float eps, bool plus_one, Tensor& out,
                        const LinearTarget& router, int k, Tensor& indices, Tensor& weights, cudaStream_t stream) {
  const char* op = "norm_router_cuda";
  if (!norm_router_fits(x, y, norm_w, out, router, k))
    return make_error(std::string(op) + ": needs x f32 [M <= " + std::to_string(kNormRouterMaxRows) +
                      ", H <= " + std::to_string(kNormRouterMaxHidden) + ", H % 8 == 0], a bf16 router [E <= " +
                      std::to_string(kNormRouterMaxExperts) + ", H], 1 <= k <= min(" + std::to_string(kRouterMaxK) +
                      ", E) and 16-byte aligned tensors; got x " + shape_to_string(x.shape()) + ", router " +
                      shape_to_string(router.w.shape()) + ", k = " + std::to_string(k));
  const std::int64_t M = x.size(0), H = x.size(1), E = router.w.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32}, {M, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, op, "y", {DType::f32}, {M, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(norm_w, op, "norm weight", {DType::bf16, DType::f32}, {H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {M, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(router.w, op, "router weight", {DType::bf16}, {E, H}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(router.out, op, "logits", {DType::f32}, {M, E}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(indices, op, "indices", {DType::i32}, {M, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(weights, op, "weights", {DType::f32}, {M, k}));
  if (has_values(router.bias))
    D0_RETURN_IF_ERROR(check_cuda_tensor(router.bias, op, "router bias", {DType::f32, DType::bf16}, {E}));
  if (out.raw() == x.raw() || out.raw() == y.raw() || x.raw() == y.raw())
    return make_error(std::string(op) + ": x, y and out must be distinct");
  Tensor logits = router.out;  // a handle: the caller's storage
  const NormRouterArgs a{x.data<float>(),
                         y.data<float>(),
                         norm_w.raw(),
                         eps,
                         plus_one ? 1.f : 0.f,
                         out.data<float>(),
                         static_cast<const __nv_bfloat16*>(router.w.raw()),
                         has_values(router.bias) ? router.bias.raw() : nullptr,
                         bias_kind_of(router.bias),
                         logits.data<float>(),
                         indices.data<std::int32_t>(),
                         weights.data<float>(),
                         static_cast<int>(H),
                         static_cast<int>(E),
                         k,
                         static_cast<int>(M)};
  const unsigned ctas = static_cast<unsigned>(norm_router_cluster_ctas(E));
  auto launch = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    const dim3 grid(ctas, static_cast<unsigned>((M + kRows - 1) / kRows));
    if (norm_w.dtype() == DType::bf16)
      launch_dependent_clusters(norm_router_kernel<__nv_bfloat16, kRows>, grid, ctas, dim3(kThreads), 0, stream, a);
    else
      launch_dependent_clusters(norm_router_kernel<float, kRows>, grid, ctas, dim3(kThreads), 0, stream, a);
  };
  if (M == 1)
    launch(std::integral_constant<int, 1>{});
  else
    launch(std::integral_constant<int, kNormRouterRowsPerCluster>{});
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("norm_router_kernel");
  return Status::success();
}

}  // namespace day0
