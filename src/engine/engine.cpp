// Engine: the continuous-batching scheduler (see engine.h for the policy).
#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "cache/sequence_cache.h"
#include "core/worker_pool.h"
#include "engine/sampler.h"
#include "model/executor.h"

namespace day0 {

namespace {

struct Sequence {
  RequestId id = 0;
  GenerateRequest request;
  UpdateFn on_update;
  Sampler sampler;
  std::vector<std::int32_t> tokens;  // prompt + generated: what the KV must hold before the next sample
  std::int64_t computed = 0;         // tokens whose K/V are written
  std::int64_t generated = 0;        // output tokens sampled (stop tokens included)
  std::int64_t cached_prompt = 0;
  std::uint64_t admitted_at = 0;  // admission order: the most recent is preempted first
  bool admitted = false;
  RequestUpdate pending;  // tokens sampled since the last report
};

// By row of a step of `rows` rows: the index of its logprob request (its record), or -1.
std::vector<std::int32_t> logprob_request_of(const std::vector<LogprobRequest>& logprobs, std::size_t rows) {
  std::vector<std::int32_t> of(rows, -1);
  for (std::size_t i = 0; i < logprobs.size(); ++i)
    of[static_cast<std::size_t>(logprobs[i].row)] = static_cast<std::int32_t>(i);
  return of;
}

}  // namespace

struct Engine::Impl {
  Executor& executor;
  EngineConfig config;
  SequenceCache cache;
  // Rows of a step are sampled in parallel, one scratch per thread: at batch 64 and a 201k vocabulary one
  // thread spent longer checking and scanning the logits than the GPU spent on the step. The threads are started
  // once (starting and joining them every step cost more than small batches' sampling).
  WorkerPool sampling_pool{std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 16)};
  std::vector<SamplerScratch> scratch = std::vector<SamplerScratch>(static_cast<size_t>(sampling_pool.threads()));

  std::mutex mu;  // guards the inbox, the aborts, draining/stopping and stats
  std::condition_variable wake, idle;
  std::deque<std::unique_ptr<Sequence>> inbox;
  std::unordered_set<RequestId> aborts;
  bool draining = false, stopping = false;
  RequestId next_id = 1;
  std::int64_t queued = 0;  // inbox + waiting, for submit()'s limit: recounted as soon as requests leave them
  EngineStats stats;
  std::thread worker;

  // Scheduler thread only.
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::list<std::unique_ptr<Sequence>> running;
  std::uint64_t admissions = 0;
  // A greedy decode step queued before the last one's picks were read (Executor::queue_decode, its tokens fed on
  // the device), and the requests of its rows in order.
  struct AheadStep {
    QueuedDecode step;
    std::vector<RequestId> ids;
    std::vector<LogprobRequest> logprobs;  // the step's, their records in step.records
  };
  std::optional<AheadStep> ahead;

  Impl(Executor& ex, const EngineConfig& cfg, SequenceCacheConfig cc) : executor(ex), config(cfg), cache(cc) {}

