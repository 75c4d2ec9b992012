// compare_with_reference.
#include "model/reference_compare.h"

#include <cmath>
#include <map>

#include "io/safetensors.h"
#include "model/greedy.h"

namespace day0 {
namespace {

bool is_integer(DType t) { return t == DType::i64 || t == DType::i32; }

std::int64_t int_at(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::i64 ? t.data<std::int64_t>()[i] : t.data<std::int32_t>()[i];
}

TapComparison compare_tensor(const std::string& name, const Tensor& ours, const Tensor& ref, double tolerance) {
  TapComparison c;
  c.name = name;
  if (ours.numel() != ref.numel()) {
    c.rel = c.max_abs = INFINITY;
    return c;
  }
  if (is_integer(ref.dtype())) {
    c.integer = true;
    for (std::int64_t i = 0; i < ref.numel(); ++i) c.mismatches += int_at(ours, i) != int_at(ref, i);
    c.within = c.mismatches == 0;
    return c;
  }
  const Tensor a = ours.to_f32(), b = ref.to_f32();
  double diff_sq = 0, ref_sq = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    const double d = double(a.data<float>()[i]) - double(b.data<float>()[i]);
    c.max_abs = std::fmax(c.max_abs, std::fabs(d));
    diff_sq += d * d;
    ref_sq += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  c.rel = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  c.within = std::isfinite(c.rel) && c.rel <= tolerance;  // NaN never passes
  return c;
}

}  // namespace

bool ReferenceComparison::ok() const {
  if (!missing.empty() || taps.empty()) return false;
  for (const auto& t : taps)
    if (!t.within) return false;
  return greedy_first_mismatch < 0 && greedy_logits_rel <= tolerance;
}

std::string ReferenceComparison::first_failing_tap() const {
  for (const auto& t : taps)
    if (!t.within) return t.name;
  return "";
}

Result<ReferenceComparison> compare_with_reference(Executor& executor, const std::string& dump_path,
                                                   double tolerance) {
  if (executor.length() != 0) return make_error("compare: the executor must start from an empty sequence");
  D0_ASSIGN_OR_RETURN(auto dump, SafetensorsFile::open(dump_path));
  const TensorInfo* ids_info = dump->find("input_ids");
  if (!ids_info || !is_integer(ids_info->dtype) || ids_info->shape.size() != 1)
    return make_error(dump_path + ": reference dump needs input_ids (integer [S])");
  const Tensor ids_tensor = dump->tensor(*ids_info).clone();  // copy: dump offsets may be unaligned
  std::vector<std::int32_t> ids(ids_tensor.numel());
  for (std::int64_t i = 0; i < ids_tensor.numel(); ++i) ids[i] = static_cast<std::int32_t>(int_at(ids_tensor, i));

  ReferenceComparison result;
  result.tolerance = tolerance;
  std::map<std::string, bool> produced;
  const TapFn tap = [&](std::string_view name, const Tensor& value) {
    const std::string key(name);
    produced[key] = true;
    if (const TensorInfo* info = dump->find(key))
      result.taps.push_back(compare_tensor(key, value, dump->tensor(*info).clone(), tolerance));
  };
  D0_ASSIGN_OR_RETURN(Tensor prefill_logits, executor.forward(ids, /*all_logits=*/true, tap));
  for (const auto& info : dump->tensors())
    if (info.name != "input_ids" && info.name.rfind("greedy_", 0) != 0 && !produced.count(info.name))
      result.missing.push_back(info.name);

  const TensorInfo* greedy_ids = dump->find("greedy_ids");
  const TensorInfo* greedy_logits = dump->find("greedy_logits");
  if (!greedy_ids) return result;
  const Tensor ref_ids = dump->tensor(*greedy_ids).clone();
  const Tensor ref_logits = greedy_logits ? dump->tensor(*greedy_logits).clone().to_f32() : Tensor();
  result.greedy_steps = static_cast<int>(ref_ids.numel());
  // Continue the same sequence: the first token comes from the prefill's last row.
  Tensor logits = prefill_logits.slice_rows(prefill_logits.size(0) - 1, prefill_logits.size(0));
  for (int step = 0; step < result.greedy_steps; ++step) {
    if (greedy_logits) {
      const Tensor ref_row = ref_logits.slice_rows(step, step + 1);
      result.greedy_logits_rel = std::fmax(result.greedy_logits_rel, compare_tensor("", logits, ref_row, tolerance).rel);
    }
    const std::int32_t token = argmax_token(logits);
    result.greedy_tokens.push_back(token);
    if (result.greedy_first_mismatch < 0 && token != int_at(ref_ids, step)) {
      result.greedy_first_mismatch = step;
      if (greedy_logits) {
        const float* row = ref_logits.data<float>() + std::int64_t(step) * ref_logits.size(1);
        result.greedy_mismatch_ref_gap = double(row[int_at(ref_ids, step)]) - double(row[token]);
        for (std::int64_t v = 0; v < ref_logits.size(1); ++v)
          result.greedy_mismatch_logit_scale = std::fmax(result.greedy_mismatch_logit_scale, std::fabs(row[v]));
      }
    }
    if (step + 1 == result.greedy_steps) break;
    // Feed the reference token so later steps stay comparable even after a mismatch.
    const std::int32_t next = static_cast<std::int32_t>(int_at(ref_ids, step));
    D0_ASSIGN_OR_RETURN(logits, executor.forward(std::span<const std::int32_t>(&next, 1)));
  }
  return result;
}

}  // namespace day0
