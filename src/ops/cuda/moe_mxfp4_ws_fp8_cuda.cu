// The warp-specialised MXFP4 grouped FP8 GEMM: see moe_mxfp4_ws_fp8_cuda.cuh.
#include "ops/cuda/moe_mxfp4_ws_fp8_cuda.cuh"

#include <algorithm>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/wgmma.cuh"
#include "ops/cuda/wgmma_k_loop.cuh"
#include "quant/fp8_experts.h"
#include "quant/mxfp4_to_fp8_table.h"

namespace day0 {
namespace {

using namespace mxfp4_kernels;

constexpr int kBM = 128;  // weight rows per CTA: a consumer warpgroup's 64 each
constexpr int kBK = 128;  // values per k-tile: four MXFP4 groups, one 128-byte swizzled row of e4m3
constexpr int kBN = kWsFp8TileTokens;
// Producer thread t copies and converts kGroupsPerThread groups of row t % 128 of each k-tile (groups from
// kGroupsPerThread * (t / 128)): two warpgroups, as the conversion is ALU work (one warp a scheduler left it
// latency-bound, v21), with registers moved from them to the consumers (setmaxnreg).
constexpr int kProducerGroups = 2, kProducers = 128 * kProducerGroups, kGroupsPerThread = 4 / kProducerGroups;
constexpr int kProducerRegisters = 88, kConsumerRegisters = 168;  // 256 x (88 + 168) = the 65,536 registers
constexpr int kConsumers = 256;
constexpr int kThreads = kProducers + kConsumers;
constexpr int kStages = 4;  // operand stages (converted A, tokens, raw weight bytes)
constexpr int kAhead = 3;   // k-tiles of copies in flight a producer thread (each k-tile's copies are issued
                            // after the one before it is converted, into the stage the MMAs read last)

// Shared memory from a 1,024-byte aligned base: kStages x (converted A tile, token tile, raw weight bytes by group:
// group j of row t at j * kBM * 16 + 16 t), then the CTA's scale block. ~204 KB at K = 2,880: one CTA an SM.
struct Layout {
  static constexpr int kATile = kBM * kBK, kBTile = kBN * kBK, kRaw = kBM * kBK / 2;
  static constexpr int kA = 0, kB = kA + kStages * kATile, kRawAt = kB + kStages * kBTile;
  static constexpr int kScales = kRawAt + kStages * kRaw;
  static constexpr int bytes(int groups) { return 1024 + kScales + (kBM * groups + 15) / 16 * 16; }
};

// The threads of one named barrier (1: the producers, 2: the consumers) wait for each other.
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Slot y's (expert, token range) as pick_token_tile gives it, found by one warp alone (each warp of a role finds its
// own: no barrier), and how many slots hold work (`total`). Every lane of the warp calls it.
__device__ TokenTile warp_token_tile(const KernelArgs& a, int n_experts, int y, int& total) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  TokenTile tile{-1, 0, 0};
  int before = 0;
  for (int c0 = 0; c0 < n_experts; c0 += 32) {
    const int i = c0 + lane;
    int b = 0, n = 0;
    if (i < n_experts) {
      b = a.offsets[i];
      n = a.offsets[i + 1] - b;
    }
    const int tiles = (n + kBN - 1) / kBN;
    const int inclusive = warp_inclusive_sum(tiles);
    const int start = before + inclusive - tiles;
    const unsigned hit = __ballot_sync(0xffffffffu, tiles > 0 && y >= start && y < start + tiles);
    if (hit != 0 && tile.e < 0) {  // uniform
      const int src = __ffs(hit) - 1;
      const int begin = b + (y - start) * kBN;
      tile.e = __shfl_sync(0xffffffffu, i, src);
      tile.begin = __shfl_sync(0xffffffffu, begin, src);
      tile.end = __shfl_sync(0xffffffffu, min(b + n, begin + kBN), src);
    }
    before += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  total = before;
  return tile;
}

// Persistent: CTA i takes work items i, i + gridDim.x, .. (item = slot * row_blocks + row block: the row blocks of
// one token tile run side by side and share its token rows in L2), so the producers copy and convert the next
// item's first k-tiles while the consumers finish the last one's MMAs and store it.
template <bool kSwiglu>
__global__ void __launch_bounds__(kThreads, 1) mxfp4_ws_fp8_gemm_kernel(Fp8KernelArgs f, int n_experts) {
  using L = Layout;
  const KernelArgs& a = f.k;
  extern __shared__ unsigned char smem_unaligned[];
  unsigned char* smem = smem_unaligned + ((1024 - wgmma::shared_address(smem_unaligned) % 1024) % 1024);
  // Each row's largest scale code (its scale is 2^(code - 127 - 6)), for items of even and odd count: the producers
  // write the next item's while the consumers store the last one.
  __shared__ int row_code[2][kBM];
  __shared__ std::uint64_t shift_codes[kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift + 1];
  __shared__ EpilogueStage<kBN, kBM> stage;
  __shared__ float entry_scale[kBN];
  // full / empty: a stage's operands ready / read (consumer warps' arrivals); codes_free[i]: row_code[i] stored.
  __shared__ std::uint64_t full[kStages], empty[kStages], codes_free[2];
  const int tid = threadIdx.x;
  const int row_blocks = (a.out_rows + kBM - 1) / kBM;
  const int in = a.groups * 32, k_tiles = (a.groups + 3) / 4;  // the last k-tile may end in zeros
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      bulk_copy::barrier_init(&full[s], kProducers);
      bulk_copy::barrier_init(&empty[s], kConsumers / 32);
    }
    for (int i = 0; i < 2; ++i) bulk_copy::barrier_init(&codes_free[i], kConsumers / 32);
    bulk_copy::fence_barrier_init();
  }
  if (tid <= kMxfp4Fp8MaxShift - kMxfp4Fp8MinShift) shift_codes[tid] = mxfp4_fp8_table(kMxfp4Fp8MinShift + tid).codes;
  __syncthreads();

