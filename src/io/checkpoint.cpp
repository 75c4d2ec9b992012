// Checkpoint directories: one safetensors file, or shards named by model.safetensors.index.json.
// Every shard is opened (once) and validated up front, and the index is checked against the shards.
#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace day0 {

namespace fs = std::filesystem;
using detail::quote_for_error;
using nlohmann::json;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symlinks (Hugging Face caches link shards to blobs)
}

// Names of the *.safetensors entries of `dir` that are (or link to) regular files, sorted.
std::vector<std::string> safetensors_files(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".safetensors") && is_regular(it->path())) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Why a shard name from the index may not be used, or "" if it is a plain file name inside the directory.
std::string bad_shard_name(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return "is not a file name";
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos) {
    return "contains a path separator (expected a plain file name in the directory)";
  }
  if (name.find('\0') != std::string::npos) return "contains a NUL byte";
  return "";
}

Result<std::string> read_small_file(const fs::path& path, std::uint64_t limit) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return make_error(path.string() + ": cannot read: " + ec.message());
  if (size > limit) {
    return make_error(path.string() + ": file is " + std::to_string(size) + " bytes, larger than the limit of " +
                      std::to_string(limit));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path.string() + ": cannot open for reading");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uintmax_t>(in.gcount()) != size) {
    return make_error(path.string() + ": short read: expected " + std::to_string(size) + " bytes, got " +
                      std::to_string(in.gcount()));
  }
  return text;
}

}  // namespace

bool Checkpoint::has_weights(const std::string& dir) { return !safetensors_files(dir).empty(); }

Result<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) return make_error(dir + ": checkpoint directory does not exist");
  if (!fs::is_directory(st)) return make_error(dir + ": is not a directory, expected a checkpoint directory");

  Checkpoint ck;
  ck.dir_ = dir;
  const fs::path index_path = root / kIndexName;
  const std::string index = index_path.string();

  if (fs::exists(index_path, ec)) {
    D0_ASSIGN_OR_RETURN(const std::string text, read_small_file(index_path, kMaxSafetensorsHeaderBytes));
    json j;
    if (Status s = detail::parse_json_strict(text, j); !s.ok()) return make_error(index + ": " + s.error().message);
    if (!j.is_object()) return make_error(index + ": JSON " + std::string(j.type_name()) + ", expected a JSON object");
    const auto wm = j.find("weight_map");
    if (wm == j.end()) return make_error(index + ": missing \"weight_map\"");
    if (!wm->is_object()) {
      return make_error(index + ": \"weight_map\" is a JSON " + std::string(wm->type_name()) +
                        ", expected an object of tensor name -> shard file name");
    }
    if (wm->empty()) return make_error(index + ": \"weight_map\" is empty, expected at least one tensor");

    // shard name -> first tensor (in name order) that the index places there
    std::map<std::string, std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) {
        return make_error(index + ": tensor " + quote_for_error(it.key()) + ": shard is a JSON " +
                          std::string(it->type_name()) + ", expected a file name string");
      }
      const std::string& shard = it->get_ref<const std::string&>();
      if (const std::string why = bad_shard_name(shard); !why.empty()) {
        return make_error(index + ": tensor " + quote_for_error(it.key()) + ": shard name " + quote_for_error(shard) +
                          " " + why + "; a shard must not leave the checkpoint directory");
      }
      shards.emplace(shard, it.key());
    }

    std::map<std::string, std::shared_ptr<const SafetensorsFile>> opened;
    for (const auto& [shard, first_tensor] : shards) {
      const fs::path shard_path = root / shard;
      if (!fs::exists(shard_path, ec)) {
        return make_error(index + ": shard file " + quote_for_error(shard) + " is missing from " + dir +
                          " (needed by tensor " + quote_for_error(first_tensor) + ")");
      }
      D0_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(shard_path.string()));
      ck.files_.push_back(file);
      opened.emplace(shard, std::move(file));
    }

    // Every tensor the index lists must be in the shard it names.
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const std::string& shard = it->get_ref<const std::string&>();
      if (opened.at(shard)->find(it.key()) == nullptr) {
        return make_error(index + ": tensor " + quote_for_error(it.key()) + " is listed in shard " +
                          quote_for_error(shard) + ", but " + (root / shard).string() + " does not contain it");
      }
    }
    // Every tensor of every shard, each in exactly one shard. (A shard's tensor that the index does not
    // list is still served: it is in the files, and names are unique across shards.)
    std::map<std::string, std::pair<std::string, Entry>> all;
    for (const auto& [shard, file] : opened) {
      for (const TensorInfo& info : file->tensors()) {
        auto [pos, inserted] = all.emplace(info.name, std::make_pair(shard, Entry{&info, file.get()}));
        if (!inserted) {
          return make_error(index + ": tensor " + quote_for_error(info.name) + " is present in two shards, " +
                            quote_for_error(pos->second.first) + " and " + quote_for_error(shard) +
                            ", expected exactly one");
        }
      }
    }
    ck.entries_.reserve(all.size());
    for (auto& [name, v] : all) ck.entries_.emplace_back(name, v.second);
    return ck;
  }

  fs::path single = root / kSingleName;
  if (!fs::exists(single, ec)) {
    const std::vector<std::string> found = safetensors_files(root);
    if (found.empty()) {
      return make_error(dir + ": no weights: expected " + kIndexName + ", " + kSingleName +
                        " or one *.safetensors file");
    }
    if (found.size() > 1) {
      std::string list;
      for (std::size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", " : "") + quote_for_error(found[i]);
      if (found.size() > 4) list += ", ...";
      return make_error(dir + ": " + std::to_string(found.size()) + " *.safetensors files (" + list + ") but no " +
                        kIndexName + " to say how they fit together; expected one file or an index");
    }
    single = root / found.front();
  }
  D0_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single.string()));
  ck.entries_.reserve(file->tensors().size());
  for (const TensorInfo& info : file->tensors()) ck.entries_.emplace_back(info.name, Entry{&info, file.get()});
  ck.files_.push_back(std::move(file));
  return ck;
}

const Checkpoint::Entry* Checkpoint::find(std::string_view name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const auto& e, std::string_view n) { return e.first < n; });
  if (it == entries_.end() || it->first != name) return nullptr;
  return &it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& e : entries_) total += e.second.info->end - e.second.info->begin;
  return total;
}

Result<Tensor> Checkpoint::tensor(std::string_view name) const {
  const Entry* e = find(name);
  if (e == nullptr) {
    return make_error(dir_ + ": tensor " + quote_for_error(name) + " not found in the checkpoint (" +
                      std::to_string(entries_.size()) + " tensors in " + std::to_string(files_.size()) + " files)");
  }
  return e->file->tensor(*e->info);
}

}  // namespace day0
