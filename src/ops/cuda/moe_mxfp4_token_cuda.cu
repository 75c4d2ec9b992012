// One token's routed experts on the fused MXFP4 tile: see moe_mxfp4_fused_cuda.h (mxfp4_token_matmul_cuda).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

// A CTA's 16 weight rows staged in shared memory by the bulk copy engine: 8 warps, copy stage s = tiles
// [8 s, 8 s + 8), one per warp, each stage on its own mbarrier, so warp w decodes tile 8 s + w as soon as stage s
// lands. No registers hold loads in flight.

constexpr int kWarps = 8;        // split-K warps, tile w + 8 i to warp w
constexpr int kRowsPerCta = 16;  // the MMA's M
constexpr int kGroupsPerStage = kWarps * kGroupsPerTile;
constexpr int kMaxStages = 4;  // up to K = 4,096

// Offsets into dynamic shared memory after `header` bytes (a multiple of 16, barriers first): the rows, each
// padded so that the rows g and g + 1 a quarter-warp reads fall in different banks, then their scales.
struct StagedLayout {
  int row_stride, weights, scales, end;
};

__host__ __device__ constexpr StagedLayout staged_layout(int groups, int header) {
  const int words = groups * 4, pad_words = ((16 - words % 32) + 32) % 32;
  const int row_stride = (words + pad_words) * 4;
  const int weights = header, scales = weights + kRowsPerCta * row_stride;
  return {row_stride, weights, scales, scales + (kRowsPerCta * groups + 15) / 16 * 16};
}

__host__ __device__ constexpr int staged_stages(int groups) { return (groups + kGroupsPerStage - 1) / kGroupsPerStage; }

// Bytes of one row's stage s (its groups [32 s, 32 s + 32)).
__device__ __forceinline__ unsigned stage_row_bytes(int groups, int s) {
  return static_cast<unsigned>(min(groups - s * kGroupsPerStage, kGroupsPerStage)) * 16u;
}

// Whether w's rows can be staged: K up to kMaxStages stages, 16-byte aligned blocks and scales (a 16-row tile's
// scales then start at a multiple of 16 bytes too).
inline bool staged_rows_fit(const ExpertWeights& w) {
  return w.storage == ExpertStorage::mxfp4 && w.out % kRowsPerCta == 0 && w.in % 32 == 0 &&
         w.in / 32 <= kMaxStages * kGroupsPerStage && aligned_to(w.blocks.raw(), 16) && aligned_to(w.scales.raw(), 16);
}

// Thread 0, before a CTA barrier; depends on nothing an earlier kernel writes.
__device__ __forceinline__ void init_stage_barriers(std::uint64_t* bars, int stages) {
  for (int s = 0; s < stages; ++s) bulk_copy::barrier_init(&bars[s], 1);
  bulk_copy::fence_barrier_init();
}

// Warp 0: rows first_row.. first_row + 15 of the [rows, groups] blocks and scales into shared memory (lane r < 16
// copies row r stage by stage, lane 16 the scales with stage 0). Sources are 16-byte aligned (the launchers check).
__device__ __forceinline__ void issue_staged_copies(const uint4* blocks, const std::uint8_t* scales,
                                                    std::int64_t first_row, int groups, const StagedLayout& layout,
                                                    unsigned char* shared, std::uint64_t* bars) {
  const int lane = threadIdx.x % 32, stages = staged_stages(groups);
  if (lane == 0) {
    for (int s = 0; s < stages; ++s)
      bulk_copy::arrive_expecting(&bars[s], kRowsPerCta * stage_row_bytes(groups, s) +
                                                (s == 0 ? static_cast<unsigned>(kRowsPerCta * groups) : 0u));
  }
  __syncwarp();
  if (lane < kRowsPerCta) {
    const uint4* src = blocks + (first_row + lane) * groups;
    unsigned char* dst = shared + layout.weights + lane * layout.row_stride;
    for (int s = 0; s < stages; ++s)
      bulk_copy::copy_to_shared(dst + s * kGroupsPerStage * 16, src + s * kGroupsPerStage, stage_row_bytes(groups, s),
                                &bars[s]);
  } else if (lane == kRowsPerCta) {
    bulk_copy::copy_to_shared(shared + layout.scales, scales + first_row * groups,
                              static_cast<unsigned>(kRowsPerCta * groups), &bars[0]);
  }
}

// This lane's share of tile grp / 4: group grp of rows g and g + 8 from the staged rows; zeros past the last group.
struct StagedPair {
  uint4 g, h;
};

