// Programmatic dependent launch (sm_90): a kernel launched through launch_dependent may be scheduled while the
// kernel before it in the stream still runs, so the launch latency between the ~20 small kernels of a decode layer
// overlaps the work before them (inside step graphs too, as programmatic edges). Such a kernel must call
// begin_dependent_grid() before it reads anything an earlier kernel wrote or writes anything an earlier kernel
// reads; loads of what no kernel writes during a step (weights) may come before it. So may loads of what a kernel
// two or more launches back wrote, through L2 (__ldcg): a kernel starts only once every CTA of the one before has
// passed its own wait, so those writers have finished (the down projection's expert ids, written before gate_up).
// The call also lets the next dependent kernel be scheduled. Kernels launched the ordinary way ignore both.
// Whatever an earlier kernel wrote is read with coherent loads (plain, __ldca, __ldcg), never through the
// non-coherent path (__ldg, or a const __restrict__ parameter, which the compiler turns into ld.global.nc): ptxas
// takes those loads as invariant and may move them above the wait (v24: the one-token MoE kernel read a stale x).
// scripts/dependent-nc-loads lists every non-coherent load after a wait, by source line: only weights belong there.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace day0 {

// Process-wide switch (on by default); CudaOps sets it from BackendOptions::dependent_launch.
void set_dependent_launch(bool on);
bool dependent_launch_enabled();

// cudaLaunchKernelEx with the programmatic-serialization attribute when the switch is on, and a grid of
// thread-block clusters of `cluster` CTAs along x when cluster > 0 (grid.x a multiple of it); the launcher checks
// the result as for <<<>>> (D0_CUDA_RETURN_IF_LAUNCH_ERROR).
template <class... Params, class... Args>
void launch_dependent_clusters(void (*kernel)(Params...), dim3 grid, unsigned cluster, dim3 block,
                               std::size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute[2];
  unsigned n = 0;
  if (cluster > 0) {
    attribute[n].id = cudaLaunchAttributeClusterDimension;
    attribute[n].val.clusterDim.x = cluster;
    attribute[n].val.clusterDim.y = 1;
    attribute[n].val.clusterDim.z = 1;
    ++n;
  }
  if (dependent_launch_enabled()) {
    attribute[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = n;
  // The result also lands in cudaGetLastError, which the launchers read.
  (void)cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// launch_dependent_clusters without clusters: a plain grid.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream,
                      Args&&... args) {
  launch_dependent_clusters(kernel, grid, 0, block, shared_bytes, stream, std::forward<Args>(args)...);
}

#ifdef __CUDACC__
// Waits until the kernels before this one have finished and their writes are visible, then lets the next dependent
// kernel be scheduled (its blocks wait in turn). Every thread calls it, before its first dependent access.
__device__ __forceinline__ void begin_dependent_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

}  // namespace day0