  void loop();
  bool take_inbox();
  void finish(Sequence& s, FinishReason reason, std::string error);
  void release(Sequence& s);
  void preempt_youngest();
  bool schedule_and_run();
  // Whether the greedy decode step over `members` (every running sequence) may be followed by their next step
  // before its picks are read: nothing waits to be admitted (or was submitted meanwhile), no row then passes
  // max_tokens, and the blocks the rows' next tokens need are there to reserve.
  bool may_queue_ahead(const std::vector<Sequence*>& members);
  // Whether the token `ahead` steps after the next of the sequence whose logits are `row` comes from the device: its
  // argmax, or a draw, then added to `draws` (EngineConfig::device_draws). Else its sampler reads the logits.
  // With `edits` (ahead 0 or 1), a row whose bias or penalties apply is one too, its edits appended
  // (Ops::edit_logits; one step ahead with the token now being picked pending). With `logprobs` (ahead 0 or 1), a
  // row reporting logprobs is one too, its request appended (Ops::row_logprobs).
  bool picked_on_device(Sampler& sampler, std::int32_t row, std::uint64_t ahead, std::vector<TokenDraw>& draws,
                        LogitEdits* edits, std::vector<LogprobRequest>* logprobs = nullptr) const;
  // The draws and edits of the members' next step where each row's token then comes from the device (its argmax,
  // or a draw, after its edits), whatever this step's tokens are; nullopt where one row needs its logits on the host.
  struct DevicePicks {
    std::vector<TokenDraw> draws;
    LogitEdits edits;
    std::vector<LogprobRequest> logprobs;
  };
  std::optional<DevicePicks> ahead_picks(const std::vector<Sequence*>& members) const;
  void count_draws(std::size_t draws, std::size_t edited, std::size_t logprob_rows = 0);
  // The decode `step` (every row picked on the device) is queued, row rows[i] for members[i]: queues the members'
  // next step first where `chain`, may_queue_ahead and ahead_picks allow, then takes the picks and settles the rows.
  void finish_decode(const QueuedDecode& step, const std::vector<LogprobRequest>& logprobs,
                     const std::vector<Sequence*>& members,
                     const std::vector<std::int64_t>& rows, bool chain);
  // The step queued ahead: its rows still running take their picks (a finished or aborted row's is wasted).
  void run_ahead();
  // A row's token (or its failure) taken into its sequence: reported, finished, or grown by it.
  void take_token(Sequence& s, Result<SampleResult>& sample, std::vector<Sequence*>& grew);
  // After a step's tokens are taken: finished sequences leave, grown ones get the next token's slot (preempting
  // where blocks run out), updates go out, stats are published.
  void settle(const std::vector<Sequence*>& grew, std::int64_t step_sequences, std::int64_t step_tokens);
  void publish_stats(std::int64_t step_sequences, std::int64_t step_tokens);
  void recount_queued();
};

Result<std::unique_ptr<Engine>> Engine::create(Executor& executor, const EngineConfig& config) {
  if (config.max_batch_tokens <= 0 || config.max_batch_tokens > executor.max_step_tokens())
    return make_error("engine: max batch tokens " + std::to_string(config.max_batch_tokens) + " must be in [1, " +
                      std::to_string(executor.max_step_tokens()) + "] (the executor's step limit)");
  if (config.max_running <= 0 || config.max_waiting < 0)
    return make_error("engine: max running must be positive and max waiting non-negative");
  SequenceCacheConfig cc;
  cc.n_blocks = executor.n_blocks();
  cc.block_size = executor.block_size();
  cc.prefix_caching = config.prefix_caching;
  auto impl = std::make_unique<Impl>(executor, config, cc);
  impl->stats.kv_blocks_total = executor.n_blocks();
  impl->stats.kv_blocks_free = executor.n_blocks();
  Impl* raw = impl.get();
  impl->worker = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Result<RequestId> Engine::submit(GenerateRequest request, UpdateFn on_update) {
  const Executor& ex = impl_->executor;
  const std::int64_t n = static_cast<std::int64_t>(request.prompt.size());
  if (n == 0) return make_error("the prompt has no tokens");
  for (std::int32_t t : request.prompt)
    if (t < 0 || t >= ex.spec().vocab_size)
      return make_error("prompt token id " + std::to_string(t) + " is outside the vocabulary of " +
                        std::to_string(ex.spec().vocab_size));
  if (request.sampling.max_tokens < 1) return make_error("max_tokens must be at least 1");
  const std::int64_t need = n + request.sampling.max_tokens;
  const std::int64_t pool = std::int64_t(ex.n_blocks()) * ex.block_size();
  if (need > ex.max_tokens() || need > pool)
    return make_error("prompt (" + std::to_string(n) + " tokens) + max_tokens (" +
                      std::to_string(request.sampling.max_tokens) + ") exceeds the " +
                      (need > ex.max_tokens() ? "context of " + std::to_string(ex.max_tokens())
                                              : "KV cache of " + std::to_string(pool)) +
                      " tokens");
  auto seq = std::make_unique<Sequence>(Sequence{
      0, std::move(request), std::move(on_update), Sampler(SamplingParams{}, {}, 0), {}, 0, 0, 0, 0, false, {}});
  seq->sampler = Sampler(seq->request.sampling, seq->request.prompt, seq->request.seed);
  seq->tokens = seq->request.prompt;
  seq->pending.prompt_tokens = n;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->draining || impl_->stopping) return make_error("the server is shutting down");
  if (impl_->queued >= impl_->config.max_waiting)
    return make_error("the queue is full (" + std::to_string(impl_->queued) + " requests waiting)");
  seq->id = impl_->next_id++;
  const RequestId id = seq->id;
  impl_->inbox.push_back(std::move(seq));
  ++impl_->queued;
  impl_->wake.notify_all();
  return id;
}

