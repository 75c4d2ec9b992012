// Per-sequence state of linear-attention layers (KDA, Gated DeltaNet): a short-convolution state [C, K] and a
// recurrent state [H, dk, dv] per layer — fixed size, not paged, constant in context length. One slot per running
// sequence, from a pool reserved at start-up (max running sequences). See README.md for what is not built yet.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

using StateSlot = std::int32_t;

// Shape of one layer's state; all zero for layers without recurrent state (softmax attention).
struct RecurrentLayerShape {
  std::int64_t conv_channels = 0;  // C: channels through the causal short convolution (q, k, v concatenated)
  std::int64_t conv_kernel = 0;    // K: kept inputs of the convolution (kernel size - 1 or kernel size, per family)
  std::int64_t heads = 0;          // H
  std::int64_t key_dim = 0;        // dk
  std::int64_t value_dim = 0;      // dv
  bool present() const { return conv_channels > 0 || heads > 0; }
};

// A fork (n > 1 sampling) copies the parent's state into the child's slot.
struct SlotCopy {
  StateSlot src = -1;
  StateSlot dst = -1;
};

// Slot bookkeeping: a free list, no storage (device-agnostic, like BlockPool). Never grows.
class StateSlotPool {
 public:
  explicit StateSlotPool(std::int32_t n_slots);
  std::int32_t n_slots() const { return static_cast<std::int32_t>(in_use_.size()); }
  std::int32_t n_free() const { return static_cast<std::int32_t>(free_.size()); }
  // nullopt when every slot is taken (the scheduler admits no more sequences).
  std::optional<StateSlot> allocate();
  void free(StateSlot slot);
  bool in_use(StateSlot slot) const { return in_use_[static_cast<std::size_t>(slot)] != 0; }

 private:
  std::vector<std::uint8_t> in_use_;
  std::vector<StateSlot> free_;
};

// The f32 state tensors on the CPU: per layer [n_slots, C, K] and [n_slots, H, dk, dv].
class RecurrentStateStorage {
 public:
  static Result<RecurrentStateStorage> create(const std::vector<RecurrentLayerShape>& layers, std::int32_t n_slots);
  // Bytes of one slot across layers (for the memory plan).
  static Result<std::int64_t> bytes_per_slot(const std::vector<RecurrentLayerShape>& layers);

  std::int32_t n_slots() const { return n_slots_; }
  // Views of one slot's state, sharing storage: conv [C, K], recurrent [H, dk, dv]. Empty for non-recurrent layers.
  Tensor conv_state(int layer, StateSlot slot) const;
  Tensor recurrent_state(int layer, StateSlot slot) const;
  // Zeroes a slot: a new sequence starts from zero state.
  Status reset(StateSlot slot);
  Status apply(std::span<const SlotCopy> copies);

 private:
  std::vector<RecurrentLayerShape> layers_;
  std::int32_t n_slots_ = 0;
  std::vector<Tensor> conv_, state_;
};

}  // namespace day0
