// The statement half of the evaluator (as @huggingface/jinja's Interpreter in runtime.ts: scopes, output,
// loops with loop.*, set, macros and call blocks), its resource accounting, and the Template API with
// the limits that keep hostile templates from crashing or hanging. Expressions are in expressions.cpp.
#include <cmath>
#include <exception>
#include <new>

#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/js_string.h"
#include "tokenizer/utf8.h"

namespace day0::jinja {

struct Template::Program {
  NodeList body;
};

Value* Env::find_local(std::string_view name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

void Env::set(std::string name, Value value) {
  if (value.kind == Kind::Hole) value = make_undefined();  // a variable holding JS undefined reads as undefined
  if (Value* v = find_local(name)) {
    *v = std::move(value);
    return;
  }
  vars.emplace_back(std::move(name), std::move(value));
}

Interp::Interp(const RenderOptions& options) : options_(options) {}

Interp::~Interp() {
  for (auto& ns : namespaces_) ns->entries.clear();  // breaks reference cycles through namespaces
}

std::unique_ptr<Env> Interp::new_env(Env* parent) {
  charge(1);
  auto env = std::make_unique<Env>();
  env->parent = parent;
  return env;
}

void Interp::release(std::unique_ptr<Env> env) {
  if (env && env->pinned) pinned_envs_.push_back(std::move(env));
}

void Interp::pin(Env* env) {
  for (; env && !env->pinned; env = env->parent) env->pinned = true;
}

Value Interp::lookup(Env* env, std::string_view name) const {
  if (name == "namespace") {
    Value* v = env->find_local(name);
    return v ? *v : namespace_fn;
  }
  for (Env* e = env; e; e = e->parent)
    if (Value* v = e->find_local(name)) return *v;
  return make_undefined();
}

void Interp::declare(Env* global, std::string name, Value value) {
  if (name == "namespace" || global->find_local(name)) fail("Variable already declared: " + name);
  global->set(std::move(name), std::move(value));
}

void Interp::charge(std::size_t units) {
  work_ += units;
  if (work_ > options_.max_work)
    fail("rendering exceeded its budget of " + std::to_string(options_.max_work) + " evaluation steps");
}

void Interp::check_size(std::size_t bytes) {
  if (bytes > options_.max_output_bytes)
    fail("a string of " + std::to_string(bytes) + " bytes exceeds the limit of " +
         std::to_string(options_.max_output_bytes));
  charge(bytes / 64);
}

void Interp::append(std::string& out, std::string_view s) {
  if (out.size() + s.size() > options_.max_output_bytes)
    fail("output exceeds the limit of " + std::to_string(options_.max_output_bytes) + " bytes");
  charge(s.size() / 64);
  out.append(s);
}

Value Interp::make_namespace(Kwargs entries) {
  Value v = make_dict(std::move(entries));
  v.kind = Kind::Namespace;
  namespaces_.push_back(v.dict);
  return v;
}

void Interp::print(std::string& out, const Value& v) {
  if (v.kind != Kind::Null && v.kind != Kind::Undefined) append(out, display(v));
}

// ---- statements ----

void Interp::exec_block(const NodeList& body, Env* env, std::string& out) {
  for (const NodePtr& n : body) exec(*n, env, out);
}

void Interp::exec(const Node& n, Env* env, std::string& out) {
  DepthGuard guard(depth_, kMaxEvalDepth, "evaluation");
  charge(1);
  try {
    switch (n.kind) {
      case NodeKind::StrLit:
        append(out, n.str);
        return;
      case NodeKind::Comment:
        return;
      case NodeKind::If:
        exec_block(truthy(eval(*n.a, env)) ? n.body : n.alt, env, out);
        return;
      case NodeKind::For:
        exec_for(n, env, out);
        return;
      case NodeKind::Break:
        throw BreakSignal{n.line};
      case NodeKind::Continue:
        throw ContinueSignal{n.line};
      case NodeKind::Set:
        exec_set(n, env);
        return;
      case NodeKind::Macro: {
        const Node* node = &n;
        env->set(n.str,
                 make_fn([node](Interp& in, Args& args, Env* caller) { return in.call_macro(*node, args, caller); }));
        return;
      }
      case NodeKind::CallBlock:
        print(out, call_block(n, env));
        return;
      case NodeKind::FilterBlock: {
        std::string body;
        exec_block(n.body, env, body);
        print(out, apply_filter(*this, make_str(std::move(body)), *n.a, env));
        return;
      }
      default:
        print(out, eval(n, env));
        return;
    }
  } catch (JinjaError& e) {
    if (!e.line) e.line = n.line;
    throw;
  }
}

namespace {

void bind_target(const Node& target, const Value& value, Env* env) {
  if (target.kind == NodeKind::Ident) {
    env->set(target.str, value);
    return;
  }
  for (std::size_t j = 0; j < target.list.size(); ++j) {
    const Node& elem = *target.list[j];
    if (elem.kind != NodeKind::Ident) fail("Cannot unpack non-identifier type");
    env->set(elem.str, value.list->items[j]);
  }
}

}  // namespace

void Interp::exec_for(const Node& n, Env* env, std::string& out) {
  ScopedEnv scope_holder(*this, env);
  Env* scope = scope_holder.get();
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::Select) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  if (!iterable.is_list() && !iterable.is_dict())
    fail(std::string("Expected iterable or object type in for loop: got ") + type_name(iterable));
  // What is iterated: the list itself (kept alive by `iterable`), or a dict's keys, or the items passing
  // the loop's `if` test.
  std::vector<Value> own;
  const std::vector<Value>* items = &own;
  if (iterable.is_dict()) {
    for (const auto& e : iterable.dict->entries) own.push_back(make_str(e.first));
  } else {
    items = &iterable.list->items;
  }
  charge(items->size());
  if (n.a->kind == NodeKind::TupleLit) {
    for (const Value& current : *items) {
      if (current.kind != Kind::List || current.list->tuple)
        fail(std::string("Cannot unpack non-iterable type: ") + type_name(current));
      if (current.list->items.size() != n.a->list.size())
        fail(std::string("Too ") + (n.a->list.size() > current.list->items.size() ? "few" : "many") +
             " items to unpack");
    }
  }
  if (test) {
    std::vector<Value> kept;
    for (const Value& current : *items) {
      ScopedEnv loop_scope(*this, scope);
      bind_target(*n.a, current, loop_scope.get());
      if (truthy(eval(*test, loop_scope.get()))) kept.push_back(current);
    }
    own = std::move(kept);
    items = &own;
  }
  bool no_iteration = true;
  const double len = static_cast<double>(items->size());
  for (std::size_t i = 0; i < items->size(); ++i) {
    const double k = static_cast<double>(i);
    charge(4);  // the loop object and bindings
    Kwargs loop;
    loop.reserve(9);
    loop.emplace_back("index", make_int(k + 1));
    loop.emplace_back("index0", make_int(k));
    loop.emplace_back("revindex", make_int(len - k));
    loop.emplace_back("revindex0", make_int(len - k - 1));
    loop.emplace_back("first", make_bool(i == 0));
    loop.emplace_back("last", make_bool(i + 1 == items->size()));
    loop.emplace_back("length", make_int(len));
    loop.emplace_back("previtem", i > 0 ? (*items)[i - 1] : make_undefined());
    loop.emplace_back("nextitem", i + 1 < items->size() ? (*items)[i + 1] : make_undefined());
    scope->set("loop", make_dict(std::move(loop), false, true));
    bind_target(*n.a, (*items)[i], scope);
    const std::size_t mark = out.size();
    try {
      exec_block(n.body, scope, out);
    } catch (const ContinueSignal&) {
      out.resize(mark);  // the reference drops the interrupted iteration's output
      continue;
    } catch (const BreakSignal&) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) exec_block(n.alt, scope, out);
}

void Interp::exec_set(const Node& n, Env* env) {
  Value rhs;
  if (n.b) {
    rhs = eval(*n.b, env);
  } else {
    std::string body;
    exec_block(n.body, env, body);
    rhs = make_str(std::move(body));
  }
  const Node& target = *n.a;
  if (target.kind == NodeKind::Ident) {
    env->set(target.str, std::move(rhs));
  } else if (target.kind == NodeKind::TupleLit) {
    if (!rhs.is_list()) fail(std::string("Cannot unpack non-iterable type in set: ") + type_name(rhs));
    if (rhs.list->items.size() != target.list.size())
      fail(std::string("Too ") + (target.list.size() > rhs.list->items.size() ? "few" : "many") +
           " items to unpack in set");
    for (std::size_t i = 0; i < target.list.size(); ++i) {
      if (target.list[i]->kind != NodeKind::Ident) fail("Cannot unpack to non-identifier in set");
      env->set(target.list[i]->str, rhs.list->items[i]);
    }
  } else if (target.kind == NodeKind::Member) {
    Value object = eval(*target.a, env);
    if (object.kind != Kind::Namespace) fail("cannot assign attribute on non-namespace object");
    if (target.b->kind != NodeKind::Ident) fail("Cannot assign to member with non-identifier property");
    object.dict->set(target.b->str, rhs.kind == Kind::Hole ? make_undefined() : std::move(rhs));
  } else {
    fail("Invalid LHS inside assignment expression");
  }
}

void Interp::bind_params(const std::string& display, const Node& owner, Args args, Env* scope) {
  DictData kwargs;
  if (!args.empty() && args.back().is_dict() && args.back().dict->kwargs) {
    for (const auto& e : args.back().dict->entries) kwargs.set(e.first, e.second);
    args.pop_back();
  }
  const NodeList& params = owner.list;
  std::vector<const Node*> pending;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    Value value;
    bool has = i < args.size() && args[i].kind != Kind::Hole;  // JS undefined counts as not given
    if (has) {
      value = args[i];
    } else if (const Value* kw = kwargs.find(p.str)) {
      value = *kw;
      kwargs.erase(p.str);
      has = true;
    }
    if (!has && p.kind == NodeKind::KwArg) pending.push_back(&p);
    scope->set(p.str, has ? value : make_undefined());
  }
  if (owner.uses_kwargs) {
    scope->set("kwargs", make_dict(std::move(kwargs.entries)));
  } else if (!kwargs.entries.empty()) {
    fail("macro " + display + " takes no keyword argument '" + kwargs.entries.front().first + "'");
  }
  if (owner.uses_varargs) {
    std::vector<Value> rest;
    for (std::size_t i = params.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->set("varargs", make_list(std::move(rest)));
  } else if (args.size() > params.size()) {
    fail("macro " + display + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const Node* p : pending) scope->set(p->str, eval(*p->a, scope));
}

Value Interp::call_macro(const Node& n, Args& args, Env* caller) {
  DepthGuard guard(macro_depth_, kMaxMacroDepth, "macro calls");
  ScopedEnv scope(*this, caller);
  bind_params("'" + n.str + "'", n, args, scope.get());
  std::string out;
  exec_block(n.body, scope.get(), out);
  return make_str(std::move(out));
}

Value Interp::call_block(const Node& n, Env* env) {
  const Node* node = &n;
  pin(env);  // `caller` may be stored (in a namespace) and called after this statement
  Value caller = make_fn([node, env](Interp& in, Args& args, Env*) {
    DepthGuard guard(in.macro_depth_, kMaxMacroDepth, "macro calls");
    ScopedEnv scope(in, env);
    in.bind_params("None", *node, args, scope.get());
    std::string out;
    in.exec_block(node->body, scope.get(), out);
    return make_str(std::move(out));
  });
  auto [args, kwargs] = eval_args(n.a->list, env);
  args.push_back(make_dict(std::move(kwargs), true));
  Value fn = eval(*n.a->a, env);
  if (fn.kind != Kind::Function)
    fail(std::string("Cannot call something that is not a function: got ") + type_name(fn));
  ScopedEnv call_env(*this, env);
  call_env.get()->set("caller", std::move(caller));
  return fn.fn->fn(*this, args, call_env.get());
}

// ---- Template ----

namespace {

std::string format_error(const JinjaError& e) {
  return e.line ? "line " + std::to_string(e.line) + ": " + e.message : e.message;
}

template <class J>
Result<std::string> render_impl(const NodeList& body, const J& context, const RenderOptions& options) {
  try {
    Interp in(options);
    ScopedEnv global_holder(in, nullptr);
    Env* global = global_holder.get();
    setup_globals(in, global);
    if (!context.is_null()) {
      if (!context.is_object()) return make_error("template context must be a JSON object");
      for (auto it = context.begin(); it != context.end(); ++it) in.declare(global, it.key(), from_json(it.value()));
    }
    std::string out;
    in.exec_block(body, global, out);
    return out;
  } catch (const JinjaError& e) {
    return make_error(format_error(e));
  } catch (const BreakSignal& s) {
    return make_error("line " + std::to_string(s.line) + ": {% break %} outside a loop");
  } catch (const ContinueSignal& s) {
    return make_error("line " + std::to_string(s.line) + ": {% continue %} outside a loop");
  } catch (const std::bad_alloc&) {
    return make_error("template rendering ran out of memory");
  } catch (const std::exception& e) {
    return make_error(std::string("template rendering failed: ") + e.what());
  }
}

}  // namespace

Template::Template(std::unique_ptr<Program> program) : program_(std::move(program)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

Result<Template> Template::parse(std::string_view source) {
  constexpr std::size_t kMaxSource = std::size_t{4} << 20;
  if (source.size() > kMaxSource) return make_error("template larger than 4 MiB");
  if (auto bad = utf8_first_invalid(source))
    return make_error("template is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  try {
    auto program = std::make_unique<Program>();
    program->body = jinja::parse(tokenize(source));
    return Template(std::move(program));
  } catch (const JinjaError& e) {
    return make_error(format_error(e));
  } catch (const std::bad_alloc&) {
    return make_error("template parsing ran out of memory");
  } catch (const std::exception& e) {
    return make_error(std::string("template parsing failed: ") + e.what());
  }
}

Result<std::string> Template::render(const nlohmann::json& context, const RenderOptions& options) const {
  return render_impl(program_->body, context, options);
}

Result<std::string> Template::render_ordered(const nlohmann::ordered_json& context,
                                             const RenderOptions& options) const {
  return render_impl(program_->body, context, options);
}

}  // namespace day0::jinja