void Engine::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->aborts.insert(id);
  }
  impl_->wake.notify_all();
}

void Engine::drain() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->draining = true;
  impl_->wake.notify_all();
  impl_->idle.wait(lock, [&] { return impl_->stats.waiting + impl_->stats.running == 0 && impl_->inbox.empty(); });
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

// ---- scheduler thread

void Engine::Impl::release(Sequence& s) {
  if (s.admitted) (void)cache.free(static_cast<SeqId>(s.id));
  s.admitted = false;
  s.computed = 0;
}

void Engine::Impl::finish(Sequence& s, FinishReason reason, std::string error) {
  release(s);
  s.pending.finished = true;
  s.pending.reason = reason;
  s.pending.error = std::move(error);
  s.pending.completion_tokens = s.generated;
  s.pending.cached_prompt_tokens = s.cached_prompt;
  s.on_update(s.pending);
  s.pending.tokens.clear();
}

// Moves new requests in and applies aborts. Returns false when the engine is stopping.
bool Engine::Impl::take_inbox() {
  std::unordered_set<RequestId> to_abort;
  {
    std::unique_lock<std::mutex> lock(mu);
    wake.wait(lock,
              [&] { return stopping || !inbox.empty() || !aborts.empty() || !running.empty() || !waiting.empty(); });
    if (stopping) return false;
    while (!inbox.empty()) {
      waiting.push_back(std::move(inbox.front()));
      inbox.pop_front();
    }
    to_abort.swap(aborts);
  }
  if (to_abort.empty()) return true;
  auto aborted = [&](const std::unique_ptr<Sequence>& s) {
    if (!to_abort.count(s->id)) return false;
    finish(*s, FinishReason::none, "");
    return true;
  };
  std::erase_if(waiting, aborted);
  running.remove_if(aborted);
  recount_queued();
  return true;
}

void Engine::Impl::preempt_youngest() {
  auto youngest = std::max_element(running.begin(), running.end(),
                                   [](const auto& a, const auto& b) { return a->admitted_at < b->admitted_at; });
  Sequence& s = **youngest;
  release(s);  // its full computed blocks stay in the prefix cache; readmission recomputes the rest
  waiting.push_front(std::move(*youngest));
  running.erase(youngest);
  std::lock_guard<std::mutex> lock(mu);
  ++stats.preemptions;
}

