// cuBLASLt, opened on first use instead of linked: the library is 540 MB and loading it costs every process
// ~0.4 s (0.6 s under AddressSanitizer) before main, which CPU-only runs of day0 and every test process paid.
// CudaContext::create loads it; the GEMMs call it through cublaslt(), the table of the calls day0 makes.
#pragma once

#include <cublasLt.h>

#include "core/status.h"

namespace day0 {

struct CublasLtLibrary {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&::cublasLtMatmulDescCreate) desc_create;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy;
};

// Opens libcublasLt of the CUDA major version day0 was built with (once; later calls return the first
// outcome). The error names the library and the loader's reason.
Status load_cublaslt();

// The loaded table; only valid after load_cublaslt() succeeded (every CudaContext has), aborts otherwise.
const CublasLtLibrary& cublaslt();

}  // namespace day0
