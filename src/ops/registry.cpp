// Backend registry.
#include "ops/registry.h"

#include <string>

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"
#include "quant/mxfp4_tiles.h"

namespace day0 {

std::vector<std::string_view> backend_names() { return {"cpu", "cuda"}; }

std::string_view expert_compute_name(ExpertCompute c) { return c == ExpertCompute::fp8 ? "fp8" : "bf16"; }

Result<ExpertCompute> parse_expert_compute(std::string_view name) {
  if (name == "bf16") return ExpertCompute::bf16;
  if (name == "fp8") return ExpertCompute::fp8;
  return make_error("unknown expert compute \"" + std::string(name) + "\"; known: bf16, fp8");
}

std::string_view mxfp4_order_name(Mxfp4Order o) {
  return o == Mxfp4Order::tiles ? "tiles" : o == Mxfp4Order::rows ? "rows" : "auto";
}

Result<Mxfp4Order> parse_mxfp4_order(std::string_view name) {
  for (Mxfp4Order o : {Mxfp4Order::automatic, Mxfp4Order::tiles, Mxfp4Order::rows})
    if (name == mxfp4_order_name(o)) return o;
  return make_error("unknown MXFP4 order \"" + std::string(name) + "\"; known: auto, tiles, rows");
}

Result<bool> mxfp4_places_tiled(Mxfp4Order order, const std::vector<Mxfp4BlocksTensor>& blocks) {
  if (order == Mxfp4Order::rows || blocks.empty()) return false;
  for (const Mxfp4BlocksTensor& b : blocks)
    if (b.rows % kMxfp4TileRows != 0) {
      if (order == Mxfp4Order::automatic) return false;
      return make_error(std::string(b.name) + ": the tiled MXFP4 order needs expert rows a multiple of 16, got " +
                        std::to_string(b.rows) + " (run with --mxfp4-order rows)");
    }
  return true;
}

static std::string known_backends() {
  std::string s;
  for (auto n : backend_names()) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

Result<std::unique_ptr<Ops>> make_ops(std::string_view backend, const BackendOptions& options) {
  if (options.kv_cache_dtype != DType::f32 && options.kv_cache_dtype != DType::bf16)
    return make_error("kv cache dtype must be f32 or bf16, got " + std::string(dtype_name(options.kv_cache_dtype)));
  if (backend == "cpu") {
    if (options.kv_cache_dtype != DType::f32)
      return make_error("the cpu backend keeps its KV cache in f32 (a bf16 KV cache is for the cuda backend)");
    return std::unique_ptr<Ops>(std::make_unique<CpuOps>());
  }
  if (backend == "cuda") {
    D0_ASSIGN_OR_RETURN(std::unique_ptr<CudaOps> ops, CudaOps::create(options));
    return std::unique_ptr<Ops>(std::move(ops));
  }
  return make_error("unknown backend \"" + std::string(backend) + "\"; known: " + known_backends());
}

Result<OpEntry> op_coverage(std::string_view backend, OpKind kind) {
  if (backend == "cpu") return CpuOps().entry(kind);
  if (backend == "cuda") return cuda_op_entry(kind);
  return make_error("unknown backend \"" + std::string(backend) + "\"; known: " + known_backends());
}

}  // namespace day0
