// MXFP4 grouped expert GEMM on FP8 warpgroup MMAs: see moe_mxfp4_wgmma_fp8_cuda.h.
#include "ops/cuda/moe_mxfp4_wgmma_fp8_cuda.h"

#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/moe_mxfp4_kernels.cuh"
#include "ops/cuda/moe_mxfp4_rs_fp8_cuda.cuh"
#include "ops/cuda/moe_mxfp4_wgmma_cuda.h"
#include "ops/cuda/moe_mxfp4_ws_fp8_cuda.cuh"
#include "ops/cuda/wgmma.cuh"
#include "ops/cuda/wgmma_k_loop.cuh"
#include "quant/fp8_experts.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 128;         // weight rows per CTA: two warpgroups of 64
constexpr int kBK = 128;         // values per k-tile: four MXFP4 groups, one 128-byte swizzled row of e4m3
constexpr int kThreads = 256;    // thread t copies and converts groups 2 (t % 2), 2 (t % 2) + 1 of row t / 2
constexpr int kMaxGroups = 128;  // K <= 4,096: the CTA's 128 x groups scale bytes stay in shared memory
constexpr int kRawBytes = 32;    // a thread's two groups of a k-tile

// Shared memory (from a 1,024-byte aligned base): two converted A tiles (the MMAs read one while the next is
// written), a ring of token tiles (kStages k-tiles of copies in flight), the raw weight bytes of the k-tiles not yet
// converted (kStages - 1: a k-tile's bytes are converted the iteration before its MMAs), the scale block. 2 CTAs
// an SM for K up to 3,072 (gpt-oss: 2,880).
template <int kBN>
struct Layout {
  static constexpr int kStages = kBN == 128 ? 3 : kBN == 64 ? 4 : 6;
  static constexpr int kRawSlots = kStages - 1;
  static constexpr int kATile = kBM * kBK, kBTile = kBN * kBK, kRaw = kThreads * kRawBytes;
  static constexpr int kA = 0, kB = kA + 2 * kATile, kRawAt = kB + kStages * kBTile;
  static constexpr int kScales = kRawAt + kRawSlots * kRaw;
  static constexpr int bytes(int groups) { return 1024 + kScales + (kBM * groups + 15) / 16 * 16; }
};

