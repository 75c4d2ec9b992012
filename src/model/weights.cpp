// Weight manifest check and binding.
#include "model/weights.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <set>

namespace day0 {

static std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string s;
  for (DType d : dtypes) {
    if (!s.empty()) s += '|';
    s += dtype_name(d);
  }
  return s;
}

WeightCheck check_weights(const ModelSpec& spec, const Checkpoint& checkpoint) {
  WeightCheck check;
  std::set<std::string> declared;
  for (const auto& w : spec.weights) {
    declared.insert(w.name);
    const auto* e = checkpoint.find(w.name);
    if (!e) {
      check.problems.push_back({w.name, "missing"});
      continue;
    }
    const std::string where = " (in " + e->file->path() + ")";
    if (e->info->shape != w.shape)
      check.problems.push_back({w.name, "shape " + shape_to_string(e->info->shape) + ", expected " +
                                            shape_to_string(w.shape) + where});
    if (std::find(w.dtypes.begin(), w.dtypes.end(), e->info->dtype) == w.dtypes.end())
      check.problems.push_back({w.name, "dtype " + std::string(dtype_name(e->info->dtype)) + ", expected " +
                                            dtype_list(w.dtypes) + where});
  }
  for (const auto& name : checkpoint.names())
    if (!declared.count(name)) check.unexpected.push_back(name);
  return check;
}

std::set<std::string> expert_tensor_names(const ModelSpec& spec) {
  std::set<std::string> names;
  for (const LayerSpec& L : spec.layers) {
    if (L.channel.kind != ChannelMixerKind::moe) continue;
    for (const ExpertMatrix* m : {&L.channel.moe.gate_up, &L.channel.moe.down})
      for (const ExpertTensor& t : expert_tensors(*m, L.channel.moe.n_experts)) names.insert(t.name);
  }
  return names;
}

WeightRoles weight_roles(const ModelSpec& spec) {
  WeightRoles roles{expert_tensor_names(spec), {}};
  for (const LayerSpec& L : spec.layers) {
    if (L.mixer.kind != TokenMixerKind::gqa_attention) continue;
    const AttentionSpec& a = L.mixer.attention;
    roles.adjacent.push_back({a.q_weight, a.k_weight, a.v_weight});
    if (!a.q_bias.empty() && !a.k_bias.empty() && !a.v_bias.empty())
      roles.adjacent.push_back({a.q_bias, a.k_bias, a.v_bias});
  }
  return roles;
}

Result<ModelWeights> ModelWeights::bind(const ModelSpec& spec, const Checkpoint& checkpoint) {
  const WeightCheck check = check_weights(spec, checkpoint);
  if (!check.ok()) {
    std::string msg = "checkpoint does not match the " + spec.family + " manifest: ";
    const size_t shown = std::min<size_t>(check.problems.size(), 4);
    for (size_t i = 0; i < shown; ++i)
      msg += (i ? "; " : "") + check.problems[i].name + ": " + check.problems[i].fault;
    if (check.problems.size() > shown) msg += "; and " + std::to_string(check.problems.size() - shown) + " more";
    return make_error(msg);
  }
  ModelWeights weights;
  for (const auto& w : spec.weights) {
    auto t = checkpoint.tensor(w.name);
    if (!t.ok()) return t.error();
    Tensor tensor = *t;
    // safetensors offsets need not be aligned to the element size; copy the rare misaligned tensor.
    const auto align = static_cast<std::uintptr_t>(std::max(1, dtype_bits(tensor.dtype()) / 8));
    if (reinterpret_cast<std::uintptr_t>(tensor.raw()) % align != 0) tensor = tensor.clone();
    weights.tensors_.emplace(w.name, std::move(tensor));
  }
  return weights;
}

ModelWeights ModelWeights::from_tensors(NamedTensors tensors) {
  ModelWeights w;
  w.tensors_ = std::move(tensors);
  return w;
}

const Tensor& ModelWeights::get(const std::string& name) const {
  auto it = tensors_.find(name);
  assert(it != tensors_.end() && "weight not in the manifest");
  return it->second;
}

}  // namespace day0
