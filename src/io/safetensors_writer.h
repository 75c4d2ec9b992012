// Streaming safetensors writer: the tensors are declared up front, the header (with every offset) is
// written first, then each tensor's bytes are appended in declared order. Only one chunk is ever held,
// so files far larger than memory can be written. The file is written to a temporary name in the same
// directory and renamed over `path` by close(), so readers never see a half-written file; a writer
// destroyed before close() removes its temporary file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "io/safetensors.h"

namespace day0 {

struct TensorDecl {
  std::string name;
  DType dtype;
  Shape shape;
};

class SafetensorsWriter {
 public:
  // Validates the declarations (unique names, not "__metadata__", a safetensors dtype, whole bytes, valid
  // UTF-8 names), lays the tensors out in the order given, creates the temporary file and writes the
  // header (padded with spaces to a multiple of 8 bytes). Errors name `path` and the tensor.
  static Result<std::unique_ptr<SafetensorsWriter>> create(const std::string& path, std::vector<TensorDecl> tensors,
                                                           const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends raw bytes to the data region: they belong to the current tensor and may run on into the
  // following ones. Writing past the declared data region is an error.
  Status append(const void* data, std::size_t size);

  // Fill callback: write exactly `chunk.size()` bytes of the tensor, starting at byte `offset` of it.
  using FillFn = std::function<Status(std::uint64_t offset, std::span<std::byte> chunk)>;
  // Writes the whole of tensor `name`, which must be the next one not yet written, in chunks of
  // `chunk_bytes` (the last one may be shorter) through one reused buffer.
  Status write_tensor(std::string_view name, std::size_t chunk_bytes, const FillFn& fill);

  // Checks that every declared byte was written, then syncs, closes and renames into place.
  Status close();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in declared (= offset) order
  std::uint64_t data_bytes() const { return data_bytes_; }
  std::uint64_t header_bytes() const { return header_bytes_; }  // 8 + JSON (padded)
  std::uint64_t file_bytes() const { return header_bytes_ + data_bytes_; }
  std::uint64_t written() const { return written_; }  // data bytes appended so far

 private:
  SafetensorsWriter() = default;
  Status fail(const std::string& what, int err);

  std::string path_, tmp_;
  int fd_ = -1;
  std::vector<TensorInfo> tensors_;
  std::uint64_t data_bytes_ = 0, header_bytes_ = 0, written_ = 0;
  std::vector<std::byte> buffer_;
  bool failed_ = false;
};

}  // namespace day0
