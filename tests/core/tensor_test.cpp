// Tensor storage, views, copies and conversion to f32; shape arithmetic.
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace day0 {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// An owner whose destruction is observable: the deleter flips `*freed`.
std::shared_ptr<const void> tracked_owner(std::vector<std::byte>* storage, bool* freed) {
  return std::shared_ptr<const void>(storage, [freed](const void* p) {
    *freed = true;
    delete static_cast<const std::vector<std::byte>*>(p);
  });
}

std::vector<float> as_floats(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::f32);
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Borrows a copy of `values` (kept alive by the tensor) as a tensor of `dtype` and the given shape.
template <class T>
Tensor borrow_copy(const std::vector<T>& values, Shape shape, DType dtype) {
  auto storage = std::make_shared<std::vector<T>>(values);
  return Tensor::borrow(storage->data(), std::move(shape), dtype, storage);
}

// ============================================================================================= shapes

TEST(ShapeNumel, multiplies_the_dimensions_and_an_empty_shape_is_a_scalar) {
  EXPECT_EQ(*shape_numel({}), 1);
  EXPECT_EQ(*shape_numel({7}), 7);
  EXPECT_EQ(*shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(*shape_numel({kInt64Max}), kInt64Max);
  EXPECT_EQ(*shape_numel({kInt64Max, 1}), kInt64Max);
  EXPECT_EQ(*shape_numel({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
}

TEST(ShapeNumel, is_zero_when_any_dimension_is_zero) {
  EXPECT_EQ(*shape_numel({0}), 0);
  EXPECT_EQ(*shape_numel({0, 5}), 0);
  EXPECT_EQ(*shape_numel({5, 0}), 0);
  EXPECT_EQ(*shape_numel({3, 0, kInt64Max / 3}), 0);
}

TEST(ShapeNumel, a_negative_dimension_is_an_error_naming_the_shape) {
  for (const Shape& s :
       {Shape{-1}, Shape{2, -3}, Shape{0, -1}, Shape{-1, 0}, Shape{std::numeric_limits<std::int64_t>::min()}}) {
    const Result<std::int64_t> n = shape_numel(s);
    ASSERT_FALSE(n.ok()) << shape_to_string(s);
    EXPECT_NE(n.error().message.find("negative"), std::string::npos) << n.error().message;
    EXPECT_NE(n.error().message.find(shape_to_string(s)), std::string::npos) << n.error().message;
  }
}

TEST(ShapeNumel, a_product_that_overflows_int64_is_an_error) {
  const std::int64_t two32 = std::int64_t{1} << 32;
  for (const Shape& s : {Shape{two32, two32}, Shape{kInt64Max, 2}, Shape{2, kInt64Max}, Shape{3, 3, kInt64Max / 8},
                         Shape{std::int64_t{1} << 21, std::int64_t{1} << 21, std::int64_t{1} << 21}}) {
    const Result<std::int64_t> n = shape_numel(s);
    ASSERT_FALSE(n.ok()) << shape_to_string(s);
    EXPECT_NE(n.error().message.find("overflow"), std::string::npos) << n.error().message;
  }
}

TEST(ShapeNumel, overflow_is_an_error_wherever_a_zero_dimension_sits) {
  // Strides and row sizes multiply the other dimensions, so the answer must not depend on the zero's place.
  const std::int64_t two40 = std::int64_t{1} << 40;
  EXPECT_FALSE(shape_numel({0, two40, two40}).ok());
  EXPECT_FALSE(shape_numel({two40, 0, two40}).ok());
  EXPECT_FALSE(shape_numel({two40, two40, 0}).ok());
}

TEST(Shape, to_string_lists_the_dimensions) {
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(shape_to_string({3}), "[3]");
  EXPECT_EQ(shape_to_string({2, -1, 0}), "[2, -1, 0]");
}

TEST(DeviceName, names_both_devices) {
  EXPECT_EQ(device_name(Device::cpu), "cpu");
  EXPECT_EQ(device_name(Device::cuda), "cuda");
}

// ======================================================================================== construction

TEST(Tensor, default_tensor_is_undefined) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_FALSE(t.owns_storage());
}

TEST(Tensor, zeros_allocates_zero_filled_aligned_contiguous_owned_storage_for_every_dtype) {
  for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8_e4m3, DType::f8_e5m2, DType::e8m0,
                   DType::fp4_e2m1, DType::i64, DType::i32, DType::i16, DType::i8, DType::u64, DType::u32,
                   DType::u16, DType::u8, DType::boolean}) {
    const Tensor t = Tensor::zeros({3, 4}, dt);
    EXPECT_TRUE(t.defined()) << dtype_name(dt);
    EXPECT_TRUE(t.owns_storage());
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.device(), Device::cpu);
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.dim(), 2);
    EXPECT_EQ(t.numel(), 12);
    EXPECT_EQ(t.strides(), (Shape{4, 1}));
    EXPECT_EQ(t.nbytes(), static_cast<std::size_t>(12 * dtype_bits(dt) / 8)) << dtype_name(dt);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw()) % 64, 0u) << dtype_name(dt);
    const auto* bytes = t.data<std::uint8_t>();
    for (std::size_t i = 0; i < t.nbytes(); ++i) ASSERT_EQ(bytes[i], 0) << dtype_name(dt) << " byte " << i;
  }
}

