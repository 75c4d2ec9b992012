// The expression half of the evaluator: literals, variables, calls and arguments, member access and
// slicing, and the unary/binary operators with @huggingface/jinja's (JavaScript) semantics.
#include <cmath>

#include "tokenizer/jinja/interp.h"
#include "tokenizer/jinja/js_string.h"

namespace day0::jinja {

std::pair<Args, Kwargs> Interp::eval_args(const NodeList& args, Env* env) {
  Args positional;
  Kwargs keywords;
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::Spread) {
      Value v = eval(*a->a, env);
      if (!v.is_list()) fail(std::string("Cannot unpack non-iterable type: ") + type_name(v));
      charge(v.list->items.size());
      for (const Value& item : v.list->items) positional.push_back(item);
    } else if (a->kind != NodeKind::KwArg && a->kind != NodeKind::KwSpread) {
      positional.push_back(eval(*a, env));
    }
  }
  const auto add = [&](const std::string& key, Value v) {
    for (const auto& e : keywords)
      if (e.first == key) fail("Got multiple values for keyword argument '" + key + "'");
    keywords.emplace_back(key, std::move(v));
  };
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::KwArg) {
      add(a->str, eval(*a->a, env));
    } else if (a->kind == NodeKind::KwSpread) {
      Value v = eval(*a->a, env);
      if (!v.is_dict()) fail(std::string("Argument after ** must be a mapping, not ") + type_name(v));
      for (const auto& e : v.dict->entries) add(e.first, e.second);
    }
  }
  return {std::move(positional), std::move(keywords)};
}

Value Interp::eval(const Node& n, Env* env) {
  DepthGuard guard(depth_, kMaxEvalDepth, "evaluation");
  charge(1);
  try {
    switch (n.kind) {
      case NodeKind::IntLit:
        return make_int(n.num);
      case NodeKind::FloatLit:
        return make_float(n.num);
      case NodeKind::StrLit:
        return make_str(n.str);
      case NodeKind::ArrayLit:
      case NodeKind::TupleLit: {
        std::vector<Value> items;
        for (const NodePtr& e : n.list) items.push_back(eval(*e, env));
        return make_list(std::move(items), n.kind == NodeKind::TupleLit);
      }
      case NodeKind::ObjectLit: {
        Kwargs entries;  // make_dict keeps the first position of a repeated key, with the last value
        for (std::size_t i = 0; i + 1 < n.list.size(); i += 2) {
          Value key = eval(*n.list[i], env);
          if (key.kind != Kind::String) fail(std::string("Object keys must be strings: got ") + type_name(key));
          entries.emplace_back(key.s(), eval(*n.list[i + 1], env));
        }
        return make_dict(std::move(entries));
      }
      case NodeKind::Ident:
        return lookup(env, n.str);
      case NodeKind::Call: {
        auto [args, kwargs] = eval_args(n.list, env);
        if (!kwargs.empty()) args.push_back(make_dict(std::move(kwargs), true));
        Value fn = eval(*n.a, env);
        if (fn.kind != Kind::Function)
          fail(std::string("Cannot call something that is not a function: got ") + type_name(fn));
        return fn.fn->fn(*this, args, env);
      }
      case NodeKind::Member:
        return eval_member(n, env);
      case NodeKind::Unary:
        return eval_unary(n, env);
      case NodeKind::Binary:
        return eval_binary(n, env);
      case NodeKind::Filter:
        return apply_filter(*this, eval(*n.a, env), *n.b, env);
      case NodeKind::Test: {
        const bool r = apply_test(n.str, eval(*n.a, env), nullptr);
        return make_bool(n.flag ? !r : r);
      }
      case NodeKind::Select:
        return truthy(eval(*n.b, env)) ? eval(*n.a, env) : make_undefined();
      case NodeKind::Ternary:
        return truthy(eval(*n.a, env)) ? eval(*n.b, env) : eval(*n.c, env);
      default:
        fail("Unknown node type");
    }
  } catch (JinjaError& e) {
    if (!e.line) e.line = n.line;
    throw;
  }
}

Value Interp::eval_member(const Node& n, Env* env) {
  Value object = eval(*n.a, env);
  Value property;
  if (n.flag) {
    if (n.b->kind == NodeKind::Slice) return eval_slice(object, *n.b, env);
    property = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::IntLit) {
    property = make_int(n.b->num);
  } else {
    property = make_str(n.b->str);
  }
  return get_member(*this, object, property);
}

