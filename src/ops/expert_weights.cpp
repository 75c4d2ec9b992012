// ExpertWeights: storage names and the shape check every backend runs first.
#include "ops/expert_weights.h"

#include <string>

#include "quant/mxfp4.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {

std::string_view expert_storage_name(ExpertStorage s) {
  switch (s) {
    case ExpertStorage::mxfp4: return "mxfp4";
    case ExpertStorage::mxfp4_tiled: return "mxfp4_tiled";
    case ExpertStorage::bf16: return "bf16";
    case ExpertStorage::fp8_rowwise: return "fp8_rowwise";
  }
  return "?";
}

namespace {

Status check_one(const Tensor& t, const char* op, const char* what, DType dtype, const Shape& shape, Device device) {
  if (!t.defined() || t.dtype() != dtype || t.shape() != shape || !t.is_contiguous() || t.device() != device)
    return make_error(std::string(op) + ": expert " + what + " must be a contiguous " + std::string(dtype_name(dtype)) +
                      " tensor " + shape_to_string(shape) + " on " + std::string(device_name(device)) + ", got " +
                      std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape()) + " on " +
                      std::string(device_name(t.device())));
  return Status::success();
}

}  // namespace

Status check_expert_weights(const ExpertWeights& w, const char* op, Device device) {
  if (w.n_experts <= 0 || w.out <= 0 || w.in <= 0 || w.in % 32 != 0)
    return make_error(std::string(op) + ": experts must have E, out > 0 and in a positive multiple of 32 (E=" +
                      std::to_string(w.n_experts) + " out=" + std::to_string(w.out) + " in=" + std::to_string(w.in) +
                      ")");
  const std::int64_t E = w.n_experts, out = w.out, in = w.in;
  switch (w.storage) {
    case ExpertStorage::mxfp4:
      D0_RETURN_IF_ERROR(check_one(w.blocks, op, "blocks", DType::u8, {E, out, in / 32, 16}, device));
      return check_one(w.scales, op, "scales", DType::u8, {E, out, in / 32}, device);
    case ExpertStorage::mxfp4_tiled:
      if (out % kMxfp4TileRows != 0)
        return make_error(std::string(op) + ": tiled MXFP4 experts need out a multiple of 16, got " +
                          std::to_string(out));
      D0_RETURN_IF_ERROR(check_one(w.blocks, op, "blocks", DType::u8,
                                   {E, out, mxfp4_tiled_groups(in / 32), 16}, device));
      return check_one(w.scales, op, "scales", DType::u8, {E, out, in / 32}, device);
    case ExpertStorage::bf16: return check_one(w.values, op, "values", DType::bf16, {E, out, in}, device);
    case ExpertStorage::fp8_rowwise:
      D0_RETURN_IF_ERROR(check_one(w.values, op, "values", DType::f8_e4m3, {E, out, in}, device));
      return check_one(w.row_scales, op, "row scales", DType::f32, {E, out}, device);
  }
  return make_error(std::string(op) + ": unknown expert storage");
}

bool is_mxfp4_blocks(DType dtype, const Shape& shape) {
  return dtype == DType::u8 && shape.size() == 4 && shape[3] == kMxfp4GroupBytes;
}

Shape mxfp4_tiled_blocks_shape(const Shape& blocks) {
  return {blocks[0], blocks[1], mxfp4_tiled_groups(blocks[2]), blocks[3]};
}

Result<ExpertWeights> mxfp4_tiled_experts(const ExpertWeights& w) {
  const char* op = "mxfp4_tiled_experts";
  if (w.storage != ExpertStorage::mxfp4)
    return make_error(std::string(op) + ": takes row-major MXFP4 experts, got " +
                      std::string(expert_storage_name(w.storage)));
  D0_RETURN_IF_ERROR(check_expert_weights(w, op, Device::cpu));
  const std::int64_t groups = w.in / 32, rows = std::int64_t(w.n_experts) * w.out;
  ExpertWeights t = w;
  t.storage = ExpertStorage::mxfp4_tiled;
  t.blocks = Tensor::zeros(mxfp4_tiled_blocks_shape(w.blocks.shape()), DType::u8);
  D0_RETURN_IF_ERROR(mxfp4_to_tiles(w.blocks.data<std::uint8_t>(), rows, groups, t.blocks.data<std::uint8_t>()));
  return t;
}

}  // namespace day0
