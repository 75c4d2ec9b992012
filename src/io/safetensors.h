// safetensors files: memory-mapped, validated before any tensor is used.
// Format: u64 little-endian header length N, N bytes of JSON header, then the data region.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "core/tensor.h"

namespace day0 {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin = 0;  // byte offsets relative to the data region
  std::uint64_t end = 0;
};

// Largest header accepted; far above any real checkpoint's, far below what would exhaust memory.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

class SafetensorsFile {
 public:
  // Maps the file and validates: header length, JSON, dtype names, shapes, offsets inside the file,
  // byte length = numel x dtype size, no overlapping tensors, no gaps. Errors name the file, the tensor
  // and the fault.
  static Result<std::shared_ptr<const SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::uint64_t file_bytes() const { return file_bytes_; }

  // A borrowed CPU view into the mapping; it keeps the mapping alive. The mapping is read-only
  // (PROT_READ, MAP_PRIVATE): never write through the view. The view is byte-addressed: safetensors
  // offsets need not be aligned to the element size, so callers that need aligned access copy
  // (Tensor::clone). `info` is looked up by name in this file; an undefined Tensor() comes back for a
  // name this file does not hold.
  Tensor tensor(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  const std::byte* map_ = nullptr;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t data_start_ = 0;
  std::weak_ptr<const SafetensorsFile> self_;
};

// Writes tensors (contiguous, CPU) in name order, with optional string metadata. The header is padded
// with spaces to a multiple of 8 bytes; the file is written to a temporary name in the same directory
// and renamed over `path`, so readers never see a half-written file. Errors on duplicate or reserved
// ("__metadata__") names, non-CPU or non-contiguous tensors and F4 tensors of odd element count.
Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

namespace detail {
// Parses `text` as JSON into `out`, rejecting what nlohmann::json would silently accept: duplicate
// object keys (it keeps the last) and nesting deeper than 64 levels. The error is one line without a
// file path (callers prefix it). Shared by safetensors.cpp and checkpoint.cpp.
Status parse_json_strict(std::string_view text, nlohmann::json& out);
// `s` in double quotes, control bytes escaped, cut to at most 200 bytes: safe to put in a one-line error.
std::string quote_for_error(std::string_view s);
}  // namespace detail

}  // namespace day0
