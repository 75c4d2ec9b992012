// MXFP4 blocks between the published row-major order and the tiled one (mxfp4_tiles.h).
#include "quant/mxfp4_tiles.h"

#include <cstring>
#include <string>

namespace day0 {
namespace {

Status check_shape(const char* op, std::int64_t rows, std::int64_t groups) {
  if (rows < 0 || rows % kMxfp4TileRows != 0)
    return make_error(std::string(op) + ": rows must be a non-negative multiple of 16, got " + std::to_string(rows));
  if (groups <= 0) return make_error(std::string(op) + ": groups must be positive, got " + std::to_string(groups));
  return Status::success();
}

}  // namespace

Status mxfp4_to_tiles(const std::uint8_t* blocks, std::int64_t rows, std::int64_t groups, std::uint8_t* tiled) {
  D0_RETURN_IF_ERROR(check_shape("mxfp4_to_tiles", rows, groups));
  std::memset(tiled, 0, static_cast<std::size_t>(mxfp4_tiled_bytes(rows, groups)));
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t g = 0; g < groups; ++g)
      std::memcpy(tiled + 16 * mxfp4_tiled_unit(row, g, groups), blocks + 16 * (row * groups + g), 16);
  return Status::success();
}

Status mxfp4_from_tiles(const std::uint8_t* tiled, std::int64_t rows, std::int64_t groups, std::uint8_t* blocks) {
  D0_RETURN_IF_ERROR(check_shape("mxfp4_from_tiles", rows, groups));
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t g = 0; g < groups; ++g)
      std::memcpy(blocks + 16 * (row * groups + g), tiled + 16 * mxfp4_tiled_unit(row, g, groups), 16);
  return Status::success();
}

}  // namespace day0
