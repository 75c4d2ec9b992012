// CudaContext: the device a run uses, its one stream, the device arena, and a cuBLASLt handle with its
// workspace carved from the arena. Created once at start-up; everything per step borrows from it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "ops/cuda/device_arena.h"

namespace day0 {

struct CudaContextOptions {
  int device = 0;
  std::size_t arena_bytes = std::size_t(1) << 30;
  // NVIDIA recommends 32 MiB of cuBLASLt workspace on Hopper; some algorithms need it for split-K.
  std::size_t cublas_workspace_bytes = std::size_t(32) << 20;
};

class CudaContext {
 public:
  static Result<std::unique_ptr<CudaContext>> create(const CudaContextOptions& options);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublas() const { return cublas_; }
  void* cublas_workspace() const { return cublas_workspace_; }
  std::size_t cublas_workspace_bytes() const { return cublas_workspace_bytes_; }
  DeviceArena& arena() { return *arena_; }
  const cudaDeviceProp& properties() const { return props_; }
  int sm_count() const { return props_.multiProcessorCount; }

  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, 50.0 MiB L2)" for reports.
  std::string device_summary() const;
  // Waits for the stream; asynchronous kernel faults surface here as an Error.
  Status synchronize() const;

 private:
  CudaContext() = default;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::size_t cublas_workspace_bytes_ = 0;
  cudaDeviceProp props_{};
  std::unique_ptr<DeviceArena> arena_;
};

}  // namespace day0
