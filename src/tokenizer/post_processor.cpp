// Post-processors (the reference's processors/*) for single sequences: ByteLevel (offsets only, so a
// no-op on ids), TemplateProcessing, RobertaProcessing/BertProcessing and Sequence.
#include <nlohmann/json.hpp>

#include "tokenizer/json_util.h"
#include "tokenizer/tokenizer_impl.h"

namespace day0::tok {
namespace {

class NoOp final : public PostProcessor {
 public:
  void process(std::vector<std::int32_t>&, bool) const override {}
};

// The template for one sequence: special-token id lists around the sequence itself (an empty
// optional marks where the sequence goes).
class Template final : public PostProcessor {
 public:
  explicit Template(std::vector<std::optional<std::vector<std::int32_t>>> pieces) : pieces_(std::move(pieces)) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<std::int32_t> out;
    for (const auto& piece : pieces_) {
      if (piece)
        out.insert(out.end(), piece->begin(), piece->end());
      else
        out.insert(out.end(), ids.begin(), ids.end());
    }
    ids = std::move(out);
  }

 private:
  std::vector<std::optional<std::vector<std::int32_t>>> pieces_;
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

Result<std::vector<std::int32_t>> id_list(const json& j, const std::string& here) {
  if (!j.is_array()) return make_error(here + ": special token ids must be an array of ids");
  std::vector<std::int32_t> ids;
  for (const json& id : j) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > INT32_MAX) {
      return make_error(here + ": special token ids must be non-negative integers");
    }
    ids.push_back(static_cast<std::int32_t>(id.get<std::uint64_t>()));
  }
  return ids;
}

Result<std::unique_ptr<PostProcessor>> template_from_json(const json& j, const std::string& here) {
  const auto single = j.find("single");
  if (single == j.end() || !single->is_array()) return field_error(here, "single", "an array of template pieces");
  const auto specials = j.find("special_tokens");
  if (specials != j.end() && !specials->is_object()) return field_error(here, "special_tokens", "an object");
  std::vector<std::optional<std::vector<std::int32_t>>> pieces;
  for (const json& piece : *single) {
    if (!piece.is_object() || piece.size() != 1) {
      return make_error(here + ": template pieces must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    const std::string kind = piece.begin().key();
    const json& body = piece.begin().value();
    if (!body.is_object()) return make_error(here + ": template piece " + kind + " must be an object");
    D0_ASSIGN_OR_RETURN(const std::string id, get_string(body, "id", here + " " + kind));
    if (kind == "Sequence") {
      if (id != "A") return make_error(here + ": the single template can only use sequence A, not " + id);
      pieces.emplace_back(std::nullopt);
    } else if (kind == "SpecialToken") {
      const auto it = specials == j.end() ? j.end() : specials->find(id);
      if (specials == j.end() || it == specials->end() || !it->is_object() || !it->contains("ids")) {
        return make_error(here + ": special token \"" + id + "\" is missing from special_tokens");
      }
      D0_ASSIGN_OR_RETURN(auto ids, id_list((*it)["ids"], here));
      pieces.emplace_back(std::move(ids));
    } else {
      return make_error(here + ": unknown template piece " + kind);
    }
  }
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

// RobertaProcessing / BertProcessing: [cls] sequence [sep], each given as [token, id].
Result<std::unique_ptr<PostProcessor>> cls_sep_from_json(const json& j, const std::string& here) {
  std::vector<std::optional<std::vector<std::int32_t>>> pieces;
  for (const char* key : {"cls", "sep"}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_unsigned() ||
        (*it)[1].get<std::uint64_t>() > INT32_MAX) {
      return field_error(here, key, "[token, id]");
    }
    if (std::string(key) == "sep") pieces.emplace_back(std::nullopt);
    pieces.emplace_back(std::vector<std::int32_t>{static_cast<std::int32_t>((*it)[1].get<std::uint64_t>())});
  }
  return std::unique_ptr<PostProcessor>(new Template(std::move(pieces)));
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> post_processor_from_json(const json& j, const std::string& file) {
  if (j.is_null()) return std::unique_ptr<PostProcessor>();
  const std::string where = file + ": post_processor";
  D0_ASSIGN_OR_RETURN(const std::string type, type_of(j, where));
  const std::string here = where + " " + type;
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new NoOp());
  if (type == "TemplateProcessing") return template_from_json(j, here);
  if (type == "RobertaProcessing" || type == "BertProcessing") return cls_sep_from_json(j, here);
  if (type == "Sequence") {
    const auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return field_error(here, "processors", "an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const json& step : *it) {
      if (step.is_null()) return make_error(here + ": null step");
      D0_ASSIGN_OR_RETURN(auto p, post_processor_from_json(step, file));
      steps.push_back(std::move(p));
    }
    return std::unique_ptr<PostProcessor>(new Sequence(std::move(steps)));
  }
  return make_error(where + " type \"" + type + "\" is not supported");
}

}  // namespace day0::tok
