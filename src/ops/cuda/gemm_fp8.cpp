// GemmFp8: cuBLASLt FP8 matmul with a per-shape plan cache. Column-major view as in GemmBf16: y^T[N, M] = W x^T,
// so A = W (E4M3, transposed, ld K), B = x (E4M3, ld K), D = y (f32, ld N), m = N, n = M. A's outer scale
// vector therefore has N entries (sw) and B's has M (sx).
//
// Choice of scaling. `automatic` prefers in_gemm: one launch, y written once. The epilogue path adds one read and
// write of y (8 bytes per output: 0.2 MB at M = 4, N = 5760, against 16.6 MB of E4M3 weights read), so for the
// MoE's small M both should cost about the same. Not yet measured: this was written without GPU access, and
// CudaGemmFp8.timing_of_both_scalings_and_bf16_at_gpt_oss_expert_shapes prints the numbers that decide it, as
// CudaGemmFp8.fp8_gemm_matches_* prints whether cuBLASLt takes OUTER_VEC_32F on the GPU at all.
#include "ops/cuda/gemm_fp8.h"

#include <string>

#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

// The order `automatic` tries (see the top of this file); the other is the fallback for shapes it refuses.
// Measured on the H200 with cuBLAS 13.0: OUTER_VEC_32F scaling is refused for every FP8 shape (heuristic
// returns INVALID_VALUE), so the epilogue goes first and in_gemm is only tried if it fails.
constexpr bool kAutomaticPrefersInGemm = false;

cudaDataType_t cuda_type(DType d) { return d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

std::string shape_text(std::int64_t M, std::int64_t N, std::int64_t K) {
  return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
}

struct Dims {
  std::int64_t M, N, K;
};

// What run() and run_unscaled() both need: x [M, K] and w [N, K] E4M3, y f32 [M, N], on the device, contiguous,
// 16-byte aligned; for a non-empty product K and N positive multiples of 16 and every dimension below 2^31.
Result<Dims> check_operands(const char* op, const Tensor& x, const Tensor& w, const Tensor& y) {
  if (x.dim() != 2 || w.dim() != 2)
    return make_error(std::string(op) + ": x and w must be 2-D, got " + shape_to_string(x.shape()) + " and " +
                      shape_to_string(w.shape()));
  const std::int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, op, "x", {DType::f8_e4m3}, {M, K}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(w, op, "w", {DType::f8_e4m3}, {N, K}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(y, op, "y", {DType::f32}, {M, N}));
  for (const Tensor* t : {&x, &w, &y})
    if (!aligned_to(t->raw(), 16)) return make_error(std::string(op) + ": x, w and y must be 16-byte aligned");
  if (M == 0 || N == 0) return Dims{M, N, K};
  // cuBLASLt's FP8 kernels want 16-byte aligned leading dimensions and tile-friendly N (PyTorch's _scaled_mm
  // asks the same of its operands); the MoE's N and K (2I, H, I) are multiples of 32.
  if (K == 0 || K % 16 != 0 || N % 16 != 0)
    return make_error(std::string(op) + ": K and N must be positive multiples of 16 (FP8 tensor cores), got " +
                      shape_text(M, N, K));
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return make_error(std::string(op) + ": dimension above 2^31");
  return Dims{M, N, K};
}

}  // namespace

std::string_view fp8_scaling_name(Fp8Scaling s) {
  switch (s) {
    case Fp8Scaling::automatic:
      return "automatic";
    case Fp8Scaling::in_gemm:
      return "in_gemm (cuBLASLt OUTER_VEC_32F)";
    case Fp8Scaling::epilogue:
      return "epilogue (unit-scale GEMM + scale kernel)";
  }
  return "?";
}

GemmFp8::~GemmFp8() {
  for (auto& [key, p] : plans_) destroy(p);
}

void GemmFp8::destroy(Plan& p) {
  if (p.desc) cublaslt().desc_destroy(p.desc);
  if (p.a) cublaslt().layout_destroy(p.a);
  if (p.b) cublaslt().layout_destroy(p.b);
  if (p.c) cublaslt().layout_destroy(p.c);
  p = Plan{};
}

