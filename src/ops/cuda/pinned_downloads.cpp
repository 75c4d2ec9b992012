#include "ops/cuda/pinned_downloads.h"

#include <bit>
#include <string>

#include <cuda_runtime.h>

namespace day0 {

Result<std::shared_ptr<void>> PinnedDownloads::allocate(std::size_t bytes) {
  void* p = nullptr;
  if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault); e != cudaSuccess)
    return make_error("cuda: pinning " + std::to_string(bytes) + " host bytes for downloads failed: " +
                      cudaGetErrorString(e));
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

Result<std::shared_ptr<void>> PinnedDownloads::take(std::size_t bytes) {
  if (bytes > kMaxPooledBytes) return std::shared_ptr<void>();
  // use_count 1: only this pool holds it. Only this pool hands out new references, so it cannot rise meanwhile.
  Buffer* free_smallest = nullptr;
  for (Buffer& b : buffers_) {
    if (b.memory.use_count() != 1) continue;
    if (b.bytes >= bytes) return b.memory;
    if (!free_smallest || b.bytes < free_smallest->bytes) free_smallest = &b;
  }
  // Powers of two from 1 MiB: a few sizes of logits (one per batch bucket) settle into a few buffers.
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(bytes, std::size_t(1) << 20));
  D0_ASSIGN_OR_RETURN(std::shared_ptr<void> memory, allocate(size));
  if (buffers_.size() < kMaxBuffers)
    buffers_.push_back({memory, size});
  else if (free_smallest)
    *free_smallest = {memory, size};
  // else every pooled buffer is borrowed: this one is freed when its last tensor goes.
  return memory;
}

}  // namespace day0
