// Engine behaviour that the differential corpus does not pin down: located errors, the
// sandbox, the budget against template bombs, delimiter warnings, discovery and probes,
// and the `ckpt template` CLI.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "ckpt/jinja.h"
#include "ckpt/json.h"
#include "test_support.h"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

json::Value J(const char* text) {
  auto r = json::parse(text);
  EXPECT_TRUE(r.ok()) << text;
  return r.value;
}

jinja::RenderResult R(const std::string& tmpl, const char* ctx = "{}", jinja::Options o = {}) {
  return jinja::render_string(tmpl, J(ctx), o, "t.jinja");
}

std::string out(const std::string& tmpl, const char* ctx = "{}") {
  auto r = R(tmpl, ctx);
  EXPECT_TRUE(r.ok()) << tmpl << " -> " << (r.error ? r.error->format() : "");
  return r.output;
}

}  // namespace

TEST(JinjaEngine, PythonValuePrinting) {
  EXPECT_EQ(out("{{ [1, 'a', none, true] }}|{{ (1, 'x') }}|{{ (1,) }}|{{ {'a': 1} }}"), "[1, 'a', None, True]|(1, 'x')|(1,)|{'a': 1}");
  EXPECT_EQ(out("{{ none }}|{{ undefined_name }}|{{ 1.0 }}|{{ 1e20 }}|{{ 3/2 }}|{{ -7//2 }}|{{ -7%3 }}"), "None||1.0|1e+20|1.5|-4|2");
  EXPECT_EQ(out("{{ 1 == 1.0 }}{{ true == 1 }}{{ '1' == 1 }}{{ [1] == [1] }}"), "TrueTrueFalseTrue");
  EXPECT_EQ(out("{{ '😀x'|length }}{{ 'héllo'[1] }}{{ 'abc'[::-1] }}"), "2écba");
  EXPECT_EQ(out("{{ \"it's\" }}|{{ [\"it's\"] }}"), "it's|[\"it's\"]");
  EXPECT_EQ(out("{% set ns = namespace(a=1) %}{{ ns }}"), "<Namespace {'a': 1}>");
}