// One step: decode rows and prefill chunks of the running sequences, then admissions, under the token budget.
bool Engine::Impl::schedule_and_run() {
  if (ahead) {
    run_ahead();
    return true;
  }
  std::int64_t budget = config.max_batch_tokens;
  std::vector<Sequence*> members;
  // Admit from the front of the queue while a slot, the budget and the blocks allow.
  while (!waiting.empty() && static_cast<int>(running.size()) < config.max_running) {
    Sequence& s = *waiting.front();
    if (cache.blocks_needed_to_allocate(s.tokens) > cache.n_available_blocks()) break;
    auto hit = cache.allocate(static_cast<SeqId>(s.id), s.tokens);
    if (!hit.ok()) break;
    s.admitted = true;
    s.computed = *hit;
    if (s.generated == 0) s.cached_prompt = *hit;
    s.admitted_at = ++admissions;
    running.push_back(std::move(waiting.front()));
    waiting.pop_front();
  }
  // Admitted requests no longer count against the queue's limit: not only from the step's end (publish_stats),
  // which comes after the step's finished requests were reported, so a client answered at once could find its
  // own request still counted and be refused a slot that was free.
  recount_queued();
  std::vector<SequenceStep> batch;
  for (auto& sp : running) {
    if (budget == 0) break;
    Sequence& s = *sp;
    const std::int64_t left = static_cast<std::int64_t>(s.tokens.size()) - s.computed;
    const std::int64_t n = std::min(left, budget);
    budget -= n;
    const bool last = n == left;
    batch.push_back({std::span(s.tokens).subspan(s.computed, n), s.computed, cache.block_table(SeqId(s.id)),
                     last ? SequenceStep::Logits::last : SequenceStep::Logits::none});
    members.push_back(&s);
  }
  if (batch.empty()) return false;

  // Rows whose token is their logits' argmax alone take the picks made on the device (two ids a row reach the
  // host); only the other rows' logits are copied, for their samplers (Executor::step_picked).
  std::vector<size_t> sampled;            // members with a logits row, in row order
  std::vector<std::int32_t> host_rows;    // of those rows, the ones a host sampler reads
  std::vector<std::int32_t> logits_of;    // by row: its place in host_rows, or -1 (it takes its pick)
  std::vector<TokenDraw> draws;           // rows whose pick is drawn on the device
  LogitEdits edits;                       // rows whose bias and penalties apply on the device before the pick
  std::vector<LogprobRequest> logprobs;   // rows whose raw logprobs are taken on the device after the pick
  for (size_t i = 0; i < members.size(); ++i) {
    if (batch[i].logits == SequenceStep::Logits::none) continue;
    const auto row = static_cast<std::int32_t>(sampled.size());
    sampled.push_back(i);
    const bool host = !picked_on_device(members[i]->sampler, row, /*ahead=*/0, draws, &edits, &logprobs);
    logits_of.push_back(host ? static_cast<std::int32_t>(host_rows.size()) : -1);
    if (host) host_rows.push_back(row);
  }
  count_draws(draws.size(), edits.rows.size(), logprobs.size());
  const std::vector<std::int32_t> record_of = logprob_request_of(logprobs, sampled.size());
  Status st = executor.copy_blocks(cache.take_ops().block_copies);
  // Decode rows picked on the device alone (greedy or drawn): queued, so that the rows' next step can go out before
  // these picks are read.
  const auto one_token = [](const SequenceStep& s) { return s.tokens.size() == 1; };
  const bool decode_only =
      host_rows.empty() && sampled.size() == members.size() && std::all_of(batch.begin(), batch.end(), one_token);
  if (st.ok() && decode_only) {
    auto queued = executor.queue_decode(batch, /*fed_tokens=*/false, draws, edits, logprobs);
    if (queued.ok()) {
      std::vector<std::int64_t> rows(members.size());
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
      finish_decode(*queued, logprobs, members, rows, members.size() == running.size());
      return true;
    }
    st = queued.error();
  }
  Result<PickedStep> step =
      st.ok() ? executor.step_picked(batch, host_rows, draws, edits, logprobs) : Result<PickedStep>(st.error());
  if (!step.ok()) {
    // A failed step is a backend fault, not one request's: fail the step's sequences, keep serving the rest.
    for (Sequence* s : members) finish(*s, FinishReason::none, "engine step failed: " + step.error().message);
    running.remove_if([](const auto& s) { return s->pending.finished; });
    publish_stats(static_cast<std::int64_t>(batch.size()), config.max_batch_tokens - budget);
    return true;
  }
  // 1. Sample every row with logits (each sequence's sampler is its own: rows in parallel, the same draws as one
  // at a time); then, in batch order, K/V written, tokens taken, what is done finished.
  std::vector<Result<SampleResult>> samples(sampled.size(), Result<SampleResult>(make_error("not sampled")));
  sampling_pool.run_parts(
      static_cast<std::int64_t>(sampled.size()), 4, [&](int part, std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          Sampler& sampler = members[sampled[r]]->sampler;
          if (logits_of[r] < 0) {
            const std::int32_t* pick = step->picks.data<std::int32_t>() + 2 * r;
            samples[r] =
                sampler.take_argmax(pick[0], pick[1], record_of[r] < 0 ? nullptr : &step->logprobs[record_of[r]]);
            continue;
          }
          const Tensor& row = step->logits[logits_of[r]];
          samples[r] = sampler.sample(std::span<const float>(row.data<float>(), static_cast<size_t>(row.size(1))),
                                      scratch[part]);
        }
      });
  std::int64_t row = 0;
  std::vector<Sequence*> grew;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& s = *members[i];
    s.computed += static_cast<std::int64_t>(batch[i].tokens.size());
    (void)cache.mark_computed(SeqId(s.id), s.computed);
    if (batch[i].logits == SequenceStep::Logits::none) continue;
    take_token(s, samples[row++], grew);
  }
  settle(grew, static_cast<std::int64_t>(batch.size()), config.max_batch_tokens - budget);
  return true;
}

