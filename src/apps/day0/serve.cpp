// day0 serve: the OpenAI-compatible server on one model directory. It listens first (health answers, readiness
// is 503), then loads the tokenizer and weights, starts the engine, runs a warm-up generation and turns ready.
// SIGTERM or SIGINT: readiness and new requests turn 503, running requests finish (aborted after
// --drain-timeout), exit 0; a second signal exits at once. A signal while loading exits at once.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "apps/day0/commands.h"
#include "apps/day0/model_loading.h"
#include "arch/registry.h"
#include "cache/block_pool.h"
#include "model/executor.h"
#include "ops/cuda/device_arena.h"
#include "ops/registry.h"
#include "serve/deployment.h"
#include "serve/server.h"

namespace day0::app {
namespace {

// GPU memory a filled KV pool leaves for step scratch: a 2,048-token step of 20b peaked at 0.18 GiB (perf notes
// v31), 64 rows of logits over gpt-oss's vocabulary take 51 MB; the rest is headroom for larger hidden sizes.
constexpr std::int64_t kServeScratchReserve = std::int64_t{2} << 30;
// The pool where the backend cannot say what memory is left (the CPU's host memory).
constexpr std::int64_t kKvTokensWithoutMemory = 65536;

// The signal thread: the first SIGTERM/SIGINT asks main to drain (or exits at once while loading); a second
// one exits at once (RELIABILITY.md S2, S3).
class Signals {
 public:
  // Blocks the signals in the calling thread (main, before any other thread exists, so all inherit the mask).
  Signals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { wait(); });
    thread_.detach();  // blocked in sigwait until the process ends
  }
  void serving() { serving_ = true; }
  void wait_for_stop() {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_.wait(lock, [&] { return stop_requested_; });
  }

 private:
  void wait() {
    for (int count = 0;; ++count) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (!serving_ || count > 0) {
        std::fprintf(stderr, "day0 serve: %s: exiting now\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        std::fflush(stdout);
        std::_Exit(serving_ ? 1 : 0);
      }
      std::printf("day0 serve: %s: draining (a second signal exits at once)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stdout);
      std::lock_guard<std::mutex> lock(mutex_);
      stop_requested_ = true;
      stop_.notify_all();
    }
  }

  sigset_t set_;
  std::thread thread_;
  std::atomic<bool> serving_{false};
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stop_requested_ = false;
};

}  // namespace

int serve(const ServeCommandOptions& o) {
  Signals signals;
  ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.api_key = o.api_key;
  if (so.api_key.empty())
    if (const char* env = std::getenv("DAY0_API_KEY")) so.api_key = env;
  so.limits.max_connections = o.max_connections;
  so.limits.max_body_bytes = o.max_body_bytes;
  auto server = Server::start(so);
  if (!server.ok()) return fail(server.error().message);
  std::printf("day0 serve: listening on http://%s:%d (not ready: loading %s)\n", o.host.c_str(), (*server)->port(),
              o.dir.c_str());
  std::fflush(stdout);

  DeploymentOptions d;
  d.dir = o.dir;
  d.load.backend = o.engine.backend;
  auto bo = backend_options(o.engine);
  if (!bo.ok()) return fail(bo.error().message);
  d.load.backend_options = *bo;
  d.load.graph_max_batch = o.engine.graph_batch;
  d.load.max_tokens = o.max_model_len;  // 0: the model's max_position_embeddings
  d.load.max_step_tokens = std::max(o.engine.max_step_tokens, o.max_batch_tokens);
  d.load.kv_pool_tokens = o.kv_tokens > 0 ? o.kv_tokens : kKvTokensWithoutMemory;
  d.load.kv_pool_fit = o.kv_tokens == 0 && o.kv_memory == 0 ? KvPoolFit::fill : KvPoolFit::as_asked;
  d.load.kv_pool_reserve_bytes = kServeScratchReserve;
  d.load.fit_max_tokens = o.max_model_len == 0;
  if (o.kv_memory > 0) {  // the pool from a memory budget: as many whole blocks as the bytes hold
    auto spec = model_spec_from_dir(o.dir);
    if (!spec.ok()) return fail(spec.error().message);
    const KvLayout layout = kv_layout(*spec, d.load.block_size, d.load.backend_options.kv_cache_dtype);
    auto blocks = kv_blocks_for_budget(layout, static_cast<std::size_t>(o.kv_memory));
    if (!blocks.ok()) return fail("--kv-memory: " + blocks.error().message);
    d.load.kv_pool_tokens = std::int64_t(*blocks) * layout.block_size;
  }
  d.load.progress = terminal_progress();
  d.engine.max_batch_tokens = o.max_batch_tokens;
  d.engine.max_running = o.max_running;
  d.engine.max_waiting = o.max_waiting;
  d.engine.prefix_caching = !o.no_prefix_caching;
  d.engine.launch_ahead = !o.no_launch_ahead;
  d.engine.device_draws = !o.no_device_draws;
  d.served_model_names = o.served_model_names;
  d.chat_template_file = o.chat_template;
  auto deployment = Deployment::open(d);
  if (!deployment.ok()) return fail(deployment.error().message);
  const LoadedModel& model = (*deployment)->model();
  const ServedModel served = (*deployment)->served();
  std::printf("day0 serve: weights %s loaded on %s in %.3f s%s\n", format_bytes(model.weight_bytes).c_str(),
              o.engine.backend.c_str(), model.load_seconds,
              served.chat_template ? "" : "; no chat template: /v1/chat/completions answers 400 (--chat-template FILE)");
  if (o.max_model_len == 0 && served.protocol.max_model_len < model.spec.max_position)
    std::printf(
        "day0 serve: context %lld tokens, not the model's %lld: one sequence's KV cache of that length does "
        "not fit the memory the weights leave (--max-model-len sets it; --memory-fraction gives more)\n",
        static_cast<long long>(served.protocol.max_model_len), static_cast<long long>(model.spec.max_position));
  (*server)->attach(served);
  // On the GPU also a prefill of up to one step's tokens (CUDA loads kernels lazily, cuBLASLt plans each new shape).
  const std::int64_t warm_prompt = o.engine.backend == "cpu" ? 1 : std::min<std::int64_t>(512, o.max_batch_tokens);
  if (Status s = (*server)->warm_up(std::chrono::seconds(120), warm_prompt); !s.ok()) {
    (*server)->stop();  // before the engine it points at goes away
    return fail(s.error().message);
  }
  signals.serving();
  std::printf("day0 serve: ready on http://%s:%d: model '%s', context %lld tokens, KV pool %lld tokens, "
              "batch %lld tokens x %d sequences, %s backend\n",
              o.host.c_str(), (*server)->port(), served.protocol.model_names.front().c_str(),
              static_cast<long long>(served.protocol.max_model_len), static_cast<long long>(served.kv_pool_tokens),
              static_cast<long long>(o.max_batch_tokens), o.max_running, o.engine.backend.c_str());
  std::fflush(stdout);

  signals.wait_for_stop();
  (*server)->drain_and_stop(std::chrono::milliseconds(static_cast<std::int64_t>(o.drain_timeout_s * 1000)));
  std::printf("day0 serve: drained, exiting\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace day0::app
