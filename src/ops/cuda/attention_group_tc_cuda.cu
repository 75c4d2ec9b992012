// GQA-group decode attention on tensor cores: see the header for the scheme.
#include "ops/cuda/attention_group_tc_cuda.h"

#include <cuda_bf16.h>

#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/mma_sync.cuh"

namespace day0 {
namespace {

// Warps a block: 8 for a lone query (a 128-key split or sliding window is then one step a warp: no second round trip
// to memory; H200, 20b batch 1: sliding layers 6.6 -> 6.0 us exposed, full ones 8.7 -> 7.5 with the early keys
// below), 4 for batches (8 showed no gain there: batch 8 2,156 and batch 64 7,480 tok/s, against 2,152-2,178 and
// 7,490-7,640 in runs with 4).
constexpr int kLoneQueryWarps = 8, kBatchWarps = 4;
constexpr int kStepKeys = 16;  // keys of a warp step: two n-tiles of Q K^T, one k-step of P V
constexpr int kG = kAttentionGroupHeads;
static_assert(kG == 8, "a group's 8 heads fill half of an m16n8k16 M; the other half holds their remainders");

// x as a bf16 high part and the remainder (x - hi is exact in f32; the MMA operand rounds it to bf16):
// hi + bf16(lo) carries ~16 significant bits.
struct Bf16Parts {
  float hi, lo;
};
__device__ __forceinline__ Bf16Parts split_bf16(float x) {
  const float hi = __bfloat162float(__float2bfloat16_rn(x));
  return {hi, x - hi};
}

__device__ __forceinline__ std::uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <int kD, int kWarps>
__global__ void __launch_bounds__(32 * kWarps)
    attention_group_tc_kernel(AttentionGroupArgs a, int n_heads, int window, float scale) {
  constexpr int kThreads = 32 * kWarps;
  constexpr int kSteps = kD / 16;          // k-steps of Q K^T
  constexpr int kLaneDims = kD / 4;        // lane t scores dims kLaneDims t .. + kLaneDims - 1 of each key
  constexpr int kKeyVecs = kLaneDims / 8;  // its 16-byte loads per key row
  constexpr int kValVecs = kD / 64;        // 16-byte loads per value row: dims 64 u + 8 g .. + 7
  constexpr int kDimTiles = kD / 8;        // n-tiles of P V: tile 8 u + j, column n is dim 64 u + 8 n + j
  __shared__ float m_s[kWarps][kG], l_s[kWarps][kG], weight_s[kWarps][kG], sum_s[kG];
  __shared__ __align__(16) float o_s[kWarps][kG][kD];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int n_kv = n_heads / kG;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * kD, kv_width = static_cast<std::int64_t>(n_kv) * kD;
  const bool split = a.splits > 1;

  // The first step's rows are found before the wait, while the kernel before (RoPE + KV write) still runs. Keys,
  // values and q come after it.
  const GroupQuery gq = group_query(a, n_heads, window);
  if (gq.idle) return;
  const std::int64_t s = gq.s;
  const int h0 = gq.h0;
  const std::int32_t* table = gq.table;
  const KeyLayout& L = a.layout;
  const bool bad = gq.bad;
  const KeySpan keys = gq.keys;
  // Rows of this lane's keys in a step from `base`: key rows base + g and base + 8 + g (the Q K^T n-tiles' column
  // g), value rows base + 2t, + 1, + 8, + 9 (the P V k-step's rows 2t, 2t + 1, 2t + 8, 2t + 9); -1 past the span.
  int krow[2], vrow[4];
  // A step's 16 keys lie in at most two blocks where a block holds 16 or more: one division and two table reads
  // (the second only where a key in the span crosses into it) instead of a division and a read per key.
  auto find_rows = [&](int base) {
    int first = 0, next_key = INT_MAX, second = 0;  // row of key base; first key of the next block, its row
    const bool two_blocks = table && L.block_size >= kStepKeys;
    if (two_blocks && base <= keys.hi) {  // the blocks up to keys.hi were checked (query_is_bad); none past
      const int blk = base / L.block_size, off = base - blk * L.block_size;
      first = table[blk] * L.block_size + off;
      next_key = base - off + L.block_size;
      if (min(base + kStepKeys - 1, keys.hi) >= next_key) second = table[blk + 1] * L.block_size;
    }
    auto row = [&](int key) {
      if (key > keys.hi) return -1;
      if (!two_blocks) return static_cast<int>(key_row(table, L.block_size, key));
      return key < next_key ? first + (key - base) : second + (key - next_key);
    };
    krow[0] = row(base + g);
    krow[1] = row(base + 8 + g);
    vrow[0] = row(base + 2 * t);
    vrow[1] = row(base + 2 * t + 1);
    vrow[2] = row(base + 2 * t + 8);
    vrow[3] = row(base + 2 * t + 9);
  };
  int base = keys.lo + kStepKeys * warp;
  find_rows(base);
  const __nv_bfloat16* kbase = static_cast<const __nv_bfloat16*>(a.k) + (h0 / kG) * kD + kLaneDims * t;
  const __nv_bfloat16* vbase = static_cast<const __nv_bfloat16*>(a.v) + (h0 / kG) * kD + 8 * g;
  // A step's rows into registers (zeros past the span), those whose key `take` accepts; `settled` keys (written two
  // or more launches back) through the non-coherent path, the others with coherent loads (__ldca, dependent_launch.h).
  uint4 kv[2][kKeyVecs], vv[4][kValVecs];
  auto load_step = [&](auto take, auto settled) {
    const auto load = [](const uint4* p) {
      if constexpr (decltype(settled)::value)
        return __ldg(p);
      else
        return __ldca(p);
    };
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int u = 0; u < kKeyVecs; ++u)
        if (krow[nt] >= 0 && take(base + 8 * nt + g))
          kv[nt][u] = load(reinterpret_cast<const uint4*>(kbase + krow[nt] * kv_width) + u);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int u = 0; u < kValVecs; ++u)
        if (vrow[r] >= 0 && take(base + 2 * t + (r % 2) + 8 * (r / 2)))
          vv[r][u] = load(reinterpret_cast<const uint4*>(vbase + vrow[r] * kv_width + 64 * u));
  };
  auto clear_step = [&] {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int u = 0; u < kKeyVecs; ++u) kv[nt][u] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int u = 0; u < kValVecs; ++u) vv[r][u] = make_uint4(0, 0, 0, 0);
  };
  // A lone query's keys before its own position were written two or more launches back (earlier steps; the kernel
  // just before, RoPE + KV write, wrote only key `pos`): the first step reads them before the dependent-launch wait,
  // overlapping that kernel. Batches read every key after it (batch 8 measured ~1% slower with early keys).
  const int first_new = a.S == 1 ? gq.pos : 0;
  clear_step();
  load_step([&](int key) { return key < first_new; }, std::true_type{});
  begin_dependent_grid();
  if (bad) return write_bad_query<kG>(a, s, n_heads, h0, kD);
  load_step([&](int key) { return key >= first_new; }, std::false_type{});

  // A fragments of q: lane (g, t) holds head h0 + g's dims kLaneDims t .. in k-step order (k-step j: dims 4j ..
  // 4j + 3 of the lane's range), the high parts in rows g and the remainders in rows g + 8.
  std::uint32_t qa[kSteps][4];
  {
    const float* qrow = a.q + s * q_width + static_cast<std::int64_t>(h0 + g) * kD + kLaneDims * t;
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      const float4 v = *reinterpret_cast<const float4*>(qrow + 4 * j);
      const Bf16Parts x = split_bf16(v.x), y = split_bf16(v.y), z = split_bf16(v.z), w = split_bf16(v.w);
      qa[j][0] = pack_bf16x2(x.hi, y.hi);
      qa[j][1] = pack_bf16x2(x.lo, y.lo);
      qa[j][2] = pack_bf16x2(z.hi, w.hi);
      qa[j][3] = pack_bf16x2(z.lo, w.lo);
    }
  }

  float o[kDimTiles][4];  // rows g: P's high parts times V, rows g + 8: its remainders times V (head g both)
