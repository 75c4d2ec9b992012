// One token's routed experts on the fused MXFP4 tile: see moe_mxfp4_fused_cuda.h (mxfp4_token_matmul_cuda).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <string>
#include <type_traits>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/tensor_map.h"
#include "quant/e2m1_to_e4m3.h"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

// A CTA's 16 weight rows staged in shared memory by tensor copies (TMA): 8 warps, copy stage s = tiles
// [8 s, 8 s + 8), one per warp, each stage on its own mbarrier, so warp w decodes tile 8 s + w as soon as stage s
// lands. No registers hold loads in flight.

constexpr int kWarps = 8;        // split-K warps, tile w + 8 i to warp w: the grouped kernel's wide split
constexpr int kRowsPerCta = 16;  // the MMA's M
constexpr int kGroupsPerStage = kWarps * kGroupsPerTile;
constexpr int kMaxStages = 4;  // up to K = 4,096
// A tensor copy's box: groups [8 b, 8 b + 8) of the 16 rows, 128 bytes a row in the 128-byte swizzle (16-byte chunk
// c of row r at chunk c ^ (r % 8)), 2 KB; four boxes a stage.
constexpr int kGroupsPerBox = 8;
constexpr int kBoxBytes = kRowsPerCta * kGroupsPerBox * 16;
constexpr int kBoxesPerStage = kGroupsPerStage / kGroupsPerBox;

// Offsets into dynamic shared memory: the boxes from the first 1,024-byte boundary at or after `header` bytes (the
// swizzle's unit; found on the device, where the base address is known), then the rows' scales.
struct StagedLayout {
  int weights, scales, end;
};

__host__ __device__ constexpr int staged_boxes(int groups) { return (groups + kGroupsPerBox - 1) / kGroupsPerBox; }
__host__ __device__ constexpr int staged_stages(int groups) { return (groups + kGroupsPerStage - 1) / kGroupsPerStage; }
// Shared-memory bytes of the boxes and scales, with the alignment's worst case.
__host__ __device__ constexpr int staged_bytes(int groups) {
  return 1024 + staged_boxes(groups) * kBoxBytes + (kRowsPerCta * groups + 15) / 16 * 16;
}

__device__ __forceinline__ StagedLayout staged_layout(const unsigned char* shared, int groups, int header) {
  const unsigned at = bulk_copy::shared_address(shared) + static_cast<unsigned>(header);
  const int weights = header + static_cast<int>((1024u - at % 1024u) % 1024u);
  const int scales = weights + staged_boxes(groups) * kBoxBytes;
  return {weights, scales, scales + (kRowsPerCta * groups + 15) / 16 * 16};
}

// The staged row MMA row g (0-7; g + 8 likewise) reads. Row-major blocks: rows g = 2q and 2q + 1 of a quarter-warp's
// 16-byte loads land in opposite halves of the swizzle (q and q + 4), so the eight lanes' chunks fall in distinct
// banks. Tiled blocks (quant/mxfp4_tiles.h): row g itself, a quarter-warp's rows 2q, 2q + 1 being 128 contiguous
// bytes of the staged tile.
template <bool kTiled>
__device__ __forceinline__ int staged_row(int g) {
  return kTiled ? g : (g & 1) * 4 + g / 2;
}

// Whether w's rows can be staged: K up to kMaxStages stages, 16-byte aligned blocks and scales (a 16-row tile's
// scales then start at a multiple of 16 bytes too), and every row a 32-bit tensor-copy coordinate.
inline bool staged_rows_fit(const ExpertWeights& w) {
  return is_mxfp4(w.storage) && w.out % kRowsPerCta == 0 && w.in % 32 == 0 &&
         w.in / 32 <= kMaxStages * kGroupsPerStage && w.n_experts * w.out <= INT_MAX &&
         aligned_to(w.blocks.raw(), 16) && aligned_to(w.scales.raw(), 16);
}

