// One token's routed experts on the fused MXFP4 tile: see moe_mxfp4_fused_cuda.h (mxfp4_token_matmul_cuda).
#include <cuda_bf16.h>

#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kWarps = 8;         // split-K warps, tile w + 8 i to warp w: the grouped kernel's wide split
constexpr int kRowsPerCta = 16;   // the MMA's M
constexpr int kTilesInFlight = 3;  // a warp's tiles loaded at once: all of them up to K = 3,072 (gpt-oss: 2,880)

struct TokenArgs {
  const uint4* blocks;
  const std::uint8_t* scales;
  const void* bias;
  int bias_kind;
  int out_rows, groups, n_experts;
  const void* x;             // f32 [1 or k, in] or bf16 [k, in]
  bool x_per_slot;           // row j of x for slot j, else row 0 for every slot
  const std::int32_t* slots;  // the token's k expert ids
  std::int32_t* error_flag;
  float alpha, limit;
  void* out;
};

__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// Slot j's input row into shared memory as bf16 (in / 8 16-byte pieces).
template <bool kF32>
__device__ __forceinline__ void stage_x(const TokenArgs& a, int in, uint4* xs) {
  const std::int64_t row = a.x_per_slot ? blockIdx.y : 0;
  for (int i = threadIdx.x; i < in / 8; i += blockDim.x) {
    if constexpr (kF32) {
      const float4* src = static_cast<const float4*>(a.x) + row * (in / 4) + 2 * i;
      const float4 p = __ldg(src), q = __ldg(src + 1);
      xs[i] = make_uint4(pack_bf16x2(p.x, p.y), pack_bf16x2(p.z, p.w), pack_bf16x2(q.x, q.y), pack_bf16x2(q.z, q.w));
    } else {
      xs[i] = __ldg(static_cast<const uint4*>(a.x) + row * (in / 8) + i);
    }
  }
}

// CTA (row tile, slot j): the expert id is the only thing read before the weights, every tile of a warp is in
// flight at once, and the token's row waits in shared memory. Lanes of MMA column 0 (g = 0) carry the token, the
// other columns are zeros, so the sums are the grouped kernel's (8-warp split) bit for bit. It runs no faster
// than that kernel (bench-moe, 20b down shape: 12.9 us both; Nsight: 1.36 waves, fixed work per CTA as large as
// the decode); what it saves is the grouping and conversion kernels before it.
template <bool kF32, bool kSwiglu>
__global__ void __launch_bounds__(kWarps * 32, 4) mxfp4_token_kernel(TokenArgs a) {
  extern __shared__ uint4 x_shared[];
  begin_dependent_grid();
  const int slot = blockIdx.y;
  const int e = a.slots[slot];
  if (e < 0 || e >= a.n_experts) {  // reported at the next synchronize; this slot's output is left as it was
    if (threadIdx.x == 0) *a.error_flag = 1;
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRowsPerCta;
  const std::int64_t base_g = (static_cast<std::int64_t>(e) * a.out_rows + row0 + g) * a.groups;
  const std::int64_t base_h = base_g + static_cast<std::int64_t>(8) * a.groups;
  const int in = a.groups * 32;
  const int tiles = (a.groups + kGroupsPerTile - 1) / kGroupsPerTile;

  TileLoad buf[kTilesInFlight];
  auto load_round = [&](int first) {
#pragma unroll
    for (int u = 0; u < kTilesInFlight; ++u) {
      const int tile = first + u * kWarps;
      buf[u] = load_tile(a.blocks, a.scales, tile < tiles ? a.groups : 0, base_g, base_h, tile * kGroupsPerTile + t);
    }
  };
  load_round(warp);
  stage_x<kF32>(a, in, x_shared);  // its loads overlap the weights'
  __syncthreads();

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int first = warp; first < tiles; first += kWarps * kTilesInFlight) {
    if (first != warp) load_round(first);
#pragma unroll
    for (int u = 0; u < kTilesInFlight; ++u) {
      const int tile = first + u * kWarps;
      if (tile >= tiles) break;
      const int grp = tile * kGroupsPerTile + t;
      const uint4* xg = g == 0 && grp < a.groups ? x_shared + grp * 4 : nullptr;  // the other columns: zeros
      const auto words = [&](int q) { return xg != nullptr ? xg[q] : make_uint4(0, 0, 0, 0); };
      if (needs_two_multiplies(buf[u]))
        mma_tile<true>(buf[u], words, acc);
      else
        mma_tile<false>(buf[u], words, acc);
    }
  }

  // Split-K partials summed in warp order by warp 0, as the grouped kernel. Only MMA column 0 is the token: lanes
  // t = 0 hold its rows g (acc[0]) and g + 8 (acc[2]), so 16 values a warp go through shared memory and lane r of
  // warp 0 sums row r.
  __shared__ float partial[kWarps][kRowsPerCta];
  if (t == 0) {
    partial[warp][g] = acc[0];
    partial[warp][g + 8] = acc[2];
  }
  __syncthreads();
  if (warp != 0) return;
  const int r = lane % kRowsPerCta, row = row0 + r;
  float v = partial[0][r];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v += partial[w][r];
  v += bias_value(a.bias, a.bias_kind, static_cast<std::int64_t>(e) * a.out_rows + row);
  if constexpr (kSwiglu) {  // rows 2c (gate) and 2c + 1 (up): lanes r and r + 1
    const float up = __shfl_down_sync(0xffffffffu, v, 1);
    if (lane < kRowsPerCta && r % 2 == 0) {
      __nv_bfloat16* h = static_cast<__nv_bfloat16*>(a.out) + static_cast<std::int64_t>(slot) * (a.out_rows / 2);
      h[row / 2] = __float2bfloat16_rn(swiglu_clamped_pair(v, up, a.alpha, a.limit));
    }
  } else if (lane < kRowsPerCta) {
    static_cast<float*>(a.out)[static_cast<std::int64_t>(slot) * a.out_rows + row] = v;
  }
}

