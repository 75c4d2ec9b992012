// Binds a ModelSpec's weight manifest to a checkpoint: every declared tensor present, with the declared
// shape and an accepted dtype, before any byte is used.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "arch/model_spec.h"
#include "io/checkpoint.h"
#include "ops/ops.h"

namespace day0 {

struct WeightProblem {
  std::string name;
  std::string fault;  // "missing", "shape [..] expected [..]", "dtype f32 expected bf16|f32|f16"
};

struct WeightCheck {
  std::vector<WeightProblem> problems;
  std::vector<std::string> unexpected;  // in the checkpoint, not in the manifest
  bool ok() const { return problems.empty(); }
};

WeightCheck check_weights(const ModelSpec& spec, const Checkpoint& checkpoint);

// Names of the routed experts' storage tensors (biases apart): what Ops::place_weights keeps as stored.
std::set<std::string> expert_tensor_names(const ModelSpec& spec);
// The experts' storage names, and each attention block's q, k and v weights (and biases, where all three have one)
// as groups to place back to back: one GEMM may then take the three (Ops::place_weights).
WeightRoles weight_roles(const ModelSpec& spec);

class ModelWeights {
 public:
  // Fails with the list of problems (first few named, count of the rest) if the check fails.
  static Result<ModelWeights> bind(const ModelSpec& spec, const Checkpoint& checkpoint);
  // Tensors someone already placed (a backend's copies of bound weights).
  static ModelWeights from_tensors(NamedTensors tensors);
  const NamedTensors& tensors() const { return tensors_; }
  // Manifest names only; an absent name is a programming error.
  const Tensor& get(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }

 private:
  NamedTensors tensors_;
};

}  // namespace day0
