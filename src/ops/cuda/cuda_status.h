// CUDA and cuBLASLt error codes turned into day0 Errors that name the failed call, its file and line.
// D0_CUDA_RETURN_IF_ERROR(call) wraps runtime and cuBLASLt calls; D0_CUDA_RETURN_IF_LAUNCH_ERROR(name) follows
// every kernel launch, since a launch reports a bad configuration only through cudaGetLastError.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace day0 {

inline bool cuda_call_ok(cudaError_t err) { return err == cudaSuccess; }
inline bool cuda_call_ok(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; }

// Our own table: cublasGetStatusName lives in libcublas, which day0 does not otherwise link.
inline const char* cublas_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE (unsupported shape, type or alignment)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_<unknown>";
  }
}

inline Error cuda_call_error(cudaError_t err, const char* call, const char* file, int line) {
  return make_error(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") in " +
                    call + " at " + file + ":" + std::to_string(line));
}

inline Error cuda_call_error(cublasStatus_t st, const char* call, const char* file, int line) {
  return make_error(std::string("cuBLASLt error ") + cublas_status_name(st) + " (" + std::to_string(int(st)) +
                    ") in " + call + " at " + file + ":" + std::to_string(line));
}

// A Status for code that wants to keep going (tests, destructors that log).
template <class Code>
Status cuda_call_status(Code code, const char* call, const char* file, int line) {
  if (cuda_call_ok(code)) return Status::success();
  return cuda_call_error(code, call, file, line);
}

}  // namespace day0

// Returns an Error (so it works in functions returning Status or Result<T>) when a CUDA runtime or cuBLASLt
// call fails; the message carries the call's text, file and line.
#define D0_CUDA_RETURN_IF_ERROR(call)                                                  \
  do {                                                                                 \
    const auto d0_cuda_code_ = (call);                                                 \
    if (!::day0::cuda_call_ok(d0_cuda_code_))                                          \
      return ::day0::cuda_call_error(d0_cuda_code_, #call, __FILE__, __LINE__);        \
  } while (0)

// After every <<<...>>>: a bad grid, block or shared-memory size is reported only here. Asynchronous faults
// inside the kernel surface at the next synchronising call, which is wrapped in D0_CUDA_RETURN_IF_ERROR too.
#define D0_CUDA_RETURN_IF_LAUNCH_ERROR(kernel_name)                                              \
  do {                                                                                           \
    const cudaError_t d0_launch_err_ = cudaGetLastError();                                       \
    if (d0_launch_err_ != cudaSuccess)                                                           \
      return ::day0::cuda_call_error(d0_launch_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
