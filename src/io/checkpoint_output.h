// Writing a checkpoint directory (synth, convert): preparing OUTDIR, the shard file names Hugging Face uses, and
// small files (index, config) written through a temporary name and a rename, so readers never see half a file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace day0 {

// OUTDIR is created if absent. If it holds anything it is refused unless `force`, which removes only what a
// checkpoint writer replaces: model*.safetensors* (shards and index) and config.json.
Status prepare_checkpoint_outdir(const std::string& dir, bool force);

// "model.safetensors" for one shard, else "model-0000K-of-0000N.safetensors" (k 0-based).
std::string shard_file_name(int k, int n);

// The shard of each tensor, greedy in order as transformers shards: a new shard when the next tensor would
// overflow the current one (a tensor larger than shard_bytes gets a shard of its own). Shard count: back() + 1.
std::vector<int> assign_shards(std::span<const std::uint64_t> tensor_bytes, std::uint64_t shard_bytes);

// assign_shards over a writer's items (anything with `bytes` and an int `shard`): sets each item's shard and
// returns the shard count.
template <class Items>
int place_in_shards(Items& items, std::uint64_t shard_bytes) {
  std::vector<std::uint64_t> bytes;
  for (const auto& it : items) bytes.push_back(it.bytes);
  const std::vector<int> shards = assign_shards(bytes, shard_bytes);
  for (size_t i = 0; i < items.size(); ++i) items[i].shard = shards[i];
  return shards.empty() ? 0 : shards.back() + 1;
}

// Writes `text` to `path` through a temporary file in the same directory and a rename.
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace day0
