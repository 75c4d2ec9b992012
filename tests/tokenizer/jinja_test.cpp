// The Jinja interpreter: one test per construct, each case's expected output recorded from
// @huggingface/jinja 0.5.11 (node, `new Template(t).render(context)`), the reference transformers.js uses;
// then errors (parse-time "unsupported", runtime errors naming the line) and hostile templates.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "tokenizer/jinja/template.h"

namespace day0::jinja {
namespace {

struct Case {
  const char* tmpl;
  const char* context;  // JSON ("" for none); key order is kept
  const char* expected;
};

void expect_renders(std::initializer_list<Case> cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tmpl);
    auto t = Template::parse(c.tmpl);
    ASSERT_TRUE(t.ok()) << t.error().message;
    const auto context = *c.context ? nlohmann::ordered_json::parse(c.context) : nlohmann::ordered_json::object();
    auto out = t->render_ordered(context);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, c.expected);
  }
}

// The parse error of `source`, or "" if it parses.
std::string parse_error(const std::string& source) {
  auto t = Template::parse(source);
  return t.ok() ? "" : t.error().message;
}

// The render error of `source` (which must parse), or "" if it renders.
std::string render_error(const std::string& source, const RenderOptions& options = {},
                         const nlohmann::json& context = nlohmann::json::object()) {
  auto t = Template::parse(source);
  if (!t.ok()) return "parse error: " + t.error().message;
  auto out = t->render(context, options);
  return out.ok() ? "" : out.error().message;
}

TEST(Jinja, Printing) {
  expect_renders({
      {"{{ 1 }}|{{ 1.0 }}|{{ 2.50 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 10/4 }}|{{ 0.1 + 0.2 }}", "",
       "1|1.0|2.5|-0.0|0.3333333333333333|2.5|0.30000000000000004"},
      {"{{ true }}|{{ True }}|{{ false }}|[{{ none }}]|[{{ None }}]|[{{ undefined_var }}]", "",
       "true|true|false|[]|[]|[]"},
      {"{{ [1, 'a', none, true, 1.5, 2.0] }}|{{ {'a': 1, 'b': [1, 2]} }}|{{ [] }}|{{ {} }}", "",
       "[1, \"a\", null, true, 1.5, 2]|{\"a\": 1, \"b\": [1, 2]}|[]|{}"},
      {"{{ n }}|{{ f }}|{{ whole }}|{{ big }}|{{ tiny }}",
       "{\"n\":3,\"f\":2.5,\"whole\":2.0,\"big\":12345678901234567890,\"tiny\":1e-07}",
       "3|2.5|2|12345678901234567000|1e-7"},
      {"{{ 'a' ~ 1 ~ 1.0 ~ 1.5 ~ true }}|{{ 'a' + 2 }}|{{ [1, [2, 'x'], {'k': 1}] ~ '' }}", "",
       "a111.5true|a2|1,[2, \"x\"],{\"k\": 1}"},
      {"{{ \"dq \\\"x\\\"\" }}|{{ 'a' 'b' \"c\" }}|{{ '\\x41\\u00e9\\n' }}", "", "dq \"x\"|abc|Aé\n"},
  });
}

TEST(Jinja, Arithmetic) {
  expect_renders({
      {"{{ 1 + 2 * 3 - 4 / 2 }}|{{ (1 + 2) * 3 }}|{{ 2 ** 3 ** 2 }}|{{ 2 ** -1 }}|{{ 3 * 1.0 }}", "",
       "5.0|9|64|0.5|3.0"},
      {"{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7.0 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 7 % 2.5 }}|{{ 1 / 0 }}", "",
       "3|-4|3.0|-1|1|2.0|Infinity"},
      {"{{ -x }}|{{ -(-3) }}|{{ -true }}|{{ not 1 }}|{{ not [] }}|{{ [] or 'x' }}|{{ 0 and 'x' }}", "{\"x\":5}",
       "-5|3|-1|false|true|x|0"},
      {"{{ 1 == 1.0 }}|{{ 1 == '1' }}|{{ '' == 0 }}|{{ none == undefined_var }}|{{ true == 1 }}|{{ [1] == [1] }"
       "}|{{ m == m }}",
       "{\"m\":[1]}", "true|true|true|true|true|false|true"},
      {"{{ 1 < 2 }}|{{ 2 >= 2.5 }}|{{ 1 != 2 }}|{{ 1 if true else 2 }}|[{{ 1 if false }}]|{{ 'y' if none else '"
       "n' }}",
       "", "true|false|true|1|[]|n"},
  });
}

