// One token's routed experts on the fused MXFP4 tile: see moe_mxfp4_fused_cuda.h (mxfp4_token_matmul_cuda).
#include <cuda_bf16.h>

#include <algorithm>
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

constexpr int kCtasPerSm = 2;      // a grid of one wave: 128 registers, two tile sets in flight per warp
constexpr int kMaxSlots = 64;

struct TokenArgs {
  const uint4* blocks;
  const std::uint8_t* scales;
  const void* bias;
  int bias_kind;
  int out_rows, groups, n_experts, k;
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

// The input rows (one, or one per slot) into shared memory as bf16: rows x in / 8 16-byte pieces.
template <bool kF32>
__device__ __forceinline__ void stage_x(const TokenArgs& a, int in, uint4* xs) {
  const int pieces = (a.x_per_slot ? a.k : 1) * (in / 8);
  for (int i = threadIdx.x; i < pieces; i += blockDim.x) {
    if constexpr (kF32) {
      const float4* src = static_cast<const float4*>(a.x) + 2 * static_cast<std::int64_t>(i);
      const float4 p = __ldg(src), q = __ldg(src + 1);
      xs[i] = make_uint4(pack_bf16x2(p.x, p.y), pack_bf16x2(p.z, p.w), pack_bf16x2(q.x, q.y), pack_bf16x2(q.z, q.w));
    } else {
      xs[i] = __ldg(static_cast<const uint4*>(a.x) + i);
    }
  }
}

// One work item: 16 output rows of slot j's expert. A warp's first round of tiles (w, w + 8, w + 16: every tile
// up to K = 3,072) is loaded ahead.
struct Item {
  int row0, slot, e;
  std::int64_t base_g, base_h;
};

// A persistent grid of one wave: each CTA walks the (row tile, slot) items gridDim.x apart and loads the next
// item's tiles before it decodes the current one, so a warp always has a tile set in flight; the expert ids and
// the input rows are read once per CTA. One launch of ~1.4-2.7 waves (a CTA per item) left the second and third
// waves' loads unissued while the first decoded. Lanes of MMA column 0 (g = 0) carry the token, the other columns
// are zeros, and tile w + 8 i goes to warp w: the sums are the grouped kernel's (8-warp split) bit for bit.
template <bool kF32, bool kSwiglu>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm) mxfp4_token_kernel(TokenArgs a) {
  extern __shared__ uint4 x_shared[];
  __shared__ int expert_of[kMaxSlots];
  __shared__ float partial[kWarps][32][4];
  begin_dependent_grid();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int in = a.groups * 32;
  const int tiles = (a.groups + kGroupsPerTile - 1) / kGroupsPerTile;
  const int row_tiles = a.out_rows / kRowsPerCta, items = row_tiles * a.k;
  if (threadIdx.x < a.k) {
    const int e = a.slots[threadIdx.x];
    const bool bad = e < 0 || e >= a.n_experts;  // reported at the next synchronize; the slot's rows unwritten
    if (bad && blockIdx.x == 0) *a.error_flag = 1;
    expert_of[threadIdx.x] = bad ? -1 : e;
  }
  stage_x<kF32>(a, in, x_shared);
  __syncthreads();

  auto item_at = [&](int i) {
    Item it;
    it.row0 = (i % row_tiles) * kRowsPerCta;
    it.slot = i / row_tiles;
    it.e = expert_of[it.slot];
    it.base_g = (static_cast<std::int64_t>(max(it.e, 0)) * a.out_rows + it.row0 + g) * a.groups;
    it.base_h = it.base_g + static_cast<std::int64_t>(8) * a.groups;
    return it;
  };
  auto load_round = [&](const Item& it, int first, TileLoad (&buf)[kTilesInFlight]) {
#pragma unroll
    for (int u = 0; u < kTilesInFlight; ++u) {
      const int tile = first + u * kWarps;
      const int groups = tile < tiles && it.e >= 0 ? a.groups : 0;  // past the end or a bad id: no load
      buf[u] = load_tile(a.blocks, a.scales, groups, it.base_g, it.base_h, tile * kGroupsPerTile + t);
    }
  };

  TileLoad cur[kTilesInFlight], next[kTilesInFlight];
  int i = blockIdx.x;
  if (i >= items) return;
  Item it = item_at(i);
  load_round(it, warp, cur);
  for (; i < items; i += gridDim.x) {
    const int i_next = i + gridDim.x;
    Item it_next = it;
    if (i_next < items) {
      it_next = item_at(i_next);
      load_round(it_next, warp, next);
    }
    const uint4* xs = x_shared + (a.x_per_slot ? it.slot * (in / 8) : 0);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int first = warp; first < tiles; first += kWarps * kTilesInFlight) {
      if (first != warp) load_round(it, first, cur);  // K past 3,072: later rounds unpipelined
#pragma unroll
      for (int u = 0; u < kTilesInFlight; ++u) {
        const int tile = first + u * kWarps;
        if (tile >= tiles) break;
        const int grp = tile * kGroupsPerTile + t;
        const uint4* xg = g == 0 && grp < a.groups ? xs + grp * 4 : nullptr;  // the other columns: zeros
        const auto words = [&](int q) { return xg != nullptr ? xg[q] : make_uint4(0, 0, 0, 0); };
        if (needs_two_multiplies(cur[u]))
          mma_tile<true>(cur[u], words, acc);
        else
          mma_tile<false>(cur[u], words, acc);
      }
    }

    // Split-K partials summed in warp order by warp 0, as the grouped kernel; column 0 (acc[0]: row g, acc[2]:
    // row g + 8, in lanes t = 0) is the token.
#pragma unroll
    for (int j = 0; j < 4; ++j) partial[warp][lane][j] = acc[j];
    __syncthreads();
    if (warp == 0 && it.e >= 0) {
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float s = partial[0][lane][j];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) s += partial[w][lane][j];
        v[j] = s;
      }
      const std::int64_t bias_base = static_cast<std::int64_t>(it.e) * a.out_rows;
      const int r_lo = it.row0 + g, r_hi = it.row0 + g + 8;
      const float lo = v[0] + bias_value(a.bias, a.bias_kind, bias_base + r_lo);
      const float hi = v[2] + bias_value(a.bias, a.bias_kind, bias_base + r_hi);
      if constexpr (kSwiglu) {  // rows 2c (gate) and 2c + 1 (up) sit in lanes g and g + 1 (lane + 4)
        const float up_lo = __shfl_down_sync(0xffffffffu, lo, 4), up_hi = __shfl_down_sync(0xffffffffu, hi, 4);
        if (t == 0 && g % 2 == 0) {
          __nv_bfloat16* h =
              static_cast<__nv_bfloat16*>(a.out) + static_cast<std::int64_t>(it.slot) * (a.out_rows / 2);
          h[r_lo / 2] = __float2bfloat16_rn(swiglu_clamped_pair(lo, up_lo, a.alpha, a.limit));
          h[r_hi / 2] = __float2bfloat16_rn(swiglu_clamped_pair(hi, up_hi, a.alpha, a.limit));
        }
      } else if (t == 0) {
        float* y = static_cast<float*>(a.out) + static_cast<std::int64_t>(it.slot) * a.out_rows;
        y[r_lo] = lo;
        y[r_hi] = hi;
      }
    }
    __syncthreads();  // partial[] is rewritten by the next item
    it = it_next;
