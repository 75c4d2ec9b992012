// A Jinja interpreter for the subset real chat templates use: loops (loop.*), conditionals, set,
// namespace(), macros, filters, tests, string/list/dict methods, raise_exception, slicing, in/not in,
// inline if, whitespace control ({%- -%}) and trim_blocks/lstrip_blocks as transformers configures them.
// Output matches @huggingface/jinja (the reference used by transformers.js) byte for byte.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace day0::jinja {

class Template {
 public:
  // Parses once. A construct outside the subset fails here with "line N: unsupported <construct>".
  static Result<Template> parse(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context` as the global variables. Runtime errors (raise_exception, undefined
  // method, type errors) name the template line.
  Result<std::string> render(const nlohmann::json& context) const;

  struct Program;

 private:
  explicit Template(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace day0::jinja