template <int kBN, bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 2) mxfp4_wgmma_fp8_gemm_kernel(Fp8KernelArgs f, int n_experts) {
  using L = Layout<kBN>;
  const KernelArgs& a = f.k;
  extern __shared__ unsigned char smem_unaligned[];
  unsigned char* smem = smem_unaligned + ((1024 - wgmma::shared_address(smem_unaligned) % 1024) % 1024);
  __shared__ int row_code[kBM];  // each row's largest scale code: its scale is 2^(code - 127 - 6)
  // E4M3 codes of the 8 E2M1 magnitudes for each group shift kMxfp4Fp8MinShift..kMxfp4Fp8MaxShift
  __shared__ std::uint64_t shift_codes[kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift + 1];
  __shared__ EpilogueStage<kBN, kBM> stage;
  __shared__ float entry_scale[kBN];  // the tile's token scales, staged as the rest of the epilogue's reads
  const TokenTile tile = pick_token_tile<kThreads, kBN>(a, n_experts);
  if (tile.e < 0) return;
  const int tid = threadIdx.x, warp = tid / 32, wg = warp / 4;
  const int row0 = blockIdx.x * kBM, rows = min(kBM, a.out_rows - row0);  // rows: 64 or 128
  const int in = a.groups * 32, k_tiles = (a.groups + 3) / 4;            // the last k-tile may end in zeros
  const int live = tile.end - tile.begin, cols = (live + 15) / 16 * 16;  // the MMAs read token rows below cols
  const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;

  wgmma::copy_scale_block<kThreads>(smem + L::kScales, a.scales + block_row0 * a.groups, rows * a.groups);
  if (tid <= kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift) shift_codes[tid] = mxfp4_fp8_table(kMxfp4Fp8MinShift + tid).codes;
  // This thread's two weight groups a k-tile (rows past `rows` read nothing: zeros, as groups past the row) and its
  // token rows: chunk q of tokens tid / 8 + 32 i (absent tokens and chunks past the row read nothing: zeros).
  const int w_row = tid / 2, w_half = tid % 2;
  const bool w_live = w_row < rows;
  const Mxfp4RowUnits w_units = mxfp4_row_units(block_row0 + (w_live ? w_row : 0), a.groups, a.tiled);
  constexpr int kTokenCopies = kBN / 32;
  const int q = tid % 8;
  const std::uint8_t* x_src[kTokenCopies];
#pragma unroll
  for (int i = 0; i < kTokenCopies; ++i) {
    const int p = tile.begin + tid / 8 + 32 * i;
    x_src[i] =
        p < tile.end ? f.x8 + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in + 16 * q : nullptr;
  }
  auto issue = [&](int kt) {  // k-tile kt's copies: tokens into ring slot kt % kStages, one commit group
    unsigned char* raw = smem + L::kRawAt + (kt % L::kRawSlots) * L::kRaw + kRawBytes * tid;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int g = 4 * kt + 2 * w_half + j;
      wgmma::copy_16(raw + 16 * j, a.blocks + w_units.at(min(g, a.groups - 1)), w_live && g < a.groups ? 16u : 0u);
    }
    const bool chunk_live = kt * kBK + 16 * q < in;
#pragma unroll
    for (int i = 0; i < kTokenCopies; ++i) {
      const int n = tid / 8 + 32 * i;
      if (n >= cols) break;
      unsigned char* dst = smem + L::kB + (kt % L::kStages) * L::kBTile + n * kBK + 16 * wgmma::swizzled_chunk(n, q);
      const bool present = x_src[i] && chunk_live;
      wgmma::copy_16(dst, present ? x_src[i] + kt * kBK : f.x8, present ? 16u : 0u);
    }
    wgmma::copy_commit();
  };
  int max_code = 0;
  auto convert = [&](int kt) {  // this thread's copied groups of k-tile kt, E2M1 -> E4M3, into A tile kt % 2
    const unsigned char* raw = smem + L::kRawAt + (kt % L::kRawSlots) * L::kRaw + kRawBytes * tid;
    const std::uint8_t* codes = smem + L::kScales + w_row * a.groups;
    unsigned char* a_row = smem + L::kA + (kt % 2) * L::kATile + w_row * kBK;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int gj = 2 * w_half + j, g = 4 * kt + gj;  // group gj of the k-tile: chunks 2 gj, 2 gj + 1 of the row
      const uint4 w = *reinterpret_cast<const uint4*>(raw + 16 * j);
      // Past the row or the groups the bytes are zeros: entry 0 of any table.
      const int shift = w_live && g < a.groups ? static_cast<int>(codes[g]) - max_code + kFp8RowExponentShift : 0;
      store_group_fp8(w, shift_codes[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift], a_row, w_row, gj);
    }
  };

  // Prologue: kStages - 1 k-tiles in flight (empty groups past the end keep the count uniform); the scale block
  // lands with k-tile 0, then each row's largest code (the pair of threads of a row share it) and tile 0 converted.
  wgmma::issue_first_tiles<L::kStages>(k_tiles, issue);
  stage.template fill<kSwiglu>(a, tile.begin, live, block_row0, rows);  // read after the k-loop's barriers
  if (tid < live) {
    const int p = tile.begin + tid;
    entry_scale[tid] = f.sx[a.inputs_are_tokens ? a.rows[p] : p];
  }
  wgmma::copy_wait<L::kStages - 2>();
  __syncthreads();  // every thread's copies of the scale block, the tables
  if (w_live) {
    const std::uint8_t* codes = smem + L::kScales + w_row * a.groups;
    for (int g = w_half; g < a.groups; g += 2) max_code = max(max_code, static_cast<int>(codes[g]));
  }
  max_code = max(max_code, __shfl_xor_sync(0xffffffffu, max_code, 1));
  if (w_half == 0) row_code[w_row] = max_code;  // read by the stores, after the k-loop's barriers
  convert(0);
  wgmma::fence_shared_for_mma();
  __syncthreads();

  // The k-loop and the stores at the tile's live width, one instantiation each (moe_mxfp4_wgmma_cuda.cu).
  wgmma::at_width<kBN>(cols, [&](auto width) {
    constexpr int N = decltype(width)::value;
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
    // Raw slot kt % kRawSlots is free when k-tile kt + kStages - 1 is issued: k-tile kt was converted before.
    wgmma::run_k_tiles<L::kStages>(k_tiles, issue, convert, [&](int kt) {
      const std::uint64_t da = wgmma::sw128_descriptor(smem + L::kA + (kt % 2) * L::kATile + wg * 64 * kBK);
      const std::uint64_t db = wgmma::sw128_descriptor(smem + L::kB + (kt % L::kStages) * L::kBTile);
#pragma unroll
      for (int s = 0; s < kBK / 32; ++s) wgmma::mma_e4m3<N>(acc, da + 2 * s, db + 2 * s);
    });

    if (row0 + wg * 64 >= a.out_rows) return;  // this warpgroup's rows are past the matrix (out = 64 mod 128)
    store_fp8_tile<kSwiglu, N>(a, acc, row0, wg * 64 + (warp % 4) * 16, live, row_code, stage, entry_scale);
  });
}

