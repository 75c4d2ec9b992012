// synth_checkpoint: random weights in the published layout, streamed shard by shard.
#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <thread>
#include <unordered_map>

#include "arch/registry.h"
#include "core/dtype.h"
#include "core/parallel_for.h"
#include "io/checkpoint_output.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "quant/mxfp4.h"

namespace day0 {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxConfigBytes = 16u << 20;
constexpr float kMatrixStd = 0.02f;
constexpr float kBiasStd = 0.01f;

// ------------------------------------------------------------------------------------------ random values

constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ull;

// splitmix64's finaliser: a bijective 64-bit mix.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t fnv1a64(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// One independent stream per (seed, tensor name); element i is splitmix64's output i of that stream.
std::uint64_t stream_key(std::uint64_t seed, std::string_view name) { return mix64(mix64(seed + kGamma) ^ fnv1a64(name)); }

// Irwin-Hall(4) over the four 16-bit lanes of one 64-bit draw: mean 0, variance 1, bounded at +-3.46.
inline float normalish(std::uint64_t key, std::uint64_t i) {
  const std::uint64_t r = mix64(key + (i + 1) * kGamma);
  const auto s = static_cast<std::int64_t>((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48));
  constexpr float kInvStd = 1.0f / 37837.23f;  // sqrt(4 * (65536^2 - 1) / 12)
  return static_cast<float>(s - 131070) * kInvStd;
}

// -------------------------------------------------------------------------------------------- the plan

enum class Kind { dense, mxfp4_blocks, mxfp4_scales };

struct Item {
  const WeightDecl* decl = nullptr;
  Kind kind = Kind::dense;
  DType dtype = DType::bf16;
  std::uint64_t bytes = 0;
  // dense: value = mean + std * normalish
  float mean = 0.f, std = kMatrixStd;
  // mxfp4: the matrix [rows, in] its blocks and scales are encoded from
  std::string matrix;  // stream name (the matrix prefix), shared by blocks and scales
  std::int64_t rows = 0, in = 0;
  int shard = 0;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Result<std::vector<Item>> make_items(const ModelSpec& spec) {
  struct Mx {
    const ExpertMatrix* m;
    int n_experts;
    bool blocks;
  };
  std::unordered_map<std::string, Mx> mxfp4;
  for (const LayerSpec& L : spec.layers) {
    const MoESpec& moe = L.channel.moe;
    for (const ExpertMatrix* m : {&moe.gate_up, &moe.down}) {
      if (m->format != ExpertFormat::mxfp4_fused) continue;
      mxfp4[m->name + "_blocks"] = {m, moe.n_experts, true};
      mxfp4[m->name + "_scales"] = {m, moe.n_experts, false};
    }
  }
  std::vector<Item> items;
  items.reserve(spec.weights.size());
  for (const WeightDecl& w : spec.weights) {
    Item it;
    it.decl = &w;
    Result<std::int64_t> numel = shape_numel(w.shape);
    if (!numel.ok()) return make_error("tensor " + w.name + ": " + numel.error().message);
    const auto mx = mxfp4.find(w.name);
    const bool takes_u8 = std::find(w.dtypes.begin(), w.dtypes.end(), DType::u8) != w.dtypes.end();
    if (mx != mxfp4.end() && takes_u8) {
      const ExpertMatrix& m = *mx->second.m;
      it.kind = mx->second.blocks ? Kind::mxfp4_blocks : Kind::mxfp4_scales;
      it.dtype = DType::u8;
      it.matrix = m.name;
      it.rows = std::int64_t(mx->second.n_experts) * m.out;
      it.in = m.in;
      const std::int64_t expect = it.rows * (it.in / kMxfp4GroupSize) * (mx->second.blocks ? kMxfp4GroupBytes : 1);
      if (m.in % kMxfp4GroupSize != 0 || *numel != expect)
        return make_error("tensor " + w.name + ": shape " + shape_to_string(w.shape) +
                          " does not match an MXFP4 matrix of " + std::to_string(it.rows) + " rows x " +
                          std::to_string(it.in) + " inputs");
      it.bytes = static_cast<std::uint64_t>(*numel);
    } else {
      const bool bf16 = std::find(w.dtypes.begin(), w.dtypes.end(), DType::bf16) != w.dtypes.end();
      const bool f32 = std::find(w.dtypes.begin(), w.dtypes.end(), DType::f32) != w.dtypes.end();
      if (!bf16 && !f32) {
        std::string accepted;
        for (DType d : w.dtypes) {  // appended piecewise: GCC 12 -Wrestrict misfires on "|" + std::string
          if (!accepted.empty()) accepted += '|';
          accepted += dtype_name(d);
        }
        return make_error("tensor " + w.name + ": no generator for dtype " + accepted);
      }
      it.dtype = bf16 ? DType::bf16 : DType::f32;
      it.bytes = static_cast<std::uint64_t>(*numel) * static_cast<std::uint64_t>(dtype_bits(it.dtype) / 8);
      if (w.group == "norm") {
        it.mean = 1.f;
        it.std = kMatrixStd;
      } else if (ends_with(w.name, "bias")) {
        it.std = kBiasStd;
      }
    }
    items.push_back(std::move(it));
  }
  return items;
}

// ------------------------------------------------------------------------------------------- generation

void fill_dense(const Item& it, std::uint64_t key, std::uint64_t offset, std::span<std::byte> chunk, int threads) {
  const std::size_t esize = static_cast<std::size_t>(dtype_bits(it.dtype) / 8);
  const std::uint64_t first = offset / esize;
  const auto n = static_cast<std::int64_t>(chunk.size() / esize);
  parallel_for(threads, n, 1 << 14, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t j = b; j < e; ++j) {
      const float v = it.mean + it.std * normalish(key, first + static_cast<std::uint64_t>(j));
      if (it.dtype == DType::bf16) {
        const std::uint16_t bits = f32_to_bf16(v);
        std::memcpy(chunk.data() + j * 2, &bits, 2);
      } else {
        std::memcpy(chunk.data() + j * 4, &v, 4);
      }
    }
  });
}