void Engine::Impl::take_token(Sequence& s, Result<SampleResult>& sample, std::vector<Sequence*>& grew) {
  if (!sample.ok()) {
    finish(s, FinishReason::none, sample.error().message);
    return;
  }
  ++s.generated;
  const FinishReason verdict = finish_after_token(sample->token, s.generated, s.request.sampling, config.eos_token_ids);
  if (!is_stop_token(sample->token, s.request.sampling, config.eos_token_ids))
    s.pending.tokens.push_back({sample->token, sample->logprob, std::move(sample->top_logprobs)});
  if (verdict != FinishReason::none) {
    finish(s, verdict, "");
    return;
  }
  s.tokens.push_back(sample->token);
  grew.push_back(&s);
}

void Engine::Impl::settle(const std::vector<Sequence*>& grew, std::int64_t step_sequences, std::int64_t step_tokens) {
  running.remove_if([](const auto& s) { return s->pending.finished; });
  // 2. Each new token's K/V is written next step, so it needs a slot now. Out of blocks: preempt the youngest
  // (possibly the sequence itself, which then waits with its token in its list and is recomputed).
  for (Sequence* s : grew)
    while (s->admitted && !cache.append(SeqId(s->id), std::span(&s->tokens.back(), 1)).ok()) preempt_youngest();
  // 3. Report (preempted sequences too: their tokens are final).
  for (Sequence* s : grew)
    if (!s->pending.tokens.empty()) {
      s->pending.completion_tokens = s->generated;
      s->pending.cached_prompt_tokens = s->cached_prompt;
      s->on_update(s->pending);
      s->pending.tokens.clear();
    }
  publish_stats(step_sequences, step_tokens);
}

bool Engine::Impl::may_queue_ahead(const std::vector<Sequence*>& members) {
  if (!config.launch_ahead || !waiting.empty() || members.size() != running.size()) return false;
  {  // a request submitted since the step began is admitted at the next step, not after one more queued ahead
    std::lock_guard<std::mutex> lock(mu);
    if (!inbox.empty()) return false;
  }
  std::int64_t blocks = 0;
  for (const Sequence* s : members) {
    if (s->generated + 2 > s->request.sampling.max_tokens) return false;
    blocks += cache.blocks_needed_to_append(SeqId(s->id), 1);
  }
  return blocks <= cache.n_available_blocks();
}