TEST(Tensor, zeros_rounds_packed_fp4_storage_up_to_whole_bytes) {
  EXPECT_EQ(Tensor::zeros({5}, DType::fp4_e2m1).nbytes(), 3u);
  EXPECT_EQ(Tensor::zeros({2, 3}, DType::fp4_e2m1).nbytes(), 3u);
  EXPECT_EQ(Tensor::zeros({1}, DType::fp4_e2m1).nbytes(), 1u);
}

TEST(Tensor, zeros_with_no_elements_is_defined_and_empty) {
  const Tensor t = Tensor::zeros({0, 8}, DType::bf16);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.nbytes(), 0u);
  EXPECT_NE(t.raw(), nullptr);
}

TEST(Tensor, size_accepts_negative_indices_from_the_end) {
  const Tensor t = Tensor::zeros({2, 3, 5}, DType::f32);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(2), 5);
  EXPECT_EQ(t.size(-1), 5);
  EXPECT_EQ(t.size(-3), 2);
  EXPECT_THROW((void)t.size(3), std::out_of_range);
}

TEST(Tensor, borrow_wraps_external_memory_without_copying) {
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const Tensor t = Tensor::borrow(values.data(), {2, 3}, DType::f32, nullptr);
  EXPECT_EQ(t.raw(), values.data());
  EXPECT_FALSE(t.owns_storage());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.nbytes(), 24u);
  values[4] = 50;
  EXPECT_EQ(t.data<float>()[4], 50);
}

TEST(Tensor, borrow_records_the_device) {
  int dummy = 0;
  const Tensor t = Tensor::borrow(&dummy, {1}, DType::i32, nullptr, Device::cuda);
  EXPECT_EQ(t.device(), Device::cuda);
}

TEST(Tensor, a_borrowed_owner_lives_until_the_last_copy_view_and_slice_is_gone) {
  bool freed = false;
  auto* storage = new std::vector<std::byte>(4 * 6);
  void* data = storage->data();
  std::shared_ptr<const void> owner = tracked_owner(storage, &freed);
  std::optional<Tensor> t = Tensor::borrow(data, {4, 6}, DType::u8, owner);
  owner.reset();
  EXPECT_FALSE(freed) << "the tensor alone must keep the owner alive";

  std::optional<Tensor> copy = *t;
  std::optional<Tensor> view = t->view({24});
  std::optional<Tensor> slice = t->slice_rows(1, 3);
  t.reset();
  EXPECT_FALSE(freed);
  copy.reset();
  EXPECT_FALSE(freed);
  view.reset();
  EXPECT_FALSE(freed) << "a slice must keep the owner alive";
  EXPECT_EQ(slice->data<std::uint8_t>()[0], 0);  // still readable (ASan would flag a use after free)
  slice.reset();
  EXPECT_TRUE(freed) << "the owner must be released with the last tensor";
}

