// GQA-group decode attention: see the header for the scheme.
#include "ops/cuda/attention_group_cuda.h"

#include <cmath>
#include <string>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_group_tc_cuda.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"

namespace day0 {
namespace {

constexpr int kThreads = 128;
constexpr int kChunk = 128;  // keys per chunk: one per thread when scoring
constexpr int kG = kAttentionGroupHeads;
constexpr int kSlices = 16;                    // threads that share one value row in the accumulation
constexpr int kKeyLanes = kThreads / kSlices;  // keys accumulated side by side
static_assert(kG == 8 && kThreads == 4 * 32, "one warp per two heads in the softmax step");

template <int kD>
__global__ void __launch_bounds__(kThreads)
    attention_group_kernel(AttentionGroupArgs a, int n_heads, int window, float scale) {
  constexpr int kDims = kD / kSlices;  // value dims per thread: 4 or 8
  constexpr int kVec = kDims / 4;
  __shared__ __align__(16) float qs[kG][kD];
  __shared__ __align__(16) float ps[kChunk][kG];  // scores, then probabilities, by key
  __shared__ std::int64_t rows[kChunk];
  __shared__ float m_s[kG], l_s[kG], corr_s[kG];
  __shared__ __align__(16) float red[kKeyLanes][kG][kD];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int n_kv = n_heads / kG;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * kD, kv_width = static_cast<std::int64_t>(n_kv) * kD;
  const bool split = a.splits > 1;

  // The chain position -> sequence -> table -> first chunk's rows runs before the wait, while the kernel before
  // (RoPE + KV write) still runs. Keys and q come after it.
  const GroupQuery gq = group_query(a, n_heads, window);
  if (gq.idle) return;
  const std::int64_t s = gq.s;
  const int h0 = gq.h0;
  const std::int32_t* table = gq.table;
  const KeyLayout& L = a.layout;
  const bool bad = gq.bad;
  const KeySpan keys = gq.keys;
  const std::int64_t first_row = tid <= keys.hi - keys.lo ? key_row(table, L.block_size, keys.lo + tid) : 0;
  begin_dependent_grid();
  if (bad) return write_bad_query<kG>(a, s, n_heads, h0, kD);
  for (int i = tid; i < kG * kD; i += kThreads) qs[i / kD][i % kD] = a.q[s * q_width + h0 * kD + i];
  if (tid < kG) {
    // Without splits the sink starts the running max and adds exp(sink - m) = 1 to the sum; with them, the merge.
    const bool sink = a.sink_kind != kNoSink && !split;
    m_s[tid] = sink ? load_sink(a.sinks, a.sink_kind, h0 + tid) : -INFINITY;
    l_s[tid] = sink ? 1.f : 0.f;
  }
  const float* kbase = static_cast<const float*>(a.k) + static_cast<std::int64_t>(h0 / kG) * kD;
  const int slice = tid % kSlices, key_lane = tid / kSlices;
  const float* vbase = static_cast<const float*>(a.v) + static_cast<std::int64_t>(h0 / kG) * kD + slice * kDims;
  float acc[kG][kDims];
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int x = 0; x < kDims; ++x) acc[g][x] = 0.f;
  __syncthreads();  // qs, m_s, l_s ready

