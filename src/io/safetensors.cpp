// safetensors reader (mmap + full validation before any tensor is handed out) and writer.
//
// The file is untrusted: every fault comes back as one line naming the file, the tensor where there is
// one, and what was expected versus found. The layout rules are those of the reference Rust library:
// tensors are contiguous in offset order, with no overlap and no gap, and cover the data region exactly.
#include "io/safetensors.h"

#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>

namespace day0 {

using nlohmann::json;

namespace {

constexpr int kMaxJsonDepth = 64;
constexpr std::size_t kMaxQuotedBytes = 200;

std::string errno_text(int err) { return std::strerror(err); }

// Escapes bytes that would break a one-line message; keeps printable ASCII (and UTF-8 if `keep_utf8`).
std::string escape_bytes(std::string_view s, std::size_t max_bytes, bool keep_utf8) {
  std::string out;
  bool cut = false;
  if (s.size() > max_bytes) {
    std::size_t n = max_bytes;
    // Do not split a UTF-8 sequence: back up over continuation bytes.
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    s = s.substr(0, n);
    cut = true;
  }
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !keep_utf8)) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    } else {
      out += ch;
    }
  }
  if (cut) out += "...";
  return out;
}

std::string json_type(const json& j) {
  if (j.is_number_unsigned() || j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "non-integer number";
  return j.type_name();
}

// A JSON value shown in an error: short and on one line.
std::string show(const json& j) {
  std::string s;
  try {
    s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    s = "<unprintable>";
  }
  return escape_bytes(s, 80, true);
}

std::string offsets_string(std::uint64_t begin, std::uint64_t end) {
  std::string s = "[";  // appended piecewise: GCC 12 -Wrestrict misfires on "[" + std::to_string(...)
  s += std::to_string(begin);
  s += ", ";
  s += std::to_string(end);
  s += ']';
  return s;
}

std::string known_dtype_names() {
  std::string s;
  for (int i = 0; i <= static_cast<int>(DType::boolean); ++i) {
    const std::string_view name = dtype_safetensors_name(static_cast<DType>(i));
    if (name.empty()) continue;
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release_close() {  // closes now and reports close()'s result
    const int r = fd_ >= 0 ? ::close(fd_) : 0;
    fd_ = -1;
    return r;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

}  // namespace

namespace detail {

std::string quote_for_error(std::string_view s) { return "\"" + escape_bytes(s, kMaxQuotedBytes, true) + "\""; }

namespace {

// First pass over the text: syntax, duplicate keys and nesting depth, stopping at the first fault.
// Nothing is built, so a hostile header cannot make the DOM pass below deep or large.
class StrictSax final : public nlohmann::json_sax<json> {
 public:
  std::string fault;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return push(); }
  bool start_array(std::size_t) override { return push(); }
  bool end_object() override { return pop(); }
  bool end_array() override { return pop(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      fault = "duplicate key " + quote_for_error(k) +
              (stack_.size() == 1 ? std::string(" in the top-level object") : " in object " + quote_for_error(f.name));
      return false;
    }
    f.last_key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& ex) override {
    fault = "not valid JSON: " + escape_bytes(ex.what(), 300, false);
    return false;
  }

 private:
  struct Frame {
    std::string name;  // key under which this container sits in its parent object
    std::unordered_set<std::string> keys;
    std::string last_key;
  };
  bool push() {
    if (stack_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      fault = "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    std::string name = stack_.empty() ? std::string() : stack_.back().last_key;
    stack_.push_back(Frame{std::move(name), {}, {}});
    return true;
  }
  bool pop() {
    stack_.pop_back();
    return true;
  }
  std::vector<Frame> stack_;
};

}  // namespace

Status parse_json_strict(std::string_view text, json& out) {
  StrictSax sax;
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json, /*strict=*/true,
                         /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    return make_error("not valid JSON: " + escape_bytes(e.what(), 300, false));
  }
  if (!ok || !sax.fault.empty()) return make_error(sax.fault.empty() ? std::string("not valid JSON") : sax.fault);
  try {
    out = json::parse(text.begin(), text.end());
  } catch (const std::exception& e) {
    return make_error("not valid JSON: " + escape_bytes(e.what(), 300, false));
  }
  return Status::success();
}

}  // namespace detail

using detail::quote_for_error;

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return make_error(path + ": cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return make_error(path + ": cannot stat: " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return make_error(path + ": is a directory, expected a safetensors file");
  if (!S_ISREG(st.st_mode)) return make_error(path + ": is not a regular file, expected a safetensors file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    return make_error(path + ": file is " + std::to_string(size) +
                      " bytes, shorter than the 8-byte header length prefix");
  }

  void* mem = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mem == MAP_FAILED) return make_error(path + ": cannot mmap " + std::to_string(size) + " bytes: " + errno_text(errno));
  fd.reset();

  // From here the object owns the mapping: every early return unmaps it in the destructor.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = static_cast<const std::byte*>(mem);
  file->file_bytes_ = size;

  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(file->map_[i]);
  if (n == 0) return make_error(path + ": header length is 0, expected a JSON object of at least 2 bytes");
  if (n > kMaxSafetensorsHeaderBytes) {
    return make_error(path + ": oversized header: header length " + std::to_string(n) + " bytes exceeds the limit of " +
                      std::to_string(kMaxSafetensorsHeaderBytes) + " bytes");
  }
  if (n > size - 8) {
    return make_error(path + ": truncated header: header length " + std::to_string(n) + " needs a file of at least " +
                      std::to_string(8 + n) + " bytes, but the file has " + std::to_string(size) + " bytes");
  }
  file->data_start_ = 8 + n;
  const std::uint64_t data_len = size - file->data_start_;

  json header;
  const std::string_view text(reinterpret_cast<const char*>(file->map_ + 8), static_cast<std::size_t>(n));
  if (Status s = detail::parse_json_strict(text, header); !s.ok()) {
    return make_error(path + ": invalid header: " + s.error().message);
  }
  if (!header.is_object()) {
    return make_error(path + ": invalid header: JSON " + json_type(header) + ", expected a JSON object");
  }

  std::vector<TensorInfo> tensors;
  tensors.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) {
        return make_error(path + ": \"__metadata__\" is a JSON " + json_type(v) + ", expected an object of strings");
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return make_error(path + ": \"__metadata__\" entry " + quote_for_error(m.key()) + " is a JSON " +
                            json_type(m.value()) + ", expected a string");
        }
        file->metadata_.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    const std::string where = path + ": tensor " + quote_for_error(name) + ": ";
    if (!v.is_object()) {
      return make_error(where + "entry is a JSON " + json_type(v) +
                        ", expected an object with \"dtype\", \"shape\" and \"data_offsets\"");
    }
    TensorInfo info;
    info.name = name;

    // dtype
    const auto dt = v.find("dtype");
    if (dt == v.end()) return make_error(where + "missing \"dtype\"");
    if (!dt->is_string()) return make_error(where + "\"dtype\" is a JSON " + json_type(*dt) + ", expected a string");
    const std::string& dtype_name = dt->get_ref<const std::string&>();
    const std::optional<DType> dtype = dtype_from_safetensors_name(dtype_name);
    if (!dtype) {
      return make_error(where + "unknown dtype " + quote_for_error(dtype_name) + ", expected one of " +
                        known_dtype_names());
    }
    info.dtype = *dtype;

    // shape
    const auto sh = v.find("shape");
    if (sh == v.end()) return make_error(where + "missing \"shape\"");
    if (!sh->is_array()) {
      return make_error(where + "\"shape\" is a JSON " + json_type(*sh) + ", expected an array of non-negative integers");
    }
    info.shape.reserve(sh->size());
    for (std::size_t i = 0; i < sh->size(); ++i) {
      const json& d = (*sh)[i];
      if (!d.is_number_unsigned()) {
        return make_error(where + "invalid shape " + show(*sh) + ": dimension " + std::to_string(i) + " is " + show(d) +
                          ", expected a non-negative integer");
      }
      const auto dim = d.get<std::uint64_t>();
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return make_error(where + "invalid shape " + show(*sh) + ": dimension " + std::to_string(i) + " is " +
                          std::to_string(dim) + ", expected at most 2^63-1");
      }
      info.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const Result<std::int64_t> numel = shape_numel(info.shape);
    if (!numel.ok()) return make_error(where + "invalid shape: " + numel.error().message);
    const auto count = static_cast<std::uint64_t>(*numel);
    const auto bits = static_cast<std::uint64_t>(dtype_bits(info.dtype));
    if (bits == 0 || count > std::numeric_limits<std::uint64_t>::max() / bits) {
      return make_error(where + "shape " + shape_to_string(info.shape) + " x " + dtype_name +
                        " overflows a 64-bit byte count");
    }
    if ((count * bits) % 8 != 0) {
      return make_error(where + "shape " + shape_to_string(info.shape) + " has " + std::to_string(count) + " " +
                        dtype_name + " elements, which do not fill whole bytes" +
                        (bits == 4 ? " (F4 packs two per byte: expected an even element count)" : ""));
    }
    const std::uint64_t need = count * bits / 8;

    // data_offsets
    const auto off = v.find("data_offsets");
    if (off == v.end()) return make_error(where + "missing \"data_offsets\"");
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      return make_error(where + "\"data_offsets\" is " + show(*off) + ", expected [begin, end] of non-negative integers");
    }
    info.begin = (*off)[0].get<std::uint64_t>();
    info.end = (*off)[1].get<std::uint64_t>();
    if (info.begin > info.end) {
      return make_error(where + "data_offsets " + offsets_string(info.begin, info.end) + ": begin " +
                        std::to_string(info.begin) + " > end " + std::to_string(info.end));
    }
    if (info.end > data_len) {
      const std::uint64_t need_file = info.end > std::numeric_limits<std::uint64_t>::max() - file->data_start_
                                          ? std::numeric_limits<std::uint64_t>::max()
                                          : file->data_start_ + info.end;
      return make_error(where + "file truncated: data_offsets " + offsets_string(info.begin, info.end) +
                        " need a data region of " + std::to_string(info.end) + " bytes (a file of " +
                        std::to_string(need_file) + " bytes), but the file has " + std::to_string(data_len) +
                        " data bytes (" + std::to_string(size) + " bytes in all)");
    }
    if (info.end - info.begin != need) {
      return make_error(where + "data_offsets " + offsets_string(info.begin, info.end) + " hold " +
                        std::to_string(info.end - info.begin) + " bytes, but shape " + shape_to_string(info.shape) +
                        " x " + dtype_name + " needs " + std::to_string(need) + " bytes");
    }
    tensors.push_back(std::move(info));
  }

  // Layout: in offset order, each tensor starts where the previous ended; the last ends at the data end.
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const TensorInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    if (a->begin != b->begin) return a->begin < b->begin;
    if (a->end != b->end) return a->end < b->end;
    return a->name < b->name;
  });
  std::uint64_t pos = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : by_offset) {
    const std::string where = path + ": tensor " + quote_for_error(t->name) + ": ";
    if (t->begin < pos) {
      return make_error(where + "data_offsets " + offsets_string(t->begin, t->end) + " overlap tensor " +
                        quote_for_error(prev->name) + " at " + offsets_string(prev->begin, prev->end) +
                        ": expected it to begin at " + std::to_string(pos));
    }
    if (t->begin > pos) {
      return make_error(where + "gap of " + std::to_string(t->begin - pos) + " bytes before data_offsets " +
                        offsets_string(t->begin, t->end) + ": expected it to begin at " + std::to_string(pos) +
                        (prev ? ", where tensor " + quote_for_error(prev->name) + " ends"
                              : std::string(", the start of the data region")));
    }
    pos = t->end;
    prev = t;
  }
  if (pos != data_len) {
    return make_error(path + ": gap of " + std::to_string(data_len - pos) +
                      " trailing bytes: the data region has " + std::to_string(data_len) +
                      " bytes but the tensors cover only " + std::to_string(pos) +
                      (prev ? " (the last is " + quote_for_error(prev->name) + ")" : std::string(" (no tensors)")));
  }

  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  file->tensors_ = std::move(tensors);
  file->self_ = file;
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(const_cast<std::byte*>(map_), static_cast<std::size_t>(file_bytes_));
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                                   [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

Tensor SafetensorsFile::tensor(const TensorInfo& info) const {
  // Use this file's own record, so a TensorInfo from elsewhere cannot point outside the mapping.
  const TensorInfo* own = find(info.name);
  if (own == nullptr) return Tensor();
  auto* data = const_cast<std::byte*>(map_ + data_start_ + own->begin);
  return Tensor::borrow(data, own->shape, own->dtype, std::shared_ptr<const void>(self_.lock()));
}

Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  sorted.reserve(tensors.size());
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });

  std::vector<TensorDecl> decls;
  decls.reserve(sorted.size());
  for (const auto* p : sorted) {
    const std::string& name = p->first;
    const Tensor& t = p->second;
    const std::string where = path + ": tensor " + quote_for_error(name) + ": ";
    if (t.device() != Device::cpu) return make_error(where + "on " + std::string(device_name(t.device())) + ", expected cpu");
    if (!t.is_contiguous()) return make_error(where + "not contiguous");
    if (t.raw() == nullptr && t.nbytes() != 0) return make_error(where + "has no storage");
    decls.push_back(TensorDecl{name, t.dtype(), t.shape()});
  }
  D0_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                      SafetensorsWriter::create(path, std::move(decls), metadata));
  for (const auto* p : sorted) D0_RETURN_IF_ERROR(writer->append(p->second.raw(), p->second.nbytes()));
  return writer->close();
}

}  // namespace day0
