// Engine: requests -> sequences -> batched steps. One scheduler thread owns the executor, the sequence cache
// (paged KV bookkeeping with prefix reuse) and every sequence's sampler; callers on any thread submit and abort.
//
// Each step the scheduler: admits waiting requests while KV blocks and the step's token budget allow (a prompt
// longer than the budget is prefilled in chunks over several steps), puts every running sequence's next token
// and the prefill chunks into ONE Executor::step, samples, and reports. When a running sequence needs a block
// and none is free, the most recently admitted sequence is preempted: its blocks are released (full ones stay in
// the prefix cache) and it goes back to the front of the queue, to be recomputed from prompt + generated tokens.
// Output is unchanged by preemption: sampling draws are keyed by (seed, output position).
//
// A step of greedy decode rows alone, nothing waiting, is followed at once by the same rows' next step, queued
// before this one's picks are read and fed them on the device (Executor::queue_decode), where no row then reaches
// max_tokens and the blocks for the rows' next tokens can be reserved (SequenceCache::reserve): the GPU runs it while
// the host samples, finishes and reports. A row that finishes (EOS, abort) wastes its queued next row, whose K/V
// lands in its own reserved slot, freed with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/finish.h"
#include "engine/sampling_params.h"
#include "ops/logprobs.h"

namespace day0 {

class Executor;

struct EngineConfig {
  std::int64_t max_batch_tokens = 512;  // tokens per step (decode rows + prefill chunks); <= executor step limit
  int max_running = 64;                 // sequences in the running batch at once
  int max_waiting = 256;                // queued requests beyond which submit() refuses (HTTP 429)
  bool prefix_caching = true;
  std::vector<std::int32_t> eos_token_ids;
  bool launch_ahead = true;  // greedy decode steps queued before the last one's picks are read (above)
  // Sampled rows (temperature, top-k, top-p, min-p) drawn on the device (Ops::draw_tokens, the host sampler's draw
  // bit for bit): two ids a row reach the host, not its logits, and such rows launch ahead as greedy ones do. Rows
  // whose logit_bias or penalties apply (greedy or sampled) take them on the device first (Ops::edit_logits, the
  // host's arithmetic bit for bit), and launch ahead too: the step queued ahead edits the token still being picked as
  // pending. Rows reporting logprobs (greedy or drawn, no bias or penalty that applies) take them from the device
  // (Ops::row_logprobs: a record a row), and launch ahead too where no bias or penalty can ever apply.
  bool device_draws = true;
};

struct GenerateRequest {
  std::vector<std::int32_t> prompt;  // non-empty, ids in the vocabulary
  SamplingParams sampling;           // validated; max_tokens resolved against the context
  std::uint64_t seed = 0;            // used when sampling.seed is unset (draw_request_seed())
};

struct GeneratedToken {
  std::int32_t token = -1;
  std::optional<float> logprob;
  std::vector<TokenLogprob> top_logprobs;
};

// What a request's callback receives: the tokens sampled since the last update (possibly none on the final
// one), and at the end finished = true with the reason, or an error message (the request failed alone).
struct RequestUpdate {
  std::vector<GeneratedToken> tokens;
  bool finished = false;
  FinishReason reason = FinishReason::none;
  std::string error;                        // non-empty: failed (finished is true)
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;       // so far
  std::int64_t cached_prompt_tokens = 0;    // prompt tokens found in the prefix cache at admission
};

// Called on the scheduler thread; must not block (hand the update to the connection and return).
using UpdateFn = std::function<void(const RequestUpdate&)>;

using RequestId = std::uint64_t;

struct EngineStats {
  std::int64_t waiting = 0, running = 0;
  std::int64_t kv_blocks_used = 0, kv_blocks_free = 0, kv_blocks_total = 0;
  std::int64_t prefix_prompt_tokens = 0, prefix_hit_tokens = 0;  // hit rate = hit / prompt
  std::int64_t steps = 0, step_tokens = 0, preemptions = 0;
  std::int64_t last_step_sequences = 0, max_step_sequences = 0;  // batching evidence
  std::int64_t ahead_steps = 0;  // decode steps queued before the last step's picks were read
  std::int64_t device_draws = 0;  // sampled rows drawn on the device (EngineConfig::device_draws)
  std::int64_t device_edited_rows = 0;  // rows whose bias and penalties were applied on the device
  std::int64_t device_logprob_rows = 0;  // rows whose logprobs were taken on the device
};

class Engine {
 public:
  // The executor must outlive the engine and be used by nothing else (its KV pool is the engine's).
  static Result<std::unique_ptr<Engine>> create(Executor& executor, const EngineConfig& config);
  ~Engine();  // stops the scheduler thread; unfinished requests get an error update

  // Queues a request; its updates go to `on_update`. Errors (nothing queued, callback never called): the queue
  // is full, the engine is draining, or the request cannot fit (prompt + max_tokens beyond the context or the
  // whole KV pool).
  Result<RequestId> submit(GenerateRequest request, UpdateFn on_update);
  // Stops a request (client gone, stop string matched): its blocks return to the pool; one final update with
  // finished = true and reason none follows unless it had already finished. Unknown ids are ignored.
  void abort(RequestId id);
  // Refuses new requests and returns when every queued and running request has finished.
  void drain();

  EngineStats stats() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace day0
