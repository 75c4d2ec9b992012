// MXFP4 grouped expert GEMM on warpgroup MMAs: see moe_mxfp4_wgmma_cuda.h.
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"

#include <cuda_bf16.h>

#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/wgmma.cuh"
#include "ops/cuda/wgmma_k_loop.cuh"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 128;         // weight rows per CTA: two warpgroups of 64
constexpr int kBK = 64;          // inputs per k-tile: two MXFP4 groups, one 128-byte swizzled row of bf16
constexpr int kThreads = 256;    // thread t copies and decodes group t % 2 of the k-tile's row t / 2
constexpr int kMaxGroups = 128;  // K <= 4,096: the CTA's 128 x groups scale bytes stay in shared memory
constexpr int kRowBytes = kBK * 2;

// Shared memory (from a 1,024-byte aligned base, as the swizzle needs): two decoded A tiles (the MMAs read one while
// the next is written), a ring of token tiles and raw weight bytes (kStages k-tiles in flight), the scale block.
// 2 CTAs per SM at every tile; the 32-token tile has room for a deeper ring.
template <int kBN>
struct Layout {
  static constexpr int kStages = kBN == 128 ? 3 : kBN == 64 ? 4 : 6;
  static constexpr int kATile = kBM * kRowBytes, kBTile = kBN * kRowBytes, kRaw = kThreads * 16;
  static constexpr int kA = 0, kB = kA + 2 * kATile, kRawAt = kB + kStages * kBTile, kScales = kRawAt + kStages * kRaw;
  static constexpr int bytes(int groups) { return 1024 + kScales + (kBM * groups + 15) / 16 * 16; }
};

// Decodes one thread's 16-byte group (32 values: chunks 4 half .. 4 half + 3 of its row) into the swizzled A tile.
template <bool kTwo>
__device__ __forceinline__ void decode_group(const uint4 raw, const GroupScale& s, unsigned char* a_row, int row,
                                             int half) {
  const std::uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int wi = 0; wi < 4; ++wi)  // word wi = values 8 wi .. 8 wi + 7 of the group, in order
    *reinterpret_cast<uint4*>(a_row + 16 * wgmma::swizzled_chunk(row, 4 * half + wi)) =
        decode_word(words[wi], [&](std::uint32_t v) { return apply_scale<kTwo>(v, s); });
}

