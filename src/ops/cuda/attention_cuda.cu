// Attention on the GPU, simple and not yet optimised: one block of 128 threads per (query, head). The query
// row sits in shared memory; the allowed keys [first, pos] are walked in chunks of 128. Per chunk, each warp
// takes every 4th key and forms its dot product across lanes (coalesced over head_dim, shuffle-reduced); then
// every thread folds the chunk into an online softmax (running max m, running sum l, the output lanes it owns
// rescaled by exp(m_old - m_new)). The sink logit starts the running max and contributes exp(sink - m) to l
// but no value, exactly as CpuOps::attention. Every thread keeps the same m and l (it scans the chunk's
// scores from shared memory, broadcast reads), so no block reductions are needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 128;  // keys per chunk; == kThreads so each thread exponentiates one score
constexpr int kLanesPerThread = kAttentionMaxHeadDim / kThreads;
static_assert(kChunk == kThreads, "one score per thread in the exponentiation step");
static_assert(kAttentionMaxHeadDim % kThreads == 0, "output lanes split evenly over the threads");

enum SinkKind : int { kNoSink = 0, kSinkF32 = 1, kSinkBf16 = 2, kSinkF16 = 3 };

__device__ float load_sink(const void* sinks, int kind, int h) {
  switch (kind) {
    case kSinkF32: return static_cast<const float*>(sinks)[h];
    case kSinkBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(sinks)[h]);
    case kSinkF16: return __half2float(static_cast<const __half*>(sinks)[h]);
    default: return -INFINITY;
  }
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                     const std::int32_t* __restrict__ q_pos, const void* __restrict__ sinks, int sink_kind,
                     float* __restrict__ out, int T, int n_heads, int group, int d, int window, float scale) {
  __shared__ float qs[kAttentionMaxHeadDim];
  __shared__ float ps[kChunk];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(n_heads));
  const std::int64_t s = blockIdx.x / static_cast<unsigned>(n_heads);
  const int kvh = h / group;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * d;
  const std::int64_t kv_width = static_cast<std::int64_t>(n_heads / group) * d;
  float* o = out + s * q_width + static_cast<std::int64_t>(h) * d;

  const int pos = q_pos[s];
  if (pos < 0 || pos >= T) {  // uniform over the block: no key to read, so say so loudly
    for (int i = tid; i < d; i += kThreads) o[i] = NAN;
    return;
  }
  const float* qv = q + s * q_width + static_cast<std::int64_t>(h) * d;
  for (int i = tid; i < d; i += kThreads) qs[i] = qv[i];
  // Causal, and within the window (which counts the query itself): keys [first, pos], never empty.
  const int first = window > 0 ? max(0, pos - window + 1) : 0;
  const float* kbase = k + static_cast<std::int64_t>(kvh) * d;
  const float* vbase = v + static_cast<std::int64_t>(kvh) * d;

  float m = -INFINITY, l = 0.f;
  if (sink_kind != kNoSink) {
    m = load_sink(sinks, sink_kind, h);
    l = 1.f;  // exp(sink - m) with m = sink
  }
  float acc[kLanesPerThread];
