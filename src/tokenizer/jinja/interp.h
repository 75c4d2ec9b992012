// The interpreter's internal interface: scopes (Env), the evaluator with its resource accounting, and
// the pieces split into their own files (expressions.cpp, filters.cpp, methods.cpp). Errors are thrown
// as JinjaError and turned into Result at the Template boundary.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

namespace day0::jinja {

// A scope. Every scope implicitly holds the `namespace` function (as @huggingface/jinja's do).
struct Env {
  Env* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  bool pinned = false;  // captured by a call block's `caller`: must outlive the statement that made it

  Value* find_local(std::string_view name);
  void set(std::string name, Value value);
};

// {% break %} / {% continue %} unwinding to the nearest loop (through macro calls, as the reference).
struct BreakSignal {
  int line;
};
struct ContinueSignal {
  int line;
};

using Kwargs = std::vector<std::pair<std::string, Value>>;

constexpr int kMaxEvalDepth = 1500;  // nested evaluation (expressions, blocks, macro calls)
constexpr int kMaxMacroDepth = 100;

// Counts a nesting level; fails past `limit`.
struct DepthGuard {
  int& depth;
  DepthGuard(int& d, int limit, const char* what) : depth(d) {
    if (++depth > limit) {
      --depth;
      fail(std::string(what) + " nested more than " + std::to_string(limit) + " levels deep");
    }
  }
  ~DepthGuard() { --depth; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

class Interp {
 public:
  explicit Interp(const RenderOptions& options);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  const RenderOptions& options() const { return options_; }
  // A new scope, owned by the caller through ScopedEnv (pinned scopes are kept until rendering ends).
  std::unique_ptr<Env> new_env(Env* parent);
  void release(std::unique_ptr<Env> env);
  static void pin(Env* env);
  Value lookup(Env* env, std::string_view name) const;
  // A context or global variable; fails if already declared.
  void declare(Env* global, std::string name, Value value);

  Value eval(const Node& n, Env* env);
  void exec(const Node& n, Env* env, std::string& out);
  void exec_block(const NodeList& body, Env* env, std::string& out);
  // Positional arguments (with *spread) and keyword arguments (with **spread), in the reference's order.
  std::pair<Args, Kwargs> eval_args(const NodeList& args, Env* env);
  // Binds macro / caller parameters in `scope` (bindMacroArguments).
  void bind_params(const std::string& display, const Node& owner, Args args, Env* scope);

  // Resource accounting: work units, and the size of a string about to be built.
  void charge(std::size_t units);
  void check_size(std::size_t bytes);
  void append(std::string& out, std::string_view s);
  // Namespaces are mutable and may reference themselves; they are emptied when rendering ends.
  Value make_namespace(Kwargs entries);

  Value namespace_fn;

 private:
  void exec_for(const Node& n, Env* env, std::string& out);
  void exec_set(const Node& n, Env* env);
  Value call_block(const Node& n, Env* env);
  Value call_macro(const Node& n, Args& args, Env* caller);
  Value eval_binary(const Node& n, Env* env);
  Value eval_unary(const Node& n, Env* env);
  Value eval_member(const Node& n, Env* env);
  Value eval_slice(const Value& object, const Node& n, Env* env);
  void print(std::string& out, const Value& v);

  const RenderOptions& options_;
  std::vector<std::unique_ptr<Env>> pinned_envs_;
  std::vector<std::shared_ptr<DictData>> namespaces_;
  std::size_t work_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
};

// A scope for the duration of a statement or call.
class ScopedEnv {
 public:
  ScopedEnv(Interp& in, Env* parent) : in_(in), env_(in.new_env(parent)) {}
  ~ScopedEnv() { in_.release(std::move(env_)); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  Env* get() const { return env_.get(); }

 private:
  Interp& in_;
  std::unique_ptr<Env> env_;
};

// filters.cpp: `operand | filter` where `filter` is an Ident or a Call node.
Value apply_filter(Interp& in, const Value& operand, const Node& filter, Env* env);

// methods.cpp.
// obj.prop / obj[prop]: dict entries, list/string indexing, and the built-in methods.
Value get_member(Interp& in, const Value& object, const Value& property);
// `operand is name` (and the tests selectattr/rejectattr use, which may take a second argument).
bool apply_test(const std::string& name, const Value& operand, const Value* arg);
// Dict methods (get, items, keys, values, dictsort), for the filters that forward to them.
Value dict_method(Interp& in, const Value& dict, std::string_view name, Args& args, bool* found);
// Compares values for sort/dictsort (compareRuntimeValues).
int compare_values(const Value& a, const Value& b, bool case_sensitive);
// false/true/none/True/False/None, raise_exception, range, strftime_now, and the namespace function.
void setup_globals(Interp& in, Env* global);

}  // namespace day0::jinja
