// Sparse penalties: cost proportional to the distinct tokens seen, not to the vocabulary.
#include "engine/penalties.h"

#include <algorithm>
#include <string>

namespace day0 {
namespace {

Status check_id(std::int32_t id, std::size_t vocab, const char* what) {
  if (id < 0 || static_cast<std::size_t>(id) >= vocab)
    return make_error(std::string("sampler: ") + what + " token id " + std::to_string(id) + " is outside the " +
                      std::to_string(vocab) + " logits");
  return Status::success();
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
  for (const auto& [id, bias] : p.logit_bias) {
    D0_RETURN_IF_ERROR(check_id(id, vocab, "logit_bias"));
    out.push_back({id, LogitEditKind::add, static_cast<float>(bias)});
  }
  if (p.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p.repetition_penalty);
    for (const std::int32_t id : history.prompt_unique()) {
      D0_RETURN_IF_ERROR(check_id(id, vocab, "prompt"));
      out.push_back({id, LogitEditKind::repetition, rp});
    }
    for (const auto& [id, count] : history.output_counts()) {
      D0_RETURN_IF_ERROR(check_id(id, vocab, "output"));
      if (!history.in_prompt(id)) out.push_back({id, LogitEditKind::repetition, rp});
    }
  }
  const float frequency = static_cast<float>(p.frequency_penalty);
  const float presence = static_cast<float>(p.presence_penalty);
  if (frequency != 0.f || presence != 0.f) {
    for (const auto& [id, count] : history.output_counts()) {
      D0_RETURN_IF_ERROR(check_id(id, vocab, "output"));
      out.push_back({id, LogitEditKind::subtract, frequency * static_cast<float>(count) + presence});
    }
  }
  return Status::success();
}

Status apply_penalties(std::span<float> logits, const SamplingParams& p, const TokenHistory& history) {
  std::vector<LogitEdit> edits;
  D0_RETURN_IF_ERROR(penalty_edits(p, history, logits.size(), edits));
  apply_logit_edits(logits.data(), edits.data(), edits.size());
  return Status::success();
}

}  // namespace day0