TEST(Jinja, Strings) {
  expect_renders({
      {"{{ 'A b_c d-e'|title }}|{{ 'hello WORLD'|capitalize }}|[{{ '  x \\n'|trim }}]|{{ 'ß'|upper }}|{{ 'ΑΣ ΣΑ"
       "'|lower }}",
       "", "A B_c D-E|Hello WORLD|[x]|SS|ας σα"},
      {"{{ s|length }}|{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s|upper }}", "{\"s\":\"日本語ab\"}",
       "5|日|b|本語|ba語本日|日本語AB"},
      {"{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ '  a  b c '.split() }}|{{ ' a b c'.split(none,"
       " 1) }}",
       "", "[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b,c\"]|[\"a\", \"b\", \"c\"]|[\"a\", \"b c\"]"},
      {"{{ 'abc'.startswith('a') }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith('bc') }}|{{ 'abc'.leng"
       "th }}",
       "", "true|true|true|3"},
      {"{{ 'aaa'.replace('a', 'b') }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'ab'.replace('', '-') }}|{{ 'aaa'|rep"
       "lace('a', 'c', count=1) }}",
       "", "bbb|bba|-a-b-|caa"},
      {"[{{ '  x '.strip() }}]|[{{ 'xx'.strip('x') }}]|[{{ '\\n x'.lstrip() }}]|[{{ 'x \\n'.rstrip() }}]|{{ 'hi"
       "'.upper() }}|{{ 'hi there'.title() }}",
       "", "[x]|[xx]|[x]|[x]|HI|Hi There"},
      {"{{ '3.7abc'|int }}|{{ '  -12px'|int }}|{{ 'abc'|int }}|{{ 'x'|int(7) }}|{{ '1e3'|float }}|{{ 'abc'|floa"
       "t(2.5) }}|{{ 3.7|int }}|{{ -3.2|int }}",
       "", "3|-12|0|7|1000.0|2.5|3|-4"},
      {"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|{{ 'a\\nb'|indent(width=1, first=true,"
       " blank=true) }}",
       "", "a\n    b\n\n    c|  a\n  b\n\n  c| a\n b"},
      {"{{ 'a' in 'abc' }}|{{ 'z' not in 'abc' }}|{{ 'abc'|join('-') }}|{{ 3.0|string }}|{{ true|string }}|{{ '"
       "x'|safe }}",
       "", "true|true|a-b-c|3.0|true|x"},
      {"{{ '<think>r</think>\\n\\nans'.split('</think>')[-1].lstrip('\\n') }}", "", "ans"},
  });
}

