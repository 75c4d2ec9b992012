// byte_matrix_tensor_map, mxfp4_tiled_tensor_map: see tensor_map.h.
#include "ops/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "quant/mxfp4_tiles.h"

namespace day0 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder(cudaError_t& err) {
  static cudaError_t lookup = cudaSuccess;
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    lookup = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    if (lookup == cudaSuccess && found != cudaDriverEntryPointSuccess) lookup = cudaErrorSymbolNotFound;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  err = lookup;
  return fn;
}

// A rank-`rank` byte tensor (dims innermost first; strides in bytes of dims 1..rank-1) with boxes of `box`.
Status encode_bytes(const char* op, int rank, void* base, const cuuint64_t* dims, const cuuint64_t* strides,
                    const cuuint32_t* box, bool swizzled, CUtensorMap& map) {
  cudaError_t err = cudaSuccess;
  const auto encode = encoder(err);
  if (err != cudaSuccess || encode == nullptr)
    return make_error(std::string(op) + ": the driver has no cuTensorMapEncodeTiled (" + cudaGetErrorName(err) + ")");
  map = CUtensorMap{};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, rank, base, dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzled ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error(std::string(op) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")");
  return Status::success();
}

}  // namespace

Status byte_matrix_tensor_map(const void* base, std::uint64_t rows, std::uint64_t cols, std::uint64_t row_stride,
                              std::uint32_t box_rows, std::uint32_t box_cols, TensorMapSwizzle swizzle,
                              CUtensorMap& map) {
  const char* op = "byte_matrix_tensor_map";
  const bool swizzled = swizzle == TensorMapSwizzle::bytes128;
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0 || row_stride % 16 != 0 || rows == 0 || cols == 0 ||
      box_rows == 0 || box_rows > 256 || box_cols == 0 || box_cols > (swizzled ? 128u : 256u) ||
      (!swizzled && box_cols % 16 != 0))
    return make_error(std::string(op) + ": unsupported matrix or box (base 16-byte aligned, row stride " +
                      std::to_string(row_stride) + " a multiple of 16, box " + std::to_string(box_rows) + " x " +
                      std::to_string(box_cols) + ")");
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride};
  const cuuint32_t box[2] = {box_cols, box_rows};
  return encode_bytes(op, 2, const_cast<void*>(base), dims, strides, box, swizzled, map);
}

Status mxfp4_tiled_tensor_map(const void* base, std::uint64_t rows, std::uint64_t groups, std::uint32_t box_row_blocks,
                              CUtensorMap& map) {
  const char* op = "mxfp4_tiled_tensor_map";
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0 || rows == 0 || rows % kMxfp4TileRows != 0 || groups == 0 ||
      box_row_blocks == 0 || box_row_blocks > 256)
    return make_error(std::string(op) + ": unsupported blocks or box (base 16-byte aligned, rows " +
                      std::to_string(rows) + " a positive multiple of 16, box of " + std::to_string(box_row_blocks) +
                      " row blocks)");
  const std::uint64_t row_tiles = static_cast<std::uint64_t>(mxfp4_row_tiles(static_cast<std::int64_t>(groups)));
  constexpr std::uint64_t kRowBytes = kMxfp4TileGroups * 16, kTileBytes = kMxfp4TileUnits * 16;
  const cuuint64_t dims[4] = {kRowBytes, kMxfp4TileRows, row_tiles, rows / kMxfp4TileRows};
  const cuuint64_t strides[3] = {kRowBytes, kTileBytes, row_tiles * kTileBytes};
  const cuuint32_t box[4] = {kRowBytes, kMxfp4TileRows, 1, box_row_blocks};
  return encode_bytes(op, 4, const_cast<void*>(base), dims, strides, box, false, map);
}

}  // namespace day0
