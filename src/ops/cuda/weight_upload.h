// Weight upload: checkpoint tensors (host, usually mmap views of the shards) copied into the device arena by
// several reader threads at once. Each reader owns a CUDA stream and two pinned staging buffers: it copies (or
// converts) a chunk from the mapped file into one buffer while the other is in flight to the device, so disk
// reads, host copies and PCIe transfers overlap. Readers take contiguous address ranges, i.e. whole shards or
// runs of one shard, so each reads its files sequentially.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"
#include "ops/ops.h"

namespace day0 {

struct UploadItem {
  Tensor host;    // contiguous, on the cpu
  Tensor device;  // allocated, contiguous, same shape; dtype equal, or bf16 from an f32/f16 host tensor
};

struct UploadOptions {
  int max_readers = 8;
  std::size_t staging_bytes = std::size_t(32) << 20;  // per buffer; two per reader
};

struct UploadResult {
  std::uint64_t bytes_read = 0, bytes_written = 0;
  double seconds = 0;
  int readers = 0;
};

// Copies every item; `progress` (bytes read so far, total) is called from this thread about ten times a second
// and once at the end. Returns after all copies have landed on the device.
Result<UploadResult> upload_tensors(std::vector<UploadItem>& items, int device, const UploadOptions& options,
                                    const ProgressFn& progress);

}  // namespace day0
