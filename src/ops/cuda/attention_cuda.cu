// Attention on the GPU, for the head layouts the GQA-group kernel (attention_group_cuda.cu) does not take and the
// steps the tensor-core kernel does not: one block of 128 threads per (query, head), or per (query, head, split)
// when few pairs would leave the SMs idle (decode): each split takes a contiguous share of the keys and a merge
// kernel (used by the group kernel too) combines them (flash-decoding). Keys come from a contiguous [T, kv_width]
// matrix, or from a paged pool through the
// query's block table (row of position t = table[t / block_size] * block_size + t % block_size); kv_write_cuda
// scatters new rows into such a pool. The query row sits in shared memory; the allowed keys are walked in chunks
// of 128. Per chunk, each thread takes one key and forms its dot product over its whole row (independent loads,
// no reductions); then every thread folds the chunk into an online softmax (running max m, running sum l, the
// output lanes it owns rescaled by exp(m_old - m_new)). The sink logit starts the running max and contributes
// exp(sink - m) to l but no value, exactly as CpuOps::attention. Every thread keeps the same m and l (it scans the
// chunk's scores from shared memory, broadcast reads), so no block reductions are needed.
#include "ops/cuda/attention_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ops/cuda/attention_group_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/cuda/attention_tc_cuda.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = kSplitChunk;  // keys per chunk; == kThreads so each thread exponentiates one score
constexpr int kLanesPerThread = kAttentionMaxHeadDim / kThreads;
static_assert(kChunk == kThreads, "one score per thread in the exponentiation step");
static_assert(kAttentionMaxHeadDim % kThreads == 0, "output lanes split evenly over the threads");

struct SplitArgs {
  int splits = 1;             // blocks per (query, head); 1: this kernel writes the output itself
  int keys_per_split = 0;     // > 0: fixed split length (AttentionSplit)
  float* partials = nullptr;  // [S * n_heads * splits][d + 2]: m, l, unnormalised output
};

