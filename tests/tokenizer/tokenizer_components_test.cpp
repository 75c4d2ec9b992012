// Tokenizer components on tiny hand-written tokenizer.json files: split behaviors, added-token rules,
// merges and ignore_merges, normalizers, Metaspace, ByteLevel, Digits, TemplateProcessing, ByteFallback,
// streaming, and load errors. Expected ids were checked against huggingface/tokenizers 0.23.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "test_util/temp_dir.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace day0 {
namespace {

using Ids = std::vector<std::int32_t>;

// Vocabulary with a few merges; merge order (rank) is a-, -b, --, ab.
constexpr const char* kCharsModel =
    R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "-": 2, "a-": 3, "-b": 4, "--": 5, "ab": 6, " ": 7, "c": 8},
        "merges": [["a", "-"], ["-", "b"], ["-", "-"], ["a", "b"]]})";

// Writes {"version": "1.0", "model": model, <parts>} as tokenizer.json and loads it.
Result<Tokenizer> load_json(const testing_util::TempDir& dir, const std::string& model, const std::string& parts = "") {
  const std::string path = dir.file("tokenizer.json");
  std::ofstream(path) << R"({"version": "1.0", "model": )" << model << (parts.empty() ? "" : ", ") << parts << "}";
  return Tokenizer::from_file(path);
}

// Declares `const Tokenizer& var` loaded from load_json(dir, ...), or fails the test.
#define LOAD(var, ...)                                            \
  auto var##_result = load_json(dir, __VA_ARGS__);                \
  ASSERT_TRUE(var##_result.ok()) << var##_result.error().message; \
  const Tokenizer& var = *var##_result

Ids encode(const Tokenizer& tok, std::string_view text, bool add_special = true) {
  auto r = tok.encode(text, add_special);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? *r : Ids{};
}

std::string split_pre(const char* behavior, bool invert) {
  return std::string(R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "-+"}, "behavior": ")") + behavior +
         R"(", "invert": )" + (invert ? "true" : "false") + "}";
}

TEST(TokenizerComponentsTest, MergesLowestRankFirst) {
  testing_util::TempDir dir;
  LOAD(tok, kCharsModel);
  EXPECT_EQ(encode(tok, "a-b--ab"), (Ids{3, 1, 5, 6}));  // a- first (so no -b), then --, then ab
  EXPECT_EQ(encode(tok, "x"), Ids{});                    // no unk_token: unknown characters vanish
}

TEST(TokenizerComponentsTest, SplitBehaviors) {
  testing_util::TempDir dir;
  struct Expect {
    const char* behavior;
    bool invert;
    Ids a, b;  // ids of "a-b--ab" and "-a-"
  };
  const Expect cases[] = {
      {"Removed", false, {0, 1, 6}, {0}},
      {"Removed", true, {2, 5}, {2, 2}},
      {"Isolated", false, {0, 2, 1, 5, 6}, {2, 0, 2}},
      {"Isolated", true, {0, 2, 1, 5, 6}, {2, 0, 2}},
      {"MergedWithPrevious", false, {3, 1, 5, 6}, {2, 3}},
      {"MergedWithPrevious", true, {0, 4, 5, 6}, {2, 0, 2}},
      {"MergedWithNext", false, {0, 4, 5, 6}, {2, 0, 2}},
      {"MergedWithNext", true, {3, 1, 5, 6}, {2, 3}},
      {"Contiguous", false, {0, 2, 1, 5, 6}, {2, 0, 2}},
      {"Contiguous", true, {0, 2, 1, 5, 6}, {2, 0, 2}},
  };
  for (const Expect& e : cases) {
    LOAD(tok, kCharsModel, split_pre(e.behavior, e.invert));
    EXPECT_EQ(encode(tok, "a-b--ab"), e.a) << e.behavior << " invert=" << e.invert;
    EXPECT_EQ(encode(tok, "-a-"), e.b) << e.behavior << " invert=" << e.invert;
  }
  // A String pattern is literal ("b-" here, not a regex).
  LOAD(lit, kCharsModel, R"("pre_tokenizer": {"type": "Split", "pattern": {"String": "b-"}, "behavior": "Isolated"})");
  EXPECT_EQ(encode(lit, "ab-ab-b"), (Ids{0, 1, 2, 0, 1, 2, 1}));
}

