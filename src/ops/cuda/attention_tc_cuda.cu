// Tensor-core prefill attention: see the header for the scheme.
#include "ops/cuda/attention_tc_cuda.h"

#include <climits>
#include <string>
#include <type_traits>

#include "ops/cuda/attention_tc_math.cuh"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/wgmma.cuh"

namespace day0 {
namespace {

using namespace attention_tc_math;

// 8 warps (128 query rows) per CTA share each staged K/V tile, 2 CTAs per SM (128 registers; ptxas spills 12-16
// bytes in the f16-operand forms, none in the bf16 one). H200, 20b fp8-mode prefill of 4,096 tokens: 37.6k tok/s
// against 35.4-35.6k with 4 warps at 168 registers (3 CTAs per SM) and 36.6-36.8k with 4 warps capped at 128.
constexpr int kWarps = 8;
constexpr int kRows = 16 * kWarps;  // query rows per CTA
constexpr int kKeys = 64;           // keys per tile
constexpr int kStride = kD + 8;     // f16 operands: smem row stride in halves (144 bytes), conflict-free ldmatrix
constexpr int kThreads = 32 * kWarps;
constexpr int kStage = kKeys * kD / 4 / kThreads;  // float4s of K (and of V) each thread stages per tile
constexpr int kCopies = kKeys * kD / 8 / kThreads;  // bf16 operands: 16-byte copies of K (and of V) a thread a tile
// bf16 operands: each warpgroup's 64 Q rows in shared memory (128-byte swizzle), the A operand of its S = Q K^T
// MMAs, in dynamic shared memory (static is capped at 48 KB) with room to align it to 1,024 bytes. From registers
// instead, ptxas (CUDA 13.0) gave P's fragments Q's registers inside the loop (SASS), wrong from the second tile on.
constexpr int kQTileBytes = 64 * kD * 2;
// bf16 operands: K and V tiles (64 rows of 64 bf16 each, the same swizzle) in four buffers after the Q tiles: the
// copies run two tiles ahead of the tile whose softmax runs, K one tile ahead of V (FA3's order, below).
constexpr int kKvBuffers = 4;
constexpr int kKvTileBytes = kKeys * kD * 2;
constexpr int kKvBufferBytes = 2 * kKvTileBytes;  // K, then V
constexpr int kDynamicBytes = kWarps / 4 * kQTileBytes + kKvBuffers * kKvBufferBytes + 1024;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kMaxGrowth = 8.f;  // log2 units: softmax weights up to 256 (bf16 and f16 keep their precision)

// Two operand forms. f16 (kBf16 false): K and V staged through registers, each tile divided by its power of two,
// Q rows too (11 significant bits, TF32's). bf16 (kBf16, a bf16 KV pool): the pool's values are bf16 already, so
// K and V tiles are copied raw (cp.async into dynamic shared memory, two tiles ahead), Q and P round to bf16
// (8 significant bits, as a bf16 model's own attention), no scales.
template <class KV, bool kBf16>
__global__ void __launch_bounds__(kThreads, 2)
    attention_tc_kernel(AttentionTcArgs a, int n_heads, int group, int window, float scale) {
  static_assert(!kBf16 || std::is_same_v<KV, __nv_bfloat16>, "bf16 operands read a bf16 pool");
  // f16: the staged K and V tiles, padded rows (bf16: in dynamic shared memory, unused here).
  __shared__ __align__(16) std::uint16_t ks[kBf16 ? 1 : kKeys][kStride];
  __shared__ __align__(16) std::uint16_t vs[kBf16 ? 1 : kKeys][kStride];
  __shared__ int pos_s[kRows], seq_s[kRows], first_s[kRows];
  __shared__ int bad_s[kRows];
  __shared__ int seq_min, seq_max, lo_s, hi_s, any_s, first_bad_s;
  __shared__ int group_lo_s[kWarps / 4], group_hi_s[kWarps / 4];  // the keys a warpgroup's rows need (bf16)
  __shared__ unsigned tile_max[2][2];  // [tile parity][K, V]: largest magnitude, as f32 bits
  extern __shared__ unsigned char dynamic_unaligned[];  // bf16: the Q tiles, then the K / V buffers (kDynamicBytes)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kvh = h / group;
  // The last rows (the most keys under a causal mask) go first: a shorter tail.
  const int s0 = (gridDim.x - 1 - blockIdx.x) * kRows;
  const std::int64_t q_width = static_cast<std::int64_t>(n_heads) * kD;
  const std::int64_t kv_width = static_cast<std::int64_t>(n_heads / group) * kD;
  const KeyLayout& L = a.layout;

  if (tid == 0) seq_min = INT_MAX, seq_max = INT_MIN;
  if (tid < 2) tile_max[0][tid] = 0;
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

  // Q fragments of this warp's 16 rows as f16, each row divided by 2^eq (rows past S or bad: zeros, never written).
  const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
  std::uint32_t qf[kD / 16][4];
  int eq_lo, eq_hi;
  {
    const int row_lo = min(s0 + r_lo, a.S - 1), row_hi = min(s0 + r_hi, a.S - 1);
    const float* q_lo = a.q + static_cast<std::int64_t>(row_lo) * q_width + h * kD;
    const float* q_hi = a.q + static_cast<std::int64_t>(row_hi) * q_width + h * kD;
    float2 lo[kD / 16][2], hi[kD / 16][2];
    float m_lo = 0.f, m_hi = 0.f;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        lo[kk][u] = *reinterpret_cast<const float2*>(q_lo + 16 * kk + 8 * u + 2 * t);
        hi[kk][u] = *reinterpret_cast<const float2*>(q_hi + 16 * kk + 8 * u + 2 * t);
        m_lo = fmaxf(m_lo, fmaxf(fabsf(lo[kk][u].x), fabsf(lo[kk][u].y)));
        m_hi = fmaxf(m_hi, fmaxf(fabsf(hi[kk][u].x), fabsf(hi[kk][u].y)));
      }
    // bf16: q unrotated, rotated here (its table row clamped as q's); the maxima above serve the f16 form only.
    if constexpr (kBf16) {
      if (a.q_cos_sin) {
        const std::int64_t table_width = 2 * a.q_rotary_half;
        rotate_q_row(reinterpret_cast<float2(&)[kD / 8]>(lo), a.q_cos_sin + row_lo * table_width, t, a.q_rotary_half);
        rotate_q_row(reinterpret_cast<float2(&)[kD / 8]>(hi), a.q_cos_sin + row_hi * table_width, t, a.q_rotary_half);
      }
    }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
      m_lo = fmaxf(m_lo, __shfl_xor_sync(0xffffffffu, m_lo, off));
      m_hi = fmaxf(m_hi, __shfl_xor_sync(0xffffffffu, m_hi, off));
    }
    eq_lo = kBf16 ? 0 : block_exponent(m_lo), eq_hi = kBf16 ? 0 : block_exponent(m_hi);
    const float d_lo = pow2(-eq_lo), d_hi = pow2(-eq_hi);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      qf[kk][0] = operand_bits<kBf16>(lo[kk][0].x * d_lo, lo[kk][0].y * d_lo);
      qf[kk][1] = operand_bits<kBf16>(hi[kk][0].x * d_hi, hi[kk][0].y * d_hi);
      qf[kk][2] = operand_bits<kBf16>(lo[kk][1].x * d_lo, lo[kk][1].y * d_lo);
      qf[kk][3] = operand_bits<kBf16>(hi[kk][1].x * d_hi, hi[kk][1].y * d_hi);
    }
  }
  // bf16: the fragments into this warpgroup's Q tile (row g and g + 8 of the warp's 16, dims 16 kk + 8 u + 2 t at
  // 16-byte chunk 2 kk + u, swizzled), visible to the MMAs after the k-loop's first barrier.
  unsigned char* dynamic_base =
      dynamic_unaligned + (1024 - wgmma::shared_address(dynamic_unaligned) % 1024) % 1024;
  unsigned char* q_tile = dynamic_base + (warp / 4) * kQTileBytes;
  unsigned char* kv_tiles = dynamic_base + kWarps / 4 * kQTileBytes;
  if constexpr (kBf16) {
    const int rw_lo = (warp % 4) * 16 + g;
    auto q_at = [&](int row, int chunk) {
      return reinterpret_cast<std::uint32_t*>(q_tile + row * 128 + 16 * wgmma::swizzled_chunk(row, chunk) + 4 * t);
    };
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        *q_at(rw_lo, 2 * kk + u) = qf[kk][2 * u];
        *q_at(rw_lo + 8, 2 * kk + u) = qf[kk][2 * u + 1];
      }
    wgmma::fence_shared_for_mma();
  }
  float o[kD / 8][4];  // in units of 2^ev (the V scale of the last tile)
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;
  int ev = 0, parity = 0;
  // bf16 operands: this thread's copies of a tile, rows copy_row0 + n kCopyRowStep at 16-byte chunk copy_chunk: the
  // sources of row 0 and their buffer-0 destinations (swizzled), V's kKvTileBytes after K's.
  constexpr int kCopyRowStep = kThreads / (kD / 8);
  const int copy_row0 = tid / (kD / 8), copy_chunk = tid % (kD / 8);
  const int kv_row_bytes = static_cast<int>(kv_width * sizeof(KV));
  const char* k_src = reinterpret_cast<const char*>(static_cast<const KV*>(a.k) + kvh * kD + 8 * copy_chunk);
  const char* v_src = reinterpret_cast<const char*>(static_cast<const KV*>(a.v) + kvh * kD + 8 * copy_chunk);
  std::uint32_t k_dst[kCopies];
