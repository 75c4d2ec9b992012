// Tensor storage, views and conversions.
#include "core/tensor.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>

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
  // The product of the non-zero dimensions must fit even when some dimension is zero: strides and row
  // sizes are partial products, and the answer must not depend on where the zero sits ([0, 2^40, 2^40]
  // and [2^40, 2^40, 0] are both rejected).
  std::int64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::int64_t d : shape) {
    if (d < 0) return make_error("negative dimension in shape " + shape_to_string(shape));
    if (d == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > std::numeric_limits<std::int64_t>::max() / d)
      return make_error("shape " + shape_to_string(shape) + " overflows int64 element count");
    nonzero_product *= d;
  }
  return has_zero ? 0 : nonzero_product;
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
  const std::int64_t offset_bits = begin * row_elems * dtype_bits(dtype_);
  // A packed fp4 slice must start on a byte: an odd starting element would sit in a high nibble.
  assert(offset_bits % 8 == 0 && "slice_rows: fp4 rows must start on a byte boundary");
  t.data_ = static_cast<std::byte*>(data_) + offset_bits / 8;
  return t;
}

Tensor Tensor::adjacent_rows(const std::vector<Tensor>& parts) {
  if (parts.empty() || parts[0].dim() < 1 || !parts[0].is_contiguous() || parts[0].data_ == nullptr) return Tensor();
  Tensor t = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const Tensor& p = parts[i];
    const bool same_rows = p.dim() == t.dim() && std::equal(p.shape_.begin() + 1, p.shape_.end(), t.shape_.begin() + 1);
    if (!same_rows || !p.is_contiguous() || p.owner_ != t.owner_ || p.device_ != t.device_ || p.dtype_ != t.dtype_ ||
        p.data_ != static_cast<std::byte*>(t.data_) + t.nbytes())
      return Tensor();
    t.shape_[0] += p.shape_[0];
  }
  t.strides_ = contiguous_strides(t.shape_);
  return t;
}

Tensor Tensor::clone() const {
  assert(is_contiguous() && device_ == Device::cpu);
  Tensor t = zeros(shape_, dtype_);
  // memcpy's pointers must be valid even for 0 bytes; an empty borrowed tensor may hold nullptr.
  if (const size_t bytes = nbytes(); bytes != 0) std::memcpy(t.data_, data_, bytes);
  return t;
}

// Element i of a T array at `base`, read with memcpy: borrowed views into a safetensors mapping are
// byte-addressed, so `base` need not be aligned for T.
template <class T>
static T load(const void* base, std::int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const std::byte*>(base) + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T, class Convert>
static void convert_each(const void* in, float* out, std::int64_t n, Convert convert) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = convert(load<T>(in, i));
}

Tensor Tensor::to_f32() const {
  assert(is_contiguous() && device_ == Device::cpu);
  Tensor out = zeros(shape_, DType::f32);
  float* o = out.data<float>();
  const std::int64_t n = numel();
  const auto cast = [](auto v) { return static_cast<float>(v); };
  switch (dtype_) {
    case DType::f32: convert_each<float>(data_, o, n, cast); break;
    case DType::f64: convert_each<double>(data_, o, n, cast); break;
    case DType::bf16: convert_each<std::uint16_t>(data_, o, n, bf16_to_f32); break;
    case DType::f16: convert_each<std::uint16_t>(data_, o, n, f16_to_f32); break;
    case DType::f8_e4m3: convert_each<std::uint8_t>(data_, o, n, e4m3_to_f32); break;
    case DType::f8_e5m2: convert_each<std::uint8_t>(data_, o, n, e5m2_to_f32); break;
    case DType::e8m0: convert_each<std::uint8_t>(data_, o, n, e8m0_to_f32); break;
    case DType::fp4_e2m1:
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint8_t byte = load<std::uint8_t>(data_, i / 2);
        o[i] = fp4_e2m1_to_f32(i % 2 == 0 ? byte & 0xF : byte >> 4);  // element 2i in the low nibble
      }
      break;
    case DType::i64: convert_each<std::int64_t>(data_, o, n, cast); break;
    case DType::i32: convert_each<std::int32_t>(data_, o, n, cast); break;
    case DType::i16: convert_each<std::int16_t>(data_, o, n, cast); break;
    case DType::i8: convert_each<std::int8_t>(data_, o, n, cast); break;
    case DType::u64: convert_each<std::uint64_t>(data_, o, n, cast); break;
    case DType::u32: convert_each<std::uint32_t>(data_, o, n, cast); break;
    case DType::u16: convert_each<std::uint16_t>(data_, o, n, cast); break;
    case DType::u8: convert_each<std::uint8_t>(data_, o, n, cast); break;
    // A bool byte is true when non-zero (safetensors writers emit 0/1).
    case DType::boolean:
      convert_each<std::uint8_t>(data_, o, n, [](std::uint8_t b) { return b != 0 ? 1.0f : 0.0f; });
      break;
  }
  return out;
}

}  // namespace day0
