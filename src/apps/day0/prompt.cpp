// Prompt options -> token ids.
#include "apps/day0/prompt.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"

namespace day0::app {

static Result<std::vector<std::int32_t>> parse_ids(const std::string& text) {
  std::vector<std::int32_t> ids;
  std::string s = text;
  for (char& ch : s)
    if (ch == ',') ch = ' ';
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    char* end = nullptr;
    const long long v = std::strtoll(tok.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX) return make_error("--prompt-ids: \"" + tok + "\" is not a token id");
    ids.push_back(static_cast<std::int32_t>(v));
  }
  if (ids.empty()) return make_error("--prompt-ids: no token ids given");
  return ids;
}

Result<std::optional<Tokenizer>> load_tokenizer(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  if (!std::filesystem::exists(path)) return std::optional<Tokenizer>();
  D0_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::from_file(path));
  return std::optional<Tokenizer>(std::move(tok));
}

// Insertion-ordered: templates print tool schemas with tojson in the request's key order.
static Result<nlohmann::ordered_json> read_chat_request(const std::string& arg) {
  std::string text = arg;
  if (!arg.empty() && arg[0] == '@') {
    std::ifstream in(arg.substr(1), std::ios::binary);
    if (!in) return make_error("--chat: cannot open " + arg.substr(1));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error("--chat: expected a JSON object {\"messages\": [...]} (or @FILE holding one)");
  return j;
}

Result<Prompt> resolve_prompt(const std::string& dir, const PromptOptions& o, const Tokenizer* tokenizer) {
  const int given = !o.ids.empty() + !o.text.empty() + !o.chat.empty();
  if (given != 1) return make_error("give exactly one of --prompt-ids, --prompt, --chat");
  Prompt p;
  if (!o.ids.empty()) {
    D0_ASSIGN_OR_RETURN(p.ids, parse_ids(o.ids));
    return p;
  }
  if (!tokenizer) return make_error(dir + ": no tokenizer.json, so only --prompt-ids can be used");
  if (!o.text.empty()) {
    D0_ASSIGN_OR_RETURN(p.ids, tokenizer->encode(o.text));
    return p;
  }
  D0_ASSIGN_OR_RETURN(nlohmann::ordered_json request, read_chat_request(o.chat));
  D0_ASSIGN_OR_RETURN(std::optional<ChatTemplate> tmpl, ChatTemplate::from_dir(dir));
  if (!tmpl) return make_error(dir + ": no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
  if (!request.contains("add_generation_prompt")) request["add_generation_prompt"] = true;
  D0_ASSIGN_OR_RETURN(p.rendered, tmpl->render_ordered(request));
  // The rendered template already holds its special tokens (as transformers' apply_chat_template).
  D0_ASSIGN_OR_RETURN(p.ids, tokenizer->encode(p.rendered, /*add_special_tokens=*/false));
  return p;
}

}  // namespace day0::app