Status GemmFp8::build(const Key& key, Plan& p) {
  const auto [M, N, K, scaling, bias_dtype] = key;
  D0_CUDA_RETURN_IF_ERROR(cublaslt().desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  D0_CUDA_RETURN_IF_ERROR(cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  D0_CUDA_RETURN_IF_ERROR(cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  if (static_cast<Fp8Scaling>(scaling) == Fp8Scaling::in_gemm) {
    const std::int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
  }
  if (bias_dtype >= 0) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    const std::int32_t bias_type = cuda_type(static_cast<DType>(bias_dtype));
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  }
  // A: W row-major [N, K] = column-major K x N (ld K), used transposed; B: x = column-major K x M; D: f32.
  D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.a, CUDA_R_8F_E4M3, K, N, K));
  D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.b, CUDA_R_8F_E4M3, K, M, K));
  D0_CUDA_RETURN_IF_ERROR(cublaslt().layout_create(&p.c, CUDA_R_32F, N, M, N));

  cublasLtMatmulPreference_t pref = nullptr;
  D0_CUDA_RETURN_IF_ERROR(cublaslt().preference_create(&pref));
  std::size_t workspace = ctx_.cublas_workspace_bytes();
  const std::uint32_t align = 16;  // run() checks 16 bytes, so no algorithm may assume the default 256
  cublasLtMatmulHeuristicResult_t result{};
  int n_results = 0;
  cublasStatus_t st =
      cublaslt().preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS) st = cublaslt().preference_set_attribute(pref, attr, &align, sizeof align);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublaslt().algo_get_heuristic(ctx_.cublas(), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &n_results);
  cublaslt().preference_destroy(pref);
  D0_RETURN_IF_ERROR(cuda_call_status(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__));
  if (n_results == 0) return make_error("the heuristic returned no algorithm");
  p.algo = result.algo;
  return Status::success();
}

GemmFp8::Plan& GemmFp8::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  // A configuration cuBLASLt refuses is remembered as unusable, so the heuristic is asked once per shape.
  if (Status st = build(key, p); !st.ok()) {
    destroy(p);
    p.why_not = st.error().message;
  } else {
    p.usable = true;
  }
  return plans_[key] = p;
}

Status GemmFp8::launch(Plan& p, const Key& key, const Tensor& x, const Tensor& sx, const Tensor& w, const Tensor& sw,
                       const Tensor& bias, Tensor& y, bool& unsupported, bool scale_after) {
  const auto scaling = static_cast<Fp8Scaling>(std::get<3>(key));
  const bool bias_in_gemm = std::get<4>(key) >= 0;
  if (scaling == Fp8Scaling::in_gemm) {
    const void* a_scale = sw.raw();  // A = W: one scale per row of W
    const void* b_scale = sx.raw();  // B = x: one scale per token
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale));
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale));
  }
  if (bias_in_gemm) {
    const void* bias_ptr = bias.raw();
    D0_CUDA_RETURN_IF_ERROR(
        cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr));
  }
  const float alpha = 1.f, beta = 0.f;
  const cublasStatus_t st =
      cublaslt().matmul(ctx_.cublas(), p.desc, &alpha, w.raw(), p.a, x.raw(), p.b, &beta, y.raw(), p.c, y.raw(), p.c,
                        &p.algo, ctx_.cublas_workspace(), ctx_.cublas_workspace_bytes(), ctx_.stream());
  unsupported = st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE;
  D0_RETURN_IF_ERROR(cuda_call_status(st, "cublasLtMatmul (fp8)", __FILE__, __LINE__));
  if (!scale_after) return Status::success();
  if (scaling == Fp8Scaling::epilogue) return fp8_gemm_epilogue_cuda(y, sx, sw, bias, ctx_.stream());
  if (has_values(bias) && !bias_in_gemm) return add_bias_cuda(y, bias, ctx_.stream());
  return Status::success();
}

