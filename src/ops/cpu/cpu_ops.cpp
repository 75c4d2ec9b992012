// CPU reference: embedding, norms, linear, residual add, lm head, greedy tokens, row logprobs; checks shared by the
// other CPU files.
#include "ops/cpu/cpu_ops.h"

#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "ops/greedy_pick.h"
#include "ops/logprobs.h"

namespace day0 {

OpEntry CpuOps::entry(OpKind kind) const {
  switch (kind) {
    case OpKind::lm_head: return OpEntry::composed;      // linear without bias
    case OpKind::moe_experts: return OpEntry::composed;  // expert_matmul + swiglu_clamped
    case OpKind::add_rms_norm: return OpEntry::composed;  // add + rms_norm
    default: return OpEntry::native;
  }
}

float load_f32(const Tensor& t, std::int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::bf16: return bf16_to_f32(t.data<std::uint16_t>()[i]);
    case DType::f16: return f16_to_f32(t.data<std::uint16_t>()[i]);
    default: return std::nanf("");
  }
}

static bool is_float_weight(const Tensor& t) {
  return t.dtype() == DType::f32 || t.dtype() == DType::bf16 || t.dtype() == DType::f16;
}

Status check_f32_matrix(const Tensor& t, const char* op, const char* what, std::int64_t rows, std::int64_t cols) {
  if (t.dtype() != DType::f32 || t.dim() != 2 || t.size(0) != rows || t.size(1) != cols || !t.is_contiguous() ||
      t.device() != Device::cpu)
    return make_error(std::string(op) + ": " + what + " must be contiguous f32 [" + std::to_string(rows) + ", " +
                      std::to_string(cols) + "] on cpu, got " + std::string(dtype_name(t.dtype())) + " " +
                      shape_to_string(t.shape()));
  return Status::success();
}

static Status check_weight(const Tensor& w, const char* op, const char* what, const Shape& shape) {
  if (!is_float_weight(w) || w.shape() != shape || !w.is_contiguous() || w.device() != Device::cpu)
    return make_error(std::string(op) + ": " + what + " must be a contiguous float tensor " + shape_to_string(shape) +
                      " on cpu, got " + std::string(dtype_name(w.dtype())) + " " + shape_to_string(w.shape()) + " on " +
                      std::string(device_name(w.device())));
  return Status::success();
}

Status CpuOps::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  if (table.dim() != 2) return make_error("embedding: table must be 2-D, got " + shape_to_string(table.shape()));
  const std::int64_t V = table.size(0), H = table.size(1);
  D0_RETURN_IF_ERROR(check_weight(table, "embedding", "table", {V, H}));
  if (ids.dtype() != DType::i32 || ids.dim() != 1) return make_error("embedding: ids must be i32 [S]");
  const std::int64_t S = ids.size(0);
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "embedding", "out", S, H));
  for (std::int64_t s = 0; s < S; ++s) {
    const std::int64_t id = ids.data<std::int32_t>()[s];
    if (id < 0 || id >= V)
      return make_error("embedding: token id " + std::to_string(id) + " at position " + std::to_string(s) +
                        " is outside the vocabulary [0, " + std::to_string(V) + ")");
    for (std::int64_t h = 0; h < H; ++h) out.data<float>()[s * H + h] = load_f32(table, id * H + h);
  }
  return Status::success();
}

Status CpuOps::rms_norm(const Tensor& x, const Tensor& w, float eps, bool plus_one, Tensor& out) {
  if (x.dim() != 2) return make_error("rms_norm: x must be 2-D");
  const std::int64_t S = x.size(0), H = x.size(1);
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "rms_norm", "x", S, H));
  D0_RETURN_IF_ERROR(check_weight(w, "rms_norm", "weight", {H}));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "rms_norm", "out", S, H));
  for (std::int64_t s = 0; s < S; ++s) {
    const float* xr = x.data<float>() + s * H;
    float sum_sq = 0.f;
    for (std::int64_t h = 0; h < H; ++h) sum_sq += xr[h] * xr[h];
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(H) + eps);
    for (std::int64_t h = 0; h < H; ++h) {
      const float weight = load_f32(w, h) + (plus_one ? 1.f : 0.f);
      out.data<float>()[s * H + h] = weight * (xr[h] * inv_rms);
    }
  }
  return Status::success();
}

