// Offline expert conversion (`day0 convert`): a checkpoint with MXFP4 routed experts rewritten with every expert
// matrix decoded to bf16 or converted to fp8 (E4M3 + a power-of-two f32 scale per output row) on the CPU, with the
// codecs the GPU path runs online (mxfp4_decode_row_bf16, mxfp4_row_to_fp8; the CUDA conversion kernels are
// bit-exact with them). Running the converted checkpoint with the matching --expert-compute is therefore
// bit-identical to running the MXFP4 one with online conversion. Tensor names and config: arch/expert_format.h.
//
// Every other tensor (attention, router, norms, embeddings, expert biases, and any the manifest does not know) is
// copied byte for byte. Tensors keep the source manifest's order (a matrix's converted tensors take the place of
// its blocks); shards are filled up to `shard_bytes` of tensor data each and named as Hugging Face does, with
// model.safetensors.index.json when there are several. config.json is copied with quantization_config replaced;
// every other regular file of SRC except weights (tokenizer, chat template, generation config, licence, ...) is
// copied as is. The result is opened and checked against the converted config's manifest before returning.
//
// Parallel: shards are written concurrently (one writer thread each), and each chunk's rows are split across the
// threads left over, so a one-shard model still uses every core. Streaming: one chunk per shard being written.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "arch/expert_format.h"
#include "core/status.h"

namespace day0 {

struct ConvertOptions {
  ExpertFormat experts = ExpertFormat::bf16_fused;  // bf16_fused or fp8_rowwise_fused
  std::uint64_t shard_bytes = 5'000'000'000;        // tensor bytes per shard (a larger tensor gets its own)
  int threads = 0;                                  // 0: std::thread::hardware_concurrency()
  bool force = false;                               // allow a non-empty OUTDIR (its checkpoint files are replaced)
  std::size_t chunk_bytes = 16u << 20;              // bytes converted per step of one shard
};

struct ConvertProgress {
  std::uint64_t bytes_done = 0;   // output tensor bytes written so far
  std::uint64_t bytes_total = 0;
  double seconds = 0;
};
// Called from the writer threads, one at a time.
using ConvertProgressFn = std::function<void(const ConvertProgress&)>;

struct ConvertResult {
  std::vector<std::string> files;        // the shards in order, the index (if any), config.json, copied files
  int shards = 0;
  std::size_t tensors = 0;               // in the output
  std::size_t expert_matrices = 0;       // converted
  std::uint64_t expert_bytes_in = 0;     // MXFP4 blocks + scales read
  std::uint64_t expert_bytes_out = 0;    // bf16, or e4m3 + row scales written
  std::uint64_t copied_bytes = 0;        // tensors copied unchanged
  std::uint64_t tensor_bytes = 0;        // all output tensor data (= index metadata.total_size)
  std::uint64_t shard_file_bytes = 0;    // shards on disk, headers included
  std::uint64_t fp8_values = 0;          // e4m3 values written
  std::uint64_t fp8_inexact = 0;         // of those, values that did not convert exactly (quant/fp8_experts.h)
  double seconds = 0;
};

// Errors are one line: SRC unreadable or not a known architecture, experts not MXFP4 (e.g. an already converted
// checkpoint), a target format other than bf16 / fp8, OUTDIR = SRC, OUTDIR non-empty without force, write failures.
Result<ConvertResult> convert_checkpoint(const std::string& src_dir, const std::string& out_dir,
                                         const ConvertOptions& options, const ConvertProgressFn& progress = {});

}  // namespace day0
