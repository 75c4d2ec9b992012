// CPU reference: RoPE and causal GQA attention with sliding window and sink logits (REFERENCE.md §0.2, §0.3).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/cpu/cpu_ops.h"

namespace day0 {

Status CpuOps::rope(Tensor& x, int n_heads, int head_dim, const Tensor& positions, const Tensor& inv_freq_table,
                    float attention_factor) {
  if (x.dim() != 2) return make_error("rope: x must be 2-D");
  const std::int64_t S = x.size(0);
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "rope", "x", S, std::int64_t(n_heads) * head_dim));
  if (positions.dtype() != DType::i32 || positions.dim() != 1 || positions.size(0) != S)
    return make_error("rope: positions must be i32 [" + std::to_string(S) + "]");
  if (inv_freq_table.dtype() != DType::f32 || inv_freq_table.dim() != 1 || inv_freq_table.device() != Device::cpu)
    return make_error("rope: inverse frequencies must be f32 [rotary_dim / 2] on cpu");
  const float* inv_freq = inv_freq_table.data<float>();
  const int half = static_cast<int>(inv_freq_table.size(0));
  if (2 * half > head_dim) return make_error("rope: rotary dim exceeds head_dim");
  for (std::int64_t s = 0; s < S; ++s) {
    const float pos = static_cast<float>(positions.data<std::int32_t>()[s]);
    for (int i = 0; i < half; ++i) {
      // Angle in f32 as transformers forms it, cos/sin then scaled by the YaRN attention factor.
      const float angle = pos * inv_freq[i];
      const float c = static_cast<float>(std::cos(static_cast<double>(angle))) * attention_factor;
      const float sn = static_cast<float>(std::sin(static_cast<double>(angle))) * attention_factor;
      for (int h = 0; h < n_heads; ++h) {
        float* v = x.data<float>() + s * n_heads * head_dim + h * head_dim;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * sn;
        v[i + half] = b * c + a * sn;
      }
    }
  }
  return Status::success();
}

namespace {

// The softmax over the keys a query may see; `key_row(s, t)` is the pool row of position t for query s,
// or -1 when the position has no slot (an error).
template <class KeyRow>
Status attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
              const AttentionParams& p, Tensor& out, std::int64_t kv_width, KeyRow key_row) {
  const std::int64_t S = q.size(0), d = p.head_dim, q_width = p.n_heads * d;
  const bool has_sinks = sinks.defined() && sinks.numel() > 0;
  // Sinks are read with load_f32: only f32/bf16/f16 in host memory (anything else would read as NaN or fault).
  const DType st = sinks.dtype();
  const bool sink_float = st == DType::f32 || st == DType::bf16 || st == DType::f16;
  if (has_sinks &&
      (sinks.numel() != p.n_heads || !sink_float || !sinks.is_contiguous() || sinks.device() != Device::cpu))
    return make_error("attention: sinks must be one f32/bf16/f16 logit per head on cpu, got " +
                      std::string(dtype_name(sinks.dtype())) + " " + shape_to_string(sinks.shape()));
  const int group = p.n_heads / p.n_kv_heads;
  std::vector<float> logits;
  std::vector<std::int64_t> rows;
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t pos = q_pos.data<std::int32_t>()[s];
    // Keys the query may see: causal, and within the window (which counts the query itself).
    const std::int64_t first = p.sliding_window > 0 ? std::max<std::int64_t>(0, pos - p.sliding_window + 1) : 0;
    rows.clear();
    for (std::int64_t t = first; t <= pos; ++t) {
      const std::int64_t r = key_row(s, t);
      if (r < 0) return make_error("attention: query " + std::to_string(s) + " at position " + std::to_string(pos) +
                                   " has no key at position " + std::to_string(t));
      rows.push_back(r);
    }
    if (pos < 0) return make_error("attention: query position " + std::to_string(pos) + " has no key");
    logits.resize(rows.size());
    for (int h = 0; h < p.n_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q.data<float>() + s * q_width + h * d;
      float row_max = has_sinks ? load_f32(sinks, h) : -std::numeric_limits<float>::infinity();
      for (std::size_t j = 0; j < rows.size(); ++j) {
        const float* kv = k.data<float>() + rows[j] * kv_width + kvh * d;
        float dot = 0.f;
        for (std::int64_t i = 0; i < d; ++i) dot += qv[i] * kv[i];
        logits[j] = dot * p.scale;
        row_max = std::max(row_max, logits[j]);
      }
      // The sink joins the softmax denominator but contributes no value.
      float denom = has_sinks ? std::exp(load_f32(sinks, h) - row_max) : 0.f;
      for (float& l : logits) {
        l = std::exp(l - row_max);
        denom += l;
      }
      float* o = out.data<float>() + s * q_width + h * d;
      for (std::int64_t i = 0; i < d; ++i) o[i] = 0.f;
      for (std::size_t j = 0; j < rows.size(); ++j) {
        const float prob = logits[j] / denom;
        const float* vv = v.data<float>() + rows[j] * kv_width + kvh * d;
        for (std::int64_t i = 0; i < d; ++i) o[i] += prob * vv[i];
      }
    }
  }
  return Status::success();
}

