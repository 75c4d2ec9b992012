// RoPE on the GPU, in place: one block per token; thread (i, head group) computes the angle's cos and sin
// once and rotates lane pairs (i, i + half) of its heads. Arithmetic mirrors CpuOps::rope exactly. The fused form
// (decode: one launch instead of three) rotates q and k and writes k, v into the KV pools; with a cos/sin table it
// leaves q as it is and writes its tokens' cos and sin there instead, for the attention kernel to rotate q as it loads.
// Its rows form also reads q, k and v out of one GEMM's rows (q/k/v placed back to back) into their own.
#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "ops/cuda/attention_cuda.h"
#include "ops/cuda/attention_keys.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "ops/cuda/dependent_launch.h"
#include "ops/cuda/rope_math.cuh"

namespace day0 {
namespace {

constexpr int kRopeMaxHalf = 1024;

using rope_math::rope_cos_sin;
using rope_math::rotated_first;
using rope_math::rotated_second;

__device__ __forceinline__ void rotate_pair(float* v, int i, int half, float c, float sn) {
  const float a = v[i], b = v[i + half];
  v[i] = rotated_first(a, b, c, sn);
  v[i + half] = rotated_second(a, b, c, sn);
}

__global__ void rope_kernel(float* __restrict__ x, const std::int32_t* positions, const float* __restrict__ inv_freq,
                            int n_heads, int head_dim, int half, float attention_factor) {
  begin_dependent_grid();
  const int heads_per_pass = blockDim.x / half;
  const int i = threadIdx.x % half, first_head = threadIdx.x / half;
  if (first_head >= heads_per_pass) return;  // the ragged end of the block when blockDim % half != 0
  float c, sn;
  rope_cos_sin(static_cast<float>(positions[blockIdx.x]), inv_freq[i], attention_factor, c, sn);
  float* row = x + static_cast<std::int64_t>(blockIdx.x) * n_heads * head_dim;
  for (int h = first_head; h < n_heads; h += heads_per_pass) rotate_pair(row + h * head_dim, i, half, c, sn);
}

// One block per (token, KV head): cos and sin once per lane pair (shared), the KV head's k and its group's q heads
// rotated in place, and the head's slice of the k and v rows written into the token's pool slot (a slot outside
// the pool is skipped and raises error_flag; rounded to the pool's dtype). Blocks per KV head: decode's single
// token spreads over 8 SMs, not 1. Positions, slots and inv_freq are step inputs and weights (written by no
// kernel): the angles' cos and sin (fp64) are taken before the dependent wait, while the q/k/v projection runs.
// q_cos_sin (or null): q is not rotated; the KV head 0 blocks write the token's (cos, sin) pairs there instead.
template <class KV>
__global__ void rope_kv_write_kernel(float* __restrict__ q, float* __restrict__ k, const float* v,
                                     const std::int32_t* positions, const float* __restrict__ inv_freq, int n_heads,
                                     int n_kv_heads, int head_dim, int half, float attention_factor,
                                     const std::int32_t* slots, std::int64_t n_slots, KV* __restrict__ k_pool,
                                     KV* __restrict__ v_pool, std::int32_t* __restrict__ error_flag,
                                     float2* __restrict__ q_cos_sin) {
  __shared__ float cs[kRopeMaxHalf], sn[kRopeMaxHalf];
  const std::int64_t s = blockIdx.x;
  const int kvh = blockIdx.y, group = n_heads / n_kv_heads;
  const float pos = static_cast<float>(positions[s]);
  const std::int64_t slot = slots[s];
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(pos, inv_freq[i], attention_factor, cs[i], sn[i]);
  __syncthreads();
  begin_dependent_grid();
  if (q_cos_sin != nullptr) {
    if (kvh == 0)
      for (int i = threadIdx.x; i < half; i += blockDim.x) q_cos_sin[s * half + i] = make_float2(cs[i], sn[i]);
  } else {
    float* qr = q + (s * n_heads + static_cast<std::int64_t>(kvh) * group) * head_dim;
    for (int p = threadIdx.x; p < group * half; p += blockDim.x) {
      const int i = p % half;
      rotate_pair(qr + (p / half) * head_dim, i, half, cs[i], sn[i]);
    }
  }
  const std::int64_t width = static_cast<std::int64_t>(n_kv_heads) * head_dim;
  const std::int64_t col0 = static_cast<std::int64_t>(kvh) * head_dim;  // this head's slice of a k / v row
  float* kr = k + s * width + col0;
  const bool slot_ok = slot >= 0 && slot < n_slots;
  if (!slot_ok && threadIdx.x == 0) *error_flag = 1;
  // Lane pair i's rotated k goes to the pool from registers; lanes past the rotary dim and v are copied as read.
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    rotate_pair(kr, i, half, cs[i], sn[i]);
    if (slot_ok) {
      store_kv(k_pool + slot * width + col0 + i, kr[i]);
      store_kv(k_pool + slot * width + col0 + i + half, kr[i + half]);
    }
  }
  if (!slot_ok) return;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    if (c >= 2 * half) store_kv(k_pool + slot * width + col0 + c, kr[c]);
    store_kv(v_pool + slot * width + col0 + c, v[s * width + col0 + c]);
  }
}

