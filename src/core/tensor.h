// Tensor: shape, strides, dtype, device, and owned or borrowed storage.
// Borrowed tensors (e.g. views into an mmap'd checkpoint) keep their owner alive through a shared handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace day0 {

enum class Device : std::uint8_t { cpu, cuda };
std::string_view device_name(Device d);

using Shape = std::vector<std::int64_t>;
std::string shape_to_string(const Shape& shape);
// Number of elements, or an error if a dimension is negative or the product overflows int64.
Result<std::int64_t> shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Allocates zero-filled, contiguous CPU storage owned by the tensor.
  static Tensor zeros(Shape shape, DType dtype);
  // Wraps memory someone else owns; `owner` is kept alive as long as any tensor shares it.
  static Tensor borrow(void* data, Shape shape, DType dtype, std::shared_ptr<const void> owner,
                       Device device = Device::cpu);

  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  std::int64_t size(int d) const { return shape_.at(d < 0 ? d + dim() : d); }
  std::int64_t numel() const;
  std::size_t nbytes() const;  // of the elements in view, for contiguous tensors
  bool defined() const { return data_ != nullptr || numel() == 0; }
  bool is_contiguous() const;
  bool owns_storage() const { return owned_; }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T> T* data() { return static_cast<T*>(data_); }
  template <class T> const T* data() const { return static_cast<const T*>(data_); }

  // Same storage, new shape (contiguous tensors only; numel must match).
  Tensor view(Shape shape) const;
  // Rows [begin, end) of dimension 0, sharing storage.
  Tensor slice_rows(std::int64_t begin, std::int64_t end) const;
  // `parts` as one tensor of their rows when they lie back to back in one storage (same owner, device, dtype and
  // row shape, each contiguous, each starting where the one before ends): what one GEMM may read for several
  // weights placed adjacently. Undefined (Tensor()) otherwise.
  static Tensor adjacent_rows(const std::vector<Tensor>& parts);
  // A contiguous f32 copy of any float tensor (bf16, f16, fp8, f32, f64) on the CPU.
  Tensor to_f32() const;
  // A deep, contiguous, owned copy.
  Tensor clone() const;

 private:
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
  Shape shape_;
  Shape strides_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  bool owned_ = false;
};

}  // namespace day0