TEST(Jinja, Lists) {
  expect_renders({
      {"{{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a', 'C']|sort }}|{{ ['b', 'A', 'C']|sort(case_sensitive=true) }}|{{"
       " [3, 1, 2]|sort(reverse=true) }}",
       "", "[1, 2, 3]|[\"A\", \"a\", \"b\", \"C\"]|[\"A\", \"C\", \"b\"]|[3, 2, 1]"},
      {"{{ [1, 2, 2, 1.0, '1']|unique }}|{{ [1, 2]|reverse }}|{{ [1, 2]|first }}|{{ [1, 2]|last }}|{{ [1, 2]|le"
       "ngth }}|{{ [1, 2].length }}",
       "", "[1, 2, \"1\"]|[2, 1]|1|2|2|2"},
      {"{{ [1, [2, 3], none, 'a', 2.0]|join }}|{{ [1, 2, 3]|join(', ') }}|{{ [1, 2] + [3] }}|{{ [1, 2, 3][1:] }"
       "}|{{ [1, 2, 3, 4, 5][4:1:-2] }}",
       "", "12,3a2|1, 2, 3|[1, 2, 3]|[2, 3]|[5, 3]"},
      {"{{ 1 in [1, 2] }}|{{ 1.0 in [1, 2] }}|{{ '1' in [1, 2] }}|{{ 'a' in undefined_var }}|{{ x.0 }}{{ x[-1] "
       "}}|[{{ x[5] }}]",
       "{\"x\":[5,6]}", "true|true|false|false|56|[]"},
      {"{{ users|map(attribute='name')|join(',') }}|{{ users|selectattr('admin')|map(attribute='name')|list }}|"
       "{{ users|rejectattr('name', 'equalto', 'al')|length }}",
       "{\"users\":[{\"name\":\"al\",\"admin\":true},{\"name\":\"bo\"}]}", "al,bo|[\"al\"]|1"},
      {"{{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|list }}|{{ [{'a': 1}, {}]|map(attribute="
       "'a', default=0)|list }}",
       "", "[1, 2]|[1, 0]"},
      {"{{ ([]|first) is number }}|{% set e = []|last %}{{ e is defined }}|{{ ([]|first)|default('d') is mappin"
       "g }}",
       "", "false|false|false"},
  });
}

