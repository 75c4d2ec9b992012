// Deployment: one model directory made servable: its tokenizer and chat template, the weights loaded with a paged
// KV pool, and the engine over them. served() is what Server::attach takes. `day0 serve` and the server tests
// build it the same way.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/load.h"
#include "serve/server.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace day0 {

struct DeploymentOptions {
  std::string dir;
  LoadOptions load;    // backend, context (max_tokens), step size, KV pool, progress
  EngineConfig engine;  // eos_token_ids: from the model directory when empty
  std::vector<std::string> served_model_names;  // default: the directory's name
  std::string chat_template_file;    // replaces (or supplies) the model's chat template
  std::string chat_template_source;  // the same as text (tests); the file wins
};

class Deployment {
 public:
  static Result<std::unique_ptr<Deployment>> open(const DeploymentOptions& options);
  ~Deployment();

  ServedModel served() const;
  Engine& engine() { return *engine_; }
  const LoadedModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  Deployment() = default;
  std::optional<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  LoadedModel model_;
  std::unique_ptr<Engine> engine_;  // declared after the model: destroyed (its thread joined) first
  ServedModel served_;
};

// The end-of-sequence ids of a model directory: config.json's eos_token_id (a number or a list), else
// tokenizer_config.json's eos_token looked up in the vocabulary.
std::vector<std::int32_t> eos_token_ids(const std::string& dir, const Tokenizer& tokenizer);

}  // namespace day0
