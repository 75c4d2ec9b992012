// token_cutoff (ops/token_cutoff.h) on the device, bit for bit, by the cluster of 8 CTAs that draws a row
// (draw_tokens_cuda.cu, its only user, shares the shape below). The same radix descent: 8 bits of the key a pass,
// each pass a histogram of the candidates' counts and measures (1 for top-k, top_p_mass for top-p) over the digit,
// then the ties at the cutoff key in id order. The measures are integers, so the CTAs and warps add them in any
// order and agree with the host.
// - A pass: every CTA histograms its strided share of the row into its own shared memory (a warp's lanes that hold
//   the same digit add theirs first, __match_any_sync + __reduce_add_sync, then one shared atomic: the top digits
//   of a row's keys are few and shared); cluster.sync; then warp 0 of every CTA reads the 8 histograms through
//   distributed shared memory and picks the digit as the host does, each CTA the same. Two histogram buffers in
//   turn: the next pass's zeroing cannot meet a slower CTA still reading the last one (a cluster.sync lies between).
// - A digit held by one candidate ends the descent early: that candidate is the cutoff, whatever the host's later
//   passes would add.
// - The ties: each 2,048-id block's tie count and measure into the first CTA (cluster.sync), then warp 0 of every
//   CTA finds the crossing block and, in it, the crossing id, lanes scanning in id order.
#pragma once

#include <cooperative_groups.h>

#include <climits>
#include <cstdint>

#include "ops/cuda/exp_nonpositive_cuda.cuh"
#include "ops/token_cutoff.h"
#include "ops/token_draw.h"

namespace day0 {
namespace draw_cluster {

inline constexpr int kClusterBlocks = 8;  // the portable cluster size
inline constexpr int kThreads = 1024, kWarps = kThreads / 32;
inline constexpr int kMaxBlocks = 512;  // 2,048-id blocks: vocabularies up to 1,048,576 ids

struct CutoffShared {
  unsigned long long measure[2][256];
  unsigned count[2][256];
  unsigned long long tie_measure[kMaxBlocks];  // the first CTA's: each block's ties
  unsigned tie_count[kMaxBlocks];
  unsigned prefix, chosen_count;  // a pass's result, from warp 0 to its CTA
  unsigned long long above, target;
  TokenCutoff found;
};

namespace cg = cooperative_groups;

__device__ __forceinline__ int rank_of(const cg::cluster_group& cluster) {
  return static_cast<int>(cluster.block_rank());
}

struct CutoffRow {
  const float* x;
  int V;
  float max_logit, inv_t;
  TokenCutoff within;
  bool by_mass;  // top-p's masses, else top-k's counts
  __device__ __forceinline__ unsigned long long measure(float xi) const {
    if (!by_mass) return 1;
    return __float2ull_rn(__fmul_rn(row_weight_device(xi, max_logit, inv_t), 1099511627776.f));  // top_p_mass
  }
};

// Sums of 32 measures of at most 2^40 (+1), in two 32-bit halves no warp sum overflows.
__device__ __forceinline__ unsigned long long add_in_group(unsigned group, unsigned long long m) {
  const unsigned lo = __reduce_add_sync(group, static_cast<unsigned>(m & 0x1FFFFFu));
  const unsigned hi = __reduce_add_sync(group, static_cast<unsigned>(m >> 21));
  return static_cast<unsigned long long>(lo) + (static_cast<unsigned long long>(hi) << 21);
}

// Warp 0: the digit of this pass as the host picks it (the highest with candidates whose measure, with everything
// above it, reaches the target; else the lowest with candidates), from the cluster's histograms in `buf`.
__device__ inline void pick_digit(const cg::cluster_group& cluster, CutoffShared& s, int buf, int shift, bool first,
                                  const CutoffRow& row, const TokenDraw& d) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  unsigned long long m[8], lane_measure = 0;
  unsigned c[8];
  for (int j = 0; j < 8; ++j) {
    m[j] = 0;
    c[j] = 0;
  }
  for (int r = 0; r < kClusterBlocks; ++r) {
    const CutoffShared* remote = cluster.map_shared_rank(&s, r);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      m[j] += remote->measure[buf][8 * lane + j];
      c[j] += remote->count[buf][8 * lane + j];
    }
  }
  for (int j = 0; j < 8; ++j) lane_measure += m[j];
  unsigned long long suffix = lane_measure;  // this lane's and every higher lane's (higher digits)
  for (int off = 1; off < 32; off *= 2) {
    const unsigned long long t = __shfl_down_sync(0xffffffffu, suffix, off);
    if (lane + off < 32) suffix += t;
  }
  const unsigned long long total = __shfl_sync(0xffffffffu, suffix, 0);
  const unsigned long long target =
      !first ? s.target
      : row.by_mass ? static_cast<unsigned long long>(static_cast<double>(total) * d.top_p)
                          : static_cast<unsigned long long>(d.top_k);
  const unsigned long long above = first ? 0ull : s.above;
  int best = -1, lowest = -1;
  unsigned long long best_above = 0, run = above + (suffix - lane_measure);
  unsigned best_count = 0, lowest_count = 0;
  for (int j = 7; j >= 0; --j) {
    if (c[j] > 0 && best < 0 && run + m[j] >= target) {
      best = 8 * lane + j;
      best_above = run;
      best_count = c[j];
    }
    run += m[j];
  }
  for (int j = 7; j >= 0; --j)
    if (c[j] > 0) {
      lowest = 8 * lane + j;
      lowest_count = c[j];
    }
  unsigned chosen, count;
  unsigned long long new_above;
  if (const unsigned hits = __ballot_sync(0xffffffffu, best >= 0); hits != 0) {
    const int src = 31 - __clz(static_cast<int>(hits));
    chosen = static_cast<unsigned>(__shfl_sync(0xffffffffu, best, src));
    count = __shfl_sync(0xffffffffu, best_count, src);
    new_above = __shfl_sync(0xffffffffu, best_above, src);
  } else {  // the host's fall-through: the lowest digit with candidates, everything counted above
    const unsigned any = __ballot_sync(0xffffffffu, lowest >= 0);
    const int src = any != 0 ? __ffs(static_cast<int>(any)) - 1 : 0;
    chosen = static_cast<unsigned>(max(__shfl_sync(0xffffffffu, lowest, src), 0));
    count = __shfl_sync(0xffffffffu, lowest_count, src);  // 0: no candidate at all
    new_above = above + total;
  }
  if (lane == 0) {
    s.prefix = (first ? 0u : s.prefix) | (chosen << shift);
    s.chosen_count = count;
    s.above = new_above;
    s.target = target;
  }
}