// The prefill form (steps of kRowsMinTokens or more): block (x, y) takes up to kRowsTokens tokens and a chunk of KV
// heads with their query heads, so each token's angles are taken once a block by all threads at once, and each
// thread has kRowsBatch quads of lane pairs in flight before it stores (one block per (token, KV head) left each
// block a few loads deep and waiting on its fp64 cos/sin: 98.6 us a 4,096-token layer at 20b, ~1.5 TB/s). Tokens
// and heads a block shrink until the grid has about kRowsTargetBlocks blocks: 8 tokens and every head gave a 64-token
// step 8 blocks (H200, 20b batch 64: 21.4 us a layer). Same arithmetic, same bits. Four blocks an SM (64 registers,
// no spills), so the ~512 blocks run as one wave on 132 SMs: at 80 registers (3 an SM, 1.29 waves) each block's
// chain (positions, fp64 cos/sin, the rows' loads) was paid twice; H100, 20b batch 64: 8.1 -> 5.7 us a layer.
constexpr int kRowsTokens = 8;
constexpr int kRowsMaxHalf = 64;
constexpr int kRowsThreads = 256;
constexpr int kRowsBatch = 4;
constexpr std::int64_t kRowsMinTokens = 64;
constexpr std::int64_t kRowsTargetBlocks = 512;

struct RowsShape {
  int tokens_per_block, kv_per_block;
  dim3 grid;
};

RowsShape rows_shape(std::int64_t S, int n_kv_heads) {
  const int tokens = static_cast<int>(std::clamp<std::int64_t>(S / kRowsTargetBlocks, 1, kRowsTokens));
  const std::int64_t token_blocks = (S + tokens - 1) / tokens;
  const std::int64_t chunks =
      std::clamp<std::int64_t>((kRowsTargetBlocks + token_blocks - 1) / token_blocks, 1, n_kv_heads);
  const int kv_per_block = static_cast<int>((n_kv_heads + chunks - 1) / chunks);
  const unsigned head_blocks = static_cast<unsigned>((n_kv_heads + kv_per_block - 1) / kv_per_block);
  return {tokens, kv_per_block, dim3(static_cast<unsigned>(token_blocks), head_blocks)};
}

// Where the rows form reads q, k and v and writes q and k: in place (each its own rows), or from one GEMM's rows
// [S, q + 2 kv widths] (in_*: column ranges of stride q_in_stride = kv_in_stride) into q's, k's and v's own rows.
// Outputs are contiguous [S, heads * head_dim]; v_out null leaves v unwritten (in place).
struct RowsIo {
  const float* q_in;
  float* q_out;
  const float* k_in;
  float* k_out;
  const float* v_in;
  float* v_out;
  std::int64_t q_in_stride, kv_in_stride;
};