#pragma unroll
  for (int n = 0; n < kCopies; ++n) {
    const int r = copy_row0 + n * kCopyRowStep;
    k_dst[n] = wgmma::shared_address(kv_tiles + r * 128 + 16 * wgmma::swizzled_chunk(r, copy_chunk));
  }

  for (int seq = seq_min; seq <= seq_max; ++seq) {
    // This sequence's rows in the tile and the keys they need: [lo, hi].
    if (tid == 0) lo_s = INT_MAX, hi_s = -1, any_s = 0, first_bad_s = INT_MAX;
    if (tid < kWarps / 4) group_lo_s[tid] = INT_MAX, group_hi_s[tid] = -1;
    __syncthreads();
    if (tid < kRows && !bad_s[tid] && seq_s[tid] == seq && s0 + tid < a.S) {
      atomicMin(&lo_s, first_s[tid]);
      atomicMax(&hi_s, pos_s[tid]);
      atomicMin(&group_lo_s[tid / 64], first_s[tid]);
      atomicMax(&group_hi_s[tid / 64], pos_s[tid]);
      any_s = 1;
    }
    __syncthreads();
    if (!any_s) continue;  // uniform: read after the barrier by every thread
    const int lo = lo_s, hi = hi_s, group_lo = group_lo_s[warp / 4], group_hi = group_hi_s[warp / 4];
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
    const KeyRows key_rows(table, L.block_size);

    // Per-lane row facts for masking.
    const bool live_lo = !bad_s[r_lo] && seq_s[r_lo] == seq && s0 + r_lo < a.S;
    const bool live_hi = !bad_s[r_hi] && seq_s[r_hi] == seq && s0 + r_hi < a.S;
    const int pos_lo = pos_s[r_lo], pos_hi = pos_s[r_hi], first_lo = first_s[r_lo], first_hi = first_s[r_hi];

    // bf16 operands: the block-table entries of this thread's keys of tile k0 (-1 outside [lo, valid_to]), loaded a
    // tile before their copies and turned into rows only there, so the table's latency is behind a tile's work (used
    // at once, the load stalled the warp every tile: Nsight Compute); then the copies into buffer b, raw (zeros for
    // -1), one commit. 32-bit rows (T <= INT_MAX, the table checked above) and addresses kept from the set-up (the
    // 64-bit index arithmetic was a quarter of the loop's instructions).
    int key_entry[kCopies], entry_k0 = 0;
    auto tile_rows = [&](int k0) {
      entry_k0 = k0;
#pragma unroll
      for (int n = 0; n < kCopies; ++n) {
        const int key = k0 + copy_row0 + n * kCopyRowStep;
        key_entry[n] = key >= lo && key <= valid_to ? key_rows.entry(key) : -1;
      }
    };
    auto copy_tile = [&](int b) {
#pragma unroll
      for (int n = 0; n < kCopies; ++n) {
        const bool in = key_entry[n] >= 0;
        const unsigned row = in ? key_rows.row32(key_entry[n], entry_k0 + copy_row0 + n * kCopyRowStep) : 0u;
        const std::uint64_t off = static_cast<std::uint64_t>(row) * static_cast<unsigned>(kv_row_bytes);
        const std::uint32_t dst = k_dst[n] + b * kKvBufferBytes;
        wgmma::copy_16(dst, k_src + off, in ? 16u : 0u);
        wgmma::copy_16(dst + kKvTileBytes, v_src + off, in ? 16u : 0u);
      }
      wgmma::copy_commit();
    };
    // Softmax of one tile's scores for this lane's rows (k0 its first key; ek, ev_tile its f16 powers of two):
    // masks, the running maxima, the weights in place of the scores and their sums into l. Returns the factors O
    // must be multiplied by before this tile's P V (the softmax rescale and the V units' change), 1 where none.
    auto softmax_tile = [&](float (&sc)[kKeys / 8][4], int k0, int ek, int ev_tile, float& o_lo, float& o_hi) {
      // Scores in log2 units: the scale, the two powers of two the operands were divided by and log2(e) in one
      // factor, so each weight is one FFMA and one ex2 (the masked ones -inf, weight 0). The row maxima are taken
      // on the raw scores (the factor is positive) and kept in those units.
      // (bf16: no powers of two, so scale log2(e), the same bits as ldexpf(scale, 0) log2(e)).
      const float f_lo = kBf16 ? scale * kLog2e : ldexpf(scale, eq_lo + ek) * kLog2e;
      const float f_hi = kBf16 ? scale * kLog2e : ldexpf(scale, eq_hi + ek) * kLog2e;
      // Every key of the tile visible to every row of the warp: no per-key mask.
      const bool full = __all_sync(0xffffffffu, live_lo && live_hi && k0 >= max(first_lo, first_hi) &&
                                                     k0 + kKeys - 1 <= min(min(pos_lo, pos_hi), valid_to));
      float mx_lo = -INFINITY, mx_hi = -INFINITY;
      if (!full) {
        // Key k0 + 8 j + 2 t + (e & 1) is a row's where it lies in [first, min(pos, valid_to)]: as its offset
        // c = 8 j + (e & 1) from this lane's first key, where c is in [c_first, c_last] (c_first past the tile for a
        // row not live). Two compares with an immediate a score, where the keys' own bounds took three and an add.
        const int base = k0 + 2 * t;
        const int c_first_lo = live_lo ? first_lo - base : kKeys, c_last_lo = min(pos_lo, valid_to) - base;
        const int c_first_hi = live_hi ? first_hi - base : kKeys, c_last_hi = min(pos_hi, valid_to) - base;
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int c = 8 * j + (e & 1);
            const bool ok = e >= 2 ? c >= c_first_hi && c <= c_last_hi : c >= c_first_lo && c <= c_last_lo;
            if (!ok) sc[j][e] = -INFINITY;
          }
      }
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        mx_lo = fmaxf(mx_lo, fmaxf(sc[j][0], sc[j][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(sc[j][2], sc[j][3]));
      }
      // Row max across the 4 lanes of a row (t), then the online-softmax update.
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
        mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
      }
      // The running maximum moves only where a score passes it by more than 2^kMaxGrowth (FA3's threshold): the
      // weights stay below 2^kMaxGrowth and most tiles of a long prompt then leave O as it is (a factor of 1).
      const float top_lo = mx_lo * f_lo, top_hi = mx_hi * f_hi;
      const float new_lo = top_lo > m_lo + kMaxGrowth ? top_lo : m_lo;
      const float new_hi = top_hi > m_hi + kMaxGrowth ? top_hi : m_hi;
      // A row with nothing seen yet (max -inf) keeps zeros: no exp(-inf - -inf).
      const float keep_lo = new_lo == -INFINITY ? 1.f : exp2_approx(m_lo - new_lo);
      const float keep_hi = new_hi == -INFINITY ? 1.f : exp2_approx(m_hi - new_hi);
      m_lo = new_lo, m_hi = new_hi;
      // Against -inf (nothing seen) every score is -inf too: base 0 gives their weight 0.
      const float base_lo = m_lo == -INFINITY ? 0.f : m_lo, base_hi = m_hi == -INFINITY ? 0.f : m_hi;
      float sum_lo = 0.f, sum_hi = 0.f;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        sc[j][0] = exp2_approx(fmaf(sc[j][0], f_lo, -base_lo));
        sc[j][1] = exp2_approx(fmaf(sc[j][1], f_lo, -base_lo));
        sc[j][2] = exp2_approx(fmaf(sc[j][2], f_hi, -base_hi));
        sc[j][3] = exp2_approx(fmaf(sc[j][3], f_hi, -base_hi));
        sum_lo += sc[j][0] + sc[j][1];
        sum_hi += sc[j][2] + sc[j][3];
      }
      l_lo = l_lo * keep_lo + sum_lo;  // this lane's share; the row's lanes are added at the end
      l_hi = l_hi * keep_hi + sum_hi;
      // O moves to this tile's V units with the softmax rescale (a power of two more: still one rounding).
      const int shift = ev - ev_tile;
      o_lo = shift == 0 ? keep_lo : ldexpf(keep_lo, shift);
      o_hi = shift == 0 ? keep_hi : ldexpf(keep_hi, shift);
      ev = ev_tile;
    };
    // O times the tile's factors, skipped once the rows' maxima settle (most tiles of a long prompt: every factor
    // is 1, the same bits), then P's A fragments: the accumulators of key steps 2kk, 2kk + 1 are k-step kk's.
    auto rescale_and_pack = [&](const float (&sc)[kKeys / 8][4], float o_lo, float o_hi,
                                std::uint32_t (&pf)[kKeys / 16][4]) {
      if (!__all_sync(0xffffffffu, o_lo == 1.f && o_hi == 1.f)) {
#pragma unroll
        for (int i = 0; i < kD / 8; ++i) {
          o[i][0] *= o_lo, o[i][1] *= o_lo;
          o[i][2] *= o_hi, o[i][3] *= o_hi;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        pf[kk][0] = operand_bits<kBf16>(sc[2 * kk][0], sc[2 * kk][1]);
        pf[kk][1] = operand_bits<kBf16>(sc[2 * kk][2], sc[2 * kk][3]);
        pf[kk][2] = operand_bits<kBf16>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        pf[kk][3] = operand_bits<kBf16>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
      }
    };

    if constexpr (kBf16) {
      // FA3's order on each warpgroup: tile i + 1's S = Q K^T is issued with tile i's P V, and tile i + 1's
      // softmax runs while that P V is still in the tensor cores; so K runs a tile ahead of V, the copies two
      // tiles ahead, over four buffers. A warpgroup skips the softmax of a tile none of its rows sees (a sliding
      // window's first or last tile, the causal diagonal's last for the first rows). H200, 4,096-token full layer
      // (bench-moe): 491.9 us with one tile's S, softmax and P V in turn, 451.8 in this order with the threshold.
      // The bounds pass through a shuffle from lane 0 so that ptxas sees them warp-uniform: branches on values
      // read from shared memory made it serialise the MMAs (C7520).
      const int first_key = __shfl_sync(0xffffffffu, lo - lo % kKeys, 0);
      const int n_tiles = __shfl_sync(0xffffffffu, (hi - first_key) / kKeys + 1, 0);
      const int need_lo = __shfl_sync(0xffffffffu, group_lo, 0);
      const int need_hi = __shfl_sync(0xffffffffu, min(group_hi, valid_to), 0);
      const std::uint64_t q_desc = wgmma::sw128_descriptor(q_tile);
      float(&d)[32] = reinterpret_cast<float(&)[32]>(o);
      float sc[kKeys / 8][4];
      float(&s)[32] = reinterpret_cast<float(&)[32]>(sc);
      auto issue_scores = [&](int i) {  // S = Q K^T of tile i into sc: four k16 steps (the caller commits)
#pragma unroll
        for (int e = 0; e < 32; ++e) s[e] = 0.f;
        const std::uint64_t k_desc = wgmma::sw128_descriptor(kv_tiles + (i % kKvBuffers) * kKvBufferBytes);
        wgmma::fence_operands(s);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk) wgmma::mma_bf16<64>(s, q_desc + 2 * kk, k_desc + 2 * kk);
      };
      tile_rows(first_key);
      copy_tile(0);
      tile_rows(first_key + kKeys);
      if (n_tiles > 1) {
        copy_tile(1);
        tile_rows(first_key + 2 * kKeys);
        wgmma::copy_wait<1>();
      } else {
        wgmma::copy_wait<0>();
      }
      wgmma::fence_shared_for_mma();
      __syncthreads();  // tile 0 landed
      issue_scores(0);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operands(s);
      std::uint32_t pf[kKeys / 16][4];
      for (int i = 0; i < n_tiles; ++i) {
        const int k0 = first_key + i * kKeys;
        // Every thread's copies of tile i + 1 landed (its S goes out at the end of this tile), and buffer
        // (i + 2) % 4 is free: tile i - 2's MMAs were waited for by every warpgroup in tile i - 1.
        wgmma::copy_wait<0>();
        wgmma::fence_shared_for_mma();
        __syncthreads();
        if (i + 2 < n_tiles) {
          copy_tile((i + 2) % kKvBuffers);
          tile_rows(k0 + 3 * kKeys);
        }
        // The MMAs are issued on every path, with the waits: where ptxas cannot follow them through branches it
        // serialises every warpgroup MMA of the kernel (C7515, C7518). So a tile this warpgroup skips still runs
        // its P V on zero weights (adding zeros to O, as the masked keys of a tile it needs do), and the last
        // tile's S = Q K^T multiplies a stale buffer whose scores nothing reads.
        const bool need = k0 + kKeys - 1 >= need_lo && k0 <= need_hi;  // some row of the warpgroup sees a key
        float o_lo = 1.f, o_hi = 1.f;
        if (need) softmax_tile(sc, k0, 0, 0, o_lo, o_hi);
        wgmma::wait<0>();  // the tile before's P V: O and its P fragments are the MMAs' until it finishes
        wgmma::fence_operands(d);
        if (need) {
          rescale_and_pack(sc, o_lo, o_hi, pf);
        } else {  // zeros by volatile moves: a plain constant's moves were hoisted above the wait (C7513)
#pragma unroll
          for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
            for (int e = 0; e < 4; ++e) asm volatile("mov.b32 %0, 0;" : "=r"(pf[kk][e]));
        }
        const std::uint64_t v_desc =
            wgmma::sw128_n_major_descriptor(kv_tiles + (i % kKvBuffers) * kKvBufferBytes + kKvTileBytes);
        issue_scores(i + 1);  // reads K of tile i + 1; sc's weights are in pf already
        wgmma::commit();
        wgmma::fence_operands(d);
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk) wgmma::mma_bf16_rs64_n_major(d, pf[kk], v_desc + 128 * kk);
        wgmma::commit();
        wgmma::wait<1>();  // S of tile i + 1 (the older group) done; P V goes on under the next softmax
        wgmma::fence_operands(s);
      }
      wgmma::wait<0>();
      wgmma::fence_operands(d);
    } else {
      for (int k0 = lo - lo % kKeys; k0 <= hi; k0 += kKeys) {
        // Stage K and V rows k0..k0+63 (zeros outside [lo, valid_to]) as f16, each tensor divided by one power of
        // two per tile (its largest magnitude first: loads, then a block maximum).
        float4 kr[kStage], vr[kStage];
        float kmax = 0.f, vmax = 0.f;
#pragma unroll
        for (int n = 0; n < kStage; ++n) {
          const int r = tid / (kD / 4) + n * (kThreads / (kD / 4)), c4 = tid % (kD / 4), key = k0 + r;
          kr[n] = vr[n] = make_float4(0.f, 0.f, 0.f, 0.f);
          if (key >= lo && key <= valid_to) {
            const std::int64_t row = key_rows(key);
            kr[n] = load_kv4(static_cast<const KV*>(a.k) + row * kv_width + kvh * kD + 4 * c4);
            vr[n] = load_kv4(static_cast<const KV*>(a.v) + row * kv_width + kvh * kD + 4 * c4);
          }
          kmax = max_abs4(kmax, kr[n]);
          vmax = max_abs4(vmax, vr[n]);
        }
        const unsigned kmax_w = __reduce_max_sync(0xffffffffu, __float_as_uint(kmax));
        const unsigned vmax_w = __reduce_max_sync(0xffffffffu, __float_as_uint(vmax));
        __syncthreads();  // the previous tile is consumed
        if (lane == 0) {
          atomicMax(&tile_max[parity][0], kmax_w);
          atomicMax(&tile_max[parity][1], vmax_w);
        }
        if (tid < 2) tile_max[parity ^ 1][tid] = 0;  // for the next tile; this one's readers are past the barrier
        __syncthreads();
        const int ek = block_exponent(__uint_as_float(tile_max[parity][0]));
        const int ev_tile = block_exponent(__uint_as_float(tile_max[parity][1]));
        parity ^= 1;
        {
          const float dk = pow2(-ek), dv = pow2(-ev_tile);
#pragma unroll
          for (int n = 0; n < kStage; ++n) {
            const int r = tid / (kD / 4) + n * (kThreads / (kD / 4)), c4 = tid % (kD / 4);
            const uint2 kh = make_uint2(half2_bits(kr[n].x * dk, kr[n].y * dk), half2_bits(kr[n].z * dk, kr[n].w * dk));
            const uint2 vh = make_uint2(half2_bits(vr[n].x * dv, vr[n].y * dv), half2_bits(vr[n].z * dv, vr[n].w * dv));
            *reinterpret_cast<uint2*>(&ks[r][4 * c4]) = kh;
            *reinterpret_cast<uint2*>(&vs[r][4 * c4]) = vh;
          }
        }
        __syncthreads();
        // A warp none of whose rows is in this sequence skips the tile (its lanes agree: shuffles below need them
        // all); nor does one whose rows all see none of the tile's keys: such a tile would add weight 0 and rescale
        // by 1.
        if (!__any_sync(0xffffffffu, live_lo || live_hi)) continue;
        const bool none_lo = !live_lo || k0 + kKeys - 1 < first_lo || k0 > min(pos_lo, valid_to);
        const bool none_hi = !live_hi || k0 + kKeys - 1 < first_hi || k0 > min(pos_hi, valid_to);
        if (__all_sync(0xffffffffu, none_lo && none_hi)) continue;

        // Scores for 16 rows x 64 keys: sc[j] holds keys k0 + 8j + 2t, +1 of rows g (0, 1) and g + 8 (2, 3). Each
        // lane's ldmatrix rows from one base address per tile (constant offsets: immediates).
        constexpr unsigned kRowBytes = kStride * 2;
        float sc[kKeys / 8][4];
        const unsigned k_base = static_cast<unsigned>(__cvta_generic_to_shared(&ks[lane % 8][8 * (lane / 8)]));
#pragma unroll
        for (int j = 0; j < kKeys / 8; ++j) {
          sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
          for (int half = 0; half < 2; ++half) {  // dims 32 half .. 32 half + 31: two k-steps per ldmatrix
            std::uint32_t b[4];
            ldmatrix_x4_at(b, k_base + 8 * j * kRowBytes + 32 * half * 2);
            mma_16816<kBf16>(sc[j], qf[2 * half][0], qf[2 * half][1], qf[2 * half][2], qf[2 * half][3], b[0], b[1]);
            mma_16816<kBf16>(sc[j], qf[2 * half + 1][0], qf[2 * half + 1][1], qf[2 * half + 1][2],
                             qf[2 * half + 1][3], b[2], b[3]);
          }
        }
        float o_lo, o_hi;
        softmax_tile(sc, k0, ek, ev_tile, o_lo, o_hi);
        std::uint32_t pf[kKeys / 16][4];
        rescale_and_pack(sc, o_lo, o_hi, pf);
        // O += P V: V's B fragments by transposed ldmatrix, two dim tiles (16 dims) a load.
        const unsigned v_base = static_cast<unsigned>(
            __cvta_generic_to_shared(&vs[8 * ((lane / 8) & 1) + lane % 8][8 * (lane / 16)]));
#pragma unroll
        for (int kk = 0; kk < kKeys / 16; ++kk)
#pragma unroll
          for (int i2 = 0; i2 < kD / 16; ++i2) {
            std::uint32_t b[4];
            ldmatrix_x4_trans_at(b, v_base + 16 * kk * kRowBytes + 16 * i2 * 2);
            mma_16816<kBf16>(o[2 * i2], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[0], b[1]);
            mma_16816<kBf16>(o[2 * i2 + 1], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[2], b[3]);
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
    if (a.sink_kind != kNoSink) {  // in the running maxima's log2 units
      const float sink = load_sink(a.sinks, a.sink_kind, h) * kLog2e;
      M_lo = fmaxf(m_lo, sink), M_hi = fmaxf(m_hi, sink);
      L_lo = l_lo * (m_lo == -INFINITY ? 0.f : exp2_approx(m_lo - M_lo)) + exp2_approx(sink - M_lo);
      L_hi = l_hi * (m_hi == -INFINITY ? 0.f : exp2_approx(m_hi - M_hi)) + exp2_approx(sink - M_hi);
    }
    mul_lo = (m_lo == -INFINITY ? 0.f : exp2_approx(m_lo - M_lo)) / L_lo;
    mul_hi = (m_hi == -INFINITY ? 0.f : exp2_approx(m_hi - M_hi)) / L_hi;
    mul_lo = ldexpf(mul_lo, ev), mul_hi = ldexpf(mul_hi, ev);  // O back from the V units
  }
  const bool bad_lo = bad_s[r_lo] != 0, bad_hi = bad_s[r_hi] != 0;
  auto* out_bf16 = static_cast<__nv_bfloat162*>(a.out_bf16);
  auto store = [&](int r, float2 v, int col) {  // out, and its bf16 copy (convert_f32_to_bf16_cuda's rounding)
    const std::int64_t at = static_cast<std::int64_t>(s0 + r) * q_width + col;
    if (a.out) *reinterpret_cast<float2*>(a.out + at) = v;
    if (out_bf16) out_bf16[at / 2] = __floats2bfloat162_rn(v.x, v.y);
  };
#pragma unroll
  for (int i = 0; i < kD / 8; ++i) {
    const int col = h * kD + 8 * i + 2 * t;
    if (s0 + r_lo < a.S)
      store(r_lo, bad_lo ? make_float2(NAN, NAN) : make_float2(o[i][0] * mul_lo, o[i][1] * mul_lo), col);
    if (s0 + r_hi < a.S)
      store(r_hi, bad_hi ? make_float2(NAN, NAN) : make_float2(o[i][2] * mul_hi, o[i][3] * mul_hi), col);
  }
}

}  // namespace