#pragma unroll
  for (int r = 0; r < kLanesPerThread; ++r) acc[r] = 0.f;
  __syncthreads();  // qs ready

  for (int c0 = first; c0 <= pos; c0 += kChunk) {
    const int n = min(kChunk, pos - c0 + 1);
    // Scores: warp-uniform loop, so the full-mask shuffles see all 32 lanes.
    for (int j = warp; j < n; j += kWarps) {
      const float* kr = kbase + static_cast<std::int64_t>(c0 + j) * kv_width;
      float dot = 0.f;
      for (int i = lane; i < d; i += 32) dot += qs[i] * kr[i];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
      if (lane == 0) ps[j] = dot * scale;
    }
    __syncthreads();  // scores ready
    float m_new = m;
    for (int j = 0; j < n; ++j) m_new = fmaxf(m_new, ps[j]);
    __syncthreads();  // every thread has read the scores before they are overwritten by probabilities
    if (tid < n) ps[tid] = expf(ps[tid] - m_new);
    // m is -inf only before the first chunk without a sink: nothing accumulated yet, so nothing to rescale
    // (and exp(-inf - -inf) would be NaN if m_new were -inf too).
    const float corr = m == -INFINITY ? 0.f : expf(m - m_new);
    __syncthreads();  // probabilities ready
    float psum = 0.f;
    for (int j = 0; j < n; ++j) psum += ps[j];
    l = l * corr + psum;
#pragma unroll
    for (int r = 0; r < kLanesPerThread; ++r) {
      const int i = tid + r * kThreads;
      if (i < d) {
        float a = acc[r] * corr;
        const float* vc = vbase + static_cast<std::int64_t>(c0) * kv_width + i;
        for (int j = 0; j < n; ++j) a += ps[j] * vc[static_cast<std::int64_t>(j) * kv_width];
        acc[r] = a;
      }
    }
    m = m_new;
    __syncthreads();  // everyone is done with ps before the next chunk's scores land in it
  }
#pragma unroll
  for (int r = 0; r < kLanesPerThread; ++r) {
    const int i = tid + r * kThreads;
    if (i < d) o[i] = acc[r] / l;
  }
}

}  // namespace

Status attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                      const AttentionParams& p, Tensor& out, cudaStream_t stream) {
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0)
    return make_error("attention_cuda: n_heads must be a positive multiple of n_kv_heads, got " +
                      std::to_string(p.n_heads) + " and " + std::to_string(p.n_kv_heads));
  if (p.head_dim <= 0 || p.head_dim > kAttentionMaxHeadDim)
    return make_error("attention_cuda: head_dim must be in [1, " + std::to_string(kAttentionMaxHeadDim) + "], got " +
                      std::to_string(p.head_dim));
  if (p.sliding_window < 0)
    return make_error("attention_cuda: sliding_window must be >= 0 (0 = full causal), got " +
                      std::to_string(p.sliding_window));
  if (!std::isfinite(p.scale)) return make_error("attention_cuda: scale must be finite");
  if (q.dim() != 2) return make_error("attention_cuda: q must be 2-D, got " + shape_to_string(q.shape()));
  if (k.dim() != 2) return make_error("attention_cuda: k must be 2-D, got " + shape_to_string(k.shape()));
  const std::int64_t S = q.size(0), T = k.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, "attention_cuda", "q", {DType::f32}, {S, q_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, "attention_cuda", "k", {DType::f32}, {T, kv_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, "attention_cuda", "v", {DType::f32}, {T, kv_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q_pos, "attention_cuda", "q_pos", {DType::i32}, {S}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, "attention_cuda", "out", {DType::f32}, {S, q_width}));
  int sink_kind = kNoSink;
  if (has_values(sinks)) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(sinks, "attention_cuda", "sinks", {DType::f32, DType::bf16, DType::f16},
                                         {std::int64_t(p.n_heads)}));
    sink_kind = sinks.dtype() == DType::f32 ? kSinkF32 : sinks.dtype() == DType::bf16 ? kSinkBf16 : kSinkF16;
  }
  if (S == 0) return Status::success();
  if (T == 0) return make_error("attention_cuda: no keys (T = 0) for " + std::to_string(S) + " queries");
  if (T > INT_MAX) return make_error("attention_cuda: more than 2^31 - 1 keys");
  if (S * p.n_heads > INT_MAX)
    return make_error("attention_cuda: " + std::to_string(S) + " queries x " + std::to_string(p.n_heads) +
                      " heads exceed one grid");
  const unsigned blocks = static_cast<unsigned>(S * p.n_heads);
  attention_kernel<<<blocks, kThreads, 0, stream>>>(
      q.data<float>(), k.data<float>(), v.data<float>(), q_pos.data<std::int32_t>(),
      sink_kind == kNoSink ? nullptr : sinks.raw(), sink_kind, out.data<float>(), static_cast<int>(T), p.n_heads,
      p.n_heads / p.n_kv_heads, p.head_dim, p.sliding_window, p.scale);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_kernel");
  return Status::success();
}

}  // namespace day0
