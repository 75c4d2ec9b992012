// Backend registry. The CUDA backend has no executor yet: its coverage reports what exists.
#include "ops/registry.h"

#include <string>

#include "ops/cpu/cpu_ops.h"

namespace day0 {

std::vector<std::string_view> backend_names() { return {"cpu", "cuda"}; }

static std::string known_backends() {
  std::string s;
  for (auto n : backend_names()) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

Result<std::unique_ptr<Ops>> make_ops(std::string_view backend) {
  if (backend == "cpu") return std::unique_ptr<Ops>(std::make_unique<CpuOps>());
  if (backend == "cuda") return make_error("backend cuda: no executor yet (kernels arrive with the CUDA backend)");
  return make_error("unknown backend \"" + std::string(backend) + "\"; known: " + known_backends());
}

Result<OpEntry> op_coverage(std::string_view backend, OpKind kind) {
  if (backend == "cpu") return CpuOps().entry(kind);
  if (backend == "cuda") return OpEntry::missing;
  return make_error("unknown backend \"" + std::string(backend) + "\"; known: " + known_backends());
}

}  // namespace day0
