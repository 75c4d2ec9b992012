// Helpers over the syntax tree: the static analysis of which special names (kwargs, varargs) a macro
// body reads, and the filter and test names @huggingface/jinja implements.
#include "tokenizer/jinja/ast.h"

#include <set>

namespace day0::jinja {
namespace {

// findAccessedSpecialMacroArguments: does the body read `kwargs` / `varargs` before declaring them?
struct SpecialArgs {
  bool declared_kw = false, declared_va = false, used_kw = false, used_va = false;
  void declare(const std::string& name) {
    if (name == "kwargs") declared_kw = true;
    if (name == "varargs") declared_va = true;
  }
  void declare_target(const Node* n) {
    if (n->kind == NodeKind::Ident)
      declare(n->str);
    else if (n->kind == NodeKind::TupleLit)
      for (const NodePtr& c : n->list) declare_target(c.get());
  }
  void declare_params(const NodeList& params) {
    for (const NodePtr& p : params) declare(p->str);
  }
  void visit_defaults(const NodeList& params) {
    for (const NodePtr& p : params)
      if (p->kind == NodeKind::KwArg) visit(p->a.get());
  }
  void visit_filter(const Node* f) {
    if (f->kind == NodeKind::Call) visit_list(f->list);
  }
  void visit_list(const NodeList& l) {
    for (const NodePtr& n : l) visit(n.get());
  }
  void visit(const Node* n) {
    if (!n) return;
    switch (n->kind) {
      case NodeKind::For:
        declare_target(n->a.get());
        if (n->b->kind == NodeKind::Select) {
          visit(n->b->a.get());
          visit_list(n->body);
          visit_list(n->alt);
          visit(n->b->b.get());
          return;
        }
        visit(n->b.get());
        visit_list(n->body);
        visit_list(n->alt);
        return;
      case NodeKind::Set:
        declare_target(n->a.get());
        visit(n->b.get());
        visit_list(n->body);
        return;
      case NodeKind::Macro:
        declare_params(n->list);
        visit_defaults(n->list);
        visit_list(n->body);
        return;
      case NodeKind::CallBlock:
        visit(n->a.get());
        declare_params(n->list);
        visit_defaults(n->list);
        visit_list(n->body);
        return;
      case NodeKind::FilterBlock:
        visit_list(n->body);
        visit_filter(n->a.get());
        return;
      case NodeKind::Ident:
        if (n->str == "kwargs" && !declared_kw) used_kw = true;
        if (n->str == "varargs" && !declared_va) used_va = true;
        return;
      case NodeKind::Member:
        visit(n->a.get());
        if (n->flag) visit(n->b.get());
        return;
      case NodeKind::Filter:
        visit(n->a.get());
        visit_filter(n->b.get());
        return;
      case NodeKind::Test:
        visit(n->a.get());
        return;
      case NodeKind::Select:
        visit(n->b.get());
        visit(n->a.get());
        return;
      case NodeKind::KwArg:
        visit(n->a.get());
        return;
      default:
        visit(n->a.get());
        visit(n->b.get());
        visit(n->c.get());
        visit_list(n->list);
        visit_list(n->body);
        visit_list(n->alt);
    }
  }
};

}  // namespace

void analyze_special_args(Node& n) {
  SpecialArgs s;
  s.declare_params(n.list);
  s.visit_list(n.body);
  n.uses_kwargs = s.used_kw;
  n.uses_varargs = s.used_va;
}

bool known_filter(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {
      "abs",    "bool",  "capitalize", "default", "dictsort", "first", "float",      "get",
      "indent", "int",   "items",      "join",    "keys",     "last",  "length",     "list",
      "lower",  "map",   "rejectattr", "replace", "reverse",  "safe",  "selectattr", "sort",
      "string", "title", "tojson",     "trim",    "unique",   "upper", "values"};
  return kNames.count(name) > 0;
}

bool known_test(std::string_view name) {
  static const std::set<std::string, std::less<>> kNames = {
      "boolean", "callable", "defined", "eq",  "equalto",  "even",   "false", "integer",   "iterable", "lower",
      "mapping", "none",     "number",  "odd", "sequence", "string", "true",  "undefined", "upper"};
  return kNames.count(name) > 0;
}

}  // namespace day0::jinja