// Split regexes are Oniguruma's: \s is White_Space (U+0085 and U+3000, not U+180E or U+FEFF), \w
// takes Alphabetic symbols such as Ⓐ but not U+200D, and \h is a hex digit. ("ab" merges when an
// unknown character between a and b is dropped inside one piece.)
TEST(TokenizerComponentsTest, OnigurumaCharacterClasses) {
  testing_util::TempDir dir;
  LOAD(space, kCharsModel,
       R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed"})");
  EXPECT_EQ(encode(space, "a\u180Eb"), Ids{6});
  EXPECT_EQ(encode(space, "a\uFEFFb"), Ids{6});
  EXPECT_EQ(encode(space, "a\u0085b"), (Ids{0, 1}));
  EXPECT_EQ(encode(space, "a\u3000b"), (Ids{0, 1}));
  LOAD(word, kCharsModel,
       R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Removed", "invert": true})");
  EXPECT_EQ(encode(word, "a\u200Db-a"), (Ids{0, 1, 0}));
  EXPECT_EQ(encode(word, "a\u24B6b-a"), (Ids{6, 0}));
  LOAD(hex, kCharsModel, R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\h+"}, "behavior": "Removed"})");
  EXPECT_EQ(encode(hex, "ab-c"), Ids{2});
}

TEST(TokenizerComponentsTest, AddedTokens) {
  testing_util::TempDir dir;
  // <m> swallows whitespace on both sides; <w> only matches as a whole word; "AB" is matched on
  // lowercased text; "c" is already in the vocabulary, so it keeps id 8 (not the 13 written here).
  LOAD(tok, kCharsModel, R"(
    "normalizer": {"type": "Lowercase"},
    "added_tokens": [
      {"id": 9, "content": "<m>", "lstrip": true, "rstrip": true, "normalized": false},
      {"id": 10, "content": "<w>", "single_word": true, "normalized": false},
      {"id": 11, "content": "<s>", "special": true},
      {"id": 12, "content": "AB", "normalized": true},
      {"id": 13, "content": "c", "rstrip": true, "normalized": false}])");
  EXPECT_EQ(encode(tok, "a <m> b"), (Ids{0, 9, 1}));
  EXPECT_EQ(encode(tok, "a  <m>  b"), (Ids{0, 9, 1}));
  EXPECT_EQ(encode(tok, "<m><m>"), (Ids{9, 9}));
  EXPECT_EQ(encode(tok, "a<w>b"), Ids{6});  // inside a word: not the token ("<", ">", "w" are unknown)
  EXPECT_EQ(encode(tok, "a <w> b"), (Ids{0, 7, 10, 7, 1}));
  EXPECT_EQ(encode(tok, "-<w>-"), (Ids{2, 10, 2}));
  EXPECT_EQ(encode(tok, "<s>ab"), (Ids{11, 12}));
  EXPECT_EQ(encode(tok, "AB-Ab"), (Ids{12, 2, 12}));
  EXPECT_EQ(encode(tok, "c  c"), (Ids{8, 8}));
  EXPECT_EQ(encode(tok, "A<S>"), Ids{0});  // special tokens match the raw text only
  EXPECT_EQ(tok.token_to_id("<w>"), 10);
  EXPECT_EQ(tok.token_to_id("c"), 8);
  EXPECT_EQ(tok.id_to_token(12), "ab");  // a normalized token decodes as its normalized form
  EXPECT_TRUE(tok.is_special(11));
  EXPECT_EQ(*tok.decode(Ids{11, 12, 10}), "<s> ab <w>");  // no decoder: tokens joined by spaces
  EXPECT_EQ(*tok.decode(Ids{11, 12, 10}, true), "ab <w>");
}

