// ExpertWeights: one routed-expert matrix set [E, out, in] as the ops see it, in the storage it was loaded in.
// MXFP4 is the published layout (the GPU converts the routed experts online); bf16 and fp8 are what
// `day0 convert` writes offline with the same codecs, so a backend uses them in place of its online conversion.
#pragma once

#include <string_view>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

enum class ExpertStorage {
  mxfp4,        // blocks u8 [E, out, in/32, 16] + scales u8 [E, out, in/32] (E8M0), quant/mxfp4.h
  mxfp4_tiled,  // the same values, blocks u8 [E, out, 4 ceil(in/128), 16] in quant/mxfp4_tiles.h's order (out a
                // multiple of 16, K padded with zero blocks), scales as mxfp4: what the decode-size kernels read best
  bf16,         // values bf16 [E, out, in]: the MXFP4 values decoded exactly
  fp8_rowwise,  // values f8_e4m3 [E, out, in] + row_scales f32 [E, out] (powers of two), quant/fp8_experts.h
};

std::string_view expert_storage_name(ExpertStorage s);

// MXFP4 expert blocks as stored: u8 [E, out, groups, 16].
bool is_mxfp4_blocks(DType dtype, const Shape& shape);
// The shape of MXFP4 expert blocks [E, out, groups, 16] in the tiled order (K padded to whole 4-group tiles).
Shape mxfp4_tiled_blocks_shape(const Shape& blocks);

// MXFP4 in either block order.
constexpr bool is_mxfp4(ExpertStorage s) { return s == ExpertStorage::mxfp4 || s == ExpertStorage::mxfp4_tiled; }

struct ExpertWeights {
  ExpertStorage storage = ExpertStorage::mxfp4;
  Tensor blocks, scales;      // mxfp4 only
  Tensor values, row_scales;  // bf16 (values) and fp8_rowwise (values, row_scales) only
  Tensor bias;                // [E, out] f32/bf16/f16, may be undefined
  int n_experts = 0, out = 0, in = 0;
};

// Checks the tensors of w's storage: dtypes, shapes for (n_experts, out, in), contiguity, `device`; in a multiple
// of 32. The bias is checked by each backend (they accept different dtypes). Errors start with `op`.
Status check_expert_weights(const ExpertWeights& w, const char* op, Device device);

// Host MXFP4 experts (row-major blocks) in the tiled order (ExpertStorage::mxfp4_tiled): new blocks, the same scales
// and bias tensors. out must be a multiple of 16; the error names what is wrong.
Result<ExpertWeights> mxfp4_tiled_experts(const ExpertWeights& w);

}  // namespace day0
