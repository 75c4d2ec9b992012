// GemmFp8: y f32 [M, N] = (x8[M, K] . w8[N, K]^T) * sx[m] * sw[n] (+ bias[n]) through cuBLASLt, E4M3 inputs with
// one f32 scale per row of x (a token) and per row of w (an output feature), fp32 accumulation. Row-major x and w
// are both K-major, which is the "TN" layout Hopper's FP8 cuBLASLt kernels require. Plan/run as GemmBf16: the
// first call of a shape asks cuBLASLt's heuristic once; later calls only set pointers and launch.
//
// Two ways to apply sx and sw, both kept (Fp8Scaling):
//   in_gemm  - cuBLASLt's OUTER_VEC_32F scale modes (cuBLAS >= 12.9): sw is A's vector, sx is B's, applied in
//              the GEMM's own epilogue; the bias goes through cuBLASLt's bias epilogue where it accepts the
//              pairing, else add_bias_cuda.
//   epilogue - the FP8 GEMM with unit scales into f32, then fp8_gemm_epilogue_cuda: y = y * sx[m] * sw[n] + b[n].
// `automatic` tries in_gemm first and falls back to epilogue for a shape where cuBLASLt has no in_gemm algorithm
// (the heuristic finds none, or the matmul says not supported). Which is used and why: see gemm_fp8.cpp.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"

namespace day0 {

enum class Fp8Scaling { automatic, in_gemm, epilogue };
std::string_view fp8_scaling_name(Fp8Scaling s);

class GemmFp8 {
 public:
  // Borrows the context's handle, stream and workspace: destroy the GemmFp8 before the context.
  explicit GemmFp8(CudaContext& ctx, Fp8Scaling scaling = Fp8Scaling::automatic) : ctx_(ctx), scaling_(scaling) {}
  ~GemmFp8();
  GemmFp8(const GemmFp8&) = delete;
  GemmFp8& operator=(const GemmFp8&) = delete;

  // x f8_e4m3 [M, K], sx f32 [M], w f8_e4m3 [N, K], sw f32 [N], bias f32/bf16 [N] or undefined, y f32 [M, N];
  // all on the device and contiguous; x, w, y, sx, sw 16-byte aligned; K and N multiples of 16 (FP8 tensor cores).
  // Not thread-safe (one stream, one plan cache).
  Status run(const Tensor& x, const Tensor& sx, const Tensor& w, const Tensor& sw, const Tensor& bias, Tensor& y);
  // y = x . w^T with unit scales and no bias: the epilogue path's GEMM alone, for a consumer that applies
  // fp8_moe::scaled_output itself (the same bits as run() in epilogue scaling).
  Status run_unscaled(const Tensor& x, const Tensor& w, Tensor& y);

  // in_gemm or epilogue: how the last successful run applied the scales.
  Fp8Scaling last_scaling() const { return last_scaling_; }
  // Plans made so far, usable or not (one per shape / scaling / bias epilogue).
  std::size_t plan_count() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool usable = false;
    std::string why_not;  // when !usable: what cuBLASLt said
  };
  // (M, N, K, scaling (in_gemm or epilogue), bias-epilogue dtype or -1)
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int>;

  Plan& plan(const Key& key);
  Status build(const Key& key, Plan& p);
  static void destroy(Plan& p);
  // One attempt with one plan; `unsupported` is set when cuBLASLt refuses the configuration at launch.
  // scale_after false: an epilogue-scaling plan's GEMM without its epilogue (run_unscaled).
  Status launch(Plan& p, const Key& key, const Tensor& x, const Tensor& sx, const Tensor& w, const Tensor& sw,
                const Tensor& bias, Tensor& y, bool& unsupported, bool scale_after = true);

  CudaContext& ctx_;
  Fp8Scaling scaling_;
  Fp8Scaling last_scaling_ = Fp8Scaling::automatic;
  std::map<Key, Plan> plans_;
};

}  // namespace day0