Status GemmFp8::run(const Tensor& x, const Tensor& sx, const Tensor& w, const Tensor& sw, const Tensor& bias,
                    Tensor& y) {
  const char* op = "gemm_fp8";
  D0_ASSIGN_OR_RETURN(const Dims dims, check_operands(op, x, w, y));
  const auto [M, N, K] = dims;
  D0_RETURN_IF_ERROR(check_cuda_tensor(sx, op, "sx", {DType::f32}, {M}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(sw, op, "sw", {DType::f32}, {N}));
  const bool has_bias = has_values(bias);
  if (has_bias) D0_RETURN_IF_ERROR(check_cuda_tensor(bias, op, "bias", {DType::f32, DType::bf16}, {N}));
  if (!aligned_to(sx.raw(), 16) || !aligned_to(sw.raw(), 16))
    return make_error("gemm_fp8: sx and sw must be 16-byte aligned");
  if (M == 0 || N == 0) return Status::success();

  // Configurations in order of preference; a refused one falls through to the next.
  struct Attempt {
    Fp8Scaling scaling;
    int bias_dtype;
  };
  Attempt attempts[3];
  int n_attempts = 0;
  const bool try_in_gemm = scaling_ != Fp8Scaling::epilogue, try_epilogue = scaling_ != Fp8Scaling::in_gemm;
  if (try_epilogue && !kAutomaticPrefersInGemm) attempts[n_attempts++] = {Fp8Scaling::epilogue, -1};
  if (try_in_gemm) {
    if (has_bias && aligned_to(bias.raw(), 16)) attempts[n_attempts++] = {Fp8Scaling::in_gemm, int(bias.dtype())};
    attempts[n_attempts++] = {Fp8Scaling::in_gemm, -1};
  }
  if (try_epilogue && kAutomaticPrefersInGemm) attempts[n_attempts++] = {Fp8Scaling::epilogue, -1};
  std::string refusals;
  for (int i = 0; i < n_attempts; ++i) {
    const Key key{M, N, K, static_cast<int>(attempts[i].scaling), attempts[i].bias_dtype};
    Plan& p = plan(key);
    if (p.usable) {
      bool unsupported = false;
      Status st = launch(p, key, x, sx, w, sw, bias, y, unsupported);
      if (st.ok()) {
        last_scaling_ = attempts[i].scaling;
        return st;
      }
      if (!unsupported) return st;
      p.usable = false;  // cuBLASLt refused it at launch: never again for this shape
      p.why_not = st.error().message;
    }
    refusals += std::string("; ") + std::string(fp8_scaling_name(attempts[i].scaling)) +
                (attempts[i].bias_dtype >= 0 ? " with bias epilogue" : "") + ": " + p.why_not;
  }
  return make_error("gemm_fp8: cuBLASLt has no FP8 algorithm for " + shape_text(M, N, K) + " (scaling " +
                    std::string(fp8_scaling_name(scaling_)) + ")" + refusals);
}

Status GemmFp8::run_unscaled(const Tensor& x, const Tensor& w, Tensor& y) {
  const char* op = "gemm_fp8 (unscaled)";
  D0_ASSIGN_OR_RETURN(const Dims dims, check_operands(op, x, w, y));
  const auto [M, N, K] = dims;
  if (M == 0 || N == 0) return Status::success();
  const Key key{M, N, K, static_cast<int>(Fp8Scaling::epilogue), -1};
  Plan& p = plan(key);
  if (!p.usable)
    return make_error(std::string(op) + ": cuBLASLt has no FP8 algorithm for " + shape_text(M, N, K) + ": " +
                      p.why_not);
  bool unsupported = false;
  D0_RETURN_IF_ERROR(launch(p, key, x, Tensor(), w, Tensor(), Tensor(), y, unsupported, /*scale_after=*/false));
  last_scaling_ = Fp8Scaling::epilogue;  // applied by the caller
  return Status::success();
}

}  // namespace day0
