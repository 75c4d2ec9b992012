// The warp-level tensor-core instruction our matmul kernels share: mma.sync m16n8k16, bf16 in, f32 accumulate
// (sm_80 and later). Fragment layout (lane = 4 g + t): a0 row g k {2t, 2t+1}, a1 row g+8 k {2t, 2t+1}, a2 row g
// k {2t+8, 2t+9}, a3 row g+8 k {2t+8, 2t+9}; b0 column g k {2t, 2t+1}, b1 column g k {2t+8, 2t+9}; c0, c1 row g
// columns 2t, 2t+1; c2, c3 row g+8 columns 2t, 2t+1. A dot product does not care which k is which, so a kernel
// may give each lane any k it likes as long as its A and B halves name the same ones.
#pragma once

#include <cstdint>

namespace day0 {

__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                               std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace day0
