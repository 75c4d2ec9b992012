// Helpers shared by the CUDA MoE tests: MXFP4 experts encoded from random weights, their bf16 / fp8 conversions
// as `day0 convert` stores them, device copies, random routing (k distinct experts per token, weights summing
// to 1), device grouping and the CPU's product per assignment.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/expert_grouping_cuda.h"
#include "ops/cuda/moe_mxfp4_fused_cuda.h"
#include "ops/op_test_util.h"
#include "ops/ops.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"

namespace day0::moetest {

// Experts encoded with mxfp4_encode_row from uniform weights in +-sqrt(3/in) (unit-variance outputs for unit
// inputs, so SwiGLU's clamp is reached only sometimes); bias [E, out] in `bias_dtype` (f32 or bf16).
// A cheap LCG instead of mt19937: the gpt-oss-20b shape encodes 800 M values.
inline ExpertWeights encoded_experts(int E, int out, int in, DType bias_dtype, std::mt19937& rng) {
  ExpertWeights w;
  w.n_experts = E, w.out = out, w.in = in;
  const std::int64_t groups = in / kMxfp4GroupSize;
  w.blocks = Tensor::zeros({E, out, groups, kMxfp4GroupBytes}, DType::u8);
  w.scales = Tensor::zeros({E, out, groups}, DType::u8);
  std::uint64_t state = rng() | (std::uint64_t(rng()) << 32) | 1;
  const float a = std::sqrt(3.0f / in);
  std::vector<float> row(in);
  for (std::int64_t r = 0; r < std::int64_t(E) * out; ++r) {
    for (int i = 0; i < in; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      row[i] = a * (static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
    mxfp4_encode_row(row.data(), in, w.blocks.data<std::uint8_t>() + r * groups * kMxfp4GroupBytes,
                     w.scales.data<std::uint8_t>() + r * groups);
  }
  Tensor bias = optest::random_f32({E, out}, rng, -0.1f, 0.1f);
  w.bias = bias_dtype == DType::bf16 ? optest::to_bf16(bias) : bias;
  return w;
}

// The tensors of the experts' storage (and the bias) on the device; absent ones stay absent.
inline ExpertWeights upload_experts(CudaContext& ctx, const ExpertWeights& host) {
  auto up = [&](const Tensor& t) { return t.raw() != nullptr ? cudatest::upload(ctx, t) : Tensor(); };
  ExpertWeights d = host;
  d.blocks = up(host.blocks);
  d.scales = up(host.scales);
  d.values = up(host.values);
  d.row_scales = up(host.row_scales);
  d.bias = up(host.bias);
  return d;
}

// MXFP4 experts converted on the CPU with the codecs `day0 convert` uses: bf16 (mxfp4_decode_row_bf16) or
// fp8_rowwise (mxfp4_row_to_fp8, its codes and row scales). The bias is shared.
inline ExpertWeights stored_experts(const ExpertWeights& mx, ExpertStorage storage) {
  ExpertWeights w;
  w.storage = storage;
  w.bias = mx.bias;
  w.n_experts = mx.n_experts, w.out = mx.out, w.in = mx.in;
  const std::int64_t rows = std::int64_t(mx.n_experts) * mx.out, in = mx.in, groups = in / kMxfp4GroupSize;
  const bool bf16 = storage == ExpertStorage::bf16;
  w.values = Tensor::zeros({mx.n_experts, mx.out, mx.in}, bf16 ? DType::bf16 : DType::f8_e4m3);
  if (!bf16) w.row_scales = Tensor::zeros({mx.n_experts, mx.out}, DType::f32);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* b = mx.blocks.data<std::uint8_t>() + r * groups * kMxfp4GroupBytes;
    const std::uint8_t* s = mx.scales.data<std::uint8_t>() + r * groups;
    if (bf16) mxfp4_decode_row_bf16(b, s, in, w.values.data<std::uint16_t>() + r * in);
    else w.row_scales.data<float>()[r] = mxfp4_row_to_fp8(b, s, in, w.values.data<std::uint8_t>() + r * in).scale;
  }
  return w;
}

// k distinct experts per token (as the router picks them), weights positive and summing to 1.
inline void random_routing(std::int64_t S, int E, int k, std::mt19937& rng, Tensor& indices, Tensor& weights) {
  indices = Tensor::zeros({S, k}, DType::i32);
  weights = Tensor::zeros({S, k}, DType::f32);
  std::vector<int> order(E);
  std::uniform_real_distribution<float> dist(0.05f, 1.f);
  for (std::int64_t s = 0; s < S; ++s) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += (weights.data<float>()[s * k + j] = dist(rng));
    for (int j = 0; j < k; ++j) {
      indices.data<std::int32_t>()[s * k + j] = order[j];
      weights.data<float>()[s * k + j] /= sum;
    }
  }
}

// Inputs over 2^-12..2^12: the f32 sums are inexact, so a different split or order would show in the bits.
inline Tensor spread_inputs(std::int64_t rows, int in, std::mt19937& rng) {
  Tensor x = optest::random_f32({rows, in}, rng);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = std::ldexp(x.data<float>()[i], static_cast<int>(rng() % 25) - 12);
  return x;
}

// Device grouping of `indices` (host, [S, k]) for E experts; `flag` receives bad ids.
struct Groups {
  Tensor counts, offsets, rows, assignments, experts, n_routed, flag;
  Tensor item_counter;  // zeroed: the warp-specialised FP8 GEMM claims its items through it
  // claims false: that GEMM's CTAs take fixed shares of its items
  DeviceExpertGroups view(bool claims = true) const {
    return {offsets, rows, assignments, experts, claims ? item_counter : Tensor()};
  }
};

inline Groups group(CudaContext& ctx, const Tensor& indices, int E) {
  using cudatest::poisoned;
  const std::int64_t A = indices.numel();
  Groups g{poisoned(ctx, {E}, DType::i32), poisoned(ctx, {E + 1}, DType::i32), poisoned(ctx, {A}, DType::i32),
           poisoned(ctx, {A}, DType::i32), poisoned(ctx, {E}, DType::i32),     poisoned(ctx, {1}, DType::i32),
           cudatest::zeroed(ctx, {1}, DType::i32), cudatest::zeroed(ctx, {1}, DType::i32)};
  EXPECT_TRUE(group_by_expert_cuda(cudatest::upload(ctx, indices), E, g.counts, g.offsets, g.rows, g.assignments,
                                   g.experts, g.n_routed, g.flag, ctx.stream())
                  .ok());
  return g;
}

// want[s k + j] = W_{indices[s, j]} x[s] + bias, on the CPU (x already bf16-exact).
inline Tensor cpu_per_assignment(const Tensor& x, const Tensor& indices, const ExpertWeights& w) {
  CpuOps cpu;
  const std::int64_t S = indices.size(0), k = indices.size(1);
  Tensor want = Tensor::zeros({S * k, w.out}, DType::f32);
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t j = 0; j < k; ++j) {
      Tensor xs = Tensor::zeros({1, w.in}, DType::f32), y = Tensor::zeros({1, w.out}, DType::f32);
      std::memcpy(xs.data<float>(), x.data<float>() + s * w.in, w.in * sizeof(float));
      EXPECT_TRUE(cpu.expert_matmul(xs, w, indices.data<std::int32_t>()[s * k + j], y).ok());
      std::memcpy(want.data<float>() + (s * k + j) * w.out, y.data<float>(), w.out * sizeof(float));
    }
  return want;
}

}  // namespace day0::moetest