TEST(TokenizerComponentsTest, IgnoreMerges) {
  testing_util::TempDir dir;
  const std::string vocab =
      R"("vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "bc": 5}, "merges": [["b", "c"], ["a", "b"]])";
  LOAD(merging, R"({"type": "BPE", )" + vocab + "}");
  EXPECT_EQ(encode(merging, "abc"), (Ids{0, 5}));
  LOAD(ignoring, R"({"type": "BPE", "ignore_merges": true, )" + vocab + "}",
       R"("pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed"})");
  EXPECT_EQ(encode(ignoring, "abc abcabc"), (Ids{4, 0, 5, 0, 5}));  // a whole pre-token in the vocabulary wins
}

TEST(TokenizerComponentsTest, Normalizers) {
  testing_util::TempDir dir;
  LOAD(tok,
       R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "é": 3, "_": 4, "i": 5, "̇": 6, "x": 7}, "merges": []})",
       R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"},
          {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "x"}, {"type": "Prepend", "prepend": "_"}]})");
  EXPECT_EQ(encode(tok, "Abc"), (Ids{4, 0, 1, 2}));
  EXPECT_EQ(encode(tok, "E\u0301"), (Ids{4, 3}));    // NFC, then lowercase
  EXPECT_EQ(encode(tok, "\u0130"), (Ids{4, 5, 6}));  // İ lowercases to i + combining dot
  EXPECT_EQ(encode(tok, "a12b3"), (Ids{4, 0, 7, 1, 7}));
  EXPECT_EQ(encode(tok, ""), Ids{});  // Prepend leaves empty text empty
}

TEST(TokenizerComponentsTest, Metaspace) {
  testing_util::TempDir dir;
  const std::string model =
      R"({"type": "BPE", "vocab": {"▁": 0, "h": 1, "i": 2, "t": 3, "e": 4, "r": 5, "▁h": 6, "▁t": 7, "hi": 8, "▁hi": 9},
          "merges": [["▁", "h"], ["▁", "t"], ["h", "i"], ["▁h", "i"]]})";
  struct Expect {
    const char* scheme;
    Ids hi_there, after_special;
  };
  for (const Expect& e :
       {Expect{"always", {9, 7, 1, 4, 5, 4}, {10, 9, 9}}, Expect{"first", {9, 7, 1, 4, 5, 4}, {10, 8, 9}},
        Expect{"never", {8, 7, 1, 4, 5, 4}, {10, 8, 9}}}) {
    const std::string meta =
        std::string(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")") + e.scheme + R"("})";
    LOAD(tok, model,
         R"("added_tokens": [{"id": 10, "content": "<s>", "special": true}],
        "pre_tokenizer": )" +
             meta + R"(, "decoder": )" + meta);
    EXPECT_EQ(encode(tok, "hi there"), e.hi_there) << e.scheme;
    EXPECT_EQ(encode(tok, "<s>hi hi"), e.after_special) << e.scheme;  // "first": only at the start of the text
    EXPECT_EQ(encode(tok, " hi"), Ids{9}) << e.scheme;
    EXPECT_FALSE(tok.decode_is_concatenative());
    if (std::string(e.scheme) == "first") {
      EXPECT_EQ(*tok.decode(Ids{9, 7, 1, 4, 5, 4}), "hi there");
      EXPECT_EQ(*tok.decode(Ids{0, 0, 9}), "  hi");  // the first token loses every ▁ (as the reference)
      EXPECT_EQ(*tok.decode(Ids{7, 0, 10}, true), "t ");
    }
  }
}

