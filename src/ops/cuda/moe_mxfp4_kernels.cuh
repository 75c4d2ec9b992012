// What the MXFP4 grouped expert kernels share (the decode-size fused matmul and the prefill-size tiled GEMM):
// the exact E2M1 -> bf16 decode in registers, their arguments, and the bias read.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/status.h"
#include "ops/cuda/bias_kind.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/fp8_moe_math.cuh"
#include "ops/cuda/mma_sync.cuh"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/swiglu_math.cuh"
#include "ops/cuda/wgmma.cuh"
#include "quant/fp8_experts.h"
#include "quant/mxfp4_tiles.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0::mxfp4_kernels {

// The E2M1 pair of packed byte b (lo / hi: the word's low and high nibbles, one per byte) as one bf16x2 holding
// value * 2^-126: sign to bit 15, the 3 magnitude bits (exponent 2 bits, mantissa 1 bit) to bits 8..6. In bf16
// that is exactly FP4 * 2^-126 (0.5 becomes the subnormal 2^-127), so one multiply by 2^(scale - 1) finishes it.
__device__ __forceinline__ std::uint32_t e2m1_pair_to_bf16x2_scaled_down(std::uint32_t lo, std::uint32_t hi, int b) {
  // [lo.b, 0, hi.b, 0]: PTX prmt's selector 8 replicates the sign of byte 0 of lo, which is 0 (nibbles < 16).
  std::uint32_t v;
  asm("prmt.b32 %0, %1, %2, %3;"
      : "=r"(v)
      : "r"(lo), "r"(hi), "r"(static_cast<unsigned>(b | 0x80 | ((4 + b) << 8) | 0x8000)));
  // v << 6 (magnitudes to bits 6-8 / 22-24) plus v << 12 (signs to bits 15 / 31) in one multiply: the two
  // shifted copies occupy disjoint bits (6-9, 22-25 and 12-15, 28-31), so the sum carries nothing.
  return (v * 0x1040u) & 0x81C081C0u;
}

// Two E4M3 codes (the low or high half of v) as an f16x2, exactly (every E4M3 value is an f16): one F2FP on sm_90.
// The halves split by a PTX move, not a shift: ptxas then reads the high half in place (F2FP's .H1 operand).
template <int kHalf>
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint32_t v) {
  std::uint32_t h;
  if constexpr (kHalf == 0)
    asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, lo; }" : "=r"(h) : "r"(v));
  else
    asm("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi; }" : "=r"(h) : "r"(v));
  return h;
}

// bf16x2 factor 2^(scale - 1) (both halves) for scale <= 128; larger scales take two multiplies (see decode).
__device__ __forceinline__ std::uint32_t pow2_bf16x2(int exponent_field) {
  const std::uint32_t h = static_cast<std::uint32_t>(exponent_field) << 7;
  return h | (h << 16);
}

__device__ __forceinline__ std::uint32_t bf16x2_mul(std::uint32_t a, std::uint32_t b) {
  __nv_bfloat162 r =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const std::uint32_t*>(&r);
}

// A group's scale byte as the one or two bf16x2 factors that turn value * 2^-126 into value * 2^(scale - 127).
// Where one is enough, second is 1 (exact), so a caller may always apply both without a per-lane branch.
struct GroupScale {
  std::uint32_t first, second;
  bool two;
};

__device__ __forceinline__ GroupScale group_scale(std::uint32_t scale) {
  if (scale <= 128) return {pow2_bf16x2(static_cast<int>(scale) + 126), 0x3F803F80u, false};  // 2^(scale - 1), 1
  return {pow2_bf16x2(253), pow2_bf16x2(static_cast<int>(scale)), true};  // 2^126, then 2^(scale - 127)
}

__device__ __forceinline__ std::uint32_t scaled(std::uint32_t v, const GroupScale& s) {
  v = bf16x2_mul(v, s.first);
  return s.two ? bf16x2_mul(v, s.second) : v;
}