Status attention_tc_cuda(const AttentionTcArgs& a, const AttentionParams& p, cudaStream_t stream) {
  if (!attention_tc_fits(a.S, p))
    return make_error("attention_tc_cuda: needs head_dim " + std::to_string(kAttentionTcHeadDim) + " and at least " +
                      std::to_string(kAttentionTcMinQueries) + " queries");
  if (!a.out && !a.out_bf16) return make_error("attention_tc_cuda: no output (out and out_bf16 both null)");
  if (a.q_cos_sin && !attention_tc_rotates_q(a.kv_bf16, a.bf16_operands, a.q_rotary_half))
    return make_error("attention_tc_cuda: q rotated in the kernel needs bf16 operands over a bf16 pool and a rotary "
                      "half of 8, 16, 24 or 32, got " + std::to_string(a.q_rotary_half));
  if (a.S == 0) return Status::success();
  const dim3 grid(static_cast<unsigned>((a.S + kRows - 1) / kRows), static_cast<unsigned>(p.n_heads));
  const int group = p.n_heads / p.n_kv_heads;
  if (a.kv_bf16 && a.bf16_operands) {
    // Once per process (a process drives one device): the Q tiles and K / V buffers are ~81 KB, past the 48 KB a
    // block gets without asking (two blocks an SM still fit).
    static const cudaError_t opted_in = cudaFuncSetAttribute(
        attention_tc_kernel<__nv_bfloat16, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDynamicBytes);
    D0_CUDA_RETURN_IF_ERROR(opted_in);
    attention_tc_kernel<__nv_bfloat16, true>
        <<<grid, kThreads, kDynamicBytes, stream>>>(a, p.n_heads, group, p.sliding_window, p.scale);
  } else if (a.kv_bf16) {
    attention_tc_kernel<__nv_bfloat16, false>
        <<<grid, kThreads, 0, stream>>>(a, p.n_heads, group, p.sliding_window, p.scale);
  } else {
    attention_tc_kernel<float, false><<<grid, kThreads, 0, stream>>>(a, p.n_heads, group, p.sliding_window, p.scale);
  }
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("attention_tc_kernel");
  return Status::success();
}

}  // namespace day0
