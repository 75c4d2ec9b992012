// Expert storage layouts: names and tensors.
#include "arch/expert_format.h"

namespace day0 {

std::string_view expert_format_name(ExpertFormat f) {
  switch (f) {
    case ExpertFormat::mxfp4_fused: return "mxfp4";
    case ExpertFormat::bf16_fused: return "bf16";
    case ExpertFormat::fp8_rowwise_fused: return "fp8_e4m3_rowwise";
  }
  return "?";
}

std::optional<ExpertFormat> expert_format_from_name(std::string_view name) {
  for (ExpertFormat f : {ExpertFormat::mxfp4_fused, ExpertFormat::bf16_fused, ExpertFormat::fp8_rowwise_fused})
    if (expert_format_name(f) == name) return f;
  return std::nullopt;
}

ExpertStorage expert_storage_of(ExpertFormat f) {
  switch (f) {
    case ExpertFormat::mxfp4_fused: return ExpertStorage::mxfp4;
    case ExpertFormat::bf16_fused: return ExpertStorage::bf16;
    case ExpertFormat::fp8_rowwise_fused: return ExpertStorage::fp8_rowwise;
  }
  return ExpertStorage::mxfp4;
}

std::vector<ExpertTensor> expert_tensors(const ExpertMatrix& m, int n_experts) {
  constexpr int kGroup = 32, kGroupBytes = 16;  // MXFP4: 32 values in 16 bytes + one scale byte
  const std::int64_t E = n_experts, out = m.out, in = m.in;
  switch (m.format) {
    case ExpertFormat::mxfp4_fused:
      return {{m.name + "_blocks", DType::u8, {E, out, in / kGroup, kGroupBytes}},
              {m.name + "_scales", DType::u8, {E, out, in / kGroup}}};
    case ExpertFormat::bf16_fused: return {{m.name + "_bf16", DType::bf16, {E, out, in}}};
    case ExpertFormat::fp8_rowwise_fused:
      return {{m.name + "_fp8", DType::f8_e4m3, {E, out, in}}, {m.name + "_fp8_scales", DType::f32, {E, out}}};
  }
  return {};
}

}  // namespace day0