// The 8 values of one packed word (4 bytes of a group) as bf16, in order, each pair through `scale` (a bf16x2 ->
// bf16x2 function applying the group's factor): the GEMMs' decode of a word into a shared-memory row.
template <class Scale>
__device__ __forceinline__ uint4 decode_word(std::uint32_t word, const Scale& scale) {
  const std::uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;
  std::uint32_t o[4];
#pragma unroll
  for (int b = 0; b < 4; ++b) o[b] = scale(e2m1_pair_to_bf16x2_scaled_down(lo, hi, b));
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// ---- The fused matmuls' tile (moe_mxfp4_fused_cuda.cu, moe_mxfp4_token_cuda.cu): 16 rows x 128 values of one
// expert, one 16-byte group of rows g and g + 8 per lane t (lane = 4 g + t), decoded into mma.sync m16n8k16.

constexpr int kGroupsPerTile = 4;

// One lane's share of a tile: group `grp` of rows g and g + 8 (zeros past the last group).
struct TileLoad {
  uint4 g, h;
  std::uint32_t sg, sh;
};

// A read-only 16-byte load asking the L2 for the 256 bytes around it. A warp's tile reads 64 bytes of each of 16
// rows and the CTA's other warps the next 192 of the same rows at about the same time; with the hint one DRAM
// request serves all four. H100, bench-moe 20b, whole expert block (v54): 8 tokens 137.6 -> 134.6 us, 64 tokens
// 231.0 -> 224.2; 120b 64 tokens 627.2 -> 606.0.
__device__ __forceinline__ uint4 ldg_l2_256(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ TileLoad load_tile(const uint4* blocks, const std::uint8_t* scales, int groups,
                                              std::int64_t base_g, std::int64_t base_h, int grp) {
  TileLoad l{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 127, 127};
  if (grp < groups) {
    l.g = ldg_l2_256(blocks + base_g + grp);
    l.h = ldg_l2_256(blocks + base_h + grp);
    l.sg = __ldg(scales + base_g + grp);
    l.sh = __ldg(scales + base_h + grp);
  }
  return l;
}

// load_tile over blocks in the tiled order (quant/mxfp4_tiles.h): unit_g the lane's block of tile 0 for its row g
// (row g + 8's 32 units on, in the same tile; each later tile 64 units on), base_g / base_h the rows' row-major
// index of group 0 (the scales keep that order).
__device__ __forceinline__ TileLoad load_tile_tiled(const uint4* blocks, const std::uint8_t* scales, int groups,
                                                    std::int64_t unit_g, std::int64_t base_g, std::int64_t base_h,
                                                    int grp) {
  TileLoad l{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 127, 127};
  if (grp < groups) {
    const std::int64_t tile_units = static_cast<std::int64_t>(grp / kMxfp4TileGroups) * kMxfp4TileUnits;
    l.g = ldg_l2_256(blocks + unit_g + tile_units);
    l.h = ldg_l2_256(blocks + unit_g + tile_units + 8 * kMxfp4TileGroups);
    l.sg = __ldg(scales + base_g + grp);
    l.sh = __ldg(scales + base_h + grp);
  }
  return l;
}

// Whether any lane's tile has a scale above 128 (uniform over the warp: every lane runs the tile loop).
__device__ __forceinline__ bool needs_two_multiplies(const TileLoad& l) {
  return __any_sync(0xffffffffu, l.sg > 128 || l.sh > 128);
}

// The pass's B operand of a tile, loaded with the weights: the 32 values of group grp of this lane's token row,
// zeros where there is no token or no group. Coherent loads (__ldca): a kernel just before wrote the rows
// (dependent_launch.h).
struct XTile {
  uint4 v[4];
};

__device__ __forceinline__ XTile load_x_tile(const __nv_bfloat16* xrow, int grp, bool live) {
  XTile x;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    x.v[i] =
        live && xrow != nullptr ? __ldca(reinterpret_cast<const uint4*>(xrow + grp * 32) + i) : make_uint4(0, 0, 0, 0);
  return x;
}

// bf16x2 v times the group's factor: one multiply, or both where some lane of the warp has a scale above 128
// (kTwo, chosen per warp: a per-lane choice was a branch per value pair, which also kept the compiler from
// sharing the nibble split between pairs and from scheduling the decode across them).
template <bool kTwo>
__device__ __forceinline__ std::uint32_t apply_scale(std::uint32_t v, const GroupScale& s) {
  v = bf16x2_mul(v, s.first);
  return kTwo ? bf16x2_mul(v, s.second) : v;
}

// Decodes one tile (this lane's group of rows g and g + 8) and runs its 8 k-steps on kPasses groups of 8 tokens,
// each decoded A fragment feeding every group's MMA (the decode is most of the cost: a second group of tokens is
// nearly free); x(n, q) is this lane's values 8q..8q+7 of the group for its token in group n (an XTile's v[q], or
// read where they wait). Each group's sums are those of a tile run on it alone, bit for bit.
template <bool kTwo, int kPasses, class XWords>
__device__ __forceinline__ void mma_tile_groups(const TileLoad& cur, const XWords& x, float (&acc)[kPasses][4]) {
  const GroupScale fg = group_scale(cur.sg), fh = group_scale(cur.sh);
  const std::uint32_t wg[4] = {cur.g.x, cur.g.y, cur.g.z, cur.g.w}, wh[4] = {cur.h.x, cur.h.y, cur.h.z, cur.h.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // word q = bytes 4q..4q+3 = values 8q..8q+7 = k-steps 2q, 2q + 1
    const std::uint32_t lo_g = wg[q] & 0x0F0F0F0Fu, hi_g = (wg[q] >> 4) & 0x0F0F0F0Fu;
    const std::uint32_t lo_h = wh[q] & 0x0F0F0F0Fu, hi_h = (wh[q] >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // k-step j = 2q + half: bytes 2j, 2j + 1 = values 4j..4j+3
      const int b = 2 * half;
      const std::uint32_t a0 = apply_scale<kTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_g, hi_g, b), fg);
      const std::uint32_t a1 = apply_scale<kTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_h, hi_h, b), fh);
      const std::uint32_t a2 = apply_scale<kTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_g, hi_g, b + 1), fg);
      const std::uint32_t a3 = apply_scale<kTwo>(e2m1_pair_to_bf16x2_scaled_down(lo_h, hi_h, b + 1), fh);
