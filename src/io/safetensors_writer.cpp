// SafetensorsWriter: header first (offsets known from the declarations), then the data region streamed.
#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace day0 {

using detail::quote_for_error;

namespace {

// Writes all of `data`, retrying on EINTR and short writes.
bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(const std::string& path,
                                                                     std::vector<TensorDecl> tensors,
                                                                     const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->path_ = path;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::unordered_set<std::string> seen;
  std::uint64_t offset = 0;
  w->tensors_.reserve(tensors.size());
  for (TensorDecl& t : tensors) {
    const std::string where = path + ": tensor " + quote_for_error(t.name) + ": ";
    if (t.name == "__metadata__") return make_error(where + "name is reserved for the metadata entry");
    if (!seen.insert(t.name).second) return make_error(where + "name given twice");
    const Result<std::int64_t> numel = shape_numel(t.shape);
    if (!numel.ok()) return make_error(where + numel.error().message);
    const auto count = static_cast<std::uint64_t>(*numel);
    const auto bits = static_cast<std::uint64_t>(dtype_bits(t.dtype));
    if (bits != 0 && count > ~std::uint64_t{0} / bits) return make_error(where + "byte count overflows 64 bits");
    if ((count * bits) % 8 != 0) {
      return make_error(where + std::to_string(count) + " " + std::string(dtype_name(t.dtype)) +
                        " elements do not fill whole bytes (expected an even element count)");
    }
    const std::string_view st_name = dtype_safetensors_name(t.dtype);
    if (st_name.empty()) return make_error(where + "dtype " + std::string(dtype_name(t.dtype)) + " has no safetensors name");
    const std::uint64_t bytes = count * bits / 8;
    if (bytes > ~std::uint64_t{0} - offset) return make_error(where + "data region overflows 64 bits");
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(st_name);
    entry["shape"] = t.shape;
    entry["data_offsets"] = nlohmann::ordered_json::array({offset, offset + bytes});
    header[t.name] = std::move(entry);
    w->tensors_.push_back(TensorInfo{std::move(t.name), t.dtype, std::move(t.shape), offset, offset + bytes});
    offset += bytes;
  }
  w->data_bytes_ = offset;
  std::string text;
  try {
    text = header.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict);
  } catch (const nlohmann::ordered_json::exception& e) {
    return make_error(path + ": cannot encode header (names must be valid UTF-8): " + quote_for_error(e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  w->header_bytes_ = sizeof len + text.size();

  static std::atomic<unsigned> counter{0};
  w->tmp_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  w->fd_ = ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd_ < 0) {
    return make_error(path + ": cannot create temporary file " + w->tmp_ + ": " + std::strerror(errno));
  }
  if (!write_all(w->fd_, len, sizeof len) || !write_all(w->fd_, text.data(), text.size())) {
    return w->fail("cannot write header to " + w->tmp_, errno).error();
  }
  return w;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

Status SafetensorsWriter::fail(const std::string& what, int err) {
  failed_ = true;
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
    fd_ = -1;
  }
  return make_error(path_ + ": " + what + (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

Status SafetensorsWriter::append(const void* data, std::size_t size) {
  if (fd_ < 0) return make_error(path_ + ": append after " + (failed_ ? "an error" : "close"));
  if (size > data_bytes_ - written_) {
    return fail("append of " + std::to_string(size) + " bytes at data offset " + std::to_string(written_) +
                    " runs past the declared data region of " + std::to_string(data_bytes_) + " bytes",
                0);
  }
  if (size != 0 && !write_all(fd_, data, size)) {
    // Name the tensor being written.
    const auto it = std::upper_bound(tensors_.begin(), tensors_.end(), written_,
                                     [](std::uint64_t pos, const TensorInfo& t) { return pos < t.end; });
    const std::string name = it != tensors_.end() ? " (tensor " + quote_for_error(it->name) + ")" : std::string();
    return fail("cannot write data" + name + " to " + tmp_, errno);
  }
  written_ += size;
  return Status::success();
}

Status SafetensorsWriter::write_tensor(std::string_view name, std::size_t chunk_bytes, const FillFn& fill) {
  if (fd_ < 0) return make_error(path_ + ": write_tensor after " + (failed_ ? "an error" : "close"));
  auto t = tensors_.begin();
  for (; t != tensors_.end(); ++t)
    if (t->name == name) break;
  if (t == tensors_.end()) return fail("write_tensor: " + quote_for_error(name) + " was not declared", 0);
  if (t->begin != written_) {
    return fail("write_tensor: " + quote_for_error(name) + " is at data offset " + std::to_string(t->begin) +
                    ", but the next byte to write is at " + std::to_string(written_),
                0);
  }
  const std::uint64_t bytes = t->end - t->begin;
  if (chunk_bytes == 0) chunk_bytes = 1;
  const std::size_t buf = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, bytes));
  if (buffer_.size() < buf) buffer_.resize(buf);
  for (std::uint64_t off = 0; off < bytes;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, bytes - off));
    std::span<std::byte> chunk(buffer_.data(), n);
    Status s = fill(off, chunk);
    if (!s.ok()) {
      (void)fail("", 0);
      return make_error(path_ + ": tensor " + quote_for_error(name) + ": " + s.error().message);
    }
    D0_RETURN_IF_ERROR(append(chunk.data(), n));
    off += n;
  }
  return Status::success();
}

Status SafetensorsWriter::close() {
  if (fd_ < 0) return make_error(path_ + ": close after " + (failed_ ? "an error" : "close"));
  if (written_ != data_bytes_) {
    const auto it = std::upper_bound(tensors_.begin(), tensors_.end(), written_,
                                     [](std::uint64_t pos, const TensorInfo& t) { return pos < t.end; });
    return fail("closed after " + std::to_string(written_) + " of " + std::to_string(data_bytes_) +
                    " declared data bytes" +
                    (it != tensors_.end() ? " (tensor " + quote_for_error(it->name) + " incomplete)" : std::string()),
                0);
  }
  if (::fsync(fd_) != 0) return fail("cannot sync " + tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    failed_ = true;
    return make_error(path_ + ": cannot close " + tmp_ + ": " + std::strerror(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    failed_ = true;
    return make_error(path_ + ": cannot rename " + tmp_ + " to it: " + std::strerror(err));
  }
  return Status::success();
}

}  // namespace day0