template <bool kF32>
void launch(const TokenArgs& a, bool swiglu, dim3 grid, std::size_t shared, cudaStream_t stream) {
  if (swiglu)
    launch_dependent(mxfp4_token_kernel<kF32, true>, grid, kWarps * 32, shared, stream, a);
  else
    launch_dependent(mxfp4_token_kernel<kF32, false>, grid, kWarps * 32, shared, stream, a);
}

}  // namespace

bool mxfp4_token_matmul_fits(const ExpertWeights& w) {
  return w.storage == ExpertStorage::mxfp4 && w.out % kRowsPerCta == 0 && w.in % 32 == 0 &&
         w.in * 2 <= kMxfp4TokenMaxInputBytes;
}

Status mxfp4_token_matmul_cuda(const Tensor& x, const Tensor& slots, const ExpertWeights& w,
                               const SwigluParams* swiglu, Tensor& out, Tensor& error_flag, cudaStream_t stream) {
  const char* op = "mxfp4_token_matmul_cuda";
  if (!mxfp4_token_matmul_fits(w))
    return make_error(std::string(op) + ": needs MXFP4 experts with out % 16 == 0 and in <= " +
                      std::to_string(kMxfp4TokenMaxInputBytes / 2) + ", got " + std::to_string(w.out) + " x " +
                      std::to_string(w.in));
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cuda));
  if (slots.dim() != 2 || slots.size(0) != 1)
    return make_error(std::string(op) + ": slots must be [1, k] (one token), got " + shape_to_string(slots.shape()));
  const std::int64_t k = slots.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(slots, op, "slots", {DType::i32}, {1, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (k < 1 || k > 65535) return make_error(std::string(op) + ": k must be in [1, 65535]");
  if (x.dim() != 2) return make_error(std::string(op) + ": x must be 2-D");
  const bool f32 = x.dtype() == DType::f32;
  const std::int64_t x_rows = x.size(0);
  if (!(x_rows == k || (f32 && x_rows == 1)))
    return make_error(std::string(op) + ": x must be f32 [1, in] or a row per slot (f32 / bf16 [k, in]), got " +
                      shape_to_string(x.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32, DType::bf16}, {x_rows, w.in}));
  if (!aligned_to(x.raw(), 16) || !aligned_to(w.blocks.raw(), 16))
    return make_error(std::string(op) + ": x and blocks must be 16-byte aligned");
  D0_ASSIGN_OR_RETURN(const int bias_kind, checked_output_and_bias(op, w, k, swiglu, out));
  Tensor o = out, flag = error_flag;  // handles: the kernel writes the caller's storage
  const TokenArgs a{static_cast<const uint4*>(w.blocks.raw()),
                    w.scales.data<std::uint8_t>(),
                    bias_kind == kNoBias ? nullptr : w.bias.raw(),
                    bias_kind,
                    static_cast<int>(w.out),
                    static_cast<int>(w.in / 32),
                    static_cast<int>(w.n_experts),
                    x.raw(),
                    x_rows > 1,
                    slots.data<std::int32_t>(),
                    flag.data<std::int32_t>(),
                    swiglu ? swiglu->alpha : 0.f,
                    swiglu ? swiglu->limit : 0.f,
                    o.raw()};
  const dim3 grid(static_cast<unsigned>(w.out / kRowsPerCta), static_cast<unsigned>(k));
  const std::size_t shared = static_cast<std::size_t>(w.in) * 2;
  if (f32)
    launch<true>(a, swiglu != nullptr, grid, shared, stream);
  else
    launch<false>(a, swiglu != nullptr, grid, shared, stream);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_token_kernel");
  return Status::success();
}

}  // namespace day0
