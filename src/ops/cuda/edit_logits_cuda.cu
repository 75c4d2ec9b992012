// Ops::edit_logits on the GPU: the edits travel in the kernel's parameters (no device buffer: a step graph's
// logits sit in step scratch, which an upload would have to avoid), up to kMaxEntries a launch. A CTA a segment
// (one row's consecutive entries in this launch), a thread an id: the first entry of each run of one id applies the
// run in order, with the host's float operations (logit_edits.h), so an edited row's logits are the host sampler's
// bit for bit. Launches follow each other in the stream, so a run cut between two still applies in order.
#include <algorithm>
#include <memory>
#include <string>

#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSegments = 64;
constexpr int kMaxEntries = 2048;  // 24 KB of the 32 KB a launch's parameters may take (sm_70 and later)

struct EditArgs {
  float* logits;
  std::int64_t V;
  std::int32_t seg_row[kMaxSegments];
  std::int32_t seg_begin[kMaxSegments + 1];  // into entries
  LogitEdit entries[kMaxEntries];
};
static_assert(sizeof(EditArgs) <= 32764, "a launch's parameters");

__global__ void __launch_bounds__(kThreads) edit_logits_kernel(const __grid_constant__ EditArgs a) {
  float* row = a.logits + a.seg_row[blockIdx.x] * a.V;
  const int begin = a.seg_begin[blockIdx.x], end = a.seg_begin[blockIdx.x + 1];
  for (int i = begin + static_cast<int>(threadIdx.x); i < end; i += kThreads) {
    const int id = a.entries[i].id;
    if (i > begin && a.entries[i - 1].id == id) continue;  // inside a run: its first entry applies it
    float x = row[id];
    for (int j = i; j < end && a.entries[j].id == id; ++j)
      x = apply_logit_edit(x, a.entries[j].kind, a.entries[j].value);
    row[id] = x;
  }
}

}  // namespace

Status edit_logits_cuda(Tensor& logits, const LogitEdits& edits, cudaStream_t stream) {
  const char* op = "edit_logits_cuda";
  if (logits.dim() != 2 || logits.dtype() != DType::f32 || logits.device() != Device::cuda || !logits.is_contiguous())
    return make_error(std::string(op) + ": logits must be contiguous f32 [rows, vocab] on cuda, got " +
                      std::string(dtype_name(logits.dtype())) + " " + shape_to_string(logits.shape()));
  D0_RETURN_IF_ERROR(check_logit_edits(edits, logits.size(0), logits.size(1), op));
  const auto args = std::make_unique<EditArgs>();  // 24 KB: not on the stack
  EditArgs& a = *args;
  a.logits = logits.data<float>();
  a.V = logits.size(1);
  int segments = 0, used = 0;
  const auto launch = [&]() -> Status {
    if (segments == 0) return Status::success();
    edit_logits_kernel<<<static_cast<unsigned>(segments), kThreads, 0, stream>>>(a);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("edit_logits_kernel");
    segments = 0, used = 0;
    return Status::success();
  };
  for (std::size_t r = 0; r < edits.rows.size(); ++r) {
    for (std::int32_t i = edits.begins[r]; i < edits.begins[r + 1];) {
      if (segments == kMaxSegments || used == kMaxEntries) D0_RETURN_IF_ERROR(launch());
      const int n = std::min(edits.begins[r + 1] - i, kMaxEntries - used);
      a.seg_row[segments] = edits.rows[r];
      a.seg_begin[segments] = used;
      std::copy_n(edits.entries.begin() + i, n, a.entries + used);
      used += n, i += n;
      a.seg_begin[++segments] = used;
    }
  }
  return launch();
}

}  // namespace day0