// Whether id i (key `key`) is a candidate: kept by `within`, its key's bits from `shift` up those of `prefix`.
__device__ __forceinline__ bool candidate(const CutoffRow& row, unsigned key, int i, unsigned prefix, int shift) {
  return cutoff_keeps(row.within, key, i) && (shift >= 32 || (key >> shift) == (prefix >> shift));
}

// Warp 0: the first candidate (of `prefix` from `shift` up) in id order whose running measure, from `above`,
// reaches the target; the last candidate if none does (the host's fall-through).
__device__ inline TokenCutoff find_tie(const cg::cluster_group& cluster, CutoffShared& s, const CutoffRow& row,
                                       unsigned prefix, int shift) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int blocks = (row.V + kDrawBlock - 1) / kDrawBlock;
  if (rank_of(cluster) != 0) {  // a copy of the first CTA's block ties, read twice below
    const CutoffShared* first_cta = cluster.map_shared_rank(&s, 0);
    for (int b = lane; b < blocks; b += 32) {
      s.tie_measure[b] = first_cta->tie_measure[b];
      s.tie_count[b] = first_cta->tie_count[b];
    }
    __syncwarp();
  }
  constexpr int kBlocksPerLane = kMaxBlocks / 32;
  const int lane_begin = kBlocksPerLane * lane, lane_end = min(lane_begin + kBlocksPerLane, blocks);
  unsigned long long lane_measure = 0;
  for (int b = lane_begin; b < lane_end; ++b) lane_measure += s.tie_measure[b];
  unsigned long long prefix_measure = lane_measure;  // this lane's and every lower lane's (lower ids)
  for (int off = 1; off < 32; off *= 2) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, prefix_measure, off);
    if (lane >= off) prefix_measure += t;
  }
  const unsigned long long target = s.target;
  unsigned long long run = s.above + (prefix_measure - lane_measure), crossing_above = 0;
  int crossing = -1, last = -1;
  for (int b = lane_begin; b < lane_end; ++b) {
    const unsigned long long m = s.tie_measure[b];
    if (s.tie_count[b] > 0 && crossing < 0 && run + m >= target) {
      crossing = b;
      crossing_above = run;
    }
    if (s.tie_count[b] > 0) last = b;
    run += m;
  }
  int block;
  bool fall_through = false;
  if (const unsigned hits = __ballot_sync(0xffffffffu, crossing >= 0); hits != 0) {
    const int src = __ffs(static_cast<int>(hits)) - 1;
    block = __shfl_sync(0xffffffffu, crossing, src);
    run = __shfl_sync(0xffffffffu, crossing_above, src);
  } else {
    const unsigned any = __ballot_sync(0xffffffffu, last >= 0);
    if (any == 0) return row.within;  // no candidate: nothing to cut (the host's descent returns `within`)
    block = __shfl_sync(0xffffffffu, last, 31 - __clz(static_cast<int>(any)));
    fall_through = true;
  }
  // In the block, lane l holds ids 64l .. 64l + 63 in order.
  constexpr int kIds = kDrawBlock / 32;
  const int begin = block * kDrawBlock + kIds * lane;
  unsigned long long mine = 0;
  unsigned mine_count = 0;
  for (int k = 0; k < kIds; ++k) {
    const int i = begin + k;
    if (i >= row.V) break;
    const float xi = row.x[i];
    if (!candidate(row, logit_key(xi), i, prefix, shift)) continue;
    mine += row.measure(xi);
    ++mine_count;
  }
  unsigned long long before = mine;
  for (int off = 1; off < 32; off *= 2) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, before, off);
    if (lane >= off) before += t;
  }
  before -= mine;
  const bool crosses = !fall_through && mine_count > 0 && run + before + mine >= target;
  const unsigned hits = __ballot_sync(0xffffffffu, crosses), holders = __ballot_sync(0xffffffffu, mine_count > 0);
  const int src = hits != 0 ? __ffs(static_cast<int>(hits)) - 1 : 31 - __clz(static_cast<int>(holders));
  TokenCutoff found{};
  if (lane == src) {
    unsigned long long r = run + before;
    for (int k = 0; k < kIds; ++k) {
      const int i = begin + k;
      if (i >= row.V) break;
      const float xi = row.x[i];
      const unsigned key = logit_key(xi);
      if (!candidate(row, key, i, prefix, shift)) continue;
      r += row.measure(xi);
      found = {key, i};
      if (hits != 0 && r >= target) break;  // else (the fall-through) the last candidate
    }
  }
  found.key = __shfl_sync(0xffffffffu, found.key, src);
  found.id = __shfl_sync(0xffffffffu, found.id, src);
  return found;
}

