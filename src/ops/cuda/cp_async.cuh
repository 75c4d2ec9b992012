// Asynchronous global -> shared copies (sm_80 and later): a 16-byte copy that bypasses registers and L1, with a
// source size of 0 filling the destination with zeros, and the waits that make a thread's own copies visible.
#pragma once

namespace day0 {

__device__ __forceinline__ void cp_async_16(void* smem, const void* global, bool fill) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(fill ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace day0