Status check_attention_params(const AttentionParams& p) {
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0)
    return make_error("attention: n_heads must be a positive multiple of n_kv_heads");
  return Status::success();
}

}  // namespace

Status CpuOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                         const AttentionParams& p, Tensor& out) {
  D0_RETURN_IF_ERROR(check_attention_params(p));
  if (q.dim() != 2 || k.dim() != 2) return make_error("attention: q and k must be 2-D");
  const std::int64_t S = q.size(0), T = k.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_f32_matrix(q, "attention", "q", S, q_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(k, "attention", "k", T, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(v, "attention", "v", T, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "attention", "out", S, q_width));
  if (q_pos.dtype() != DType::i32 || q_pos.dim() != 1 || q_pos.size(0) != S)
    return make_error("attention: q_pos must be i32 [" + std::to_string(S) + "]");
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t pos = q_pos.data<std::int32_t>()[s];
    if (pos < 0 || pos >= T) return make_error("attention: query position " + std::to_string(pos) + " has no key");
  }
  return attend(q, k, v, q_pos, sinks, p, out, kv_width, [](std::int64_t, std::int64_t t) { return t; });
}

Status CpuOps::kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, Tensor& k_pool, Tensor& v_pool) {
  if (k.dim() != 2 || k_pool.dim() != 2) return make_error("kv_write: k and the pools must be 2-D");
  const std::int64_t S = k.size(0), width = k.size(1), n_slots = k_pool.size(0);
  D0_RETURN_IF_ERROR(check_f32_matrix(k, "kv_write", "k", S, width));
  D0_RETURN_IF_ERROR(check_f32_matrix(v, "kv_write", "v", S, width));
  D0_RETURN_IF_ERROR(check_f32_matrix(k_pool, "kv_write", "k_pool", n_slots, width));
  D0_RETURN_IF_ERROR(check_f32_matrix(v_pool, "kv_write", "v_pool", n_slots, width));
  if (slots.dtype() != DType::i32 || slots.dim() != 1 || slots.size(0) != S)
    return make_error("kv_write: slots must be i32 [" + std::to_string(S) + "]");
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t slot = slots.data<std::int32_t>()[s];
    if (slot < 0 || slot >= n_slots)
      return make_error("kv_write: slot " + std::to_string(slot) + " outside the pool of " + std::to_string(n_slots));
    std::copy_n(k.data<float>() + s * width, width, k_pool.data<float>() + slot * width);
    std::copy_n(v.data<float>() + s * width, width, v_pool.data<float>() + slot * width);
  }
  return Status::success();
}

Status CpuOps::paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& q_pos,
                               const PagedKv& kv, const Tensor& sinks, const AttentionParams& p, Tensor& out) {
  D0_RETURN_IF_ERROR(check_attention_params(p));
  if (q.dim() != 2 || k_pool.dim() != 2) return make_error("paged_attention: q and the pools must be 2-D");
  const std::int64_t S = q.size(0), n_slots = k_pool.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_f32_matrix(q, "paged_attention", "q", S, q_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(k_pool, "paged_attention", "k_pool", n_slots, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(v_pool, "paged_attention", "v_pool", n_slots, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "paged_attention", "out", S, q_width));
  if (q_pos.dtype() != DType::i32 || q_pos.dim() != 1 || q_pos.size(0) != S || kv.q_seq.dtype() != DType::i32 ||
      kv.q_seq.dim() != 1 || kv.q_seq.size(0) != S)
    return make_error("paged_attention: q_pos and q_seq must be i32 [" + std::to_string(S) + "]");
  if (kv.block_tables.dtype() != DType::i32 || kv.block_tables.dim() != 2 || kv.block_size <= 0)
    return make_error("paged_attention: block tables must be i32 [B, max_blocks] with a positive block size");
  const std::int64_t B = kv.block_tables.size(0), max_blocks = kv.block_tables.size(1);
  const std::int32_t* tables = kv.block_tables.data<std::int32_t>();
  const std::int32_t* q_seq = kv.q_seq.data<std::int32_t>();
  for (std::int64_t s = 0; s < S; ++s)
    if (q_seq[s] < 0 || q_seq[s] >= B)
      return make_error("paged_attention: query " + std::to_string(s) + " names sequence " +
                        std::to_string(q_seq[s]) + " of " + std::to_string(B));
  const auto key_row = [&](std::int64_t s, std::int64_t t) -> std::int64_t {
    const std::int64_t b = t / kv.block_size;
    if (b >= max_blocks) return -1;
    const std::int64_t block = tables[q_seq[s] * max_blocks + b];
    const std::int64_t row = block * kv.block_size + t % kv.block_size;
    return block < 0 || row >= n_slots ? -1 : row;
  };
  return attend(q, k_pool, v_pool, q_pos, sinks, p, out, kv_width, key_row);
}

}  // namespace day0
