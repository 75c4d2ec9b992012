// What both grouped wgmma GEMMs run (moe_mxfp4_wgmma_cuda.cu: bf16, moe_mxfp4_wgmma_fp8_cuda.cu: FP8): the scale
// block staged first, then the k-loop:
// kStages - 1 k-tiles of copies in flight (a commit group each; empty groups past the end keep the count uniform),
// k-tile kt + 1's weights converted into the other A tile while k-tile kt's MMAs run, then the MMA wait, the proxy
// fence and the k-tile's one CTA barrier. The kernel's parts:
//   issue(kt)    k-tile kt's copies and their commit;
//   convert(kt)  k-tile kt's copied weights into A tile kt % 2 (after its copies landed);
//   mma(kt)      k-tile kt's MMAs (between the fence and the commit).
#pragma once

#include "ops/cuda/wgmma.cuh"

namespace day0::wgmma {

// A CTA's weight-scale block (rows x groups bytes from src, 16-byte aligned: the grouped GEMMs' out and row0 are
// multiples of 64) into shared memory, in kThreads threads' cp.async copies (the caller's next commit group).
template <int kThreads>
__device__ __forceinline__ void copy_scale_block(unsigned char* dst, const std::uint8_t* src, int bytes) {
  for (int c = static_cast<int>(threadIdx.x); 16 * c < bytes; c += kThreads)
    copy_16(dst + 16 * c, src + 16 * c, static_cast<unsigned>(min(16, bytes - 16 * c)));
}

// The first kStages - 1 k-tiles' copies.
template <int kStages, class Issue>
__device__ __forceinline__ void issue_first_tiles(int k_tiles, Issue&& issue) {
#pragma unroll
  for (int kt = 0; kt < kStages - 1; ++kt) {
    if (kt < k_tiles)
      issue(kt);
    else
      copy_commit();
  }
}

// After issue_first_tiles, k-tile 0 converted and a barrier.
template <int kStages, class Issue, class Convert, class Mma>
__device__ __forceinline__ void run_k_tiles(int k_tiles, Issue&& issue, Convert&& convert, Mma&& mma) {
  for (int kt = 0; kt < k_tiles; ++kt) {
    // Slot (kt - 1) % kStages is free: its MMAs finished before the last barrier, its raw bytes were converted.
    if (kt + kStages - 1 < k_tiles)
      issue(kt + kStages - 1);
    else
      copy_commit();
    fence();
    mma(kt);
    commit();
    if (kt + 1 < k_tiles) {  // while the MMAs run
      copy_wait<kStages - 2>();
      convert(kt + 1);
    }
    wait<0>();
    fence_shared_for_mma();
    __syncthreads();
  }
}

}  // namespace day0::wgmma