TEST(Tensor, a_clone_does_not_keep_the_borrowed_owner_alive) {
  bool freed = false;
  auto* storage = new std::vector<std::byte>(4);
  std::memcpy(storage->data(), "\x01\x02\x03\x04", 4);
  std::optional<Tensor> t = Tensor::borrow(storage->data(), {4}, DType::u8, tracked_owner(storage, &freed));
  const Tensor c = t->clone();
  t.reset();
  EXPECT_TRUE(freed);
  EXPECT_EQ(c.data<std::uint8_t>()[3], 4);
}

// ============================================================================================== views

TEST(Tensor, view_shares_storage_under_a_new_shape) {
  Tensor t = Tensor::zeros({2, 6}, DType::f32);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor v = t.view({3, 2, 2});
  EXPECT_EQ(v.raw(), t.raw());
  EXPECT_EQ(v.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(v.strides(), (Shape{4, 2, 1}));
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.dtype(), DType::f32);
  v.data<float>()[5] = 100;
  EXPECT_EQ(t.data<float>()[5], 100);
}

TEST(Tensor, slice_rows_shares_storage_and_starts_at_the_first_selected_row) {
  Tensor t = Tensor::zeros({5, 3}, DType::f32);
  for (int i = 0; i < 15; ++i) t.data<float>()[i] = static_cast<float>(i);
  const Tensor s = t.slice_rows(1, 4);
  EXPECT_EQ(s.shape(), (Shape{3, 3}));
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(s.data<float>(), t.data<float>() + 3);
  EXPECT_EQ(s.nbytes(), 9 * sizeof(float));
  EXPECT_EQ(as_floats(s.to_f32()), (std::vector<float>{3, 4, 5, 6, 7, 8, 9, 10, 11}));

  const Tensor ss = s.slice_rows(2, 3);  // a slice of a slice: row 3 of the original
  EXPECT_EQ(as_floats(ss.to_f32()), (std::vector<float>{9, 10, 11}));

  const Tensor empty = t.slice_rows(5, 5);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.nbytes(), 0u);
}

