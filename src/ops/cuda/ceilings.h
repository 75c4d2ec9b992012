// The ceilings a benchmark reports against, measured on the GPU it runs on (never taken from a datasheet):
// device-to-device copy bandwidth (read + write bytes per second), and dense BF16 and FP8 matmul rates through
// the same cuBLASLt paths the model uses, at a size large enough to reach the tensor-core peak.
#pragma once

#include <string>

#include "core/status.h"
#include "ops/cuda/cuda_context.h"

namespace day0 {

struct DeviceCeilings {
  std::string device;
  double copy_bytes_per_s = 0;  // 2 x bytes copied / time (each byte is read once and written once)
  double bf16_flops = 0;        // 2 M N K / time
  double fp8_flops = 0;
  std::int64_t gemm_size = 0;   // M = N = K
};

// Takes scratch from the context's arena (released before returning): 2 GiB for the copy, ~0.5 GiB per GEMM.
Result<DeviceCeilings> measure_ceilings(CudaContext& ctx);

}  // namespace day0
