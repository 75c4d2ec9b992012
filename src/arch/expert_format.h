// How a routed-expert matrix [E, out, in] is stored in a checkpoint: the published MXFP4 layout, or one of the
// layouts `day0 convert` writes (experts decoded offline with the codecs the GPU uses online). The tensor names,
// shapes and dtypes of each layout are defined here once, for the arch manifests, the converter and the executor.
//
//   mxfp4_fused        {name}_blocks u8 [E, out, in/32, 16] + {name}_scales u8 [E, out, in/32] (E8M0)
//   bf16_fused         {name}_bf16 bf16 [E, out, in]                       (mxfp4_decode_row_bf16, exact)
//   fp8_rowwise_fused  {name}_fp8 f8_e4m3 [E, out, in] + {name}_fp8_scales f32 [E, out], value = e4m3 * scale,
//                      scale a power of two per output row (mxfp4_row_to_fp8, quant/fp8_experts.h)
//
// A converted checkpoint's config.json says which in quantization_config:
//   {"quant_method": "day0_experts", "experts": "bf16" | "fp8_e4m3_rowwise", "converted_from": "mxfp4"}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/expert_weights.h"

namespace day0 {

enum class ExpertFormat {
  mxfp4_fused,
  bf16_fused,
  fp8_rowwise_fused,
};

// quant_method of the checkpoints `day0 convert` writes.
inline constexpr std::string_view kConvertedQuantMethod = "day0_experts";

// "mxfp4", "bf16", "fp8_e4m3_rowwise": the quantization_config "experts" value (and what reports print).
std::string_view expert_format_name(ExpertFormat f);
std::optional<ExpertFormat> expert_format_from_name(std::string_view name);
// What the ops call the storage of a matrix in this format.
ExpertStorage expert_storage_of(ExpertFormat f);

struct ExpertMatrix {
  ExpertFormat format = ExpertFormat::mxfp4_fused;
  std::string name;  // prefix, e.g. "model.layers.3.mlp.experts.gate_up_proj"
  std::string bias;  // [E, out]; empty if none
  int out = 0, in = 0;
};

// One checkpoint tensor of an expert matrix's storage (the bias apart).
struct ExpertTensor {
  std::string name;
  DType dtype;
  Shape shape;
};

// The storage tensors of `m` in its format, in checkpoint order: values (blocks / bf16 / e4m3) first, then the
// scales (absent for bf16).
std::vector<ExpertTensor> expert_tensors(const ExpertMatrix& m, int n_experts);

}  // namespace day0