// kG query heads per block, all of one KV head (kG = 1, or the whole GQA group): each key and value row is read
// once for the kG heads. Per head the arithmetic is the same sequence of operations whatever kG is.
template <int kG, class KV>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(const float* q, const KV* k, const KV* v, const std::int32_t* q_pos,
                     const void* __restrict__ sinks, int sink_kind, float* __restrict__ out, int T, int n_heads,
                     int group, int d, int window, float scale, KeyLayout layout, SplitArgs split) {
  begin_dependent_grid();
  __shared__ float qs[kG][kAttentionMaxHeadDim];
  __shared__ float ps[kG][kChunk];
  __shared__ std::int64_t rows[kChunk];
  const int tid = threadIdx.x;
  const int blocks_per_query = n_heads / kG;
  const int h0 = static_cast<int>(blockIdx.x % static_cast<unsigned>(blocks_per_query)) * kG;  // first head
  const std::int64_t s = blockIdx.x / static_cast<unsigned>(blocks_per_query);
  const int kvh = h0 / group;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * d;
  const std::int64_t kv_width = static_cast<std::int64_t>(n_heads / group) * d;
  // Output row and split partials of head h0 + g (partials: [S * n_heads * splits][d + 2] by (query, head)).
  auto o_of = [&](int g) { return out + s * q_width + static_cast<std::int64_t>(h0 + g) * d; };
  auto part_of = [&](int g) -> float* {
    if (split.splits <= 1) return nullptr;
    return split.partials + ((s * n_heads + h0 + g) * split.splits + blockIdx.y) * (d + 2);
  };

  const int pos = q_pos[s];
  const std::int32_t* table =
      layout.tables ? layout.tables + static_cast<std::int64_t>(layout.q_seq[s]) * layout.max_blocks : nullptr;
  // Uniform over the block: a query with no key to read (or a table that points outside the pool) says so loudly.
  if (query_is_bad(pos, T, table, layout)) {
    for (int g = 0; g < kG; ++g) {
      if (float* part = part_of(g)) {
        if (tid == 0) part[0] = NAN;  // the merge turns the row into NaN
      } else {
        for (int i = tid; i < d; i += kThreads) o_of(g)[i] = NAN;
      }
    }
    return;
  }
  // Each query's own keys are shared out over its live splits (a short query in a long batch uses fewer), in spans
  // of whole chunks where there are enough keys.
  const int live = live_splits(pos, window, split.splits, split.keys_per_split);
  if (static_cast<int>(blockIdx.y) >= live) return;
  const KeySpan keys = split_keys(pos, window, live, split.keys_per_split, blockIdx.y);
  const int lo = keys.lo, hi = keys.hi;
  for (int g = 0; g < kG; ++g) {
    const float* qv = q + s * q_width + static_cast<std::int64_t>(h0 + g) * d;
    for (int i = tid; i < d; i += kThreads) qs[g][i] = qv[i];
  }
  const KV* kbase = k + static_cast<std::int64_t>(kvh) * d;
  const KV* vbase = v + static_cast<std::int64_t>(kvh) * d;
  const bool vec4 = d % 4 == 0 && kv_width % 4 == 0 && (reinterpret_cast<std::uintptr_t>(k) % (4 * sizeof(KV))) == 0;

  float m[kG], l[kG];
  float acc[kG][kLanesPerThread];
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    m[g] = -INFINITY, l[g] = 0.f;
    if (sink_kind != kNoSink && split.splits <= 1) {  // with splits, the merge adds the sink once
      m[g] = load_sink(sinks, sink_kind, h0 + g);
      l[g] = 1.f;  // exp(sink - m) with m = sink
    }
#pragma unroll
    for (int r = 0; r < kLanesPerThread; ++r) acc[g][r] = 0.f;
  }
  __syncthreads();  // qs ready

  for (int c0 = lo; c0 <= hi; c0 += kChunk) {
    const int n = min(kChunk, hi - c0 + 1);
    // Scores: one key per thread, its row read whole (independent loads across threads, no reductions).
    if (tid < n) {
      const std::int64_t row = key_row(table, layout.block_size, c0 + tid);
      rows[tid] = row;
      const KV* kr = kbase + row * kv_width;
      float dot[kG];
#pragma unroll
      for (int g = 0; g < kG; ++g) dot[g] = 0.f;
      // Unrolled so the row's loads can all be in flight together (same order of sums; measured no faster at
      // decode, perf-notes v4, but no slower).
      if (vec4) {
#pragma unroll 16
        for (int i = 0; i < d; i += 4) {
          const float4 kk = load_kv4(kr + i);
#pragma unroll
          for (int g = 0; g < kG; ++g) {
            dot[g] += qs[g][i] * kk.x;
            dot[g] += qs[g][i + 1] * kk.y;
            dot[g] += qs[g][i + 2] * kk.z;
            dot[g] += qs[g][i + 3] * kk.w;
          }
        }
      } else {
        for (int i = 0; i < d; ++i) {
          const float kv = load_kv(kr + i);
#pragma unroll
          for (int g = 0; g < kG; ++g) dot[g] += qs[g][i] * kv;
        }
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) ps[g][tid] = dot[g] * scale;
    }
    __syncthreads();  // scores ready
    float m_new[kG];
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      m_new[g] = m[g];
      for (int j = 0; j < n; ++j) m_new[g] = fmaxf(m_new[g], ps[g][j]);
    }
    __syncthreads();  // every thread has read the scores before they are overwritten by probabilities
    if (tid < n)
#pragma unroll
      for (int g = 0; g < kG; ++g) ps[g][tid] = expf(ps[g][tid] - m_new[g]);
    // m is -inf only before the first chunk without a sink: nothing accumulated yet, so nothing to rescale
    // (and exp(-inf - -inf) would be NaN if m_new were -inf too).
    float corr[kG];
#pragma unroll
    for (int g = 0; g < kG; ++g) corr[g] = m[g] == -INFINITY ? 0.f : expf(m[g] - m_new[g]);
    __syncthreads();  // probabilities ready
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      float psum = 0.f;
      for (int j = 0; j < n; ++j) psum += ps[g][j];
      l[g] = l[g] * corr[g] + psum;
    }
#pragma unroll
    for (int r = 0; r < kLanesPerThread; ++r) {
      const int i = tid + r * kThreads;
      if (i < d) {
        float a[kG];
#pragma unroll
        for (int g = 0; g < kG; ++g) a[g] = acc[g][r] * corr[g];
        const KV* vc = vbase + i;
        // Up to 32 value rows in flight per thread (was 8; measured no faster at decode, perf-notes v4).
#pragma unroll 32
        for (int j = 0; j < n; ++j) {
          const float vj = load_kv(vc + rows[j] * kv_width);
#pragma unroll
          for (int g = 0; g < kG; ++g) a[g] += ps[g][j] * vj;
        }
#pragma unroll
        for (int g = 0; g < kG; ++g) acc[g][r] = a[g];
      }
    }