Status CpuOps::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  if (x.dim() != 2 || w.dim() != 2) return make_error("linear: x and weight must be 2-D");
  const std::int64_t S = x.size(0), in = x.size(1), n_out = w.size(0);
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "linear", "x", S, in));
  D0_RETURN_IF_ERROR(check_weight(w, "linear", "weight", {n_out, in}));
  if (bias.defined() && bias.numel() > 0) D0_RETURN_IF_ERROR(check_weight(bias, "linear", "bias", {n_out}));
  D0_RETURN_IF_ERROR(check_f32_matrix(out, "linear", "out", S, n_out));
  const bool has_bias = bias.defined() && bias.numel() > 0;
  // Weights are upcast one row at a time so bf16 checkpoints need no f32 copy.
  std::vector<float> row(in);
  for (std::int64_t o = 0; o < n_out; ++o) {
    for (std::int64_t i = 0; i < in; ++i) row[i] = load_f32(w, o * in + i);
    const float b = has_bias ? load_f32(bias, o) : 0.f;
    for (std::int64_t s = 0; s < S; ++s) {
      const float* xr = x.data<float>() + s * in;
      float acc = 0.f;
      for (std::int64_t i = 0; i < in; ++i) acc += xr[i] * row[i];
      out.data<float>()[s * n_out + o] = acc + b;
    }
  }
  return Status::success();
}

Status CpuOps::add(Tensor& x, const Tensor& y) {
  if (x.dim() != 2) return make_error("add: x must be 2-D");
  D0_RETURN_IF_ERROR(check_f32_matrix(x, "add", "x", x.size(0), x.size(1)));
  D0_RETURN_IF_ERROR(check_f32_matrix(y, "add", "y", x.size(0), x.size(1)));
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] += y.data<float>()[i];
  return Status::success();
}

Status CpuOps::add_rms_norm(Tensor& x, const Tensor& y, const Tensor& w, float eps, bool plus_one, Tensor& out) {
  D0_RETURN_IF_ERROR(add(x, y));
  return rms_norm(x, w, eps, plus_one, out);
}

Status CpuOps::lm_head(const Tensor& x, const Tensor& w, Tensor& out) { return linear(x, w, Tensor(), out); }

namespace {

// A step's tokens: contiguous i32 [R] on the CPU.
Status check_step_tokens(const Tensor& tokens, std::int64_t R, const std::string& what) {
  if (tokens.dtype() != DType::i32 || tokens.shape() != Shape{R} || !tokens.is_contiguous() ||
      tokens.device() != Device::cpu)
    return make_error(what + ": tokens must be contiguous i32 [" + std::to_string(R) + "] on cpu, got " +
                      std::string(dtype_name(tokens.dtype())) + " " + shape_to_string(tokens.shape()));
  return Status::success();
}

// greedy_tokens' and draw_tokens' operands: logits f32 [R, V], out i32 [R, 2], tokens i32 [R] or null, on the CPU.
Status check_pick_operands(const Tensor& logits, const Tensor& out, const Tensor* tokens, const std::string& what) {
  if (logits.dim() != 2) return make_error(what + ": logits must be [rows, vocab]");
  const std::int64_t R = logits.size(0), V = logits.size(1);
  D0_RETURN_IF_ERROR(check_f32_matrix(logits, what.c_str(), "logits", R, V));
  if (out.dtype() != DType::i32 || out.shape() != Shape{R, 2} || !out.is_contiguous() || out.device() != Device::cpu)
    return make_error(what + ": out must be contiguous i32 [" + std::to_string(R) + ", 2] on cpu, got " +
                      std::string(dtype_name(out.dtype())) + " " + shape_to_string(out.shape()));
  return tokens ? check_step_tokens(*tokens, R, what) : Status::success();
}

}  // namespace