// Encodes rows [row0, row0 + n) of an MXFP4 matrix: blocks into `blocks` (may be null), scales into `scales`.
void encode_rows(const Item& it, std::uint64_t key, std::int64_t row0, std::int64_t n, std::uint8_t* blocks,
                 std::uint8_t* scales, int threads) {
  const std::int64_t row_blocks = it.in / 2, row_scales = it.in / kMxfp4GroupSize;
  parallel_for(threads, n, std::max<std::int64_t>(2, (1 << 14) / std::max<std::int64_t>(1, it.in)), [&](std::int64_t b, std::int64_t e) {
    std::vector<float> x(static_cast<std::size_t>(it.in));
    std::vector<std::uint8_t> scratch(blocks ? 0 : static_cast<std::size_t>(row_blocks));
    for (std::int64_t r = b; r < e; ++r) {
      const auto base = static_cast<std::uint64_t>(row0 + r) * static_cast<std::uint64_t>(it.in);
      for (std::int64_t c = 0; c < it.in; ++c) x[c] = kMatrixStd * normalish(key, base + static_cast<std::uint64_t>(c));
      mxfp4_encode_row(x.data(), it.in, blocks ? blocks + r * row_blocks : scratch.data(), scales + r * row_scales);
    }
  });
}

Result<std::string> read_config(const std::string& config_path, std::string& shown) {
  std::error_code ec;
  fs::path path = config_path;
  if (fs::is_directory(path, ec)) path /= "config.json";
  shown = path.string();
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return make_error(shown + ": cannot read: " + ec.message());
  if (size > kMaxConfigBytes) return make_error(shown + ": " + std::to_string(size) + " bytes, larger than a config");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(shown + ": cannot open for reading");
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<std::uintmax_t>(in.gcount()) != size) return make_error(shown + ": short read");
  return text;
}

}  // namespace

Result<NamedTensors> synth_tensors(const ModelSpec& spec, std::uint64_t seed, int threads) {
  Result<std::vector<Item>> items = make_items(spec);
  if (!items.ok()) return make_error("synth: " + items.error().message);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  NamedTensors out;
  std::map<std::string, std::vector<std::uint8_t>> scales;  // per MXFP4 matrix, encoded with its blocks
  for (const Item& it : *items) {
    Tensor t = Tensor::zeros(it.decl->shape, it.dtype);
    const std::uint64_t key = stream_key(seed, it.kind == Kind::dense ? it.decl->name : it.matrix);
    auto* bytes = static_cast<std::uint8_t*>(t.raw());
    if (it.kind == Kind::dense) {
      fill_dense(it, key, 0, std::span(reinterpret_cast<std::byte*>(bytes), t.nbytes()), threads);
    } else {
      std::vector<std::uint8_t>& sc = scales[it.matrix];
      const std::size_t n_scales = static_cast<std::size_t>(it.rows * (it.in / kMxfp4GroupSize));
      if (it.kind == Kind::mxfp4_blocks) {
        sc.resize(n_scales);
        encode_rows(it, key, 0, it.rows, bytes, sc.data(), threads);
      } else {
        if (sc.size() != n_scales) {  // scales without their blocks before them: encode them alone
          sc.resize(n_scales);
          encode_rows(it, key, 0, it.rows, nullptr, sc.data(), threads);
        }
        std::memcpy(bytes, sc.data(), n_scales);
        scales.erase(it.matrix);
      }
    }
    out.emplace(it.decl->name, std::move(t));
  }
  return out;
}