#pragma unroll
    for (int g = 0; g < kG; ++g) m[g] = m_new[g];
    __syncthreads();  // everyone is done with ps and rows before the next chunk's land in them
  }
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (float* part = part_of(g)) {
      if (tid == 0) {
        part[0] = m[g];  // -inf: this split had no keys
        part[1] = l[g];
      }
#pragma unroll
      for (int r = 0; r < kLanesPerThread; ++r) {
        const int i = tid + r * kThreads;
        if (i < d) part[2 + i] = acc[g][r];
      }
    } else {
      float* o = o_of(g);
#pragma unroll
      for (int r = 0; r < kLanesPerThread; ++r) {
        const int i = tid + r * kThreads;
        if (i < d) o[i] = acc[g][r] / l[g];
      }
    }
  }
}

// Merges the splits of one (query, head) (block): M = max(sink, m_y), L = exp(sink - M) + sum l_y exp(m_y - M),
// out = sum acc_y exp(m_y - M) / L. A NaN m (a bad query) makes the row NaN. The splits' m and l are read by all
// threads at once into shared memory, a tile at a time; the sums then run over y in order, as a serial merge would
// (an empty split, m = -inf, adds exact zeros). Only the query's live splits (live_splits) are read: the others
// were not written.
constexpr int kMergeTile = 1024;
// At most this many splits and head_dim <= kThreads take the one-round-trip form: its registers (a value a split)
// stay near the general form's (56 against 32 with 16 splits and 2 lanes a thread cost 0.6% at batch 8, whose 512
// merge blocks are resident beside the attention kernel).
constexpr int kMergeFew = 8;
// ... and only in grids of at most this many blocks: H200, 20b c1024, 3 rounds, this form against the general one:
// batch 1 (64 blocks) 547.4 against 540.5 tok/s, batch 8 (512) 2,148 against 2,172.
constexpr std::int64_t kMergeFewMaxBlocks = 256;
__global__ void __launch_bounds__(kThreads)
    attention_merge_kernel(const float* partials, int splits, int keys_per_split, const std::int32_t* q_pos, int window,
                           int n_heads, int d, const void* __restrict__ sinks, int sink_kind, bool few_allowed,
                           float* __restrict__ out, __nv_bfloat16* __restrict__ out_bf16) {
  __shared__ float w_s[kMergeTile], l_s[kMergeTile], warp_max[kThreads / 32];
  const int tid = threadIdx.x;
  const int h = static_cast<int>(blockIdx.x % static_cast<unsigned>(n_heads));
  const std::int64_t s = blockIdx.x / static_cast<unsigned>(n_heads);
  const std::int64_t stride = d + 2;
  const float* part = partials + static_cast<std::int64_t>(blockIdx.x) * splits * stride;
  const std::int64_t row = (s * n_heads + h) * d;  // out (or null) and out_bf16 (or null): the same element
  const int live = live_splits(q_pos[s], window, splits, keys_per_split);  // a step input: read before the wait
  begin_dependent_grid();
  // Few splits (decode): every partial is loaded at once, one round trip instead of three (m, then m and l, then
  // the values); the same sums in the same order.
  const bool few = few_allowed && live <= kMergeFew && d <= kThreads;
  float vals[kMergeFew], my = -INFINITY, ly = 0.f;
  if (few) {
#pragma unroll
    for (int y = 0; y < kMergeFew; ++y) vals[y] = y < live && tid < d ? part[y * stride + 2 + tid] : 0.f;
    if (tid < live) my = part[tid * stride], ly = part[tid * stride + 1];
  }
  float M = few ? my : -INFINITY;
  bool bad = few && isnan(my);
  // The general form's m, a split at a time (starting past the end when few: 40 registers; `!few &&` in the
  // condition compiled to 56).
  for (int y = few ? live : tid; y < live; y += kThreads) {
    const float my = part[y * stride];
    bad |= isnan(my);
    M = fmaxf(M, my);
  }
  for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
  if (tid % 32 == 0) warp_max[tid / 32] = M;
  bad = __syncthreads_or(bad);
  if (sink_kind != kNoSink) M = load_sink(sinks, sink_kind, h);
  for (int w = 0; w < kThreads / 32; ++w) M = fmaxf(M, warp_max[w]);
  float L = sink_kind != kNoSink ? expf(load_sink(sinks, sink_kind, h) - M) : 0.f;
  float a[kLanesPerThread];
#pragma unroll
  for (int r = 0; r < kLanesPerThread; ++r) a[r] = 0.f;
  if (few) {
    if (tid < live) {
      w_s[tid] = my == -INFINITY ? 0.f : expf(my - M);
      l_s[tid] = ly;
    }
    __syncthreads();
    for (int y = 0; y < live; ++y) L += l_s[y] * w_s[y];
#pragma unroll
    for (int y = 0; y < kMergeFew; ++y)
      if (y < live) a[0] += vals[y] * w_s[y];
  }
  for (int y0 = 0; !few && y0 < live; y0 += kMergeTile) {
    const int n = min(kMergeTile, live - y0);
    for (int y = tid; y < n; y += kThreads) {
      const float my = part[(y0 + y) * stride];
      w_s[y] = my == -INFINITY ? 0.f : expf(my - M);
      l_s[y] = part[(y0 + y) * stride + 1];
    }
    __syncthreads();
    for (int y = 0; y < n; ++y) L += l_s[y] * w_s[y];
#pragma unroll
    for (int r = 0; r < kLanesPerThread; ++r) {
      const int i = tid + r * kThreads;
      if (i >= d) continue;
      const float* pi = part + y0 * stride + 2 + i;
#pragma unroll 8
      for (int y = 0; y < n; ++y) a[r] += pi[y * stride] * w_s[y];
    }
    __syncthreads();  // w_s and l_s are rewritten by the next tile
  }
#pragma unroll
  for (int r = 0; r < kLanesPerThread; ++r) {
    const int i = tid + r * kThreads;
    if (i >= d) continue;
    const float v = bad ? NAN : a[r] / L;
    if (out) out[row + i] = v;
    if (out_bf16) out_bf16[row + i] = __float2bfloat16_rn(v);
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

// The per-head kernel, or the whole-group one for batched decode where the group kernel does not fit.
template <class KV>
Status launch_per_head(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const void* sink_ptr,
                       int sink_kind, const AttentionParams& p, Tensor& out, KeyLayout layout, cudaStream_t stream,
                       const SplitArgs& sa) {
  const std::int64_t S = q.size(0), T = k.size(0);
  const int group = p.n_heads / p.n_kv_heads;
  const bool whole_group = attention_reads_kv_once(S, p);
  const dim3 grid(static_cast<unsigned>(S * (whole_group ? p.n_kv_heads : p.n_heads)),
                  static_cast<unsigned>(sa.splits));
  auto go = [&](auto kernel) {
    launch_dependent(kernel, grid, kThreads, 0, stream, q.data<float>(), static_cast<const KV*>(k.raw()),
                     static_cast<const KV*>(v.raw()), q_pos.data<std::int32_t>(), sink_ptr, sink_kind,
                     out.data<float>(), static_cast<int>(T), p.n_heads, group, p.head_dim, p.sliding_window, p.scale,
                     layout, sa);
  };
  if (whole_group)
    go(attention_kernel<kAttentionGroupHeads, KV>);
  else
    go(attention_kernel<1, KV>);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_kernel");
  return Status::success();
}

// Whether launch sends the step to the tensor-core kernel (after its checks).
bool tensor_cores_take(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p,
                       const AttentionSplit& split) {
  return split.tensor_cores && split.splits == 1 && q.dim() == 2 && attention_tc_fits(q.size(0), p) &&
         aligned_to(q.raw(), 16) && aligned_to(k.raw(), 16) && aligned_to(v.raw(), 16);
}

// Checks q, the key/value matrices (T rows), positions, out and sinks, then launches.
Status launch(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos,
              const Tensor& sinks, const AttentionParams& p, Tensor& out, KeyLayout layout, cudaStream_t stream,
              const AttentionSplit& split) {
  D0_RETURN_IF_ERROR(check_params(op, p));
  if (q.dim() != 2) return make_error(std::string(op) + ": q must be 2-D, got " + shape_to_string(q.shape()));
  if (k.dim() != 2) return make_error(std::string(op) + ": keys must be 2-D, got " + shape_to_string(k.shape()));
  const std::int64_t S = q.size(0), T = k.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f32}, {S, q_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, op, "k", {DType::f32, DType::bf16}, {T, kv_width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, op, "v", {k.dtype()}, {T, kv_width}));
  const bool kv_bf16 = k.dtype() == DType::bf16;
  D0_RETURN_IF_ERROR(check_cuda_tensor(q_pos, op, "q_pos", {DType::i32}, {S}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(out, op, "out", {DType::f32}, {S, q_width}));
  const bool copy_bf16 = split.out_bf16.defined();
  if (copy_bf16) D0_RETURN_IF_ERROR(check_cuda_tensor(split.out_bf16, op, "out_bf16", {DType::bf16}, {S, q_width}));
  int sink_kind = kNoSink;
  if (has_values(sinks)) {
    D0_RETURN_IF_ERROR(
        check_cuda_tensor(sinks, op, "sinks", {DType::f32, DType::bf16, DType::f16}, {std::int64_t(p.n_heads)}));
    sink_kind = sinks.dtype() == DType::f32 ? kSinkF32 : sinks.dtype() == DType::bf16 ? kSinkBf16 : kSinkF16;
  }
  if (S == 0) return Status::success();
  if (T == 0) return make_error(std::string(op) + ": no keys (T = 0) for " + std::to_string(S) + " queries");
  if (T > INT_MAX) return make_error(std::string(op) + ": more than 2^31 - 1 keys");
  if (S * p.n_heads > INT_MAX)
    return make_error(std::string(op) + ": " + std::to_string(S) + " queries x " + std::to_string(p.n_heads) +
                      " heads exceed one grid");
  if (split.splits < 1 || split.splits > 65535)
    return make_error(std::string(op) + ": splits must be in [1, 65535], got " + std::to_string(split.splits));
  if (split.keys_per_split < 0 || (split.keys_per_split > 0 && split.splits < 2))
    return make_error(std::string(op) + ": fixed-length splits need keys_per_split > 0 and 2+ splits, got " +
                      std::to_string(split.keys_per_split) + " and " + std::to_string(split.splits));
  SplitArgs sa;
  if (split.splits > 1) {
    const std::int64_t need = attention_partials_floats(S, p, split.splits);
    D0_RETURN_IF_ERROR(check_cuda_tensor(split.partials, op, "partials", {DType::f32}, {need}));
    sa.splits = split.splits;
    sa.keys_per_split = split.keys_per_split;
    // A Tensor is a handle: the split owns no data, the scratch it names is written here.
    sa.partials = static_cast<float*>(const_cast<void*>(split.partials.raw()));
  }
  std::int64_t rotary_half = 0;  // q unrotated: the tensor-core kernel rotates it from the table
  if (split.q_cos_sin.defined()) {
    const Tensor& cs = split.q_cos_sin;
    rotary_half = cs.dim() == 2 ? cs.size(1) / 2 : 0;
    D0_RETURN_IF_ERROR(check_cuda_tensor(cs, op, "q_cos_sin", {DType::f32}, {S, 2 * rotary_half}));
    if (!aligned_to(cs.raw(), 16)) return make_error(std::string(op) + ": q_cos_sin must be 16-byte aligned");
    if (!attention_rotates_q(q, k, v, p, split, rotary_half))
      return make_error(std::string(op) + ": q_cos_sin given (q unrotated) for a step the tensor-core kernel with " +
                        "bf16 operands does not take, or a rotary half of " + std::to_string(rotary_half) +
                        " it does not rotate");
  }
  const void* sink_ptr = sink_kind == kNoSink ? nullptr : sinks.raw();
  // The kernel that writes the rows (the tensor-core or group kernel, or the splits' merge) writes the bf16 copy with
  // them; only the per-head kernel's rows without splits are converted after.
  const bool tensor_cores = tensor_cores_take(q, k, v, p, split);
  const bool group = !tensor_cores && attention_group_fits(p) && aligned_to(q.raw(), 16) && aligned_to(k.raw(), 16) &&
                     aligned_to(v.raw(), 16);
  const bool direct_bf16 = copy_bf16 && (tensor_cores || group || sa.splits > 1);
  float* out_f32 = direct_bf16 && split.bf16_only ? nullptr : out.data<float>();
  void* out_bf16 = direct_bf16 ? const_cast<void*>(split.out_bf16.raw()) : nullptr;
  if (tensor_cores) {
    const AttentionTcArgs ta{q.data<float>(),
                             k.raw(),
                             v.raw(),
                             kv_bf16,
                             q_pos.data<std::int32_t>(),
                             sink_ptr,
                             sink_kind,
                             out_f32,
                             static_cast<int>(S),
                             static_cast<int>(T),
                             layout,
                             split.bf16_operands,
                             out_bf16,
                             rotary_half > 0 ? split.q_cos_sin.data<float>() : nullptr,
                             static_cast<int>(rotary_half)};
    return attention_tc_cuda(ta, p, stream);
  }
  if (group) {
    const AttentionGroupArgs ga{q.data<float>(),
                                k.raw(),
                                v.raw(),
                                kv_bf16,
                                q_pos.data<std::int32_t>(),
                                sink_ptr,
                                sink_kind,
                                out_f32,
                                out_bf16,
                                static_cast<int>(S),
                                static_cast<int>(T),
                                layout,
                                sa.splits,
                                sa.keys_per_split,
                                sa.partials};
    D0_RETURN_IF_ERROR(attention_group_cuda(ga, p, stream));
  } else {
    const auto per_head = kv_bf16 ? launch_per_head<__nv_bfloat16> : launch_per_head<float>;
    D0_RETURN_IF_ERROR(per_head(q, k, v, q_pos, sink_ptr, sink_kind, p, out, layout, stream, sa));
  }
  if (sa.splits > 1) {
    const std::int64_t blocks = S * p.n_heads;
    launch_dependent(attention_merge_kernel, static_cast<unsigned>(blocks), kThreads, 0, stream, sa.partials, sa.splits,
                     sa.keys_per_split, q_pos.data<std::int32_t>(), p.sliding_window, p.n_heads, p.head_dim, sink_ptr,
                     sink_kind, blocks <= kMergeFewMaxBlocks, out_f32, static_cast<__nv_bfloat16*>(out_bf16));
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_merge_kernel");
  }
  if (copy_bf16 && !direct_bf16) {
    Tensor copy = split.out_bf16;  // a handle: the conversion writes its storage
    return convert_f32_to_bf16_cuda(out, copy, stream);
  }
  return Status::success();
}

// k_pool[slots[s]] = k[s], v_pool[slots[s]] = v[s] (rounded to the pool's dtype); a slot outside the pool is skipped
// and raises error_flag.
template <class KV>
__global__ void kv_write_kernel(const float* k, const float* v, const std::int32_t* slots, std::int64_t S,
                                std::int64_t width, std::int64_t n_slots, KV* __restrict__ k_pool,
                                KV* __restrict__ v_pool, std::int32_t* __restrict__ error_flag) {
  begin_dependent_grid();
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < S * width;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t s = idx / width, c = idx % width;
    const std::int64_t slot = slots[s];
    if (slot < 0 || slot >= n_slots) {
      *error_flag = 1;
      continue;
    }
    store_kv(k_pool + slot * width + c, k[idx]);
    store_kv(v_pool + slot * width + c, v[idx]);
  }
}

}  // namespace

