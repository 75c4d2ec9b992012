// The synthetic checkpoint's tokenizer.json: our loader takes it, it has exactly the asked ids, every id decodes
// (what a server needs from random weights), text round-trips, and a seed fixes its bytes.
#include "tokenizer/synthetic_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_util/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace day0 {
namespace {

using testing_util::TempDir;

Tokenizer load(const TempDir& dir, const std::string& json) {
  const std::string path = dir.file("tokenizer.json");
  std::ofstream(path) << json;
  auto t = Tokenizer::from_file(path);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return std::move(*t);
}

TEST(SyntheticTokenizer, has_every_id_of_the_vocabulary_and_decodes_each) {
  TempDir dir;
  const std::vector<std::int32_t> special = {999, 500, 999};  // a repeat counts once
  auto json = synthetic_tokenizer_json(1000, special, 7);
  ASSERT_TRUE(json.ok()) << json.error().message;
  const Tokenizer t = load(dir, *json);
  EXPECT_EQ(t.vocab_size(), 1000);
  for (std::int32_t id = 0; id < 1000; ++id) {
    const std::int32_t one[] = {id};
    auto text = t.decode_bytes(one);
    ASSERT_TRUE(text.ok()) << "id " << id << ": " << text.error().message;
    EXPECT_EQ(t.is_special(id), id == 500 || id == 999) << id;
    if (id >= 256 && !t.is_special(id)) {  // merges: a word of lowercase letters, maybe after a space
      ASSERT_GE(text->size(), 2u) << id;
      for (std::size_t i = 0; i < text->size(); ++i)
        EXPECT_TRUE(((*text)[i] >= 'a' && (*text)[i] <= 'z') || (i == 0 && (*text)[i] == ' ')) << id << " " << *text;
    }
  }
  EXPECT_EQ(t.token_to_id("<|synthetic_special_999|>"), 999);
}

TEST(SyntheticTokenizer, text_round_trips_through_word_pieces) {
  TempDir dir;
  const Tokenizer t = load(dir, *synthetic_tokenizer_json(4096, {}, 1));
  const std::string text = "def parse args(argv):\n    return the quick brown fox, 42 times!";
  auto ids = t.encode(text);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_LT(ids->size(), text.size());  // merges apply: fewer ids than bytes
  auto back = t.decode(*ids);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST(SyntheticTokenizer, a_seed_fixes_the_bytes) {
  const auto a = synthetic_tokenizer_json(2000, std::vector<std::int32_t>{3}, 11);
  const auto b = synthetic_tokenizer_json(2000, std::vector<std::int32_t>{3}, 11);
  const auto c = synthetic_tokenizer_json(2000, std::vector<std::int32_t>{3}, 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(SyntheticTokenizer, gpt_oss_sized_vocabulary_loads) {
  TempDir dir;
  auto json = synthetic_tokenizer_json(201088, std::vector<std::int32_t>{199999, 200002}, 0);
  ASSERT_TRUE(json.ok());
  const Tokenizer t = load(dir, *json);
  EXPECT_EQ(t.vocab_size(), 201088);
  const std::int32_t last[] = {201087, 200002, 199998};
  EXPECT_TRUE(t.decode(last).ok());
}

TEST(SyntheticTokenizer, refuses_what_cannot_hold_the_bytes_or_a_special_id_outside) {
  auto small = synthetic_tokenizer_json(256, std::vector<std::int32_t>{0}, 0);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("256 byte tokens"), std::string::npos) << small.error().message;
  auto outside = synthetic_tokenizer_json(1000, std::vector<std::int32_t>{1000}, 0);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("special id 1000 outside"), std::string::npos) << outside.error().message;
  EXPECT_TRUE(synthetic_tokenizer_json(256, {}, 0).ok());  // the bytes alone
}

}  // namespace
}  // namespace day0