TEST(Jinja, Dicts) {
  expect_renders({
      {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{{ d|length"
       " }}",
       "{\"d\":{\"b\":1,\"a\":[1,2],\"2\":\"x\",\"10\":\"y\"}}", "2=x;10=y;b=1;a=[1, 2];|210ba|4"},
      {"{{ d.get('b') }}|{{ d.get('zz') }}|{{ d.get('zz', 5) }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d|"
       "items }}",
       "{\"d\":{\"b\":1,\"a\":2}}", "1||5|[\"b\", \"a\"]|[1, 2]|[[\"b\", 1], [\"a\", 2]]"},
      {"{{ d|dictsort }}|{{ d|dictsort(reverse=true) }}|{{ d|dictsort(by='value') }}|{{ d|dictsort(true) }}",
       "{\"d\":{\"b\":2,\"A\":1,\"a\":0}}",
       "[[\"A\", 1], [\"a\", 0], [\"b\", 2]]|[[\"b\", 2], [\"A\", 1], [\"a\", 0]]|[[\"a\", 0], [\"A\", 1], [\"b"
       "\", 2]]|[[\"A\", 1], [\"a\", 0], [\"b\", 2]]"},
      {"{{ 'a' in d }}|{{ 'z' not in d }}|{{ d.a.b }}{{ d['a']['b'] }}|{{ {'items': 3}.items }}|[{{ d.nope }}]",
       "{\"d\":{\"a\":{\"b\":1}}}", "true|true|11|3|[]"},
  });
}

TEST(Jinja, Tojson) {
  expect_renders({
      {"{{ v|tojson }}", "{\"v\":{\"a\":1,\"b\":[1,\"é\",null,true,1.5],\"c\":{}}}",
       "{\"a\": 1, \"b\": [1, \"é\", null, true, 1.5], \"c\": {}}"},
      {"{{ v|tojson(indent=2) }}", "{\"v\":{\"a\":[1,{\"b\":2}],\"c\":{},\"d\":[]}}",
       "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": {},\n  \"d\": []\n}"},
      {"{{ 'é😀\"\\\\\\n\\t'|tojson }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {'a': 1, 'b': 2}|tojson(separator"
       "s=(',', ':')) }}",
       "", "\"é😀\\\"\\\\\\n\\t\"|\"\\u00e9\\ud83d\\ude00\"|{\"a\":1,\"b\":2}"},
      {"{{ undefined_var|tojson }}|{{ {'a': undefined_var}|tojson }}|{{ {'a': undefined_var} }}|{{ 3.0|tojson }"
       "}|{{ none|tojson }}",
       "", "null|{\"a\": null}|{\"a\": undefined}|3|null"},
      {"{{ tools|tojson }}", "{\"tools\":[{\"z\":1,\"a\":2,\"5\":3,\"01\":4}]}",
       "[{\"5\": 3, \"z\": 1, \"a\": 2, \"01\": 4}]"},
  });
}

TEST(Jinja, Tests) {
  expect_renders({
      {"{{ x is defined }}|{{ y is defined }}|{{ y is undefined }}|{{ none is none }}|{{ x is not none }}|{{ x "
       "is number }}|{{ 1.5 is integer }}",
       "{\"x\":1}", "true|false|true|true|true|true|false"},
      {"{{ 1 is odd }}|{{ 2 is even }}|{{ 'a' is string }}|{{ [1] is iterable }}|{{ {} is mapping }}|{{ {} is s"
       "equence }}|{{ 'abc' is lower }}|{{ 'ABC' is upper }}",
       "", "true|true|true|true|true|true|true|true"},
      {"{{ true is true }}|{{ 1 is true }}|{{ false is false }}|{{ true is boolean }}|{{ range is callable }}|{"
       "{ m.content is none }}",
       "{\"m\":{\"content\":null}}", "true|false|true|true|true|true"},
  });
}

TEST(Jinja, Loops) {
  expect_renders({
      {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }"
       "}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.previtem.role if loop.previtem is defined }}/{{ loop.ne"
       "xtitem.role if loop.nextitem }};{% endfor %}",
       "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\" Hi \"}"
       ",{\"role\":\"assistant\",\"content\":null}]}",
       "10truefalse332/user;21falsefalse321system/assistant;32falsetrue310user/;"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}|{% for x in [1, 2, 3] if x > 1 %}{{ x }}{{ loop.index }}{"
       "% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}",
       "", "empty|2132|1234"},
      {"{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}|{% for x in [1, 2, "
       "3] %}a{% if x == 2 %}{% break %}{% endif %}b{% endfor %}",
       "", "13|ab"},
      {"{% for x in [1, 2] %}{% continue %}{% else %}no-iteration{% endfor %}|{% for i in range(3) %}{{ i }}{% "
       "if not loop.last %}, {% endif %}{% endfor %}|{{ range(1, 10, 3) }}|{{ range(3, 0, -1) }}",
       "", "no-iteration|0, 1, 2|[1, 4, 7]|[3, 2, 1]"},
      {"{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for i in [1] %}{% for j in [2] %}{{ loop.in"
       "dex }}{% endfor %}{{ loop.length }}{% endfor %}",
       "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\" Hi \"}"
       ",{\"role\":\"assistant\",\"content\":null}]}",
       "aus|11"},
  });
}

TEST(Jinja, SetAndNamespace) {
  expect_renders({
      {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}|{% set a, b = 1, 2 %}{{ a }}"
       "{{ b }}|{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]",
       "", "21|12|[block 2]"},
      {"{% set ns = namespace(x=1, found=false) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ "
       "ns.x }}{{ ns.found }}|{{ namespace({'a': 1}, b=2) }}",
       "", "4false|{\"a\": 1, \"b\": 2}"},
      {"{% if not flag is defined %}{% set flag = false %}{% endif %}{{ flag }}|{% set d = {'k': 'v'} %}{{ d.k "
       "}}|{% set t = (1, 2) %}{{ t[0] }}{{ t|length }}",
       "", "false|v|12"},
  });
}