bool attention_rotates_q(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& p,
                         const AttentionSplit& split, std::int64_t rotary_half) {
  return tensor_cores_take(q, k, v, p, split) &&
         attention_tc_rotates_q(k.dtype() == DType::bf16 && v.dtype() == DType::bf16, split.bf16_operands, rotary_half);
}

bool attention_reads_kv_once(std::int64_t S, const AttentionParams& p) {
  return attention_group_fits(p) ||
         (p.n_kv_heads > 0 && p.n_heads == kAttentionGroupHeads * p.n_kv_heads && S >= kAttentionGroupMinQueries);
}

int attention_splits(std::int64_t S, const AttentionParams& p, std::int64_t max_keys, int sm_count) {
  const std::int64_t keys = p.sliding_window > 0 ? std::min<std::int64_t>(max_keys, p.sliding_window) : max_keys;
  const std::int64_t pairs = std::max<std::int64_t>(1, S * (attention_reads_kv_once(S, p) ? p.n_kv_heads : p.n_heads));
  // Enough blocks for about 4 per SM, and no split shorter than one chunk of keys; none where the pairs alone give 3
  // an SM: a second split would add a merge kernel for little (H200, 20b batch 64: one split 38.5 us a full layer
  // against 52.0 for two and their merge; decode 7,777 tok/s against 7,642).
  const std::int64_t sms = std::max(sm_count, 1);
  if (pairs >= 3 * sms) return 1;
  const std::int64_t want = (4 * sms + pairs - 1) / pairs;
  const std::int64_t most = std::max<std::int64_t>(1, keys / kChunk);
  return static_cast<int>(std::clamp<std::int64_t>(std::min(want, most), 1, 1024));
}

