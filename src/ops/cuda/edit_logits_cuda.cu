// Ops::edit_logits on the GPU: the edits travel in the kernel's parameters (no device buffer: a step graph's
// logits sit in step scratch, which an upload would have to avoid), up to kMaxEntries a launch. A CTA a segment
// (one row's consecutive entries in this launch), a thread an id: the first entry of each run of one id applies the
// run in order, with the host's float operations (logit_edits.h), so an edited row's logits are the host sampler's
// bit for bit. Launches follow each other in the stream, so a run cut between two still applies in order. A row
// with a pending token is cut only between two ids, each of its segments owning an id range (together [0, V)): the
// segment whose range holds the token applies apply_pending_edits, by the token's run or, where it has none, thread 0.
#include <algorithm>
#include <memory>
#include <string>

#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/cuda/cuda_status.h"

namespace day0 {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSegments = 64;
constexpr int kMaxEntries = 1792;  // 28 KB of the 32 KB a launch's parameters may take (sm_70 and later)

struct EditArgs {
  float* logits;
  std::int64_t V;
  const std::int32_t* tokens;  // [R], where a segment's pending token is on
  std::int32_t seg_row[kMaxSegments];
  std::int32_t seg_begin[kMaxSegments + 1];  // into entries
  PendingToken seg_pending[kMaxSegments];
  std::int32_t seg_lo[kMaxSegments], seg_hi[kMaxSegments];  // a pending row's segment: its token's ids, [lo, hi)
  LogitEdit entries[kMaxEntries];
};
static_assert(sizeof(EditArgs) <= 32764, "a launch's parameters");

__global__ void __launch_bounds__(kThreads) edit_logits_kernel(const __grid_constant__ EditArgs a) {
  __shared__ int pending_found;
  const int r = a.seg_row[blockIdx.x];
  float* row = a.logits + r * a.V;
  const int begin = a.seg_begin[blockIdx.x], end = a.seg_begin[blockIdx.x + 1];
  const PendingToken& pending = a.seg_pending[blockIdx.x];
  int t = -1;  // the pending token: tokens come from the picks kernels of the step before (plain loads)
  if (pending.on) {
    t = a.tokens[r];
    if (t < 0 || t >= a.V) t = -1;  // an unusable row's placeholder: greedy_tokens reported it
    if (t < a.seg_lo[blockIdx.x] || t >= a.seg_hi[blockIdx.x]) t = -1;  // another segment's
  }
  if (threadIdx.x == 0) pending_found = 0;
  __syncthreads();
  for (int i = begin + static_cast<int>(threadIdx.x); i < end; i += kThreads) {
    const int id = a.entries[i].id;
    if (i > begin && a.entries[i - 1].id == id) continue;  // inside a run: its first entry applies it
    int n = 1;
    while (i + n < end && a.entries[i + n].id == id) ++n;
    float x = row[id];
    if (id == t) {
      x = apply_pending_edits(x, &a.entries[i], n, pending);
      pending_found = 1;
    } else {
      for (int j = i; j < i + n; ++j) x = apply_logit_edit(x, a.entries[j].kind, a.entries[j].value);
    }
    row[id] = x;
  }
  __syncthreads();
  if (t >= 0 && threadIdx.x == 0 && !pending_found) row[t] = apply_pending_edits(row[t], nullptr, 0, pending);
}

}  // namespace

Status edit_logits_cuda(Tensor& logits, const LogitEdits& edits, const Tensor* tokens, cudaStream_t stream) {
  const char* op = "edit_logits_cuda";
  if (logits.dim() != 2) return make_error(std::string(op) + ": logits must be [rows, vocab]");
  const std::int64_t R = logits.size(0);
  D0_RETURN_IF_ERROR(check_cuda_tensor(logits, op, "logits", {DType::f32}, {R, logits.size(1)}));
  D0_RETURN_IF_ERROR(check_logit_edits(edits, R, logits.size(1), op));
  const bool pending = edits.has_pending();
  if (pending) {
    if (!tokens) return make_error(std::string(op) + ": pending tokens need the step's tokens");
    D0_RETURN_IF_ERROR(check_cuda_tensor(*tokens, op, "tokens", {DType::i32}, {R}));
  }
  const auto args = std::make_unique<EditArgs>();  // 30 KB: not on the stack
  EditArgs& a = *args;
  a.logits = logits.data<float>();
  a.V = logits.size(1);
  a.tokens = pending ? tokens->data<std::int32_t>() : nullptr;
  int segments = 0, used = 0;
  const auto launch = [&]() -> Status {
    if (segments == 0) return Status::success();
    edit_logits_kernel<<<static_cast<unsigned>(segments), kThreads, 0, stream>>>(a);
    D0_CUDA_RETURN_IF_LAUNCH_ERROR("edit_logits_kernel");
    segments = 0, used = 0;
    return Status::success();
  };
  const std::vector<LogitEdit>& entries = edits.entries;
  for (std::size_t r = 0; r < edits.rows.size(); ++r) {
    const PendingToken p = edits.pending.empty() ? PendingToken{} : edits.pending[r];
    const std::int32_t b = edits.begins[r], e = edits.begins[r + 1];
    for (std::int32_t i = b; i < e || (p.on && i == b);) {  // a pending row with no entries still needs its segment
      if (segments == kMaxSegments || used == kMaxEntries) D0_RETURN_IF_ERROR(launch());
      int n = std::min(e - i, kMaxEntries - used);
      if (p.on) {  // cut between two ids: the token's run stays in one segment
        while (n > 0 && i + n < e && entries[i + n].id == entries[i + n - 1].id) --n;
        if (n == 0 && i < e) {
          if (used == 0)
            return make_error(std::string(op) + ": row " + std::to_string(edits.rows[r]) + " has more than " +
                              std::to_string(kMaxEntries) + " edits of id " + std::to_string(entries[i].id));
          D0_RETURN_IF_ERROR(launch());
          continue;
        }
      }
      a.seg_row[segments] = edits.rows[r];
      a.seg_begin[segments] = used;
      a.seg_pending[segments] = p;
      a.seg_lo[segments] = i == b ? 0 : entries[i].id;
      a.seg_hi[segments] = i + n < e ? entries[i + n].id : static_cast<std::int32_t>(a.V);
      std::copy_n(entries.begin() + i, n, a.entries + used);
      used += n, i += n;
      a.seg_begin[++segments] = used;
      if (n == 0) break;
    }
  }
  return launch();
}

}  // namespace day0
