// A named NVTX range for as long as the object lives (the CUDA toolkit's header-only NVTX 3: a no-op unless a tool
// such as Nsight Compute is attached). Benchmarks wrap each measured point in one, so a profiler can pick that
// point's kernels by name (scripts/gpu-profile's GPU_PROFILE_NVTX) instead of counting launches to skip.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace day0 {

class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace day0