// Thread 0, before a CTA barrier; depends on nothing an earlier kernel writes.
__device__ __forceinline__ void init_stage_barriers(std::uint64_t* bars, int stages) {
  for (int s = 0; s < stages; ++s) bulk_copy::barrier_init(&bars[s], 1);
  bulk_copy::fence_barrier_init();
}

// Rows first_row .. first_row + 15 of the [rows, groups] blocks (`map`: their tensor map, 128-byte boxes of 16 rows)
// and their scales into shared memory: thread 0 arms each stage's barrier with the bytes it waits for (whole boxes:
// columns past the row read as zeros; a copy may land first, the phase still needs that arrival) and copies the
// scales with stage 0, and lane 0 of warp w copies boxes w, w + 8, ... One tensor copy a box, where a bulk copy a
// row and stage cost each lane that issued one ~24 instructions of the loop the compiler serialises them in (v17:
// 11% of gate_up's instructions). Sources are 16-byte aligned.
__device__ __forceinline__ void issue_staged_copies(const CUtensorMap* map, const std::uint8_t* scales, int first_row,
                                                    int groups, const StagedLayout& layout, unsigned char* shared,
                                                    std::uint64_t* bars) {
  // The warp index through a shuffle from lane 0: ptxas then knows it warp-uniform and keeps the copies' operands
  // in uniform registers.
  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0), lane = threadIdx.x % 32;
  const int boxes = staged_boxes(groups);
  if (threadIdx.x == 0) {
    for (int s = 0; s < staged_stages(groups); ++s) {
      const int stage_boxes = min(boxes - s * kBoxesPerStage, kBoxesPerStage);
      bulk_copy::arrive_expecting(&bars[s], static_cast<unsigned>(stage_boxes * kBoxBytes) +
                                                (s == 0 ? static_cast<unsigned>(kRowsPerCta * groups) : 0u));
    }
    bulk_copy::copy_to_shared(shared + layout.scales, scales + static_cast<std::int64_t>(first_row) * groups,
                              static_cast<unsigned>(kRowsPerCta * groups), &bars[0]);
  }
  if (lane == 0)
    for (int b = warp; b < boxes; b += kWarps)
      bulk_copy::tensor_copy_2d(shared + layout.weights + b * kBoxBytes, map, b * kGroupsPerBox * 16, first_row,
                                &bars[b / kBoxesPerStage]);
}

// Tiled blocks: the rows' 16-row block is one range of whole 1 KB tiles (K padded), so a stage (8 tiles) is one bulk
// copy, issued by lane 0 of warp s for stage s; thread 0 arms the barriers and copies the scales as above.
__device__ __forceinline__ void issue_tiled_copies(const std::uint8_t* blocks, const std::uint8_t* scales,
                                                   int first_row, int groups, const StagedLayout& layout,
                                                   unsigned char* shared, std::uint64_t* bars) {
  const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 32), 0), lane = threadIdx.x % 32;
  const int tiles = static_cast<int>(mxfp4_row_tiles(groups)), stages = staged_stages(groups);
  const auto stage_bytes = [&](int s) { return static_cast<unsigned>(min(tiles - s * kWarps, kWarps) * 1024); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s)
      bulk_copy::arrive_expecting(&bars[s],
                                  stage_bytes(s) + (s == 0 ? static_cast<unsigned>(kRowsPerCta * groups) : 0u));
    bulk_copy::copy_to_shared(shared + layout.scales, scales + static_cast<std::int64_t>(first_row) * groups,
                              static_cast<unsigned>(kRowsPerCta * groups), &bars[0]);
  }
  if (lane == 0 && warp < stages) {
    const std::int64_t first_unit = mxfp4_tiled_unit(first_row, 0, groups) + warp * kWarps * kMxfp4TileUnits;
    bulk_copy::copy_to_shared(shared + layout.weights + warp * kWarps * 1024, blocks + 16 * first_unit,
                              stage_bytes(warp), &bars[warp]);
  }
}

