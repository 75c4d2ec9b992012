// The parser: tokens -> syntax tree, following @huggingface/jinja's parser.ts function by function (same
// precedence, same quirks), plus depth limits, line numbers in errors, and parse-time rejection of
// statements, filters and tests the reference does not implement.
#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <set>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace day0::jinja {
namespace {

constexpr int kMaxNesting = 200;    // recursive parse levels (parentheses, blocks, elif chains, ...)
constexpr int kMaxTreeDepth = 500;  // height of any subtree (long operator chains are left-deep)

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  NodeList program() {
    NodeList body;
    while (cur_ < t_.size()) body.push_back(parse_any());
    return body;
  }

 private:
  struct Guard {
    Parser& p;
    explicit Guard(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting)
        p.error("template nested more than " + std::to_string(kMaxNesting) + " levels deep");
    }
    ~Guard() { --p.nesting_; }
  };

  const std::vector<Token>& t_;
  std::size_t cur_ = 0;
  int nesting_ = 0;

  int line() const {
    if (cur_ < t_.size()) return t_[cur_].line;
    return t_.empty() ? 1 : t_.back().line;
  }
  [[noreturn]] void error(const std::string& msg, int at = 0) const {
    const int l = at ? at : line();
    throw JinjaError{msg, l};
  }
  std::string describe() const {
    if (cur_ >= t_.size()) return "the end of the template";
    const Token& tok = t_[cur_];
    if (tok.type == Tok::Ident || tok.type == Tok::Number)
      return std::string(tok_name(tok.type)) + " '" + tok.value + "'";
    return tok_name(tok.type);
  }

  bool is(Tok type, std::size_t off = 0) const { return cur_ + off < t_.size() && t_[cur_ + off].type == type; }
  bool is_ident(std::string_view name, std::size_t off = 0) const {
    return is(Tok::Ident, off) && t_[cur_ + off].value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::OpenStatement) || !is(Tok::Ident, 1)) return false;
    return std::find(names.begin(), names.end(), t_[cur_ + 1].value) != names.end();
  }
  const Token& expect(Tok type, const char* what) {
    if (!is(type)) error(std::string("expected ") + what + ", got " + describe());
    return t_[cur_++];
  }
  void expect_end(const char* name) {
    expect(Tok::OpenStatement, "'{%'");
    if (!is_ident(name)) error(std::string("expected '") + name + "', got " + describe());
    ++cur_;
    expect(Tok::CloseStatement, "'%}'");
  }

  NodePtr node(NodeKind kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }
  // Records the subtree height once the children are attached.
  NodePtr done(NodePtr n) {
    int d = 0;
    for (const NodePtr* p : {&n->a, &n->b, &n->c})
      if (*p) d = std::max(d, (*p)->depth);
    for (const NodeList* l : {&n->list, &n->body, &n->alt})
      for (const NodePtr& c : *l) d = std::max(d, c->depth);
    n->depth = d + 1;
    if (n->depth > kMaxTreeDepth) error("expression or block nested too deeply", n->line);
    return n;
  }
  NodePtr binary(const std::string& op, NodePtr left, NodePtr right, int line) {
    NodePtr n = node(NodeKind::Binary, line);
    n->str = op;
    n->a = std::move(left);
    n->b = std::move(right);
    return done(std::move(n));
  }

  NodeList body_until(std::initializer_list<std::string_view> names, const char* opener, int open_line) {
    NodeList body;
    while (!is_statement(names)) {
      if (cur_ >= t_.size())
        error(std::string("{% ") + opener + " %} is never closed (no {% end" + opener + " %})", open_line);
      body.push_back(parse_any());
    }
    return body;
  }

  NodePtr parse_any() {
    Guard g(*this);
    const int l = line();
    switch (t_[cur_].type) {
      case Tok::Comment:
        ++cur_;
        return node(NodeKind::Comment, l);
      case Tok::Text: {
        NodePtr n = node(NodeKind::StrLit, l);
        n->str = t_[cur_++].value;
        return n;
      }
      case Tok::OpenStatement:
        return parse_statement();
      case Tok::OpenExpression: {
        ++cur_;
        NodePtr e = parse_expression();
        expect(Tok::CloseExpression, "'}}'");
        return e;
      }
      default:
        error("unexpected " + describe());
    }
  }

  NodePtr parse_statement() {
    const int l = line();
    expect(Tok::OpenStatement, "'{%'");
    if (!is(Tok::Ident)) error("expected a statement name after '{%', got " + describe());
    const std::string name = t_[cur_].value;
    static const std::set<std::string, std::less<>> kClosers = {"elif",   "else",     "endif",   "endfor",
                                                                "endset", "endmacro", "endcall", "endfilter"};
    if (kClosers.count(name)) error("unexpected {% " + name + " %}");
    ++cur_;
    if (name == "set") return parse_set(l);
    if (name == "if") {
      NodePtr n = parse_if(l);
      expect_end("endif");
      return n;
    }
    if (name == "macro") {
      NodePtr n = node(NodeKind::Macro, l);
      NodePtr id = parse_primary();
      if (id->kind != NodeKind::Ident) error("expected a macro name");
      n->str = id->str;
      n->list = parse_args(true);
      expect(Tok::CloseStatement, "'%}'");
      n->body = body_until({"endmacro"}, "macro", l);
      expect_end("endmacro");
      analyze_special_args(*n);
      return done(std::move(n));
    }
    if (name == "for") {
      NodePtr n = parse_for(l);
      expect_end("endfor");
      return n;
    }
    if (name == "call") {
      NodePtr n = node(NodeKind::CallBlock, l);
      if (is(Tok::OpenParen)) n->list = parse_args(true);
      NodePtr callee = parse_primary();
      if (callee->kind != NodeKind::Ident) error("expected an identifier after {% call");
      NodePtr call = node(NodeKind::Call, l);
      call->a = std::move(callee);
      call->list = parse_args(false);
      n->a = done(std::move(call));
      expect(Tok::CloseStatement, "'%}'");
      n->body = body_until({"endcall"}, "call", l);
      expect_end("endcall");
      analyze_special_args(*n);
      return done(std::move(n));
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStatement, "'%}'");
      return node(name == "break" ? NodeKind::Break : NodeKind::Continue, l);
    }
    if (name == "filter") {
      NodePtr n = node(NodeKind::FilterBlock, l);
      NodePtr f = parse_primary();
      if (f->kind == NodeKind::Ident) {
        if (!known_filter(f->str)) error("unsupported filter '" + f->str + "'");
        if (is(Tok::OpenParen)) f = parse_call(std::move(f));
      }
      n->a = std::move(f);
      expect(Tok::CloseStatement, "'%}'");
      n->body = body_until({"endfilter"}, "filter", l);
      expect_end("endfilter");
      return done(std::move(n));
    }
    error("unsupported statement {% " + name + " %}", l);
  }

  NodePtr parse_set(int l) {
    NodePtr n = node(NodeKind::Set, l);
    n->a = parse_expression_sequence(false);
    if (is(Tok::Equals)) {
      ++cur_;
      n->b = parse_expression_sequence(false);
    } else {
      expect(Tok::CloseStatement, "'=' or '%}'");
      n->body = body_until({"endset"}, "set", l);
      expect(Tok::OpenStatement, "'{%'");
      ++cur_;  // endset
    }
    expect(Tok::CloseStatement, "'%}'");
    return done(std::move(n));
  }

  NodePtr parse_if(int l) {
    NodePtr n = node(NodeKind::If, l);
    n->a = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    n->body = body_until({"elif", "else", "endif"}, "if", l);
    if (is_statement({"elif"})) {
      const int el = line();
      cur_ += 2;
      Guard g(*this);
      n->alt.push_back(parse_if(el));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = body_until({"endif"}, "if", l);
    }
    return done(std::move(n));
  }

  NodePtr parse_for(int l) {
    NodePtr n = node(NodeKind::For, l);
    n->a = parse_expression_sequence(true);
    if (n->a->kind != NodeKind::Ident && n->a->kind != NodeKind::TupleLit)
      error("expected a loop variable or tuple after {% for");
    if (!is_ident("in")) error("expected 'in' after the loop variable, got " + describe());
    ++cur_;
    n->b = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    n->body = body_until({"endfor", "else"}, "for", l);
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      n->alt = body_until({"endfor"}, "for", l);
    }
    return done(std::move(n));
  }

  NodePtr parse_expression_sequence(bool primary) {
    const int l = line();
    NodeList exprs;
    exprs.push_back(primary ? parse_primary() : parse_expression());
    const bool tuple = is(Tok::Comma);
    while (tuple) {
      ++cur_;
      exprs.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::Comma)) break;
    }
    if (!tuple) return std::move(exprs[0]);
    NodePtr n = node(NodeKind::TupleLit, l);
    n->list = std::move(exprs);
    return done(std::move(n));
  }

  NodePtr parse_expression() { return parse_if_expression(); }

  NodePtr parse_if_expression() {
    Guard g(*this);
    const int l = line();
    NodePtr a = parse_or();
    if (!is_ident("if")) return a;
    ++cur_;
    NodePtr test = parse_or();
    if (is_ident("else")) {
      ++cur_;
      NodePtr n = node(NodeKind::Ternary, l);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = parse_if_expression();
      return done(std::move(n));
    }
    NodePtr n = node(NodeKind::Select, l);
    n->a = std::move(a);
    n->b = std::move(test);
    return done(std::move(n));
  }

  NodePtr parse_or() {
    NodePtr left = parse_and();
    while (is_ident("or")) {
      const int l = line();
      ++cur_;
      left = binary("or", std::move(left), parse_and(), l);
    }
    return left;
  }

  NodePtr parse_and() {
    NodePtr left = parse_not();
    while (is_ident("and")) {
      const int l = line();
      ++cur_;
      left = binary("and", std::move(left), parse_not(), l);
    }
    return left;
  }

  NodePtr parse_not() {
    NodePtr right;
    while (is_ident("not")) {
      Guard g(*this);
      NodePtr n = node(NodeKind::Unary, line());
      ++cur_;
      n->str = "not";
      n->a = parse_not();
      right = done(std::move(n));
    }
    return right ? std::move(right) : parse_comparison();
  }

  NodePtr parse_comparison() {
    NodePtr left = parse_additive();
    while (true) {
      const int l = line();
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        cur_ += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = t_[cur_++].value;
      } else {
        break;
      }
      left = binary(op, std::move(left), parse_additive(), l);
    }
    return left;
  }

  NodePtr parse_additive() {
    NodePtr left = parse_multiplicative();
    while (is(Tok::Additive)) {
      const int l = line();
      const std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_multiplicative(), l);
    }
    return left;
  }

  NodePtr parse_multiplicative() {
    NodePtr left = parse_power();
    while (is(Tok::Multiplicative)) {
      const int l = line();
      const std::string op = t_[cur_++].value;
      left = binary(op, std::move(left), parse_power(), l);
    }
    return left;
  }

  NodePtr parse_power() {
    NodePtr left = parse_test();
    while (is(Tok::Power)) {
      const int l = line();
      ++cur_;
      left = binary("**", std::move(left), parse_test(), l);
    }
    return left;
  }

  NodePtr parse_test() {
    NodePtr operand = parse_filter();
    while (is_ident("is")) {
      NodePtr n = node(NodeKind::Test, line());
      ++cur_;
      n->flag = is_ident("not");
      if (n->flag) ++cur_;
      NodePtr name = parse_primary();
      if (name->kind != NodeKind::Ident) error("expected a test name after 'is'");
      if (!known_test(name->str)) error("unsupported test '" + name->str + "'");
      n->str = name->str;
      n->a = std::move(operand);
      operand = done(std::move(n));
    }
    return operand;
  }

  NodePtr parse_filter() {
    NodePtr operand = parse_unary_sign();
    while (is(Tok::Pipe)) {
      NodePtr n = node(NodeKind::Filter, line());
      ++cur_;
      NodePtr f = parse_primary();
      if (f->kind != NodeKind::Ident) error("expected a filter name after '|'");
      if (!known_filter(f->str)) error("unsupported filter '" + f->str + "'");
      if (is(Tok::OpenParen)) f = parse_call(std::move(f));
      n->a = std::move(operand);
      n->b = std::move(f);
      operand = done(std::move(n));
    }
    return operand;
  }

  NodePtr parse_unary_sign() {
    if (cur_ < t_.size() && (t_[cur_].type == Tok::Unary || t_[cur_].type == Tok::Additive) &&
        (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      Guard g(*this);
      NodePtr n = node(NodeKind::Unary, line());
      n->str = t_[cur_++].value;
      n->a = parse_unary_sign();
      return done(std::move(n));
    }
    NodePtr member = parse_member(parse_primary());
    if (is(Tok::OpenParen)) return parse_call(std::move(member));
    return member;
  }

  NodePtr parse_call(NodePtr callee) {
    NodePtr n = node(NodeKind::Call, line());
    n->a = std::move(callee);
    n->list = parse_args(false);
    NodePtr e = parse_member(done(std::move(n)));
    if (is(Tok::OpenParen)) {
      Guard g(*this);  // f()()()...
      e = parse_call(std::move(e));
    }
    return e;
  }

  NodeList parse_args(bool params) {
    expect(Tok::OpenParen, "'('");
    NodeList args;
    std::set<std::string, std::less<>> names;
    bool saw_keyword = false, saw_spread = false;
    while (!is(Tok::CloseParen)) {
      if (cur_ >= t_.size()) error("expected ')' to close the argument list");
      const bool kw_spread = is(Tok::Power);
      const bool pos_spread = is(Tok::Multiplicative) && t_[cur_].value == "*";
      if (params && (kw_spread || pos_spread)) error("argument unpacking is not allowed in parameter declarations");
      const int l = line();
      if (kw_spread) {
        ++cur_;
        NodePtr n = node(NodeKind::KwSpread, l);
        n->a = parse_expression();
        args.push_back(done(std::move(n)));
        if (is(Tok::Comma)) ++cur_;
        if (!is(Tok::CloseParen)) error("'**' must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (pos_spread) {
        if (saw_spread) error("only one '*' argument unpacking is allowed");
        saw_spread = true;
        ++cur_;
        arg = node(NodeKind::Spread, l);
        arg->a = parse_expression();
        arg = done(std::move(arg));
      } else {
        arg = parse_expression();
        if (is(Tok::Equals)) {
          ++cur_;
          if (arg->kind != NodeKind::Ident)
            error(params ? "expected an identifier for a parameter" : "expected an identifier for a keyword argument");
          NodePtr kw = node(NodeKind::KwArg, l);
          kw->str = arg->str;
          kw->a = parse_expression();
          arg = done(std::move(kw));
        }
        if (params) {
          if (arg->kind != NodeKind::Ident && arg->kind != NodeKind::KwArg)
            error("expected an identifier for a parameter");
          if (!names.insert(arg->str).second) error("duplicate parameter name '" + arg->str + "'");
        }
        if (arg->kind == NodeKind::KwArg)
          saw_keyword = true;
        else if (saw_keyword)
          error(params ? "non-default argument follows default argument"
                       : "positional arguments must come before keyword arguments");
        else if (saw_spread)
          error("positional arguments must not follow '*' argument unpacking");
      }
      args.push_back(std::move(arg));
      if (is(Tok::Comma)) ++cur_;
    }
    ++cur_;  // ')'
    return args;
  }

  NodePtr parse_subscript() {
    const int l = line();
    std::vector<NodePtr> parts;
    bool slice = false;
    while (!is(Tok::CloseSquare)) {
      if (cur_ >= t_.size()) error("expected ']'");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) ++cur_, slice = true;
      }
    }
    if (parts.empty()) error("expected an index or slice inside '[]'");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) error("a slice takes at most 3 parts");
    NodePtr n = node(NodeKind::Slice, l);
    parts.resize(3);
    n->a = std::move(parts[0]);
    n->b = std::move(parts[1]);
    n->c = std::move(parts[2]);
    return done(std::move(n));
  }

  NodePtr parse_member(NodePtr object) {
    while (is(Tok::Dot) || is(Tok::OpenSquare)) {
      NodePtr n = node(NodeKind::Member, line());
      n->flag = is(Tok::OpenSquare);
      ++cur_;
      if (n->flag) {
        n->b = parse_subscript();
        expect(Tok::CloseSquare, "']'");
      } else {
        n->b = parse_primary();
        if (n->b->kind != NodeKind::Ident && n->b->kind != NodeKind::IntLit)
          error("expected an identifier or integer after '.'");
      }
      n->a = std::move(object);
      object = done(std::move(n));
    }
    return object;
  }

  NodePtr parse_primary() {
    if (cur_ >= t_.size()) error("unexpected end of template in an expression");
    const int l = line();
    const Token& tok = t_[cur_++];
    switch (tok.type) {
      case Tok::Number: {
        NodePtr n = node(tok.value.find('.') == std::string::npos ? NodeKind::IntLit : NodeKind::FloatLit, l);
        n->num = std::strtod(tok.value.c_str(), nullptr);
        return n;
      }
      case Tok::String: {
        NodePtr n = node(NodeKind::StrLit, l);
        n->str = tok.value;
        while (is(Tok::String)) n->str += t_[cur_++].value;
        return n;
      }
      case Tok::Ident: {
        NodePtr n = node(NodeKind::Ident, l);
        n->str = tok.value;
        return n;
      }
      case Tok::OpenParen: {
        NodePtr e = parse_expression_sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenSquare: {
        NodePtr n = node(NodeKind::ArrayLit, l);
        while (!is(Tok::CloseSquare)) {
          if (cur_ >= t_.size()) error("expected ']' to close the list", l);
          n->list.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return done(std::move(n));
      }
      case Tok::OpenCurly: {
        NodePtr n = node(NodeKind::ObjectLit, l);
        while (!is(Tok::CloseCurly)) {
          if (cur_ >= t_.size()) error("expected '}' to close the dict", l);
          n->list.push_back(parse_expression());
          expect(Tok::Colon, "':' between key and value");
          n->list.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return done(std::move(n));
      }
      default:
        --cur_;
        error("unexpected " + describe());
    }
  }
};

}  // namespace

NodeList parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace day0::jinja
