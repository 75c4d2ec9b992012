// Turning the prompt options shared by run and inspect (--prompt-ids, --prompt, --chat) into token ids.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace day0::app {

struct PromptOptions {
  std::string ids;   // "1,2,3"
  std::string text;  // encoded with the model's tokenizer
  std::string chat;  // a chat request JSON object, or @FILE holding one
  bool given() const { return !ids.empty() || !text.empty() || !chat.empty(); }
};

// The tokenizer in DIR, if DIR has tokenizer.json (an error if it is broken).
Result<std::optional<Tokenizer>> load_tokenizer(const std::string& dir);

struct Prompt {
  std::vector<std::int32_t> ids;
  std::string rendered;  // the chat template's output, for --chat
};
// Exactly one of the options must be set; text and chat need a tokenizer.
Result<Prompt> resolve_prompt(const std::string& dir, const PromptOptions& o, const Tokenizer* tokenizer);

}  // namespace day0::app