#pragma unroll
    for (int u = 0; u < kTilesInFlight; ++u) cur[u] = next[u];
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

bool mxfp4_token_matmul_fits(const ExpertWeights& w, std::int64_t k) {
  return w.storage == ExpertStorage::mxfp4 && w.out % kRowsPerCta == 0 && w.in % 32 == 0 && k >= 1 &&
         k <= kMaxSlots && k * w.in * 2 <= kMxfp4TokenMaxInputBytes;
}

Status mxfp4_token_matmul_cuda(const Tensor& x, const Tensor& slots, const ExpertWeights& w,
                               const SwigluParams* swiglu, Tensor& out, Tensor& error_flag, cudaStream_t stream) {
  const char* op = "mxfp4_token_matmul_cuda";
  if (slots.dim() != 2 || slots.size(0) != 1)
    return make_error(std::string(op) + ": slots must be [1, k] (one token), got " + shape_to_string(slots.shape()));
  const std::int64_t k = slots.size(1);
  if (!mxfp4_token_matmul_fits(w, k))
    return make_error(std::string(op) + ": needs MXFP4 experts with out % 16 == 0, k in [1, " +
                      std::to_string(kMaxSlots) + "] and k x in <= " + std::to_string(kMxfp4TokenMaxInputBytes / 2) +
                      ", got " + std::to_string(w.out) + " x " + std::to_string(w.in) + ", k " + std::to_string(k));
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cuda));
  D0_RETURN_IF_ERROR(check_cuda_tensor(slots, op, "slots", {DType::i32}, {1, k}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (x.dim() != 2) return make_error(std::string(op) + ": x must be 2-D");
  const bool f32 = x.dtype() == DType::f32;
  const std::int64_t x_rows = x.size(0);
  if (!(x_rows == k || (f32 && x_rows == 1)))
    return make_error(std::string(op) + ": x must be f32 [1, in] or a row per slot (f32 / bf16 [k, in]), got " +
                      shape_to_string(x.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f32, DType::bf16}, {x_rows, w.in}));
  if (!aligned_to(x.raw(), 16) || !aligned_to(w.blocks.raw(), 16))
    return make_error(std::string(op) + ": x and blocks must be 16-byte aligned");
  if (swiglu) {
    if (!swiglu->interleaved)
      return make_error(std::string(op) + ": the fused SwiGLU needs gate/up rows interleaved (as gpt-oss)");
    D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::bf16}, {k, w.out / 2}));
  } else {
    D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {k, w.out}));
  }
  int bias_kind = kNoBias;
  if (has_values(w.bias)) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(w.bias, op, "bias", {DType::f32, DType::bf16}, {w.n_experts, w.out}));
    bias_kind = w.bias.dtype() == DType::f32 ? kBiasF32 : kBiasBf16;
  }
  Tensor o = out, flag = error_flag;  // handles: the kernel writes the caller's storage
  const TokenArgs a{static_cast<const uint4*>(w.blocks.raw()),
                    w.scales.data<std::uint8_t>(),
                    bias_kind == kNoBias ? nullptr : w.bias.raw(),
                    bias_kind,
                    static_cast<int>(w.out),
                    static_cast<int>(w.in / 32),
                    static_cast<int>(w.n_experts),
                    static_cast<int>(k),
                    x.raw(),
                    x_rows > 1,
                    slots.data<std::int32_t>(),
                    flag.data<std::int32_t>(),
                    swiglu ? swiglu->alpha : 0.f,
                    swiglu ? swiglu->limit : 0.f,
                    o.raw()};
  int device = 0, sms = 0;
  D0_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  D0_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t items = w.out / kRowsPerCta * k;
  const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(items, std::int64_t(kCtasPerSm) * sms)));
  const std::size_t shared = static_cast<std::size_t>(x_rows) * w.in * 2;
  if (f32)
    launch<true>(a, swiglu != nullptr, grid, shared, stream);
  else
    launch<false>(a, swiglu != nullptr, grid, shared, stream);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_token_kernel");
  return Status::success();
}

}  // namespace day0
