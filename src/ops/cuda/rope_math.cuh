// RoPE's per-pair arithmetic on the GPU, shared by the rope kernels (rope_cuda.cu) and the small-M linear's rope
// epilogue (linear_small_cuda.cu), so a rotated lane is the same bits whichever kernel rotates it. Mirrors
// CpuOps::rope exactly.
#pragma once

namespace day0::rope_math {

// cos and sin of lane pair i's angle at position pos, scaled by attention_factor. The CPU reference forms the
// angle in f32 and takes cos/sin in double: the same here, so both agree to the bit (H200's fp64 rate makes this
// cheap next to the memory traffic).
__device__ __forceinline__ void rope_cos_sin(float pos, float inv_freq, float attention_factor, float& c, float& sn) {
  const float angle = pos * inv_freq;
  c = static_cast<float>(cos(static_cast<double>(angle))) * attention_factor;
  sn = static_cast<float>(sin(static_cast<double>(angle))) * attention_factor;
}

// The rotation of one lane pair (a, b) = (v[i], v[i + half]); __fmul_rn/__fadd_rn keep nvcc from contracting into
// FMAs, which the host reference does not use.
__device__ __forceinline__ float rotated_first(float a, float b, float c, float sn) {
  return __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, sn));
}

__device__ __forceinline__ float rotated_second(float a, float b, float c, float sn) {
  return __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
}

}  // namespace day0::rope_math