#pragma unroll
      for (int n = 0; n < kPasses; ++n) {
        const uint4 w = x(n, q);  // k-step 2q + half: bytes 16q + 8 half of the group
        mma_bf16_16816(acc[n], a0, a1, a2, a3, half == 0 ? w.x : w.z, half == 0 ? w.y : w.w);
      }
    }
  }
}

// One group of 8 tokens: x(q) is this lane's token values 8q..8q+7 of the group.
template <bool kTwo, class XWords>
__device__ __forceinline__ void mma_tile(const TileLoad& cur, const XWords& x, float (&acc)[4]) {
  mma_tile_groups<kTwo, 1>(
      cur, [&](int, int q) { return x(q); }, reinterpret_cast<float(&)[1][4]>(acc));
}

struct KernelArgs {
  const uint4* blocks;         // [E, out, groups] 16-byte groups
  const std::uint8_t* scales;  // [E, out, groups]
  const void* bias;            // [E, out] or null
  int bias_kind;
  int out_rows, groups;    // w.out, w.in / 32
  const __nv_bfloat16* x;  // [*, in]
  bool inputs_are_tokens;
  const std::int32_t *offsets, *rows, *assignments, *experts;
  float alpha, limit;  // SwiGLU
  void* out;
  bool tiled = false;  // blocks in quant/mxfp4_tiles.h's order (ExpertStorage::mxfp4_tiled)
};