Status CpuOps::greedy_tokens(const Tensor& logits, Tensor& out, Tensor* tokens) {
  D0_RETURN_IF_ERROR(check_pick_operands(logits, out, tokens, "greedy_tokens"));
  const std::int64_t R = logits.size(0), V = logits.size(1);
  for (std::int64_t r = 0; r < R; ++r) {
    const GreedyPick pick = greedy_pick(std::span(logits.data<float>() + r * V, static_cast<std::size_t>(V)));
    std::int32_t* o = out.data<std::int32_t>() + 2 * r;
    o[0] = pick.token;
    o[1] = pick.unusable;
    if (tokens) tokens->data<std::int32_t>()[r] = pick.token;
  }
  return Status::success();
}

Status CpuOps::edit_logits(Tensor& logits, const LogitEdits& edits, const Tensor* tokens) {
  if (logits.dim() != 2) return make_error("edit_logits: logits must be [rows, vocab]");
  const std::int64_t R = logits.size(0), V = logits.size(1);
  D0_RETURN_IF_ERROR(check_f32_matrix(logits, "edit_logits", "logits", R, V));
  D0_RETURN_IF_ERROR(check_logit_edits(edits, R, V, "edit_logits"));
  LogitEdits resolved;
  const LogitEdits* plain = &edits;
  if (edits.has_pending()) {
    if (!tokens) return make_error("edit_logits: pending tokens need the step's tokens");
    D0_RETURN_IF_ERROR(check_step_tokens(*tokens, R, "edit_logits"));
    resolved = resolve_pending(edits, tokens->data<std::int32_t>(), V);
    plain = &resolved;
  }
  for (std::size_t i = 0; i < plain->rows.size(); ++i)
    apply_logit_edits(logits.data<float>() + plain->rows[i] * V, plain->entries.data() + plain->begins[i],
                      static_cast<std::size_t>(plain->begins[i + 1] - plain->begins[i]));
  return Status::success();
}

Status CpuOps::draw_tokens(const Tensor& logits, const std::vector<TokenDraw>& draws, Tensor& out, Tensor* tokens) {
  D0_RETURN_IF_ERROR(check_pick_operands(logits, out, tokens, "draw_tokens"));
  const std::int64_t R = logits.size(0), V = logits.size(1);
  D0_RETURN_IF_ERROR(check_token_draws(draws, R, "draw_tokens"));
  for (const TokenDraw& d : draws) {
    std::int32_t* o = out.data<std::int32_t>() + 2 * d.row;
    if (o[1] != -1) continue;  // an unusable row: greedy_tokens' report stands
    const float* row = logits.data<float>() + d.row * V;
    const std::int32_t token = draw_token(row, V, row[o[0]], d);
    if (token < 0) continue;  // no positive weight: cannot happen past greedy_tokens' checks
    o[0] = token;
    if (tokens) tokens->data<std::int32_t>()[d.row] = token;
  }
  return Status::success();
}

Status CpuOps::row_logprobs(const Tensor& logits, const std::vector<LogprobRequest>& requests, const Tensor& out,
                            Tensor& records) {
  D0_RETURN_IF_ERROR(check_pick_operands(logits, out, nullptr, "row_logprobs"));
  const std::int64_t R = logits.size(0), V = logits.size(1), n = static_cast<std::int64_t>(requests.size());
  D0_RETURN_IF_ERROR(check_logprob_requests(requests, R, "row_logprobs"));
  if (records.dtype() != DType::i32 || records.shape() != Shape{n, kLogprobRecordWords} || !records.is_contiguous() ||
      records.device() != Device::cpu)
    return make_error("row_logprobs: records must be contiguous i32 [" + std::to_string(n) + ", " +
                      std::to_string(kLogprobRecordWords) + "] on cpu, got " +
                      std::string(dtype_name(records.dtype())) + " " + shape_to_string(records.shape()));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t* o = out.data<std::int32_t>() + 2 * requests[i].row;
    if (o[1] != -1) continue;  // unusable: the pick fails on the host
    const LogprobRecord r = logprob_record(
        std::span(logits.data<float>() + requests[i].row * V, static_cast<std::size_t>(V)), o[0], requests[i].top_n);
    std::memcpy(records.data<std::int32_t>() + i * kLogprobRecordWords, &r, sizeof r);
  }
  return Status::success();
}

}  // namespace day0
