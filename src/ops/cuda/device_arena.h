// DeviceArena: all device memory of a run taken at start-up with ONE cudaMalloc, handed out by bump
// allocation as device Tensors (256-byte aligned); mark()/release() rewinds per-step scratch, so a forward
// step never calls cudaMalloc/cudaFree. used/peak/capacity feed the memory report.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

class DeviceArena {
 public:
  // cuBLASLt and vectorised kernels want 16 bytes; 256 matches cudaMalloc's own guarantee, so a tensor
  // carved from the arena is as aligned as one allocated alone.
  static constexpr std::size_t kAlignment = 256;

  // A position to rewind to: everything allocated after mark() is released by release(mark).
  struct Mark {
    std::size_t offset = 0;
  };

  // Takes `capacity_bytes` of device memory on the current device with one cudaMalloc.
  static Result<std::unique_ptr<DeviceArena>> create(std::size_t capacity_bytes);
  // An arena over memory someone else owns and keeps alive (a sub-range, or a host buffer in bookkeeping
  // tests); tensors are tagged `device`. Frees nothing.
  static std::unique_ptr<DeviceArena> over(void* base, std::size_t capacity_bytes, Device device = Device::cuda);

  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // A contiguous tensor of `shape` and `dtype` (contents undefined); `what` names it in errors.
  Result<Tensor> allocate(const Shape& shape, DType dtype, const std::string& what);
  Result<void*> allocate_bytes(std::size_t bytes, const std::string& what);

  Mark mark() const { return Mark{used_}; }
  // Rewinds to `m`; tensors allocated after it must no longer be used. A mark beyond the current position
  // (released twice, or out of order) is an error.
  Status release(Mark m);

  std::size_t used_bytes() const { return used_; }
  std::size_t peak_bytes() const { return peak_; }
  std::size_t capacity_bytes() const { return capacity_; }
  std::size_t free_bytes() const { return capacity_ - used_; }
  Device device() const { return device_; }
  // "used 1.2 GiB, peak 3.4 GiB of 100.0 GiB"
  std::string report() const;

 private:
  DeviceArena(std::shared_ptr<void> base, std::size_t capacity, Device device)
      : base_(std::move(base)), capacity_(capacity), device_(device) {}

  // Owns the cudaMalloc (deleter cudaFree); tensors share it, so memory outlives the arena while they do.
  std::shared_ptr<void> base_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
  Device device_ = Device::cuda;
};

// "1.50 GiB", "12.0 MiB", "512 B" for reports and errors.
std::string format_bytes(std::size_t bytes);

}  // namespace day0