Value Interp::eval_slice(const Value& object, const Node& n, Env* env) {
  if (!object.is_list() && object.kind != Kind::String) fail("Slice object must be an array or string");
  const char* names[] = {"start", "stop", "step"};
  const Node* parts[] = {n.a.get(), n.b.get(), n.c.get()};
  double v[3];
  bool given[3];
  for (int i = 0; i < 3; ++i) {
    Value x = parts[i] ? eval(*parts[i], env) : make_undefined();
    if (x.kind != Kind::Int && x.kind != Kind::Undefined)
      fail(std::string("Slice ") + names[i] + " must be numeric or undefined");
    given[i] = x.kind == Kind::Int;
    v[i] = x.num;
  }
  std::vector<std::uint32_t> offsets;  // of the code points (Array.from(string))
  if (object.kind == Kind::String) offsets = code_point_offsets(object.s());
  const double len = static_cast<double>(object.is_list() ? object.list->items.size() : offsets.size() - 1);
  const double step = given[2] ? v[2] : 1;
  const double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start, stop;
  if (dir >= 0) {
    start = given[0] ? v[0] : 0;
    start = start < 0 ? std::max(len + start, 0.0) : std::min(start, len);
    stop = given[1] ? v[1] : len;
    stop = stop < 0 ? std::max(len + stop, 0.0) : std::min(stop, len);
  } else {
    start = given[0] ? v[0] : len - 1;
    start = start < 0 ? std::max(len + start, -1.0) : std::min(start, len - 1);
    stop = given[1] ? v[1] : -1;
    stop = stop < -1 ? std::max(len + stop, -1.0) : std::min(stop, len - 1);
  }
  std::vector<Value> items;
  std::string s;
  for (double i = start; dir * i < dir * stop; i += step) {
    const auto k = static_cast<std::size_t>(i);
    charge(1);
    if (object.is_list())
      items.push_back(object.list->items[k]);
    else
      s.append(object.s(), offsets[k], offsets[k + 1] - offsets[k]);
  }
  if (object.is_list()) return make_list(std::move(items));
  return make_str(std::move(s));
}

Value Interp::eval_unary(const Node& n, Env* env) {
  Value arg = eval(*n.a, env);
  if (n.str == "not") return make_bool(!truthy(arg));
  const double sign = n.str == "-" ? -1 : 1;
  if (arg.is_number() || arg.kind == Kind::Bool) {
    const double r = sign * arg.num;
    return arg.kind == Kind::Float ? make_float(r) : make_int(r);
  }
  fail("Unknown operator \"" + n.str + "\" for " + type_name(arg));
}

Value Interp::eval_binary(const Node& n, Env* env) {
  const std::string& op = n.str;
  Value left = eval(*n.a, env);
  if (op == "and") return truthy(left) ? eval(*n.b, env) : left;
  if (op == "or") return truthy(left) ? left : eval(*n.b, env);
  Value right = eval(*n.b, env);
  if (op == "==") return make_bool(loose_equal(left, right));
  if (op == "!=") return make_bool(!loose_equal(left, right));
  const bool in_op = op == "in" || op == "not in";
  if (left.kind == Kind::Undefined || right.kind == Kind::Undefined) {
    if (right.kind == Kind::Undefined && in_op) return make_bool(op == "not in");
    fail("Cannot perform operation " + op + " on undefined values");
  }
  check_not_hole(left);
  check_not_hole(right);
  if (left.kind == Kind::Null || right.kind == Kind::Null) fail("Cannot perform operation on null values");
  if (op == "~") {
    std::string a = raw_string(left), b = raw_string(right);
    check_size(a.size() + b.size());
    return make_str(a + b);
  }
  const auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Bool; };
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    const double a = left.num, b = right.num;
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    const double r = (std::isnan(b) || (std::fabs(a) == 1 && std::isinf(b))) ? NAN : std::pow(a, b);
    if (!std::isfinite(r)) fail("Exponentiation result is not a finite real number");
    return left.kind == Kind::Float || right.kind == Kind::Float || b < 0 ? make_float(r) : make_int(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.num, b = right.num;
    const bool is_float = left.kind == Kind::Float || right.kind == Kind::Float;
    const auto num = [&](double r) { return is_float ? make_float(r) : make_int(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return make_float(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return make_bool(a < b);
    if (op == ">") return make_bool(a > b);
    if (op == ">=") return make_bool(a >= b);
    if (op == "<=") return make_bool(a <= b);
  } else if (left.is_list() && right.is_list()) {
    if (op == "+") {
      charge(left.list->items.size() + right.list->items.size());
      std::vector<Value> items = left.list->items;
      items.insert(items.end(), right.list->items.begin(), right.list->items.end());
      return make_list(std::move(items));
    }
  } else if (right.is_list() && in_op) {
    charge(right.list->items.size());
    bool member = false;
    for (const Value& x : right.list->items) member = member || strict_equal(x, left);
    return make_bool(op == "in" ? member : !member);
  }
  if ((left.kind == Kind::String || right.kind == Kind::String) && op == "+") {
    // Python's jinja2 (what transformers renders with) refuses str + dict/list; the JS reference would
    // print "[object Map]" into the prompt. We side with Python: a prompt with that text is never wanted.
    if (left.is_dict() || right.is_dict() || left.is_list() || right.is_list())
      fail("can only concatenate str (not " + std::string(left.kind == Kind::String ? type_name(right) : type_name(left)) +
           ") to str");
    std::string a = raw_string(left), b = raw_string(right);
    check_size(a.size() + b.size());
    return make_str(a + b);
  }
  if (left.kind == Kind::String && right.kind == Kind::String && in_op) {
    const bool found = right.s().find(left.s()) != std::string::npos;
    return make_bool(op == "in" ? found : !found);
  }
  if (left.kind == Kind::String && right.is_dict() && in_op) {
    const bool found = right.dict->find(left.s()) != nullptr;
    return make_bool(op == "in" ? found : !found);
  }
  fail("Unknown operator \"" + op + "\" between " + type_name(left) + " and " + type_name(right));
}

}  // namespace day0::jinja
