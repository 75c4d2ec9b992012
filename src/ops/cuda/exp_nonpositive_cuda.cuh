// exp_nonpositive (ops/exp_nonpositive.h) on the device: the same operations, each multiply and add rounded on its
// own (__fmul_rn / __fadd_rn: no contraction into fused multiply-adds), so the device's weights are the host's bit
// for bit (draw_tokens_cuda.cu, token_cutoff_cuda.cuh).
#pragma once

namespace day0 {

__device__ __forceinline__ float exp_nonpositive_device(float z) {
  const float y = __fmul_rn(z, 1.44269504f);
  const unsigned y_bits = __float_as_uint(y), floor_bits = __float_as_uint(-126.f);
  const float yc = __uint_as_float(min(y_bits, floor_bits));
  const float n = __fsub_rn(__fadd_rn(yc, 12582912.f), 12582912.f);
  const float f = __fsub_rn(yc, n);
  float p = 1.525273380405984e-05f;
  p = __fadd_rn(__fmul_rn(p, f), 1.5403530393381608e-04f);
  p = __fadd_rn(__fmul_rn(p, f), 1.3333558146428443e-03f);
  p = __fadd_rn(__fmul_rn(p, f), 9.618129107628477e-03f);
  p = __fadd_rn(__fmul_rn(p, f), 5.550410866482158e-02f);
  p = __fadd_rn(__fmul_rn(p, f), 2.402265069591007e-01f);
  p = __fadd_rn(__fmul_rn(p, f), 6.931471805599453e-01f);
  p = __fadd_rn(__fmul_rn(p, f), 1.f);
  const float scale = __uint_as_float(static_cast<unsigned>((static_cast<int>(n) + 127) << 23));
  const unsigned keep = y_bits <= floor_bits ? ~0u : 0u;
  return __uint_as_float(__float_as_uint(__fmul_rn(p, scale)) & keep);
}

// A row's weight at id i: exp_nonpositive((x - max) * inv_t), as the host computes it.
__device__ __forceinline__ float row_weight_device(float x, float max_logit, float inv_t) {
  return exp_nonpositive_device(__fmul_rn(__fsub_rn(x, max_logit), inv_t));
}

}  // namespace day0
