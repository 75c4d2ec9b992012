// Timing on the device for benchmarks: CUDA events on the context's stream around back-to-back calls, so a
// kernel of a few microseconds is timed without the host's launch gaps between samples.
#pragma once

#include <algorithm>
#include <vector>

#include "core/status.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {

// Median seconds per call of fn over `samples` samples of `calls_per_sample` back-to-back calls, after one
// warm-up sample.
template <class Fn>
Result<double> time_median(CudaContext& ctx, int samples, Fn fn, int calls_per_sample = 1) {
  cudaEvent_t a, b;
  D0_CUDA_RETURN_IF_ERROR(cudaEventCreate(&a));
  D0_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b));
  std::vector<float> ms;
  Status st = Status::success();
  for (int c = 0; st.ok() && c < calls_per_sample; ++c) st = fn();
  for (int i = 0; st.ok() && i < samples; ++i) {
    cudaEventRecord(a, ctx.stream());
    for (int c = 0; st.ok() && c < calls_per_sample; ++c) st = fn();
    cudaEventRecord(b, ctx.stream());
    if (cudaEventSynchronize(b) != cudaSuccess) st = make_error("timing: a timed run failed on the device");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t / float(calls_per_sample));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!st.ok()) return st.error();
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3;
}

// The same for calls captured once into a CUDA graph and replayed: the device time of the kernels alone, without
// the host's per-launch cost (as a decode step captured in a graph runs). fn must only enqueue work on the
// context's stream (no synchronisation, no host reads).
template <class Fn>
Result<double> time_graph_median(CudaContext& ctx, int samples, Fn fn, int calls_per_sample) {
  cudaGraph_t graph = nullptr;
  D0_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal));
  Status st = Status::success();
  for (int c = 0; st.ok() && c < calls_per_sample; ++c) st = fn();
  const cudaError_t end = cudaStreamEndCapture(ctx.stream(), &graph);
  if (!st.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return st.error();
  }
  D0_CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  D0_CUDA_RETURN_IF_ERROR(inst);
  auto r = time_median(ctx, samples, [&]() -> Status {
    D0_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, ctx.stream()));
    return Status::success();
  });
  cudaGraphExecDestroy(exec);
  if (!r.ok()) return r.error();
  return *r / calls_per_sample;
}

}  // namespace day0
