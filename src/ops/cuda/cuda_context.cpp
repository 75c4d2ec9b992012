// CudaContext: device selection, stream, arena and cuBLASLt handle, created together and torn down in reverse.
#include "ops/cuda/cuda_context.h"

#include <cstdio>

#include "ops/cuda/cublaslt_library.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {

Result<std::unique_ptr<CudaContext>> CudaContext::create(const CudaContextOptions& options) {
  int n_devices = 0;
  D0_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n_devices));
  if (options.device < 0 || options.device >= n_devices)
    return make_error("cuda context: device " + std::to_string(options.device) + " does not exist (" +
                      std::to_string(n_devices) + " CUDA devices)");
  if (options.cublas_workspace_bytes > options.arena_bytes)
    return make_error("cuda context: cuBLASLt workspace (" + format_bytes(options.cublas_workspace_bytes) +
                      ") does not fit the arena (" + format_bytes(options.arena_bytes) + ")");
  std::unique_ptr<CudaContext> ctx(new CudaContext());
  ctx->device_ = options.device;
  D0_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  D0_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&ctx->props_, options.device));
  // Non-blocking: our stream must not serialise against the legacy default stream other libraries use.
  D0_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  D0_RETURN_IF_ERROR(load_cublaslt());
  D0_CUDA_RETURN_IF_ERROR(cublaslt().create(&ctx->cublas_));
  D0_ASSIGN_OR_RETURN(ctx->arena_, DeviceArena::create(options.arena_bytes));
  // The workspace is the arena's first allocation, before any step's mark, so it is never released.
  if (options.cublas_workspace_bytes > 0) {
    D0_ASSIGN_OR_RETURN(ctx->cublas_workspace_,
                        ctx->arena_->allocate_bytes(options.cublas_workspace_bytes, "cuBLASLt workspace"));
  }
  ctx->cublas_workspace_bytes_ = options.cublas_workspace_bytes;
  return ctx;
}

CudaContext::~CudaContext() {
  // Errors here cannot be returned; the work on the stream is finished before its memory goes.
  if (stream_) cudaStreamSynchronize(stream_);
  if (cublas_) cublaslt().destroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
  arena_.reset();
}

std::string CudaContext::device_summary() const {
  char buf[512];  // the name is at most 256 characters
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %s, %s L2)", props_.name, props_.major, props_.minor,
                props_.multiProcessorCount, format_bytes(props_.totalGlobalMem).c_str(),
                format_bytes(static_cast<std::size_t>(props_.l2CacheSize)).c_str());
  return buf;
}

Status CudaContext::synchronize() const {
  D0_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  D0_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::success();
}

}  // namespace day0
