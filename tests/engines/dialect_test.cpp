// The template dialect models: each rule on the construct it is about, with the location and
// the engine's own error text where the specs record it (template-dialects.md §1, §2, §4).
#include <gtest/gtest.h>

#include "ckpt/engines.h"

namespace ckpt::engines {
namespace {

Dialect dialect_of(const std::string& spec) {
  std::string err;
  auto p = find_profile(spec, &err);
  EXPECT_TRUE(p) << err;
  return p ? p->dialect : Dialect{};
}

const DialectIssue* refusal(const std::string& engine, const std::string& text, DialectPrediction* keep) {
  *keep = predict_dialect(dialect_of(engine), text);
  return keep->first_refusal();
}

TEST(engines_dialect, incident_is_a_parse_error_for_swiftlm_pinned_and_text_for_others) {
  const std::string t = "{- bos_token -}}\n{% for m in messages %}{{ m['content'] }}{% endfor %}";
  DialectPrediction p;
  const DialectIssue* r = refusal("swiftlm", t, &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Unexpected token type: closeExpression')");
  EXPECT_EQ(r->line, 1u);
  EXPECT_EQ(r->column, 14u);
  EXPECT_FALSE(p.rewritten.empty()) << "the global -}} rewrite applies in every v2 version";
  // 2.4.0 lexes the bare }} as text but still rewrites it (renders differently).
  r = refusal("swiftlm@2.4.0", t, &p);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(p.rewritten.substr(0, 16), "{- bos_token }}{") << "the '-' and the newline are lost";
  ASSERT_FALSE(p.issues.empty());
  EXPECT_EQ(p.issues[0].kind, DialectIssue::Kind::renders_differently);
  // @huggingface/jinja 0.5.11 and llama.cpp keep the text verbatim (template-dialects.md §4).
  EXPECT_EQ(refusal("transformers.js", t, &p), nullptr);
  EXPECT_TRUE(p.rewritten.empty());
  EXPECT_EQ(refusal("llama.cpp", t, &p), nullptr);
  // ...but @huggingface/jinja up to 0.5.2 rewrote -}} globally too.
  EXPECT_EQ(refusal("transformers.js@0.5.2", t, &p), nullptr);
  EXPECT_FALSE(p.rewritten.empty());
}

TEST(engines_dialect, swift_bare_closers_in_text) {
  DialectPrediction p;
  // Command R7B: JSON text in the template (swift-jinja #63).
  const DialectIssue* r = refusal("swiftlm", "Use {\"parameters\": {}} here{{ x }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Unexpected token type: closeExpression')");
  EXPECT_EQ(r->column, 21u);
  r = refusal("swiftlm", "50%} done", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Unexpected token type: closeStatement')");
  r = refusal("swiftlm", "a #} b", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, DialectIssue::Kind::hangs);
  EXPECT_EQ(refusal("swiftlm@2.4.0", "Use {\"parameters\": {}} here", &p), nullptr);
  // Inside tags the closers are the tag's: nothing to report.
  EXPECT_EQ(refusal("swiftlm", "{{ {'a': {'b': 1}} }}{# c #}{% if x %}y{% endif %}", &p), nullptr);
  EXPECT_EQ(refusal("swiftlm", "{{ '}}' }}", &p), nullptr) << "a string literal in a tag is not text";
}

TEST(engines_dialect, swift_statements_and_expressions) {
  DialectPrediction p;
  const DialectIssue* r = refusal("swiftlm", "{% if messages|length % 2 == 0 %}x{% endif %}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Expected '%}' after if condition.. Got modulo instead')");
  EXPECT_EQ(refusal("swiftlm", "{% if (messages|length) % 2 == 0 %}x{% endif %}", &p), nullptr);
  EXPECT_EQ(refusal("swiftlm", "{{ messages|length + 1 }}", &p), nullptr) << "'+' after a filter works";
  r = refusal("swiftlm", "{% for m in a + [1] %}{{ m }}{% endfor %}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Expected '%}' after for loop.. Got plus instead')");
  EXPECT_EQ(refusal("swiftlm@2.3.6", "{% for m in a + [1] %}{{ m }}{% endfor %}", &p), nullptr);
  EXPECT_EQ(refusal("swiftlm", "{% for m in range(n + 1) %}{{ m }}{% endfor %}", &p), nullptr);
  r = refusal("swiftlm", "{% raw %}{{ x }}{% endraw %}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Unknown statement: raw')");
  r = refusal("swiftlm@2.0.0", "{% generation %}x{% endgeneration %}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "parser('Unknown statement: generation')");
  EXPECT_EQ(refusal("swiftlm@2.1.0", "{% generation %}x{% endgeneration %}", &p), nullptr);
  EXPECT_NE(refusal("swiftlm", "{{ messages.0.role }}", &p), nullptr);
  EXPECT_NE(refusal("swiftlm", "{% if 2 is in [1, 2] %}y{% endif %}", &p), nullptr);
  EXPECT_NE(refusal("swiftlm", "{%+ if x %}y{% endif %}", &p), nullptr);
  EXPECT_NE(refusal("swiftlm", "{% for n in t recursive %}{% endfor %}", &p), nullptr);
}

TEST(engines_dialect, hf_jinja_and_llama_cpp_rejections) {
  DialectPrediction p;
  const DialectIssue* r = refusal("transformers.js", "{{ 3 is divisibleby 3 }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Parser Error: Expected closing expression token. NumericLiteral !== CloseExpression.");
  r = refusal("llama.cpp", "{{ 3 is divisibleby 3 }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Parser Error: Expected }} (Got 3)");
  EXPECT_NE(refusal("transformers.js", "{{ 'yes' if x is divisibleby(2) }}", &p), nullptr);
  EXPECT_EQ(refusal("llama.cpp", "{{ 'yes' if x is divisibleby(2) }}", &p), nullptr);
  EXPECT_EQ(refusal("llama.cpp", "{{ x is defined and y is not none }}", &p), nullptr);
  r = refusal("llama.cpp", "{{ 1e3 }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Parser Error: Expected }} (Got e3)");
  r = refusal("transformers.js", "{{ 'a\\d' }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Unexpected escaped character: d");
  EXPECT_EQ(refusal("transformers.js", "{{ '\\u00e9' }}", &p), nullptr) << "0.5.11 added \\u";
  EXPECT_NE(refusal("transformers.js@0.5.10", "{{ '\\u00e9' }}", &p), nullptr);
  r = refusal("llama.cpp", "{{ '\\u00e9' }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "lexer: unknown escape character \\u");
  r = refusal("llama.cpp", "{{ 7 // 2 }}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Unexpected token: / of type 22");
  EXPECT_EQ(refusal("transformers.js", "{{ 7 // 2 }}", &p), nullptr);
  r = refusal("llama.cpp", "{% if a or -4 in b %}x{% endif %}", &p);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->engine_error, "Unexpected token: - of type 21");
  EXPECT_EQ(refusal("llama.cpp", "{{ (a - 1) * -2 }}", &p), nullptr);
  for (const char* e : {"transformers.js", "llama.cpp"}) {
    EXPECT_NE(refusal(e, "{% with a = 1 %}{{ a }}{% endwith %}", &p), nullptr) << e;
    EXPECT_NE(refusal(e, "{% for n in t recursive %}{% endfor %}", &p), nullptr) << e;
    EXPECT_NE(refusal(e, "  {%+ if true %}x{% endif %}", &p), nullptr) << e;
    EXPECT_EQ(refusal(e, "{%- generation -%}x{%- endgeneration -%}", &p), nullptr) << e;
  }
  EXPECT_NE(refusal("transformers.js@0.5.7", "{%- generation -%}x{%- endgeneration -%}", &p), nullptr);
  EXPECT_EQ(refusal("transformers.js@0.5.7", "{% generation %}x{% endgeneration %}", &p), nullptr);
}

TEST(engines_dialect, python_reference_has_no_dialect_issues) {
  auto p = predict_dialect(dialect_of("transformers"), "{- bos_token -}}{% raw %}x{% endraw %}");
  EXPECT_TRUE(p.issues.empty());
  EXPECT_EQ(p.first_refusal(), nullptr);
}

}  // namespace
}  // namespace ckpt::engines
