// PinnedDownloads: reusable page-locked host buffers that downloads land in. A pageable destination costs a fresh
// zeroed allocation (page faults) and a staged copy per download: at batch 64 the f32 logits are 51 MB a decode
// step, which took longer than the step's kernels. A buffer is handed out again once no tensor borrows it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/status.h"

namespace day0 {

class PinnedDownloads {
 public:
  // Downloads larger than this stay pageable: pinning a buffer that large would hold host memory for one call.
  static constexpr std::size_t kMaxPooledBytes = std::size_t(128) << 20;
  static constexpr std::size_t kMaxBuffers = 4;

  // A pinned buffer of at least `bytes` that no live tensor borrows, or nullptr where `bytes` is above
  // kMaxPooledBytes. Keep the returned pointer alive for as long as the data is read.
  Result<std::shared_ptr<void>> take(std::size_t bytes);
  // One page-locked buffer outside the pool, freed with its last reference.
  static Result<std::shared_ptr<void>> allocate(std::size_t bytes);

 private:
  struct Buffer {
    std::shared_ptr<void> memory;
    std::size_t bytes = 0;
  };
  std::vector<Buffer> buffers_;
};

}  // namespace day0