TEST(JinjaEngine, TojsonLikeJsonDumps) {
  EXPECT_EQ(out("{{ {'b': 1, 'a': [1.0, 'é', none]}|tojson }}"), "{\"b\": 1, \"a\": [1.0, \"é\", null]}");
  EXPECT_EQ(out("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
  EXPECT_EQ(out("{{ 'é<'|tojson(ensure_ascii=true) }}"), "\"\\u00e9<\"");
  EXPECT_EQ(out("{{ [1, {'a': 2}]|tojson(indent=2) }}"), "[\n  1,\n  {\n    \"a\": 2\n  }\n]");
  EXPECT_EQ(out("{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}"), "{\"a\":[1,2]}");
  EXPECT_FALSE(R("{{ nope|tojson }}").ok());
  EXPECT_FALSE(R("{{ [1]|map('string')|tojson }}").ok());  // generators are not serializable
}

TEST(JinjaEngine, UndefinedAndNone) {
  EXPECT_EQ(out("{{ none.x }}|{{ d.missing }}", R"({"d": {}})"), "|");
  for (const char* bad : {"{{ d.missing.x }}", "{{ nope.x }}", "{{ nope + 'a' }}", "{{ tools|default([])|length }}"}) {
    auto r = R(bad, R"({"d": {}, "tools": null})");
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(out("{{ tools is defined }}{{ tools is none }}", R"({"tools": null})"), "TrueTrue");
  EXPECT_EQ(out("{{ 'x' if false }}|{{ x is undefined }}"), "|True");
}

TEST(JinjaEngine, MarkupAndLazyFilters) {
  EXPECT_EQ(out("{{ ('<b>'|safe) + '<i>' }}"), "<b>&lt;i&gt;");
  EXPECT_FALSE(R("{{ [1,2]|select|length }}").ok());
  EXPECT_EQ(out("{{ [1,0,2]|select|list }}|{{ none|selectattr('a')|list }}"), "[1, 2]|[]");
  EXPECT_EQ(out("{{ 'hello wORLD'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a-b c'.title() }}"), "Hello World|Hello|A-B C");
}

TEST(JinjaEngine, StatementsMacrosLoops) {
  EXPECT_EQ(out("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ caller() if caller is defined }}{% endmacro %}{{ m(1) }}{{ m(1, b=3) }}"), "1213");
  EXPECT_EQ(out("{% macro m(x) %}[{{ caller(x) }}]{% endmacro %}{% call(v) m(5) %}v={{ v }}{% endcall %}"), "[v=5]");
  EXPECT_EQ(out("{% for a, b in [(1, 2), (3, 4)] if a > 1 %}{{ loop.index }}{{ a }}{{ b }}{% endfor %}"), "134");
  EXPECT_EQ(out("{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}"), "02");
  EXPECT_EQ(out("{% filter upper %}abc{% endfilter %}{% set x %}q{% endset %}{{ x }}"), "ABCq");
  EXPECT_EQ(out("{% generation %}g{% endgeneration %}"), "g");
  EXPECT_EQ(out("{% for x in 'ab' %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}|{% endfor %}"), "ab|ab|");
}

TEST(JinjaEngine, WhitespaceControlLikeJinja2) {
  EXPECT_EQ(out("a\n  {% if true %}\n  b\n  {% endif %}\nc\n"), "a\n  b\nc");
  EXPECT_EQ(out("a  {{- 'x' -}}  b"), "axb");
  EXPECT_EQ(out("  {{ 'x' }}"), "  x");  // lstrip_blocks never applies before {{
  EXPECT_EQ(out("a\r\nb"), "a\nb");
  EXPECT_EQ(out("{# c #}\nx"), "x");
}

TEST(JinjaEngine, SandboxRefusesMutationAndDunders) {
  for (const char* t : {"{% set l = [1] %}{{ l.append(2) }}", "{% set l = [1] %}{{ l.pop() }}", "{% set d = {} %}{{ d.clear() }}",
                        "{{ ''.__class__.__mro__ }}", "{{ lipsum.__globals__['os'] }}", "{{ range(100001)|length }}"}) {
    auto r = R(t);
    ASSERT_FALSE(r.ok()) << t;
  }
  EXPECT_EQ(R("{% set l = [1] %}{{ l.pop() }}").error->type, "SecurityError");
  EXPECT_EQ(R("{{ ''.__class__.__mro__ }}").error->type, "SecurityError");
  EXPECT_EQ(R("{{ range(100001)|length }}").error->type, "OverflowError");
}

TEST(JinjaEngine, ParseErrorsAreLocated) {
  auto r = R("line one\n{{ foo(}}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->phase, jinja::Error::Phase::parse);
  EXPECT_EQ(r.error->line, 2u);
  EXPECT_GT(r.error->column, 1u);
  EXPECT_EQ(r.error->source, "t.jinja");

  // an unclosed block is reported at its opening tag
  r = R("x\n\n  {% if a %}\nbody\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->line, 3u);
  EXPECT_NE(r.error->message.find("endif"), std::string::npos);

  // unknown filters/tests fail when compiling, outside if-blocks, as jinja2 does
  r = R("{% for x in y %}{{ x|nosuchfilter }}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->phase, jinja::Error::Phase::parse);
  EXPECT_EQ(r.error->type, "TemplateAssertionError");
  EXPECT_TRUE(R("{% if false %}{{ x|nosuchfilter }}{% endif %}").ok());
  EXPECT_FALSE(R("{% if true %}{{ 1|nosuchfilter }}{% endif %}").ok());

  // columns count code points
  r = R("é{{ 1 + }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->line, 1u);
  EXPECT_EQ(r.error->column, 9u);
  EXPECT_NE(r.error->format().find("t.jinja:1:9"), std::string::npos);
}

TEST(JinjaEngine, RenderErrorsAreLocatedAndDistinct) {
  auto r = R("ok\n{{ raise_exception('boom') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->phase, jinja::Error::Phase::render);
  EXPECT_EQ(r.error->type, "TemplateError");
  EXPECT_EQ(r.error->message, "boom");
  EXPECT_EQ(r.error->line, 2u);
}

TEST(JinjaEngine, DelimiterLikeTextIsFlagged) {
  auto r = R("{- bos_token -}}\n{{ messages[0].content }}", R"({"bos_token": "<s>", "messages": [{"content": "hi"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.output, "{- bos_token -}}\nhi");
  ASSERT_EQ(r.delimiter_warnings.size(), 1u);  // one broken tag, reported whole
  EXPECT_EQ(r.delimiter_warnings[0].fragment, "{- bos_token -}}");
  EXPECT_EQ(r.delimiter_warnings[0].line, 1u);
  EXPECT_EQ(r.delimiter_warnings[0].column, 1u);
  // an unbalanced }} and a stray %} as well; balanced JSON braces are not flagged
  EXPECT_EQ(R("{{ 'a' }}}}").delimiter_warnings.size(), 1u);
  EXPECT_EQ(R("x %}").delimiter_warnings.size(), 1u);
  EXPECT_TRUE(R("{\"a\": {\"b\": 1}}").delimiter_warnings.empty());
  // a fragment in a branch that never renders does not reach the output
  EXPECT_TRUE(R("{% if false %}{- x -}}{% endif %}").delimiter_warnings.empty());
}

TEST(JinjaEngine, BudgetStopsTemplateBombs) {
  jinja::Options o;
  o.max_steps = 2'000'000;
  auto start = std::chrono::steady_clock::now();
  for (const char* t : {"{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
                        "{{ 'A' * 1000000000 }}", "{% macro x() %}{{ x() }}{% endmacro %}{{ x() }}",
                        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
                        "{{ 9223372036854775807 + 1 }}"}) {
    auto r = R(t, "{}", o);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_GT(r.error->line, 0u) << t;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto r = R(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->phase, jinja::Error::Phase::parse);
}

TEST(JinjaEngine, HostileBytesNeverCrash) {
  // truncated tags, stray delimiters, invalid UTF-8, NULs: parse or fail cleanly
  const std::string samples[] = {"{{", "{%", "{#", "{{ 'abc", "{% for %}", "{% if %}{% else %}{% else %}{% endif %}",
                                 std::string("\xff\xfe{{ '\xc3' }}\0x", 12), "{{ x[ }}", "{{ ((((( }}", "{% endfor %}",
                                 "{% macro m(a=1, b) %}{% endmacro %}", "{{ '\\x4' }}", "{{ 0x }}", "{% set 1 = 2 %}",
                                 "{{ a.b.c.d.e.f }}", "{% raw %}{{ x }}", "{{ {1: 2}[1] }}{{ [1,2][5] }}"};
  for (auto& s : samples) {
    auto r = jinja::render_string(s, J("{}"));
    if (!r.ok()) {
      EXPECT_FALSE(r.error->message.empty()) << s;
    }
  }
  // deterministic pseudo-random mutations of a real-looking template
  std::string base = "{%- for m in messages -%}{{ '<|' + m['role'] + '|>' }}{{ m.content|trim }}{% if loop.last %}!{% endif %}{%- endfor -%}";
  uint32_t seed = 12345;
  for (int i = 0; i < 3000; ++i) {
    std::string t = base;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1103515245 + 12345;
      size_t pos = (seed >> 8) % t.size();
      seed = seed * 1103515245 + 12345;
      t[pos] = "{}%#-+()[]'\"|.x \n"[(seed >> 8) % 17];
    }
    auto r = jinja::render_string(t, J(R"({"messages": [{"role": "user", "content": " hi "}]})"));
    if (!r.ok()) {
      EXPECT_GT(r.error->message.size(), 0u);
    }
  }
}

// Templates whose values form reference cycles: a macro holds the frame it was defined in,
// which holds the macro; namespaces and loop objects hold values assigned after they were
// created. The engine must free all of it when the render ends, also when the render fails.
// Outside a sanitizer build this checks the outputs; under LeakSanitizer (CKPT_SANITIZE=ON)
// the test process fails at exit if any of these cycles leaks again.
TEST(JinjaEngine, ReferenceCyclesAreFreed) {
  const char* ctx = R"({"tree": [{"n": "a", "kids": [{"n": "b", "kids": []}]}]})";
  struct Case {
    const char* tmpl;
    const char* want;
  } cases[] = {
      // macro defined and called in a loop (its closure is the loop frame that holds it)
      {"{% for i in range(3) %}{% macro m(x) %}{{ x }}{{ i }}{% endmacro %}{{ m(i) }}{% endfor %}", "001122"},
      // macro defined inside a macro
      {"{% macro outer(n) %}{% macro inner() %}<{{ n }}>{% endmacro %}{{ inner() }}{% endmacro %}{{ outer(1) }}{{ outer(2) }}", "<1><2>"},
      // namespace captured in a macro and holding that macro, inside another macro's frame
      {"{% macro outer() %}{% set ns = namespace(v=1) %}{% macro get() %}{{ ns.v }}{% endmacro %}{% set ns.get = get %}"
       "{% set ns.v = 2 %}{{ ns.get() }}{% endmacro %}{{ outer() }}",
       "2"},
      // a namespace holding itself, at the top level
      {"{% set ns = namespace() %}{% set ns.me = ns %}{% set ns.x = 3 %}{{ ns.me.me.x }}", "3"},
      // recursive macro, defined in a loop
      {"{% for k in [3] %}{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(k) }}{% endfor %}", "321"},
      // caller: the call block's macro is created per iteration in the loop frame
      {"{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% for i in range(2) %}{% call wrap() %}{{ i }}{% endcall %}{% endfor %}", "[0][1]"},
      // a caller stored where it can reach itself
      {"{% set ns = namespace() %}{% macro keep() %}{% set ns.c = caller %}{{ caller() }}{% endmacro %}"
       "{% call keep() %}c{% endcall %}{{ ns.c() }}",
       "cc"},
      // loop.changed() remembering the loop object itself
      {"{% for x in [1, 2] %}{{ loop.changed(loop) }}{% endfor %}", "TrueFalse"},
      // builtins holding values: a cycler, a joiner and loop.cycle kept in the namespace they hold
      {"{% set ns = namespace() %}{% set ns.c = cycler(ns, 1) %}{{ ns.c.current is sameas ns }}", "True"},
      {"{% set ns = namespace() %}{% set ns.j = joiner(ns) %}{{ ns.j() }}|{{ ns.j() is sameas ns }}", "|True"},
      {"{% for x in [1] %}{% set ns = namespace() %}{% set ns.f = loop.cycle %}{% set ns.l = loop %}{{ ns.f('a', 'b') }}{% endfor %}", "a"},
      // recursive loop
      {"{% for t in tree recursive %}{{ t.n }}{{ loop(t.kids) }}{% endfor %}", "ab"},
      // cycles left behind by a render that fails
      {"{% macro m() %}{% endmacro %}{% set ns = namespace() %}{% set ns.m = m %}{{ raise_exception('stop') }}", nullptr},
      {"{% for i in range(2) %}{% macro m() %}{% endmacro %}{{ i }}{{ undefined_thing.x }}{% endfor %}", nullptr},
  };
  for (auto& c : cases) {
    auto r = R(c.tmpl, ctx);
    if (c.want) {
      ASSERT_TRUE(r.ok()) << c.tmpl << " -> " << r.error->format();
      EXPECT_EQ(r.output, c.want) << c.tmpl;
    } else {
      EXPECT_FALSE(r.ok()) << c.tmpl;
    }
  }
}

TEST(JinjaProbes, DiscoveryOrderAndSpecialTokens) {
  json::Value cfg = J(R"({"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>", "pad_token": null,
                          "additional_special_tokens": ["<a>"], "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  jinja::DiscoveryInput in;
  in.tokenizer_config = &cfg;
  auto d = jinja::discover_templates(in);
  ASSERT_EQ(d.templates.size(), 2u);
  EXPECT_EQ(d.templates[1].name, "tool_use");
  EXPECT_EQ(d.templates[1].origin, "tokenizer_config.json: chat_template[name=tool_use]");
  in.jinja_files = {{"chat_template.jinja", "F"}};
  d = jinja::discover_templates(in);
  ASSERT_EQ(d.templates.size(), 1u);  // separate files win
  EXPECT_EQ(d.templates[0].text, "F");
  auto tok = jinja::special_tokens(&cfg);
  EXPECT_EQ(tok.dump(), R"({"bos_token":"<s>","eos_token":"</s>","additional_special_tokens":["<a>"]})");
}

TEST(JinjaProbes, FindingsForTheIncidents) {
  auto codes = [](const std::vector<Finding>& fs) {
    std::string s;
    for (auto& f : fs) s += f.code + ":" + (f.severity == Severity::error ? "error" : f.severity == Severity::warning ? "warning" : "info") + " ";
    return s;
  };
  jinja::DiscoveryInput in;
  EXPECT_EQ(codes(jinja::chat_template_findings(in)), "CT007:info ");
  in.jinja_files = {{"chat_template.jinja", "{- bos_token -}}{% for m in messages %}{{ m.content }}{% endfor %}"}};
  auto f = jinja::chat_template_findings(in);
  // The seeds' incident is one error for the whole broken tag, naming the probe and the fix.
  EXPECT_EQ(codes(f), "CT006:error ");
  EXPECT_NE(f[0].message.find("chat_template.jinja:1:1: broken tag '{- bos_token -}}'"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("(probe 'bare')"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].hint.find("write '{{- bos_token -}}'"), std::string::npos) << f[0].hint;
  EXPECT_NE(f[0].hint.find("SwiftLM"), std::string::npos) << f[0].hint;
  in.jinja_files = {{"chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}{% if tools %}{{ tools[0].nope.x }}{% endif %}"}};
  EXPECT_EQ(codes(jinja::chat_template_findings(in)), "CT003:warning CT005:warning ");
  in.jinja_files = {{"chat_template.jinja", "{% if enable_thinking %}{{ raise_exception('no') }}{% endif %}ok"}};
  EXPECT_EQ(codes(jinja::chat_template_findings(in)), "CT004:warning ");
  in.jinja_files = {{"chat_template.jinja", "{{ messages[0].content.nope.x }}"}};
  EXPECT_EQ(codes(jinja::chat_template_findings(in)), "CT002:error ");
  in.jinja_files = {{"chat_template.jinja", "{% for m in messages %}\n{{ m.content }"}};
  f = jinja::chat_template_findings(in);
  EXPECT_EQ(codes(f), "CT001:error ");
  EXPECT_NE(f[0].message.find("chat_template.jinja:2:"), std::string::npos);
  in.jinja_files = {{"chat_template.jinja", "{{ ''.__class__ }}{{ messages|length }}"}};
  EXPECT_EQ(codes(jinja::chat_template_findings(in)), "CT009:error ");
}

// Delimiters that are provably meant are not flagged; stray ones in template text are errors.
TEST(JinjaProbes, BrokenDelimitersOnlyWhereTheyAreNotMeant) {
  auto ct006 = [](const std::string& text) {
    jinja::DiscoveryInput in;
    in.jinja_files = {{"chat_template.jinja", text}};
    std::vector<std::string> out;
    for (auto& f : jinja::chat_template_findings(in))
      if (f.code == "CT006") out.push_back(f.message);
    return out;
  };
  const std::string msgs = "{% for m in messages %}{{ m.content }}{% endfor %}";
  EXPECT_TRUE(ct006("{% raw %}{- x -}} {{ y }} %}{% endraw %}" + msgs).empty());      // raw: meant
  EXPECT_TRUE(ct006("{{ '{- not a tag -}} %} }}' }}" + msgs).empty());                // a printed string constant
  EXPECT_TRUE(ct006("Reply as {\"name\": \"f\", \"arguments\": {\"a\": 1}}\n" + msgs).empty());  // JSON in text
  EXPECT_TRUE(ct006("e^{-x} and {-1} and {+2}" + msgs).empty());                       // prose braces
  EXPECT_TRUE(ct006("{#- a comment with -}} and {- inside -#}" + msgs).empty());        // comments never reach a prompt
  EXPECT_EQ(ct006(msgs + "{%- if add_generation_prompt %}<|assistant|>{% endif -%}}").size(), 0u);  // a lone '}' is text
  auto one = ct006(msgs + "\n{{ eos_token -}}}");  // '}' after a complete tag: plain text
  EXPECT_TRUE(one.empty());
  auto stray = ct006("<s>" + msgs + " -%}");
  ASSERT_EQ(stray.size(), 1u);
  EXPECT_NE(stray[0].find("'-%}'"), std::string::npos) << stray[0];
  auto opener = ct006("{% if true %}{- bos_token{% endif %}" + msgs);
  ASSERT_EQ(opener.size(), 1u);
  EXPECT_NE(opener[0].find("'{-'"), std::string::npos) << opener[0];
  auto block = ct006("{- if true -%}x" + msgs);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_NE(block[0].find("broken tag '{- if true -%}'"), std::string::npos) << block[0];
}

// Real templates print braces on purpose (JSON examples in tool prompts, Python-style dict
// text): none of the 216 may get a CT006.
TEST(JinjaProbes, RealCorpusTemplatesHaveNoBrokenDelimiters) {
  CKPT_REQUIRE_CORPUS();
  int checked = 0, with_json_text = 0;
  for (auto& e : fs::recursive_directory_iterator(test::corpus_dir() / "templates")) {
    if (e.path().extension() != ".jinja") continue;
    const std::string text = test::read_text(e.path());
    if (text.find("{\"") != std::string::npos) ++with_json_text;
    jinja::DiscoveryInput in;
    in.jinja_files = {{"chat_template.jinja", text}};
    for (auto& f : jinja::chat_template_findings(in)) EXPECT_NE(f.code, "CT006") << e.path() << ": " << f.message;
    ++checked;
  }
  EXPECT_EQ(checked, 216);
  EXPECT_GT(with_json_text, 10);  // the set does exercise templates that print JSON braces
}

TEST(JinjaProbes, RealCorpusTemplatesPassTheBareProbe) {
  CKPT_REQUIRE_CORPUS();
  auto dir = test::corpus_dir() / "templates/llama.cpp";
  int checked = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jinja") continue;
    jinja::DiscoveryInput in;
    in.jinja_files = {{"chat_template.jinja", test::read_text(e.path())}};
    for (auto& f : jinja::chat_template_findings(in)) EXPECT_NE(f.code, "CT001") << e.path() << ": " << f.message;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(TemplateCli, RenderPrintsExactlyTheOutput) {
  test::TempDir dir;
  test::write_text(dir / "t.jinja", "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\n");
  test::write_text(dir / "ctx.json", R"({"messages": [{"role": "user", "content": "héllo"}], "bos_token": "<B>"})");
  auto r = test::run_ckpt({"template", "render", (dir / "t.jinja").string(), "--context", (dir / "ctx.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<B>héllo");

  // a model directory: special tokens merged under the context (context keys win)
  fs::create_directories(dir / "model");
  test::write_text(dir / "model/tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{{ bos_token }}|{{ eos_token }}"})");
  r = test::run_ckpt({"template", "render", (dir / "model").string(), "--context", (dir / "ctx.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<B>|</s>");

  test::write_text(dir / "bad.jinja", "ok\n{% if x %}\n{{ y }");
  r = test::run_ckpt({"template", "render", (dir / "bad.jinja").string(), "--context", (dir / "ctx.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("bad.jinja:3:"), std::string::npos) << r.err;
}

TEST(TemplateCli, CheckRunsTheProbes) {
  test::TempDir dir;
  test::write_text(dir / "tokenizer_config.json", R"({"bos_token": "<s>", "chat_template": "{- bos_token -}}\n{% for m in messages %}{{ m.content }}{% endfor %}"})");
  auto r = test::run_ckpt({"template", "check", dir.path().string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a broken tag is an error
  EXPECT_NE(r.out.find("CT006 error"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer_config.json: chat_template:1:1"), std::string::npos) << r.out;
  test::write_text(dir / "chat_template.jinja", "{{ messages[0].content.x.y }}");
  r = test::run_ckpt({"template", "check", dir.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("CT002"), std::string::npos) << r.out;
}