template <int kBN, bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 2) mxfp4_wgmma_gemm_kernel(KernelArgs a, int n_experts) {
  using L = Layout<kBN>;
  extern __shared__ unsigned char smem_unaligned[];
  unsigned char* smem = smem_unaligned + ((1024 - wgmma::shared_address(smem_unaligned) % 1024) % 1024);
  __shared__ EpilogueStage<kBN, kBM> stage;
  const TokenTile tile = pick_token_tile<kThreads, kBN>(a, n_experts);
  if (tile.e < 0) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const int row0 = blockIdx.x * kBM, rows = min(kBM, a.out_rows - row0);  // rows: 64 or 128
  const int in = a.groups * 32, k_tiles = a.groups / 2;
  const int live = tile.end - tile.begin, cols = (live + 15) / 16 * 16;  // the MMAs read token rows below cols
  const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;

  wgmma::copy_scale_block<kThreads>(smem + L::kScales, a.scales + block_row0 * a.groups, rows * a.groups);
  // This thread's weight group (rows past `rows` read nothing: zeros) and its token rows: chunk q of tokens
  // tid / 8 + 32 i (absent tokens read nothing: zeros).
  const int w_row = tid / 2, w_half = tid % 2;
  const bool w_live = w_row < rows;
  const Mxfp4RowUnits w_units = mxfp4_row_units(block_row0 + (w_live ? w_row : 0), a.groups, a.tiled);
  constexpr int kTokenCopies = kBN / 32;
  const int q = tid % 8;
  const __nv_bfloat16* x_src[kTokenCopies];
#pragma unroll
  for (int i = 0; i < kTokenCopies; ++i) {
    const int p = tile.begin + tid / 8 + 32 * i;
    x_src[i] =
        p < tile.end ? a.x + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in + 8 * q : nullptr;
  }
  auto issue = [&](int kt) {  // k-tile kt's copies into ring slot kt % kStages, one commit group
    const int slot = kt % L::kStages;
    wgmma::copy_16(smem + L::kRawAt + slot * L::kRaw + 16 * tid, a.blocks + w_units.at(2 * kt + w_half),
                   w_live ? 16u : 0u);
#pragma unroll
    for (int i = 0; i < kTokenCopies; ++i) {
      const int n = tid / 8 + 32 * i;
      if (n >= cols) break;
      unsigned char* dst = smem + L::kB + slot * L::kBTile + n * kRowBytes + 16 * wgmma::swizzled_chunk(n, q);
      wgmma::copy_16(dst, x_src[i] ? x_src[i] + kt * kBK : a.x, x_src[i] ? 16u : 0u);
    }
    wgmma::copy_commit();
  };
  auto decode = [&](int kt) {  // this thread's copied group of k-tile kt into A tile kt % 2
    const uint4 raw = *reinterpret_cast<const uint4*>(smem + L::kRawAt + (kt % L::kStages) * L::kRaw + 16 * tid);
    const std::uint32_t code = w_live ? smem[L::kScales + w_row * a.groups + 2 * kt + w_half] : 127u;
    const GroupScale s = group_scale(code);
    unsigned char* a_row = smem + L::kA + (kt % 2) * L::kATile + w_row * kRowBytes;
    if (__any_sync(0xffffffffu, code > 128))
      decode_group<true>(raw, s, a_row, w_row, w_half);
    else
      decode_group<false>(raw, s, a_row, w_row, w_half);
  };

  // Prologue: kStages - 1 k-tiles in flight, tile 0 decoded.
  wgmma::issue_first_tiles<L::kStages>(k_tiles, issue);
  stage.template fill<kSwiglu>(a, tile.begin, live, block_row0, rows);  // read after the k-loop's barriers
  wgmma::copy_wait<L::kStages - 2>();  // k-tile 0 (and the scales, in its group) landed
  __syncthreads();                     // ... for every thread's copies of the scale block
  decode(0);
  wgmma::fence_shared_for_mma();
  __syncthreads();

  // The k-loop and the stores at the tile's live width, one instantiation each: a branch per k-tile around the
  // MMAs made ptxas wait for them at the join.
  wgmma::at_width<kBN>(cols, [&](auto width) {
    constexpr int N = decltype(width)::value;
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
    wgmma::run_k_tiles<L::kStages>(k_tiles, issue, decode, [&](int kt) {
      const std::uint64_t da = wgmma::sw128_descriptor(smem + L::kA + (kt % 2) * L::kATile + wg * 64 * kRowBytes);
      const std::uint64_t db = wgmma::sw128_descriptor(smem + L::kB + (kt % L::kStages) * L::kBTile);
#pragma unroll
      for (int s = 0; s < kBK / 16; ++s) wgmma::mma_bf16<N>(acc, da + 2 * s, db + 2 * s);
    });

    if (row0 + wg * 64 >= a.out_rows) return;  // this warpgroup's rows are past the matrix (out = 64 mod 128)
    const int g = lane / 4, t = lane % 4;
    const int r_lo = row0 + wg * 64 + (warp % 4) * 16 + g;
    const float b_lo = stage.row_bias[r_lo - row0], b_hi = stage.row_bias[r_lo + 8 - row0];
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {  // as store_outputs, from the staged rows and biases
      const float v[4] = {acc[4 * j] + b_lo, acc[4 * j + 1] + b_lo, acc[4 * j + 2] + b_hi, acc[4 * j + 3] + b_hi};
      const int i0 = 8 * j + 2 * t, i1 = i0 + 1;
      const bool live0 = i0 < live, live1 = i1 < live;
      store_values<kSwiglu>(a, r_lo, r_lo + 8, live0, live1, live0 ? stage.entry_row[i0] : 0,
                            live1 ? stage.entry_row[i1] : 0, v);
    }
  });
}

