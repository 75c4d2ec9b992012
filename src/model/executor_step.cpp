// Executor::step: one forward pass over a batch of sequences. The host builds the step's index tensors (token
// ids, positions, owning sequence, KV slot of every token, the block tables, the rows that want logits), uploads
// them once, and the whole batch then runs through every layer as one [tokens, hidden] activation (run_step).
// A decode batch that a captured step graph serves replays it instead (executor_graphs.cpp).
#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>

#include "model/executor.h"
#include "model/executor_util.h"

namespace day0 {
namespace {

struct HostBatch {
  Tensor ids, positions, q_seq, slots, tables, logit_rows;
  bool all_rows = false;  // logits wanted for every token in order: no gather needed
};

}  // namespace

Result<Tensor> Executor::step(std::span<const SequenceStep> batch, const TapFn& tap, StepOutput output) {
  RowLogits none;
  return run_batch(batch, tap, output, none);
}

Result<Tensor> Executor::run_batch(std::span<const SequenceStep> batch, const TapFn& tap, StepOutput output,
                                   RowLogits& extra) {
  if (batch.empty()) return make_error("step: empty batch");
  last_decode_.reset();  // a queued decode's fed tokens follow only another queued decode
  // Validate and size.
  std::int64_t T = 0, max_blocks = 0, R = 0;
  for (size_t b = 0; b < batch.size(); ++b) {
    const SequenceStep& s = batch[b];
    const std::int64_t n = static_cast<std::int64_t>(s.tokens.size());
    if (n == 0) return make_error("step: sequence " + std::to_string(b) + ": no tokens");
    D0_RETURN_IF_ERROR(check_sequence(b, s, n));
    T += n;
    max_blocks = std::max(max_blocks, (s.start + n + block_size_ - 1) / block_size_);
    R += s.logits == SequenceStep::Logits::all ? n : s.logits == SequenceStep::Logits::last ? 1 : 0;
  }
  if (T > max_step_tokens_)
    return make_error("step: " + std::to_string(T) + " tokens exceed the step limit of " +
                      std::to_string(max_step_tokens_));
  if (!tap) {
    auto graphed = step_with_graph(batch, output, extra);
    if (!graphed.ok() || graphed->defined()) return graphed;  // undefined: no graph serves this batch
  }

  HostBatch hb;
  hb.ids = Tensor::zeros({T}, DType::i32);
  hb.positions = Tensor::zeros({T}, DType::i32);
  hb.q_seq = Tensor::zeros({T}, DType::i32);
  hb.slots = Tensor::zeros({T}, DType::i32);
  hb.tables = Tensor::zeros({static_cast<std::int64_t>(batch.size()), max_blocks}, DType::i32);
  hb.logit_rows = Tensor::zeros({R}, DType::i32);
  std::int64_t t = 0, r = 0;
  for (size_t b = 0; b < batch.size(); ++b) {
    const SequenceStep& s = batch[b];
    std::int32_t* table = hb.tables.data<std::int32_t>() + b * max_blocks;
    for (std::int64_t i = 0; i < max_blocks; ++i)
      table[i] = i < static_cast<std::int64_t>(s.block_table.size()) ? s.block_table[i] : -1;
    for (size_t i = 0; i < s.tokens.size(); ++i, ++t) {
      const std::int64_t pos = s.start + static_cast<std::int64_t>(i);
      hb.ids.data<std::int32_t>()[t] = s.tokens[i];
      hb.positions.data<std::int32_t>()[t] = static_cast<std::int32_t>(pos);
      hb.q_seq.data<std::int32_t>()[t] = static_cast<std::int32_t>(b);
      hb.slots.data<std::int32_t>()[t] = kv_slot(s.block_table, pos);
      const bool last = i + 1 == s.tokens.size();
      if (s.logits == SequenceStep::Logits::all || (s.logits == SequenceStep::Logits::last && last))
        hb.logit_rows.data<std::int32_t>()[r++] = static_cast<std::int32_t>(t);
    }
  }
  hb.all_rows = R == T;  // rows are then 0..T-1 in order

  ScratchScope scope(ops_);
  StepInputs in;
  in.tokens = T;
  in.logit_count = R;
  D0_ASSIGN_OR_RETURN(in.ids, ops_.upload(hb.ids, "token ids"));
  D0_ASSIGN_OR_RETURN(in.positions, ops_.upload(hb.positions, "positions"));
  D0_ASSIGN_OR_RETURN(in.slots, ops_.upload(hb.slots, "kv slots"));
  D0_ASSIGN_OR_RETURN(in.kv.q_seq, ops_.upload(hb.q_seq, "query sequences"));
  D0_ASSIGN_OR_RETURN(in.kv.block_tables, ops_.upload(hb.tables, "block tables"));
  in.kv.block_size = block_size_;
  if (!hb.all_rows) {
    D0_ASSIGN_OR_RETURN(in.logit_rows, ops_.upload(hb.logit_rows, "logit rows"));
  }
  D0_ASSIGN_OR_RETURN(Tensor logits, run_step(in, tap));
  if (R == 0) {
    D0_RETURN_IF_ERROR(ops_.synchronize());
    return output == StepOutput::greedy ? Tensor::zeros({0, 2}, DType::i32)
                                        : Tensor::zeros({0, spec_.vocab_size}, DType::f32);
  }
  if (tap) {
    D0_ASSIGN_OR_RETURN(Tensor host_logits, ops_.download(logits));
    D0_RETURN_IF_ERROR(emit(tap, "logits", host_logits));
    if (output == StepOutput::logits) return host_logits;
  }
  Tensor picks;
  if (output == StepOutput::greedy) {
    D0_ASSIGN_OR_RETURN(picks, ops_.scratch({R, 2}, DType::i32, "greedy picks"));
    if (!extra.logprobs.empty()) {
      D0_ASSIGN_OR_RETURN(extra.device_records, ops_.scratch({std::ssize(extra.logprobs), kLogprobRecordWords},
                                                             DType::i32, "logprob records"));
    }
  }
  return step_result(logits, output, picks, extra);
}

Status Executor::check_sequence(std::size_t b, const SequenceStep& s, std::int64_t n) const {
  const std::int64_t end = s.start + n;
  const std::string who = "step: sequence " + std::to_string(b) + ": ";
  if (s.start < 0 || end > max_tokens_)
    return make_error(who + "positions [" + std::to_string(s.start) + ", " + std::to_string(end) +
                      ") exceed the sequence limit of " + std::to_string(max_tokens_));
  const std::int64_t blocks = (end + block_size_ - 1) / block_size_;
  if (static_cast<std::int64_t>(s.block_table.size()) < blocks)
    return make_error(who + "block table of " + std::to_string(s.block_table.size()) + " blocks does not cover " +
                      std::to_string(end) + " tokens");
  for (std::int64_t i = 0; i < blocks; ++i)
    if (s.block_table[i] < 0 || s.block_table[i] >= n_blocks_)
      return make_error(who + "block " + std::to_string(s.block_table[i]) + " outside the pool of " +
                        std::to_string(n_blocks_));
  for (std::size_t i = 0; i < s.tokens.size(); ++i)
    if (s.tokens[i] < 0 || s.tokens[i] >= spec_.vocab_size)
      return make_error(who + "token id " + std::to_string(s.tokens[i]) + " at position " +
                        std::to_string(s.start + std::int64_t(i)) + " is outside the vocabulary [0, " +
                        std::to_string(spec_.vocab_size) + ")");
  return Status::success();
}

Result<PickedStep> Executor::step_picked(std::span<const SequenceStep> batch,
                                         std::span<const std::int32_t> sampled_rows,
                                         const std::vector<TokenDraw>& draws, const LogitEdits& edits,
                                         const std::vector<LogprobRequest>& logprobs) {
  std::int64_t R = 0;
  for (const SequenceStep& s : batch)
    R += s.logits == SequenceStep::Logits::all ? static_cast<std::int64_t>(s.tokens.size())
                                               : s.logits == SequenceStep::Logits::last ? 1 : 0;
  for (size_t i = 0; i < sampled_rows.size(); ++i)
    if (sampled_rows[i] < 0 || sampled_rows[i] >= R || (i > 0 && sampled_rows[i] <= sampled_rows[i - 1]))
      return make_error("step: sampled rows must ascend within the step's " + std::to_string(R) +
                        " logits rows, got " + std::to_string(sampled_rows[i]) + " at " + std::to_string(i));
  for (const TokenDraw& d : draws)
    if (std::binary_search(sampled_rows.begin(), sampled_rows.end(), d.row))
      return make_error("step: row " + std::to_string(d.row) + " is both sampled on the host and drawn");
  for (const std::int32_t row : edits.rows)
    if (std::binary_search(sampled_rows.begin(), sampled_rows.end(), row))
      return make_error("step: row " + std::to_string(row) + " is both sampled on the host and edited");
  for (const LogprobRequest& q : logprobs)
    if (std::binary_search(sampled_rows.begin(), sampled_rows.end(), q.row))
      return make_error("step: row " + std::to_string(q.row) + " is both sampled on the host and given logprobs");
  D0_RETURN_IF_ERROR(check_raw_logprob_rows(logprobs, edits, R, "step"));
  if (edits.has_pending()) return make_error("step: pending tokens come only with fed tokens (queue_decode)");
  PickedStep out;
  if (static_cast<std::int64_t>(sampled_rows.size()) == R) {  // every row sampled: no picks to make
    D0_ASSIGN_OR_RETURN(Tensor all, step(batch, {}, StepOutput::logits));
    for (std::int64_t r = 0; r < R; ++r) out.logits.push_back(all.slice_rows(r, r + 1));
    return out;
  }
  RowLogits sampled{sampled_rows, {}, draws, &edits, logprobs, {}, {}};
  D0_ASSIGN_OR_RETURN(out.picks, run_batch(batch, {}, StepOutput::greedy, sampled));
  out.logits = std::move(sampled.logits);
  out.logprobs.resize(logprobs.size());
  if (!logprobs.empty())
    std::memcpy(out.logprobs.data(), sampled.records.raw(), logprobs.size() * sizeof(LogprobRecord));
  return out;
}

Status check_raw_logprob_rows(const std::vector<LogprobRequest>& logprobs, const LogitEdits& edits, std::int64_t rows,
                             const std::string& what) {
  for (const LogprobRequest& q : logprobs)
    if (std::find(edits.rows.begin(), edits.rows.end(), q.row) != edits.rows.end())
      return make_error(what + ": row " + std::to_string(q.row) + " is edited, so its raw logprobs are gone");
  return check_logprob_requests(logprobs, rows, what);
}

Result<std::vector<Tensor>> Executor::download_rows(const Tensor& logits, std::span<const std::int32_t> rows) {
  const std::int64_t n = static_cast<std::int64_t>(rows.size());
  std::vector<std::int64_t> run_starts;  // indices into rows where a run of consecutive rows begins
  for (std::int64_t i = 0; i < n; ++i)
    if (i == 0 || rows[i] != rows[i - 1] + 1) run_starts.push_back(i);
  // More runs than kRuns: one download from the first row to the last. Each holds a pinned buffer while its rows
  // are read (the backend pools a few, with the picks'). The copies are queued; step_result's wait covers them.
  constexpr std::size_t kRuns = 3;
  if (run_starts.size() > kRuns) run_starts = {0};
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < run_starts.size(); ++k) {
    const std::int64_t i = run_starts[k], j = k + 1 < run_starts.size() ? run_starts[k + 1] : n;
    const std::int32_t first = rows[i];
    D0_ASSIGN_OR_RETURN(Tensor run, ops_.start_download(logits.slice_rows(first, rows[j - 1] + 1)));
    for (std::int64_t q = i; q < j; ++q) out.push_back(run.slice_rows(rows[q] - first, rows[q] - first + 1));
  }
  return out;
}

