// CPU reference: router top-k + softmax, expert matmul (MXFP4, or bf16 / fp8 decoded exactly), clamped SwiGLU,
// routed-expert combination.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {

Status CpuOps::router_topk_softmax(const Tensor& logits, int k, Tensor& indices, Tensor& weights) {
  if (logits.dim() != 2) return make_error("router_topk_softmax: logits must be 2-D");
  const std::int64_t S = logits.size(0), E = logits.size(1);
  D0_RETURN_IF_ERROR(check_f32_matrix(logits, "router_topk_softmax", "logits", S, E));
  if (k < 1 || k > E) return make_error("router_topk_softmax: k must be in [1, " + std::to_string(E) + "]");
  if (indices.dtype() != DType::i32 || indices.shape() != Shape{S, k})
    return make_error("router_topk_softmax: indices must be i32 [" + std::to_string(S) + ", " + std::to_string(k) + "]");
  D0_RETURN_IF_ERROR(check_f32_matrix(weights, "router_topk_softmax", "weights", S, k));
  std::vector<int> order(E);
  for (std::int64_t s = 0; s < S; ++s) {
    const float* row = logits.data<float>() + s * E;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    const float top = row[order[0]];
    float denom = 0.f;
    for (int j = 0; j < k; ++j) denom += std::exp(row[order[j]] - top);
    for (int j = 0; j < k; ++j) {
      indices.data<std::int32_t>()[s * k + j] = order[j];
      weights.data<float>()[s * k + j] = std::exp(row[order[j]] - top) / denom;
    }
  }
  return Status::success();
}

static Status check_experts(const ExpertWeights& w, const char* op) {
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cpu));
  if (w.bias.defined() && w.bias.numel() > 0 &&
      (w.bias.shape() != Shape{w.n_experts, w.out} || !w.bias.is_contiguous() || w.bias.device() != Device::cpu ||
       !(w.bias.dtype() == DType::f32 || w.bias.dtype() == DType::bf16 || w.bias.dtype() == DType::f16)))
    return make_error(std::string(op) + ": expert bias must be a contiguous f32/bf16/f16 tensor [E, out] on cpu, got " +
                      std::string(dtype_name(w.bias.dtype())) + " " + shape_to_string(w.bias.shape()));
  return Status::success();
}

// Row `row` (of E * out) of the expert matrices decoded exactly to f32, whatever the storage: MXFP4 and its
// bf16 / fp8 conversions give the same values wherever the conversion was exact.
static void decode_expert_row(const ExpertWeights& w, std::int64_t row, float* out) {
  switch (w.storage) {
    case ExpertStorage::mxfp4: {
      const std::int64_t groups = w.in / kMxfp4GroupSize;
      mxfp4_decode_row(w.blocks.data<std::uint8_t>() + row * groups * kMxfp4GroupBytes,
                       w.scales.data<std::uint8_t>() + row * groups, w.in, out);
      return;
    }
    case ExpertStorage::mxfp4_tiled: {  // the row's blocks gathered back into row order
      const std::int64_t groups = w.in / kMxfp4GroupSize;
      const Mxfp4RowUnits units = mxfp4_row_units(row, groups, /*tiled=*/true);
      std::vector<std::uint8_t> blocks(static_cast<std::size_t>(groups * kMxfp4GroupBytes));
      for (int g = 0; g < groups; ++g)
        std::memcpy(blocks.data() + g * kMxfp4GroupBytes,
                    w.blocks.data<std::uint8_t>() + units.at(g) * kMxfp4GroupBytes, kMxfp4GroupBytes);
      mxfp4_decode_row(blocks.data(), w.scales.data<std::uint8_t>() + row * groups, w.in, out);
      return;
    }
    case ExpertStorage::bf16: {
      const std::uint16_t* v = w.values.data<std::uint16_t>() + row * w.in;
      for (std::int64_t i = 0; i < w.in; ++i) out[i] = bf16_to_f32(v[i]);
      return;
    }
    case ExpertStorage::fp8_rowwise:
      fp8_decode_row(w.values.data<std::uint8_t>() + row * w.in, w.row_scales.data<float>()[row], w.in, out);
      return;
  }
}

