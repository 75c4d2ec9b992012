// day0 with a tokenizer: `tokenize` (encode, decode, stream, chat) on a directory holding only tokenizer
// files, and `run` / `inspect` taking text prompts and chat messages on the bundled model.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util/run_day0.h"
#include "test_util/temp_dir.h"

namespace day0 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_util::run_day0;

const std::string kModel = std::string(D0_TEST_DATA) + "/../../models/pycoder-tiny";
const std::string kGreedy = std::string(D0_TEST_DATA) + "/pycoder_tiny_reference/greedy.json";

json first_reference_prompt() {
  std::ifstream in(kGreedy);
  return json::parse(in)["prompts"][0];
}

// A directory with only the tokenizer files (no config, no weights), plus a small chat template.
class TokenizerOnlyDir : public testing_util::TempDir {
 public:
  TokenizerOnlyDir() {
    fs::copy_file(kModel + "/tokenizer.json", file("tokenizer.json"));
    std::ifstream in(kModel + "/tokenizer_config.json");
    json config = json::parse(in);
    config["chat_template"] =
        "{% for m in messages %}<|endoftext|>{{ m['role'] }}\n{{ m['content'] | trim }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|endoftext|>assistant\n{% endif %}";
    std::ofstream(file("tokenizer_config.json")) << config.dump();
  }
};

TEST(Day0Tokenize, text_on_stdin_encodes_to_the_reference_tokenizers_ids_and_decodes_back) {
  const json ref = first_reference_prompt();
  TokenizerOnlyDir dir;
  const auto enc = run_day0({"tokenize", dir.str()}, ref["prompt"].get<std::string>());
  ASSERT_EQ(enc.exit_code, 0) << enc.what;
  EXPECT_EQ(json::parse(enc.out), ref["prompt_ids"]);
  const auto dec = run_day0({"tokenize", dir.str(), "--decode"}, ref["prompt_ids"].dump());
  ASSERT_EQ(dec.exit_code, 0) << dec.what;
  EXPECT_EQ(dec.out, ref["prompt"].get<std::string>());
}

TEST(Day0Tokenize, streamed_pieces_join_to_the_full_decode_and_jsonl_answers_each_line) {
  const json ref = first_reference_prompt();
  TokenizerOnlyDir dir;
  const std::string lines = ref["prompt_ids"].dump() + "\n" + ref["greedy_ids"].dump() + "\n[999999]\n";
  const auto p = run_day0({"tokenize", dir.str(), "--decode", "--stream", "--jsonl"}, lines);
  ASSERT_EQ(p.exit_code, 0) << p.what;
  std::istringstream out(p.out);
  std::string line;
  std::vector<json> rows;
  while (std::getline(out, line)) rows.push_back(json::parse(line));
  ASSERT_EQ(rows.size(), 3u) << p.out;
  std::string joined;
  for (const auto& piece : rows[1]) joined += piece.get<std::string>();
  EXPECT_EQ(joined, ref["continuation_text"].get<std::string>());
  EXPECT_TRUE(rows[2].contains("error")) << "an id outside the vocabulary is that line's error";
}

TEST(Day0Tokenize, chat_request_renders_with_the_template_and_bad_requests_are_one_line_errors) {
  TokenizerOnlyDir dir;
  const json request = {{"messages", {{{"role", "user"}, {"content", " hi "}}}}, {"add_generation_prompt", true}};
  const auto p = run_day0({"tokenize", dir.str(), "--chat"}, request.dump());
  ASSERT_EQ(p.exit_code, 0) << p.what;
  EXPECT_EQ(p.out, "<|endoftext|>user\nhi\n<|endoftext|>assistant\n");
  const auto bad = run_day0({"tokenize", dir.str(), "--chat"}, "[1, 2]");
  EXPECT_EQ(bad.exit_code, 1) << bad.what;
  EXPECT_EQ(bad.err.rfind("error: ", 0), 0u) << bad.what;
  const auto no_template = run_day0({"tokenize", kModel, "--chat"}, request.dump());
  EXPECT_NE(no_template.err.find("no chat template"), std::string::npos) << no_template.what;
}

TEST(Day0Tokenize, invalid_utf8_input_is_a_clear_error) {
  TokenizerOnlyDir dir;
  const auto p = run_day0({"tokenize", dir.str()}, std::string("ab\xff", 3));
  EXPECT_EQ(p.exit_code, 1) << p.what;
  EXPECT_NE(p.err.find("UTF-8"), std::string::npos) << p.what;
}

TEST(Day0RunText, a_text_prompt_generates_the_reference_continuation_as_text) {
  const json ref = first_reference_prompt();
  const auto p = run_day0({"run", kModel, "--prompt", ref["prompt"].get<std::string>(), "--max-tokens", "48"});
  ASSERT_EQ(p.exit_code, 0) << p.what;
  EXPECT_NE(p.out.find("generated:  " + ref["continuation_text"].get<std::string>() + "\n"), std::string::npos)
      << p.out;
}

TEST(Day0RunText, chat_messages_are_rendered_tokenized_and_run_and_inspect_shows_them) {
  TokenizerOnlyDir dir;  // the bundled model plus a chat template
  for (const auto& e : fs::directory_iterator(kModel))
    if (!fs::exists(dir.file(e.path().filename().string()))) fs::copy_file(e.path(), dir.file(e.path().filename().string()));
  const std::string chat = R"({"messages": [{"role": "user", "content": "def add(a, b):"}]})";
  const auto run = run_day0({"run", dir.str(), "--chat", chat, "--max-tokens", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.what;
  EXPECT_NE(run.out.find("prompt:     <|endoftext|>user\ndef add(a, b):\n<|endoftext|>assistant\n"), std::string::npos)
      << run.out;
  const auto inspect = run_day0({"inspect", dir.str(), "--chat", chat});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.what;
  EXPECT_NE(inspect.out.find("chat template yes"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("rendered      <|endoftext|>user"), std::string::npos) << inspect.out;
  const auto text = run_day0({"inspect", kModel, "--prompt", "import os"});
  EXPECT_NE(text.out.find("prompt        "), std::string::npos) << text.out;
  const auto no_tok = run_day0({"run", std::string(D0_TEST_DATA) + "/gpt_oss_tiny", "--prompt", "hi"});
  EXPECT_NE(no_tok.err.find("no tokenizer.json"), std::string::npos) << no_tok.what;
}

}  // namespace
}  // namespace day0