int attention_invariant_splits(const AttentionParams& p, std::int64_t max_keys) {
  const std::int64_t keys = p.sliding_window > 0 ? std::min<std::int64_t>(max_keys, p.sliding_window) : max_keys;
  const std::int64_t n = (keys + kAttentionInvariantKeysPerSplit - 1) / kAttentionInvariantKeysPerSplit;
  return static_cast<int>(std::clamp<std::int64_t>(n, 2, 65535));
}

std::int64_t attention_partials_floats(std::int64_t S, const AttentionParams& p, int splits) {
  return S * p.n_heads * std::int64_t(splits) * (p.head_dim + 2);
}

Status attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                      const AttentionParams& p, Tensor& out, cudaStream_t stream, const AttentionSplit& split) {
  return launch("attention_cuda", q, k, v, q_pos, sinks, p, out, KeyLayout{}, stream, split);
}

Status paged_attention_cuda(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                            const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out,
                            cudaStream_t stream, const AttentionSplit& split) {
  const char* op = "paged_attention_cuda";
  if (kv.block_tables.dim() != 2 || kv.block_size <= 0 || kv.block_size > INT_MAX)
    return make_error(std::string(op) + ": block tables must be i32 [B, max_blocks] with a positive block size");
  const std::int64_t S = q.dim() == 2 ? q.size(0) : 0;
  D0_RETURN_IF_ERROR(check_cuda_tensor(kv.block_tables, op, "block_tables", {DType::i32}, kv.block_tables.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(kv.q_seq, op, "q_seq", {DType::i32}, {S}));
  if (kv.block_tables.size(1) > INT_MAX) return make_error(std::string(op) + ": too many blocks per sequence");
  KeyLayout layout{kv.block_tables.data<std::int32_t>(), kv.q_seq.data<std::int32_t>(),
                   static_cast<int>(kv.block_tables.size(1)), static_cast<int>(kv.block_size)};
  return launch(op, q, k_pool, v_pool, q_pos, sinks, p, out, layout, stream, split);
}

Status check_kv_slot_writes(const char* op, std::int64_t S, std::int64_t width, const Tensor& slots,
                            const Tensor& k_pool, const Tensor& v_pool, const Tensor& error_flag) {
  if (k_pool.dim() != 2) return make_error(std::string(op) + ": the pools must be 2-D");
  const std::int64_t n_slots = k_pool.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(k_pool, op, "k_pool", {DType::f32, DType::bf16}, {n_slots, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v_pool, op, "v_pool", {k_pool.dtype()}, {n_slots, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(slots, op, "slots", {DType::i32}, {S}));
  return check_cuda_tensor(error_flag, op, "error_flag", {DType::i32}, {1});
}

Status kv_write_cuda(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool,
                     Tensor& error_flag, cudaStream_t stream) {
  const char* op = "kv_write_cuda";
  if (k.dim() != 2) return make_error(std::string(op) + ": k must be 2-D");
  const std::int64_t S = k.size(0), width = k.size(1);
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, op, "k", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, op, "v", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_kv_slot_writes(op, S, width, slots, k_pool, v_pool, error_flag));
  const std::int64_t n_slots = k_pool.size(0);
  if (S * width == 0) return Status::success();
  const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>((S * width + kThreads - 1) / kThreads, 65536));
  auto go = [&](auto* pool_type) {
    using KV = std::remove_pointer_t<decltype(pool_type)>;
    launch_dependent(kv_write_kernel<KV>, grid, kThreads, 0, stream, k.data<float>(), v.data<float>(),
                     slots.data<std::int32_t>(), S, width, n_slots, static_cast<KV*>(k_pool.raw()),
                     static_cast<KV*>(v_pool.raw()), error_flag.data<std::int32_t>());
  };
  with_kv_element(k_pool.dtype() == DType::bf16, go);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("kv_write_kernel");
  return Status::success();
}

}  // namespace day0
