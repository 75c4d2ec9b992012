// convert_checkpoint: MXFP4 experts rewritten as bf16 or fp8 with the GPU's codecs, everything else copied.
#include "model/convert.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <thread>

#include "arch/registry.h"
#include "core/parallel_for.h"
#include "io/checkpoint.h"
#include "io/checkpoint_output.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/weights.h"
#include "quant/fp8_experts.h"
#include "quant/mxfp4.h"

namespace day0 {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxConfigBytes = 16u << 20;

// What one output tensor is made of.
enum class Kind {
  copy,         // the source tensor's bytes
  bf16_values,  // mxfp4_decode_row_bf16 of each row
  fp8_values,   // mxfp4_row_to_fp8 of each row (its codes)
  fp8_scales,   // 2^mxfp4_row_fp8_exponent of each row (f32), the scale mxfp4_row_to_fp8 returns
};

struct Item {
  std::string name;
  DType dtype = DType::u8;
  Shape shape;
  std::uint64_t bytes = 0;
  Kind kind = Kind::copy;
  Tensor source;          // copy: a view of the source tensor
  Tensor blocks, scales;  // conversions: the source MXFP4 matrix, rows [E * out] of `in` values
  std::int64_t rows = 0, in = 0;
  int shard = 0;
};

std::uint64_t row_bytes(const Item& it) {
  switch (it.kind) {
    case Kind::bf16_values: return static_cast<std::uint64_t>(it.in) * 2;
    case Kind::fp8_values: return static_cast<std::uint64_t>(it.in);
    case Kind::fp8_scales: return 4;
    case Kind::copy: break;
  }
  return 1;
}

Result<std::string> read_text(const fs::path& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return make_error(path.string() + ": cannot read: " + ec.message());
  if (size > kMaxConfigBytes)
    return make_error(path.string() + ": " + std::to_string(size) + " bytes, larger than a config");
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<std::uintmax_t>(in.gcount()) != size) return make_error(path.string() + ": short read");
  return text;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Weights in any format (and their indexes) are not copied: the converted shards replace them.
bool is_weight_file(const std::string& name) {
  for (const char* ext : {".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth",
                          ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx"})
    if (ends_with(name, ext)) return true;
  return false;
}

// The output tensors in the source manifest's order: each MXFP4 matrix's blocks become its converted tensors,
// its scales go; every other tensor of the checkpoint (declared or not) is copied.
Result<std::vector<Item>> plan_items(const ModelSpec& spec, const Checkpoint& ck, ExpertFormat target) {
  struct Matrix {
    ExpertMatrix converted;
    int n_experts = 0;
  };
  std::map<std::string, Matrix> by_blocks;
  std::set<std::string> dropped;  // MXFP4 scales (converted with their blocks)
  for (const LayerSpec& L : spec.layers) {
    if (L.channel.kind != ChannelMixerKind::moe) continue;
    for (const ExpertMatrix* m : {&L.channel.moe.gate_up, &L.channel.moe.down}) {
      const std::vector<ExpertTensor> mx = expert_tensors(*m, L.channel.moe.n_experts);
      Matrix conv{*m, L.channel.moe.n_experts};
      conv.converted.format = target;
      by_blocks.emplace(mx[0].name, conv);
      dropped.insert(mx[1].name);
    }
  }
  std::vector<Item> items;
  auto add_copy = [&](const std::string& name) -> Status {
    D0_ASSIGN_OR_RETURN(Tensor t, ck.tensor(name));
    Item it;
    it.name = name;
    it.dtype = t.dtype();
    it.shape = t.shape();
    it.bytes = t.nbytes();
    it.source = std::move(t);
    items.push_back(std::move(it));
    return Status::success();
  };
  std::set<std::string> declared;
  for (const WeightDecl& w : spec.weights) {
    declared.insert(w.name);
    if (dropped.count(w.name)) continue;
    const auto m = by_blocks.find(w.name);
    if (m == by_blocks.end()) {
      D0_RETURN_IF_ERROR(add_copy(w.name));
      continue;
    }
    const ExpertMatrix& cm = m->second.converted;
    const std::vector<ExpertTensor> source = expert_tensors(ExpertMatrix{ExpertFormat::mxfp4_fused, cm.name, cm.bias,
                                                                         cm.out, cm.in},
                                                            m->second.n_experts);
    D0_ASSIGN_OR_RETURN(Tensor blocks, ck.tensor(source[0].name));
    D0_ASSIGN_OR_RETURN(Tensor scales, ck.tensor(source[1].name));
    const std::vector<ExpertTensor> out = expert_tensors(cm, m->second.n_experts);
    for (std::size_t i = 0; i < out.size(); ++i) {
      Item it;
      it.name = out[i].name;
      it.dtype = out[i].dtype;
      it.shape = out[i].shape;
      it.kind = target == ExpertFormat::bf16_fused ? Kind::bf16_values : i == 0 ? Kind::fp8_values : Kind::fp8_scales;
      it.blocks = blocks;
      it.scales = scales;
      it.rows = std::int64_t(m->second.n_experts) * cm.out;
      it.in = cm.in;
      it.bytes = static_cast<std::uint64_t>(it.rows) * row_bytes(it);
      items.push_back(std::move(it));
    }
  }
  for (const std::string& name : ck.names())
    if (!declared.count(name)) D0_RETURN_IF_ERROR(add_copy(name));
  return items;
}

// Converts rows [row0, row0 + n) of `it` into `dst` on `threads` threads; returns the inexact fp8 values.
std::uint64_t convert_rows(const Item& it, std::int64_t row0, std::int64_t n, std::byte* dst, int threads) {
  const std::int64_t groups = it.in / kMxfp4GroupSize;
  const std::uint8_t* blocks = it.blocks.data<std::uint8_t>();
  const std::uint8_t* scales = it.scales.data<std::uint8_t>();
  const std::uint64_t rb = row_bytes(it);
  std::atomic<std::uint64_t> inexact{0};
  parallel_for(threads, n, 16, [&](std::int64_t b, std::int64_t e) {
    std::uint64_t local = 0;
    for (std::int64_t r = b; r < e; ++r) {
      const std::uint8_t* row_blocks = blocks + (row0 + r) * groups * kMxfp4GroupBytes;
      const std::uint8_t* row_scales = scales + (row0 + r) * groups;
      std::byte* out = dst + static_cast<std::uint64_t>(r) * rb;
      switch (it.kind) {
        case Kind::bf16_values:
          mxfp4_decode_row_bf16(row_blocks, row_scales, it.in, reinterpret_cast<std::uint16_t*>(out));
          break;
        case Kind::fp8_values:
          local += static_cast<std::uint64_t>(
              mxfp4_row_to_fp8(row_blocks, row_scales, it.in, reinterpret_cast<std::uint8_t*>(out)).inexact);
          break;
        case Kind::fp8_scales: {
          // The expression mxfp4_row_to_fp8 computes its scale with.
          const float scale = std::ldexp(1.0f, mxfp4_row_fp8_exponent(row_blocks, row_scales, it.in));
          std::memcpy(out, &scale, sizeof scale);
          break;
        }
        case Kind::copy: break;
      }
    }
    inexact += local;
  });
  return inexact.load();
}

// Shared state of the shard writers.
struct Run {
  std::vector<Item>* items = nullptr;
  int n_shards = 0, inner_threads = 1;
  std::size_t chunk_bytes = 0;
  fs::path dir;
  std::atomic<int> next_shard{0};
  std::atomic<bool> failed{false};
  std::atomic<std::uint64_t> done{0}, inexact{0}, shard_file_bytes{0};
  std::mutex mu;  // guards first_error and the progress callback
  std::string first_error;
  const ConvertProgressFn* progress = nullptr;
  ConvertProgress prog;
  std::chrono::steady_clock::time_point t0;
};

Status write_shard(Run& run, int k) {
  const std::string path = (run.dir / shard_file_name(k, run.n_shards)).string();
  std::vector<TensorDecl> decls;
  std::vector<const Item*> mine;
  for (const Item& it : *run.items)
    if (it.shard == k) {
      decls.push_back(TensorDecl{it.name, it.dtype, it.shape});
      mine.push_back(&it);
    }
  D0_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsWriter> writer,
                      SafetensorsWriter::create(path, std::move(decls), {{"format", "pt"}}));
  for (const Item* it : mine) {
    const std::uint64_t rb = row_bytes(*it);
    const std::size_t chunk = std::max<std::size_t>(1, run.chunk_bytes / rb) * rb;
    auto fill = [&](std::uint64_t off, std::span<std::byte> c) -> Status {
      if (run.failed) return make_error("stopped: another shard failed");
      if (it->kind == Kind::copy) {
        std::memcpy(c.data(), static_cast<const std::byte*>(it->source.raw()) + off, c.size());
      } else {
        run.inexact += convert_rows(*it, static_cast<std::int64_t>(off / rb), static_cast<std::int64_t>(c.size() / rb),
                                    c.data(), run.inner_threads);
      }
      const std::uint64_t done = run.done += c.size();
      if (*run.progress) {
        std::lock_guard<std::mutex> lock(run.mu);
        run.prog.bytes_done = std::max(run.prog.bytes_done, done);
        run.prog.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run.t0).count();
        (*run.progress)(run.prog);
      }
      return Status::success();
    };
    D0_RETURN_IF_ERROR(writer->write_tensor(it->name, chunk, fill));
  }
  D0_RETURN_IF_ERROR(writer->close());
  run.shard_file_bytes += writer->file_bytes();
  return Status::success();
}

void shard_worker(Run& run) {
  for (int k = run.next_shard++; k < run.n_shards && !run.failed; k = run.next_shard++) {
    const Status st = write_shard(run, k);
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(run.mu);
      if (!run.failed.exchange(true)) run.first_error = st.error().message;
    }
  }
}

