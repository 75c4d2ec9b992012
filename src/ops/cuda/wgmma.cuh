// Hopper's warpgroup MMA (wgmma, sm_90a) with both operands in shared memory, and the 16-byte cp.async copies
// that fill it. A warpgroup (4 warps, 128 threads) issues m64nNk16: A is 64 rows x 16 k, B is N rows x 16 k, both
// K-major (each row's k contiguous), f32 accumulators in registers laid out as mma.sync m16n8k16's C fragment per
// warp and per 8 columns: d[4j + i] of lane 4g + t in warp w is row 16w + g (+ 8 for i >= 2), column
// 8j + 2t + i % 2. The MMAs run asynchronously: the issuing warps may do other work until wait().
#pragma once

#include <cstdint>

#include "ops/cuda/bulk_copy.cuh"

namespace day0::wgmma {

using bulk_copy::shared_address;

// The operand layout our kernels write: rows of 64 bf16 (128 bytes) in the 128-byte swizzle, the tile 1,024-byte
// aligned: 16-byte chunk c of row r lives at chunk c ^ (r % 8) of that row.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) { return chunk ^ (row & 7); }

// Descriptor of such a tile starting at `tile` (row 0, k 0): 8-row groups 1,024 bytes apart (stride byte offset),
// the leading byte offset unused by swizzled K-major layouts (1 by convention), swizzle mode 1 = 128 bytes.
// k16 step s of the tile is the descriptor plus 2 s (the start address is in 16-byte units: 32 bytes on).
__device__ __forceinline__ std::uint64_t sw128_descriptor(const void* tile) {
  const std::uint64_t start = (shared_address(tile) & 0x3FFFFu) >> 4;
  return start | (std::uint64_t(1) << 16) | (std::uint64_t(1024 >> 4) << 32) | (std::uint64_t(1) << 62);
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
// Makes this thread's ordinary shared-memory writes (and completed cp.async copies) visible to the MMAs' reads
// (the async proxy); then a CTA barrier before the MMAs are issued.
__device__ __forceinline__ void fence_shared_for_mma() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// 16 bytes global -> shared (both 16-byte aligned), through L2 only; of them src_bytes are read and the rest
// zero-filled (0: nothing read, src need only be a valid address).
__device__ __forceinline__ void copy_16(void* dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// D (+)= A . B^T over one k16 step: bf16 operands, f32 accumulation (scale-d 1: accumulate; zero D first).
// N = 32: the token tile of batches where experts see ~16-24 tokens each.
__device__ __forceinline__ void mma_m64n32k16_bf16(float (&d)[16], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b));
}

__device__ __forceinline__ void mma_m64n64k16_bf16(float (&d)[32], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b));
}

__device__ __forceinline__ void mma_m64n128k16_bf16(float (&d)[64], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b));
}

}  // namespace day0::wgmma