__device__ __forceinline__ StagedPair staged_pair(const unsigned char* shared, const StagedLayout& layout, int groups,
                                                  int grp) {
  const int g = (threadIdx.x % 32) / 4;
  StagedPair l{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
  if (grp < groups) {
    const unsigned char* row_g = shared + layout.weights + g * layout.row_stride + grp * 16;
    l.g = *reinterpret_cast<const uint4*>(row_g);
    l.h = *reinterpret_cast<const uint4*>(row_g + 8 * layout.row_stride);
  }
  return l;
}

// Pair `pair` (0..3) of the 8 E2M1 values of packed word w (values 2b and 2b + 1 in the low and high nibbles of
// byte b) as an f16x2: the pairs are values (0, 4), (1, 5), (2, 6), (3, 7), each value times 2^-14: sign to bit 15, the 3 magnitude
// bits (exponent 2, mantissa 1) to bits 11..9. In f16 that is exactly FP4 * 2^-14 (0.5 becomes the subnormal
// 2^-15, which the tensor cores take as it is): two bit moves a value, no multiply, the scale left for after the MMA.
__device__ __forceinline__ std::uint32_t e2m1_f16x2(std::uint32_t w, int pair) {
  constexpr std::uint32_t kMagnitude = 0x0E000E00u, kSign = 0x80008000u;
  switch (pair) {
    case 0: return ((w << 9) & kMagnitude) | ((w << 12) & kSign);  // low nibbles of bytes 0, 2
    case 1: return ((w << 5) & kMagnitude) | ((w << 8) & kSign);   // high nibbles of bytes 0, 2
    case 2: return ((w << 1) & kMagnitude) | ((w << 4) & kSign);   // low nibbles of bytes 1, 3
    default: return ((w >> 3) & kMagnitude) | (w & kSign);         // high nibbles of bytes 1, 3
  }
}

// 2^(scale - 127) as f32, exactly for every E8M0 code below 255 (0 is the subnormal 2^-127; 255 gives +inf).
__device__ __forceinline__ float e8m0_to_f32(std::uint32_t scale) {
  return __uint_as_float(scale != 0 ? scale << 23 : 0x00400000u);
}

constexpr std::size_t kMaxShared = 48 * 1024;  // no opt-in launch attribute needed
constexpr int kCtasPerSm = 6;  // 40 registers: 6 x 256 threads fit a multiprocessor, so the down shape's grid
                               // (720 CTAs) is one wave; shared memory (31 KB a CTA at K = 2,880) fits 7

struct TokenArgs {
  const uint4* blocks;
  const std::uint8_t* scales;
  const void* bias;
  int bias_kind;
  int out_rows, groups, n_experts;
  const void* x;              // f32 [1 or k, in] or bf16 [k, in]
  bool x_per_slot;            // row j of x for slot j, else row 0 for every slot
  const std::int32_t* slots;  // the token's k expert ids
  bool slots_settled;         // no kernel still in flight writes them: read (and the weights fetched) before the wait
  std::int32_t* error_flag;
  float alpha, limit;
  void* out;
};

// Dynamic shared memory: stage barriers, split-K partials, the warps' largest input magnitudes, a zero row (the
// MMA's token-less columns), the staged rows and scales, and the token's f16 row.
constexpr int kRowMax = kMaxStages * 8 + kWarps * kRowsPerCta * 4;
constexpr int kZeros = kRowMax + kWarps * 4;
constexpr int kHeader = kZeros + kGroupsPerTile * 16;
static_assert(kZeros % 16 == 0);

__host__ __device__ constexpr int x_offset(int groups) { return staged_layout(groups, kHeader).end; }
__host__ __device__ constexpr int shared_bytes(int groups) { return x_offset(groups) + groups * 32 * 2; }

// Values 8i..8i+7 of the input row as f32.
template <bool kF32>
__device__ __forceinline__ void load_x8(const TokenArgs& a, std::int64_t row, int in, int i, float (&v)[8]) {
  if constexpr (kF32) {
    const float4* src = static_cast<const float4*>(a.x) + row * (in / 4) + 2 * i;
    const float4 p = __ldg(src), q = __ldg(src + 1);
    v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w, v[4] = q.x, v[5] = q.y, v[6] = q.z, v[7] = q.w;
  } else {
    const uint4 b = __ldg(static_cast<const uint4*>(a.x) + row * (in / 8) + i);
    const std::uint32_t w[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) v[2 * j] = __uint_as_float(w[j] << 16), v[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
  }
}

__device__ __forceinline__ std::uint32_t pack_f16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&h);
}

// The staging exponent of a row whose largest magnitude is m: 2^-shift puts m in [2^14, 2^15) (0 and subnormals
// count as 2^-112, inf as 2^127, so 2^-shift and 2^(14 + shift) are normal floats).
__device__ __forceinline__ int staging_shift(float m) {
  return min(max(static_cast<int>(__float_as_uint(m) >> 23) - 127, -112), 127) - 14;
}