TEST(Tensor, adjacent_rows_joins_only_parts_that_lie_back_to_back_in_one_storage) {
  Tensor t = Tensor::zeros({6, 2}, DType::f32);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  const Tensor joined = Tensor::adjacent_rows({t.slice_rows(1, 2), t.slice_rows(2, 4), t.slice_rows(4, 5)});
  ASSERT_TRUE(joined.defined());
  EXPECT_EQ(joined.shape(), (Shape{4, 2}));
  EXPECT_TRUE(joined.is_contiguous());
  EXPECT_EQ(joined.data<float>(), t.data<float>() + 2);
  EXPECT_EQ(as_floats(joined.to_f32()), (std::vector<float>{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(Tensor::adjacent_rows({t.slice_rows(0, 6)}).shape(), (Shape{6, 2}));  // one part: itself

  EXPECT_FALSE(Tensor::adjacent_rows({}).defined());
  EXPECT_FALSE(Tensor::adjacent_rows({t.slice_rows(0, 1), t.slice_rows(2, 3)}).defined());               // a gap
  EXPECT_FALSE(Tensor::adjacent_rows({t.slice_rows(2, 3), t.slice_rows(1, 2)}).defined());               // out of order
  EXPECT_FALSE(Tensor::adjacent_rows({t.slice_rows(0, 2), t.slice_rows(2, 6).view({2, 4})}).defined());  // rows differ
  const Tensor other = Tensor::zeros({2, 2}, DType::f32);  // another storage, even if it happened to follow
  EXPECT_FALSE(Tensor::adjacent_rows({t, other}).defined());
  // Borrowed views of one buffer (the same, empty owner): joined when their dtypes agree.
  const Tensor first = Tensor::borrow(t.data<float>(), {2, 2}, DType::f32, nullptr);
  EXPECT_TRUE(
      Tensor::adjacent_rows({first, Tensor::borrow(t.data<float>() + 4, {1, 2}, DType::f32, nullptr)}).defined());
  EXPECT_FALSE(
      Tensor::adjacent_rows({first, Tensor::borrow(t.data<float>() + 4, {1, 2}, DType::i32, nullptr)}).defined());
}

TEST(Tensor, slice_rows_offsets_by_the_element_size_of_each_dtype) {
  const Tensor bf = Tensor::zeros({4, 2}, DType::bf16);
  EXPECT_EQ(static_cast<const std::byte*>(bf.slice_rows(3, 4).raw()), static_cast<const std::byte*>(bf.raw()) + 12);
  const Tensor f64 = Tensor::zeros({4, 2}, DType::f64);
  EXPECT_EQ(static_cast<const std::byte*>(f64.slice_rows(1, 2).raw()), static_cast<const std::byte*>(f64.raw()) + 16);
  const Tensor e4 = Tensor::zeros({4, 3, 2}, DType::f8_e4m3);
  EXPECT_EQ(static_cast<const std::byte*>(e4.slice_rows(2, 4).raw()), static_cast<const std::byte*>(e4.raw()) + 12);
}

TEST(Tensor, slice_rows_of_packed_fp4_advances_half_a_byte_per_element) {
  // Rows of 4 fp4 values = 2 bytes each. Row r holds codes 4r .. 4r+3, element 2i in the low nibble.
  std::vector<std::uint8_t> packed(8);
  for (int i = 0; i < 16; ++i) packed[i / 2] |= static_cast<std::uint8_t>((i & 0xF) << (i % 2 == 0 ? 0 : 4));
  const Tensor t = borrow_copy(packed, {4, 4}, DType::fp4_e2m1);
  const Tensor s = t.slice_rows(2, 4);
  EXPECT_EQ(static_cast<const std::uint8_t*>(s.raw()), static_cast<const std::uint8_t*>(t.raw()) + 4);
  EXPECT_EQ(s.nbytes(), 4u);
  // Codes 8..15 are -0, -0.5, -1, -1.5, -2, -3, -4, -6.
  const std::vector<float> got = as_floats(s.to_f32());
  const std::vector<float> want = {-0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << i;
}

// ============================================================================================= clone

TEST(Tensor, clone_is_a_deep_owned_contiguous_copy) {
  std::vector<std::uint16_t> values = {1, 2, 3, 4, 5, 6};
  const Tensor t = Tensor::borrow(values.data(), {3, 2}, DType::bf16, nullptr);
  Tensor c = t.clone();
  EXPECT_NE(c.raw(), t.raw());
  EXPECT_TRUE(c.owns_storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), t.shape());
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_EQ(std::memcmp(c.raw(), values.data(), 12), 0);
  c.data<std::uint16_t>()[0] = 99;
  EXPECT_EQ(values[0], 1);
  values[1] = 77;
  EXPECT_EQ(c.data<std::uint16_t>()[1], 2);
}

TEST(Tensor, clone_of_a_slice_copies_only_the_selected_rows) {
  Tensor t = Tensor::zeros({4, 2}, DType::i32);
  for (int i = 0; i < 8; ++i) t.data<std::int32_t>()[i] = i;
  const Tensor c = t.slice_rows(1, 3).clone();
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(c.nbytes(), 16u);
  EXPECT_EQ(c.data<std::int32_t>()[0], 2);
  EXPECT_EQ(c.data<std::int32_t>()[3], 5);
}

TEST(Tensor, clone_of_packed_fp4_with_odd_count_keeps_the_last_half_byte) {
  const std::vector<std::uint8_t> packed = {0x21, 0x43, 0x05};
  const Tensor c = borrow_copy(packed, {5}, DType::fp4_e2m1).clone();
  ASSERT_EQ(c.nbytes(), 3u);
  EXPECT_EQ(std::memcmp(c.raw(), packed.data(), 3), 0);
}

TEST(Tensor, clone_of_an_empty_borrowed_tensor_with_null_data_is_empty) {
  const Tensor t = Tensor::borrow(nullptr, {0, 4}, DType::f32, nullptr);
  EXPECT_TRUE(t.defined());
  const Tensor c = t.clone();
  EXPECT_EQ(c.numel(), 0);
  EXPECT_EQ(t.to_f32().numel(), 0);
}

// ============================================================================================ to_f32

TEST(Tensor, to_f32_of_f32_is_an_owned_copy) {
  const Tensor t = borrow_copy(std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f}, {2, 2}, DType::f32);
  const Tensor f = t.to_f32();
  EXPECT_NE(f.raw(), t.raw());
  EXPECT_TRUE(f.owns_storage());
  EXPECT_EQ(f.shape(), (Shape{2, 2}));
  EXPECT_EQ(as_floats(f), (std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f}));
}

TEST(Tensor, to_f32_narrows_f64_with_rounding) {
  const Tensor t = borrow_copy(std::vector<double>{0.1, -1e300, 2.5, 1.0 / 3.0}, {4}, DType::f64);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 0.1f);
  EXPECT_EQ(f[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[2], 2.5f);
  EXPECT_EQ(f[3], 1.0f / 3.0f);
}

TEST(Tensor, to_f32_decodes_bf16) {
  const Tensor t = borrow_copy(std::vector<std::uint16_t>{0x3F80, 0xC000, 0x3FC0, 0x7F80, 0x0001, 0x8000}, {6},
                               DType::bf16);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 1.5f);
  EXPECT_EQ(f[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[4], 0x1p-133f);
  EXPECT_TRUE(std::signbit(f[5]) && f[5] == 0.0f);
}

TEST(Tensor, to_f32_decodes_f16) {
  const Tensor t = borrow_copy(std::vector<std::uint16_t>{0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3555, 0xFC00}, {3, 2},
                               DType::f16);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 65504.0f);
  EXPECT_EQ(f[3], 0x1p-24f);
  EXPECT_EQ(f[4], 0.333251953125f);
  EXPECT_EQ(f[5], -std::numeric_limits<float>::infinity());
}

