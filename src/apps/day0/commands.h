// The day0 subcommands. Each returns the process exit code; errors are printed as one line on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/day0/prompt.h"

namespace day0::app {

// Which backend runs the model and how it reserves memory (run, compare).
struct BackendCliOptions {
  std::string backend = "cpu";
  std::string expert_compute = "bf16";  // cuda: dtype the routed MXFP4 experts are converted to
  double memory_fraction = 0.92;        // cuda: share of the GPU's memory taken at start-up
  // Tokens per forward step (longer prompts prefill in chunks). 8,192: a 4,096-token prompt in one step feeds each
  // expert twice the tokens of two 2,048-token chunks (H200, 20b synth: prefill 4,096 40.8k -> 45.3k tok/s, 16,384
  // 26.6k -> 30.3k; perf notes v19), for about 4x the step scratch (v5 measured ~0.2 GB at 2,048).
  std::int64_t max_step_tokens = 8192;
  // cuda: MoE calls up to this many tokens read MXFP4 directly (0: never); unset: BackendOptions' default
  std::optional<std::int64_t> fused_moe_tokens;
  bool f32_attention = false;           // cuda: no tensor cores in prefill attention
  bool f16_attention = false;           // cuda: prefill attention MMAs on f16 operands with block scales
  bool batch_invariant = false;         // cuda: a token's result independent of its step (BackendOptions)
  bool no_dependent_launch = false;     // cuda: ordinary kernel launches (BackendOptions::dependent_launch)
  std::string kv_cache_dtype = "auto";  // bf16 on cuda, f32 on cpu; or either named (BackendOptions::kv_cache_dtype)
  std::string mxfp4_order = "auto";     // cuda: the MXFP4 expert blocks' order: auto, tiles, rows (BackendOptions)
  std::int64_t graph_batch = 64;        // cuda: decode steps up to this many sequences replay step graphs (0: off)
  bool profile = false;                 // time each part of a layer on the device's clock (no step graphs)
};

struct InspectOptions {
  std::string dir;
  std::string backend = "cpu";
  std::string expert_compute = "bf16";  // cuda plan: the workspace's dtype
  PromptOptions prompt;  // optional: show how a prompt tokenizes
};
int inspect(const InspectOptions& o);

struct RunOptions {
  std::string dir;
  BackendCliOptions engine;
  PromptOptions prompt;
  int max_tokens = 32;
};
int run(const RunOptions& o);

struct CompareOptions {
  std::string dir;
  BackendCliOptions engine;
  std::vector<std::string> references;  // dump files
  double tolerance = 1e-4;
};
int compare(const CompareOptions& o);

struct TokenizeOptions {
  std::string dir;
  bool decode = false;        // stdin: JSON array of ids -> text
  bool chat = false;          // stdin: {"messages", "tools", "add_generation_prompt"} -> rendered prompt
  bool jsonl = false;         // one JSON value per input line, one per output line
  bool stream = false;        // with --decode: the incremental detokenizer's pieces
  bool no_special = false;    // encode without the post-processor's special tokens
  bool skip_special = false;  // decode without special tokens
  std::string bench_file;     // time encode of this file on one thread
};
int tokenize(const TokenizeOptions& o);

struct SynthCommandOptions {
  std::string config;  // config.json or a directory holding one
  std::string outdir;
  std::uint64_t seed = 0;
  std::uint64_t shard_bytes = 5'000'000'000;
  int threads = 0;     // 0: all cores
  bool force = false;  // replace the checkpoint files of a non-empty OUTDIR
};
int synth(const SynthCommandOptions& o);

struct ServeCommandOptions {
  std::string dir;
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (printed)
  // The engine steps at most max_batch_tokens: a longer executor step would only reserve scratch.
  BackendCliOptions engine = [] {
    BackendCliOptions o;
    o.max_step_tokens = 2048;
    return o;
  }();
  std::int64_t max_batch_tokens = 512;  // tokens per engine step (decode rows + prefill chunks)
  int max_running = 64;                 // sequences in the running batch
  int max_waiting = 256;                // queued requests beyond which the server answers 429
  // Paged KV pool (at least one max-length sequence); 0: every whole block the memory left after the weights holds
  // (less a reserve for step scratch) where the backend knows it (CUDA), else 65,536.
  std::int64_t kv_tokens = 0;
  std::uint64_t kv_memory = 0;          // > 0: size the pool from this many bytes instead
  // 0: the model's max_position_embeddings, lowered to what one sequence's KV can have where that does not fit.
  std::int64_t max_model_len = 0;
  bool no_prefix_caching = false;
  bool no_launch_ahead = false;         // each greedy decode step waited for before the next is queued
  bool no_device_draws = false;         // every sampled row sampled on the host
  std::string api_key;                  // also DAY0_API_KEY
  std::vector<std::string> served_model_names;  // default: the directory's name
  std::string chat_template;            // a Jinja file replacing the model's (or supplying a missing one)
  int max_connections = 256;
  std::size_t max_body_bytes = 8u << 20;
  double drain_timeout_s = 30;
};
int serve(const ServeCommandOptions& o);

struct BenchOptions {
  std::string dir;
  BackendCliOptions engine;
  std::vector<std::int64_t> prefill = {512, 4096, 16384};
  std::vector<std::int64_t> batches = {1, 8, 32, 128};
  std::vector<std::int64_t> contexts = {1024, 8192};
  int decode_steps = 16;
  std::string json;          // also write the figures here
  bool synthetic = false;    // random weights made in memory from DIR/config.json (no checkpoint read)
  bool kernels = false;      // cuda: after each point's timed runs, one prefill / as many decode steps again, traced
  bool expert_load = false;  // after each prefill size's timed runs, one more: its routers' load layer by layer
  bool decode_logits = false;  // decode steps return every logit to the host (default: greedy picks, StepOutput)
  bool decode_wait_each = false;  // greedy steps each waited for before the next (default: launched ahead)
};
int bench(const BenchOptions& o);

struct BenchMoeOptions {
  std::vector<std::int64_t> tokens = {1, 4, 8, 64, 512};
  double arena_gib = 40;  // device memory taken for experts, workspaces and routings
  std::string json;       // also write the figures here
  // What to time: the expert kernels ("moe", or their FP8 GEMMs alone: "fp8-gemms"), the dense linears ("linears"),
  // decode and prefill attention.
  std::vector<std::string> parts = {"moe", "linears", "sampling", "decode-attention", "prefill-attention"};
  double skew = 0;  // routing: 0 uniform, else experts' popularities exp(skew x), x standard normal
  std::string mxfp4_order = "tiles";  // the experts' blocks' order, tiles or rows (BackendOptions::mxfp4_order)
};
int bench_moe(const BenchMoeOptions& o);

struct ConvertCommandOptions {
  std::string src;      // MXFP4 checkpoint directory
  std::string outdir;
  std::string experts;  // bf16 or fp8
  std::uint64_t shard_bytes = 5'000'000'000;
  int threads = 0;      // 0: all cores
  bool force = false;   // replace the checkpoint files of a non-empty OUTDIR
};
int convert(const ConvertCommandOptions& o);

// Prints "error: <message>" on stderr and returns 1.
int fail(const std::string& message);

}  // namespace day0::app