// This lane's share of tile grp / 4 (group grp of MMA rows g and g + 8) from the staged rows; zeros past the last
// group.
template <bool kTiled>
__device__ __forceinline__ TileLoad staged_tile(const unsigned char* shared, const StagedLayout& layout, int groups,
                                                int grp) {
  const int r = staged_row<kTiled>((threadIdx.x % 32) / 4);
  TileLoad l{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0), 127, 127};
  if (grp < groups) {
    // Row-major: box grp / 8, row r's chunk grp % 8 swizzled; row r + 8 the same chunk order, 1 KB on. Tiled: tile
    // grp / 4, row r's block grp % 4; row r + 8 512 bytes on.
    const unsigned char* row_r =
        kTiled ? shared + layout.weights + grp / kGroupsPerTile * 1024 + r * 64 + grp % kGroupsPerTile * 16
               : shared + layout.weights + grp / kGroupsPerBox * kBoxBytes + r * 128 + ((grp % kGroupsPerBox) ^ r) * 16;
    l.g = *reinterpret_cast<const uint4*>(row_r);
    l.h = *reinterpret_cast<const uint4*>(row_r + (kTiled ? 8 * 64 : 8 * 128));
    l.sg = shared[layout.scales + r * groups + grp];
    l.sh = shared[layout.scales + (r + 8) * groups + grp];
  }
  return l;
}

// TokenForm::f16_groups: one staged tile, lane (g, t) holding group grp = 4 tile + t of rows g and g + 8, its weights
// decoded to E4M3 bits (value * 2^-6, exact) and unpacked to f16 (exact). Column n of the eight MMAs carries the
// token's values of the tile's group n only (lane 4 n + n; zeros elsewhere), so C[r][n] is row r's sum over group n
// unscaled, and lanes t = 0, 1 multiply theirs (c0, c1: groups 2t, 2t + 1 of row g; c2, c3 of row g + 8) by the
// block scale 2^(code - 127), the decode's 2^6 and the token group's 2^e into their rows' sums: one multiply-add a
// group, where the bf16 form multiplies every weight pair by its scale before the MMA.
// Lanes that carry no token values read them from `zeros` (a load, not a zeroing of four registers each word).
// Every lane computes its four factors; those of lanes t = 2, 3 and of groups past the row (clamped to the last
// group) meet sums of zero weights or zero token values, so any finite factor serves (a block scale past 248 is
// infinite and makes such a zero NaN, as the bf16 form's 2^128 does).
template <bool kTiled>
__device__ __forceinline__ void f16_group_tile(const TileLoad& l, const unsigned char* shared,
                                               const StagedLayout& layout, const uint4* xs16, const uint4* zeros,
                                               const float* group_scale, int groups, int grp, float& row_g,
                                               float& row_h) {
  const int g = (threadIdx.x % 32) / 4, t = threadIdx.x % 4;
  const uint4* xg = g == t && grp < groups ? xs16 + grp * 4 : zeros;
  const std::uint32_t wg[4] = {l.g.x, l.g.y, l.g.z, l.g.w}, wh[4] = {l.h.x, l.h.y, l.h.z, l.h.w};
  float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // word j: values 8j .. 8j + 7 of the group
    const uint4 b = xg[j];
    const std::uint32_t lg = e2m1_low_to_e4m3x4(wg[j]), hg = e2m1_high_to_e4m3x4(wg[j]);
    const std::uint32_t lh = e2m1_low_to_e4m3x4(wh[j]), hh = e2m1_high_to_e4m3x4(wh[j]);
    mma_f16_16816(c, e4m3x2_to_f16x2<0>(lg), e4m3x2_to_f16x2<0>(lh), e4m3x2_to_f16x2<0>(hg), e4m3x2_to_f16x2<0>(hh),
                  b.x, b.y);  // values 0, 2 | 1, 3
    mma_f16_16816(c, e4m3x2_to_f16x2<1>(lg), e4m3x2_to_f16x2<1>(lh), e4m3x2_to_f16x2<1>(hg), e4m3x2_to_f16x2<1>(hh),
                  b.z, b.w);  // values 4, 6 | 5, 7
  }
  // The tile's groups 2t, 2t + 1 (lanes t = 2, 3 take 0, 1's: this warp's own tile, whose token factors it wrote).
  const int g0 = min(grp - t + 2 * (t & 1), groups - 1), g1 = min(g0 + 1, groups - 1);
  const float x0 = group_scale[g0], x1 = group_scale[g1];
  const auto factor = [&](int row, int group, float x) {
    const int code = shared[layout.scales + row * groups + group];  // past 248 the factor is infinite
    return __uint_as_float(static_cast<unsigned>(min(code + 6, 255)) << 23) * x;
  };
  const int r = staged_row<kTiled>(g);  // the staged rows MMA rows g and g + 8 read
  row_g = fmaf(c[0], factor(r, g0, x0), row_g);
  row_g = fmaf(c[1], factor(r, g1, x1), row_g);
  row_h = fmaf(c[2], factor(r + 8, g0, x0), row_h);
  row_h = fmaf(c[3], factor(r + 8, g1, x1), row_h);
}

