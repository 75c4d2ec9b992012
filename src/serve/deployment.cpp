// Deployment: tokenizer, chat template, model and engine, in the order each needs the previous.
#include "serve/deployment.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace day0 {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
}

}  // namespace

std::vector<std::int32_t> eos_token_ids(const std::string& dir, const Tokenizer& tokenizer) {
  std::vector<std::int32_t> ids;
  const nlohmann::json config = read_json(std::filesystem::path(dir) / "config.json");
  if (config.is_object() && config.contains("eos_token_id")) {
    const nlohmann::json& e = config["eos_token_id"];
    if (e.is_number_integer()) ids.push_back(e.get<std::int32_t>());
    if (e.is_array())
      for (const auto& v : e)
        if (v.is_number_integer()) ids.push_back(v.get<std::int32_t>());
  }
  if (!ids.empty()) return ids;
  const nlohmann::json tc = read_json(std::filesystem::path(dir) / "tokenizer_config.json");
  if (tc.is_object() && tc.contains("eos_token")) {
    const nlohmann::json& e = tc["eos_token"];
    std::string text;
    if (e.is_string()) text = e.get<std::string>();
    if (e.is_object() && e.contains("content") && e["content"].is_string()) text = e["content"].get<std::string>();
    if (auto id = tokenizer.token_to_id(text)) ids.push_back(*id);
  }
  return ids;
}

Deployment::~Deployment() = default;

Result<std::unique_ptr<Deployment>> Deployment::open(const DeploymentOptions& o) {
  std::unique_ptr<Deployment> d(new Deployment());
  const std::string tokenizer_path = o.dir + "/tokenizer.json";
  if (!std::filesystem::exists(tokenizer_path))
    return make_error(o.dir + ": no tokenizer.json: the server needs the model's tokenizer");
  D0_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_file(tokenizer_path));
  d->tokenizer_.emplace(std::move(tokenizer));
  if (!o.chat_template_file.empty()) {
    D0_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::from_file(o.chat_template_file, o.dir));
    d->chat_template_.emplace(std::move(t));
  } else if (!o.chat_template_source.empty()) {
    D0_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::from_source(o.chat_template_source));
    d->chat_template_.emplace(std::move(t));
  } else {
    D0_ASSIGN_OR_RETURN(d->chat_template_, ChatTemplate::from_dir(o.dir));
  }

  D0_ASSIGN_OR_RETURN(d->model_, load_model(o.dir, o.load));
  EngineConfig ec = o.engine;
  if (ec.eos_token_ids.empty()) ec.eos_token_ids = eos_token_ids(o.dir, *d->tokenizer_);
  D0_ASSIGN_OR_RETURN(d->engine_, Engine::create(*d->model_.executor, ec));

  const Executor& ex = *d->model_.executor;
  ServedModel& s = d->served_;
  s.protocol.model_names = o.served_model_names;
  if (s.protocol.model_names.empty()) {
    const std::string name = std::filesystem::path(o.dir).lexically_normal().filename().string();
    s.protocol.model_names = {name.empty() ? "default" : name};
  }
  s.protocol.max_model_len = static_cast<std::int32_t>(ex.max_tokens());
  s.protocol.vocab_size = d->model_.spec.vocab_size;
  s.engine = d->engine_.get();
  s.tokenizer = &*d->tokenizer_;
  s.chat_template = d->chat_template_ ? &*d->chat_template_ : nullptr;
  s.eos_token_ids = ec.eos_token_ids;
  s.kv_pool_tokens = static_cast<std::int64_t>(ex.n_blocks()) * ex.block_size();
  return d;
}

ServedModel Deployment::served() const { return served_; }

}  // namespace day0