template <class KV>
__global__ void __launch_bounds__(kRowsThreads, 4)
    rope_kv_write_rows_kernel(RowsIo io, const std::int32_t* positions, const float* __restrict__ inv_freq, int n_heads,
                              int n_kv_heads, int head_dim, int half, float attention_factor, const std::int32_t* slots,
                              std::int64_t n_slots, KV* __restrict__ k_pool, KV* __restrict__ v_pool,
                              std::int32_t* __restrict__ error_flag, std::int64_t S, int tokens_per_block,
                              int kv_per_block, float2* __restrict__ q_cos_sin) {
  __shared__ float cs[kRowsTokens][kRowsMaxHalf], sn[kRowsTokens][kRowsMaxHalf];
  __shared__ std::int64_t slot_s[kRowsTokens];
  const std::int64_t s0 = static_cast<std::int64_t>(blockIdx.x) * tokens_per_block;
  const int tokens = static_cast<int>(min(static_cast<std::int64_t>(tokens_per_block), S - s0));
  const int kv0 = static_cast<int>(blockIdx.y) * kv_per_block, kv_n = min(kv_per_block, n_kv_heads - kv0);
  const int group = n_heads / n_kv_heads;
  for (int p = threadIdx.x; p < tokens * half; p += kRowsThreads) {
    const int tt = p / half, i = p % half;
    rope_cos_sin(static_cast<float>(positions[s0 + tt]), inv_freq[i], attention_factor, cs[tt][i], sn[tt][i]);
  }
  if (threadIdx.x < tokens) {
    const std::int64_t slot = slots[s0 + threadIdx.x];
    slot_s[threadIdx.x] = slot >= 0 && slot < n_slots ? slot : -1;
  }
  __syncthreads();
  begin_dependent_grid();
  if (threadIdx.x < tokens && slot_s[threadIdx.x] < 0) *error_flag = 1;  // that token's k and v are not written
  // Rotations of heads [head0, head0 + n) of a token from `in` (rows in_stride floats apart) into `out` [S, heads *
  // head_dim] (in place: out == in), quad p = (token, head, j): lanes 4j .. 4j + 3 and their partners half on, as
  // float4s, consecutive threads on consecutive quads of a head, each thread kRowsBatch quads' loads in flight
  // before it stores (one lane pair a load left the kernel waiting on memory: 60 us a 120b layer at 4,096 tokens,
  // ~2.5 TB/s). k's rotated quads also go to the token's pool slot.
  auto rotate_rows = [&](const float* in, std::int64_t in_stride, float* out, int heads, int head0, int n, KV* pool) {
    const int quads_a_head = half / 4, quads = n * quads_a_head, total = tokens * quads;
    for (int p0 = threadIdx.x; p0 < total; p0 += kRowsBatch * kRowsThreads) {
      float4 a[kRowsBatch], b[kRowsBatch];
#pragma unroll
      for (int u = 0; u < kRowsBatch; ++u) {
        const int p = p0 + u * kRowsThreads, tt = p / quads, h = head0 + p % quads / quads_a_head;
        const int i = 4 * (p % quads_a_head);
        if (p >= total) continue;
        const float* row = in + (s0 + tt) * in_stride + h * head_dim;
        a[u] = *reinterpret_cast<const float4*>(row + i);
        b[u] = *reinterpret_cast<const float4*>(row + i + half);
      }
#pragma unroll
      for (int u = 0; u < kRowsBatch; ++u) {
        const int p = p0 + u * kRowsThreads, tt = p / quads, h = head0 + p % quads / quads_a_head;
        const int i = 4 * (p % quads_a_head);
        if (p >= total) continue;
        float* row = out + ((s0 + tt) * heads + h) * head_dim;
        const float4 c = *reinterpret_cast<const float4*>(&cs[tt][i]);
        const float4 sn4 = *reinterpret_cast<const float4*>(&sn[tt][i]);
        const float4 first =
            make_float4(rotated_first(a[u].x, b[u].x, c.x, sn4.x), rotated_first(a[u].y, b[u].y, c.y, sn4.y),
                        rotated_first(a[u].z, b[u].z, c.z, sn4.z), rotated_first(a[u].w, b[u].w, c.w, sn4.w));
        const float4 second =
            make_float4(rotated_second(a[u].x, b[u].x, c.x, sn4.x), rotated_second(a[u].y, b[u].y, c.y, sn4.y),
                        rotated_second(a[u].z, b[u].z, c.z, sn4.z), rotated_second(a[u].w, b[u].w, c.w, sn4.w));
        *reinterpret_cast<float4*>(row + i) = first;
        *reinterpret_cast<float4*>(row + i + half) = second;
        if (pool != nullptr && slot_s[tt] >= 0) {
          KV* dst = pool + slot_s[tt] * heads * head_dim + h * head_dim;
          store_kv4(dst + i, first);
          store_kv4(dst + i + half, second);
        }
      }
    }
  };
  if (q_cos_sin == nullptr) {
    rotate_rows(io.q_in, io.q_in_stride, io.q_out, n_heads, kv0 * group, kv_n * group, nullptr);
    if (io.q_out != io.q_in) {  // out of a GEMM's rows: q's lanes past the rotary dim as read, four at a time
      const int rest = (head_dim - 2 * half) / 4, heads = kv_n * group, total = tokens * heads * rest;
      for (int p = threadIdx.x; p < total; p += kRowsThreads) {
        const int tt = p / (heads * rest), c = (kv0 * group + p / rest % heads) * head_dim + 2 * half + 4 * (p % rest);
        *reinterpret_cast<float4*>(io.q_out + (s0 + tt) * n_heads * head_dim + c) =
            *reinterpret_cast<const float4*>(io.q_in + (s0 + tt) * io.q_in_stride + c);
      }
    }
  } else if (blockIdx.y == 0) {  // q left as it is: its tokens' (cos, sin) pairs, once (the attention rotates q)
    for (int p = threadIdx.x; p < tokens * half; p += kRowsThreads)
      q_cos_sin[(s0 + p / half) * half + p % half] = make_float2(cs[p / half][p % half], sn[p / half][p % half]);
  }
  rotate_rows(io.k_in, io.kv_in_stride, io.k_out, n_kv_heads, kv0, kv_n, k_pool);
  // v, and k's lanes past the rotary dim, of this block's KV heads into the pools (and out of a GEMM's rows into
  // their own) as read, four lanes at a time.
  const int width = n_kv_heads * head_dim, quads = kv_n * head_dim / 4, total = tokens * quads;
  const bool k_moves = io.k_out != io.k_in;
#pragma unroll 4
  for (int p = threadIdx.x; p < total; p += kRowsThreads) {
    const int tt = p / quads, c = kv0 * head_dim + 4 * (p % quads);
    const bool pooled = slot_s[tt] >= 0;
    const std::int64_t dst = slot_s[tt] * width + c, in = (s0 + tt) * io.kv_in_stride + c, out = (s0 + tt) * width + c;
    if (c % head_dim >= 2 * half && (pooled || k_moves)) {
      const float4 kk = *reinterpret_cast<const float4*>(io.k_in + in);
      if (k_moves) *reinterpret_cast<float4*>(io.k_out + out) = kk;
      if (pooled) store_kv4(k_pool + dst, kk);
    }
    if (pooled || io.v_out != nullptr) {
      const float4 vv = *reinterpret_cast<const float4*>(io.v_in + in);
      if (io.v_out != nullptr) *reinterpret_cast<float4*>(io.v_out + out) = vv;
      if (pooled) store_kv4(v_pool + dst, vv);
    }
  }
}

