// Synthetic checkpoints: random weights in the published layout for any config.json the arch registry
// parses, so that loading, memory and speed can be rehearsed at real scale before real weights exist.
//
// Every tensor of the ModelSpec's weight manifest is written with its declared shape: dense tensors as
// BF16 (matrices ~N(0, 0.02), norm weights ~1, biases ~N(0, 0.01)), MXFP4 experts as *_blocks / *_scales
// U8 encoded by mxfp4_encode_row from ~N(0, 0.02) values (so scales are realistic). Shards are filled in
// manifest order up to `shard_bytes` of tensor data each, named model-0000K-of-0000N.safetensors, with
// model.safetensors.index.json (metadata.total_size, weight_map) and a copy of config.json; a model that
// fits one shard is written as model.safetensors without an index, as Hugging Face does.
//
// Deterministic: each value depends only on (seed, tensor name, element index) through a counter-based
// generator, so the files are byte-identical for a seed whatever the thread count. Streaming: one chunk
// per thread plus one tensor's MXFP4 scales are held, never a shard.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "arch/model_spec.h"
#include "core/status.h"
#include "ops/ops.h"

namespace day0 {

struct SynthOptions {
  std::uint64_t seed = 0;
  std::uint64_t shard_bytes = 5'000'000'000;  // tensor bytes per shard (a tensor larger than this gets its own)
  int threads = 0;                             // 0: std::thread::hardware_concurrency()
  bool force = false;                          // allow a non-empty OUTDIR (its model*.safetensors*, index and config.json are replaced)
  std::size_t chunk_bytes = 16u << 20;         // bytes generated per step (split across threads)
};

struct SynthProgress {
  std::uint64_t bytes_done = 0;   // tensor bytes written so far
  std::uint64_t bytes_total = 0;  // tensor bytes of the whole checkpoint
  int file = 0, files = 0;        // shard being written (1-based) and shard count
  double seconds = 0;             // since the start
};
using SynthProgressFn = std::function<void(const SynthProgress&)>;

struct SynthResult {
  std::vector<std::string> files;  // paths: the shards in order, then the index (if any), then config.json
  int shards = 0;
  std::size_t tensors = 0;
  std::uint64_t tensor_bytes = 0;  // = index metadata.total_size
  std::uint64_t shard_file_bytes = 0;  // shards on disk, headers included
  double seconds = 0;
};

// `config_path` is a config.json file or a directory holding one. Errors are one line: unreadable or
// invalid config, unknown model_type, a manifest tensor no generator can make, OUTDIR non-empty (without
// force) or not creatable/writable, write failures.
Result<SynthResult> synth_checkpoint(const std::string& config_path, const std::string& outdir,
                                     const SynthOptions& options, const SynthProgressFn& progress = {});

// The same tensors in host memory, no files (`day0 bench --synthetic`): each equal byte for byte to what
// synth_checkpoint writes for `seed`. Needs the whole model's bytes of RAM.
Result<NamedTensors> synth_tensors(const ModelSpec& spec, std::uint64_t seed, int threads = 0);

}  // namespace day0