#pragma unroll
  for (int i = 0; i < kDimTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m = -INFINITY, l = 0.f;  // head g's running max, and this lane's share of its sum
  for (bool loaded = true; base <= keys.hi; base += kStepKeys * kWarps, loaded = false) {
    if (!loaded) {
      clear_step();
      load_step([](int) { return true; }, std::false_type{});
    }
    find_rows(base + kStepKeys * kWarps);  // the next step's, while the loads are in flight

    // Scores: column n of n-tile nt is key base + 8 nt + n; rows g and g + 8 sum to head g's dot product.
    float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        const uint4& w = kv[nt][j / 2];
        mma_bf16_16816(sc[nt], qa[j][0], qa[j][1], qa[j][2], qa[j][3], j % 2 ? w.z : w.x, j % 2 ? w.w : w.y);
      }
    float sv[4];  // head g at keys base + 2t, + 1, + 8, + 9
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int key = base + 8 * nt + 2 * t + i;
        sv[2 * nt + i] = key <= keys.hi ? (sc[nt][i] + sc[nt][2 + i]) * scale : -INFINITY;
      }
    // Online softmax over the step's 16 keys (the 4 lanes of a head hold 4 each). Key `base` is in the span, so
    // the new max is finite.
    float mx = fmaxf(fmaxf(sv[0], sv[1]), fmaxf(sv[2], sv[3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m, mx);
    const float corr = m == -INFINITY ? 0.f : expf(m - m_new);
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = expf(sv[i] - m_new);
    l = l * corr + ((p[0] + p[1]) + (p[2] + p[3]));
    m = m_new;
#pragma unroll
    for (int i = 0; i < kDimTiles; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[i][c] *= corr;

    // P V: A is P (rows g high parts, g + 8 remainders; k 2t, 2t + 1 = keys base + 2t, + 1, k 2t + 8, 2t + 9 =
    // keys base + 2t + 8, + 9), B is V with the same keys, two rows' halves byte-permuted into each register.
    const Bf16Parts p0 = split_bf16(p[0]), p1 = split_bf16(p[1]), p2 = split_bf16(p[2]), p3 = split_bf16(p[3]);
    const std::uint32_t a0 = pack_bf16x2(p0.hi, p1.hi), a1 = pack_bf16x2(p0.lo, p1.lo);
    const std::uint32_t a2 = pack_bf16x2(p2.hi, p3.hi), a3 = pack_bf16x2(p2.lo, p3.lo);
#pragma unroll
    for (int u = 0; u < kValVecs; ++u)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const unsigned sel = j % 2 ? 0x7632u : 0x5410u;  // dim 8g + j: the low or high halves
        const std::uint32_t b0 = __byte_perm(word(vv[0][u], j / 2), word(vv[1][u], j / 2), sel);
        const std::uint32_t b1 = __byte_perm(word(vv[2][u], j / 2), word(vv[3][u], j / 2), sel);
        mma_bf16_16816(o[8 * u + j], a0, a1, a2, a3, b0, b1);
      }
  }

  // The warps' states, merged in warp order (deterministic): M = max(sink, m_w), weights exp(m_w - M).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (t == 0) {
    m_s[warp][g] = m;
    l_s[warp][g] = l;
  }