  if (tid < kProducers) {
    // ---- Producers: row t of the tile (rows past `rows` copy nothing: zeros, as groups past the row) and chunk
    // q of tokens tid / 8 + (kProducers / 8) i (absent tokens and chunks past the row read nothing: zeros).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegisters));
    const int t = tid % kBM, half = tid / kBM, q = tid % 8;
    constexpr int kTokenCopies = kBN * 8 / kProducers;
    int kg = 0;  // k-tiles produced before this item: stage and phase count on across items
    for (int item = blockIdx.x, count = 0;; item += gridDim.x, ++count) {
      int total;
      const TokenTile tile = warp_token_tile(a, n_experts, item / row_blocks, total);
      if (item >= total * row_blocks) break;
      const int row0 = item % row_blocks * kBM, rows = min(kBM, a.out_rows - row0);
      const int cols = (tile.end - tile.begin + 15) / 16 * 16;
      const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;
      const bool w_live = t < rows;
      const uint4* w_src = a.blocks + (block_row0 + (w_live ? t : 0)) * a.groups;
      const std::uint8_t* x_src[kTokenCopies];
#pragma unroll
      for (int i = 0; i < kTokenCopies; ++i) {
        const int p = tile.begin + tid / 8 + kProducers / 8 * i;
        x_src[i] = p < tile.end ? f.x8 + static_cast<std::int64_t>(a.inputs_are_tokens ? a.rows[p] : p) * in + 16 * q
                                : nullptr;
      }
      auto issue = [&](int kt) {  // k-tile kt's copies into its stage once free, one commit group
        const int at = kg + kt, s = at % kStages;
        // Stage s is free once the MMAs of k-tile at - kStages are done (its use at / kStages).
        if (at >= kStages) bulk_copy::wait(&empty[s], ((at / kStages) & 1) ^ 1);
        unsigned char* raw = smem + L::kRawAt + s * L::kRaw + 16 * t;
#pragma unroll
        for (int jj = 0; jj < kGroupsPerThread; ++jj) {
          const int j = half * kGroupsPerThread + jj, g = 4 * kt + j;
          wgmma::copy_16(raw + j * kBM * 16, w_src + min(g, a.groups - 1), w_live && g < a.groups ? 16u : 0u);
        }
        const bool chunk_live = kt * kBK + 16 * q < in;
#pragma unroll
        for (int i = 0; i < kTokenCopies; ++i) {
          const int n = tid / 8 + kProducers / 8 * i;
          if (n >= cols) break;
          unsigned char* dst = smem + L::kB + s * L::kBTile + n * kBK + 16 * wgmma::swizzled_chunk(n, q);
          const bool present = x_src[i] && chunk_live;
          wgmma::copy_16(dst, present ? x_src[i] + kt * kBK : f.x8, present ? 16u : 0u);
        }
        wgmma::copy_commit();
      };
      named_barrier(1, kProducers);  // every producer done converting the last item: its scale block is free
      wgmma::copy_scale_block<kProducers>(smem + L::kScales, a.scales + block_row0 * a.groups, rows * a.groups);
      wgmma::copy_commit();
      for (int kt = 0; kt < kAhead; ++kt) {
        if (kt < k_tiles)
          issue(kt);
        else
          wgmma::copy_commit();  // empty groups keep the count uniform
      }
      wgmma::copy_wait<kAhead>();    // this thread's part of the scale block
      named_barrier(1, kProducers);  // everyone's
      const std::uint8_t* codes = smem + L::kScales + t * a.groups;
      int max_code = 0;
      if (w_live)
        for (int g = 0; g < a.groups; ++g) max_code = max(max_code, static_cast<int>(codes[g]));
      // Read by the consumers' stores after a full barrier this precedes; free once they stored item count - 2.
      if (count >= 2) bulk_copy::wait(&codes_free[count % 2], ((count / 2) & 1) ^ 1);
      if (half == 0) row_code[count % 2][t] = max_code;

      for (int kt = 0; kt < k_tiles; ++kt) {
        wgmma::copy_wait<kAhead - 1>();  // k-tile kt's copies (this thread's) landed
        const int s = (kg + kt) % kStages;
        const unsigned char* raw = smem + L::kRawAt + s * L::kRaw + 16 * t;
        unsigned char* a_row = smem + L::kA + s * L::kATile + t * kBK;
#pragma unroll
        for (int jj = 0; jj < kGroupsPerThread; ++jj) {
          const int j = half * kGroupsPerThread + jj, g = 4 * kt + j;
          // Past the row or the groups the bytes are zeros: entry 0 of any table.
          const int shift = w_live && g < a.groups ? static_cast<int>(codes[g]) - max_code + kFp8RowExponentShift : 0;
          store_group_fp8(*reinterpret_cast<const uint4*>(raw + j * kBM * 16),
                          shift_codes[mxfp4_fp8_clamped_shift(shift) - kMxfp4Fp8MinShift], a_row, t, j);
        }
        wgmma::fence_shared_for_mma();  // the conversion's stores and the landed copies, for the MMAs
        bulk_copy::arrive(&full[s]);
        // Then k-tile kt + kAhead's copies, into the stage of k-tile kt - 1 once its MMAs are done (converting kt
        // first keeps the MMAs fed while kt - 1's run).
        if (kt + kAhead < k_tiles)
          issue(kt + kAhead);
        else
          wgmma::copy_commit();  // an empty group keeps the count uniform
      }
      kg += k_tiles;
    }
    return;
  }

