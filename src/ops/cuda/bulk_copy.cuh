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

// As tensor_copy_2d for a 3-D map: the box at (column c0, row c1, matrix c2).
__device__ __forceinline__ void tensor_copy_3d(void* dst, const void* map, int c0, int c1, int c2,
                                               std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
          "r"(shared_address(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar))
      : "memory");
}

// The reverse: src (shared, laid out as tensor_copy_3d would write it) into the map's box at (c0, c1, c2); rows and
// columns past the matrix are not written. The store joins this thread's bulk group: commit_group() closes it, and
// wait_group_read / wait_group tell when its shared memory may be reused / its writes are done. Shared-memory
// writes from other threads must be fenced for the async proxy (fence.proxy.async) and handed over before it.
__device__ __forceinline__ void tensor_store_3d(const void* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(map), "r"(c0),
               "r"(c1), "r"(c2), "r"(shared_address(src))
               : "memory");
}

__device__ __forceinline__ void commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// This thread's committed bulk groups but the newest `pending` have read their shared memory.
template <int kPending>
__device__ __forceinline__ void wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// ... and completed their writes.
template <int kPending>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

// Orders this thread's global accesses of the generic proxy with those of the async proxy (tensor copies): between
// a bulk store's completion and a flag that publishes it, and between reading that flag and the copies it allows.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
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