Result<Tensor> Executor::step_result(const Tensor& logits, StepOutput output, Tensor& picks, RowLogits& extra) {
  if (output == StepOutput::greedy) {
    if (extra.edits && !extra.edits->empty()) {
      Tensor edited = logits;  // a handle: the step's logits, edited in place
      D0_RETURN_IF_ERROR(ops_.edit_logits(edited, *extra.edits, nullptr));
    }
    D0_RETURN_IF_ERROR(ops_.greedy_tokens(logits, picks, nullptr));
    D0_RETURN_IF_ERROR(ops_.draw_tokens(logits, extra.draws, picks, nullptr));
    if (!extra.logprobs.empty()) {
      D0_RETURN_IF_ERROR(ops_.row_logprobs(logits, extra.logprobs, picks, extra.device_records));
      D0_ASSIGN_OR_RETURN(extra.records, ops_.start_download(extra.device_records));
    }
  }
  if (!extra.rows.empty()) {
    D0_ASSIGN_OR_RETURN(extra.logits, download_rows(logits, extra.rows));
  }
  // One wait for the downloads and the fault check (a download's own wait would be a second round trip a step).
  D0_ASSIGN_OR_RETURN(Tensor host, ops_.start_download(output == StepOutput::greedy ? picks : logits));
  D0_RETURN_IF_ERROR(ops_.synchronize());
  return host;
}