TEST(Jinja, Macros) {
  expect_renders({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al"
       "', '?') }} {{ greet(name='Z', punct='.') }}",
       "", "Hi Bob! Hi Al? Hi Z."},
      {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}|{% macro f(n) %}{% "
       "if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
       "", "1[2, 3]{\"k\": 4}|321"},
      {"{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}inside{% endcall %}|{% macro each(xs) %}{% f"
       "or x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}",
       "", "[inside]|<1><2>"},
      {"{% set y = 3 %}{% macro m() %}{{ y }}{% endmacro %}{% set y = 4 %}{{ m() }}|{% filter upper %}hello {{ "
       "'x' }}{% endfilter %}",
       "", "4|HELLO X"},
  });
}

TEST(Jinja, WhitespaceControl) {
  expect_renders({
      {"a  {%- if true -%}  b  {%- endif -%}  c|a  {{- 'x' -}}  c|a {#- comment -#} b {# c #} d", "", "abc|axc|ab  d"},
      {"  {% if true %}\n  x\n  {% endif %}\n  y\n", "", "  x\n  y"},
      {"{% for i in range(2) %}\n  {{ i }}\n{% endfor %}\n\n{{ 'end' }}\n", "", "  0\n  1\n\nend"},
      {"line1\n    {%- generation %}gen{% endgeneration -%}\n   after", "", "line1genafter"},
      {"{%- for m in messages -%}\n{{- m.role -}}\n{%- endfor -%}\r\n  {% if true %}b{% endif %}",
       "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\" Hi \"}"
       ",{\"role\":\"assistant\",\"content\":null}]}",
       "systemuserassistantb"},
  });
}

TEST(Jinja, UnsupportedConstructsFailAtParseTime) {
  EXPECT_EQ(parse_error("{% extends 'base.html' %}"), "line 1: unsupported statement {% extends %}");
  EXPECT_EQ(parse_error("a\n{% import 'm.j2' as m %}"), "line 2: unsupported statement {% import %}");
  EXPECT_EQ(parse_error("\n\n{% raw %}x{% endraw %}"), "line 3: unsupported statement {% raw %}");
  EXPECT_EQ(parse_error("{% include 'x' %}"), "line 1: unsupported statement {% include %}");
  EXPECT_EQ(parse_error("x\n{{ s | wordcount }}"), "line 2: unsupported filter 'wordcount'");
  EXPECT_EQ(parse_error("{{ s|d('x') }}"), "line 1: unsupported filter 'd'");
  EXPECT_EQ(parse_error("{% if n is divisibleby(3) %}{% endif %}"), "line 1: unsupported test 'divisibleby'");
  EXPECT_EQ(parse_error("{% for x in xs %}\n{{ x }}"), "line 1: {% for %} is never closed (no {% endfor %})");
  EXPECT_EQ(parse_error("ok\n{% endif %}"), "line 2: unexpected {% endif %}");
  EXPECT_EQ(parse_error("{{ 1 + }}"), "line 1: unexpected '}}'");
  EXPECT_EQ(parse_error("{{ 'open }}"), "line 1: unexpected end of template inside a tag");
  EXPECT_EQ(parse_error("{% macro m(a=1, b) %}{% endmacro %}"),
            "line 1: non-default argument follows default argument");
  EXPECT_EQ(parse_error("\xff"), "template is not valid UTF-8 (byte 0)");
}

TEST(Jinja, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(render_error("{% for m in messages %}\n{{ raise_exception('Roles must alternate') }}{% endfor %}", {},
                         {{"messages", {1}}}),
            "line 2: Roles must alternate");
  EXPECT_EQ(render_error("a\n\n{{ 'x' ~ missing }}"), "line 3: Cannot perform operation ~ on undefined values");
  EXPECT_EQ(render_error("{{ nope() }}"), "line 1: Cannot call something that is not a function: got UndefinedValue");
  EXPECT_EQ(render_error("{% macro m(a) %}\n{{ a.x - 1 }}{% endmacro %}\n{{ m({'x': 'y'}) }}"),
            "line 2: Unknown operator \"-\" between StringValue and IntegerValue");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "line 1: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(render_error("{{ 'abc'.find('b') }}"),
            "line 1: Cannot call something that is not a function: got UndefinedValue");
  EXPECT_EQ(render_error("{{ x|upper }}", {}, {{"x", nullptr}}),
            "line 1: Cannot apply filter \"upper\" to type: NullValue");
  EXPECT_EQ(render_error("\n{% break %}"), "line 2: {% break %} outside a loop");
  EXPECT_EQ(render_error("{{ x }}", {}, {{"range", 1}}), "Variable already declared: range");
}

