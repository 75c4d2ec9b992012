// Sparse penalties: cost proportional to the distinct tokens seen, not to the vocabulary.
#include "engine/penalties.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace day0 {
namespace {

Status check_id(std::int32_t id, std::size_t vocab, const char* what) {
  if (id < 0 || static_cast<std::size_t>(id) >= vocab)
    return make_error(std::string("sampler: ") + what + " token id " + std::to_string(id) + " is outside the " +
                      std::to_string(vocab) + " logits");
  return Status::success();
}

// The penalties as the edits apply them: in float, the host's and the device's arithmetic.
struct PenaltyTerms {
  bool repetition;
  float rp, frequency, presence;
  bool subtract;  // frequency or presence
  // Frequency x count + presence, the value an output id's logit loses: one expression for every count, so the
  // pending token's next count (PendingToken) is the bits the host computes once it has seen it.
  float subtract_value(std::int32_t count) const { return frequency * static_cast<float>(count) + presence; }
};

PenaltyTerms penalty_terms(const SamplingParams& p) {
  const float frequency = static_cast<float>(p.frequency_penalty);
  const float presence = static_cast<float>(p.presence_penalty);
  return {p.repetition_penalty != 1.0, static_cast<float>(p.repetition_penalty), frequency, presence,
          frequency != 0.f || presence != 0.f};
}

}  // namespace

TokenHistory::TokenHistory(std::span<const std::int32_t> prompt_tokens, bool keep_prompt) {
  if (!keep_prompt) return;
  prompt_unique_.assign(prompt_tokens.begin(), prompt_tokens.end());
  std::sort(prompt_unique_.begin(), prompt_unique_.end());
  prompt_unique_.erase(std::unique(prompt_unique_.begin(), prompt_unique_.end()), prompt_unique_.end());
}

void TokenHistory::add_output(std::int32_t token) { ++output_counts_[token]; }

bool TokenHistory::in_prompt(std::int32_t token) const {
  return std::binary_search(prompt_unique_.begin(), prompt_unique_.end(), token);
}

bool penalties_apply(const SamplingParams& p, const TokenHistory& history) {
  const bool has_output = !history.output_counts().empty();
  return !p.logit_bias.empty() || (p.repetition_penalty != 1.0 && !history.empty()) ||
         ((p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) && has_output);
}

bool penalties_never_apply(const SamplingParams& p) {
  return p.logit_bias.empty() && p.repetition_penalty == 1.0 && p.frequency_penalty == 0.0 && p.presence_penalty == 0.0;
}

Status penalty_edits(const SamplingParams& p, const TokenHistory& history, std::size_t vocab,
                     std::vector<LogitEdit>& out) {
  out.clear();
  std::vector<std::pair<std::int32_t, double>> bias = p.logit_bias;
  std::stable_sort(bias.begin(), bias.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, value] : bias) D0_RETURN_IF_ERROR(check_id(id, vocab, "logit_bias"));
  const PenaltyTerms terms = penalty_terms(p);
  const bool repetition = terms.repetition, subtract = terms.subtract;
  static const std::vector<std::int32_t> kNone;
  const std::vector<std::int32_t>& prompt = repetition ? history.prompt_unique() : kNone;  // sorted
  for (const std::int32_t id : prompt) D0_RETURN_IF_ERROR(check_id(id, vocab, "prompt"));
  std::vector<std::pair<std::int32_t, std::int32_t>> outputs;
  if (repetition || subtract) outputs.assign(history.output_counts().begin(), history.output_counts().end());
  std::sort(outputs.begin(), outputs.end());
  for (const auto& [id, count] : outputs) D0_RETURN_IF_ERROR(check_id(id, vocab, "output"));
  // One merge over the three id-sorted lists: an id's edits together, in the order the host applies them.
  std::size_t b = 0, q = 0, o = 0;
  while (b < bias.size() || q < prompt.size() || o < outputs.size()) {
    std::int32_t id = std::numeric_limits<std::int32_t>::max();
    if (b < bias.size()) id = std::min(id, bias[b].first);
    if (q < prompt.size()) id = std::min(id, prompt[q]);
    if (o < outputs.size()) id = std::min(id, outputs[o].first);
    for (; b < bias.size() && bias[b].first == id; ++b)
      out.push_back({id, LogitEditKind::add, static_cast<float>(bias[b].second)});
    const bool in_prompt = q < prompt.size() && prompt[q] == id;
    const bool in_output = o < outputs.size() && outputs[o].first == id;
    if (repetition && (in_prompt || in_output)) out.push_back({id, LogitEditKind::repetition, terms.rp});
    if (subtract && in_output) {
      const std::int32_t count = outputs[o].second;
      out.push_back({id, LogitEditKind::subtract, terms.subtract_value(count), terms.subtract_value(count + 1)});
    }
    q += in_prompt ? 1 : 0;
    o += in_output ? 1 : 0;
  }
  return Status::success();
}

Result<const std::vector<LogitEdit>*> SequencePenaltyEdits::get(const SamplingParams& p, const TokenHistory& history,
                                                                std::size_t vocab) {
  if (vocab_ != vocab || vocab == 0) {
    vocab_ = 0;
    D0_RETURN_IF_ERROR(penalty_edits(p, history, vocab, edits_));
    vocab_ = vocab;
  }
  return &edits_;
}

void SequencePenaltyEdits::add_output(const SamplingParams& p, const TokenHistory& history, std::int32_t token) {
  const PenaltyTerms terms = penalty_terms(p);
  if (vocab_ == 0 || (!terms.repetition && !terms.subtract)) return;  // not built, or outputs add no edits
  if (token < 0 || static_cast<std::size_t>(token) >= vocab_) {
    vocab_ = 0;
    return;
  }
  // The id's run: its biases, then its repetition entry, then its subtract entry (penalty_edits' order).
  const auto by_id = [](const LogitEdit& e, std::int32_t id) { return e.id < id; };
  auto at = std::lower_bound(edits_.begin(), edits_.end(), token, by_id);
  while (at != edits_.end() && at->id == token && at->kind == LogitEditKind::add) ++at;
  if (terms.repetition) {
    if (at == edits_.end() || at->id != token || at->kind != LogitEditKind::repetition)
      at = edits_.insert(at, {token, LogitEditKind::repetition, terms.rp});
    ++at;
  }
  if (!terms.subtract) return;
  const std::int32_t count = history.output_counts().at(token);
  const LogitEdit entry{token, LogitEditKind::subtract, terms.subtract_value(count), terms.subtract_value(count + 1)};
  if (at != edits_.end() && at->id == token && at->kind == LogitEditKind::subtract)
    *at = entry;
  else
    edits_.insert(at, entry);
}

PendingToken pending_token_edits(const SamplingParams& p) {
  const PenaltyTerms terms = penalty_terms(p);
  return {1, terms.rp, terms.subtract ? 1 : 0, terms.subtract_value(1)};
}

Status apply_penalties(std::span<float> logits, const SamplingParams& p, const TokenHistory& history) {
  std::vector<LogitEdit> edits;
  D0_RETURN_IF_ERROR(penalty_edits(p, history, logits.size(), edits));
  apply_logit_edits(logits.data(), edits.data(), edits.size());
  return Status::success();
}

}  // namespace day0
