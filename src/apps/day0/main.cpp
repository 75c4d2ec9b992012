// day0: bring a newly published MoE checkpoint to a validated endpoint. Subcommands: inspect, run, compare,
// tokenize, synth, convert, bench, bench-moe, serve.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <exception>
#include <limits>

#include "apps/day0/commands.h"

// CLI::PositiveNumber's message spells out DBL_MAX (300+ digits); this one says what is wanted.
static const CLI::Validator kPositive(
    [](std::string& s) {
      double v = 0;
      const bool ok = CLI::detail::lexical_cast(s, v) && v > 0 && std::isfinite(v);
      return ok ? std::string() : "must be a positive number, got " + s;
    },
    "POSITIVE");

static void add_backend_options(CLI::App* cmd, day0::app::BackendCliOptions& o) {
  cmd->add_option("--backend", o.backend, "Backend: cpu (reference) or cuda");
  cmd->add_option("--expert-compute", o.expert_compute, "cuda: convert routed MXFP4 experts online to bf16 or fp8")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  cmd->add_option("--memory-fraction", o.memory_fraction, "cuda: share of GPU memory taken at start-up (0, 1]")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--fused-moe-tokens", o.fused_moe_tokens,
                  "cuda: MoE steps of at most this many tokens read MXFP4 experts directly (with fp8 compute: bf16 at "
                  "decode sizes, FP8 MMAs from 8 tokens an expert; 0: convert + GEMM; default: every step with bf16 "
                  "compute, up to 4096 tokens with fp8)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
  cmd->add_flag("--f32-attention", o.f32_attention,
                "cuda: prefill attention in f32 on CUDA cores (default: tensor cores from 64 query rows)");
  cmd->add_flag("--f16-attention", o.f16_attention,
                "cuda: prefill attention MMAs on f16 operands with a power of two per block (11 significant bits; "
                "default with a bf16 KV cache: bf16 operands, K and V as cached, Q and the softmax weights rounded to "
                "bf16, as a bf16 model computes)");
  cmd->add_flag("--batch-invariant", o.batch_invariant,
               "cuda: every token computed the same whatever else is in its step (identical greedy output solo or "
               "batched; slower prefill; MXFP4 experts with bf16 compute)");
  cmd->add_flag("--no-dependent-launch", o.no_dependent_launch,
               "cuda: launch kernels the ordinary way (default: each may start while the one before finishes)");
  cmd->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                  "KV cache element type: auto (bf16 on cuda, f32 on cpu), f32, or bf16 (cuda: half the bytes per "
                  "token; K and V rounded to bf16; GQA decode attention on tensor cores)")
      ->check(CLI::IsMember({"auto", "f32", "bf16"}));
  cmd->add_option("--mxfp4-order", o.mxfp4_order,
                  "cuda: the order MXFP4 expert blocks are placed in: tiles (16 rows x 128 values a 1 KB tile, K "
                  "padded: +2.2% of their bytes on gpt-oss; the MoE kernels read it fastest), rows (as published), "
                  "or auto (tiles where every expert's rows are a multiple of 16); same results")
      ->check(CLI::IsMember({"auto", "tiles", "rows"}));
  cmd->add_option("--graph-batch", o.graph_batch,
                  "cuda: decode steps of up to this many sequences replay graphs captured at start-up (0: off)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{4096}));
  cmd->add_option("--max-step-tokens", o.max_step_tokens, "Tokens per forward step; longer prompts prefill in chunks")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
}

