// The syntax tree of a parsed template (one Node type; fields by kind as listed below) and the parser
// entry point. The shapes mirror @huggingface/jinja's ast.ts so the interpreter can follow runtime.ts.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/lexer.h"

namespace day0::jinja {

enum class NodeKind : unsigned char {
  // Statements.
  If,   // a: test; body; alt
  For,  // a: loop variable (Ident or TupleLit); b: iterable; body; alt: the else block
  Break,
  Continue,
  Set,          // a: assignee; b: value (null for a {% set %}...{% endset %} block); body
  Macro,        // str: name; list: parameters (Ident or KwArg); body
  CallBlock,    // a: the Call; list: caller parameters; body
  FilterBlock,  // a: the filter (Ident or Call); body
  Comment,
  // Expressions (an expression in a body is printed, as {{ }} and text are).
  IntLit,     // num
  FloatLit,   // num
  StrLit,     // str
  ArrayLit,   // list
  TupleLit,   // list
  ObjectLit,  // list: key, value, key, value, ...
  Ident,      // str
  Member,     // a: object; b: property; flag: computed (a[b])
  Call,       // a: callee; list: arguments
  Unary,      // str: "not", "-" or "+"; a
  Binary,     // str: operator; a, b
  Filter,     // a: operand; b: the filter (Ident or Call; anything else fails at runtime)
  Test,       // a: operand; str: test name; flag: negated
  Select,     // a: value; b: condition (`a if b` with no else)
  Ternary,    // a: condition; b: if true; c: if false
  Slice,      // a, b, c: start, stop, step (each may be null)
  KwArg,      // str: name; a: value
  Spread,     // a (*a)
  KwSpread,   // a (**a)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  int line = 0;
  int depth = 1;  // height of this subtree
  std::string str;
  double num = 0;
  bool flag = false;
  NodePtr a, b, c;
  NodeList list, body, alt;
  // Macro and CallBlock: whether the body reads `kwargs` / `varargs` before assigning them.
  bool uses_kwargs = false, uses_varargs = false;
};

// Throws JinjaError ("line N: ...") on syntax errors and unsupported constructs.
NodeList parse(const std::vector<Token>& tokens);

// Sets uses_kwargs / uses_varargs of a Macro or CallBlock node (findAccessedSpecialMacroArguments):
// whether its body reads `kwargs` / `varargs` before declaring them.
void analyze_special_args(Node& n);

// Filter and test names @huggingface/jinja implements for some operand type.
bool known_filter(std::string_view name);
bool known_test(std::string_view name);

}  // namespace day0::jinja