TEST(Tensor, to_f32_decodes_fp8_e4m3) {
  const Tensor t = borrow_copy(std::vector<std::uint8_t>{0x38, 0x7E, 0xFE, 0x01, 0x7F}, {5}, DType::f8_e4m3);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 448.0f);
  EXPECT_EQ(f[2], -448.0f);
  EXPECT_EQ(f[3], 0x1p-9f);
  EXPECT_TRUE(std::isnan(f[4]));
}

TEST(Tensor, to_f32_decodes_fp8_e5m2) {
  const Tensor t = borrow_copy(std::vector<std::uint8_t>{0x3C, 0x7B, 0x7C, 0x01, 0xC0}, {5}, DType::f8_e5m2);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 57344.0f);
  EXPECT_EQ(f[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[3], 0x1p-16f);
  EXPECT_EQ(f[4], -2.0f);
}

TEST(Tensor, to_f32_decodes_e8m0_scales) {
  const Tensor t = borrow_copy(std::vector<std::uint8_t>{127, 128, 0, 254, 255}, {5}, DType::e8m0);
  const std::vector<float> f = as_floats(t.to_f32());
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], 2.0f);
  EXPECT_EQ(f[2], 0x1p-127f);
  EXPECT_EQ(f[3], 0x1p127f);
  EXPECT_TRUE(std::isnan(f[4]));
}

