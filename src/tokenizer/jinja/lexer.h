// Template source -> tokens, as @huggingface/jinja's lexer: the transformers preprocessing
// (trailing newline, lstrip_blocks, trim_blocks, {% generation %} tags) and whitespace control.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace day0::jinja {

enum class Tok : unsigned char {
  Text,
  Number,
  String,
  Ident,
  Equals,
  OpenParen,
  CloseParen,
  OpenStatement,
  CloseStatement,
  OpenExpression,
  CloseExpression,
  OpenSquare,
  CloseSquare,
  OpenCurly,
  CloseCurly,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,
  Multiplicative,
  Power,
  Comparison,
  Unary,
  Comment,
};

struct Token {
  Tok type;
  std::string value;
  int line;  // 1-based line of the original source
};

const char* tok_name(Tok t);

// Throws JinjaError (with the line) on malformed input.
std::vector<Token> tokenize(std::string_view source);

}  // namespace day0::jinja
