// CPU backend memory: heap tensors for caches and activations; checkpoint weights used where they are mapped.
#include <cstring>
#include <string>

#include "ops/cpu/cpu_ops.h"

namespace day0 {

Result<NamedTensors> CpuOps::place_weights(const NamedTensors& host, const WeightRoles& /*roles*/,
                                           const ProgressFn& progress) {
  std::uint64_t total = 0;
  for (const auto& [name, t] : host) {
    if (t.device() != Device::cpu) return make_error("place weights: " + name + " is not on the cpu");
    total += t.nbytes();
  }
  weight_bytes_ = total;
  if (progress) progress(total, total);
  return host;
}

static Result<Tensor> heap_tensor(const Shape& shape, DType dtype, const std::string& what) {
  auto n = shape_numel(shape);
  if (!n.ok()) return make_error("allocate " + what + ": " + n.error().message);
  return Tensor::zeros(shape, dtype);
}

Result<Tensor> CpuOps::allocate(const Shape& shape, DType dtype, const std::string& what) {
  D0_ASSIGN_OR_RETURN(Tensor t, heap_tensor(shape, dtype, what));
  allocated_bytes_ += t.nbytes();
  return t;
}

Result<Tensor> CpuOps::scratch(const Shape& shape, DType dtype, const std::string& what) {
  return heap_tensor(shape, dtype, what);
}

Result<Tensor> CpuOps::upload(const Tensor& host, const std::string& what) {
  if (host.device() != Device::cpu) return make_error("upload " + what + ": tensor is not on the cpu");
  return host.is_contiguous() ? host : host.clone();
}

Result<Tensor> CpuOps::download(const Tensor& t) { return t; }

Status CpuOps::copy(const Tensor& src, Tensor& dst) {
  if (src.shape() != dst.shape() || src.dtype() != dst.dtype() || !src.is_contiguous() || !dst.is_contiguous() ||
      src.device() != Device::cpu || dst.device() != Device::cpu)
    return make_error("copy: source " + shape_to_string(src.shape()) + " and destination " +
                      shape_to_string(dst.shape()) + " must be contiguous cpu tensors of one shape and dtype");
  if (src.nbytes() > 0) std::memcpy(dst.raw(), src.raw(), src.nbytes());
  return Status::success();
}

std::vector<MemoryUse> CpuOps::memory_report() const {
  return {{"weights", weight_bytes_, "used in place (the checkpoint mapped, or synthetic tensors)"},
          {"caches and tables", allocated_bytes_, "heap"}};
}

}  // namespace day0
