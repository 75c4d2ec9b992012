// The decode-sized FP8 grouped expert GEMM, weights converted in registers: see moe_mxfp4_rs_fp8_cuda.cuh.
#include "ops/cuda/moe_mxfp4_rs_fp8_cuda.cuh"

#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/wgmma.cuh"
#include "ops/cuda/wgmma_k_loop.cuh"
#include "quant/fp8_experts.h"
#include "quant/mxfp4_tiles.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 64;  // weight rows a CTA: one warpgroup's MMA rows
constexpr int kBN = kRsFp8TileTokens;
constexpr int kBK = 128;       // values a k-tile: four groups, a 128-byte swizzled row of E4M3 a token
constexpr int kThreads = 256;  // two warpgroups, k-tiles 2 i and 2 i + 1
constexpr int kMaxGroups = 128;        // mxfp4_wgmma_fp8_gemm_fits' bound, which its caller checks
constexpr int kTokenTile = kBN * kBK;  // a k-tile's token bytes (1,024-byte aligned: the swizzle's unit)

// Dynamic shared memory from a 1,024-byte aligned base: every k-tile's token tile, then the CTA's scale bytes.
constexpr int dynamic_bytes(int groups) { return 1024 + (groups + 3) / 4 * kTokenTile + (kBM * groups + 15) / 16 * 16; }

struct RowPair {  // a lane's 16-byte group of rows g and g + 8 in one k-tile
  uint4 lo, hi;
};

