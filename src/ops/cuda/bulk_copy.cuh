// Hopper's bulk copy engine (cp.async.bulk, sm_90): global -> shared copies that complete on an mbarrier, so a
// CTA's loads are in flight without registers holding them and its warps wait on the barrier, not on each load.
#pragma once

#include <cstdint>

namespace day0::bulk_copy {

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises a barrier for `arrivals` arrivals, then fence_barrier_init(), then a CTA barrier, before
// any thread uses it.
__device__ __forceinline__ void barrier_init(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives on the barrier and adds `bytes` to the bytes its phase waits for (the copies' total).
__device__ __forceinline__ void arrive_expecting(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}

// Arrives on the barrier (an arrival its phase counts, no bytes): after this thread's writes it releases.
__device__ __forceinline__ void arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

// Arrives `count` times at once (for warps that have nothing to do in this phase).
__device__ __forceinline__ void arrive(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
}

// dst and src 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void copy_to_shared(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

// The tensor map's box at (column c0, row c1) into dst (1,024-byte aligned for a swizzled map): one thread issues it,
// the barrier counts its bytes (the whole box, rows and columns past the matrix as zeros). `map` lives in the
// kernel's parameters (__grid_constant__), where the copy engine reads it.
__device__ __forceinline__ void tensor_copy_2d(void* dst, const void* map, int c0, int c1, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          shared_address(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(shared_address(bar))
      : "memory");
}

// The same for a 4-D tensor map's box at (c0, c1, c2, c3) (ops/cuda/tensor_map.h's mxfp4_tiled_tensor_map).
__device__ __forceinline__ void tensor_copy_4d(void* dst, const void* map, int c0, int c1, int c2, int c3,
                                               std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];" ::"r"(shared_address(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(shared_address(bar))
      : "memory");
}

// Spins until the barrier's phase of this parity has completed (its arrivals and bytes are all in).
__device__ __forceinline__ void wait(std::uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}

}  // namespace day0::bulk_copy
