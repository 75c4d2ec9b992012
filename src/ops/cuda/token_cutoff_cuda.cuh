// token_cutoff (ops/token_cutoff.h) on the device, bit for bit, by the cluster of 8 CTAs that draws a row
// (draw_tokens_cuda.cu, its only user), over the row as the cluster holds it (draw_cluster_row_cuda.cuh). The same
// radix descent: 8 bits of the key a pass, each pass a histogram of the candidates' counts and measures (1 for
// top-k, top_p_mass for top-p) over the digit, then the ties at the cutoff key in id order. The measures are
// integers, so the CTAs and warps add them in any order and agree with the host.
// - A pass: every CTA histograms its slots into its own shared memory (a warp's lanes that hold the same digit add
//   theirs first, __match_any_sync + __reduce_add_sync, then one shared atomic: the top digits of a row's keys are
//   few and shared; a warp without candidates skips all three); cluster.sync; then warp 0 of every CTA reads the 8
//   histograms through distributed shared memory and picks the digit as the host does, each CTA the same. Two
//   histogram buffers in turn: the next pass's zeroing cannot meet a slower CTA still reading the last one (a
//   cluster.sync lies between).
// - A digit held by one candidate ends the descent early: that candidate is the cutoff, whatever the host's later
//   passes would add.
// - The ties: each 2,048-id block's tie count and measure, by the warp of its owner CTA, into every CTA
//   (cluster.sync); then warp 0 of every CTA finds the crossing block, its lanes' 64-id runs in it (read from the
//   owner's shared memory) and the crossing id in the crossing run, 32 ids at a time.
#pragma once

#include <cooperative_groups.h>

#include <climits>
#include <cstdint>

#include "ops/cuda/draw_cluster_row_cuda.cuh"
#include "ops/cuda/exp_nonpositive_cuda.cuh"
#include "ops/token_cutoff.h"
#include "ops/token_draw.h"

namespace day0 {
namespace draw_cluster {

struct CutoffShared {
  unsigned long long measure[2][256];
  unsigned count[2][256];
  unsigned long long tie_measure[kMaxBlocks];  // every block's ties, written by its owner
  unsigned tie_count[kMaxBlocks];
  unsigned prefix, chosen_count;  // a pass's result, from warp 0 to its CTA
  unsigned long long above, target;
  TokenCutoff found;
};

struct CutoffRow {
  ClusterRow row;
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
  const int blocks = row.row.blocks, V = row.row.V;
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
  // In the block, lane l sums ids 64l .. 64l + 63, read from 64l + l on (no two lanes on one shared memory bank).
  const float* ids = row.row.block_ids(cluster, block);
  const int base = block * kDrawBlock;
  unsigned long long mine = 0;
  unsigned mine_count = 0;
#pragma unroll 8
  for (int k = 0; k < kPerLane; ++k) {
    const int off = kPerLane * lane + ((k + lane) & (kPerLane - 1));
    if (base + off >= V) continue;
    const float xi = ids[off];
    if (!candidate(row, logit_key(xi), base + off, prefix, shift)) continue;
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
  // Lane src's run, 32 ids at a time in id order: the first candidate reaching the target, else the last candidate.
  unsigned long long r = run + __shfl_sync(0xffffffffu, before, src);
  TokenCutoff found{};
  for (int half = 0; half < kPerLane / 32; ++half) {
    const int i = base + kPerLane * src + 32 * half + lane;
    unsigned key = 0;
    unsigned long long m = 0;
    bool is_candidate = false;
    if (i < V) {
      const float xi = ids[i - base];
      key = logit_key(xi);
      is_candidate = candidate(row, key, i, prefix, shift);
      if (is_candidate) m = row.measure(xi);
    }
    unsigned long long inclusive = m;
    for (int off = 1; off < 32; off *= 2) {
      const unsigned long long t = __shfl_up_sync(0xffffffffu, inclusive, off);
      if (lane >= off) inclusive += t;
    }
    const unsigned reach = __ballot_sync(0xffffffffu, hits != 0 && is_candidate && r + inclusive >= target);
    const unsigned candidates = __ballot_sync(0xffffffffu, is_candidate);
    if (reach != 0 || candidates != 0) {
      const int at = reach != 0 ? __ffs(static_cast<int>(reach)) - 1 : 31 - __clz(static_cast<int>(candidates));
      found.key = __shfl_sync(0xffffffffu, key, at);
      found.id = __shfl_sync(0xffffffffu, i, at);
    }
    if (reach != 0) break;
    r += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  return found;
}

// The cutoff of `row` for target top_k (counts) or top_p (masses) of `d`, by every thread of every CTA of the
// cluster; the same result in each.
__device__ inline TokenCutoff cutoff_in_cluster(const cg::cluster_group& cluster, CutoffShared& s, const CutoffRow& row,
                                                const TokenDraw& d) {
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const ClusterRow& r = row.row;
  const int n = r.slots * kDrawBlock;  // a multiple of kThreads: every warp runs the same iterations
  unsigned prefix = 0;
  int shift = 32;  // bits from `shift` up are fixed
  for (int pass = 0; pass < 4; ++pass) {
    const int buf = pass & 1, digit_shift = 24 - 8 * pass;
    if (tid < 256) {
      s.measure[buf][tid] = 0;
      s.count[buf][tid] = 0;
    }
    __syncthreads();
    for (int e = tid; e < n; e += kThreads) {
      const int slot = e / kDrawBlock, off = e % kDrawBlock, i = r.block_of(slot) * kDrawBlock + off;
      unsigned digit = 256;  // not a candidate
      unsigned long long m = 0;
      if (i < r.V) {
        const float xi = r.slot_ids(slot)[off];
        const unsigned key = logit_key(xi);
        if (candidate(row, key, i, prefix, shift)) {
          digit = (key >> digit_shift) & 255u;
          m = row.measure(xi);
        }
      }
      if (!__any_sync(0xffffffffu, digit < 256)) continue;
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
  // The ties (or the one candidate) of this CTA's blocks, into every CTA.
  for (int slot = warp; slot < r.slots; slot += kWarps) {
    const int b = r.block_of(slot);
    const float* ids = r.slot_ids(slot);
    unsigned long long m = 0;
    unsigned c = 0;
#pragma unroll 8
    for (int k = 0; k < kPerLane; ++k) {
      const int off = lane + 32 * k;
      if (b * kDrawBlock + off >= r.V) continue;
      const float xi = ids[off];
      if (!candidate(row, logit_key(xi), b * kDrawBlock + off, prefix, shift)) continue;
      m += row.measure(xi);
      ++c;
    }
    for (int off = 16; off >= 1; off /= 2) {
      m += __shfl_xor_sync(0xffffffffu, m, off);
      c += __shfl_xor_sync(0xffffffffu, c, off);
    }
    if (lane < kClusterBlocks) {
      CutoffShared* peer = cluster.map_shared_rank(&s, lane);
      peer->tie_measure[b] = m;
      peer->tie_count[b] = c;
    }
  }
  cluster.sync();  // every block's ties are in every CTA
  if (warp == 0) {
    const TokenCutoff found = find_tie(cluster, s, row, prefix, shift);
    if (lane == 0) s.found = found;
  }
  __syncthreads();
  return s.found;
}

}  // namespace draw_cluster
}  // namespace day0
