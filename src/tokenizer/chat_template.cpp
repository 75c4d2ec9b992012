// ChatTemplate: finds a model directory's chat template (chat_template.jinja, else tokenizer_config.json
// "chat_template" as a string or a named list), collects its special tokens, and renders requests with the
// context transformers.js's apply_chat_template builds.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace day0 {
namespace {

namespace fs = std::filesystem;

// The special-token attributes transformers.js passes to the template (SPECIAL_TOKEN_ATTRIBUTES).
const char* const kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                      "pad_token", "cls_token", "mask_token"};

// apply_chat_template's own options, which do not reach the template.
const char* const kNotTemplateVariables[] = {"chat_template", "tokenize",      "padding",     "truncation",
                                             "max_length",    "return_tensor", "return_dict", "tokenizer_kwargs"};

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path.string() + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(path.string() + ": read error");
  return text;
}

// The chat_template entry: a string, or [{"name", "template"}, ...] (pick "default", else the first).
Result<std::optional<std::string>> template_from_config(const nlohmann::json& value, const std::string& where) {
  if (value.is_null()) return std::optional<std::string>();
  if (value.is_string()) return std::optional<std::string>(value.get<std::string>());
  if (!value.is_array())
    return make_error(where + ": \"chat_template\" must be a string or a list of {\"name\", \"template\"}");
  const nlohmann::json* chosen = nullptr;
  for (const auto& entry : value) {
    if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string())
      return make_error(where + ": each \"chat_template\" list entry needs a string \"template\"");
    if (!chosen) chosen = &entry;
    if (entry.contains("name") && entry["name"] == "default") {
      chosen = &entry;
      break;
    }
  }
  if (!chosen) return std::optional<std::string>();
  return std::optional<std::string>((*chosen)["template"].get<std::string>());
}

template <class J>
Result<std::string> render_request(const jinja::Template& tmpl, const nlohmann::json& special_tokens, const J& request,
                                   const jinja::RenderOptions& options) {
  if (!request.is_object()) return make_error("chat request must be a JSON object");
  auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array())
    return make_error("chat request needs \"messages\": a list of {\"role\", \"content\"} objects");
  // {messages, add_generation_prompt, tools, documents, ...special_tokens, ...kwargs}, as transformers.js.
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = *messages;
  const auto get_or = [&](const char* key, nlohmann::ordered_json fallback) {
    auto it = request.find(key);
    return it == request.end() ? fallback : nlohmann::ordered_json(*it);
  };
  context["add_generation_prompt"] = get_or("add_generation_prompt", false);
  context["tools"] = get_or("tools", nullptr);
  context["documents"] = get_or("documents", nullptr);
  for (auto it = special_tokens.begin(); it != special_tokens.end(); ++it) context[it.key()] = it.value();
  for (auto it = request.begin(); it != request.end(); ++it) {
    const std::string& key = it.key();
    if (key == "messages" || key == "add_generation_prompt" || key == "tools" || key == "documents") continue;
    if (std::find(std::begin(kNotTemplateVariables), std::end(kNotTemplateVariables), key) !=
        std::end(kNotTemplateVariables))
      continue;
    context[key] = nlohmann::ordered_json(it.value());
  }
  return tmpl.render_ordered(context, options);
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, jinja::Template tmpl, nlohmann::json special_tokens)
    : source_(std::move(source)),
      template_(std::make_shared<jinja::Template>(std::move(tmpl))),
      special_tokens_(std::move(special_tokens)) {}

Result<ChatTemplate> ChatTemplate::from_source(std::string source, nlohmann::json special_tokens) {
  if (!special_tokens.is_object()) return make_error("chat template special tokens must be a JSON object");
  D0_ASSIGN_OR_RETURN(jinja::Template tmpl, jinja::Template::parse(source));
  return ChatTemplate(std::move(source), std::move(tmpl), std::move(special_tokens));
}

namespace {

// tokenizer_config.json of `dir` (an empty object if there is none).
Result<nlohmann::json> read_tokenizer_config(const fs::path& root) {
  const fs::path config_path = root / "tokenizer_config.json";
  std::error_code ec;
  if (!fs::exists(config_path, ec)) return nlohmann::json::object();
  D0_ASSIGN_OR_RETURN(std::string text, read_file(config_path));
  nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return make_error(config_path.string() + ": not a JSON object");
  return config;
}

nlohmann::json special_tokens_of(const nlohmann::json& config) {
  nlohmann::json special = nlohmann::json::object();
  for (const char* key : kSpecialTokens) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    std::string value;
    if (it->is_string())
      value = it->get<std::string>();
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      value = (*it)["content"].get<std::string>();
    if (!value.empty()) special[key] = value;  // transformers.js skips empty and null tokens
  }
  return special;
}

}  // namespace

Result<std::optional<ChatTemplate>> ChatTemplate::from_dir(const std::string& dir) {
  const fs::path root(dir);
  const fs::path config_path = root / "tokenizer_config.json";
  const fs::path jinja_path = root / "chat_template.jinja";
  D0_ASSIGN_OR_RETURN(nlohmann::json config, read_tokenizer_config(root));
  std::error_code ec;
  std::optional<std::string> source;
  std::string where;
  if (fs::exists(jinja_path, ec)) {  // takes precedence, as in transformers
    D0_ASSIGN_OR_RETURN(std::string text, read_file(jinja_path));
    source = std::move(text);
    where = jinja_path.string();
  } else if (config.contains("chat_template")) {
    where = config_path.string();
    D0_ASSIGN_OR_RETURN(source, template_from_config(config["chat_template"], where));
  }
  if (!source) return std::optional<ChatTemplate>();
  auto tmpl = from_source(std::move(*source), special_tokens_of(config));
  if (!tmpl.ok()) return make_error(where + ": chat template: " + tmpl.error().message);
  return std::optional<ChatTemplate>(std::move(tmpl).value());
}

Result<ChatTemplate> ChatTemplate::from_file(const std::string& path, const std::string& dir) {
  D0_ASSIGN_OR_RETURN(std::string source, read_file(path));
  D0_ASSIGN_OR_RETURN(nlohmann::json config, read_tokenizer_config(fs::path(dir)));
  auto tmpl = from_source(std::move(source), special_tokens_of(config));
  if (!tmpl.ok()) return make_error(path + ": chat template: " + tmpl.error().message);
  return std::move(tmpl).value();
}

Result<std::string> ChatTemplate::render(const nlohmann::json& request, const jinja::RenderOptions& options) const {
  return render_request(*template_, special_tokens_, request, options);
}

Result<std::string> ChatTemplate::render_ordered(const nlohmann::ordered_json& request,
                                                 const jinja::RenderOptions& options) const {
  return render_request(*template_, special_tokens_, request, options);
}

}  // namespace day0
