// Checkpoint directory output helpers.
#include "io/checkpoint_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace day0 {

namespace fs = std::filesystem;

Status prepare_checkpoint_outdir(const std::string& dir_name, bool force) {
  const fs::path dir = dir_name;
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return make_error(dir.string() + ": exists and is not a directory");
    std::vector<fs::path> entries;
    for (fs::directory_iterator i(dir, ec); !ec && i != fs::directory_iterator(); i.increment(ec))
      entries.push_back(i->path());
    if (ec) return make_error(dir.string() + ": cannot list: " + ec.message());
    if (!entries.empty() && !force)
      return make_error(dir.string() + ": not empty (" + std::to_string(entries.size()) +
                        " entries); choose an empty or new directory, or pass --force to replace its checkpoint files");
    for (const fs::path& p : entries) {
      const std::string name = p.filename().string();
      const bool ours = (name.rfind("model", 0) == 0 && name.find(".safetensors") != std::string::npos) ||
                        name == "config.json";
      if (ours && !fs::is_directory(p, ec)) {
        fs::remove(p, ec);
        if (ec) return make_error(p.string() + ": cannot remove: " + ec.message());
      }
    }
    return Status::success();
  }
  fs::create_directories(dir, ec);
  if (ec) return make_error(dir.string() + ": cannot create directory: " + ec.message());
  return Status::success();
}

std::vector<int> assign_shards(std::span<const std::uint64_t> tensor_bytes, std::uint64_t shard_bytes) {
  std::vector<int> shards;
  int shard = 0;
  std::uint64_t in_shard = 0;
  for (std::uint64_t bytes : tensor_bytes) {
    if (!shards.empty() && in_shard + bytes > shard_bytes) {
      ++shard;
      in_shard = 0;
    }
    shards.push_back(shard);
    in_shard += bytes;
  }
  return shards;
}

std::string shard_file_name(int k, int n) {
  if (n == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", k + 1, n);
  return buf;
}

Status write_file_atomically(const std::string& path_name, const std::string& text) {
  const fs::path path = path_name;
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return make_error(path.string() + ": cannot create " + tmp.string() + ": " + std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return make_error(path.string() + ": cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return make_error(path.string() + ": cannot rename " + tmp.string() + " to it: " + ec.message());
  }
  return Status::success();
}

}  // namespace day0
