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

Status CpuOps::attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_pos, const Tensor& sinks,
                         const AttentionParams& p, Tensor& out) {
  if (p.n_heads <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0)
    return make_error("attention: n_heads must be a positive multiple of n_kv_heads");
  if (q.dim() != 2 || k.dim() != 2) return make_error("attention: q and k must be 2-D");
  const std::int64_t S = q.size(0), T = k.size(0), d = p.head_dim;
  const std::int64_t q_width = p.n_heads * d, kv_width = p.n_kv_heads * d;
  D0_RETURN_IF_ERROR(check_f32_matrix(q, "attention", "q", S, q_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(k, "attention", "k", T, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(v, "attention", "v", T, kv_width));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "attention", "out", S, q_width));
  if (q_pos.dtype() != DType::i32 || q_pos.dim() != 1 || q_pos.size(0) != S)
    return make_error("attention: q_pos must be i32 [" + std::to_string(S) + "]");
  const bool has_sinks = sinks.defined() && sinks.numel() > 0;
  // Sinks are read with load_f32: only f32/bf16/f16 in host memory (anything else would read as NaN or fault).
  const DType st = sinks.dtype();
  const bool sink_float = st == DType::f32 || st == DType::bf16 || st == DType::f16;
  if (has_sinks &&
      (sinks.numel() != p.n_heads || !sink_float || !sinks.is_contiguous() || sinks.device() != Device::cpu))
    return make_error("attention: sinks must be one f32/bf16/f16 logit per head on cpu, got " +
                      std::string(dtype_name(sinks.dtype())) + " " + shape_to_string(sinks.shape()));
  const int group = p.n_heads / p.n_kv_heads;
  std::vector<float> logits(T);
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t pos = q_pos.data<std::int32_t>()[s];
    if (pos < 0 || pos >= T) return make_error("attention: query position " + std::to_string(pos) + " has no key");
    // Keys the query may see: causal, and within the window (which counts the query itself).
    const std::int64_t first = p.sliding_window > 0 ? std::max<std::int64_t>(0, pos - p.sliding_window + 1) : 0;
    for (int h = 0; h < p.n_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q.data<float>() + s * q_width + h * d;
      float row_max = has_sinks ? load_f32(sinks, h) : -std::numeric_limits<float>::infinity();
      for (std::int64_t t = first; t <= pos; ++t) {
        const float* kv = k.data<float>() + t * kv_width + kvh * d;
        float dot = 0.f;
        for (std::int64_t i = 0; i < d; ++i) dot += qv[i] * kv[i];
        logits[t] = dot * p.scale;
        row_max = std::max(row_max, logits[t]);
      }
      // The sink joins the softmax denominator but contributes no value.
      float denom = has_sinks ? std::exp(load_f32(sinks, h) - row_max) : 0.f;
      for (std::int64_t t = first; t <= pos; ++t) {
        logits[t] = std::exp(logits[t] - row_max);
        denom += logits[t];
      }
      float* o = out.data<float>() + s * q_width + h * d;
      for (std::int64_t i = 0; i < d; ++i) o[i] = 0.f;
      for (std::int64_t t = first; t <= pos; ++t) {
        const float prob = logits[t] / denom;
        const float* vv = v.data<float>() + t * kv_width + kvh * d;
        for (std::int64_t i = 0; i < d; ++i) o[i] += prob * vv[i];
      }
    }
  }
  return Status::success();
}

}  // namespace day0
