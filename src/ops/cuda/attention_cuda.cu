// Attention on the GPU, simple and not yet optimised: one block of 128 threads per (query, head). Keys come from
// a contiguous [T, kv_width] matrix, or from a paged pool through the query's block table (row of position t =
// table[t / block_size] * block_size + t % block_size); kv_write_cuda scatters new rows into such a pool. The query
// row sits in shared memory; the allowed keys [first, pos] are walked in chunks of 128. Per chunk, each warp
// takes every 4th key and forms its dot product across lanes (coalesced over head_dim, shuffle-reduced); then
// every thread folds the chunk into an online softmax (running max m, running sum l, the output lanes it owns
// rescaled by exp(m_old - m_new)). The sink logit starts the running max and contributes exp(sink - m) to l
// but no value, exactly as CpuOps::attention. Every thread keeps the same m and l (it scans the chunk's
// scores from shared memory, broadcast reads), so no block reductions are needed.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
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

// Where the keys are: contiguous rows (tables == nullptr), or a paged pool.
struct KeyLayout {
  const std::int32_t* tables = nullptr;  // [B, max_blocks]
  const std::int32_t* q_seq = nullptr;   // [S]
  int max_blocks = 0;
  int block_size = 1;
};

__device__ __forceinline__ std::int64_t key_row(const std::int32_t* table, int block_size, int t) {
  if (!table) return t;
  return static_cast<std::int64_t>(table[t / block_size]) * block_size + t % block_size;
}

__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                     const std::int32_t* __restrict__ q_pos, const void* __restrict__ sinks, int sink_kind,
                     float* __restrict__ out, int T, int n_heads, int group, int d, int window, float scale,
                     KeyLayout layout) {
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
  const std::int32_t* table =
      layout.tables ? layout.tables + static_cast<std::int64_t>(layout.q_seq[s]) * layout.max_blocks : nullptr;
  // Uniform over the block: a query with no key to read (or a table that points outside the pool) says so loudly.
  bool bad = pos < 0 || (!table && pos >= T) || (table && pos / layout.block_size >= layout.max_blocks);
  if (table && !bad)
    for (int b = tid; b <= pos / layout.block_size; b += kThreads)
      bad |= table[b] < 0 || (static_cast<std::int64_t>(table[b]) + 1) * layout.block_size > T;
  if (__syncthreads_or(bad)) {
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
      const float* kr = kbase + key_row(table, layout.block_size, c0 + j) * kv_width;
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
        const float* vc = vbase + i;
        for (int j = 0; j < n; ++j) a += ps[j] * vc[key_row(table, layout.block_size, c0 + j) * kv_width];
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

Status check_params(const char* op, const AttentionParams& p) {
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0)
    return make_error(std::string(op) + ": n_heads must be a positive multiple of n_kv_heads, got " +
                      std::to_string(p.n_heads) + " and " + std::to_string(p.n_kv_heads));
  if (p.head_dim <= 0 || p.head_dim > kAttentionMaxHeadDim)
    return make_error(std::string(op) + ": head_dim must be in [1, " + std::to_string(kAttentionMaxHeadDim) +
                      "], got " + std::to_string(p.head_dim));
  if (p.sliding_window < 0)
    return make_error(std::string(op) + ": sliding_window must be >= 0 (0 = full causal), got " +
                      std::to_string(p.sliding_window));
  if (!std::isfinite(p.scale)) return make_error(std::string(op) + ": scale must be finite");
  return Status::success();
}

// Checks q, the key/value matrices (T rows), positions, out and sinks, then launches.
Status launch(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
              const Tensor& sinks, const AttentionParams& p, Tensor& out, KeyLayout layout, cudaStream_t stream) {
  D0_RETURN_IF_ERROR(check_params(op, p));
  if (q.dim() != 2) return make_error(std::string(op) + ": q must be 2-D, got " + shape_to_string(q.shape()));
  if (k.dim() != 2) return make_error(std::string(op) + ": keys must be 2-D, got " + shape_to_string(k.shape()));
  const std::int64_t S = q.size(0), T = k.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f32}, {S, q_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, op, "k", {DType::f32}, {T, kv_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, op, "v", {DType::f32}, {T, kv_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(q_pos, op, "q_pos", {DType::i32}, {S}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {S, q_width}));
  int sink_kind = kNoSink;
  if (has_values(sinks)) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(sinks, op, "sinks", {DType::f32, DType::bf16, DType::f16},
                                         {std::int64_t(p.n_heads)}));
    sink_kind = sinks.dtype() == DType::f32 ? kSinkF32 : sinks.dtype() == DType::bf16 ? kSinkBf16 : kSinkF16;
  }
  if (S == 0) return Status::success();
  if (T == 0) return make_error(std::string(op) + ": no keys (T = 0) for " + std::to_string(S) + " queries");
  if (T > INT_MAX) return make_error(std::string(op) + ": more than 2^31 - 1 keys");
  if (S * p.n_heads > INT_MAX)
    return make_error(std::string(op) + ": " + std::to_string(S) + " queries x " + std::to_string(p.n_heads) +
                      " heads exceed one grid");
  const unsigned blocks = static_cast<unsigned>(S * p.n_heads);
  attention_kernel<<<blocks, kThreads, 0, stream>>>(
      q.data<float>(), k.data<float>(), v.data<float>(), q_pos.data<std::int32_t>(),
      sink_kind == kNoSink ? nullptr : sinks.raw(), sink_kind, out.data<float>(), static_cast<int>(T), p.n_heads,
      p.n_heads / p.n_kv_heads, p.head_dim, p.sliding_window, p.scale, layout);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_kernel");
  return Status::success();
}

