// day0 run: greedy generation from token ids, with timing.
#include <cstdio>
#include <sstream>

#include "apps/day0/commands.h"
#include "model/greedy.h"
#include "model/load.h"

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

int run(const RunOptions& o) {
  auto ids = parse_ids(o.prompt_ids);
  if (!ids.ok()) return fail(ids.error().message);
  auto model = load_model(o.dir, o.backend, static_cast<std::int64_t>(ids->size()) + o.max_tokens);
  if (!model.ok()) return fail(model.error().message);
  for (auto id : *ids)
    if (id >= model->spec.vocab_size)
      return fail("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(model->spec.vocab_size));
  auto out = greedy_generate(*model->executor, *ids, o.max_tokens);
  if (!out.ok()) return fail(out.error().message);
  std::printf("prompt ids: ");
  for (size_t i = 0; i < ids->size(); ++i) std::printf("%s%d", i ? "," : "", (*ids)[i]);
  std::printf("\ngenerated:  ");
  for (size_t i = 0; i < out->tokens.size(); ++i) std::printf("%s%d", i ? "," : "", out->tokens[i]);
  const double decode_steps = out->tokens.size() > 1 ? double(out->tokens.size() - 1) : 0;
  std::printf("\nload %.3f s (%.1f MB); prefill %zu tokens in %.3f s (%.1f tok/s); decode %zu tokens in %.3f s "
              "(%.1f tok/s); backend %s\n",
              model->load_seconds, model->weight_bytes / 1e6, ids->size(), out->prefill_seconds,
              ids->size() / out->prefill_seconds, out->tokens.size(), out->decode_seconds,
              decode_steps > 0 ? decode_steps / out->decode_seconds : 0.0, o.backend.c_str());
  return 0;
}

}  // namespace day0::app