constexpr std::size_t kMaxShared = 48 * 1024;  // no opt-in launch attribute needed
constexpr int kCtasPerSm = 6;  // 40 registers: 6 x 256 threads fit a multiprocessor, so the down shape's grid
                               // (720 CTAs) is one wave; shared memory (33 KB a CTA at K = 2,880) fits 6

struct TokenArgs {
  const std::uint8_t* blocks;  // tiled blocks (bulk copies); row-major ones come through the kernel's tensor map
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

// Dynamic shared memory: stage barriers, split-K partials, the token's group factors (TokenForm::f16_groups), a zero
// row (the MMA's token-less columns), the staged rows and scales (StagedLayout), and the token's row (bf16, or f16
// scaled by group).
constexpr int kGroupScales = kMaxStages * 8 + kWarps * kRowsPerCta * 4;
constexpr int kZeros = kGroupScales + kMaxStages * kGroupsPerStage * 4;
constexpr int kHeader = kZeros + kGroupsPerTile * 16;

__host__ __device__ constexpr int shared_bytes(int groups) { return kHeader + staged_bytes(groups) + groups * 32 * 2; }

// The 16-byte pieces of slot j's input row (as bf16) that this warp's tiles (warp, warp + 8, ...) read: 16 a tile,
// at most 2 a lane (K <= 4,096). Loaded into registers after the dependent-launch wait (the kernel just before
// writes x: the norm + router, or gate_up for down) and in flight with the copies; then stored, and only this warp
// reads them (a warp barrier). A coherent load cached in L1 (__ldca: every CTA of the grid reads the same row), not
// the read-only path: ptxas moved unconditional __ldg loads of x above the wait (griddepcontrol.wait, SASS
// ACQBULK), and the down projection read a stale h (v24).
template <bool kF32>
struct WarpXPieces {
  static constexpr int kPerLane = 2;
  static_assert(kMaxStages * kGroupsPerStage / kGroupsPerTile / kWarps * 16 <= kPerLane * 32, "a warp's pieces fit");
  using Raw = std::conditional_t<kF32, float4[2], uint4>;
  Raw raw[kPerLane];
};

// This lane's piece p of the warp's share, or -1 for none (recomputed where used: fewer registers held).
__device__ __forceinline__ int warp_x_piece(int p, int in, int tiles) {
  const int warp = threadIdx.x / 32, warp_tiles = (tiles - warp + kWarps - 1) / kWarps;
  const int j = threadIdx.x % 32 + 32 * p, i = (warp + kWarps * (j / 16)) * 16 + j % 16;
  return j < warp_tiles * 16 && i < in / 8 ? i : -1;
}

template <bool kF32>
__device__ __forceinline__ WarpXPieces<kF32> load_warp_x(const TokenArgs& a, int in, int tiles) {
  const std::int64_t row = a.x_per_slot ? blockIdx.y : 0;
  WarpXPieces<kF32> x;
#pragma unroll
  for (int p = 0; p < WarpXPieces<kF32>::kPerLane; ++p) {
    const int i = warp_x_piece(p, in, tiles);
    if (i < 0) continue;
    if constexpr (kF32) {
      const float4* src = static_cast<const float4*>(a.x) + row * (in / 4) + 2 * i;
      x.raw[p][0] = __ldca(src);
      x.raw[p][1] = __ldca(src + 1);
    } else {
      x.raw[p] = __ldca(static_cast<const uint4*>(a.x) + row * (in / 8) + i);
    }
  }
  return x;
}

// Piece p's 8 values as the bf16 form multiplies them (an f32 token rounded to bf16), 2 a word.
template <bool kF32>
__device__ __forceinline__ uint4 piece_bf16_words(const WarpXPieces<kF32>& x, int p) {
  if constexpr (kF32) {
    const float4 a = x.raw[p][0], b = x.raw[p][1];
    return make_uint4(pack_bf16x2(a.x, a.y), pack_bf16x2(a.z, a.w), pack_bf16x2(b.x, b.y), pack_bf16x2(b.z, b.w));
  } else {
    return x.raw[p];
  }
}

// The same values widened to f32.
template <bool kF32>
__device__ __forceinline__ void piece_bf16_values(const WarpXPieces<kF32>& x, int p, float (&v)[8]) {
  const uint4 u = piece_bf16_words<kF32>(x, p);
  const std::uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

// TokenForm::f16_groups: the token's bf16 values in f16, each 32-value group times 2^-e, e = (the exponent of the
// group's largest magnitude) - 14 (at least -126): the group's values then lie under 2^15, and a bf16 value converts
// exactly down to 2^-31 of the group's largest (below, f16's subnormals may round it). A group's four pieces sit in
// four neighbouring lanes (warp_x_piece), so no barrier. Pieces go to xs16 as [x0 x2 | x1 x3 | x4 x6 | x5 x7] (the
// order e2m1_low / high_to_e4m3x4 give a weight word's values), the factor 2^e to group_scale[group].
template <bool kF32>
__device__ __forceinline__ void store_warp_x_f16(const WarpXPieces<kF32>& x, int in, int tiles, uint4* xs16,
                                                 float* group_scale) {
#pragma unroll
  for (int p = 0; p < WarpXPieces<kF32>::kPerLane; ++p) {
    const int i = warp_x_piece(p, in, tiles);
    float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (i >= 0) piece_bf16_values<kF32>(x, p, v);
    float amax = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) amax = fmaxf(amax, fabsf(v[k]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const int field = static_cast<int>(__float_as_uint(amax) >> 23);  // amax >= 0; 255: infinite or NaN
    const int e = field == 255 ? 0 : max(field - 127 - 14, -126);
    const float down = __uint_as_float(static_cast<unsigned>(127 - e) << 23);
    if (i < 0) continue;
    const auto h = [&](int a, int b) {
      const __half2 r = __floats2half2_rn(v[a] * down, v[b] * down);
      return *reinterpret_cast<const std::uint32_t*>(&r);
    };
    xs16[i] = make_uint4(h(0, 2), h(1, 3), h(4, 6), h(5, 7));
    if (i % 4 == 0) group_scale[i / 4] = __uint_as_float(static_cast<unsigned>(e + 127) << 23);
  }
  __syncwarp();
}

template <bool kF32>
__device__ __forceinline__ void store_warp_x(const WarpXPieces<kF32>& x, int in, int tiles, uint4* xs) {
#pragma unroll
  for (int p = 0; p < WarpXPieces<kF32>::kPerLane; ++p) {
    const int i = warp_x_piece(p, in, tiles);
    if (i >= 0) xs[i] = piece_bf16_words<kF32>(x, p);
  }
  __syncwarp();
}

// CTA (row tile, slot j): the tile's 16 rows of expert e_j staged by tensor copies (StagedLayout), warp w
// decoding tile 8 s + w of each stage as it lands. 8-warp CTAs fit 6 to a multiprocessor and the down shape's
// grid is one wave. Where the ids are settled (the down projection: the same ids as the gate_up kernel just
// before), the copies go out before the dependent wait and overlap that kernel. Lanes of MMA column 0 (g = 0)
// carry the token and the others read a zero row, so the sums are the grouped kernel's wide split bit for bit.
// H200, 20b down shape (bench-moe): 12.9 us with each warp's tiles loaded into registers (1.36 waves of 64-register
// CTAs), 9.5 us staged.
// kF16Groups (TokenForm::f16_groups): store_warp_x_f16's token and f16_group_tile's MMAs. kTiled: the blocks in
// quant/mxfp4_tiles.h's order, a bulk copy a stage (the tensor map unused).
template <bool kF32, bool kSwiglu, bool kF16Groups, bool kTiled>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm)
    mxfp4_token_kernel(TokenArgs a, const __grid_constant__ CUtensorMap weight_map) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int groups = a.groups, in = groups * 32;
  const int tiles = (groups + kGroupsPerTile - 1) / kGroupsPerTile, stages = staged_stages(groups);
  const StagedLayout layout = staged_layout(shared, groups, kHeader);
  auto* bars = reinterpret_cast<std::uint64_t*>(shared);
  auto* partial = reinterpret_cast<float(*)[kRowsPerCta]>(shared + kMaxStages * 8);
  uint4* zeros = reinterpret_cast<uint4*>(shared + kZeros);
  uint4* x_shared = reinterpret_cast<uint4*>(shared + layout.end);
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
  if constexpr (kTiled)
    issue_tiled_copies(a.blocks, a.scales, e * a.out_rows + row0, groups, layout, shared, bars);
  else
    issue_staged_copies(&weight_map, a.scales, e * a.out_rows + row0, groups, layout, shared, bars);
  if (a.slots_settled) begin_dependent_grid();
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if constexpr (kF16Groups) {
    auto* group_scale = reinterpret_cast<float*>(shared + kGroupScales);
    store_warp_x_f16<kF32>(load_warp_x<kF32>(a, in, tiles), in, tiles, x_shared, group_scale);
    for (int s = 0; s < stages; ++s) {
      const int tile = s * kWarps + warp;
      bulk_copy::wait(&bars[s], 0);
      if (tile >= tiles) break;
      const int grp = tile * kGroupsPerTile + t;
      f16_group_tile<kTiled>(staged_tile<kTiled>(shared, layout, groups, grp), shared, layout, x_shared, zeros,
                             group_scale, groups, grp, acc[0], acc[2]);
    }
    // Lanes t = 0 and 1 hold a row's groups 2t, 2t + 1 of every tile: lane t = 0 takes both.
    acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], 1);
    acc[2] += __shfl_xor_sync(0xffffffffu, acc[2], 1);
  } else {
    store_warp_x<kF32>(load_warp_x<kF32>(a, in, tiles), in, tiles, x_shared);  // in flight with the copies
    for (int s = 0; s < stages; ++s) {
      const int tile = s * kWarps + warp, grp = tile * kGroupsPerTile + t;
      bulk_copy::wait(&bars[s], 0);
      if (tile >= tiles) break;
      const TileLoad l = staged_tile<kTiled>(shared, layout, groups, grp);
      const uint4* xg = g == 0 && grp < groups ? x_shared + grp * 4 : zeros;
      const auto words = [&](int q) { return xg[q]; };
      if (needs_two_multiplies(l))
        mma_tile<true>(l, words, acc);
      else
        mma_tile<false>(l, words, acc);
    }
  }

  // Split-K partials summed in warp order by warp 0, as the grouped kernel. Only MMA column 0 is the token: lanes
  // t = 0 hold its MMA rows g (acc[0]) and g + 8 (acc[2]), staged rows staged_row(g) and that + 8, and lane r of
  // warp 0 sums row r.
  if (t == 0) {
    partial[warp][staged_row<kTiled>(g)] = acc[0];
    partial[warp][staged_row<kTiled>(g) + 8] = acc[2];
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

template <bool kF32, bool kF16Groups, bool kTiled>
void launch_order(const TokenArgs& a, const CUtensorMap& map, bool swiglu, dim3 grid, std::size_t shared,
                  cudaStream_t stream) {
  if (swiglu)
    launch_dependent(mxfp4_token_kernel<kF32, true, kF16Groups, kTiled>, grid, kWarps * 32, shared, stream, a, map);
  else
    launch_dependent(mxfp4_token_kernel<kF32, false, kF16Groups, kTiled>, grid, kWarps * 32, shared, stream, a, map);
}

template <bool kF32, bool kF16Groups>
void launch(const TokenArgs& a, const CUtensorMap& map, bool tiled, bool swiglu, dim3 grid, std::size_t shared,
            cudaStream_t stream) {
  if (tiled)
    launch_order<kF32, kF16Groups, true>(a, map, swiglu, grid, shared, stream);
  else
    launch_order<kF32, kF16Groups, false>(a, map, swiglu, grid, shared, stream);
}

}  // namespace

