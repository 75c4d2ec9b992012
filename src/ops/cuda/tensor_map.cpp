// byte_matrix_tensor_map: see tensor_map.h.
#include "ops/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

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

// Rank 2 ({cols, rows}) or 3 ({cols, rows, matrices}).
Status encode_bytes(const char* op, const void* base, std::uint64_t matrices, std::uint64_t rows, std::uint64_t cols,
                    std::uint64_t row_stride, std::uint32_t box_rows, std::uint32_t box_cols, TensorMapSwizzle swizzle,
                    int rank, CUtensorMap& map) {
  const bool swizzled = swizzle == TensorMapSwizzle::bytes128;
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0 || row_stride % 16 != 0 || rows == 0 || cols == 0 ||
      matrices == 0 || box_rows == 0 || box_rows > 256 || box_cols == 0 || box_cols > (swizzled ? 128u : 256u) ||
      (!swizzled && box_cols % 16 != 0))
    return make_error(std::string(op) + ": unsupported matrix or box (base 16-byte aligned, row stride " +
                      std::to_string(row_stride) + " a multiple of 16, box " + std::to_string(box_rows) + " x " +
                      std::to_string(box_cols) + ")");
  cudaError_t err = cudaSuccess;
  const auto encode = encoder(err);
  if (err != cudaSuccess || encode == nullptr)
    return make_error(std::string(op) + ": the driver has no cuTensorMapEncodeTiled (" + cudaGetErrorName(err) + ")");
  map = CUtensorMap{};
  const cuuint64_t dims[3] = {cols, rows, matrices};
  const cuuint64_t strides[2] = {row_stride, row_stride * rows};
  const cuuint32_t box[3] = {box_cols, box_rows, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, static_cast<cuuint32_t>(rank),
                            const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzled ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return make_error(std::string(op) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")");
  return Status::success();
}

}  // namespace

Status byte_matrix_tensor_map(const void* base, std::uint64_t rows, std::uint64_t cols, std::uint64_t row_stride,
                              std::uint32_t box_rows, std::uint32_t box_cols, TensorMapSwizzle swizzle,
                              CUtensorMap& map) {
  return encode_bytes("byte_matrix_tensor_map", base, 1, rows, cols, row_stride, box_rows, box_cols, swizzle, 2, map);
}

Status byte_matrices_tensor_map(const void* base, std::uint64_t matrices, std::uint64_t rows, std::uint64_t cols,
                                std::uint64_t row_stride, std::uint32_t box_rows, std::uint32_t box_cols,
                                TensorMapSwizzle swizzle, CUtensorMap& map) {
  return encode_bytes("byte_matrices_tensor_map", base, matrices, rows, cols, row_stride, box_rows, box_cols, swizzle,
                      3, map);
}

}  // namespace day0