// GPT-2 byte-level alphabet: id = byte value, plus merges "Ġa" (256) and "12" (257).
std::string byte_level_model() {
  std::string vocab;
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : next++;
    std::string ch = cp < 0x80
                         ? std::string(1, static_cast<char>(cp))
                         : std::string{static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    if (ch == "\"" || ch == "\\") ch = "\\" + ch;
    vocab += "\"" + ch + "\": " + std::to_string(b) + ", ";
  }
  return R"({"type": "BPE", "vocab": {)" + vocab + R"("Ġa": 256, "12": 257}, "merges": [["Ġ", "a"], ["1", "2"]]})";
}

TEST(TokenizerComponentsTest, ByteLevelAndDigits) {
  testing_util::TempDir dir;
  const std::string decoder = R"("decoder": {"type": "ByteLevel"})";
  LOAD(gpt2, byte_level_model(),
       R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}, )" + decoder);
  EXPECT_EQ(encode(gpt2, "a a123"), (Ids{256, 256, 257, 51}));  // prefix space; GPT-2 regex splits letters from digits
  EXPECT_EQ(encode(gpt2, "\xF0\x9F\x98\x80\xC3\xA9"), (Ids{32, 240, 159, 152, 128, 195, 169}));
  EXPECT_EQ(encode(gpt2, "a\u00A0a"), (Ids{256, 194, 160, 97}));
  EXPECT_TRUE(gpt2.decode_is_concatenative());
  EXPECT_EQ(*gpt2.decode(Ids{256, 256, 257, 51}), " a a123");
  LOAD(digits, byte_level_model(),
       R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}, )" +
           decoder);
  EXPECT_EQ(encode(digits, "a a123"), (Ids{97, 256, 49, 50, 51}));  // digits isolated: "12" cannot merge
}

TEST(TokenizerComponentsTest, StreamingHoldsBackSplitCharacters) {
  testing_util::TempDir dir;
  LOAD(tok, byte_level_model(),
       R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
      "decoder": {"type": "ByteLevel"})");
  const Ids ids = encode(tok, "\xF0\x9F\x98\x80\xC3\xA9!");  // 😀é! -> one token per byte
  ASSERT_EQ(ids.size(), 7u);
  IncrementalDetokenizer stream(tok);
  std::vector<std::string> pieces;
  for (const std::int32_t id : ids) pieces.push_back(*stream.push(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80", "", "\xC3\xA9", "!"}));
  EXPECT_EQ(*stream.finish(), "");
  // An incomplete character at the end decodes as the reference does (one U+FFFD).
  IncrementalDetokenizer cut(tok);
  std::string joined;
  for (std::size_t i = 0; i < 3; ++i) joined += *cut.push(ids[i]);
  joined += *cut.finish();
  EXPECT_EQ(joined, "\xEF\xBF\xBD");
  EXPECT_EQ(joined, *tok.decode(std::vector<std::int32_t>(ids.begin(), ids.begin() + 3)));
}

TEST(TokenizerComponentsTest, TemplateProcessing) {
  testing_util::TempDir dir;
  LOAD(tok, R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "<s>": 2, "</s>": 3}, "merges": []})", R"(
    "added_tokens": [{"id": 2, "content": "<s>", "special": true}, {"id": 3, "content": "</s>", "special": true}],
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [2], "tokens": ["<s>"]}, "</s>": {"id": "</s>", "ids": [3], "tokens": ["</s>"]}}})");
  EXPECT_EQ(encode(tok, "ab"), (Ids{2, 0, 1, 3}));
  EXPECT_EQ(encode(tok, "ab", /*add_special=*/false), (Ids{0, 1}));
  EXPECT_EQ(encode(tok, ""), (Ids{2, 3}));
  EXPECT_EQ(encode(tok, "a</s>"), (Ids{2, 0, 3, 3}));
  EXPECT_EQ(*tok.decode(Ids{2, 0, 1, 3}, true), "a b");
}

