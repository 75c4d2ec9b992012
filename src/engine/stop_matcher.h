// Stop strings over streamed text: fed decoded pieces, it releases what can no longer be part of a stop
// string, holds back a tail that could still start one, and on a match returns the text before it
// (OpenAI leaves the stop string out of the output).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace day0 {

class StopMatcher {
 public:
  struct Step {
    std::string emit;      // text to send now
    bool stopped = false;  // a stop string matched: `emit` ends right before it; feed nothing more
    int stop_index = -1;   // which stop string (index into the constructor's list)
  };

  // Empty stop strings are ignored.
  explicit StopMatcher(const std::vector<std::string>& stops);

  // The first stop string to be completed wins (the longest if several complete on the same byte), so
  // the outcome does not depend on where the pieces were cut. After a stop, pieces are ignored.
  Step push(std::string_view piece);
  // End of generation without a stop (length, EOS): the held-back tail, which is output after all.
  std::string flush();

  bool stopped() const { return stopped_; }
  std::size_t held_bytes() const { return held_.size(); }

 private:
  // One stop string with its Knuth-Morris-Pratt failure table and the length of its longest prefix
  // that the text seen so far ends with: O(1) amortised per byte and stop string.
  struct Pattern {
    std::string text;
    std::vector<std::uint32_t> failure;
    std::uint32_t matched = 0;
    int index = 0;
  };

  std::vector<Pattern> patterns_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace day0