#pragma unroll
  for (int u = 0; u < kValVecs; ++u)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float* c = o[8 * u + j];
      o_s[warp][g][64 * u + 16 * t + j] = c[0] + c[2];  // column 2t: dim 64 u + 16 t + j
      o_s[warp][g][64 * u + 16 * t + 8 + j] = c[1] + c[3];
    }
  __syncthreads();
  const bool sink = a.sink_kind != kNoSink && !split;  // with splits, the merge adds the sink
  if (tid < kG) {
    const float sink_logit = sink ? load_sink(a.sinks, a.sink_kind, h0 + tid) : -INFINITY;
    float M = sink_logit;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, m_s[w][tid]);
    float sum = sink ? expf(sink_logit - M) : 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      // A warp without keys has m = -inf; M = -inf: this split had no keys (written as such for the merge).
      const float e = m_s[w][tid] == -INFINITY ? 0.f : expf(m_s[w][tid] - M);
      weight_s[w][tid] = e;
      sum += e * l_s[w][tid];
    }
    sum_s[tid] = sum;
    m_s[0][tid] = M;
  }
  __syncthreads();
  for (int i = tid; i < kG * kD; i += kThreads) {
    const int hg = i / kD, dim = i % kD;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += weight_s[w][hg] * o_s[w][hg][dim];
    if (split) {
      float* part = group_partial(a, s, n_heads, h0, hg, kD);
      if (dim == 0) {
        part[0] = m_s[0][hg];
        part[1] = sum_s[hg];
      }
      part[2 + dim] = acc;
    } else {
      store_group_out(a, s * q_width + static_cast<std::int64_t>(h0 + hg) * kD + dim, acc / sum_s[hg]);
    }
  }
}

}  // namespace

Status attention_group_tc_cuda(const AttentionGroupArgs& a, const AttentionParams& p, cudaStream_t stream) {
  const char* op = "attention_group_tc_cuda";
  if (!a.kv_bf16) return make_error(std::string(op) + ": reads bf16 K/V, got f32 (attention_group_cuda takes them)");
  // Fixed-length splits (batch-invariant mode) keep one block shape for every batch: a different warp count is a
  // different sum.
  if (a.S == 1 && a.keys_per_split == 0)
    return launch_attention_group(op, attention_group_tc_kernel<64, kLoneQueryWarps>,
                                  attention_group_tc_kernel<128, kLoneQueryWarps>, 32 * kLoneQueryWarps, a, p, stream);
  return launch_attention_group(op, attention_group_tc_kernel<64, kBatchWarps>,
                                attention_group_tc_kernel<128, kBatchWarps>, 32 * kBatchWarps, a, p, stream);
}

}  // namespace day0
