// Bulk prefetch into L2 (sm_90 cp.async.bulk.prefetch): one instruction asks the memory system for a whole
// contiguous range at once, without registers to hold it or a completion to wait for. Kernels that stream weights
// issue it for their CTA's slice as they start, so the bytes are in flight while their warps still work through
// the first loads (and, for dependent launches, while the kernel before still runs).
#pragma once

#include <cstdint>

namespace day0 {

// [p, p + bytes) towards L2, in pieces of at most 64 KiB. A hint only: nothing is asked unless p is 16-byte
// aligned and bytes a multiple of 16.
__device__ __forceinline__ void prefetch_l2(const void* p, std::uint64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if ((reinterpret_cast<std::uintptr_t>(p) | bytes) % 16 != 0) return;
  constexpr std::uint64_t kPiece = std::uint64_t{64} << 10;
  const char* c = static_cast<const char*>(p);
  for (std::uint64_t done = 0; done < bytes; done += kPiece) {
    const std::uint32_t n = static_cast<std::uint32_t>(bytes - done < kPiece ? bytes - done : kPiece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c + done), "r"(n) : "memory");
  }
#endif
}

}  // namespace day0
