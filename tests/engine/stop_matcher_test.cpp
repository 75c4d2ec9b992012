// StopMatcher: text is released as soon as it cannot begin a stop string, a stop found across piece
// boundaries truncates right before it, and the outcome does not depend on how the text was cut.
#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

#include <random>

namespace day0 {
namespace {

struct Outcome {
  std::string text;
  bool stopped = false;
  int stop_index = -1;
  bool operator==(const Outcome&) const = default;
};

Outcome feed(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  Outcome o;
  for (const std::string& p : pieces) {
    const auto step = m.push(p);
    o.text += step.emit;
    if (step.stopped) {
      o.stopped = true;
      o.stop_index = step.stop_index;
      return o;
    }
  }
  o.text += m.flush();
  return o;
}

TEST(StopMatcher, text_with_no_stop_prefix_is_released_at_once) {
  StopMatcher m({"###"});
  EXPECT_EQ(m.push("Hello").emit, "Hello");
  EXPECT_EQ(m.push(", world").emit, ", world");
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopMatcher, a_tail_that_could_start_a_stop_is_held_then_released_when_it_cannot) {
  StopMatcher m({"</end>"});
  auto s = m.push("abc</e");
  EXPECT_EQ(s.emit, "abc");
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(m.held_bytes(), 3u);
  s = m.push("x");  // "</ex" is no prefix of "</end>"
  EXPECT_EQ(s.emit, "</ex");
  EXPECT_EQ(m.held_bytes(), 0u);
}

TEST(StopMatcher, a_stop_across_piece_boundaries_truncates_before_it_and_drops_the_rest) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("one S").emit, "one ");
  EXPECT_EQ(m.push("T").emit, "");
  const auto s = m.push("OP and more");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.emit, "");  // nothing of the stop string is emitted
  EXPECT_EQ(s.stop_index, 0);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("ignored").emit, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, a_stop_inside_one_piece_keeps_the_text_before_it) {
  const Outcome o = feed({"\n\n"}, {"first line\n\nsecond"});
  EXPECT_EQ(o, (Outcome{"first line", true, 0}));
}

TEST(StopMatcher, the_first_stop_string_to_complete_wins_and_its_index_is_reported) {
  EXPECT_EQ(feed({"abcd", "bc"}, {"xabcd"}), (Outcome{"xa", true, 1}));
  EXPECT_EQ(feed({"bc", "abc"}, {"xabc"}), (Outcome{"x", true, 1}));  // same end: the longer
}

TEST(StopMatcher, overlapping_partial_matches_are_tracked_like_kmp) {
  // "aab" inside "aaab": a naive restart after the mismatch would miss it.
  EXPECT_EQ(feed({"aab"}, {"a", "a", "a", "b", "c"}), (Outcome{"a", true, 0}));
  EXPECT_EQ(feed({"abab"}, {"aba", "bab"}), (Outcome{"", true, 0}));
}

TEST(StopMatcher, without_a_stop_flush_releases_the_held_tail) {
  EXPECT_EQ(feed({"END"}, {"the E", "N"}), (Outcome{"the EN", false, -1}));
  EXPECT_EQ(feed({}, {"a", "b"}), (Outcome{"ab", false, -1}));
  EXPECT_EQ(feed({""}, {"a", "b"}), (Outcome{"ab", false, -1}));  // an empty stop never matches
}

TEST(StopMatcher, multibyte_stop_strings_hold_back_whole_characters) {
  StopMatcher m({"é!"});  // c3 a9 21
  const auto s = m.push("caf\xc3\xa9");
  EXPECT_EQ(s.emit, "caf");
  EXPECT_EQ(m.held_bytes(), 2u);
  const auto t = m.push("!");
  EXPECT_TRUE(t.stopped);
  EXPECT_EQ(t.emit, "");
}

TEST(StopMatcher, the_result_is_the_same_for_every_way_of_cutting_the_text_into_pieces) {
  const std::string text = "The answer is <|end|> no, <|end|><|return|> and then something else";
  const std::vector<std::string> stops = {"<|return|>", "no, <|e", "zzz"};
  const Outcome whole = feed(stops, {text});
  EXPECT_EQ(whole, (Outcome{"The answer is <|end|> ", true, 1}));
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> pieces;
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t len = std::uniform_int_distribution<std::size_t>(0, 6)(rng);
      pieces.push_back(text.substr(i, len));
      i += len;
    }
    ASSERT_EQ(feed(stops, pieces), whole) << "trial " << trial;
  }
}

}  // namespace
}  // namespace day0