template <int kBN, bool kSwiglu>
Status launch(const KernelArgs& args, int n_experts, dim3 grid, cudaStream_t stream) {
  auto* kernel = mxfp4_wgmma_gemm_kernel<kBN, kSwiglu>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory.
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout<kBN>::bytes(kMaxGroups));
  D0_CUDA_RETURN_IF_ERROR(attribute);
  kernel<<<grid, kThreads, Layout<kBN>::bytes(args.groups), stream>>>(args, n_experts);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_wgmma_gemm_kernel");
  return Status::success();
}

}  // namespace

bool mxfp4_wgmma_gemm_fits(const ExpertWeights& w) {
  return is_mxfp4(w.storage) && w.out % 64 == 0 && w.in % kBK == 0 && w.in / 32 <= kMaxGroups;
}

int mxfp4_wgmma_tile_tokens(std::int64_t assignments, std::int64_t n_experts) {
  // bench-moe (H200), before the MMAs ran at the live width: 20b down shape, 512 tokens (64 an expert) 163 us on
  // 128-token tiles against 194 on 64 (an expert over 64 decodes its weights twice); 20b, 256 tokens (32 an expert)
  // 135.6 us on 64-token tiles, 163.9 on 128, 167.3 on 32; 128 tokens (16 an expert) 118.0 on 32 against 135.1 on
  // 64; 120b, 512 tokens (16 an expert) 434.8 on 32 against 500.2 on 64. With the fused kernel's two row tiles the
  // GEMM starts at 24 an expert, where 32-token tiles won: 20b, 192 tokens 116.6 us against 133.7 on 64.
  // At the live width the tiles differ by less where an expert's tokens fit any of them: 120b, 512 tokens 413 / 404
  // / 418 us on 32 / 64 / 128; 20b, 64 tokens 107.7 / 105.1 / 108.0; at 512 tokens 264 / 189 / 143.
  if (assignments >= 48 * n_experts) return 128;
  return assignments >= 32 * n_experts ? 64 : 32;
}

std::int64_t mxfp4_wgmma_launch_slots(std::int64_t routed_experts_bound, std::int64_t assignments, int tile_tokens) {
  return routed_experts_bound + (assignments + tile_tokens - 1) / tile_tokens;
}

Status mxfp4_grouped_gemm_wgmma_cuda(const Tensor& x, bool inputs_are_tokens, const ExpertWeights& w,
                                     const DeviceExpertGroups& groups, int tile_tokens, std::int64_t launch_slots,
                                     const SwigluParams* swiglu, Tensor& out, cudaStream_t stream) {
  const char* op = "mxfp4_grouped_gemm_wgmma_cuda";
  D0_ASSIGN_OR_RETURN(KernelArgs args, grouped_kernel_args(op, x, inputs_are_tokens, w, groups, swiglu, out));
  if (!mxfp4_wgmma_gemm_fits(w))
    return make_error(std::string(op) + ": needs out a multiple of 64 and in a multiple of 64 up to " +
                      std::to_string(32 * kMaxGroups) + ", got " + std::to_string(w.out) + " x " +
                      std::to_string(w.in));
  if (!aligned_to(w.scales.raw(), 16)) return make_error(std::string(op) + ": scales must be 16-byte aligned");
  if (tile_tokens != 32 && tile_tokens != 64 && tile_tokens != 128)
    return make_error(std::string(op) + ": tile_tokens must be 32, 64 or 128, got " + std::to_string(tile_tokens));
  if (launch_slots < 0 || launch_slots > 65535)
    return make_error(std::string(op) + ": launch_slots must be in [0, 65535], got " + std::to_string(launch_slots));
  if (launch_slots == 0 || groups.rows.numel() == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>((w.out + kBM - 1) / kBM), static_cast<unsigned>(launch_slots));
  const int E = static_cast<int>(w.n_experts);
  switch (tile_tokens) {
    case 32: return swiglu ? launch<32, true>(args, E, grid, stream) : launch<32, false>(args, E, grid, stream);
    case 64: return swiglu ? launch<64, true>(args, E, grid, stream) : launch<64, false>(args, E, grid, stream);
    default: return swiglu ? launch<128, true>(args, E, grid, stream) : launch<128, false>(args, E, grid, stream);
  }
}

}  // namespace day0
