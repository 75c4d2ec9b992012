// BlockPool and KV budget sizing.
#include "cache/block_pool.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <limits>
#include <string>

namespace day0 {

Result<std::int64_t> kv_bytes_per_token(const KvLayout& layout) {
  if (layout.block_size < 1)
    return make_error("kv layout: block_size must be >= 1, got " + std::to_string(layout.block_size));
  const int bits = dtype_bits(layout.dtype);
  if (bits % 8 != 0)
    return make_error("kv layout: dtype " + std::string(dtype_name(layout.dtype)) + " is not byte-sized");
  const std::int64_t elem = bits / 8;
  std::int64_t total = 0;
  for (std::size_t l = 0; l < layout.row_widths.size(); ++l) {
    const std::int64_t w = layout.row_widths[l];
    if (w < 0)
      return make_error("kv layout: layer " + std::to_string(l) + " has negative row width " + std::to_string(w));
    if (w > (std::numeric_limits<std::int64_t>::max() - total) / (2 * elem))
      return make_error("kv layout: bytes per token overflow at layer " + std::to_string(l));
    total += 2 * w * elem;
  }
  return total;
}

Result<std::int32_t> kv_blocks_for_budget(const KvLayout& layout, std::size_t budget_bytes) {
  D0_ASSIGN_OR_RETURN(const std::int64_t per_token, kv_bytes_per_token(layout));
  if (per_token == 0) return make_error("kv layout: no layer has KV rows, a KV pool is not needed");
  if (per_token > std::numeric_limits<std::int64_t>::max() / layout.block_size)
    return make_error("kv layout: bytes per block overflow");
  const std::int64_t per_block = per_token * layout.block_size;
  const std::uint64_t n = budget_bytes / static_cast<std::uint64_t>(per_block);
  if (n == 0)
    return make_error("kv budget of " + std::to_string(budget_bytes) + " bytes holds no block; one block of " +
                      std::to_string(layout.block_size) + " tokens needs " + std::to_string(per_block) + " bytes");
  if (n > static_cast<std::uint64_t>(std::numeric_limits<BlockId>::max())) return std::numeric_limits<BlockId>::max();
  return static_cast<std::int32_t>(n);
}

Status check_kv_pool_fits(const KvLayout& layout, std::int64_t blocks, std::size_t free_bytes, std::int64_t context) {
  auto per_token = kv_bytes_per_token(layout);
  if (!per_token.ok() || *per_token == 0) return Status::success();  // no KV layers, or the layout's own error later
  const double need = static_cast<double>(blocks) * static_cast<double>(layout.block_size) * *per_token;
  if (need <= static_cast<double>(free_bytes)) return Status::success();
  const auto fit = static_cast<std::int64_t>(free_bytes / static_cast<std::uint64_t>(*per_token));
  char sizes[96];
  std::snprintf(sizes, sizeof sizes, "%.2f GiB, and %.2f GiB is left", need / (1 << 30),
                static_cast<double>(free_bytes) / (1 << 30));
  const std::string what = "KV cache: " + std::to_string(blocks * layout.block_size) + " tokens need " + sizes +
                           " after the weights and workspaces; ";
  const std::string more = " tokens fit) or give the backend more memory (--memory-fraction)";
  if (context > 0)
    return make_error(what + "the pool holds at least one sequence of the context length (" + std::to_string(context) +
                      " tokens): lower it (--max-model-len; ~" + std::to_string(fit) + more);
  return make_error(what + "lower the pool (--kv-tokens; ~" + std::to_string(fit) + more);
}

Result<KvPoolSize> size_kv_pool(const KvLayout& layout, const KvPoolRequest& request,
                                std::optional<std::size_t> free_bytes) {
  const std::int64_t bs = layout.block_size;
  if (bs < 1) return make_error("kv layout: block_size must be >= 1, got " + std::to_string(bs));
  KvPoolSize size{request.max_tokens, 0};
  std::int64_t least = (request.max_tokens + bs - 1) / bs;
  auto per_token = kv_bytes_per_token(layout);
  const bool fitted = request.fit != KvPoolFit::as_asked || request.fit_max_tokens;
  std::int64_t fits = std::numeric_limits<BlockId>::max();
  if (fitted && free_bytes && per_token.ok() && *per_token > 0) {
    const auto reserve = static_cast<std::size_t>(std::max<std::int64_t>(request.reserve_bytes, 0));
    const std::size_t budget = *free_bytes > reserve ? *free_bytes - reserve : 0;
    const auto whole = kv_blocks_for_budget(layout, budget);  // an error: not one block
    fits = (whole.ok() ? *whole : 0) - request.pad_blocks;
    if (request.fit_max_tokens && fits < least) {
      if (fits < 1)
        return make_error("KV cache: not one block of " + std::to_string(bs) + " tokens fits the " +
                          std::to_string(budget >> 20) + " MiB left after the weights, workspaces and " +
                          std::to_string(reserve >> 20) + " MiB of step scratch (--memory-fraction)");
      size.max_tokens = fits * bs;
      least = fits;
    }
  } else if (request.fit == KvPoolFit::fill) {
    fits = (request.pool_tokens + bs - 1) / bs;  // nothing to fit to: pool_tokens
  }
  const std::int64_t asked = (std::max(request.pool_tokens, size.max_tokens) + bs - 1) / bs;
  switch (request.fit) {
    case KvPoolFit::as_asked:
      size.blocks = asked;
      break;
    case KvPoolFit::shrink:
      size.blocks = std::max(least, std::min(asked, fits));
      break;
    case KvPoolFit::fill:
      size.blocks = std::max(least, fits);
      break;
  }
  if (free_bytes) {
    D0_RETURN_IF_ERROR(check_kv_pool_fits(layout, size.blocks + request.pad_blocks, *free_bytes,
                                          size.blocks == least ? size.max_tokens : 0));
  }
  return size;
}

BlockPool::BlockPool(std::int32_t n_blocks)
    : ref_counts_(static_cast<std::size_t>(n_blocks > 0 ? n_blocks : 0), 0), on_free_list_(ref_counts_.size(), 1) {
  free_.reserve(ref_counts_.size());
  // Pushed in reverse so that block 0 is handed out first (readable tests and dumps).
  for (std::int32_t i = n_blocks - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const BlockId id = free_.back();
  free_.pop_back();
  on_free_list_[static_cast<std::size_t>(id)] = 0;
  ref_counts_[static_cast<std::size_t>(id)] = 1;
  return id;
}

void BlockPool::acquire(BlockId id) {
  assert(valid(id) && !is_free(id));
  ++ref_counts_[static_cast<std::size_t>(id)];
}

std::int32_t BlockPool::release(BlockId id) {
  assert(valid(id) && ref_count(id) > 0);
  return --ref_counts_[static_cast<std::size_t>(id)];
}

void BlockPool::push_free(BlockId id) {
  assert(valid(id) && ref_count(id) == 0 && !is_free(id));
  on_free_list_[static_cast<std::size_t>(id)] = 1;
  free_.push_back(id);  // capacity reserved up front: no allocation here
}

}  // namespace day0