Result<Tensor> Executor::run_step(const StepInputs& in, const TapFn& tap) {
  const std::int64_t T = in.tokens, R = in.logit_count, H = spec_.hidden_size;
  const Tensor &ids = in.ids, &positions = in.positions, &slots = in.slots;
  const PagedKv& kv = in.kv;
  D0_ASSIGN_OR_RETURN(Tensor x, ops_.scratch({T, H}, DType::f32, "residual stream"));
  D0_ASSIGN_OR_RETURN(Tensor h, ops_.scratch({T, H}, DType::f32, "normed"));
  D0_ASSIGN_OR_RETURN(Tensor y, ops_.scratch({T, H}, DType::f32, "block out"));
  // h rounded to bf16 by the norm that makes h (a MoE block's residual add and next norm), for the next layer's
  // q/k/v GEMMs: h_bf16_valid says whether the last norm wrote it. Where every linear is a GEMM (all_gemm) the f32
  // rows may go unwritten; where only some are (decode batches past the small-M kernel's rows for q), both.
  Tensor h_bf16;
  bool h_bf16_valid = false;
  const bool all_gemm = ops_.linear_inputs_bf16(T);
  if (all_gemm || q_reads_bf16(T)) {
    D0_ASSIGN_OR_RETURN(h_bf16, ops_.scratch({T, H}, DType::bf16, "normed bf16"));
  }
  {
    ProfileSpan span(ops_, "embedding");
    D0_RETURN_IF_ERROR(ops_.embedding(weights_.get(spec_.embedding), ids, x));
  }
  D0_RETURN_IF_ERROR(emit(tap, "embed", x));

  const int n_layers = static_cast<int>(spec_.layers.size());
  {
    ProfileSpan span(ops_, "norms (with the residual adds)");
    auto [w, eps, plus_one] = norm_args(n_layers > 0 ? spec_.layers[0].mixer_norm : spec_.final_norm);
    D0_RETURN_IF_ERROR(ops_.rms_norm(x, w, eps, plus_one, h));
  }
  for (int i = 0; i < n_layers; ++i) {
    const LayerSpec& L = spec_.layers[i];
    ScratchScope layer_scope(ops_);  // a layer's temporaries (q, k, v, bf16 copies, router) die with it
    D0_RETURN_IF_ERROR(token_mixer(i, h, h_bf16_valid ? &h_bf16 : nullptr, positions, slots, kv, y));
    D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "attn"), y));
    Routing routing;
    D0_RETURN_IF_ERROR(channel_norm(i, x, y, h, routing));
    // The residual add fused with the next norm: the next layer's, or the final one. Without taps a MoE block
    // takes it in (its experts' weighted sum then goes straight into the norm's kernel).
    auto [w, eps, plus_one] = norm_args(i + 1 < n_layers ? spec_.layers[i + 1].mixer_norm : spec_.final_norm);
    if (!tap && L.channel.kind == ChannelMixerKind::moe) {
      // Where the next layer's q/k/v GEMMs take the bf16 rows (linear_inputs_bf16; attention with RoPE: its
      // linears_rope_kv_write) and a layer follows (the head reads h), the f32 rows are not written at all.
      Tensor bf16_alone;
      const bool f32_unread = all_gemm && i + 1 < n_layers &&
                              spec_.layers[i + 1].mixer.kind == TokenMixerKind::gqa_attention &&
                              spec_.layers[i + 1].mixer.attention.rope.kind != RopeKind::none;
      const NormAfter after{&x, &w, eps, plus_one, f32_unread ? &bf16_alone : &h, h_bf16.defined() ? &h_bf16 : nullptr};
      D0_RETURN_IF_ERROR(moe_block(i, h, routing, y, tap, &after));
      h_bf16_valid = h_bf16.defined();
    } else {
      h_bf16_valid = false;
      D0_RETURN_IF_ERROR(channel_mixer(i, h, routing, y, tap));
      D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "moe"), y));
      ProfileSpan span(ops_, "norms (with the residual adds)");
      D0_RETURN_IF_ERROR(ops_.add_rms_norm(x, y, w, eps, plus_one, h));
    }
    D0_RETURN_IF_ERROR(emit(tap, layer_tap(i, "out"), x));
  }
  D0_RETURN_IF_ERROR(emit(tap, "final_norm", h));
  if (R == 0) return Tensor();  // no row wants logits
  D0_ASSIGN_OR_RETURN(Tensor logits, ops_.scratch({R, spec_.vocab_size}, DType::f32, "logits"));
  ProfileSpan span(ops_, "lm_head");
  Tensor head_in = h;
  if (in.logit_rows.defined()) {  // only the rows that want logits go through the (vocabulary-sized) head
    D0_ASSIGN_OR_RETURN(head_in, ops_.scratch({R, H}, DType::f32, "head input"));
    D0_RETURN_IF_ERROR(ops_.embedding(h, in.logit_rows, head_in));  // a row gather
  }
  D0_RETURN_IF_ERROR(ops_.lm_head(head_in, weights_.get(spec_.lm_head), logits));
  return logits;
}

}  // namespace day0
