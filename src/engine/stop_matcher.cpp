// StopMatcher: one KMP automaton per stop string, advanced byte by byte over each new piece. The held
// tail is as long as the longest partial match, so nothing that could begin a stop string is released.
#include "engine/stop_matcher.h"

#include <algorithm>

namespace day0 {

StopMatcher::StopMatcher(const std::vector<std::string>& stops) {
  for (std::size_t i = 0; i < stops.size(); ++i) {
    const std::string& s = stops[i];
    if (s.empty()) continue;
    Pattern p{s, std::vector<std::uint32_t>(s.size(), 0), 0, static_cast<int>(i)};
    for (std::size_t q = 1, k = 0; q < s.size(); ++q) {
      while (k > 0 && s[q] != s[k]) k = p.failure[k - 1];
      if (s[q] == s[k]) ++k;
      p.failure[q] = static_cast<std::uint32_t>(k);
    }
    patterns_.push_back(std::move(p));
  }
}

StopMatcher::Step StopMatcher::push(std::string_view piece) {
  Step step;
  if (stopped_) return step;
  const std::size_t first_new = held_.size();
  held_.append(piece);
  for (std::size_t j = first_new; j < held_.size(); ++j) {
    const char c = held_[j];
    const Pattern* done = nullptr;
    for (Pattern& p : patterns_) {
      std::uint32_t k = p.matched;
      while (k > 0 && p.text[k] != c) k = p.failure[k - 1];
      if (p.text[k] == c) ++k;
      p.matched = k;
      if (k == p.text.size() && (done == nullptr || p.text.size() > done->text.size())) done = &p;
    }
    if (done != nullptr) {
      stopped_ = true;
      step.stopped = true;
      step.stop_index = done->index;
      step.emit = held_.substr(0, j + 1 - done->text.size());
      held_.clear();
      return step;
    }
  }
  // Stop strings are valid UTF-8, so a held tail that is a prefix of one starts on a character boundary.
  std::size_t keep = 0;
  for (const Pattern& p : patterns_) keep = std::max<std::size_t>(keep, p.matched);
  step.emit = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return step;
}

std::string StopMatcher::flush() {
  std::string rest;
  if (!stopped_) rest.swap(held_);
  held_.clear();
  return rest;
}

}  // namespace day0