// The largest of the warps' magnitudes (stage_x's, in shared memory until the kernel ends).
__device__ __forceinline__ float row_max(const float* warp_max) {
  float m = warp_max[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, warp_max[w]);
  return m;
}

// The f32 factor 2^(14 + shift) that undoes the staging scale and the decode's 2^-14.
__device__ __forceinline__ float unstaging_factor(const float* warp_max) {
  return __uint_as_float(static_cast<std::uint32_t>(141 + staging_shift(row_max(warp_max))) << 23);
}

// Slot j's input row into shared memory as f16, times 2^-shift (staging_shift): no f16 overflow whatever the row
// holds, and 11 significant bits (the grouped kernel's bf16 has 8). Each piece of 8 values is stored as the pairs
// (0, 4), (1, 5), (2, 6), (3, 7), the order e2m1_f16x2 gives the weights. Every thread calls it.
template <bool kF32>
__device__ __forceinline__ void stage_x(const TokenArgs& a, int in, uint4* xs, float* warp_max) {
  const std::int64_t row = a.x_per_slot ? blockIdx.y : 0;
  float m = 0.f;
  for (int i = threadIdx.x; i < in / 8; i += blockDim.x) {
    float v[8];
    load_x8<kF32>(a, row, in, i, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(v[j]));
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  const float down = __uint_as_float(static_cast<std::uint32_t>(127 - staging_shift(row_max(warp_max))) << 23);
  for (int i = threadIdx.x; i < in / 8; i += blockDim.x) {  // the row again, from L1
    float v[8];
    load_x8<kF32>(a, row, in, i, v);
    xs[i] = make_uint4(pack_f16x2(v[0] * down, v[4] * down), pack_f16x2(v[1] * down, v[5] * down),
                       pack_f16x2(v[2] * down, v[6] * down), pack_f16x2(v[3] * down, v[7] * down));
  }
}

// One staged tile on f16 MMAs with the scale applied after them: lane (g, t) feeds its group of rows g and g + 8
// (group 4 tile + t) and, where g == t, that group's token values as column t (other lanes give zeros), so
// column c of the product is group 4 tile + c's unscaled dot product with the token, for each row. Lanes t < 2
// hold columns 2t, 2t + 1 and add them, times their groups' scales, into acc (rows g: acc[0..1], g + 8: acc[2..3]).
__device__ __forceinline__ void mma_tile_scaled_after(const StagedPair& l, const uint4* xg,
                                                      const unsigned char* scales, int groups, int tile,
                                                      float (&acc)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::uint32_t wg[4] = {l.g.x, l.g.y, l.g.z, l.g.w}, wh[4] = {l.h.x, l.h.y, l.h.z, l.h.w};
  float d[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // word q = values 8q..8q+7 of the group: k-steps 2q (pairs 0, 1), 2q + 1 (2, 3)
    const uint4 x = xg[q];
    mma_f16_16816(d, e2m1_f16x2(wg[q], 0), e2m1_f16x2(wh[q], 0), e2m1_f16x2(wg[q], 1), e2m1_f16x2(wh[q], 1), x.x, x.y);
    mma_f16_16816(d, e2m1_f16x2(wg[q], 2), e2m1_f16x2(wh[q], 2), e2m1_f16x2(wg[q], 3), e2m1_f16x2(wh[q], 3), x.z, x.w);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int grp = tile * kGroupsPerTile + 2 * t + j;
    const bool live = t < 2 && grp < groups;  // columns 4..7 and groups past the end are zeros: any finite scale
    const std::uint32_t sg = live ? scales[g * groups + grp] : 127u;
    const std::uint32_t sh = live ? scales[(g + 8) * groups + grp] : 127u;
    acc[j] = fmaf(d[j], e8m0_to_f32(sg), acc[j]);
    acc[2 + j] = fmaf(d[2 + j], e8m0_to_f32(sh), acc[2 + j]);
  }
}

// CTA (row tile, slot j): the tile's 16 rows of expert e_j staged by the bulk copy engine (StagedLayout), warp w
// decoding tile 8 s + w of each stage as it lands. 8-warp CTAs fit 6 to a multiprocessor and the down shape's
// grid is one wave. Where the ids are settled (the down projection: the same ids as the gate_up kernel just
// before), the copies go out before the dependent wait and overlap that kernel. The sums differ from the grouped
// kernel's (f16 token, scales after the MMA, another order), so this serves only where results may depend on the
// batch (fused_moe_wide_split).
// H200, 20b down shape (bench-moe): 12.9 us with each warp's tiles loaded into registers (1.36 waves of 64-register
// CTAs), 9.5 us staged with the bf16 decode (scale multiplies before the MMA).
template <bool kF32, bool kSwiglu>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm) mxfp4_token_kernel(TokenArgs a) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int groups = a.groups, in = groups * 32;
  const int tiles = (groups + kGroupsPerTile - 1) / kGroupsPerTile, stages = staged_stages(groups);
  const StagedLayout layout = staged_layout(groups, kHeader);
  auto* bars = reinterpret_cast<std::uint64_t*>(shared);
  auto* partial = reinterpret_cast<float(*)[kRowsPerCta]>(shared + kMaxStages * 8);
  auto* warp_max = reinterpret_cast<float*>(shared + kRowMax);
  uint4* zeros = reinterpret_cast<uint4*>(shared + kZeros);
  uint4* x_shared = reinterpret_cast<uint4*>(shared + x_offset(groups));
  if (threadIdx.x == 0) init_stage_barriers(bars, stages);  // nothing here depends on the kernels before
  if (threadIdx.x < kGroupsPerTile) zeros[threadIdx.x] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  if (!a.slots_settled) begin_dependent_grid();
  const int slot = blockIdx.y;
  const int e = a.slots_settled ? __ldcg(a.slots + slot) : a.slots[slot];
  if (e < 0 || e >= a.n_experts) {  // reported at the next synchronize; this slot's output is left as it was
    if (a.slots_settled) begin_dependent_grid();
    if (threadIdx.x == 0) *a.error_flag = 1;
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kRowsPerCta;
  if (warp == 0)
    issue_staged_copies(a.blocks, a.scales, static_cast<std::int64_t>(e) * a.out_rows + row0, groups, layout, shared,
                        bars);
  if (a.slots_settled) begin_dependent_grid();
  stage_x<kF32>(a, in, x_shared, warp_max);  // its loads overlap the copies
  __syncthreads();

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s = 0; s < stages; ++s) {
    const int tile = s * kWarps + warp, grp = tile * kGroupsPerTile + t;
    bulk_copy::wait(&bars[s], 0);
    if (tile >= tiles) break;
    const uint4* xg = g == t && grp < groups ? x_shared + grp * 4 : zeros;
    mma_tile_scaled_after(staged_pair(shared, layout, groups, grp), xg, shared + layout.scales, groups, tile, acc);
  }

  // Row sums of this warp's groups (lanes t = 0, 1 hold columns 0..3), then the split-K partials summed in warp
  // order by warp 0: lane r of warp 0 sums row r.
  float sum_g = acc[0] + acc[1], sum_h = acc[2] + acc[3];
  sum_g += __shfl_xor_sync(0xffffffffu, sum_g, 1);
  sum_h += __shfl_xor_sync(0xffffffffu, sum_h, 1);
  if (t == 0) {
    partial[warp][g] = sum_g;
    partial[warp][g + 8] = sum_h;
  }
  __syncthreads();
  if (warp != 0) return;
  const int r = lane % kRowsPerCta, row = row0 + r;
  float v = partial[0][r];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v += partial[w][r];
  v = v * unstaging_factor(warp_max) + bias_value(a.bias, a.bias_kind, static_cast<std::int64_t>(e) * a.out_rows + row);
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

