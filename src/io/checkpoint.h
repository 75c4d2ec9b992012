// A model directory's weights: one model.safetensors, or shards listed by model.safetensors.index.json.
// Every shard is opened and validated up front; every tensor the index names must exist in its shard.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace day0 {

class Checkpoint {
 public:
  // Opens DIR/model.safetensors.index.json if present, else DIR/model.safetensors, else the single
  // *.safetensors file in DIR. Errors name the file and the fault (missing shard, bad index JSON,
  // a tensor listed in two shards, a shard name that leaves the directory, ...).
  static Result<Checkpoint> open_dir(const std::string& dir);
  // True if DIR holds any safetensors weights at all (used to decide config-only inspection).
  static bool has_weights(const std::string& dir);

  struct Entry {
    const TensorInfo* info;
    const SafetensorsFile* file;
  };
  const Entry* find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  std::uint64_t total_bytes() const;  // sum of tensor byte lengths

  // Borrowed view of a tensor; error naming the tensor if it is absent.
  Result<Tensor> tensor(std::string_view name) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::vector<std::pair<std::string, Entry>> entries_;  // sorted by name
};

}  // namespace day0
