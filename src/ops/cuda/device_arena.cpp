// DeviceArena: one cudaMalloc at start-up, bump allocation, mark/release for per-step scratch.
#include "ops/cuda/device_arena.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "ops/cuda/cuda_status.h"

namespace day0 {

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : "%.1f %s", v, units[u]);
  return buf;
}

Result<std::unique_ptr<DeviceArena>> DeviceArena::create(std::size_t capacity_bytes) {
  if (capacity_bytes == 0) return make_error("device arena: capacity must be positive");
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, capacity_bytes);
  if (err != cudaSuccess) {
    std::size_t free_b = 0, total_b = 0;
    (void)cudaGetLastError();  // clear the allocation error so later calls do not report it
    (void)cudaMemGetInfo(&free_b, &total_b);
    return make_error("device arena: cudaMalloc of " + format_bytes(capacity_bytes) + " failed (" +
                      cudaGetErrorString(err) + "); the device has " + format_bytes(free_b) + " free of " +
                      format_bytes(total_b));
  }
  std::shared_ptr<void> base(p, [](void* q) { cudaFree(q); });
  return std::unique_ptr<DeviceArena>(new DeviceArena(std::move(base), capacity_bytes, Device::cuda));
}

std::unique_ptr<DeviceArena> DeviceArena::over(void* base, std::size_t capacity_bytes, Device device) {
  // A non-owning handle: the aliasing constructor gives a shared_ptr with no control block to free.
  return std::unique_ptr<DeviceArena>(new DeviceArena(std::shared_ptr<void>(std::shared_ptr<void>(), base),
                                                      capacity_bytes, device));
}

Result<void*> DeviceArena::allocate_bytes(std::size_t bytes, const std::string& what) {
  // The base itself may be unaligned when the arena lives over borrowed memory: align the address.
  const auto base_addr = reinterpret_cast<std::uintptr_t>(base_.get());
  const std::uintptr_t aligned_addr = (base_addr + used_ + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t offset = aligned_addr - base_addr;
  if (offset > capacity_ || bytes > capacity_ - offset)
    return make_error("device arena: cannot allocate " + format_bytes(bytes) + " for " + what + ": " +
                      format_bytes(offset > capacity_ ? 0 : capacity_ - offset) + " left of " +
                      format_bytes(capacity_) + " (used " + format_bytes(used_) + ")");
  used_ = offset + bytes;
  peak_ = std::max(peak_, used_);
  return static_cast<void*>(static_cast<char*>(base_.get()) + offset);
}

Result<Tensor> DeviceArena::allocate(const Shape& shape, DType dtype, const std::string& what) {
  const Result<std::int64_t> numel = shape_numel(shape);
  if (!numel.ok()) return make_error("device arena: " + what + ": " + numel.error().message);
  // Same byte count as Tensor::nbytes (sub-byte dtypes round up).
  const std::size_t bytes = static_cast<std::size_t>((*numel * dtype_bits(dtype) + 7) / 8);
  D0_ASSIGN_OR_RETURN(void* p, allocate_bytes(bytes, what + " " + shape_to_string(shape) + " " +
                                                          std::string(dtype_name(dtype))));
  return Tensor::borrow(p, shape, dtype, base_, device_);
}

Status DeviceArena::release(Mark m) {
  if (m.offset > used_)
    return make_error("device arena: release to offset " + std::to_string(m.offset) +
                      " which is past the current position " + std::to_string(used_) +
                      " (a mark released twice or out of order)");
  used_ = m.offset;
  return Status::success();
}

std::string DeviceArena::report() const {
  return "used " + format_bytes(used_) + ", peak " + format_bytes(peak_) + " of " + format_bytes(capacity_);
}

}  // namespace day0