// The FP8 GEMMs' arguments (moe_mxfp4_wgmma_fp8_cuda.cu, moe_mxfp4_ws_fp8_cuda.cu).
struct Fp8KernelArgs {
  KernelArgs k;            // weights, grouping, bias, SwiGLU, out (KernelArgs::x unused)
  const std::uint8_t* x8;  // e4m3 rows: by token (KernelArgs::inputs_are_tokens: entry p reads rows[p]) or entry
  const float* sx;         // a scale per row of x8
  int* item_counter = nullptr;  // the warp-specialised GEMM's claims on its items (zero between launches), or null
};

// Half a copied MXFP4 group (8 bytes, 16 values) as E4M3 codes under its table (mxfp4_to_fp8_table.h: the group's
// clamped shift), into 16-byte chunk `chunk` of a 128-byte swizzled A-tile row (row `row` at a_row).
__device__ __forceinline__ void store_half_group_fp8(uint2 w, std::uint64_t table, unsigned char* a_row, int row,
                                                     int chunk) {
  const Mxfp4Fp8Bytes t{static_cast<std::uint32_t>(table), static_cast<std::uint32_t>(table >> 32), 0, 0};
  std::uint32_t o[4];
  mxfp4_word_to_fp8(w.x, t, o[0], o[1]);
  mxfp4_word_to_fp8(w.y, t, o[2], o[3]);
  *reinterpret_cast<uint4*>(a_row + 16 * wgmma::swizzled_chunk(row, chunk)) = make_uint4(o[0], o[1], o[2], o[3]);
}

// A whole group (16 bytes, 32 values): its halves into chunks 2 gj and 2 gj + 1.
__device__ __forceinline__ void store_group_fp8(uint4 w, std::uint64_t table, unsigned char* a_row, int row, int gj) {
  store_half_group_fp8(make_uint2(w.x, w.y), table, a_row, row, 2 * gj);
  store_half_group_fp8(make_uint2(w.z, w.w), table, a_row, row, 2 * gj + 1);
}

__device__ __forceinline__ float bias_at(const KernelArgs& a, std::int64_t i) {
  return bias_value(a.bias, a.bias_kind, i);
}

// Stores one MMA accumulator's values (v[0], v[1]: row r_lo, two grouped entries, present where live0 / live1, at
// output rows dst0 / dst1; v[2], v[3]: row r_hi, the same entries): SwiGLU of each (gate, up) row pair into h (H:
// bf16, or f32 for the FP8 GEMM's quantisation pass) by entry (dst = the entry), or f32 rows by assignment (dst =
// the entry's assignment). Every lane of the warp calls it. A pair's rows sit in lanes g and g + 1 (lane ^ 4): the
// even lane takes both pairs of entry 0, the odd one those of entry 1: two shuffles and two SwiGLUs a lane, where
// the even lanes alone computed four (out of line before the fast exponential, v31). H200, bench-moe 4,096 tokens
// (v38): the 2-CTA GEMM's gate_up with SwiGLU 1,039.8 -> 960.7 us (20b), 1,258.6 -> 1,172.7 (120b).
template <bool kSwiglu, class H = __nv_bfloat16>
__device__ __forceinline__ void store_values(const KernelArgs& a, int r_lo, int r_hi, bool live0, bool live1,
                                             std::int64_t dst0, std::int64_t dst1, const float (&v)[4]) {
  const bool even = ((threadIdx.x % 32) / 4) % 2 == 0;
  if constexpr (kSwiglu) {
    // Sent: the values the partner's entry needs (an even lane's gates of entry 1, an odd lane's ups of entry 0).
    const float lo = __shfl_xor_sync(0xffffffffu, even ? v[1] : v[0], 4);
    const float hi = __shfl_xor_sync(0xffffffffu, even ? v[3] : v[2], 4);
    const float s_lo = swiglu_clamped_pair(even ? v[0] : lo, even ? lo : v[1], a.alpha, a.limit);
    const float s_hi = swiglu_clamped_pair(even ? v[2] : hi, even ? hi : v[3], a.alpha, a.limit);
    if (even ? live0 : live1) {
      H* h = static_cast<H*>(a.out) + (even ? dst0 : dst1) * (a.out_rows / 2);
      if constexpr (std::is_same_v<H, float>) {
        h[r_lo / 2] = s_lo;
        h[r_hi / 2] = s_hi;
      } else {
        h[r_lo / 2] = __float2bfloat16_rn(s_lo);
        h[r_hi / 2] = __float2bfloat16_rn(s_hi);
      }
    }
  } else {
    const bool live[2] = {live0, live1};
    const std::int64_t dst[2] = {dst0, dst1};
    float* y = static_cast<float*>(a.out);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (live[i % 2]) y[dst[i % 2] * a.out_rows + (i < 2 ? r_lo : r_hi)] = v[i];
  }
}

