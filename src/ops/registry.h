// Backends by name: an executable Ops instance, and the coverage table (which works even for a
// backend that cannot run on this machine, so `inspect --backend cuda` answers anywhere).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ops/ops.h"

namespace day0 {

std::string_view expert_compute_name(ExpertCompute c);
Result<ExpertCompute> parse_expert_compute(std::string_view name);

// cuda: the order MXFP4 expert blocks are placed in. tiles: quant/mxfp4_tiles.h's (16 rows x 4 groups a 1 KB tile,
// K padded to whole tiles: +2.2% of the blocks' bytes on gpt-oss), which the MoE kernels read faster (H100, v55-v56:
// the grouped kernel -3 to -6%, the 2-CTA FP8 GEMM -9 to -12%; 20b B64 +1.3 to +2.4%, 120b prefill 4,096 +0.7%, B1
// equal); it needs every expert's rows a multiple of 16. rows: the published order. automatic: tiles where every
// MXFP4 expert tensor fits them, else rows. Every MXFP4 kernel reads both; the results are the same bits.
enum class Mxfp4Order { automatic, tiles, rows };
std::string_view mxfp4_order_name(Mxfp4Order o);
Result<Mxfp4Order> parse_mxfp4_order(std::string_view name);
// One MXFP4 expert blocks tensor as placement sees it: its name and rows (out).
struct Mxfp4BlocksTensor {
  std::string_view name;
  std::int64_t rows;
};
// Whether `order` places these MXFP4 expert blocks tensors in the tiled order (all of them or none): never with rows
// or none given; else where every one's rows are a multiple of 16, which tiles insists on (an error naming the
// first that is not).
Result<bool> mxfp4_places_tiled(Mxfp4Order order, const std::vector<Mxfp4BlocksTensor>& blocks);

// With fp8 expert compute, MoE calls up to this many tokens read MXFP4 directly: decode-sized ones in the bf16
// fused kernels, prefill-sized ones in the grouped FP8 wgmma GEMMs (moe_cuda.cu: grouped_fp8_experts; H200,
// 4,096-token prefill: 20b 47.4k tok/s against bf16 mode's 45.1k, 120b 28.1k against 26.5k). Before those GEMMs
// the direct path already beat convert + cuBLASLt FP8 GEMMs here (20b 43.2k against 37.7k, 120b 23.1k against
// 13.6k); the conversion is left for steps above it, not measured against the grouped GEMMs at 8,192 tokens.
inline constexpr std::int64_t kFp8FusedMoeTokens = 4096;

struct BackendOptions {
  int device = 0;
  // Share of the GPU's total memory this instance takes at start-up (it must be free) for everything (weights,
  // workspaces, KV cache, activations), as vLLM's gpu_memory_utilization; the rest stays for the driver and other
  // processes.
  double memory_fraction = 0.92;
  ExpertCompute expert_compute = ExpertCompute::bf16;
  // MoE calls of at most this many tokens read MXFP4 experts directly: the fused matmul at decode sizes (bf16
  // whatever expert_compute says), the grouped GEMM at prefill sizes (FP8 MMAs with fp8); larger ones convert the
  // routed experts (to expert_compute) and run cuBLASLt GEMMs. 0: always the conversion path. Unset: every step
  // with bf16 compute, up to kFp8FusedMoeTokens with fp8 (fused_moe_tokens()).
  std::optional<std::int64_t> fused_moe_max_tokens;
  // Prefill-sized attention (64+ query rows, head_dim 64) on tensor cores; false: the f32 per-query kernel for every
  // step.
  bool attention_tensor_cores = true;
  // With a bf16 KV cache, those tensor cores on bf16 operands: K and V as cached (copied raw, double-buffered), Q and
  // the softmax weights rounded to bf16 (8 significant bits, as a bf16 model's own attention and FlashAttention
  // compute), no block scales; 26% faster than the f16 form at 4,096 tokens (v22). false, or an f32 KV cache: f16
  // operands with a power-of-two scale per block (11 significant bits).
  bool attention_bf16_operands = true;
  // Every token's arithmetic independent of what else is in its step (RELIABILITY D3): dense linears through the
  // small-M kernel in 16-row slices, MoE through the fused MXFP4 kernel at every size (bf16 compute only), attention
  // on the f32 kernel with key splits of a fixed length. Slower prefill and long-context decode; off by default.
  bool batch_invariant = false;
  // Kernels of a step launched as programmatic dependents (ops/cuda/dependent_launch.h): each may be scheduled
  // while the one before finishes. Same arithmetic either way; false for A/B measurement and profiled runs.
  bool dependent_launch = true;
  // The KV cache's element type: f32, or bf16 (cuda only: half the bytes a decode step's attention reads and half
  // the memory a token holds; K and V rounded to bf16 as they are written, as a bf16 model computes them).
  DType kv_cache_dtype = DType::f32;
  Mxfp4Order mxfp4_order = Mxfp4Order::automatic;

  std::int64_t fused_moe_tokens() const {
    return fused_moe_max_tokens.value_or(expert_compute == ExpertCompute::fp8 ? kFp8FusedMoeTokens
                                                                               : std::int64_t{1} << 20);
  }
};

std::vector<std::string_view> backend_names();
Result<std::unique_ptr<Ops>> make_ops(std::string_view backend, const BackendOptions& options = {});
Result<OpEntry> op_coverage(std::string_view backend, OpKind kind);

}  // namespace day0