template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 3) mxfp4_rs_fp8_gemm_kernel(Fp8KernelArgs f, int n_experts) {
  begin_dependent_grid();
  const KernelArgs& a = f.k;
  extern __shared__ unsigned char smem_unaligned[];
  unsigned char* smem = smem_unaligned + ((1024 - wgmma::shared_address(smem_unaligned) % 1024) % 1024);
  __shared__ int row_code[kBM];  // each row's largest scale code: its scale is 2^(code - 127 - 6)
  __shared__ std::uint64_t shift_codes[kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift + 1];
  __shared__ EpilogueStage<kBN, kBM> stage;
  __shared__ float entry_scale[kBN];
  __shared__ float odd_sums[8][kThreads / 2];  // the second warpgroup's sums, [accumulator][thread]
  const TokenTile tile = pick_token_tile<kThreads, kBN>(a, n_experts);
  if (tile.e < 0) return;
  const int tid = threadIdx.x, warp = tid / 32, wg = warp / 4, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * kBM, in = a.groups * 32, k_tiles = (a.groups + 3) / 4;
  const int live = tile.end - tile.begin;
  const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;
  unsigned char* tokens = smem;
  unsigned char* codes = smem + k_tiles * kTokenTile;

  // Every copy at once: the scale block and the live tokens' k-tiles, in the staged order (quant/fp8_row_order.h):
  // 16-byte chunk c of a token's k-tile is chunk c of its staged row: thread tid copies chunk tid % 8 of token
  // tid / 16 in every other k-tile. A row's short last k-tile of G groups holds 4 G bytes a chunk: G 4-byte
  // copies, the rest of the chunk zero-filled (the weights past the row are zeros, and 0 * NaN would not be).
  // Absent tokens' rows are not written: a column's sums read its own token only, and no store reads them.
  wgmma::copy_scale_block<kThreads>(codes, a.scales + block_row0 * a.groups, kBM * a.groups);
  {
    const int n = tid / 16, c = tid % 8, parity = (tid / 8) % 2;
    const int full_tiles = a.groups / 4, short_groups = a.groups % 4;
    if (n < live) {
      const int p = tile.begin + n;
      const std::uint8_t* src = f.x8 + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in;
      unsigned char* dst = tokens + n * kBK + 16 * wgmma::swizzled_chunk(n, c);
      for (int kt = parity; kt < full_tiles; kt += 2)
        cp_async::copy_16(dst + kt * kTokenTile, src + kt * kBK + 16 * c, 16);
      if (short_groups > 0 && full_tiles % 2 == parity) {
        const std::uint8_t* last = src + full_tiles * kBK + 4 * short_groups * c;
#pragma unroll
        for (int q = 0; q < 4; ++q)
          cp_async::copy_4(dst + full_tiles * kTokenTile + 4 * q, q < short_groups ? last + 4 * q : f.x8,
                           q < short_groups ? 4u : 0u);
      }
    }
    cp_async::copy_commit();
  }
  stage.template fill<kSwiglu>(a, tile.begin, live, block_row0, kBM);
  if (tid < live) {
    const int p = tile.begin + tid;
    entry_scale[tid] = f.sx[a.inputs_are_tokens ? a.rows[p] : p];
  }
  if (tid <= kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift) shift_codes[tid] = mxfp4_fp8_table(kMxfp4Fp8MinShift + tid).codes;

  // This lane's rows and its warpgroup's first two k-tiles of weights, loaded while the copies land.
  const int r_lo = (warp % 4) * 16 + g, r_hi = r_lo + 8;
  const Mxfp4RowUnits lo_units = mxfp4_row_units(block_row0 + r_lo, a.groups, a.tiled);
  const Mxfp4RowUnits hi_units = mxfp4_row_units(block_row0 + r_hi, a.groups, a.tiled);
  auto load = [&](int kt) {
    RowPair w{make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
    const int gi = 4 * kt + t;
    if (kt < k_tiles && gi < a.groups) {
      w.lo = ldg_l2_256(a.blocks + lo_units.at(gi));
      w.hi = ldg_l2_256(a.blocks + hi_units.at(gi));
    }
    return w;
  };
  RowPair w0 = load(wg), w1 = load(wg + 2);

  cp_async::copy_wait<0>();
  wgmma::fence_shared_for_mma();
  __syncthreads();  // every thread's copies landed, the tables and epilogue values written
  {                 // each row's largest code, four threads a row
    const int row = tid / 4;
    int max_code = 0;
    for (int gi = tid % 4; gi < a.groups; gi += 4)
      max_code = max(max_code, static_cast<int>(codes[row * a.groups + gi]));
    max_code = max(max_code, __shfl_xor_sync(0xffffffffu, max_code, 1));
    max_code = max(max_code, __shfl_xor_sync(0xffffffffu, max_code, 2));
    if (tid % 4 == 0) row_code[row] = max_code;
  }
  __syncthreads();
  const int lo_shift = kFp8RowExponentShift - row_code[r_lo], hi_shift = kFp8RowExponentShift - row_code[r_hi];
  auto table = [&](int row, int shift_from_max, int gi) {
    // Past the row the bytes are zeros: entry 0 of any table.
    const int shift = gi < a.groups ? static_cast<int>(codes[row * a.groups + gi]) + shift_from_max : 0;
    const std::uint64_t c = shift_codes[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift];
    return Mxfp4Fp8Bytes{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(c >> 32), 0, 0};
  };

  float acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = 0.f;
  const std::uint64_t tokens_descriptor = wgmma::sw128_descriptor(tokens);
  const std::uint32_t tokens_lo = static_cast<std::uint32_t>(tokens_descriptor);
  const std::uint32_t tokens_hi = static_cast<std::uint32_t>(tokens_descriptor >> 32);
  // k-tile kt from the lane's group w: its four k32 steps, word s of both rows feeding step s; w is reloaded with
  // k-tile kt + 4 once converted. The fragments are rewritten next k-tile, so the MMAs are waited for here.
  auto k_tile = [&](RowPair& w, int kt) {
    const int gi = 4 * kt + t;
    const Mxfp4Fp8Bytes t_lo = table(r_lo, lo_shift, gi), t_hi = table(r_hi, hi_shift, gi);
    const std::uint32_t words_lo[4] = {w.lo.x, w.lo.y, w.lo.z, w.lo.w};
    const std::uint32_t words_hi[4] = {w.hi.x, w.hi.y, w.hi.z, w.hi.w};
    std::uint32_t frag[4][4];  // k-step s: word s of both rows
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      mxfp4_word_to_fp8(words_lo[s], t_lo, frag[s][0], frag[s][2]);
      mxfp4_word_to_fp8(words_hi[s], t_hi, frag[s][1], frag[s][3]);
    }
    w = load(kt + 4);
    // The tile's descriptor: the start address (its low 14 bits, in 16-byte units) advanced in the low word, which
    // never carries into the high one; k32 step s is 32 bytes on.
    const std::uint32_t db_lo = tokens_lo + static_cast<std::uint32_t>(kt * (kTokenTile / 16));
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < 4; ++s)
      wgmma::mma_e4m3_rs16(acc, frag[s], (static_cast<std::uint64_t>(tokens_hi) << 32) | (db_lo + 2 * s));
    wgmma::commit();
    wgmma::wait<0>();
  };
  // Two k-tiles a round from two buffers: two loads in flight, no copies between buffers.
  for (int kt = wg; kt < k_tiles; kt += 4) {
    k_tile(w0, kt);
    if (kt + 2 >= k_tiles) break;
    k_tile(w1, kt + 2);
  }
  wgmma::fence_operands(acc);

  if (wg == 1) {
#pragma unroll
    for (int i = 0; i < 8; ++i) odd_sums[i][tid - kThreads / 2] = acc[i];
  }
  __syncthreads();
  if (wg == 0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = __fadd_rn(acc[i], odd_sums[i][tid]);
    store_fp8_tile<kSwiglu, kBN>(a, acc, row0, (warp % 4) * 16, live, row_code, stage, entry_scale);
  }
}

template <bool kSwiglu>
Status launch(const Fp8KernelArgs& f, int n_experts, dim3 grid, cudaStream_t stream) {
  auto* kernel = mxfp4_rs_fp8_gemm_kernel<kSwiglu>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory.
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_bytes(kMaxGroups));
  D0_CUDA_RETURN_IF_ERROR(attribute);
  launch_dependent(kernel, grid, kThreads, dynamic_bytes(f.k.groups), stream, f, n_experts);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_rs_fp8_gemm_kernel");
  return Status::success();
}

}  // namespace

Status launch_mxfp4_rs_fp8_gemm(const Fp8KernelArgs& args, int n_experts, dim3 grid, bool swiglu, cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(args.x8) % 16 != 0)
    return make_error(
        "mxfp4_grouped_gemm_wgmma_fp8_cuda: the decode-sized form copies x8 16 bytes at a time: it must "
        "be 16-byte aligned");
  grid.x = static_cast<unsigned>(args.k.out_rows / kBM);
  return swiglu ? launch<true>(args, n_experts, grid, stream) : launch<false>(args, n_experts, grid, stream);
}

}  // namespace day0