// Adds the bias to one MMA accumulator (laid out as for store_values; entries p0, p1, present below p_end) and
// stores it.
template <bool kSwiglu>
__device__ __forceinline__ void store_outputs(const KernelArgs& a, int e, int r_lo, int r_hi, int p0, int p1, int p_end,
                                              const float (&acc)[4]) {
  const std::int64_t bias_base = static_cast<std::int64_t>(e) * a.out_rows;
  const float v[4] = {acc[0] + bias_at(a, bias_base + r_lo), acc[1] + bias_at(a, bias_base + r_lo),
                      acc[2] + bias_at(a, bias_base + r_hi), acc[3] + bias_at(a, bias_base + r_hi)};
  const bool live0 = p0 < p_end, live1 = p1 < p_end;
  const std::int64_t dst0 = kSwiglu || !live0 ? p0 : a.assignments[p0];
  const std::int64_t dst1 = kSwiglu || !live1 ? p1 : a.assignments[p1];
  store_values<kSwiglu>(a, r_lo, r_hi, live0, live1, dst0, dst1, v);
}

// What a wgmma GEMM's epilogue reads besides its accumulators, staged in shared memory by the prologue (the loads
// overlap the k-loop; in the epilogue they waited an L2 round trip per 8 columns, ordered after the stores they
// may alias: 17% of the FP8 GEMM's stall samples): each entry's output row and each weight row's bias.
template <int kBN, int kBM>
struct EpilogueStage {
  int entry_row[kBN];   // the tile's entry i: its assignment (plain stores) or itself (SwiGLU, by entry)
  float row_bias[kBM];  // 0 without a bias (the stores add it either way, as store_outputs)

  // Thread t of the threads filling it (a CTA's, or its consumer warps' in the warp-specialised GEMM).
  template <bool kSwiglu>
  __device__ __forceinline__ void fill(const KernelArgs& a, int begin, int live, std::int64_t block_row0, int rows,
                                       int t = static_cast<int>(threadIdx.x)) {
    put(t, fetch<kSwiglu>(a, begin, live, block_row0, rows, t));
  }

  // fill in two steps, so that a k-loop runs between the loads and the stores that wait on them.
  struct Values {
    int entry_row;
    float row_bias;
  };
  template <bool kSwiglu>
  __device__ __forceinline__ static Values fetch(const KernelArgs& a, int begin, int live, std::int64_t block_row0,
                                                 int rows, int t) {
    Values v{0, 0.f};
    if (t < live) v.entry_row = kSwiglu ? begin + t : a.assignments[begin + t];
    if (t < kBM && t < rows) v.row_bias = bias_at(a, block_row0 + t);
    return v;
  }
  __device__ __forceinline__ void put(int t, const Values& v) {
    if (t < kBN) entry_row[t] = v.entry_row;
    if (t < kBM) row_bias[t] = v.row_bias;
  }
};