int main(int argc, char** argv) {
  CLI::App app{"day0 - inference engine and toolkit for newly released MoE models"};
  app.require_subcommand(1);

  day0::app::InspectOptions inspect;
  auto* i = app.add_subcommand("inspect", "Architecture summary, parameters, bytes, op coverage, weight check");
  i->add_option("dir", inspect.dir, "Model directory (config.json, optional safetensors)")->required();
  i->add_option("--backend", inspect.backend, "Backend whose op coverage to show (cpu, cuda)");
  i->add_option("--expert-compute", inspect.expert_compute, "cuda plan: workspace of bf16 or fp8 experts")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  i->add_option("--prompt-ids", inspect.prompt.ids, "Show this prompt (token ids)");
  i->add_option("--prompt", inspect.prompt.text, "Show how this text tokenizes");
  i->add_option("--chat", inspect.prompt.chat, "Show how this chat request (JSON or @FILE) renders and tokenizes");

  day0::app::RunOptions run;
  auto* r = app.add_subcommand("run", "Greedy generation from token ids, text or chat messages");
  r->add_option("dir", run.dir, "Model directory")->required();
  r->add_option("--prompt-ids", run.prompt.ids, "Prompt token ids, e.g. 1,2,3");
  r->add_option("--prompt", run.prompt.text, "Prompt text (needs tokenizer.json)");
  r->add_option("--chat", run.prompt.chat, "Chat request JSON {\"messages\": [...]} or @FILE (needs a chat template)");
  r->add_option("--max-tokens", run.max_tokens, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  add_backend_options(r, run.engine);
  r->add_flag("--profile", run.engine.profile,
              "Time each part of a layer (projections, attention, router, experts, ...) on the device's clock, "
              "after one untimed warm-up generation of the same prompt");

  day0::app::CompareOptions compare;
  auto* c = app.add_subcommand("compare", "Per-tap comparison against reference dumps");
  c->add_option("dir", compare.dir, "Model directory")->required();
  c->add_option("--reference", compare.references, "Reference dump (.safetensors), repeatable")->required();
  c->add_option("--tolerance", compare.tolerance, "Relative error allowed per tap")->check(kPositive);
  add_backend_options(c, compare.engine);

  day0::app::TokenizeOptions tokenize;
  auto* t = app.add_subcommand("tokenize", "Text <-> token ids and chat rendering with the model's tokenizer");
  t->add_option("dir", tokenize.dir, "Directory with tokenizer.json (+ tokenizer_config.json)")->required();
  t->add_flag("--decode", tokenize.decode, "Read a JSON array of ids, print the text");
  t->add_flag("--chat", tokenize.chat, "Read a chat request JSON object, print the rendered prompt");
  t->add_flag("--jsonl", tokenize.jsonl, "One JSON value per line in and out");
  t->add_flag("--stream", tokenize.stream, "With --decode: the streaming detokenizer's pieces");
  t->add_flag("--no-special", tokenize.no_special, "Encode without added special tokens");
  t->add_flag("--skip-special", tokenize.skip_special, "Decode without special tokens");
  t->add_option("--bench", tokenize.bench_file, "Time single-thread encode of FILE, print MB/s as JSON");

  day0::app::SynthCommandOptions synth;
  auto* s = app.add_subcommand("synth", "Write a checkpoint of random weights in the published layout for CONFIG");
  s->add_option("config", synth.config, "config.json (or a directory holding one)")->required();
  s->add_option("outdir", synth.outdir, "Output directory (created; must be empty unless --force)")->required();
  s->add_option("--seed", synth.seed, "Random seed (same seed, same bytes)");
  s->add_option("--shard-bytes", synth.shard_bytes, "Tensor bytes per shard, e.g. 5000000000, 500MB, 2GiB")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true))
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
  s->add_option("--threads", synth.threads, "Generator threads (default: all cores)")->check(CLI::Range(1, 1024));
  s->add_flag("--force", synth.force, "Allow a non-empty OUTDIR: replace its checkpoint files and config.json");

  day0::app::ServeCommandOptions serve;
  auto* sv = app.add_subcommand("serve", "OpenAI-compatible HTTP server: completions, chat, streaming, metrics");
  sv->add_option("dir", serve.dir, "Model directory")->required();
  sv->add_option("--host", serve.host, "Address to listen on");
  sv->add_option("--port", serve.port, "Port to listen on (0: any free port)")->check(CLI::Range(0, 65535));
  add_backend_options(sv, serve.engine);
  sv->add_option("--max-batch-tokens", serve.max_batch_tokens, "Tokens per engine step (decode + prefill chunks)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  sv->add_option("--max-running", serve.max_running, "Sequences in the running batch")->check(CLI::Range(1, 4096));
  sv->add_option("--max-waiting", serve.max_waiting, "Queued requests beyond which requests get 429")
      ->check(CLI::Range(1, 1 << 20));
  sv->add_option("--kv-tokens", serve.kv_tokens,
                 "Tokens of paged KV cache (all sequences together); default: all the GPU memory the weights leave "
                 "(less 2 GiB of step scratch), 65,536 on the CPU")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32));
  sv->add_option("--kv-memory", serve.kv_memory, "Bytes of paged KV cache, e.g. 40GB (instead of --kv-tokens)")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true));
  sv->add_option("--max-model-len", serve.max_model_len,
                 "Context length (prompt + output); default: the model's, or as long as one sequence's KV cache "
                 "fits the GPU's memory where the model's does not")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32));
  sv->add_flag("--no-prefix-caching", serve.no_prefix_caching, "Do not reuse KV blocks of shared prompt prefixes");
  sv->add_flag("--no-launch-ahead", serve.no_launch_ahead,
               "Wait for each greedy decode step before queuing the next (default: the next step is queued before "
               "this one's picks are read, fed them on the device)");
  sv->add_flag("--no-device-draws", serve.no_device_draws,
               "Sample every sampled, penalised or logprobs row on the host (default: they are drawn on the "
               "device, after their bias and penalties, with their top-k, top-p and min-p, the host's arithmetic "
               "and draw bit for bit; a row's logprobs are taken there too where no bias or penalty applies)");
  sv->add_option("--api-key", serve.api_key, "Require 'Authorization: Bearer KEY' (also env DAY0_API_KEY)");
  sv->add_option("--served-model-name", serve.served_model_names, "Model name(s) clients use (default: DIR's name)");
  sv->add_option("--chat-template", serve.chat_template, "Jinja chat template file (replaces the model's)");
  sv->add_option("--max-connections", serve.max_connections, "Connections served at once")->check(CLI::Range(1, 65536));
  sv->add_option("--max-body-bytes", serve.max_body_bytes, "Largest request body (413 beyond), e.g. 8MB")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true));
  sv->add_option("--drain-timeout", serve.drain_timeout_s, "Seconds running requests get to finish on SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));

  day0::app::BenchOptions bench;
  auto* b = app.add_subcommand("bench", "Measure the GPU's ceilings, then prefill and decode speed against them");
  b->add_option("dir", bench.dir, "Model directory (e.g. a day0 synth checkpoint; with --synthetic, a config)")
      ->required();
  bench.engine.backend = "auto";
  add_backend_options(b, bench.engine);
  b->get_option("--backend")->description("Backend: cpu (reference), cuda, or auto (the default: cuda where a GPU is)");
  b->add_option("--prefill", bench.prefill, "Prompt lengths to time")->delimiter(',')->expected(1, 16);
  b->add_option("--batches", bench.batches, "Decode batch sizes")->delimiter(',')->expected(1, 16);
  b->add_option("--contexts", bench.contexts, "Decode context lengths")->delimiter(',')->expected(1, 16);
  b->add_option("--decode-steps", bench.decode_steps, "Timed decode steps per point")->check(CLI::Range(1, 10000));
  b->add_option("--json", bench.json, "Also write the figures to this JSON file");
  b->add_flag("--synthetic", bench.synthetic, "Random weights made in memory from DIR/config.json (no checkpoint)");
  b->add_flag("--kernels", bench.kernels,
              "cuda: after each prefill size one more prefill, after each decode point as many steps again, with every "
              "kernel's device time listed (CUPTI)");
  b->add_flag("--decode-logits", bench.decode_logits,
              "Decode steps return each row's logits to the host, as for sampling there (default: the greedy pick of "
              "each row made on the device, as the engine's steps where every row decodes greedily)");
  b->add_flag("--decode-wait-each", bench.decode_wait_each,
              "Greedy decode steps each waited for before the next is queued (default: each queued before the last "
              "one's picks reach the host, fed them on the device, as day0 run and serve decode)");
  b->add_flag("--expert-load", bench.expert_load,
              "After each prefill size one more prefill, with each MoE layer's load: tokens an expert (least, median, "
              "most) and the tiles they fill in the FP8 expert GEMM");

  day0::app::BenchMoeOptions bench_moe;
  auto* bm = app.add_subcommand("bench-moe", "Time the MoE expert kernels at gpt-oss-20b/120b shapes (needs a GPU)");
  bm->add_option("--tokens", bench_moe.tokens, "Token counts to time")->delimiter(',')->expected(1, 16)
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
  bm->add_option("--arena-gib", bench_moe.arena_gib, "GPU memory to take (GiB)")->check(CLI::Range(1.0, 1024.0));
  bm->add_option("--json", bench_moe.json, "Also write the figures to this JSON file");
  bm->add_option("--parts", bench_moe.parts, "What to time (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"moe", "fp8-gemms", "linears", "sampling", "decode-attention", "prefill-attention"}));
  bm->add_option("--skew", bench_moe.skew,
                 "Uneven routing: experts drawn in proportion to exp(SKEW x), x standard normal (0: uniform; 0.75: "
                 "the synthetic gpt-oss-120b's deeper layers at 4,096 tokens)")
      ->check(CLI::Range(0.0, 4.0));
  bm->add_option("--mxfp4-order", bench_moe.mxfp4_order, "The experts' MXFP4 blocks' order: tiles (as day0 places "
                 "them by default) or rows (as published: --mxfp4-order rows)")
      ->check(CLI::IsMember({"tiles", "rows"}));

  day0::app::ConvertCommandOptions convert;
  auto* v =
      app.add_subcommand("convert", "Rewrite an MXFP4 checkpoint with its routed experts as bf16 or fp8 (offline)");
  v->add_option("src", convert.src, "MXFP4 checkpoint directory")->required();
  v->add_option("outdir", convert.outdir, "Output directory (created; must be empty unless --force)")->required();
  v->add_option("--experts", convert.experts, "Expert format to write: bf16 (exact) or fp8 (E4M3, row scales)")
      ->required()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  v->add_option("--shard-bytes", convert.shard_bytes, "Tensor bytes per shard, e.g. 5000000000, 500MB, 2GiB")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true))
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()));
  v->add_option("--threads", convert.threads, "Converter threads (default: all cores)")->check(CLI::Range(1, 1024));
  v->add_flag("--force", convert.force, "Allow a non-empty OUTDIR: replace its checkpoint files and config.json");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 with CLI11's own output; usage errors are one "error: ..." line.
    if (e.get_exit_code() == 0) return app.exit(e);
    day0::app::fail(e.what());
    return e.get_exit_code();
  }
  try {
    if (*i) return day0::app::inspect(inspect);
    if (*r) return day0::app::run(run);
    if (*b) return day0::app::bench(bench);
    if (*bm) return day0::app::bench_moe(bench_moe);
    if (*c) return day0::app::compare(compare);
    if (*t) return day0::app::tokenize(tokenize);
    if (*s) return day0::app::synth(synth);
    if (*sv) return day0::app::serve(serve);
    if (*v) return day0::app::convert(convert);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: still one line, not an abort
    return day0::app::fail(e.what());
  }
  return 1;
}
