// Hopper's warpgroup MMA (wgmma, sm_90a) with both operands in shared memory, and the 16-byte cp.async copies
// that fill it. A warpgroup (4 warps, 128 threads) issues m64nNk16: A is 64 rows x 16 k, B is N rows x 16 k, both
// K-major (each row's k contiguous), f32 accumulators in registers laid out as mma.sync m16n8k16's C fragment per
// warp and per 8 columns: d[4j + i] of lane 4g + t in warp w is row 16w + g (+ 8 for i >= 2), column
// 8j + 2t + i % 2. The MMAs run asynchronously: the issuing warps may do other work until wait().
// Keeping MMAs in flight across other code (attention_tc_cuda.cu) holds only if ptxas can follow them: an MMA or a
// wait under a branch it cannot prove warp-uniform, or a register an MMA in flight reads written before its wait,
// and ptxas quietly puts a wait after every MMA of the kernel. scripts/ptxas-report lists such kernels (v42).
// mma_bf16_rs64_n_major and mma_e4m3_rs16 (below) take A from registers instead.
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops/cuda/bulk_copy.cuh"
#include "ops/cuda/cp_async.cuh"

namespace day0::wgmma {

using bulk_copy::shared_address;

// The operand layout our kernels write: rows of 64 bf16 (128 bytes) in the 128-byte swizzle, the tile 1,024-byte
// aligned: 16-byte chunk c of row r lives at chunk c ^ (r % 8) of that row.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) { return chunk ^ (row & 7); }

// Descriptor of such a tile starting at `tile` (row 0): start address, leading and stride byte offsets (in 16-byte
// units), swizzle mode 1 = 128 bytes.
__device__ __forceinline__ std::uint64_t sw128_descriptor_with(const void* tile, std::uint32_t leading_bytes) {
  const std::uint64_t start = (shared_address(tile) & 0x3FFFFu) >> 4;
  return start | (std::uint64_t(leading_bytes >> 4) << 16) | (std::uint64_t(1024 >> 4) << 32) |
         (std::uint64_t(1) << 62);
}

// Read K-major (row r = row r of the operand, its k values contiguous): 8-row groups 1,024 bytes apart (stride byte
// offset), the leading byte offset unused by swizzled K-major layouts (16 by convention). k16 step s of the tile is
// the descriptor plus 2 s (the start address is in 16-byte units: 32 bytes on).
__device__ __forceinline__ std::uint64_t sw128_descriptor(const void* tile) { return sw128_descriptor_with(tile, 16); }

// Read N-major, as B with imm-trans-b (row r = k step r, its 64 N values contiguous, as attention's V tile: keys by
// dims): 8-row groups 1,024 bytes apart. Both byte-offset fields hold that 1,024: the other stride, between 64-wide
// N blocks, is never taken at N = 64. k16 step s is the descriptor plus 128 s (2,048 bytes on).
__device__ __forceinline__ std::uint64_t sw128_n_major_descriptor(const void* tile) {
  return sw128_descriptor_with(tile, 1024);
}

// Orders this warpgroup's register accesses before the MMAs issued next (before each batch of MMAs).
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the MMAs issued since the last commit into one group.
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending committed groups are still running (0: every MMA done, accumulators readable).
template <int kPending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Pins accumulators here for the compiler, which does not see the MMAs write them asynchronously: reads after
// wait() stay after it, writes before the MMAs stay before them (no instruction).
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's ordinary shared-memory writes (and completed cp.async copies) visible to the MMAs' reads
// (the async proxy); then a CTA barrier before the MMAs are issued.
__device__ __forceinline__ void fence_shared_for_mma() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The cp.async copies that fill the operand tiles (cp_async.cuh), under the names the GEMMs use.
using cp_async::copy_16;
using cp_async::copy_commit;
using cp_async::copy_wait;

// D (+)= A . B^T over one k16 step: bf16 operands, f32 accumulation (scale-d 1: accumulate; zero D first), for
// N = 16, 32, .. 192 tokens. The accumulators of a narrower N are a prefix of a wider one's, so a kernel may pick N
// per tile at run time on one array.
template <int N>
__device__ void mma_bf16(float (&d)[N / 2], std::uint64_t a, std::uint64_t b);
// The same over one k32 step of FP8 E4M3 operands (both K-major, 32 one-byte values: the same 32 bytes a row as a
// bf16 k16 step, so the same descriptors and tiles).
template <int N>
__device__ void mma_e4m3(float (&d)[N / 2], std::uint64_t a, std::uint64_t b);

// The instructions' operand lists, 8 accumulators at a time.
#define D0_WGMMA_D8(i)                                                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define D0_WGMMA_R8_0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define D0_WGMMA_R8_1 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define D0_WGMMA_R8_2 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define D0_WGMMA_R8_3 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define D0_WGMMA_R8_4 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define D0_WGMMA_R8_5 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define D0_WGMMA_R8_6 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define D0_WGMMA_R8_7 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define D0_WGMMA_R8_8 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define D0_WGMMA_R8_9 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define D0_WGMMA_R8_10 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define D0_WGMMA_R8_11 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define D0_WGMMA_REGS_16 D0_WGMMA_R8_0
#define D0_WGMMA_OPS_16 D0_WGMMA_D8(0)
#define D0_WGMMA_REGS_32 D0_WGMMA_R8_0 D0_WGMMA_R8_1
#define D0_WGMMA_OPS_32 D0_WGMMA_D8(0), D0_WGMMA_D8(8)
#define D0_WGMMA_REGS_48 D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2
#define D0_WGMMA_OPS_48 D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16)
#define D0_WGMMA_REGS_64 D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2 D0_WGMMA_R8_3
#define D0_WGMMA_OPS_64 D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16), D0_WGMMA_D8(24)
#define D0_WGMMA_REGS_80 D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2 D0_WGMMA_R8_3 D0_WGMMA_R8_4
#define D0_WGMMA_OPS_80 D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16), D0_WGMMA_D8(24), D0_WGMMA_D8(32)
#define D0_WGMMA_REGS_96 D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2 D0_WGMMA_R8_3 D0_WGMMA_R8_4 D0_WGMMA_R8_5
#define D0_WGMMA_OPS_96 \
  D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16), D0_WGMMA_D8(24), D0_WGMMA_D8(32), D0_WGMMA_D8(40)
