// Backend registry.
#include "ops/registry.h"

#include <string>

#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_ops.h"

namespace day0 {

std::vector<std::string_view> backend_names() { return {"cpu", "cuda"}; }

std::string_view expert_compute_name(ExpertCompute c) { return c == ExpertCompute::fp8 ? "fp8" : "bf16"; }

Result<ExpertCompute> parse_expert_compute(std::string_view name) {
  if (name == "bf16") return ExpertCompute::bf16;
  if (name == "fp8") return ExpertCompute::fp8;
  return make_error("unknown expert compute \"" + std::string(name) + "\"; known: bf16, fp8");
}

static std::string known_backends() {
  std::string s;
  for (auto n : backend_names()) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

Result<std::unique_ptr<Ops>> make_ops(std::string_view backend, const BackendOptions& options) {
  if (backend == "cpu") return std::unique_ptr<Ops>(std::make_unique<CpuOps>());
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