Status CpuOps::expert_matmul(const Tensor& x, const ExpertWeights& w, int expert, Tensor& out) {
  D0_RETURN_IF_ERROR(check_experts(w, "expert_matmul"));
  if (expert < 0 || expert >= w.n_experts) return make_error("expert_matmul: expert id out of range");
  const std::int64_t n = x.dim() == 2 ? x.size(0) : -1;
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "expert_matmul", "x", n, w.in));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "expert_matmul", "out", n, w.out));
  const bool has_bias = w.bias.defined() && w.bias.numel() > 0;
  std::vector<float> row(w.in);
  for (std::int64_t r = 0; r < w.out; ++r) {
    const std::int64_t row_index = std::int64_t(expert) * w.out + r;
    decode_expert_row(w, row_index, row.data());
    const float b = has_bias ? load_f32(w.bias, row_index) : 0.f;
    for (std::int64_t s = 0; s < n; ++s) {
      const float* xr = x.data<float>() + s * w.in;
      float acc = 0.f;
      for (std::int64_t i = 0; i < w.in; ++i) acc += xr[i] * row[i];
      out.data<float>()[s * w.out + r] = acc + b;
    }
  }
  return Status::success();
}

Status CpuOps::swiglu_clamped(const Tensor& gate_up, const SwigluParams& p, Tensor& out) {
  if (gate_up.dim() != 2 || gate_up.size(1) % 2 != 0) return make_error("swiglu_clamped: gate_up must be [n, 2I]");
  const std::int64_t n = gate_up.size(0), I = gate_up.size(1) / 2;
  D0_RETURN_IF_ERROR(check_f32_matrix(gate_up, "swiglu_clamped", "gate_up", n, 2 * I));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "swiglu_clamped", "out", n, I));
  for (std::int64_t s = 0; s < n; ++s) {
    const float* gu = gate_up.data<float>() + s * 2 * I;
    for (std::int64_t j = 0; j < I; ++j) {
      float gate = p.interleaved ? gu[2 * j] : gu[j];
      float up = p.interleaved ? gu[2 * j + 1] : gu[I + j];
      gate = std::min(gate, p.limit);  // gate is clamped from above only
      up = std::clamp(up, -p.limit, p.limit);
      const float glu = gate / (1.0f + std::exp(-p.alpha * gate));
      out.data<float>()[s * I + j] = (up + 1.0f) * glu;
    }
  }
  return Status::success();
}

// Composed: per expert (in id order, as transformers accumulates), gather its tokens, run
// gate_up -> swiglu -> down, scale by the routing weight and add into the output rows.
Status CpuOps::moe_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& gate_up,
                           const ExpertWeights& down, const SwigluParams& p, Tensor& out) {
  if (x.dim() != 2 || indices.dim() != 2) return make_error("moe_experts: x and indices must be 2-D");
  const std::int64_t S = x.size(0), H = x.size(1), k = indices.size(1);
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "moe_experts", "x", S, H));
  D0_RETURN_IF_ERROR(check_f32_matrix(weights, "moe_experts", "weights", S, k));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "moe_experts", "out", S, H));
  if (indices.dtype() != DType::i32 || indices.size(0) != S) return make_error("moe_experts: indices must be i32 [S, k]");
  if (gate_up.in != H || down.out != H || down.in * 2 != gate_up.out || gate_up.n_experts != down.n_experts)
    return make_error("moe_experts: expert shapes do not chain (gate_up " + std::to_string(gate_up.out) + "x" +
                      std::to_string(gate_up.in) + ", down " + std::to_string(down.out) + "x" + std::to_string(down.in) +
                      ", hidden " + std::to_string(H) + ")");
  std::fill(out.data<float>(), out.data<float>() + out.numel(), 0.f);
  const std::int64_t I = down.in;
  for (int e = 0; e < gate_up.n_experts; ++e) {
    std::vector<std::int64_t> rows;
    std::vector<float> route;
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t j = 0; j < k; ++j) {
        const int id = indices.data<std::int32_t>()[s * k + j];
        if (id < 0 || id >= gate_up.n_experts) return make_error("moe_experts: expert id " + std::to_string(id) + " out of range");
        if (id == e) {
          rows.push_back(s);
          route.push_back(weights.data<float>()[s * k + j]);
        }
      }
    if (rows.empty()) continue;  // only routed experts are touched
    const std::int64_t n = static_cast<std::int64_t>(rows.size());
    Tensor xs = Tensor::zeros({n, H}, DType::f32), gu = Tensor::zeros({n, 2 * I}, DType::f32);
    Tensor h = Tensor::zeros({n, I}, DType::f32), y = Tensor::zeros({n, H}, DType::f32);
    for (std::int64_t r = 0; r < n; ++r)
      std::copy_n(x.data<float>() + rows[r] * H, H, xs.data<float>() + r * H);
    D0_RETURN_IF_ERROR(expert_matmul(xs, gate_up, e, gu));
    D0_RETURN_IF_ERROR(swiglu_clamped(gu, p, h));
    D0_RETURN_IF_ERROR(expert_matmul(h, down, e, y));
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < H; ++c) out.data<float>()[rows[r] * H + c] += y.data<float>()[r * H + c] * route[r];
  }
  return Status::success();
}

}  // namespace day0
