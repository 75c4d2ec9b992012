// GemmBf16: cuBLASLt matmul with a per-shape plan cache. cuBLASLt is column-major: a row-major y[M, N] is a
// column-major y^T[N, M] = W x^T, so A = W (transposed, ld K), B = x (ld K), D = y (ld N), m = N, n = M.
#include "ops/cuda/gemm_bf16.h"

#include <string>

#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

cudaDataType_t cuda_type(DType d) { return d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

}  // namespace

GemmBf16::~GemmBf16() {
  for (auto& [key, p] : plans_) destroy(p);
}

void GemmBf16::destroy(Plan& p) {
  if (p.desc) cublaslt().desc_destroy(p.desc);
  if (p.a) cublaslt().layout_destroy(p.a);
  if (p.b) cublaslt().layout_destroy(p.b);
  if (p.c) cublaslt().layout_destroy(p.c);
  p = Plan{};
}

Result<GemmBf16::Plan*> GemmBf16::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  const auto [M, N, K, out_dtype, bias_dtype] = key;
  Plan p;
  // A failure part-way leaves descriptors to free: build into `p`, free it on any error.
  auto build = [&]() -> Status {
    D0_CUDA_RETURN_IF_ERROR(cublaslt().desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    if (bias_dtype >= 0) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      D0_CUDA_RETURN_IF_ERROR(
          cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
      const std::int32_t bias_type = cuda_type(static_cast<DType>(bias_dtype));
      D0_CUDA_RETURN_IF_ERROR(
          cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    // A: W stored row-major [N, K] = column-major K x N (ld K), used transposed. B: x = column-major K x M.
    D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.a, CUDA_R_16BF, K, N, K));
    D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.b, CUDA_R_16BF, K, M, K));
    D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.c, cuda_type(static_cast<DType>(out_dtype)), N, M, N));

    cublasLtMatmulPreference_t pref = nullptr;
    D0_CUDA_RETURN_IF_ERROR(cublaslt().preference_create(&pref));
    std::size_t workspace = ctx_.cublas_workspace_bytes();
    // run() checks 16-byte alignment, so the algorithm must not assume the default 256.
    const std::uint32_t align = 16;
    cublasLtMatmulHeuristicResult_t result{};
    int n_results = 0;
    cublasStatus_t st = cublaslt().preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                            sizeof workspace);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublaslt().preference_set_attribute(pref, attr, &align, sizeof align);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublaslt().algo_get_heuristic(ctx_.cublas(), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &n_results);
    cublaslt().preference_destroy(pref);
    D0_RETURN_IF_ERROR(cuda_call_status(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__));
    if (n_results == 0) {
      std::string msg = "gemm_bf16: cuBLASLt has no algorithm for M=" + std::to_string(M);
      msg += " N=" + std::to_string(N) + " K=" + std::to_string(K) + " out ";
      msg += dtype_name(static_cast<DType>(out_dtype));
      if (bias_dtype >= 0) msg += " with bias epilogue";
      return make_error(msg);
    }
    p.algo = result.algo;
    return Status::success();
  };
  if (Status st = build(); !st.ok()) {
    destroy(p);
    return st.error();
  }
  return &(plans_[key] = p);
}

Status GemmBf16::run(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const char* op = "gemm_bf16";
  if (x.dim() != 2 || w.dim() != 2)
    return make_error("gemm_bf16: x and w must be 2-D, got " + shape_to_string(x.shape()) + " and " +
                      shape_to_string(w.shape()));
  const std::int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::bf16}, {M, K}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(w, op, "w", {DType::bf16}, {N, K}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, op, "y", {DType::f32, DType::bf16}, {M, N}));
  const bool has_bias = has_values(bias);
  if (has_bias) D0_RETURN_IF_ERROR(check_cuda_tensor(bias, op, "bias", {DType::f32, DType::bf16}, {N}));
  for (const Tensor* t : {&x, &w, static_cast<const Tensor*>(&y)})
    if (!aligned_to(t->raw(), 16)) return make_error("gemm_bf16: x, w and y must be 16-byte aligned");
  if (M == 0 || N == 0) return Status::success();
  if (K == 0) return make_error("gemm_bf16: K = 0 (an empty reduction) is not supported");
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return make_error("gemm_bf16: dimension above 2^31");
  // The bias epilogue takes a bias of the output's dtype (cuBLASLt's default and documented case for every
  // input type); another pairing runs the matmul bare and adds the bias with our own kernel.
  const bool epilogue_bias = has_bias && bias.dtype() == y.dtype();
  if (epilogue_bias && !aligned_to(bias.raw(), 16)) return make_error("gemm_bf16: bias must be 16-byte aligned");
  const Key key{M, N, K, static_cast<int>(y.dtype()), epilogue_bias ? static_cast<int>(bias.dtype()) : -1};
  D0_ASSIGN_OR_RETURN(Plan * p, plan(key));
  if (epilogue_bias) {
    const void* bias_ptr = bias.raw();
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  }
  const float alpha = 1.f, beta = 0.f;
  D0_CUDA_RETURN_IF_ERROR(cublaslt().matmul(ctx_.cublas(), p->desc, &alpha, w.raw(), p->a, x.raw(), p->b, &beta,
                                            y.raw(), p->c, y.raw(), p->c, &p->algo, ctx_.cublas_workspace(),
                                            ctx_.cublas_workspace_bytes(), ctx_.stream()));
  if (has_bias && !epilogue_bias) D0_RETURN_IF_ERROR(add_bias_cuda(y, bias, ctx_.stream()));
  return Status::success();
}

}  // namespace day0
