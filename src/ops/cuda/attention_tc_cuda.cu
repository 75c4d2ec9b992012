// Tensor-core prefill attention: see the header for the scheme.
#include "ops/cuda/attention_tc_cuda.h"

#include <climits>
#include <string>

#include "ops/cuda/cuda_status.h"
#include "ops/cuda/mma_sync.cuh"

namespace day0 {
namespace {

constexpr int kD = kAttentionTcHeadDim;
constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;  // query rows per CTA
constexpr int kKeys = 64;           // keys per tile
constexpr int kStride = kD + 4;     // smem row stride in floats: conflict-free fragment reads
constexpr int kThreads = 32 * kWarps;

__global__ void __launch_bounds__(kThreads)
    attention_tc_kernel(AttentionTcArgs a, int n_heads, int group, int window, float scale) {
  __shared__ __align__(16) float ks[kKeys][kStride];
  __shared__ __align__(16) float vs[kKeys][kStride];
  __shared__ int pos_s[kRows], seq_s[kRows], first_s[kRows];
  __shared__ int bad_s[kRows];
  __shared__ int seq_min, seq_max, lo_s, hi_s, any_s, first_bad_s;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kvh = h / group;
  const int s0 = blockIdx.x * kRows;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * kD;
  const std::int64_t kv_width = static_cast<std::int64_t>(n_heads / group) * kD;
  const KeyLayout& L = a.layout;

  if (tid == 0) seq_min = INT_MAX, seq_max = INT_MIN;
  __syncthreads();
  if (tid < kRows) {
    const int s = s0 + tid;
    int pos = -1, seq = 0, bad = 1;
    if (s < a.S) {
      pos = a.q_pos[s];
      seq = L.tables ? L.q_seq[s] : 0;
      bad = pos < 0 || (!L.tables && pos >= a.T) || (L.tables && pos / L.block_size >= L.max_blocks);
    }
    pos_s[tid] = pos, seq_s[tid] = seq, bad_s[tid] = bad;
    first_s[tid] = window > 0 ? max(0, pos - window + 1) : 0;
    if (s < a.S && !bad) {
      atomicMin(&seq_min, seq);
      atomicMax(&seq_max, seq);
    }
  }
  __syncthreads();

  // Q fragments of this warp's 16 rows (rows past S or bad: zeros, never written).
  const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
  std::uint32_t qf[kD / 8][4];
  {
    const float* q_lo = a.q + static_cast<std::int64_t>(min(s0 + r_lo, a.S - 1)) * q_width + h * kD;
    const float* q_hi = a.q + static_cast<std::int64_t>(min(s0 + r_hi, a.S - 1)) * q_width + h * kD;
#pragma unroll
    for (int kk = 0; kk < kD / 8; ++kk) {
      qf[kk][0] = tf32(q_lo[8 * kk + t]);
      qf[kk][1] = tf32(q_hi[8 * kk + t]);
      qf[kk][2] = tf32(q_lo[8 * kk + t + 4]);
      qf[kk][3] = tf32(q_hi[8 * kk + t + 4]);
    }
  }
  float o[kD / 8][4];
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;

  for (int seq = seq_min; seq <= seq_max; ++seq) {
    // This sequence's rows in the tile and the keys they need: [lo, hi].
    if (tid == 0) lo_s = INT_MAX, hi_s = -1, any_s = 0, first_bad_s = INT_MAX;
    __syncthreads();
    if (tid < kRows && !bad_s[tid] && seq_s[tid] == seq && s0 + tid < a.S) {
      atomicMin(&lo_s, first_s[tid]);
      atomicMax(&hi_s, pos_s[tid]);
      any_s = 1;
    }
    __syncthreads();
    if (!any_s) continue;  // uniform: read after the barrier by every thread
    const int lo = lo_s, hi = hi_s;
    const std::int32_t* table = L.tables ? L.tables + static_cast<std::int64_t>(seq) * L.max_blocks : nullptr;
    if (table) {  // a row whose blocks include a negative id or one past the pool gets NaN
      for (int b = tid; b <= hi / L.block_size; b += kThreads)
        if (table[b] < 0 || (static_cast<std::int64_t>(table[b]) + 1) * L.block_size > a.T) atomicMin(&first_bad_s, b);
      __syncthreads();
      if (tid < kRows && seq_s[tid] == seq && pos_s[tid] >= 0 && pos_s[tid] / L.block_size >= first_bad_s)
        bad_s[tid] = 1;
      __syncthreads();
    }
    // Keys with a readable row.
    const int valid_to = table && first_bad_s != INT_MAX ? min(hi, first_bad_s * L.block_size - 1) : hi;

    // Per-lane row facts for masking.
    const bool live_lo = !bad_s[r_lo] && seq_s[r_lo] == seq && s0 + r_lo < a.S;
    const bool live_hi = !bad_s[r_hi] && seq_s[r_hi] == seq && s0 + r_hi < a.S;
    const int pos_lo = pos_s[r_lo], pos_hi = pos_s[r_hi], first_lo = first_s[r_lo], first_hi = first_s[r_hi];

    for (int k0 = lo - lo % kKeys; k0 <= hi; k0 += kKeys) {
      __syncthreads();  // the previous tile is consumed
      // Stage K and V rows k0..k0+63 (zeros outside [lo, valid_to]) as TF32.
      for (int i = tid; i < kKeys * (kD / 4); i += kThreads) {
        const int r = i / (kD / 4), c4 = i % (kD / 4), key = k0 + r;
        float4 kv4 = make_float4(0.f, 0.f, 0.f, 0.f), vv4 = kv4;
        if (key >= lo && key <= valid_to) {
          const std::int64_t row = key_row(table, L.block_size, key);
          kv4 = *reinterpret_cast<const float4*>(a.k + row * kv_width + kvh * kD + 4 * c4);
          vv4 = *reinterpret_cast<const float4*>(a.v + row * kv_width + kvh * kD + 4 * c4);
        }
        float4 kt, vt;
        kt.x = __uint_as_float(tf32(kv4.x)), kt.y = __uint_as_float(tf32(kv4.y));
        kt.z = __uint_as_float(tf32(kv4.z)), kt.w = __uint_as_float(tf32(kv4.w));
        vt.x = __uint_as_float(tf32(vv4.x)), vt.y = __uint_as_float(tf32(vv4.y));
        vt.z = __uint_as_float(tf32(vv4.z)), vt.w = __uint_as_float(tf32(vv4.w));
        *reinterpret_cast<float4*>(&ks[r][4 * c4]) = kt;
        *reinterpret_cast<float4*>(&vs[r][4 * c4]) = vt;
      }
      __syncthreads();
      // A warp none of whose rows is in this sequence skips the tile (its lanes agree: shuffles below need them all).
      if (!__any_sync(0xffffffffu, live_lo || live_hi)) continue;

      // Scores for 16 rows x 64 keys: sc[j] holds keys k0 + 8j + 2t, +1 of rows g (0, 1) and g + 8 (2, 3).
      float sc[kKeys / 8][4];
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < kD / 8; ++kk) {
          const std::uint32_t b0 = __float_as_uint(ks[8 * j + g][8 * kk + t]);
          const std::uint32_t b1 = __float_as_uint(ks[8 * j + g][8 * kk + t + 4]);
          mma_tf32_1688(sc[j], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
        }
      }
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + 8 * j + 2 * t + (e & 1);
          const bool hi_row = e >= 2;
          const bool ok = hi_row ? live_hi && key >= first_hi && key <= pos_hi && key <= valid_to
                                 : live_lo && key >= first_lo && key <= pos_lo && key <= valid_to;
          const float v = ok ? sc[j][e] * scale : -INFINITY;
          sc[j][e] = v;
          if (hi_row)
            mx_hi = fmaxf(mx_hi, v);
          else
            mx_lo = fmaxf(mx_lo, v);
        }
      // Row max across the 4 lanes of a row (t), then the online-softmax update.
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
      }
      const float new_lo = fmaxf(m_lo, mx_lo), new_hi = fmaxf(m_hi, mx_hi);
      // A row with nothing seen yet (max -inf) keeps zeros: no exp(-inf - -inf).
      const float keep_lo = new_lo == -INFINITY ? 1.f : expf(m_lo - new_lo);
      const float keep_hi = new_hi == -INFINITY ? 1.f : expf(m_hi - new_hi);
      m_lo = new_lo, m_hi = new_hi;
      float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        sc[j][0] = sc[j][0] == -INFINITY ? 0.f : expf(sc[j][0] - m_lo);
        sc[j][1] = sc[j][1] == -INFINITY ? 0.f : expf(sc[j][1] - m_lo);
        sc[j][2] = sc[j][2] == -INFINITY ? 0.f : expf(sc[j][2] - m_hi);
        sc[j][3] = sc[j][3] == -INFINITY ? 0.f : expf(sc[j][3] - m_hi);
        sum_lo += sc[j][0] + sc[j][1];
        sum_hi += sc[j][2] + sc[j][3];
      }
      l_lo = l_lo * keep_lo + sum_lo;  // this lane's share; the row's lanes are added at the end
      l_hi = l_hi * keep_hi + sum_hi;
#pragma unroll
      for (int i = 0; i < kD / 8; ++i) {
        o[i][0] *= keep_lo, o[i][1] *= keep_lo;
        o[i][2] *= keep_hi, o[i][3] *= keep_hi;
      }
      // O += P V: P's accumulators are the A fragment under the key renaming (logical t = key 2t, t + 4 = 2t + 1).
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        const std::uint32_t p0 = tf32(sc[j][0]), p1 = tf32(sc[j][2]), p2 = tf32(sc[j][1]), p3 = tf32(sc[j][3]);
#pragma unroll
        for (int i = 0; i < kD / 8; ++i) {
          const std::uint32_t b0 = __float_as_uint(vs[8 * j + 2 * t][8 * i + g]);
          const std::uint32_t b1 = __float_as_uint(vs[8 * j + 2 * t + 1][8 * i + g]);
          mma_tf32_1688(o[i], p0, p1, p2, p3, b0, b1);
        }
      }
    }
  }

  // Finish: the row's lanes' sums, the sink, the division; bad rows are NaN.
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, off);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, off);
  }
  float mul_lo, mul_hi;
  {
    float M_lo = m_lo, M_hi = m_hi, L_lo = l_lo, L_hi = l_hi;
    if (a.sink_kind != kNoSink) {
      const float sink = load_sink(a.sinks, a.sink_kind, h);
      M_lo = fmaxf(m_lo, sink), M_hi = fmaxf(m_hi, sink);
      L_lo = l_lo * (m_lo == -INFINITY ? 0.f : expf(m_lo - M_lo)) + expf(sink - M_lo);
      L_hi = l_hi * (m_hi == -INFINITY ? 0.f : expf(m_hi - M_hi)) + expf(sink - M_hi);
    }
    mul_lo = (m_lo == -INFINITY ? 0.f : expf(m_lo - M_lo)) / L_lo;
    mul_hi = (m_hi == -INFINITY ? 0.f : expf(m_hi - M_hi)) / L_hi;
  }
  const bool bad_lo = bad_s[r_lo] != 0, bad_hi = bad_s[r_hi] != 0;
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) {
    const int col = h * kD + 8 * i + 2 * t;
    if (s0 + r_lo < a.S) {
      float2 v = bad_lo ? make_float2(NAN, NAN) : make_float2(o[i][0] * mul_lo, o[i][1] * mul_lo);
      *reinterpret_cast<float2*>(a.out + static_cast<std::int64_t>(s0 + r_lo) * q_width + col) = v;
    }
    if (s0 + r_hi < a.S) {
      float2 v = bad_hi ? make_float2(NAN, NAN) : make_float2(o[i][2] * mul_hi, o[i][3] * mul_hi);
      *reinterpret_cast<float2*>(a.out + static_cast<std::int64_t>(s0 + r_hi) * q_width + col) = v;
    }
  }
}

}  // namespace

Status attention_tc_cuda(const AttentionTcArgs& a, const AttentionParams& p, cudaStream_t stream) {
  if (!attention_tc_fits(a.S, p))
    return make_error("attention_tc_cuda: needs head_dim " + std::to_string(kAttentionTcHeadDim) + " and at least " +
                      std::to_string(kAttentionTcMinQueries) + " queries");
  if (a.S == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>((a.S + kRows - 1) / kRows), static_cast<unsigned>(p.n_heads));
  attention_tc_kernel<<<grid, kThreads, 0, stream>>>(a, p.n_heads, p.n_heads / p.n_kv_heads, p.sliding_window, p.scale);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_tc_kernel");
  return Status::success();
}

}  // namespace day0