bool Engine::Impl::picked_on_device(Sampler& sampler, std::int32_t row, std::uint64_t ahead,
                                    std::vector<TokenDraw>& draws, LogitEdits* edits,
                                    std::vector<LogprobRequest>* logprobs) const {
  if (sampler.argmax_only(ahead)) return true;
  if (!config.device_draws) return false;
  const auto pick = sampler.device_pick(row, ahead, executor.spec().vocab_size, edits);
  if (!pick || (pick->logprob_top >= 0 && !logprobs)) return false;
  if (pick->draw) draws.push_back(*pick->draw);
  if (pick->logprob_top >= 0) logprobs->push_back({row, pick->logprob_top});
  return true;
}

std::optional<Engine::Impl::DevicePicks> Engine::Impl::ahead_picks(const std::vector<Sequence*>& members) const {
  DevicePicks picks;
  for (std::size_t r = 0; r < members.size(); ++r)
    if (!picked_on_device(members[r]->sampler, static_cast<std::int32_t>(r), /*ahead=*/1, picks.draws, &picks.edits,
                          &picks.logprobs))
      return std::nullopt;
  return picks;
}

void Engine::Impl::count_draws(std::size_t draws, std::size_t edited, std::size_t logprob_rows) {
  if (draws == 0 && edited == 0 && logprob_rows == 0) return;
  std::lock_guard<std::mutex> lock(mu);
  stats.device_draws += static_cast<std::int64_t>(draws);
  stats.device_edited_rows += static_cast<std::int64_t>(edited);
  stats.device_logprob_rows += static_cast<std::int64_t>(logprob_rows);
}

void Engine::Impl::finish_decode(const QueuedDecode& step, const std::vector<LogprobRequest>& logprobs,
                                 const std::vector<Sequence*>& members,
                                 const std::vector<std::int64_t>& rows, bool chain) {
  const auto n = static_cast<std::int64_t>(members.size());
  std::optional<AheadStep> next;
  std::optional<DevicePicks> picked;  // the next step's, where every row is picked on the device
  if (chain && may_queue_ahead(members) && (picked = ahead_picks(members))) {
    // Each row's next token, the pick now being made, at the position after its last, in room reserved for it (the
    // block its append will find taken); copies-on-write go out before the step that writes there.
    Status st = Status::success();
    for (const Sequence* s : members)
      if (st.ok()) st = cache.reserve(SeqId(s->id), 1);
    if (st.ok()) st = executor.copy_blocks(cache.take_ops().block_copies);
    std::vector<SequenceStep> batch;
    AheadStep a;
    for (const Sequence* s : members) {
      batch.push_back({{}, static_cast<std::int64_t>(s->tokens.size()), cache.block_table(SeqId(s->id)),
                       SequenceStep::Logits::last});
      a.ids.push_back(s->id);
    }
    // Not queued (an error): the rows go on one step at a time (the room stays theirs until their next append); a
    // device fault surfaces in the wait below.
    if (st.ok()) {
      if (auto queued = executor.queue_decode(batch, /*fed_tokens=*/true, picked->draws, picked->edits,
                                              picked->logprobs);
          queued.ok()) {
        a.step = *queued;
        a.logprobs = picked->logprobs;
        next = std::move(a);
        count_draws(picked->draws.size(), picked->edits.rows.size(), picked->logprobs.size());
      }
    }
  }
  auto picks = executor.wait_decode(step);
  if (!picks.ok()) {
    if (next) (void)executor.wait_decode(next->step);  // fed a failed step's picks: dropped
    for (Sequence* s : members) finish(*s, FinishReason::none, "engine step failed: " + picks.error().message);
    running.remove_if([](const auto& s) { return s->pending.finished; });
    publish_stats(n, n);
    return;
  }
  const std::vector<std::int32_t> record_of = logprob_request_of(logprobs, static_cast<std::size_t>(picks->size(0)));
  std::vector<Sequence*> grew;
  for (std::int64_t i = 0; i < n; ++i) {
    Sequence& s = *members[i];
    s.computed += 1;
    (void)cache.mark_computed(SeqId(s.id), s.computed);
    const std::int32_t* pick = picks->data<std::int32_t>() + 2 * rows[i];
    const std::int32_t asked = record_of[rows[i]];
    const LogprobRecord record =
        asked < 0 ? LogprobRecord{} : logprob_record_at(step.records.data<std::int32_t>(), asked);
    Result<SampleResult> sample = s.sampler.take_argmax(pick[0], pick[1], asked < 0 ? nullptr : &record);
    take_token(s, sample, grew);
  }
  if (next) {
    ahead = std::move(next);
    std::lock_guard<std::mutex> lock(mu);
    ++stats.ahead_steps;
  }
  settle(grew, n, n);
}

