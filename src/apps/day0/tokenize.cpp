// day0 tokenize DIR: text -> ids, ids -> text (--decode), chat request -> prompt (--chat); --jsonl does
// one JSON value per line (for batch comparison with reference tokenizers); --bench FILE times encode.
// Needs only tokenizer.json (+ tokenizer_config.json for --chat) in DIR, no weights.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/day0/commands.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace day0::app {
namespace {

// Insertion-ordered: templates print tool schemas with tojson, whose key order must match the request's.
using json = nlohmann::ordered_json;

Result<std::vector<std::int32_t>> ids_from_json(const json& j) {
  if (!j.is_array()) return make_error("expected a JSON array of token ids");
  std::vector<std::int32_t> ids;
  for (const auto& v : j) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT32_MAX)
      return make_error("token id " + v.dump() + " is not a non-negative 32-bit integer");
    ids.push_back(v.get<std::int32_t>());
  }
  return ids;
}

// One request in, one JSON value out (the error object for a request that fails).
json handle(const TokenizeOptions& o, const Tokenizer& tok, const ChatTemplate* chat, const json& in) {
  auto error = [](const std::string& m) { return json{{"error", m}}; };
  if (o.chat) {
    if (!in.is_object()) return error("expected a JSON object {\"messages\": [...], ...}");
    auto text = chat->render_ordered(in);
    return text.ok() ? json(*text) : error(text.error().message);
  }
  if (o.decode) {
    auto ids = ids_from_json(in);
    if (!ids.ok()) return error(ids.error().message);
    if (!o.stream) {
      auto text = tok.decode(*ids, o.skip_special);
      return text.ok() ? json(*text) : error(text.error().message);
    }
    IncrementalDetokenizer detok(tok, o.skip_special);
    json pieces = json::array();
    for (std::int32_t id : *ids) {
      auto piece = detok.push(id);
      if (!piece.ok()) return error(piece.error().message);
      pieces.push_back(*piece);
    }
    auto tail = detok.finish();
    if (!tail.ok()) return error(tail.error().message);
    pieces.push_back(*tail);
    return pieces;
  }
  if (!in.is_string()) return error("expected a JSON string");
  auto ids = tok.encode(in.get_ref<const std::string&>(), !o.no_special);
  return ids.ok() ? json(*ids) : error(ids.error().message);
}

int bench(const TokenizeOptions& o, const Tokenizer& tok) {
  std::ifstream in(o.bench_file, std::ios::binary);
  if (!in) return fail(o.bench_file + ": cannot open");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  using clock = std::chrono::steady_clock;
  auto warm = tok.encode(text, false);  // warm-up: caches, page faults
  if (!warm.ok()) return fail(o.bench_file + ": " + warm.error().message);
  std::size_t bytes = 0, tokens = 0;
  const auto t0 = clock::now();
  double seconds = 0;
  while (seconds < 2.0) {
    auto ids = tok.encode(text, false);
    bytes += text.size();
    tokens += ids->size();
    seconds = std::chrono::duration<double>(clock::now() - t0).count();
  }
  std::printf("%s\n", json{{"bytes", bytes}, {"tokens", tokens}, {"seconds", seconds},
                           {"mb_per_s", bytes / seconds / 1e6}, {"threads", 1}}.dump().c_str());
  return 0;
}

}  // namespace

int tokenize(const TokenizeOptions& o) {
  if (o.chat && o.decode) return fail("--chat and --decode are exclusive");
  if (o.stream && !o.decode) return fail("--stream needs --decode");
  auto tok = Tokenizer::from_file(o.dir + "/tokenizer.json");
  if (!tok.ok()) return fail(tok.error().message);
  if (!o.bench_file.empty()) return bench(o, *tok);
  std::optional<ChatTemplate> chat;
  if (o.chat) {
    auto t = ChatTemplate::from_dir(o.dir);
    if (!t.ok()) return fail(t.error().message);
    if (!t->has_value()) return fail(o.dir + ": no chat template (tokenizer_config.json chat_template or chat_template.jinja)");
    chat = std::move(**t);
  }
  const ChatTemplate* chat_ptr = chat ? &*chat : nullptr;
  if (o.jsonl) {
    std::string line;
    while (std::getline(std::cin, line)) {
      json in = json::parse(line, nullptr, /*allow_exceptions=*/false);
      const json out = in.is_discarded() ? json{{"error", "line is not valid JSON"}} : handle(o, *tok, chat_ptr, in);
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    }
    return 0;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (!o.decode && !o.chat) {
    auto ids = tok->encode(input, !o.no_special);
    if (!ids.ok()) return fail(ids.error().message);
    std::cout << json(*ids).dump() << '\n';
    return 0;
  }
  json in = json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return fail(std::string("standard input is not valid JSON (expected ") +
                                     (o.chat ? "a chat request object)" : "an array of token ids)"));
  const json out = handle(o, *tok, chat_ptr, in);
  if (out.is_object() && out.contains("error")) return fail(out["error"].get<std::string>());
  if (out.is_array()) {  // --stream without --jsonl: the pieces, one JSON string per line
    for (const auto& piece : out) std::cout << piece.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
    return 0;
  }
  std::cout << out.get<std::string>();
  return 0;
}

}  // namespace day0::app