// The cutoff of `row` for target top_k (counts) or top_p (masses) of `d`, by every thread of every CTA of the
// cluster; the same result in each.
__device__ inline TokenCutoff cutoff_in_cluster(const cg::cluster_group& cluster, CutoffShared& s, const CutoffRow& row,
                                                const TokenDraw& d) {
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int rank = static_cast<int>(cluster.block_rank());
  unsigned prefix = 0;
  int shift = 32;  // bits from `shift` up are fixed
  for (int pass = 0; pass < 4; ++pass) {
    const int buf = pass & 1, digit_shift = 24 - 8 * pass;
    if (tid < 256) {
      s.measure[buf][tid] = 0;
      s.count[buf][tid] = 0;
    }
    __syncthreads();
    for (int base = rank * kThreads + warp * 32; base < row.V; base += kClusterBlocks * kThreads) {
      const int i = base + lane;
      unsigned digit = 256;  // not a candidate
      unsigned long long m = 0;
      if (i < row.V) {
        const float xi = row.x[i];
        const unsigned key = logit_key(xi);
        if (candidate(row, key, i, prefix, shift)) {
          digit = (key >> digit_shift) & 255u;
          m = row.measure(xi);
        }
      }
      const unsigned group = __match_any_sync(0xffffffffu, digit);
      const unsigned long long group_measure = add_in_group(group, m);
      if (digit < 256 && lane == __ffs(static_cast<int>(group)) - 1) {
        atomicAdd(&s.measure[buf][digit], group_measure);
        atomicAdd(&s.count[buf][digit], static_cast<unsigned>(__popc(static_cast<int>(group))));
      }
    }
    cluster.sync();  // every CTA's histogram is whole
    if (warp == 0) pick_digit(cluster, s, buf, digit_shift, pass == 0, row, d);
    __syncthreads();
    prefix = s.prefix;
    shift = digit_shift;
    if (s.chosen_count <= 1) break;  // one candidate left (or none): it is the cutoff
  }
  // The ties (or the one candidate), in id order.
  for (int b = rank * kWarps + warp; b * kDrawBlock < row.V; b += kClusterBlocks * kWarps) {
    unsigned long long m = 0;
    unsigned c = 0;
    for (int k = 0; k < kDrawBlock / 32; ++k) {
      const int i = b * kDrawBlock + lane + 32 * k;
      if (i >= row.V) break;
      const float xi = row.x[i];
      if (!candidate(row, logit_key(xi), i, prefix, shift)) continue;
      m += row.measure(xi);
      ++c;
    }
    for (int off = 16; off >= 1; off /= 2) {
      m += __shfl_down_sync(0xffffffffu, m, off);
      c += __shfl_down_sync(0xffffffffu, c, off);
    }
    if (lane == 0) {
      CutoffShared* first_cta = cluster.map_shared_rank(&s, 0);
      first_cta->tie_measure[b] = m;
      first_cta->tie_count[b] = c;
    }
  }
  cluster.sync();  // every block's ties are in the first CTA
  if (warp == 0) {
    const TokenCutoff found = find_tie(cluster, s, row, prefix, shift);
    if (lane == 0) s.found = found;
  }
  __syncthreads();
  return s.found;
}

}  // namespace draw_cluster
}  // namespace day0