  // ---- Consumers: warpgroup c on rows 64 c .. 64 c + 63 and every token of the tile.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegisters));
  const int ct = tid - kProducers, c = ct / 128, warp = ct / 32, lane = ct % 32;
  int kg = 0;
  for (int item = blockIdx.x, count = 0;; item += gridDim.x, ++count) {
    int total;
    const TokenTile tile = warp_token_tile(a, n_experts, item / row_blocks, total);
    if (item >= total * row_blocks) break;
    const int row0 = item % row_blocks * kBM, rows = min(kBM, a.out_rows - row0);
    const int live = tile.end - tile.begin, cols = (live + 15) / 16 * 16;
    const std::int64_t block_row0 = static_cast<std::int64_t>(tile.e) * a.out_rows + row0;
    named_barrier(2, kConsumers);  // the last item's stores read the staged values
    stage.template fill<kSwiglu>(a, tile.begin, live, block_row0, rows, ct);
    if (ct < live) {
      const int p = tile.begin + ct;
      entry_scale[ct] = f.sx[a.inputs_are_tokens ? a.rows[p] : p];
    }
    wgmma::at_width<kBN>(cols, [&](auto width) {
      constexpr int N = decltype(width)::value;
      float acc[N / 2];
#pragma unroll
      for (int i = 0; i < N / 2; ++i) acc[i] = 0.f;
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int at = kg + kt, s = at % kStages;
        bulk_copy::wait(&full[s], (at / kStages) & 1);
        const std::uint64_t da = wgmma::sw128_descriptor(smem + L::kA + s * L::kATile + c * 64 * kBK);
        const std::uint64_t db = wgmma::sw128_descriptor(smem + L::kB + s * L::kBTile);
        wgmma::fence();
#pragma unroll
        for (int k = 0; k < kBK / 32; ++k) wgmma::mma_e4m3<N>(acc, da + 2 * k, db + 2 * k);
        wgmma::commit();
        wgmma::wait<1>();  // k-tile kt - 1's MMAs are done: its stage goes back to the producers
        if (kt > 0 && lane == 0) bulk_copy::arrive(&empty[(at - 1) % kStages]);
      }
      wgmma::wait<0>();
      if (lane == 0) bulk_copy::arrive(&empty[(kg + k_tiles - 1) % kStages]);
      named_barrier(2, kConsumers);  // the staged values written
      // Rows past the matrix (out = 64 mod 128: the second warpgroup's) store nothing.
      if (row0 + c * 64 < a.out_rows)
        store_fp8_tile<kSwiglu, N>(a, acc, row0, c * 64 + (warp % 4) * 16, live, row_code[count % 2], stage,
                                   entry_scale);
    });
    if (lane == 0) bulk_copy::arrive(&codes_free[count % 2]);
    kg += k_tiles;
  }
}

template <bool kSwiglu>
Status launch(const Fp8KernelArgs& args, int n_experts, dim3 grid, cudaStream_t stream) {
  auto* kernel = mxfp4_ws_fp8_gemm_kernel<kSwiglu>;
  // Once per process (a process drives one device, CudaContext): more than 48 KB of dynamic shared memory.
  static const cudaError_t attribute =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Layout::bytes(kWsFp8MaxGroups));
  D0_CUDA_RETURN_IF_ERROR(attribute);
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  // One CTA an SM, each looping over the items (grid.x row blocks x grid.y slots).
  const unsigned items = grid.x * grid.y, ctas = std::min<unsigned>(items, static_cast<unsigned>(sms));
  kernel<<<ctas, kThreads, Layout::bytes(args.k.groups), stream>>>(args, n_experts);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_ws_fp8_gemm_kernel");
  return Status::success();
}

}  // namespace

Status launch_mxfp4_ws_fp8_gemm(const Fp8KernelArgs& args, int n_experts, dim3 grid, bool swiglu, cudaStream_t stream) {
  return swiglu ? launch<true>(args, n_experts, grid, stream) : launch<false>(args, n_experts, grid, stream);
}

}  // namespace day0