// k_pool[slots[s]] = k[s], v_pool[slots[s]] = v[s]; a slot outside the pool is skipped and raises error_flag.
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                const std::int32_t* __restrict__ slots, std::int64_t S, std::int64_t width,
                                std::int64_t n_slots, float* __restrict__ k_pool, float* __restrict__ v_pool,
                                std::int32_t* __restrict__ error_flag) {
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < S * width;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = idx / width, c = idx % width;
    const std::int64_t slot = slots[s];
    if (slot < 0 || slot >= n_slots) {
      *error_flag = 1;
      continue;
    }
    k_pool[slot * width + c] = k[idx];
    v_pool[slot * width + c] = v[idx];
  }
}

}  // namespace

Status attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                      const AttentionParams& p, Tensor& out, cudaStream_t stream) {
  return launch("attention_cuda", q, k, v, q_pos, sinks, p, out, KeyLayout{}, stream);
}

Status paged_attention_cuda(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                            const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out,
                            cudaStream_t stream) {
  const char* op = "paged_attention_cuda";
  if (kv.block_tables.dim() != 2 || kv.block_size <= 0 || kv.block_size > INT_MAX)
    return make_error(std::string(op) + ": block tables must be i32 [B, max_blocks] with a positive block size");
  const std::int64_t S = q.dim() == 2 ? q.size(0) : 0;
  D0_RETURN_IF_ERROR(check_cuda_tensor(kv.block_tables, op, "block_tables", {DType::i32}, kv.block_tables.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(kv.q_seq, op, "q_seq", {DType::i32}, {S}));
  if (kv.block_tables.size(1) > INT_MAX) return make_error(std::string(op) + ": too many blocks per sequence");
  KeyLayout layout{kv.block_tables.data<std::int32_t>(), kv.q_seq.data<std::int32_t>(),
                   static_cast<int>(kv.block_tables.size(1)), static_cast<int>(kv.block_size)};
  return launch(op, q, k_pool, v_pool, q_pos, sinks, p, out, layout, stream);
}

Status kv_write_cuda(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool,
                     Tensor& error_flag, cudaStream_t stream) {
  const char* op = "kv_write_cuda";
  if (k.dim() != 2 || k_pool.dim() != 2) return make_error(std::string(op) + ": k and the pools must be 2-D");
  const std::int64_t S = k.size(0), width = k.size(1), n_slots = k_pool.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, op, "k", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, op, "v", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(k_pool, op, "k_pool", {DType::f32}, {n_slots, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v_pool, op, "v_pool", {DType::f32}, {n_slots, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(slots, op, "slots", {DType::i32}, {S}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1}));
  if (S * width == 0) return Status::success();
  const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>((S * width + kThreads - 1) / kThreads, 65536));
  kv_write_kernel<<<grid, kThreads, 0, stream>>>(k.data<float>(), v.data<float>(), slots.data<std::int32_t>(), S,
                                                 width, n_slots, k_pool.data<float>(), v_pool.data<float>(),
                                                 error_flag.data<std::int32_t>());
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("kv_write_kernel");
  return Status::success();
}

}  // namespace day0
