// Ampere's per-thread asynchronous copies (cp.async, sm_80+): 16 bytes global -> shared without a register holding
// them, completing in commit groups each thread waits for on its own, so loads in flight are bounded by shared
// memory instead of registers.
#pragma once

#include "ops/cuda/bulk_copy.cuh"

namespace day0::cp_async {

// 16 bytes global -> shared (both 16-byte aligned), through L2 only; of them src_bytes are read and the rest
// zero-filled (0: nothing read, src need only be a valid address).
__device__ __forceinline__ void copy_16(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(bulk_copy::shared_address(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// The same to a shared-memory address as shared_address gives it (a kernel that keeps its copies' addresses).
__device__ __forceinline__ void copy_16(std::uint32_t dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// copy_16 asking the L2 for the 256 bytes around src: where the CTA's other lanes read the rest of those bytes
// at about the same time, one DRAM request serves them all.
__device__ __forceinline__ void copy_16_l2_256(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(bulk_copy::shared_address(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
// 4 bytes global -> shared (both 4-byte aligned), through L1 (the only path for copies under 16 bytes); src_bytes 0
// or 4, as copy_16's.
__device__ __forceinline__ void copy_4(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(bulk_copy::shared_address(dst)), "l"(src),
               "r"(src_bytes)
               : "memory");
}
// Closes this thread's copies issued since the last commit into one group (an empty group is allowed).
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed copy groups are still in flight; what the others landed
// is this thread's to read (other threads' copies need a barrier after their own wait).
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace day0::cp_async
