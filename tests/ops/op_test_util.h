// Helpers shared by the op tests: seeded random tensors, conversions to double, and a tolerance check
// that names the worst element. References are computed by the tests themselves, never by an op.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/rope.h"

namespace day0::optest {

// f32 tensor of uniform values in [lo, hi).
inline Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::zeros(shape, DType::f32);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// The same values rounded to bf16 (RNE).
inline Tensor to_bf16(const Tensor& f32) {
  Tensor t = Tensor::zeros(f32.shape(), DType::bf16);
  for (std::int64_t i = 0; i < f32.numel(); ++i) t.data<std::uint16_t>()[i] = f32_to_bf16(f32.data<float>()[i]);
  return t;
}

// The bias variants the linear and GEMM tests cover, and one made at random (undefined for none).
enum class Bias { none, f32, bf16 };

inline Tensor random_bias(std::int64_t n, Bias kind, std::mt19937& rng) {
  if (kind == Bias::none) return Tensor();
  const Tensor b = random_f32({n}, rng);
  return kind == Bias::bf16 ? to_bf16(b) : b;
}

// Element values as double, for f32 and bf16 tensors.
inline std::vector<double> to_double(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::bf16 ? bf16_to_f32(t.data<std::uint16_t>()[i]) : t.data<float>()[i];
  return v;
}

// gpt-oss's RoPE inverse frequencies (theta 150,000) for a rotary dim, as a host f32 tensor.
inline Tensor gpt_oss_inv_freq(int rotary_dim) {
  RopeSpec spec;
  spec.kind = RopeKind::default_;
  spec.theta = 150000.0;
  spec.rotary_dim = rotary_dim;
  const std::vector<float> inv_freq = rope_inv_freq(spec);
  Tensor inv = Tensor::zeros({static_cast<std::int64_t>(inv_freq.size())}, DType::f32);
  std::copy(inv_freq.begin(), inv_freq.end(), inv.data<float>());
  return inv;
}

inline Tensor i32_tensor(const std::vector<std::int32_t>& v) {
  Tensor t = Tensor::zeros({static_cast<std::int64_t>(v.size())}, DType::i32);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int32_t>()[i] = v[i];
  return t;
}

inline Tensor f32_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::zeros(shape, DType::f32);
  for (std::size_t i = 0; i < v.size() && static_cast<std::int64_t>(i) < t.numel(); ++i) t.data<float>()[i] = v[i];
  return t;
}

// |got - want| <= atol + rtol * |want| everywhere. A reference that is all zero fails: the test would be vacuous.
inline ::testing::AssertionResult all_close(const Tensor& got, const std::vector<double>& want, double rtol,
                                            double atol) {
  if (got.dtype() != DType::f32 || got.numel() != static_cast<std::int64_t>(want.size()))
    return ::testing::AssertionFailure() << "got " << got.numel() << " values (" << dtype_name(got.dtype())
                                         << "), want " << want.size() << " f32";
  bool any_nonzero = false;
  std::int64_t worst = -1;
  double worst_excess = 0, max_err = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.data<float>()[i], w = want[i];
    any_nonzero |= w != 0.0;
    const double err = std::fabs(g - w), excess = std::isfinite(g) ? err - (atol + rtol * std::fabs(w)) : INFINITY;
    if (excess > 0 && (worst < 0 || excess > worst_excess)) worst = i, worst_excess = excess;
    if (std::isfinite(err)) max_err = std::max(max_err, err);
  }
  if (!any_nonzero) return ::testing::AssertionFailure() << "reference is all zero";
  if (worst >= 0)
    return ::testing::AssertionFailure() << "element " << worst << ": got " << got.data<float>()[worst] << ", want "
                                         << want[worst] << " (rtol " << rtol << ", atol " << atol << "; max |err| "
                                         << max_err << ")";
  return ::testing::AssertionSuccess();
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace day0::optest
