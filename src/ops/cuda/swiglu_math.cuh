// gpt-oss's clamped SwiGLU of one (gate, up) pair, in CpuOps::swiglu_clamped's expression order: every CUDA
// kernel that applies it (the elementwise one, the fused FP8 epilogue, the MXFP4 matmuls' stores) calls this, so
// they give the same bits.
#pragma once

namespace day0 {

__device__ __forceinline__ float swiglu_clamped_pair(float gate, float up, float alpha, float limit) {
  gate = fminf(gate, limit);  // gate is clamped from above only
  up = fminf(fmaxf(up, -limit), limit);
  const float glu = gate / (1.0f + expf(-alpha * gate));
  return (up + 1.0f) * glu;
}

}  // namespace day0
