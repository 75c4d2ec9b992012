// Loading tokenizer.json: a streaming (SAX) parse that builds a DOM for everything except the big
// model.vocab / model.merges, which go straight into flat vectors (a 200k-token vocabulary loads in
// a fraction of a second); then the model, added tokens and pipeline components are built and checked.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"

namespace day0::tok {
namespace {

class Loader final : public nlohmann::json_sax<json> {
 public:
  json root;
  std::vector<std::pair<std::string, std::int64_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  bool have_vocab = false, have_merges = false;
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool b) override { return value(json(b)); }
  bool number_integer(number_integer_t n) override {
    if (mode_ == Mode::Vocab) return vocab_id(n);
    return value(json(n));
  }
  bool number_unsigned(number_unsigned_t n) override {
    if (mode_ == Mode::Vocab)
      return n > INT64_MAX ? fail("model.vocab: id out of range") : vocab_id(static_cast<std::int64_t>(n));
    return value(json(n));
  }
  bool number_float(number_float_t d, const string_t&) override {
    if (mode_ != Mode::None) return fail(mode_ == Mode::Vocab ? "model.vocab: ids must be integers" : kBadMerge);
    return value(json(d));
  }
  bool string(string_t& s) override {
    if (mode_ == Mode::Vocab) return fail("model.vocab: ids must be integers");
    if (mode_ == Mode::Merges) return merge_string(s);
    return value(json(std::move(s)));
  }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override {
    if (mode_ != Mode::None) return fail(mode_ == Mode::Vocab ? "model.vocab: ids must be integers" : kBadMerge);
    if (std::exchange(capture_, Mode::None) == Mode::Vocab) {
      mode_ = Mode::Vocab;
      return true;
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      vocab_key_ = std::move(k);
      return true;
    }
    if (stack_.size() == 2 && in_model_.back()) {
      if (k == "vocab") capture_ = Mode::Vocab;
      if (k == "merges") capture_ = Mode::Merges;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::None;
      have_vocab = true;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab) return fail("model.vocab: ids must be integers");
    if (mode_ == Mode::Merges) {
      if (merge_depth_ != 1) return fail(kBadMerge);
      merge_depth_ = 2;
      parts_.clear();
      return true;
    }
    if (std::exchange(capture_, Mode::None) == Mode::Merges) {
      mode_ = Mode::Merges;
      merge_depth_ = 1;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::Merges) {
      if (merge_depth_ == 2) {
        if (parts_.size() != 2) return fail(kBadMerge);
        merges.emplace_back(std::move(parts_[0]), std::move(parts_[1]));
        merge_depth_ = 1;
        return true;
      }
      mode_ = Mode::None;
      have_merges = true;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    if (error.empty()) error = std::string("invalid JSON: ") + ex.what();
    return false;
  }

 private:
  enum class Mode { None, Vocab, Merges };
  static constexpr const char* kBadMerge = "model.merges: entries must be \"a b\" strings or [\"a\", \"b\"] pairs";

  bool fail(const std::string& message) {
    if (error.empty()) error = message;
    return false;
  }
  bool vocab_id(std::int64_t id) {
    vocab.emplace_back(std::move(vocab_key_), id);
    return true;
  }
  bool merge_string(std::string& s) {
    if (merge_depth_ == 2) {
      parts_.push_back(std::move(s));
      return true;
    }
    if (s.rfind("#version", 0) == 0) return true;  // skipped, as the reference does
    const std::size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return fail("model.merges[" + std::to_string(merges.size()) + "]: \"" + s +
                  "\" is not two tokens separated by one space");
    }
    merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }
  json* insert(json v) {
    capture_ = Mode::None;  // model.vocab / model.merges that are not an object / array go to the DOM
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(json v) {
    insert(std::move(v));
    return true;
  }
  bool open(json container) {
    const bool is_model = stack_.size() == 1 && container.is_object() && key_ == "model" && stack_.back()->is_object();
    stack_.push_back(insert(std::move(container)));
    in_model_.push_back(is_model);
    return true;
  }
  bool close() {
    stack_.pop_back();
    in_model_.pop_back();
    return true;
  }

  std::vector<json*> stack_;
  std::vector<bool> in_model_;
  std::string key_, vocab_key_;
  Mode mode_ = Mode::None, capture_ = Mode::None;
  int merge_depth_ = 0;
  std::vector<std::string> parts_;
};

Result<std::optional<std::string>> optional_string(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return field_error(where, key, "a string or null");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::unique_ptr<Bpe>> model_from_json(const json& model, Loader& loader, const std::string& file) {
  const std::string where = file + ": model";
  if (!model.is_object()) return make_error(where + " must be an object");
  const auto type = model.find("type");
  if (type != model.end() && (!type->is_string() || type->get<std::string>() != "BPE")) {
    return make_error(where + " type \"" + (type->is_string() ? type->get<std::string>() : type->dump()) +
                      "\" is not supported (only BPE)");
  }
  const std::string here = where + " BPE";
  if (!loader.have_vocab) return field_error(here, "vocab", "an object of token -> id");
  if (!loader.have_merges) return field_error(here, "merges", "an array");
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return make_error(here + ": dropout is not supported (it makes encoding random)");
  }
  Bpe::Config config;
  D0_ASSIGN_OR_RETURN(config.unk_token, optional_string(model, "unk_token", here));
  D0_ASSIGN_OR_RETURN(auto prefix, optional_string(model, "continuing_subword_prefix", here));
  D0_ASSIGN_OR_RETURN(auto suffix, optional_string(model, "end_of_word_suffix", here));
  config.continuing_subword_prefix = prefix.value_or("");
  config.end_of_word_suffix = suffix.value_or("");
  D0_ASSIGN_OR_RETURN(config.fuse_unk, get_bool(model, "fuse_unk", false, here));
  D0_ASSIGN_OR_RETURN(config.byte_fallback, get_bool(model, "byte_fallback", false, here));
  D0_ASSIGN_OR_RETURN(config.ignore_merges, get_bool(model, "ignore_merges", false, here));
  auto bpe = Bpe::build(std::move(config), loader.vocab, loader.merges);
  if (!bpe.ok()) return make_error(file + ": " + bpe.error().message);
  return bpe;
}

Result<std::vector<AddedToken>> added_tokens_from_json(const json& root, const std::string& file) {
  std::vector<AddedToken> tokens;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  if (!it->is_array()) return make_error(file + ": added_tokens must be an array");
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string where = file + ": added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) return make_error(where + " must be an object");
    AddedToken token;
    D0_ASSIGN_OR_RETURN(token.content, get_string(t, "content", where));
    const auto id = t.find("id");
    if (id == t.end() || !id->is_number_unsigned() || id->get<std::uint64_t>() >= (1u << 24)) {
      return field_error(where, "id", "an integer in [0, 2^24)");
    }
    token.id = static_cast<std::int32_t>(id->get<std::uint64_t>());
    D0_ASSIGN_OR_RETURN(token.special, get_bool(t, "special", false, where));
    D0_ASSIGN_OR_RETURN(token.single_word, get_bool(t, "single_word", false, where));
    D0_ASSIGN_OR_RETURN(token.lstrip, get_bool(t, "lstrip", false, where));
    D0_ASSIGN_OR_RETURN(token.rstrip, get_bool(t, "rstrip", false, where));
    D0_ASSIGN_OR_RETURN(token.normalized, get_bool(t, "normalized", !token.special, where));
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

Result<std::unique_ptr<Tokenizer::Impl>> load_tokenizer_json(const std::string& path) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(path + ": cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return make_error(path + ": read failed");
    text = std::move(ss).str();
  }
  Loader loader;
  const bool parsed = nlohmann::json::sax_parse(text, &loader);
  if (!parsed) return make_error(path + ": " + (loader.error.empty() ? "invalid JSON" : loader.error));
  text.clear();
  text.shrink_to_fit();
  const json& root = loader.root;
  if (!root.is_object()) return make_error(path + ": the top level must be an object");
  for (const char* key : {"truncation", "padding"}) {
    const auto it = root.find(key);
    if (it != root.end() && !it->is_null()) return make_error(path + ": " + key + " is not supported");
  }

  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->path = path;
  const json null_json;
  const auto get = [&](const char* key) -> const json& {
    const auto it = root.find(key);
    return it == root.end() ? null_json : *it;
  };
  if (get("model").is_null()) return make_error(path + ": model is missing");
  D0_ASSIGN_OR_RETURN(impl->model, model_from_json(get("model"), loader, path));
  D0_ASSIGN_OR_RETURN(impl->normalizer, normalizer_from_json(get("normalizer"), path));
  D0_ASSIGN_OR_RETURN(impl->pre_tokenizer, pre_tokenizer_from_json(get("pre_tokenizer"), path));
  D0_ASSIGN_OR_RETURN(impl->post_processor, post_processor_from_json(get("post_processor"), path));
  D0_ASSIGN_OR_RETURN(impl->decoder, decoder_from_json(get("decoder"), path));
  D0_ASSIGN_OR_RETURN(const std::vector<AddedToken> added, added_tokens_from_json(root, path));
  {
    const Status s = impl->added.build(added, impl->normalizer.get(), *impl->model);
    if (!s.ok()) return make_error(path + ": added_tokens: " + s.error().message);
  }

  // The id table decode uses: the model's tokens, overridden by added tokens' contents.
  std::int32_t max_id = impl->model->max_id();
  for (const auto& [id, t] : impl->added.by_id()) max_id = std::max(max_id, id);
  impl->id_to_token.assign(static_cast<std::size_t>(max_id + 1), std::nullopt);
  impl->special.assign(static_cast<std::size_t>(max_id + 1), 0);
  for (std::int32_t id = 0; id <= impl->model->max_id(); ++id) impl->id_to_token[id] = impl->model->id_to_token(id);
  for (const auto& [id, t] : impl->added.by_id()) {
    impl->id_to_token[static_cast<std::size_t>(id)] = std::string_view(impl->added.decode_form(id));
  }
  // The reference skips special tokens by string: any id whose decoded token is a special token's
  // content (so a normalized special token whose normalized form differs is not skipped).
  for (std::size_t id = 0; id < impl->id_to_token.size(); ++id) {
    if (impl->id_to_token[id] && impl->added.is_special_content(*impl->id_to_token[id])) impl->special[id] = 1;
  }
  impl->concatenative = impl->decoder && (impl->decoder->per_token() || impl->decoder->concatenates());
  return impl;
}

}  // namespace day0::tok
