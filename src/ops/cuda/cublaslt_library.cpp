// Loads cuBLASLt with dlopen and resolves each call day0 makes; a missing library or symbol is one Error.
#include "ops/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace day0 {
namespace {

// libcublasLt.so.13 for CUDA 13: the soname carries the major version of the headers we compiled against.
const std::string kSoname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

CublasLtLibrary g_library{};
Status g_outcome = Status::success();
std::once_flag g_once;

template <class Fn>
Status resolve(void* handle, const char* symbol, Fn& fn) {
  void* address = dlsym(handle, symbol);
  if (address == nullptr) return make_error("cuBLASLt: " + kSoname + " has no symbol " + symbol);
  fn = reinterpret_cast<Fn>(address);
  return Status::success();
}

Status open_library() {
  // Never closed: the handles and plans made through it live until the process ends.
  void* handle = dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return make_error("cuBLASLt: cannot load " + kSoname + " (" + (why ? why : "no reason given") +
                      "); it ships with the CUDA toolkit, put its directory on LD_LIBRARY_PATH");
  }
  CublasLtLibrary& l = g_library;
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtCreate", l.create));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtDestroy", l.destroy));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmul", l.matmul));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulAlgoGetHeuristic", l.algo_get_heuristic));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulDescCreate", l.desc_create));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulDescDestroy", l.desc_destroy));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulDescSetAttribute", l.desc_set_attribute));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulPreferenceCreate", l.preference_create));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulPreferenceDestroy", l.preference_destroy));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatmulPreferenceSetAttribute", l.preference_set_attribute));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatrixLayoutCreate", l.layout_create));
  D0_RETURN_IF_ERROR(resolve(handle, "cublasLtMatrixLayoutDestroy", l.layout_destroy));
  return Status::success();
}

}  // namespace

Status load_cublaslt() {
  std::call_once(g_once, [] { g_outcome = open_library(); });
  return g_outcome;
}

const CublasLtLibrary& cublaslt() {
  if (g_library.layout_destroy == nullptr) {
    std::fprintf(stderr, "day0: cuBLASLt called before load_cublaslt() succeeded\n");
    std::abort();
  }
  return g_library;
}

}  // namespace day0