template <int kBN, bool kSwiglu>
Status launch(const Fp8KernelArgs& args, int n_experts, dim3 grid, cudaStream_t stream) {
  auto* kernel = mxfp4_wgmma_fp8_gemm_kernel<kBN, kSwiglu>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory.
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout<kBN>::bytes(kMaxGroups));
  D0_CUDA_RETURN_IF_ERROR(attribute);
  kernel<<<grid, kThreads, Layout<kBN>::bytes(args.k.groups), stream>>>(args, n_experts);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_wgmma_fp8_gemm_kernel");
  return Status::success();
}

}  // namespace

bool mxfp4_wgmma_fp8_gemm_fits(const ExpertWeights& w) {
  return is_mxfp4(w.storage) && w.out % 64 == 0 && w.in % 32 == 0 && w.in / 32 <= kMaxGroups;
}

int mxfp4_wgmma_fp8_tile_tokens(std::int64_t assignments, const ExpertWeights& w) {
  if (assignments < kMxfp4WgmmaMinTokensPerExpert * w.n_experts) return kRsFp8TileTokens;
  if (assignments >= kWsFp8MinTokensPerExpert * w.n_experts && mxfp4_ws_fp8_gemm_fits(false, int(w.in / 32)))
    return kWsFp8TileTokens;
  return mxfp4_wgmma_tile_tokens(assignments, w.n_experts);
}

Status mxfp4_grouped_gemm_wgmma_fp8_cuda(const Tensor& x8, const Tensor& sx, bool inputs_are_tokens,
                                         const ExpertWeights& w, const DeviceExpertGroups& groups, int tile_tokens,
                                         std::int64_t launch_slots, const SwigluParams* swiglu, Tensor& out,
                                         cudaStream_t stream) {
  const char* op = "mxfp4_grouped_gemm_wgmma_fp8_cuda";
  D0_ASSIGN_OR_RETURN(KernelArgs args,
                      grouped_kernel_args(op, x8, inputs_are_tokens, w, groups, swiglu, out, DType::f8_e4m3));
  if (!mxfp4_wgmma_fp8_gemm_fits(w))
    return make_error(std::string(op) + ": needs out a multiple of 64 and in a multiple of 32 up to " +
                      std::to_string(32 * kMaxGroups) + ", got " + std::to_string(w.out) + " x " +
                      std::to_string(w.in));
  const std::int64_t A = groups.rows.numel();
  D0_RETURN_IF_ERROR(check_cuda_tensor(sx, op, "sx", {DType::f32}, {sx.numel()}));
  if (sx.numel() < (inputs_are_tokens ? x8.size(0) : A))
    return make_error(std::string(op) + ": sx needs a scale per row of x8 (" +
                      std::to_string(inputs_are_tokens ? x8.size(0) : A) + "), got " + std::to_string(sx.numel()));
  if (!aligned_to(w.scales.raw(), 16) || w.in % 16 != 0)
    return make_error(std::string(op) + ": scales must be 16-byte aligned and rows of x8 a multiple of 16 bytes");
  if (tile_tokens != kRsFp8TileTokens && tile_tokens != 32 && tile_tokens != 64 && tile_tokens != 128 &&
      tile_tokens != kWsFp8TileTokens)
    return make_error(std::string(op) + ": tile_tokens must be 16, 32, 64, 128 or 192, got " +
                      std::to_string(tile_tokens));
  if (launch_slots < 0 || launch_slots > 65535)
    return make_error(std::string(op) + ": launch_slots must be in [0, 65535], got " + std::to_string(launch_slots));
  Tensor counter = groups.item_counter;  // a view the kernel writes
  if (counter.defined()) D0_RETURN_IF_ERROR(check_cuda_tensor(counter, op, "item_counter", {DType::i32}, {1}));
  if (launch_slots == 0 || A == 0) return Status::success();
  const Fp8KernelArgs f{args, static_cast<const std::uint8_t*>(x8.raw()), sx.data<float>(),
                        counter.defined() ? counter.data<std::int32_t>() : nullptr};
  const dim3 grid(static_cast<unsigned>((w.out + kBM - 1) / kBM), static_cast<unsigned>(launch_slots));
  const int E = static_cast<int>(w.n_experts);
  switch (tile_tokens) {
    case kWsFp8TileTokens:
      return launch_mxfp4_ws_fp8_gemm(f, x8.size(0), E, grid, swiglu != nullptr, stream);
    case kRsFp8TileTokens:
      return launch_mxfp4_rs_fp8_gemm(f, E, grid, swiglu != nullptr, stream);
    case 32: return swiglu ? launch<32, true>(f, E, grid, stream) : launch<32, false>(f, E, grid, stream);
    case 64: return swiglu ? launch<64, true>(f, E, grid, stream) : launch<64, false>(f, E, grid, stream);
    default: return swiglu ? launch<128, true>(f, E, grid, stream) : launch<128, false>(f, E, grid, stream);
  }
}

}  // namespace day0