TEST(TokenizerComponentsTest, ByteFallback) {
  testing_util::TempDir dir;
  // Llama-2 style: sentencepiece spaces as ▁, unknown characters as <0xNN> tokens (else <unk>).
  LOAD(tok, R"({"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
      "vocab": {"<unk>": 0, "<0xE4>": 1, "<0xB8>": 2, "<0xAD>": 3, "▁": 4, "a": 5, "▁a": 6}, "merges": [["▁", "a"]]})",
       R"(
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})");
  EXPECT_EQ(encode(tok, "a\u4E2D"), (Ids{6, 1, 2, 3}));           // 中 = E4 B8 AD
  EXPECT_EQ(encode(tok, "a \u6587\u6587 a"), (Ids{6, 4, 0, 6}));  // 文 has no byte tokens: one fused <unk>
  EXPECT_EQ(*tok.decode(Ids{6, 1, 2, 3}), "a\u4E2D");
  EXPECT_EQ(*tok.decode(Ids{1, 2}), "\uFFFD\uFFFD");  // an incomplete character: one U+FFFD per byte
  EXPECT_EQ(*tok.decode(Ids{1, 2, 5, 3}), "\uFFFD\uFFFDa\uFFFD");
  EXPECT_EQ(*tok.decode(Ids{6, 4, 0, 6}), "a <unk> a");
  EXPECT_EQ(*tok.decode(Ids{6, 4, 0, 6}, true), "a  a");
  // Streaming still joins to decode(): a trailing U+FFFD is held until the character completes.
  IncrementalDetokenizer stream(tok);
  std::string joined;
  for (const std::int32_t id : Ids{6, 1, 2, 3, 6}) {
    const std::string piece = *stream.push(id);
    EXPECT_FALSE(utf8_first_invalid(piece).has_value());
    joined += piece;
  }
  joined += *stream.finish();
  EXPECT_EQ(joined, *tok.decode(Ids{6, 1, 2, 3, 6}));
}

TEST(TokenizerComponentsTest, LoadErrorsNameTheFileAndThePart) {
  testing_util::TempDir dir;
  const auto error_of = [&](const std::string& model, const std::string& parts) {
    auto r = load_json(dir, model, parts);
    return r.ok() ? std::string("(loaded)") : r.error().message;
  };
  EXPECT_NE(error_of(kCharsModel, R"("pre_tokenizer": {"type": "BertPreTokenizer"})")
                .find("tokenizer.json: pre_tokenizer type \"BertPreTokenizer\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(kCharsModel, R"("normalizer": {"type": "Precompiled", "precompiled_charsmap": ""})")
                .find("tokenizer.json: normalizer type \"Precompiled\" is not supported"),
            std::string::npos);
  EXPECT_NE(
      error_of(kCharsModel, R"("decoder": {"type": "WordPiece"})").find("decoder type \"WordPiece\" is not supported"),
      std::string::npos);
  EXPECT_NE(error_of(kCharsModel, R"("post_processor": {"type": "Nope"})").find("post_processor type \"Nope\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "WordPiece", "vocab": {}})", "").find("model type \"WordPiece\" is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "b"]]})", "")
                .find("token \"b\" is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a b c"]})", "").find("model.merges[0]"),
            std::string::npos);
  EXPECT_NE(
      error_of(kCharsModel, R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(["}, "behavior": "Isolated"})")
          .find("invalid regex"),
      std::string::npos);
  EXPECT_NE(
      error_of(kCharsModel, R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})")
          .find("behavior"),
      std::string::npos);
  EXPECT_NE(error_of("{", "").find("invalid JSON"), std::string::npos);
  auto missing = Tokenizer::from_file(dir.file("absent.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("absent.json: cannot open"), std::string::npos);
}

TEST(TokenizerComponentsTest, EncodeAndDecodeErrors) {
  testing_util::TempDir dir;
  LOAD(tok, kCharsModel);
  auto bad = tok.encode("ab\xC3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("invalid UTF-8 at byte offset 2"), std::string::npos) << bad.error().message;
  auto out_of_range = tok.decode(Ids{0, 42});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.error().message.find("id 42"), std::string::npos);
  EXPECT_FALSE(tok.decode(Ids{-1}).ok());
}

}  // namespace
}  // namespace day0
