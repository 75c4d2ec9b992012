// Greedy decode launched ahead (Executor::queue_decode). A replayed step graph is followed by the greedy picks,
// which also write each row's token into the graphs' id buffer, the picks' copy to the host and a fence; the
// host may then queue the next step, whose ids are already on the device, before it waits for this one's picks.
// Between two steps the GPU then runs only the picks, three small copies and the next step's input copy, not also
// the host's wake-up, its reading of the picks and the next launch (v58: 20b batch 1 +0.7%, ~15 us a step).
// Where no graph serves a batch the step runs at once, its fed tokens read from the last step's picks on the host.
#include <string>
#include <vector>

#include "model/executor.h"
#include "model/executor_util.h"

namespace day0 {

Result<QueuedDecode> Executor::queue_decode(std::span<const SequenceStep> batch, bool fed_tokens,
                                            const std::vector<TokenDraw>& draws, const LogitEdits& edits,
                                            const std::vector<LogprobRequest>& logprobs) {
  const std::int64_t n = static_cast<std::int64_t>(batch.size());
  if (n == 0) return make_error("queue_decode: empty batch");
  if (fed_tokens && (!last_decode_ || last_decode_->rows < n))
    return make_error("queue_decode: fed tokens for " + std::to_string(n) +
                      " sequences need a queued decode step of at least as many rows just before, " +
                      (last_decode_ ? "the last had " + std::to_string(last_decode_->rows)
                                    : std::string("and another step came between (or none was queued)")));
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const SequenceStep& s = batch[b];
    if (s.tokens.size() != (fed_tokens ? 0u : 1u) || s.logits != SequenceStep::Logits::last)
      return make_error("queue_decode: sequence " + std::to_string(b) + " must " +
                        (fed_tokens ? "leave its tokens empty (they are fed)" : "bring one token") +
                        " and want its last row's pick");
    D0_RETURN_IF_ERROR(check_sequence(b, s, 1));
  }
  if (edits.has_pending() && !fed_tokens) return make_error("queue_decode: pending tokens come only with fed tokens");
  D0_RETURN_IF_ERROR(check_raw_logprob_rows(logprobs, edits, n, "queue_decode"));
  const StepGraph* g = graph_for(n);
  const bool ids_on_device = fed_tokens && g && last_decode_->step.queued;
  // Fed tokens the device does not hold: the last step's picks, read on the host.
  std::vector<std::int32_t> fed(fed_tokens && !ids_on_device ? n : 0);
  std::vector<SequenceStep> steps(batch.begin(), batch.end());
  if (!fed.empty()) {
    D0_ASSIGN_OR_RETURN(const Tensor last, wait_decode(last_decode_->step));
    for (std::int64_t r = 0; r < n; ++r) {
      fed[r] = last.data<std::int32_t>()[2 * r];
      steps[r].tokens = std::span<const std::int32_t>(&fed[r], 1);
    }
  }
  // Pending tokens the host now holds become plain edits; on the device they are read where the picks left them.
  const bool resolve = !fed.empty() && edits.has_pending();
  const LogitEdits resolved = resolve ? resolve_pending(edits, fed.data(), spec_.vocab_size) : LogitEdits{};
  const LogitEdits& step_edits = resolve ? resolved : edits;
  if (!g) {
    RowLogits none{{}, {}, draws, &step_edits, logprobs, {}, {}};
    D0_ASSIGN_OR_RETURN(Tensor picks, run_batch(steps, {}, StepOutput::greedy, none));
    QueuedDecode done{picks, none.records, {}, false};
    last_decode_ = LastDecode{n, done};
    return done;
  }
  last_decode_.reset();
  D0_RETURN_IF_ERROR(fill_graph_inputs(steps, g->batch, ids_on_device));
  if (Status st = ops_.replay_graph(g->handle); !st.ok()) {
    graphs_.clear();  // persistent memory moved: op by op from now on (step_with_graph's rule)
    graph_status_ = "off: " + st.error().message;
    return st.error();
  }
  Tensor picks = g->picks.slice_rows(0, n), ids = graph_ids_.slice_rows(0, n);
  Tensor logits = g->logits.slice_rows(0, n);
  if (!step_edits.empty())
    D0_RETURN_IF_ERROR(ops_.edit_logits(logits, step_edits, step_edits.has_pending() ? &ids : nullptr));
  D0_RETURN_IF_ERROR(ops_.greedy_tokens(logits, picks, &ids));
  D0_RETURN_IF_ERROR(ops_.draw_tokens(logits, draws, picks, &ids));
  QueuedDecode queued;
  if (!logprobs.empty()) {
    Tensor records = g->records.slice_rows(0, std::ssize(logprobs));
    D0_RETURN_IF_ERROR(ops_.row_logprobs(logits, logprobs, picks, records));
    D0_ASSIGN_OR_RETURN(queued.records, ops_.start_download(records));
  }
  D0_ASSIGN_OR_RETURN(queued.picks, ops_.start_download(picks));
  D0_ASSIGN_OR_RETURN(queued.fence, ops_.queue_fence());
  queued.queued = true;
  last_decode_ = LastDecode{n, queued};
  return queued;
}

Result<Tensor> Executor::wait_decode(const QueuedDecode& step) {
  if (step.queued) D0_RETURN_IF_ERROR(ops_.wait_fence(step.fence));
  return step.picks;
}

Result<QueuedDecode> Executor::queue_solo_decode(std::optional<std::int32_t> token) {
  const SequenceStep s{token ? std::span<const std::int32_t>(&*token, 1) : std::span<const std::int32_t>(),
                       solo_length_, solo_table_, SequenceStep::Logits::last};
  D0_ASSIGN_OR_RETURN(QueuedDecode q, queue_decode(std::span(&s, 1), !token));
  ++solo_length_;
  return q;
}

}  // namespace day0
