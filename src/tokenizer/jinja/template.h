// A Jinja interpreter for the subset real chat templates use: loops (loop.*), conditionals, set,
// namespace(), macros, filters, tests, string/list/dict methods, raise_exception, slicing, in/not in,
// inline if, whitespace control ({%- -%}) and trim_blocks/lstrip_blocks as transformers configures them.
// Output matches @huggingface/jinja (the reference used by transformers.js) byte for byte.
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace day0::jinja {

struct RenderOptions {
  // The clock strftime_now() reads (local time when unset); set it for deterministic output.
  std::optional<std::tm> now;
  // Resource bounds for untrusted templates: the size of the output and of every string built, and the
  // evaluation work (one unit per node evaluated, per list element copied, per 64 bytes of string built).
  std::size_t max_output_bytes = std::size_t{16} << 20;
  std::size_t max_work = 100'000'000;
};

// Known departures from @huggingface/jinja 0.5.11, all outside what real chat templates do: a filter or
// test name it implements for no type fails at parse time (it fails only when evaluated); a lone UTF-16
// surrogate (indexing into an emoji) becomes U+FFFD; a printed function shows "[Function]" (JS prints its
// source); tojson(sort_keys=true) approximates localeCompare; `[]|first` inside a list or dict literal
// fails; strftime_now's %b/%B are English; ranges, lists, strings, nesting, output and work are bounded.
class Template {
 public:
  // Parses once. A construct outside the subset fails here with "line N: unsupported <construct>".
  static Result<Template> parse(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context` as the global variables. Runtime errors (raise_exception, undefined
  // method, type errors) name the template line.
  Result<std::string> render(const nlohmann::json& context, const RenderOptions& options = {}) const;
  // The same with the caller's key order kept (nlohmann::json sorts object keys; tojson of tool schemas
  // and iteration over dicts print them in insertion order, as JavaScript does).
  Result<std::string> render_ordered(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  struct Program;

 private:
  explicit Template(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace day0::jinja