// config.json with quantization_config saying what the experts now are (key order kept).
Result<std::string> converted_config(const std::string& text, ExpertFormat target) {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return make_error("config.json: not a JSON object");
  nlohmann::ordered_json q = nlohmann::ordered_json::object();
  q["quant_method"] = std::string(kConvertedQuantMethod);
  q["experts"] = std::string(expert_format_name(target));
  q["converted_from"] = std::string(expert_format_name(ExpertFormat::mxfp4_fused));
  config["quantization_config"] = std::move(q);
  return config.dump(2) + "\n";
}

}  // namespace

Result<ConvertResult> convert_checkpoint(const std::string& src_dir, const std::string& out_dir,
                                         const ConvertOptions& options, const ConvertProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (options.experts == ExpertFormat::mxfp4_fused)
    return make_error("convert: the target expert format must be bf16 or fp8 (the source is MXFP4 already)");
  if (options.shard_bytes == 0) return make_error("convert: shard size must be positive");
  const fs::path src = src_dir, dir = out_dir;
  std::error_code ec;
  if (!fs::is_directory(src, ec)) return make_error(src_dir + ": not a directory (expected a checkpoint directory)");
  if (fs::exists(dir, ec) && fs::equivalent(src, dir, ec))
    return make_error(out_dir + ": is the source directory; write the converted checkpoint elsewhere");

  const fs::path config_path = src / "config.json";
  D0_ASSIGN_OR_RETURN(const std::string config_text, read_text(config_path));
  nlohmann::json config;
  if (Status s = detail::parse_json_strict(config_text, config); !s.ok())
    return make_error(config_path.string() + ": " + s.error().message);
  Result<ModelSpec> spec_r = model_spec_from_config(config);
  if (!spec_r.ok()) return make_error(config_path.string() + ": " + spec_r.error().message);
  const ModelSpec& spec = *spec_r;
  std::size_t matrices = 0;
  for (const LayerSpec& L : spec.layers)
    for (const ExpertMatrix* m : {&L.channel.moe.gate_up, &L.channel.moe.down}) {
      if (m->format != ExpertFormat::mxfp4_fused)
        return make_error(src_dir + ": experts are stored as " + std::string(expert_format_name(m->format)) +
                          " (quantization_config.quant_method \"" + spec.quantization +
                          "\"); day0 convert reads MXFP4 checkpoints");
      ++matrices;
    }
  if (matrices == 0) return make_error(src_dir + ": the model has no routed experts to convert");

  D0_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open_dir(src_dir));
  const WeightCheck check = check_weights(spec, ck);
  if (!check.ok())
    return make_error(src_dir + ": " + std::to_string(check.problems.size()) + " weight problem(s); first: " +
                      check.problems[0].name + ": " + check.problems[0].fault);
  D0_ASSIGN_OR_RETURN(std::vector<Item> items, plan_items(spec, ck, options.experts));
  D0_ASSIGN_OR_RETURN(const std::string out_config, converted_config(config_text, options.experts));
  D0_RETURN_IF_ERROR(prepare_checkpoint_outdir(out_dir, options.force));

  ConvertResult result;
  result.expert_matrices = matrices;
  result.tensors = items.size();
  for (const Item& it : items) {
    result.tensor_bytes += it.bytes;
    if (it.kind == Kind::copy) result.copied_bytes += it.bytes;
    else result.expert_bytes_out += it.bytes;
    if (it.kind == Kind::fp8_values) result.fp8_values += it.bytes;
  }
  for (const std::string& name : expert_tensor_names(spec)) {
    const Checkpoint::Entry* e = ck.find(name);
    result.expert_bytes_in += e->info->end - e->info->begin;
  }

  Run run;
  run.items = &items;
  run.n_shards = place_in_shards(items, options.shard_bytes);
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = std::max(1, std::min(threads, run.n_shards));
  run.inner_threads = std::max(1, threads / workers);
  run.chunk_bytes = std::max<std::size_t>(options.chunk_bytes, 1u << 12);
  run.dir = dir;
  run.progress = &progress;
  run.prog.bytes_total = result.tensor_bytes;
  run.t0 = t0;
  {
    std::vector<std::thread> pool;
    for (int w = 1; w < workers; ++w) pool.emplace_back([&run] { shard_worker(run); });
    shard_worker(run);
    for (auto& t : pool) t.join();
  }
  if (run.failed) return make_error(run.first_error);
  result.shards = run.n_shards;
  result.fp8_inexact = run.inexact;
  result.shard_file_bytes = run.shard_file_bytes;
  for (int k = 0; k < run.n_shards; ++k) result.files.push_back((dir / shard_file_name(k, run.n_shards)).string());

  if (run.n_shards > 1) {
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (const Item& it : items) weight_map[it.name] = shard_file_name(it.shard, run.n_shards);
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", result.tensor_bytes}};
    index["weight_map"] = std::move(weight_map);
    const fs::path path = dir / "model.safetensors.index.json";
    D0_RETURN_IF_ERROR(write_file_atomically(path.string(), index.dump(2) + "\n"));
    result.files.push_back(path.string());
  }
  const fs::path config_out = dir / "config.json";
  D0_RETURN_IF_ERROR(write_file_atomically(config_out.string(), out_config));
  result.files.push_back(config_out.string());
  for (fs::directory_iterator i(src, ec); !ec && i != fs::directory_iterator(); i.increment(ec)) {
    const std::string name = i->path().filename().string();
    if (name == "config.json" || is_weight_file(name) || !fs::is_regular_file(i->path())) continue;
    fs::copy_file(i->path(), dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return make_error((dir / name).string() + ": cannot copy from " + i->path().string() + ": " + ec.message());
    result.files.push_back((dir / name).string());
  }
  if (ec) return make_error(src_dir + ": cannot list: " + ec.message());

  // The result must load as what it claims to be.
  D0_ASSIGN_OR_RETURN(ModelSpec out_spec, model_spec_from_dir(out_dir));
  D0_ASSIGN_OR_RETURN(Checkpoint out_ck, Checkpoint::open_dir(out_dir));
  const WeightCheck out_check = check_weights(out_spec, out_ck);
  if (!out_check.ok())
    return make_error(out_dir + ": the converted checkpoint does not match its manifest: " +
                      out_check.problems[0].name + ": " + out_check.problems[0].fault);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace day0
