// StateSlotPool and RecurrentStateStorage.
#include "cache/recurrent_state.h"

#include <cassert>
#include <cstring>
#include <string>

namespace day0 {

StateSlotPool::StateSlotPool(std::int32_t n_slots) : in_use_(static_cast<std::size_t>(n_slots > 0 ? n_slots : 0), 0) {
  free_.reserve(in_use_.size());
  for (std::int32_t i = n_slots - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<StateSlot> StateSlotPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const StateSlot s = free_.back();
  free_.pop_back();
  in_use_[static_cast<std::size_t>(s)] = 1;
  return s;
}

void StateSlotPool::free(StateSlot slot) {
  assert(slot >= 0 && slot < n_slots() && in_use(slot));
  in_use_[static_cast<std::size_t>(slot)] = 0;
  free_.push_back(slot);
}

namespace {
Status check_shape(const RecurrentLayerShape& s, std::size_t layer) {
  if (s.conv_channels < 0 || s.conv_kernel < 0 || s.heads < 0 || s.key_dim < 0 || s.value_dim < 0)
    return make_error("recurrent state: layer " + std::to_string(layer) + " has a negative dimension");
  return Status::success();
}
}  // namespace

Result<std::int64_t> RecurrentStateStorage::bytes_per_slot(const std::vector<RecurrentLayerShape>& layers) {
  std::int64_t total = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    D0_RETURN_IF_ERROR(check_shape(layers[l], l));
    const RecurrentLayerShape& s = layers[l];
    total += static_cast<std::int64_t>(sizeof(float)) *
             (s.conv_channels * s.conv_kernel + s.heads * s.key_dim * s.value_dim);
  }
  return total;
}

Result<RecurrentStateStorage> RecurrentStateStorage::create(const std::vector<RecurrentLayerShape>& layers,
                                                            std::int32_t n_slots) {
  D0_RETURN_IF_ERROR(bytes_per_slot(layers));  // validates the layer shapes
  if (n_slots < 1) return make_error("recurrent state: n_slots must be >= 1, got " + std::to_string(n_slots));
  RecurrentStateStorage s;
  s.layers_ = layers;
  s.n_slots_ = n_slots;
  for (const RecurrentLayerShape& l : layers) {
    const std::int64_t n = l.present() ? n_slots : 0;
    s.conv_.push_back(Tensor::zeros({n, l.conv_channels, l.conv_kernel}, DType::f32));
    s.state_.push_back(Tensor::zeros({n, l.heads, l.key_dim, l.value_dim}, DType::f32));
  }
  return s;
}

Tensor RecurrentStateStorage::conv_state(int layer, StateSlot slot) const {
  const RecurrentLayerShape& l = layers_.at(static_cast<std::size_t>(layer));
  if (!l.present()) return Tensor::zeros({0, 0}, DType::f32);
  return conv_[static_cast<std::size_t>(layer)].slice_rows(slot, slot + 1).view({l.conv_channels, l.conv_kernel});
}

Tensor RecurrentStateStorage::recurrent_state(int layer, StateSlot slot) const {
  const RecurrentLayerShape& l = layers_.at(static_cast<std::size_t>(layer));
  if (!l.present()) return Tensor::zeros({0, 0, 0}, DType::f32);
  return state_[static_cast<std::size_t>(layer)].slice_rows(slot, slot + 1).view({l.heads, l.key_dim, l.value_dim});
}

Status RecurrentStateStorage::reset(StateSlot slot) {
  if (slot < 0 || slot >= n_slots_) return make_error("recurrent state: no slot " + std::to_string(slot));
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    if (!layers_[l].present()) continue;
    for (Tensor* t : {&conv_[l], &state_[l]}) {
      const std::size_t row = t->nbytes() / static_cast<std::size_t>(n_slots_);
      std::memset(static_cast<std::byte*>(t->raw()) + static_cast<std::size_t>(slot) * row, 0, row);
    }
  }
  return Status::success();
}

Status RecurrentStateStorage::apply(std::span<const SlotCopy> copies) {
  for (const SlotCopy& c : copies) {
    if (c.src < 0 || c.src >= n_slots_ || c.dst < 0 || c.dst >= n_slots_)
      return make_error("recurrent state: invalid slot copy " + std::to_string(c.src) + " -> " + std::to_string(c.dst));
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      if (!layers_[l].present()) continue;
      for (Tensor* t : {&conv_[l], &state_[l]}) {
        const std::size_t row = t->nbytes() / static_cast<std::size_t>(n_slots_);
        auto* base = static_cast<std::byte*>(t->raw());
        std::memmove(base + static_cast<std::size_t>(c.dst) * row, base + static_cast<std::size_t>(c.src) * row, row);
      }
    }
  }
  return Status::success();
}

}  // namespace day0