TEST(Jinja, StrftimeNowUsesTheGivenClock) {
  RenderOptions options;
  options.now = std::tm{};
  options.now->tm_year = 124, options.now->tm_mon = 6, options.now->tm_mday = 5, options.now->tm_hour = 9;
  options.now->tm_min = 3;
  auto t = Template::parse("{{ strftime_now('%Y-%m-%d %d %b %B %H:%M %% %A') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->render(nlohmann::json::object(), options);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "2024-07-05 05 Jul July 09:03 % %A");  // like the reference: only %Y %m %d %b %B %H %M %%
}

TEST(Jinja, KeyOrder) {
  auto t = Template::parse("{{ d|tojson }} {% for k in d %}{{ k }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  // render_ordered keeps insertion order, except that integer-like keys come first (JS property order).
  auto ordered = t->render_ordered(nlohmann::ordered_json::parse(R"({"d": {"b": 1, "a": 2, "10": 3, "2": 4}})"));
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(*ordered, R"({"2": 4, "10": 3, "b": 1, "a": 2} 210ba)");
  auto sorted = t->render(nlohmann::json::parse(R"({"d": {"b": 1, "a": 2}})"));  // nlohmann::json sorts keys
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(*sorted, R"({"a": 2, "b": 1} ab)");
}

TEST(Jinja, HostileTemplatesFailCleanly) {
  const std::string deep_parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_NE(parse_error(deep_parens).find("nested more than"), std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 3000; ++i) deep_ifs += "{% if true %}";
  for (int i = 0; i < 3000; ++i) deep_ifs += "{% endif %}";
  EXPECT_NE(parse_error(deep_ifs).find("nested more than"), std::string::npos);
  std::string long_chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) long_chain += " + 1";
  EXPECT_NE(parse_error(long_chain + " }}").find("nested too deeply"), std::string::npos);

  EXPECT_EQ(render_error("{% for i in range(100000000000) %}{% endfor %}"),
            "line 1: range() of more than 1048576 elements");
  EXPECT_EQ(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            "line 1: macro calls nested more than 100 levels deep");
  EXPECT_EQ(render_error("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                         "{% endfor %}"),
            "line 1: a string of 33554432 bytes exceeds the limit of 16777216");
  EXPECT_EQ(render_error("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}"
                         "{% endfor %}"),
            "line 1: list of more than 1048576 elements");
  EXPECT_EQ(render_error("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}"
                         "{% endfor %}"),
            "line 1: value nested more than 256 levels deep");
  // A namespace holding itself: printing it fails, and the cycle is broken when rendering ends (no leak).
  EXPECT_EQ(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
            "line 1: value nested too deeply to convert to JSON");
  RenderOptions small;
  small.max_work = 100000;
  EXPECT_EQ(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", small),
            "line 1: rendering exceeded its budget of 100000 evaluation steps");
  small.max_output_bytes = 1000;
  EXPECT_EQ(render_error("{% for i in range(1000) %}xx{% endfor %}", small),
            "line 1: output exceeds the limit of 1000 bytes");
  nlohmann::json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({deep});
  EXPECT_EQ(render_error("{{ x }}", {}, {{"x", deep}}), "context nested more than 256 levels deep");
}

}  // namespace
}  // namespace day0::jinja
