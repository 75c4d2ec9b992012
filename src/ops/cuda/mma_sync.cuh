// The warp-level tensor-core instructions our kernels share (sm_80 and later), f32 accumulation.
// bf16 / f16 m16n8k16, fragment layout (lane = 4 g + t): a0 row g k {2t, 2t+1}, a1 row g+8 k {2t, 2t+1}, a2 row g
// k {2t+8, 2t+9}, a3 row g+8 k {2t+8, 2t+9}; b0 column g k {2t, 2t+1}, b1 column g k {2t+8, 2t+9}; c0, c1 row g
// columns 2t, 2t+1; c2, c3 row g+8 columns 2t, 2t+1. A dot product does not care which k is which, so a kernel
// may give each lane any k it likes as long as its A and B halves name the same ones.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace day0 {

// Two f32 values rounded (nearest even) into one bf16 operand register: lo in the low half.
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                               std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// f16 m16n8k16: the fragment layout of bf16 m16n8k16.
__device__ __forceinline__ void mma_f16_16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                              std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Four 8x8 b16 matrices from shared memory in one instruction: lane L gives the address of row L % 8 of matrix
// L / 8 (16 contiguous bytes, 16-byte aligned); register i receives matrix i in the fragment layout above (lane
// 4 g + t: row g, columns 2t, 2t + 1). Same values as four 32-bit loads per lane, a quarter of the instructions.
// The _at forms take the shared-memory address itself: a kernel that steps through a tile from one base address
// adds constant offsets, which the instruction takes as immediates (no address arithmetic a load).
__device__ __forceinline__ void ldmatrix_x4_at(std::uint32_t (&r)[4], unsigned shared_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans_at(std::uint32_t (&r)[4], unsigned shared_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  ldmatrix_x4_at(r, static_cast<unsigned>(__cvta_generic_to_shared(row)));
}

// As ldmatrix_x4, transposed: lane 4 g + t receives rows 2t and 2t + 1 of column g (a B fragment from a
// row-major [k][n] tile).
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  ldmatrix_x4_trans_at(r, static_cast<unsigned>(__cvta_generic_to_shared(row)));
}

}  // namespace day0
