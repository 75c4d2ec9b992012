// GemmBf16: y[M, N] = x[M, K] W[N, K]^T (+ bias[N]) through cuBLASLt, bf16 inputs, fp32 accumulation, f32 or
// bf16 output, row-major semantics. Plan/run: the first call of a shape asks cuBLASLt's heuristic once and
// caches the descriptors and algorithm; later calls of that shape only set pointers and launch.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"

namespace day0 {

class GemmBf16 {
 public:
  // Borrows the context's handle, stream and workspace: destroy the GemmBf16 before the context.
  explicit GemmBf16(CudaContext& ctx) : ctx_(ctx) {}
  ~GemmBf16();
  GemmBf16(const GemmBf16&) = delete;
  GemmBf16& operator=(const GemmBf16&) = delete;

  // x bf16 [M, K], w bf16 [N, K], bias f32/bf16 [N] or undefined, y f32/bf16 [M, N]; all on the device,
  // contiguous, 16-byte aligned. Not thread-safe (one stream, one plan cache).
  Status run(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y);

  // Plans made so far (one per distinct shape / output dtype / epilogue).
  std::size_t plan_count() const { return plans_.size(); }

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // (M, N, K, output dtype, bias-epilogue dtype or -1)
  using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int>;

  Result<Plan*> plan(const Key& key);
  static void destroy(Plan& p);

  CudaContext& ctx_;
  std::map<Key, Plan> plans_;
};

}  // namespace day0