Result<SynthResult> synth_checkpoint(const std::string& config_path, const std::string& outdir,
                                     const SynthOptions& options, const SynthProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  std::string shown;
  D0_ASSIGN_OR_RETURN(const std::string text, read_config(config_path, shown));
  nlohmann::json config;
  if (Status s = detail::parse_json_strict(text, config); !s.ok()) return make_error(shown + ": " + s.error().message);
  Result<ModelSpec> spec_r = model_spec_from_config(config);
  if (!spec_r.ok()) return make_error(shown + ": " + spec_r.error().message);
  const ModelSpec& spec = *spec_r;
  Result<std::vector<Item>> items_r = make_items(spec);
  if (!items_r.ok()) return make_error(shown + ": synth: " + items_r.error().message);
  std::vector<Item>& items = *items_r;
  if (options.shard_bytes == 0) return make_error("shard size must be positive");
  const int n_shards = place_in_shards(items, options.shard_bytes);
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::size_t chunk_bytes = std::max<std::size_t>(options.chunk_bytes, 1u << 12);

  const fs::path dir = outdir;
  D0_RETURN_IF_ERROR(prepare_checkpoint_outdir(dir.string(), options.force));

  SynthResult result;
  result.shards = n_shards;
  result.tensors = items.size();
  for (const Item& it : items) result.tensor_bytes += it.bytes;

  SynthProgress prog;
  prog.bytes_total = result.tensor_bytes;
  prog.files = n_shards;

  std::vector<std::uint8_t> scales;  // the scales of the last blocks tensor written, reused by its scales tensor
  std::string scales_of;             // which matrix `scales` belongs to
  nlohmann::json weight_map = nlohmann::json::object();
  std::size_t next = 0;
  for (int k = 0; k < n_shards; ++k) {
    const std::string name = shard_file_name(k, n_shards);
    const std::string path = (dir / name).string();
    std::vector<TensorDecl> decls;
    const std::size_t first = next;
    while (next < items.size() && items[next].shard == k) {
      decls.push_back(TensorDecl{items[next].decl->name, items[next].dtype, items[next].decl->shape});
      weight_map[items[next].decl->name] = name;
      ++next;
    }
    D0_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                        SafetensorsWriter::create(path, std::move(decls), {{"format", "pt"}}));
    prog.file = k + 1;
    for (std::size_t i = first; i < next; ++i) {
      const Item& it = items[i];
      const std::uint64_t key = stream_key(options.seed, it.kind == Kind::dense ? it.decl->name : it.matrix);
      SafetensorsWriter::FillFn fill;
      std::size_t chunk = chunk_bytes;
      if (it.kind == Kind::dense) {
        chunk = chunk_bytes / 4 * 4;
        fill = [&](std::uint64_t off, std::span<std::byte> c) {
          fill_dense(it, key, off, c, threads);
          return Status::success();
        };
      } else {
        const std::int64_t row_scales = it.in / kMxfp4GroupSize;
        if (scales_of != it.matrix) {  // blocks come first in the manifest; scales alone recompute
          scales.resize(static_cast<std::size_t>(it.rows * row_scales));
          scales_of = it.kind == Kind::mxfp4_blocks ? it.matrix : std::string();
          if (it.kind == Kind::mxfp4_scales) encode_rows(it, key, 0, it.rows, nullptr, scales.data(), threads);
        }
        if (it.kind == Kind::mxfp4_blocks) {
          const std::size_t row_bytes = static_cast<std::size_t>(it.in / 2);
          chunk = std::max<std::size_t>(1, chunk_bytes / row_bytes) * row_bytes;
          fill = [&, row_bytes, row_scales](std::uint64_t off, std::span<std::byte> c) {
            const auto row0 = static_cast<std::int64_t>(off / row_bytes);
            const auto n = static_cast<std::int64_t>(c.size() / row_bytes);
            encode_rows(it, key, row0, n, reinterpret_cast<std::uint8_t*>(c.data()),
                        scales.data() + row0 * row_scales, threads);
            return Status::success();
          };
        } else {
          scales_of.clear();
          fill = [&](std::uint64_t off, std::span<std::byte> c) {
            std::memcpy(c.data(), scales.data() + off, c.size());
            return Status::success();
          };
        }
      }
      auto fill_and_report = [&](std::uint64_t off, std::span<std::byte> c) -> Status {
        D0_RETURN_IF_ERROR(fill(off, c));
        prog.bytes_done += c.size();
        prog.seconds = elapsed();
        if (progress) progress(prog);
        return Status::success();
      };
      D0_RETURN_IF_ERROR(writer->write_tensor(it.decl->name, chunk, fill_and_report));
    }
    D0_RETURN_IF_ERROR(writer->close());
    result.files.push_back(path);
    result.shard_file_bytes += writer->file_bytes();
  }
  if (n_shards > 1) {
    nlohmann::json index;
    index["metadata"] = {{"total_size", result.tensor_bytes}};
    index["weight_map"] = std::move(weight_map);
    const fs::path path = dir / "model.safetensors.index.json";
    D0_RETURN_IF_ERROR(write_file_atomically(path.string(), index.dump(2) + "\n"));
    result.files.push_back(path.string());
  }
  const fs::path config_out = dir / "config.json";
  D0_RETURN_IF_ERROR(write_file_atomically(config_out.string(), text));
  result.files.push_back(config_out.string());
  result.seconds = elapsed();
  return result;
}

}  // namespace day0