// The FP8 GEMMs' epilogue for one warp's 16 weight rows at the tile's width N (rows row0 + warp_row0 + g and 8 on,
// lane 4 g + t, accumulators as wgmma.cuh lays them out): each sum scaled by its token's and its row's scale plus the
// bias (fp8_moe::scaled_output: the arithmetic every fp8 path shares), then stored.
template <bool kSwiglu, int N, int kBN, int kBM>
__device__ __forceinline__ void store_fp8_tile(const KernelArgs& a, const float (&acc)[N / 2], int row0, int warp_row0,
                                               int live, const int* row_code, const EpilogueStage<kBN, kBM>& stage,
                                               const float* entry_scale) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int r_lo = row0 + warp_row0 + g, r_hi = r_lo + 8;
  const float sw_lo = ldexpf(1.f, row_code[r_lo - row0] - 127 - kFp8RowExponentShift);
  const float sw_hi = ldexpf(1.f, row_code[r_hi - row0] - 127 - kFp8RowExponentShift);
  const float b_lo = stage.row_bias[r_lo - row0], b_hi = stage.row_bias[r_hi - row0];
  const float* b_lo_at = a.bias ? &b_lo : nullptr;
  const float* b_hi_at = a.bias ? &b_hi : nullptr;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const int i0 = 8 * j + 2 * t, i1 = i0 + 1;
    const bool live0 = i0 < live, live1 = i1 < live;
    const float s0 = live0 ? entry_scale[i0] : 0.f, s1 = live1 ? entry_scale[i1] : 0.f;
    const float v[4] = {fp8_moe::scaled_output(acc[4 * j], s0, sw_lo, b_lo_at, 0),
                        fp8_moe::scaled_output(acc[4 * j + 1], s1, sw_lo, b_lo_at, 0),
                        fp8_moe::scaled_output(acc[4 * j + 2], s0, sw_hi, b_hi_at, 0),
                        fp8_moe::scaled_output(acc[4 * j + 3], s1, sw_hi, b_hi_at, 0)};
    store_values<kSwiglu, float>(a, r_lo, r_hi, live0, live1, live0 ? stage.entry_row[i0] : 0,
                                 live1 ? stage.entry_row[i1] : 0, v);
  }
}

// ---- The grouped GEMMs' CTA -> work map (moe_mxfp4_gemm_cuda.cu, moe_mxfp4_wgmma_cuda.cu): blockIdx.y counts the
// (routed expert, kTileTokens-token tile) pairs in ascending expert order.

struct TokenTile {
  int e, begin, end;  // e = -1: past the routed work (the grid is sized for the most there can be)
};

// v summed over this lane and the lanes below it (every lane of the warp calls it).
__device__ __forceinline__ int warp_inclusive_sum(int v) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += u;
  }
  return v;
}

// Every expert's tile count (offsets holds all E; unrouted ones count 0), read in parallel and prefix-summed over
// the block by warp shuffles (two barriers a round of kThreads experts). Every thread of the block calls it.
template <int kThreads, int kTileTokens>
__device__ TokenTile pick_token_tile(const KernelArgs& a, int n_experts) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024);
  __shared__ int warp_tiles[kThreads / 32];
  __shared__ int pick_e, pick_begin, pick_end;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x == 0) pick_e = -1;
  int tiles_before = 0;
  for (int c0 = 0; c0 < n_experts; c0 += kThreads) {
    const int i = c0 + static_cast<int>(threadIdx.x);
    int b = 0, n = 0;
    if (i < n_experts) {
      b = a.offsets[i];
      n = a.offsets[i + 1] - b;
    }
    const int tiles = (n + kTileTokens - 1) / kTileTokens;
    const int inclusive = warp_inclusive_sum(tiles);
    if (lane == 31) warp_tiles[warp] = inclusive;
    __syncthreads();
    int before = tiles_before, round = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) {
      before += w < warp ? warp_tiles[w] : 0;
      round += warp_tiles[w];
    }
    const int end = before + inclusive, start = end - tiles;
    const int y = static_cast<int>(blockIdx.y);
    if (tiles > 0 && y >= start && y < end) {
      pick_e = i;
      pick_begin = b + (y - start) * kTileTokens;
      pick_end = min(b + n, pick_begin + kTileTokens);
    }
    tiles_before += round;
    __syncthreads();         // pick_e written; warp_tiles free for the next round
    if (pick_e >= 0) break;  // uniform: shared, read after the barrier
  }
  return {pick_e, pick_begin, pick_end};
}

