// KvBlockStorage: byte copies between token rows and pool slots; dtype-agnostic (whole-byte dtypes).
#include "cache/kv_block_storage.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace day0 {

Result<KvBlockStorage> KvBlockStorage::create(const KvLayout& layout, std::int32_t n_blocks) {
  D0_RETURN_IF_ERROR(kv_bytes_per_token(layout));  // validates the layout
  if (n_blocks < 1) return make_error("kv storage: n_blocks must be >= 1, got " + std::to_string(n_blocks));
  KvBlockStorage s;
  s.layout_ = layout;
  s.n_blocks_ = n_blocks;
  s.elem_bytes_ = dtype_bits(layout.dtype) / 8;
  for (std::int64_t w : layout.row_widths) {
    const Shape shape{w > 0 ? n_blocks : 0, layout.block_size, w};
    s.k_.push_back(Tensor::zeros(shape, layout.dtype));
    s.v_.push_back(Tensor::zeros(shape, layout.dtype));
  }
  return s;
}

Status KvBlockStorage::write(int layer, std::span<const std::int64_t> slots, const Tensor& k, const Tensor& v) {
  if (layer < 0 || layer >= n_layers()) return make_error("kv storage: no layer " + std::to_string(layer));
  const std::int64_t width = layout_.row_widths[static_cast<std::size_t>(layer)];
  const std::int64_t n = static_cast<std::int64_t>(slots.size());
  if (width == 0) return make_error("kv storage: layer " + std::to_string(layer) + " has no KV rows");
  if (k.shape() != Shape{n, width} || v.shape() != k.shape() || k.dtype() != layout_.dtype ||
      v.dtype() != layout_.dtype || !k.is_contiguous() || !v.is_contiguous())
    return make_error("kv storage: layer " + std::to_string(layer) + " expects contiguous " +
                      std::string(dtype_name(layout_.dtype)) + " [" + std::to_string(n) + ", " + std::to_string(width) +
                      "] for " + std::to_string(n) + " slots, got " + shape_to_string(k.shape()));
  const std::int64_t n_slots = static_cast<std::int64_t>(n_blocks_) * layout_.block_size;
  const std::size_t row = static_cast<std::size_t>(width * elem_bytes_);
  auto* kd = static_cast<std::byte*>(k_[static_cast<std::size_t>(layer)].raw());
  auto* vd = static_cast<std::byte*>(v_[static_cast<std::size_t>(layer)].raw());
  const auto* ks = static_cast<const std::byte*>(k.raw());
  const auto* vs = static_cast<const std::byte*>(v.raw());
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t slot = slots[static_cast<std::size_t>(i)];
    if (slot < 0 || slot >= n_slots)
      return make_error("kv storage: slot " + std::to_string(slot) + " outside the pool of " + std::to_string(n_slots));
    std::memcpy(kd + slot * row, ks + i * row, row);
    std::memcpy(vd + slot * row, vs + i * row, row);
  }
  return Status::success();
}

Status KvBlockStorage::gather(int layer, std::span<const BlockId> block_table, std::int64_t n_rows, Tensor& k_out,
                              Tensor& v_out) const {
  if (layer < 0 || layer >= n_layers()) return make_error("kv storage: no layer " + std::to_string(layer));
  const std::int64_t width = layout_.row_widths[static_cast<std::size_t>(layer)];
  const std::int64_t bs = layout_.block_size;
  if (n_rows < 0 || n_rows > static_cast<std::int64_t>(block_table.size()) * bs)
    return make_error("kv storage: " + std::to_string(n_rows) + " rows do not fit a table of " +
                      std::to_string(block_table.size()) + " blocks");
  k_out = Tensor::zeros({n_rows, width}, layout_.dtype);
  v_out = Tensor::zeros({n_rows, width}, layout_.dtype);
  if (width == 0) return Status::success();
  const std::size_t row = static_cast<std::size_t>(width * elem_bytes_);
  const auto* ks = static_cast<const std::byte*>(k_[static_cast<std::size_t>(layer)].raw());
  const auto* vs = static_cast<const std::byte*>(v_[static_cast<std::size_t>(layer)].raw());
  for (std::int64_t first = 0; first < n_rows; first += bs) {
    const BlockId b = block_table[static_cast<std::size_t>(first / bs)];
    if (b < 0 || b >= n_blocks_) return make_error("kv storage: block id " + std::to_string(b) + " outside the pool");
    const std::int64_t rows = std::min(bs, n_rows - first);
    std::memcpy(static_cast<std::byte*>(k_out.raw()) + first * row, ks + b * bs * row, rows * row);
    std::memcpy(static_cast<std::byte*>(v_out.raw()) + first * row, vs + b * bs * row, rows * row);
  }
  return Status::success();
}

Status KvBlockStorage::apply(std::span<const BlockCopy> copies) {
  const std::int64_t bs = layout_.block_size;
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= n_blocks_ || c.dst < 0 || c.dst >= n_blocks_ || c.n_rows < 0 || c.n_rows > bs)
      return make_error("kv storage: invalid block copy " + std::to_string(c.src) + " -> " + std::to_string(c.dst) +
                        " of " + std::to_string(c.n_rows) + " rows");
    for (int l = 0; l < n_layers(); ++l) {
      const std::int64_t width = layout_.row_widths[static_cast<std::size_t>(l)];
      if (width == 0) continue;
      const std::size_t block_bytes = static_cast<std::size_t>(bs * width * elem_bytes_);
      const std::size_t n = static_cast<std::size_t>(c.n_rows * width * elem_bytes_);
      for (Tensor* t : {&k_[static_cast<std::size_t>(l)], &v_[static_cast<std::size_t>(l)]}) {
        auto* base = static_cast<std::byte*>(t->raw());
        std::memmove(base + c.dst * block_bytes, base + c.src * block_bytes, n);
      }
    }
  }
  return Status::success();
}

std::size_t KvBlockStorage::bytes() const {
  std::size_t b = 0;
  for (std::size_t i = 0; i < k_.size(); ++i) b += k_[i].nbytes() + v_[i].nbytes();
  return b;
}

}  // namespace day0
