// A model directory's chat template (tokenizer_config.json "chat_template", string or named list, or
// chat_template.jinja) and its rendering of {"messages", "tools", "add_generation_prompt", ...}.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "tokenizer/jinja/template.h"

namespace day0 {

class ChatTemplate {
 public:
  // nullopt if the directory has no chat template; an error if it has a broken one.
  static Result<std::optional<ChatTemplate>> from_dir(const std::string& dir);
  // The template in file `path` with the special tokens of model directory `dir` (a server's --chat-template).
  static Result<ChatTemplate> from_file(const std::string& path, const std::string& dir);
  static Result<ChatTemplate> from_source(std::string source, nlohmann::json special_tokens = nlohmann::json::object());

  // request: {"messages": [...], "tools": [...]?, "add_generation_prompt": bool?, other kwargs...}.
  // The template sees those (tools and documents default to none, add_generation_prompt to false)
  // plus bos_token/eos_token/unk_token/sep_token/pad_token/cls_token/mask_token from
  // tokenizer_config.json; request keys win.
  Result<std::string> render(const nlohmann::json& request, const jinja::RenderOptions& options = {}) const;
  // The same keeping the request's key order (nlohmann::json sorts keys, which changes what tojson prints
  // for tool schemas); parse requests with nlohmann::ordered_json to match transformers.js byte for byte.
  Result<std::string> render_ordered(const nlohmann::ordered_json& request,
                                     const jinja::RenderOptions& options = {}) const;
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, jinja::Template tmpl, nlohmann::json special_tokens);
  std::string source_;
  std::shared_ptr<jinja::Template> template_;
  nlohmann::json special_tokens_;
};

}  // namespace day0
