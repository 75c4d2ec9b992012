// MXFP4 blocks from the published row-major order into the tiled one on the device (quant/mxfp4_tiles.h): one
// thread a 16-byte unit of the tiled output, so the writes are whole lines and the padding is written as zeros.
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {
namespace {

__global__ void mxfp4_to_tiles_kernel(const uint4* __restrict__ blocks, std::int64_t units, std::int64_t groups,
                                      uint4* __restrict__ tiled) {
  const std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;
  // Unit u of the tiled order: row block, tile, then row r and group t within the tile (mxfp4_tiled_unit inverted).
  const std::int64_t row_tiles = mxfp4_row_tiles(groups);
  const std::int64_t tile_index = u / kMxfp4TileUnits, within = u % kMxfp4TileUnits;
  const std::int64_t row = tile_index / row_tiles * kMxfp4TileRows + within / kMxfp4TileGroups;
  const std::int64_t group = tile_index % row_tiles * kMxfp4TileGroups + within % kMxfp4TileGroups;
  tiled[u] = group < groups ? blocks[row * groups + group] : make_uint4(0, 0, 0, 0);
}

}  // namespace

Status mxfp4_to_tiles_cuda(const Tensor& blocks, Tensor& tiled, cudaStream_t stream) {
  const char* op = "mxfp4_to_tiles_cuda";
  if (blocks.dim() < 2 || blocks.shape().back() != 16)
    return make_error(std::string(op) + ": blocks must be u8 [..., groups, 16], got " +
                      shape_to_string(blocks.shape()));
  const std::int64_t groups = blocks.size(blocks.dim() - 2), rows = blocks.numel() / (groups * 16);
  if (rows % kMxfp4TileRows != 0)
    return make_error(std::string(op) + ": the rows (" + std::to_string(rows) + ") must be a multiple of 16");
  Shape tiled_shape = blocks.shape();
  tiled_shape[tiled_shape.size() - 2] = mxfp4_tiled_groups(groups);
  D0_RETURN_IF_ERROR(check_cuda_tensor(blocks, op, "blocks", {DType::u8}, blocks.shape()));
  D0_RETURN_IF_ERROR(check_cuda_tensor(tiled, op, "tiled", {DType::u8}, tiled_shape));
  if (!aligned_to(blocks.raw(), 16) || !aligned_to(tiled.raw(), 16))
    return make_error(std::string(op) + ": blocks and tiled must be 16-byte aligned");
  if (tiled.raw() == blocks.raw()) return make_error(std::string(op) + ": cannot repack in place");
  const std::int64_t units = tiled.numel() / 16;
  if (units == 0) return Status::success();
  constexpr int kThreads = 256;
  const std::int64_t grid = (units + kThreads - 1) / kThreads;
  if (grid > 2147483647) return make_error(std::string(op) + ": too many blocks for one grid");
  mxfp4_to_tiles_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      static_cast<const uint4*>(blocks.raw()), units, groups, static_cast<uint4*>(tiled.raw()));
  D0_CUDA_RETURN_IF_LAUNCH_ERROR("mxfp4_to_tiles_kernel");
  return Status::success();
}

}  // namespace day0
