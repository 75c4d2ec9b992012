// Helpers for the CUDA op tests: a context per test, host <-> device copies on the context's stream, and
// NaN-poisoned device outputs (0xFF bytes are NaN in f32 and bf16) so an unwritten element fails the check.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "core/tensor.h"
#include "ops/cuda/cuda_context.h"
#include "ops/cuda/cuda_ops.h"
#include "quant/mxfp4.h"

namespace day0::cudatest {

// A CudaOps on 5% of the GPU, `options` otherwise (a failed create fails the test and gives null).
inline std::unique_ptr<CudaOps> make_cuda_ops(BackendOptions options = {}) {
  options.memory_fraction = 0.05;
  auto created = CudaOps::create(options);
  EXPECT_TRUE(created.ok()) << created.error().message;
  return created.ok() ? std::move(*created) : nullptr;
}

// 1 GiB holds the largest test (a 5760 x 2880 bf16 weight plus activations) with room to spare.
inline std::unique_ptr<CudaContext> make_context(std::size_t arena_bytes = std::size_t(1) << 30) {
  CudaContextOptions options;
  options.arena_bytes = arena_bytes;
  auto ctx = CudaContext::create(options);
  if (!ctx.ok()) {
    ADD_FAILURE() << ctx.error().message;
    return nullptr;
  }
  return std::move(ctx).value();
}

// Copies go on the context's stream: it is non-blocking, so plain cudaMemcpy would not order with it.
inline Tensor upload(CudaContext& ctx, const Tensor& host) {
  auto dev = ctx.arena().allocate(host.shape(), host.dtype(), "test upload");
  if (!dev.ok()) {
    ADD_FAILURE() << dev.error().message;
    return Tensor();
  }
  EXPECT_EQ(cudaMemcpyAsync(dev->raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, ctx.stream()), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);  // the host buffer may go away after return
  return *dev;
}

inline Tensor poisoned(CudaContext& ctx, const Shape& shape, DType dtype) {
  auto dev = ctx.arena().allocate(shape, dtype, "test output");
  if (!dev.ok()) {
    ADD_FAILURE() << dev.error().message;
    return Tensor();
  }
  EXPECT_EQ(cudaMemsetAsync(dev->raw(), 0xFF, dev->nbytes(), ctx.stream()), cudaSuccess);
  return *dev;
}

inline Tensor zeroed(CudaContext& ctx, const Shape& shape, DType dtype) {
  Tensor t = poisoned(ctx, shape, dtype);
  EXPECT_EQ(cudaMemsetAsync(t.raw(), 0, t.nbytes(), ctx.stream()), cudaSuccess);
  return t;
}

// Waits for the stream (kernel faults surface here) and copies back to a host tensor.
inline Tensor download(CudaContext& ctx, const Tensor& dev) {
  Tensor host = Tensor::zeros(dev.shape(), dev.dtype());
  EXPECT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.raw(), dev.raw(), dev.nbytes(), cudaMemcpyDeviceToHost, ctx.stream()), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(ctx.stream()), cudaSuccess);
  return host;
}

inline std::int32_t download_flag(CudaContext& ctx, const Tensor& flag) {
  return download(ctx, flag).data<std::int32_t>()[0];
}

// Elements of an f32 or bf16 host tensor that are NaN (an output the kernel did not write stays 0xFF... = NaN).
inline std::int64_t count_nan(const Tensor& t) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.dtype() == DType::bf16 ? bf16_to_f32(t.data<std::uint16_t>()[i]) : t.data<float>()[i];
    n += std::isnan(v);
  }
  return n;
}

// Whether two host tensors hold the same bytes (bit-identical results).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// ||got - want|| / ||want|| over all elements (both as f32 host tensors of the same size).
inline double relative_norm_error(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  const Tensor g = got.to_f32(), w = want.to_f32();
  for (std::int64_t i = 0; i < w.numel(); ++i) {
    const double d = double(g.data<float>()[i]) - double(w.data<float>()[i]);
    num += d * d;
    den += double(w.data<float>()[i]) * w.data<float>()[i];
  }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

}  // namespace day0::cudatest

#define D0_ASSERT_OK(expr)                                   \
  do {                                                       \
    const ::day0::Status d0_st_ = (expr);                    \
    ASSERT_TRUE(d0_st_.ok()) << d0_st_.error().message;      \
  } while (0)

#define D0_EXPECT_OK(expr)                                   \
  do {                                                       \
    const ::day0::Status d0_st_ = (expr);                    \
    EXPECT_TRUE(d0_st_.ok()) << d0_st_.error().message;      \
  } while (0)