#define D0_WGMMA_REGS_112 \
  D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2 D0_WGMMA_R8_3 D0_WGMMA_R8_4 D0_WGMMA_R8_5 D0_WGMMA_R8_6
#define D0_WGMMA_OPS_112 \
  D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16), D0_WGMMA_D8(24), D0_WGMMA_D8(32), D0_WGMMA_D8(40), D0_WGMMA_D8(48)
#define D0_WGMMA_REGS_128 \
  D0_WGMMA_R8_0 D0_WGMMA_R8_1 D0_WGMMA_R8_2 D0_WGMMA_R8_3 D0_WGMMA_R8_4 D0_WGMMA_R8_5 D0_WGMMA_R8_6 D0_WGMMA_R8_7
#define D0_WGMMA_OPS_128                                                                                               \
  D0_WGMMA_D8(0), D0_WGMMA_D8(8), D0_WGMMA_D8(16), D0_WGMMA_D8(24), D0_WGMMA_D8(32), D0_WGMMA_D8(40), D0_WGMMA_D8(48), \
      D0_WGMMA_D8(56)
#define D0_WGMMA_REGS_144 D0_WGMMA_REGS_128 D0_WGMMA_R8_8
#define D0_WGMMA_OPS_144 D0_WGMMA_OPS_128, D0_WGMMA_D8(64)
#define D0_WGMMA_REGS_160 D0_WGMMA_REGS_144 D0_WGMMA_R8_9
#define D0_WGMMA_OPS_160 D0_WGMMA_OPS_144, D0_WGMMA_D8(72)
#define D0_WGMMA_REGS_176 D0_WGMMA_REGS_160 D0_WGMMA_R8_10
#define D0_WGMMA_OPS_176 D0_WGMMA_OPS_160, D0_WGMMA_D8(80)
#define D0_WGMMA_REGS_192 D0_WGMMA_REGS_176 D0_WGMMA_R8_11
#define D0_WGMMA_OPS_192 D0_WGMMA_OPS_176, D0_WGMMA_D8(88)
// One specialization of FN (k K, operand TYPES, the instruction's trailing immediates TAIL): A and B number the two
// descriptor operands, after the N / 2 accumulators.
#define D0_WGMMA_SS(FN, K, TYPES, TAIL, N, A, B)                                                    \
  template <>                                                                                       \
  __device__ __forceinline__ void FN<N>(float(&d)[N / 2], std::uint64_t a, std::uint64_t b) {       \
    asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k" #K ".f32." TYPES " {" D0_WGMMA_REGS_##N \
                 "}, %" #A ", %" #B TAIL ";\n"                                                      \
                 : D0_WGMMA_OPS_##N                                                                 \
                 : "l"(a), "l"(b));                                                                 \
  }
#define D0_WGMMA_SS_ALL_N(FN, K, TYPES, TAIL)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 16, 8, 9)    \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 32, 16, 17)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 48, 24, 25)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 64, 32, 33)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 80, 40, 41)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 96, 48, 49)  \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 112, 56, 57) \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 128, 64, 65) \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 144, 72, 73) \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 160, 80, 81) \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 176, 88, 89) \
  D0_WGMMA_SS(FN, K, TYPES, TAIL, 192, 96, 97)
// bf16: scale-d 1, scales 1, no transposes (both K-major); FP8 takes no transpose operands.
D0_WGMMA_SS_ALL_N(mma_bf16, 16, "bf16.bf16", ", 1, 1, 1, 0, 0")
D0_WGMMA_SS_ALL_N(mma_e4m3, 32, "e4m3.e4m3", ", 1, 1, 1")

// D += A . B over one k16 step at N = 64 with A in registers and B N-major: A as bf16 pairs in mma.sync m16n8k16's
// A fragment per warp (warp w of the warpgroup holds rows 16w .. 16w + 15: a[0] row g, k 2t; a[1] row g + 8; a[2]
// row g, k 2t + 8; a[3] row g + 8, k 2t + 8), B a 128-byte-swizzled tile read N-major (sw128_n_major_descriptor).
// A operand produced just before its MMAs only: one live across a loop lost its registers to other values in
// ptxas 13.0's allocation (attention_tc_cuda.cu).
__device__ __forceinline__ void mma_bf16_rs64_n_major(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" D0_WGMMA_REGS_64
               "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n"
               : D0_WGMMA_OPS_64
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
// D += A . B over one k32 step at N = 16 of FP8 E4M3 with A in registers: warp w of the warpgroup holds rows 16w ..
// 16w + 15, lane 4g + t four codes a register (a[0] row g, k 4t .. 4t + 3; a[1] row g + 8; a[2] row g, k 16 + 4t ..;
// a[3] row g + 8, k 16 + 4t ..), B K-major as mma_e4m3's (sw128_descriptor, the k32 step 32 bytes on).
__device__ __forceinline__ void mma_e4m3_rs16(float (&d)[8], const std::uint32_t (&a)[4], std::uint64_t b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {" D0_WGMMA_REGS_16
               "}, {%8, %9, %10, %11}, %12, 1, 1, 1;\n"
               : D0_WGMMA_OPS_16
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#undef D0_WGMMA_SS_ALL_N
#undef D0_WGMMA_SS
#undef D0_WGMMA_REGS_16
#undef D0_WGMMA_OPS_16
#undef D0_WGMMA_REGS_32
#undef D0_WGMMA_OPS_32
#undef D0_WGMMA_REGS_48
#undef D0_WGMMA_OPS_48
#undef D0_WGMMA_REGS_64
#undef D0_WGMMA_OPS_64
#undef D0_WGMMA_REGS_80
#undef D0_WGMMA_OPS_80
#undef D0_WGMMA_REGS_96
#undef D0_WGMMA_OPS_96
#undef D0_WGMMA_REGS_112
#undef D0_WGMMA_OPS_112
#undef D0_WGMMA_REGS_128
#undef D0_WGMMA_OPS_128
#undef D0_WGMMA_REGS_144
#undef D0_WGMMA_OPS_144
#undef D0_WGMMA_REGS_160
#undef D0_WGMMA_OPS_160
#undef D0_WGMMA_REGS_176
#undef D0_WGMMA_OPS_176
#undef D0_WGMMA_REGS_192
#undef D0_WGMMA_OPS_192
#undef D0_WGMMA_R8_0
#undef D0_WGMMA_R8_1
#undef D0_WGMMA_R8_2
#undef D0_WGMMA_R8_3
#undef D0_WGMMA_R8_4
#undef D0_WGMMA_R8_5
#undef D0_WGMMA_R8_6
#undef D0_WGMMA_R8_7
#undef D0_WGMMA_R8_8
#undef D0_WGMMA_R8_9
#undef D0_WGMMA_R8_10
#undef D0_WGMMA_R8_11
#undef D0_WGMMA_D8

// Calls f(std::integral_constant<int, N>) for the narrowest N = 16, 32, .. kMax covering `cols` tokens: a tile's MMAs
// run at its live width (an expert's tokens rarely fill the tile), on the prefix of the accumulators that width owns.
template <int kMax, int N = 16, class F>
__device__ __forceinline__ void at_width(int cols, F&& f) {
  if constexpr (N >= kMax)
    f(std::integral_constant<int, kMax>{});
  else if (cols <= N)
    f(std::integral_constant<int, N>{});
  else
    at_width<kMax, N + 16>(cols, f);
}

}  // namespace day0::wgmma