// inv_freq's length (half the rotary dim) after the checks both launchers share: f32 [half] on the device, the
// rotation within head_dim and within the kernels' shared tables.
Result<std::int64_t> rotary_half(const char* op, const Tensor& inv_freq, int head_dim) {
  if (inv_freq.dim() != 1) return make_error(std::string(op) + ": inv_freq must be 1-D");
  const std::int64_t half = inv_freq.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(inv_freq, op, "inv_freq", {DType::f32}, {half}));
  if (2 * half > head_dim)
    return make_error(std::string(op) + ": rotary dim " + std::to_string(2 * half) + " exceeds head_dim " +
                      std::to_string(head_dim));
  if (half > kRopeMaxHalf) return make_error(std::string(op) + ": rotary dim above 2048 is not supported");
  return half;
}

// Both launchers' checks of q, k and v (each [S, heads * head_dim] f32), the positions, the rotary dim and the
// pool writes; the rotary dim's half.
Result<std::int64_t> checked_rope_kv(const char* op, const Tensor& q, int n_heads, const Tensor& k, int n_kv_heads,
                                     const Tensor& v, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                                     const Tensor& slots, Tensor& k_pool, Tensor& v_pool, Tensor& error_flag) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return make_error(std::string(op) + ": head counts and head_dim must be positive");
  if (q.dim() != 2) return make_error(std::string(op) + ": q must be 2-D");
  const std::int64_t S = q.size(0), width = std::int64_t(n_kv_heads) * head_dim;
  D0_RETURN_IF_ERROR(check_cuda_tensor(q, op, "q", {DType::f32}, {S, std::int64_t(n_heads) * head_dim}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(k, op, "k", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(v, op, "v", {DType::f32}, {S, width}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(positions, op, "positions", {DType::i32}, {S}));
  D0_ASSIGN_OR_RETURN(const std::int64_t half, rotary_half(op, inv_freq, head_dim));
  D0_RETURN_IF_ERROR(check_kv_slot_writes(op, S, width, slots, k_pool, v_pool, error_flag));
  return half;
}

// Whether the rows form takes these operands: it moves four lanes a load, so whole quads of lanes and 16-byte
// aligned rows (8-byte aligned bf16 pool rows).
bool rows_form_takes(std::int64_t half, int head_dim, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Tensor& k_pool, const Tensor& v_pool) {
  return half <= kRowsMaxHalf && half % 4 == 0 && head_dim % 4 == 0 && aligned_to(q.raw(), 16) &&
         aligned_to(k.raw(), 16) && aligned_to(v.raw(), 16) && aligned_to(k_pool.raw(), 16) &&
         aligned_to(v_pool.raw(), 16);
}

// The rows form over S tokens, reading and writing as `io` says.
template <class KV>
void launch_rows(const RowsIo& io, std::int64_t S, int n_heads, int n_kv_heads, int head_dim, std::int64_t half,
                 const Tensor& positions, const Tensor& inv_freq, float attention_factor, const Tensor& slots,
                 Tensor& k_pool, Tensor& v_pool, Tensor& error_flag, float2* cos_sin, cudaStream_t stream) {
  const RowsShape shape = rows_shape(S, n_kv_heads);
  launch_dependent(rope_kv_write_rows_kernel<KV>, shape.grid, kRowsThreads, 0, stream, io,
                   positions.data<std::int32_t>(), inv_freq.data<float>(), n_heads, n_kv_heads, head_dim,
                   static_cast<int>(half), attention_factor, slots.data<std::int32_t>(), k_pool.size(0),
                   static_cast<KV*>(k_pool.raw()), static_cast<KV*>(v_pool.raw()), error_flag.data<std::int32_t>(), S,
                   shape.tokens_per_block, shape.kv_per_block, cos_sin);
}

}  // namespace

Status rope_kv_write_cuda(Tensor& q, int n_heads, Tensor& k, int n_kv_heads, const Tensor& v, int head_dim,
                          const Tensor& positions, const Tensor& inv_freq, float attention_factor, const Tensor& slots,
                          Tensor& k_pool, Tensor& v_pool, Tensor& error_flag, cudaStream_t stream, Tensor* q_cos_sin) {
  const char* op = "rope_kv_write_cuda";
  D0_ASSIGN_OR_RETURN(const std::int64_t half, checked_rope_kv(op, q, n_heads, k, n_kv_heads, v, head_dim, positions,
                                                               inv_freq, slots, k_pool, v_pool, error_flag));
  const std::int64_t S = q.size(0), width = std::int64_t(n_kv_heads) * head_dim, n_slots = k_pool.size(0);
  if (q_cos_sin) {
    D0_RETURN_IF_ERROR(check_cuda_tensor(*q_cos_sin, op, "q_cos_sin", {DType::f32}, {S, 2 * half}));
    if (!aligned_to(q_cos_sin->raw(), 8)) return make_error(std::string(op) + ": q_cos_sin must be 8-byte aligned");
  }
  float2* cos_sin = q_cos_sin ? static_cast<float2*>(q_cos_sin->raw()) : nullptr;
  if (S == 0) return Status::success();
  if (S > 2147483647) return make_error(std::string(op) + ": too many tokens for one grid");
  if (n_heads % n_kv_heads != 0)
    return make_error(std::string(op) + ": n_heads must be a multiple of n_kv_heads, got " + std::to_string(n_heads) +
                      " and " + std::to_string(n_kv_heads));
  if (n_kv_heads > 65535) return make_error(std::string(op) + ": more than 65535 KV heads");
  const bool rows_form = S >= kRowsMinTokens && rows_form_takes(half, head_dim, q, k, v, k_pool, v_pool);
  auto go = [&](auto* pool_type) {
    using KV = std::remove_pointer_t<decltype(pool_type)>;
    if (rows_form) {  // in place: q and k rotated in their own rows
      const RowsIo io{q.data<float>(),
                      q.data<float>(),
                      k.data<float>(),
                      k.data<float>(),
                      v.data<float>(),
                      nullptr,
                      std::int64_t(n_heads) * head_dim,
                      width};
      launch_rows<KV>(io, S, n_heads, n_kv_heads, head_dim, half, positions, inv_freq, attention_factor, slots, k_pool,
                      v_pool, error_flag, cos_sin, stream);
      return;
    }
    launch_dependent(rope_kv_write_kernel<KV>, dim3(static_cast<unsigned>(S), static_cast<unsigned>(n_kv_heads)), 256,
                     0, stream, q.data<float>(), k.data<float>(), v.data<float>(), positions.data<std::int32_t>(),
                     inv_freq.data<float>(), n_heads, n_kv_heads, head_dim, static_cast<int>(half), attention_factor,
                     slots.data<std::int32_t>(), n_slots, static_cast<KV*>(k_pool.raw()),
                     static_cast<KV*>(v_pool.raw()), error_flag.data<std::int32_t>(), cos_sin);
  };
  with_kv_element(k_pool.dtype() == DType::bf16, go);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("rope_kv_write_kernel (or its rows form)");
  return Status::success();
}

// The fused q/k/v GEMM's rows: the rows form whatever the step's size (its small-step form reads rows in place).
bool rope_kv_write_from_qkv_fits(int n_heads, int n_kv_heads, int head_dim, const Tensor& inv_freq, const Tensor& q,
                                 const Tensor& k, const Tensor& v, const Tensor& k_pool, const Tensor& v_pool) {
  const std::int64_t half = inv_freq.dim() == 1 ? inv_freq.size(0) : 0;
  return n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads == 0 && n_kv_heads <= 65535 && half > 0 &&
         2 * half <= head_dim && rows_form_takes(half, head_dim, q, k, v, k_pool, v_pool);
}

Status rope_kv_write_from_qkv_cuda(const Tensor& qkv, Tensor& q, int n_heads, Tensor& k, int n_kv_heads, Tensor& v,
                                   int head_dim, const Tensor& positions, const Tensor& inv_freq,
                                   float attention_factor, const Tensor& slots, Tensor& k_pool, Tensor& v_pool,
                                   Tensor& error_flag, cudaStream_t stream) {
  const char* op = "rope_kv_write_from_qkv_cuda";
  if (!rope_kv_write_from_qkv_fits(n_heads, n_kv_heads, head_dim, inv_freq, q, k, v, k_pool, v_pool))
    return make_error(std::string(op) + ": heads, rotary dim or alignment outside the rows form");
  D0_ASSIGN_OR_RETURN(const std::int64_t half, checked_rope_kv(op, q, n_heads, k, n_kv_heads, v, head_dim, positions,
                                                               inv_freq, slots, k_pool, v_pool, error_flag));
  const std::int64_t S = q.size(0), q_width = std::int64_t(n_heads) * head_dim;
  const std::int64_t width = std::int64_t(n_kv_heads) * head_dim, total = q_width + 2 * width;
  D0_RETURN_IF_ERROR(check_cuda_tensor(qkv, op, "qkv", {DType::f32}, {S, total}));
  if (!aligned_to(qkv.raw(), 16)) return make_error(std::string(op) + ": qkv must be 16-byte aligned");
  if (S == 0) return Status::success();
  if (S > 2147483647) return make_error(std::string(op) + ": too many tokens for one grid");
  const float* in = qkv.data<float>();
  const RowsIo io{in,   q.data<float>(), in + q_width, k.data<float>(), in + q_width + width, v.data<float>(), total,
                  total};
  auto go = [&](auto* pool_type) {
    launch_rows<std::remove_pointer_t<decltype(pool_type)>>(io, S, n_heads, n_kv_heads, head_dim, half, positions,
                                                            inv_freq, attention_factor, slots, k_pool, v_pool,
                                                            error_flag, nullptr, stream);
  };
  with_kv_element(k_pool.dtype() == DType::bf16, go);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("rope_kv_write_rows_kernel (from one q/k/v GEMM)");
  return Status::success();
}

Status rope_cuda(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq,
                 float attention_factor, cudaStream_t stream) {
  if (n_heads <= 0 || head_dim <= 0) return make_error("rope_cuda: n_heads and head_dim must be positive");
  if (x.dim() != 2) return make_error("rope_cuda: x must be 2-D, got " + shape_to_string(x.shape()));
  const std::int64_t S = x.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(x, "rope_cuda", "x", {DType::f32}, {S, std::int64_t(n_heads) * head_dim}));
  D0_RETURN_IF_ERROR(check_cuda_tensor(positions, "rope_cuda", "positions", {DType::i32}, {S}));
  D0_ASSIGN_OR_RETURN(const std::int64_t half, rotary_half("rope_cuda", inv_freq, head_dim));
  if (S == 0 || half == 0) return Status::success();
  if (S > 2147483647) return make_error("rope_cuda: too many tokens for one grid");
  // At least `half` threads; up to 256, a whole number of heads per pass.
  const int h = static_cast<int>(half);
  const int heads_per_pass = std::max(1, std::min(n_heads, 256 / h));
  const int threads = h * heads_per_pass;
  launch_dependent(rope_kernel, static_cast<unsigned>(S), threads, 0, stream, x.data<float>(),
                   positions.data<std::int32_t>(), inv_freq.data<float>(), n_heads, head_dim, h, attention_factor);
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("rope_kernel");
  return Status::success();
}

}  // namespace day0