static_assert(shared_bytes(kMxfp4TokenMaxInputBytes / 64) <= static_cast<int>(kMaxShared));
static_assert(kMxfp4TokenMaxInputBytes / 64 <= kMaxStages * kGroupsPerStage);

bool mxfp4_token_matmul_fits(const ExpertWeights& w) {
  return staged_rows_fit(w) && w.in * 2 <= kMxfp4TokenMaxInputBytes;
}

Status mxfp4_token_matmul_cuda(const Tensor& x, const Tensor& slots, const ExpertWeights& w, const SwigluParams* swiglu,
                               Tensor& out, Tensor& error_flag, cudaStream_t stream, bool slots_settled) {
  const char* op = "mxfp4_token_matmul_cuda";
  if (!mxfp4_token_matmul_fits(w))
    return make_error(std::string(op) + ": needs MXFP4 experts (16-byte aligned) with out % 16 == 0 and in <= " +
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
                    slots_settled && dependent_launch_enabled(),
                    flag.data<std::int32_t>(),
                    swiglu ? swiglu->alpha : 0.f,
                    swiglu ? swiglu->limit : 0.f,
                    o.raw()};
  const dim3 grid(static_cast<unsigned>(w.out / kRowsPerCta), static_cast<unsigned>(k));
  const std::size_t shared = static_cast<std::size_t>(shared_bytes(static_cast<int>(w.in / 32)));
  if (f32)
    launch<true>(a, swiglu != nullptr, grid, shared, stream);
  else
    launch<false>(a, swiglu != nullptr, grid, shared, stream);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_token_kernel");
  return Status::success();
}

}  // namespace day0