void Engine::Impl::run_ahead() {
  const AheadStep a = std::move(*ahead);
  ahead.reset();
  std::vector<Sequence*> members;
  std::vector<std::int64_t> rows;
  for (size_t r = 0; r < a.ids.size(); ++r) {
    auto it = std::find_if(running.begin(), running.end(), [&](const auto& s) { return s->id == a.ids[r]; });
    if (it == running.end()) continue;
    members.push_back(it->get());
    rows.push_back(static_cast<std::int64_t>(r));
  }
  if (members.empty()) {  // every row finished or aborted: the step's work is wasted, its wait still due
    (void)executor.wait_decode(a.step);
    publish_stats(0, 0);  // the running count as it now is (drain() waits for it)
    return;
  }
  // The next step is fed row for row: only where every row is still there.
  finish_decode(a.step, a.logprobs, members, rows, members.size() == a.ids.size());
}

void Engine::Impl::recount_queued() {
  std::lock_guard<std::mutex> lock(mu);
  queued = static_cast<std::int64_t>(waiting.size() + inbox.size());
}

void Engine::Impl::publish_stats(std::int64_t step_sequences, std::int64_t step_tokens) {
  std::lock_guard<std::mutex> lock(mu);
  stats.waiting = static_cast<std::int64_t>(waiting.size() + inbox.size());
  stats.running = static_cast<std::int64_t>(running.size());
  queued = stats.waiting;
  stats.kv_blocks_used = cache.n_used_blocks();
  stats.kv_blocks_free = cache.n_available_blocks();
  stats.prefix_prompt_tokens = cache.stats().prompt_tokens;
  stats.prefix_hit_tokens = cache.stats().hit_tokens;
  if (step_sequences > 0) {
    ++stats.steps;
    stats.step_tokens += step_tokens;
    stats.last_step_sequences = step_sequences;
    stats.max_step_sequences = std::max(stats.max_step_sequences, step_sequences);
  }
  if (stats.waiting + stats.running == 0) idle.notify_all();
}

void Engine::Impl::loop() {
  while (take_inbox()) {
    if (schedule_and_run()) continue;
    // Nothing could run: with nothing running, the head of the queue can never be admitted (submit() keeps
    // requests within the pool, so this is a safety net against a livelock, not a policy).
    if (running.empty() && !waiting.empty()) {
      finish(*waiting.front(), FinishReason::none, "the request does not fit the KV cache");
      waiting.pop_front();
    }
    publish_stats(0, 0);
  }
  if (ahead) (void)executor.wait_decode(ahead->step);  // its picks land in host memory the executor may free
  // Stopping: whatever is left fails with a clear message.
  for (auto& s : running) finish(*s, FinishReason::none, "the engine stopped");
  for (auto& s : waiting) finish(*s, FinishReason::none, "the engine stopped");
  std::lock_guard<std::mutex> lock(mu);
  for (auto& s : inbox) {
    s->pending.finished = true;
    s->pending.error = "the engine stopped";
    s->on_update(s->pending);
  }
  inbox.clear();
}

}  // namespace day0