static_assert(shared_bytes(kMxfp4TokenMaxInputBytes / 64) <= static_cast<int>(kMaxShared));
static_assert(kMxfp4TokenMaxInputBytes / 64 <= kMaxStages * kGroupsPerStage);

bool mxfp4_token_matmul_fits(const ExpertWeights& w) {
  return staged_rows_fit(w) && w.in * 2 <= kMxfp4TokenMaxInputBytes;
}

Status mxfp4_token_matmul_cuda(const Tensor& x, const Tensor& slots, const ExpertWeights& w, const SwigluParams* swiglu,
                               Tensor& out, Tensor& error_flag, cudaStream_t stream, TokenSettledInputs settled,
                               TokenForm form) {
  const char* op = "mxfp4_token_matmul_cuda";
  if (!mxfp4_token_matmul_fits(w))
    return make_error(std::string(op) + ": needs MXFP4 experts (either order, 16-byte aligned) with out % 16 == 0 " +
                      "and in <= " + std::to_string(kMxfp4TokenMaxInputBytes / 2) + ", got " + std::to_string(w.out) +
                      " x " + std::to_string(w.in));
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
  const bool tiled = w.storage == ExpertStorage::mxfp4_tiled;
  const TokenArgs a{w.blocks.data<std::uint8_t>(),
                    w.scales.data<std::uint8_t>(),
                    bias_kind == kNoBias ? nullptr : w.bias.raw(),
                    bias_kind,
                    static_cast<int>(w.out),
                    static_cast<int>(w.in / 32),
                    static_cast<int>(w.n_experts),
                    x.raw(),
                    x_rows > 1,
                    slots.data<std::int32_t>(),
                    settled.slots && dependent_launch_enabled(),
                    flag.data<std::int32_t>(),
                    swiglu ? swiglu->alpha : 0.f,
                    swiglu ? swiglu->limit : 0.f,
                    o.raw()};
  CUtensorMap map{};  // row-major: the blocks as a [E x out, in / 2] byte matrix, 16-row boxes of 128 bytes
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(w.in / 2);
  if (!tiled)
    D0_RETURN_IF_ERROR(byte_matrix_tensor_map(w.blocks.raw(), static_cast<std::uint64_t>(w.n_experts * w.out),
                                              row_bytes, row_bytes, kRowsPerCta, kGroupsPerBox * 16,
                                              TensorMapSwizzle::bytes128, map));
  const dim3 grid(static_cast<unsigned>(w.out / kRowsPerCta), static_cast<unsigned>(k));
  const std::size_t shared = static_cast<std::size_t>(shared_bytes(static_cast<int>(w.in / 32)));
  const bool groups16 = form == TokenForm::f16_groups, glu = swiglu != nullptr;
  if (f32)
    groups16 ? launch<true, true>(a, map, tiled, glu, grid, shared, stream)
             : launch<true, false>(a, map, tiled, glu, grid, shared, stream);
  else
    groups16 ? launch<false, true>(a, map, tiled, glu, grid, shared, stream)
             : launch<false, false>(a, map, tiled, glu, grid, shared, stream);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_token_kernel");
  return Status::success();
}

}  // namespace day0