TEST(Tensor, to_f32_unpacks_fp4_with_element_2i_in_the_low_nibble) {
  // Elements 0.5, -1, 6, 1.5, -0 are codes 0x1, 0xA, 0x7, 0x3, 0x8: bytes 0xA1, 0x37, 0x?8. The odd count
  // leaves the last high nibble unused; it is set to garbage to show it is ignored.
  const Tensor t = borrow_copy(std::vector<std::uint8_t>{0xA1, 0x37, 0xF8}, {5}, DType::fp4_e2m1);
  EXPECT_EQ(t.nbytes(), 3u);
  const std::vector<float> f = as_floats(t.to_f32());
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], -1.0f);
  EXPECT_EQ(f[2], 6.0f);
  EXPECT_EQ(f[3], 1.5f);
  EXPECT_TRUE(std::signbit(f[4]) && f[4] == 0.0f);
}

TEST(Tensor, to_f32_converts_every_integer_dtype) {
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::int64_t>{-3, 1ll << 40}, {2}, DType::i64).to_f32()),
            (std::vector<float>{-3.0f, 0x1p40f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::int32_t>{-7, 9}, {2}, DType::i32).to_f32()),
            (std::vector<float>{-7.0f, 9.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::int16_t>{-32768, 5}, {2}, DType::i16).to_f32()),
            (std::vector<float>{-32768.0f, 5.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::int8_t>{-128, 127}, {2}, DType::i8).to_f32()),
            (std::vector<float>{-128.0f, 127.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::uint64_t>{0, 1ull << 63}, {2}, DType::u64).to_f32()),
            (std::vector<float>{0.0f, 0x1p63f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::uint32_t>{4000000000u, 1}, {2}, DType::u32).to_f32()),
            (std::vector<float>{4e9f, 1.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::uint16_t>{65535, 2}, {2}, DType::u16).to_f32()),
            (std::vector<float>{65535.0f, 2.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::uint8_t>{255, 0}, {2}, DType::u8).to_f32()),
            (std::vector<float>{255.0f, 0.0f}));
  EXPECT_EQ(as_floats(borrow_copy(std::vector<std::uint8_t>{0, 1, 2}, {3}, DType::boolean).to_f32()),
            (std::vector<float>{0.0f, 1.0f, 1.0f}));
}

TEST(Tensor, to_f32_reads_borrowed_storage_that_is_not_aligned_to_the_element_size) {
  // safetensors offsets need not be aligned: a bf16 / f32 view may start at an odd byte address.
  auto storage = std::make_shared<std::vector<std::uint8_t>>(1 + 8);
  std::uint8_t* odd = storage->data() + 1;
  const float one = 1.0f, minus_half = -0.5f;
  std::memcpy(odd, &one, 4);
  std::memcpy(odd + 4, &minus_half, 4);
  EXPECT_EQ(as_floats(Tensor::borrow(odd, {2}, DType::f32, storage).to_f32()),
            (std::vector<float>{1.0f, -0.5f}));
  const std::uint8_t bf16_le[] = {0x80, 0x3F, 0x00, 0xC0};  // 1.0, -2.0 little-endian
  std::memcpy(odd, bf16_le, 4);
  EXPECT_EQ(as_floats(Tensor::borrow(odd, {2}, DType::bf16, storage).to_f32()),
            (std::vector<float>{1.0f, -2.0f}));
}

TEST(Tensor, to_f32_of_a_slice_converts_only_the_selected_rows) {
  const Tensor t = borrow_copy(std::vector<std::uint16_t>{0x3F80, 0x4000, 0x4040, 0x4080}, {4, 1}, DType::bf16);
  EXPECT_EQ(as_floats(t.slice_rows(1, 3).to_f32()), (std::vector<float>{2.0f, 3.0f}));
}

}  // namespace
}  // namespace day0
