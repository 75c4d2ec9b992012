// Tensor storage, views and conversions.
#include "core/tensor.h"

#include <cassert>
#include <cstring>
#include <limits>

namespace day0 {

std::string_view device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::int64_t> shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return make_error("negative dimension in shape " + shape_to_string(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      return make_error("shape " + shape_to_string(shape) + " overflows int64 element count");
    n *= d;
  }
  return n;
}

static Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  t.dtype_ = dtype;
  t.owned_ = true;
  const size_t bytes = t.nbytes();
  // 64-byte alignment keeps vector loads aligned; the owner frees with the matching delete.
  auto* mem = new (std::align_val_t(64)) std::byte[bytes == 0 ? 1 : bytes];
  std::memset(mem, 0, bytes == 0 ? 1 : bytes);
  t.owner_ = std::shared_ptr<const void>(mem, [](const void* p) {
    ::operator delete[](const_cast<void*>(p), std::align_val_t(64));
  });
  t.data_ = mem;
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, std::shared_ptr<const void> owner, Device device) {
  Tensor t;
  t.data_ = data;
  t.owner_ = std::move(owner);
  t.shape_ = std::move(shape);
  t.strides_ = contiguous_strides(t.shape_);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

size_t Tensor::nbytes() const {
  return static_cast<size_t>((numel() * dtype_bits(dtype_) + 7) / 8);
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::view(Shape shape) const {
  Tensor t = *this;
  assert(is_contiguous());
  t.shape_ = std::move(shape);
  assert(t.numel() == numel());
  t.strides_ = contiguous_strides(t.shape_);
  return t;
}

Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t end) const {
  assert(dim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0] && is_contiguous());
  Tensor t = *this;
  t.shape_[0] = end - begin;
  const std::int64_t row_elems = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.data_ = static_cast<std::byte*>(data_) + begin * row_elems * dtype_bits(dtype_) / 8;
  return t;
}

Tensor Tensor::clone() const {
  assert(is_contiguous() && device_ == Device::cpu);
  Tensor t = zeros(shape_, dtype_);
  std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::to_f32() const {
  assert(is_contiguous() && device_ == Device::cpu);
  Tensor out = zeros(shape_, DType::f32);
  float* o = out.data<float>();
  const std::int64_t n = numel();
  switch (dtype_) {
    case DType::f32: std::memcpy(o, data_, n * sizeof(float)); break;
    case DType::f64: for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(data<double>()[i]); break;
    case DType::bf16: for (std::int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(data<std::uint16_t>()[i]); break;
    case DType::f16: for (std::int64_t i = 0; i < n; ++i) o[i] = f16_to_f32(data<std::uint16_t>()[i]); break;
    case DType::f8_e4m3: for (std::int64_t i = 0; i < n; ++i) o[i] = e4m3_to_f32(data<std::uint8_t>()[i]); break;
    case DType::f8_e5m2: for (std::int64_t i = 0; i < n; ++i) o[i] = e5m2_to_f32(data<std::uint8_t>()[i]); break;
    case DType::e8m0: for (std::int64_t i = 0; i < n; ++i) o[i] = e8m0_to_f32(data<std::uint8_t>()[i]); break;
    case DType::fp4_e2m1:
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint8_t byte = data<std::uint8_t>()[i / 2];
        o[i] = fp4_e2m1_to_f32(i % 2 == 0 ? byte & 0xF : byte >> 4);
      }
      break;
    case DType::i64: for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(data<std::int64_t>()[i]); break;
    case DType::i32: for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(data<std::int32_t>()[i]); break;
    case DType::u8: for (std::int64_t i = 0; i < n; ++i) o[i] = data<std::uint8_t>()[i]; break;
    default: assert(false && "to_f32: unsupported dtype"); break;
  }
  return out;
}

}  // namespace day0