  for (int c0 = keys.lo; c0 <= keys.hi; c0 += kChunk) {
    const int n = min(kChunk, keys.hi - c0 + 1);
    // Scores: one key per thread, its row read whole, the 8 heads' dot products in the row's order.
    if (tid < n) {
      const std::int64_t row = c0 == keys.lo ? first_row : key_row(table, L.block_size, c0 + tid);
      rows[tid] = row;
      const float* kr = kbase + row * kv_width;
      float dot[kG];
#pragma unroll
      for (int g = 0; g < kG; ++g) dot[g] = 0.f;
#pragma unroll
      for (int i = 0; i < kD / 4; ++i) {
        const float4 kk = load_kv4(kr + 4 * i);
#pragma unroll
        for (int g = 0; g < kG; ++g) {
          const float4 qq = *reinterpret_cast<const float4*>(&qs[g][4 * i]);
          dot[g] += qq.x * kk.x;
          dot[g] += qq.y * kk.y;
          dot[g] += qq.z * kk.z;
          dot[g] += qq.w * kk.w;
        }
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) ps[tid][g] = dot[g] * scale;
    }
    __syncthreads();  // scores ready
                      // Softmax step: warp w folds heads 2w and 2w + 1 of the chunk into the running max and sum.
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int g = 2 * warp + hh;
      float mx = -INFINITY;
      for (int j = lane; j < n; j += 32) mx = fmaxf(mx, ps[j][g]);
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = m_s[g], m_new = fmaxf(m_old, mx);
      float sum = 0.f;
      for (int j = lane; j < n; j += 32) {
        const float p = expf(ps[j][g] - m_new);
        ps[j][g] = p;
        sum += p;
      }
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      // m_old is -inf only before anything was accumulated: nothing to rescale (and exp(-inf - -inf) is NaN).
      const float corr = m_old == -INFINITY ? 0.f : expf(m_old - m_new);
      __syncwarp();
      if (lane == 0) {
        m_s[g] = m_new;
        l_s[g] = l_s[g] * corr + sum;
        corr_s[g] = corr;
      }
    }
    __syncthreads();  // probabilities and corrections ready
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      const float c = corr_s[g];
#pragma unroll
      for (int x = 0; x < kDims; ++x) acc[g][x] *= c;
    }
    // Values: this thread's slice of rows key_lane, key_lane + 8, ... for all 8 heads.
#pragma unroll 8
    for (int j = key_lane; j < n; j += kKeyLanes) {
      const float* vr = vbase + rows[j] * kv_width;
      float4 vv[kVec];
#pragma unroll
      for (int u = 0; u < kVec; ++u) vv[u] = load_kv4(vr + 4 * u);
      const float4 p_lo = *reinterpret_cast<const float4*>(&ps[j][0]);
      const float4 p_hi = *reinterpret_cast<const float4*>(&ps[j][4]);
      const float p[kG] = {p_lo.x, p_lo.y, p_lo.z, p_lo.w, p_hi.x, p_hi.y, p_hi.z, p_hi.w};
#pragma unroll
      for (int g = 0; g < kG; ++g)
#pragma unroll
        for (int u = 0; u < kVec; ++u) {
          acc[g][4 * u + 0] += p[g] * vv[u].x;
          acc[g][4 * u + 1] += p[g] * vv[u].y;
          acc[g][4 * u + 2] += p[g] * vv[u].z;
          acc[g][4 * u + 3] += p[g] * vv[u].w;
        }
    }
    __syncthreads();  // ps and rows are rewritten by the next chunk
  }

  // The key lanes' sums, added in lane order (deterministic).
#pragma unroll
  for (int g = 0; g < kG; ++g)
#pragma unroll
    for (int x = 0; x < kDims; ++x) red[key_lane][g][slice * kDims + x] = acc[g][x];
  __syncthreads();
  for (int i = tid; i < kG * kD; i += kThreads) {
    const int g = i / kD, dim = i % kD;
    float sum = red[0][g][dim];
#pragma unroll
    for (int kl = 1; kl < kKeyLanes; ++kl) sum += red[kl][g][dim];
    if (split) {
      float* part = group_partial(a, s, n_heads, h0, g, kD);
      if (dim == 0) {
        part[0] = m_s[g];  // -inf: this split had no keys
        part[1] = l_s[g];
      }
      part[2 + dim] = sum;
    } else {
      store_group_out(a, s * q_width + static_cast<std::int64_t>(h0 + g) * kD + dim, sum / l_s[g]);
    }
  }
}

}  // namespace

bool attention_group_fits(const AttentionParams& p) {
  return p.n_kv_heads > 0 && p.n_heads == kAttentionGroupHeads * p.n_kv_heads &&
         (p.head_dim == 64 || p.head_dim == 128);
}

Status check_attention_group_args(const char* op, const AttentionGroupArgs& a, const AttentionParams& p) {
  if (!attention_group_fits(p))
    return make_error(std::string(op) + ": needs 8 query heads per KV head and head_dim 64 or 128, got " +
                      std::to_string(p.n_heads) + "/" + std::to_string(p.n_kv_heads) + " heads, head_dim " +
                      std::to_string(p.head_dim));
  if (!aligned_to(a.q, 16) || !aligned_to(a.k, 16) || !aligned_to(a.v, 16))
    return make_error(std::string(op) + ": q, k and v must be 16-byte aligned");
  if (a.splits < 1 || a.splits > 65535 || (a.splits > 1 && a.partials == nullptr))
    return make_error(std::string(op) + ": splits must be in [1, 65535], with partials when above 1");
  return Status::success();
}

Status attention_group_cuda(const AttentionGroupArgs& a, const AttentionParams& p, cudaStream_t stream) {
  if (a.kv_bf16) return attention_group_tc_cuda(a, p, stream);
  return launch_attention_group("attention_group_cuda", attention_group_kernel<64>, attention_group_kernel<128>,
                                kThreads, a, p, stream);
}

}  // namespace day0