// The matmuls' output checks (rows of SwiGLU'd halves in h_dtype, or f32 rows) and the bias's kind (absent, f32,
// bf16).
inline Result<int> checked_output_and_bias(const char* op, const ExpertWeights& w, std::int64_t rows,
                                           const SwigluParams* swiglu, const Tensor& out,
                                           DType h_dtype = DType::bf16) {
  if (swiglu) {
    if (!swiglu->interleaved)
      return make_error(std::string(op) + ": the fused SwiGLU needs gate/up rows interleaved (as gpt-oss)");
    D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {h_dtype}, {rows, w.out / 2}));
  } else {
    D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {rows, w.out}));
  }
  if (!has_values(w.bias)) return static_cast<int>(kNoBias);
  D0_RETURN_IF_ERROR(check_cuda_tensor(w.bias, op, "bias", {DType::f32, DType::bf16}, {w.n_experts, w.out}));
  return bias_kind_of(w.bias);
}

// The launchers' shared checks (MXFP4 experts, grouping tensors, x, out for the SwiGLU or plain form, bias) and
// the kernel arguments they describe. x is bf16 (KernelArgs::x), or for the FP8 GEMM e4m3 (the caller passes it
// on; KernelArgs::x null) with SwiGLU halves in f32.
inline Result<KernelArgs> grouped_kernel_args(const char* op, const Tensor& x, bool inputs_are_tokens,
                                              const ExpertWeights& w, const DeviceExpertGroups& groups,
                                              const SwigluParams* swiglu, const Tensor& out,
                                              DType x_dtype = DType::bf16) {
  if (!is_mxfp4(w.storage))
    return make_error(std::string(op) + ": reads MXFP4 experts, got " + std::string(expert_storage_name(w.storage)));
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cuda));
  const std::int64_t E = w.n_experts, A = groups.rows.numel();
  if (x.dim() != 2) return make_error(std::string(op) + ": x must be [rows, in]");
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {x_dtype}, {x.size(0), w.in}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(groups.offsets, op, "offsets", {DType::i32}, {E + 1}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(groups.rows, op, "rows", {DType::i32}, {A}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(groups.assignments, op, "assignments", {DType::i32}, {A}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(groups.experts, op, "experts", {DType::i32}, {E}));
  if (!inputs_are_tokens && x.size(0) < A)
    return make_error(std::string(op) + ": grouped inputs need a row per assignment (" + std::to_string(A) + ")");
  const DType h_dtype = x_dtype == DType::bf16 ? DType::bf16 : DType::f32;
  D0_ASSIGN_OR_RETURN(const int bias_kind, checked_output_and_bias(op, w, A, swiglu, out, h_dtype));
  if (!aligned_to(w.blocks.raw(), 16) || !aligned_to(x.raw(), 16))
    return make_error(std::string(op) + ": blocks and x must be 16-byte aligned");
  Tensor o = out;  // a handle: the kernels write the caller's storage
  KernelArgs args{static_cast<const uint4*>(w.blocks.raw()),
                  w.scales.data<std::uint8_t>(),
                  bias_kind == kNoBias ? nullptr : w.bias.raw(),
                  bias_kind,
                  w.out,
                  w.in / 32,
                  x_dtype == DType::bf16 ? static_cast<const __nv_bfloat16*>(x.raw()) : nullptr,
                  inputs_are_tokens,
                  groups.offsets.data<std::int32_t>(),
                  groups.rows.data<std::int32_t>(),
                  groups.assignments.data<std::int32_t>(),
                  groups.experts.data<std::int32_t>(),
                  swiglu ? swiglu->alpha : 0.f,
                  swiglu ? swiglu->limit : 0.f,
                  o.raw()};
  args.tiled = w.storage == ExpertStorage::mxfp4_tiled;
  return args;
}

}  // namespace day0::mxfp4_kernels
