// Regression tests for the fuzz_jinja inputs of fuzz/crashes/README.md: templates whose
// string or list results escaped the output budget (unbounded allocation, wrapped size
// checks, signed overflow). Each must now stop quickly with a located render error under the
// default limits (or, where Python gives a result, give that result without UB).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "ckpt/jinja.h"
#include "ckpt/json.h"

using namespace ckpt;

namespace {

using Clock = std::chrono::steady_clock;

jinja::RenderResult render(const std::string& tmpl) {
  auto ctx = json::parse("{}");
  EXPECT_TRUE(ctx.ok());
  return jinja::render_string(tmpl, ctx.value, jinja::Options{}, "t.jinja");
}

// Renders with the default limits; expects a located render error within 2 s.
void expect_budget_error(const std::string& tmpl) {
  auto start = Clock::now();
  auto r = render(tmpl);
  auto took = Clock::now() - start;
  ASSERT_FALSE(r.ok()) << tmpl << " rendered " << r.output.size() << " bytes";
  EXPECT_EQ(r.error->phase, jinja::Error::Phase::render) << r.error->format();
  EXPECT_EQ(r.error->type, "BudgetExceeded") << r.error->format();
  EXPECT_GT(r.error->line, 0u) << r.error->format();
  EXPECT_LT(took, std::chrono::seconds(2)) << tmpl;
}

std::string ok_out(const std::string& tmpl) {
  auto r = render(tmpl);
  EXPECT_TRUE(r.ok()) << tmpl << " -> " << (r.error ? r.error->format() : "");
  return r.output;
}

}  // namespace

// fuzz/crashes/fuzz_jinja/timeout-replace-empty-old-long-new.jinja
TEST(JinjaBudgetRegression, ReplaceEmptyOldLongNew) {
  expect_budget_error(R"({{ ("a" * 100000) | replace("", "x" * 100000) | length }})");
  expect_budget_error(R"({{ ("ab" * 100000).replace("b", "x" * 100000) | length }})");
  EXPECT_EQ(ok_out(R"({{ "abc" | replace("", "-") }}|{{ "abc".replace("", "-", 2) }}|{{ "aaa".replace("a", "bb", 2) }})"),
            "-a-b-c-|-a-bc|bbbba");
}

// fuzz/crashes/fuzz_jinja/timeout-indent-string-many-lines.jinja
TEST(JinjaBudgetRegression, IndentStringManyLines) {
  expect_budget_error(R"({{ ("a\n" * 100000) | indent("x" * 100000) | length }})");
  expect_budget_error(R"({{ "a\nb" | indent(9223372036854775807) }})");
  EXPECT_EQ(ok_out(R"({{ "a\n\nb" | indent(2, true) }}|{{ "a\n\nb" | indent("> ", blank=true) }})"), "  a\n\n  b|a\n> \n> b");
}

// fuzz/crashes/fuzz_jinja/timeout-batch-fill-huge-count.jinja
TEST(JinjaBudgetRegression, BatchFillHugeCount) {
  expect_budget_error(R"({{ ([1] | batch(1000000000000, "x") | list) | length }})");
  expect_budget_error(R"({{ ([1] | batch(9223372036854775807, "x") | list) | length }})");
  EXPECT_EQ(ok_out(R"({{ [1, 2, 3] | batch(2, 0) | list }}|{{ ([1] | batch(1000000000000) | list) }})"), "[[1, 2], [3, 0]]|[[1]]");
}

// fuzz/crashes/fuzz_jinja/timeout-slice-huge-count.jinja
TEST(JinjaBudgetRegression, SliceHugeCount) {
  expect_budget_error(R"({{ ([1] | slice(1000000000000) | list) | length }})");
  expect_budget_error(R"({{ ([1] | slice(9223372036854775807) | list) | length }})");
  EXPECT_EQ(ok_out(R"({{ [1, 2, 3] | slice(2) | list }}|{{ [1] | slice(3) | list }})"), "[[1, 2], [3]]|[[1], [], []]");
}

// fuzz/crashes/fuzz_jinja/timeout-center-width-times-fill-overflow.jinja
TEST(JinjaBudgetRegression, CenterWidthTimesFillOverflow) {
  // Python rejects a multi-character fill before looking at the width.
  auto r = render(R"({{ "a".center(4611686018427387904, "abcd") | length }})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "TypeError") << r.error->format();
  expect_budget_error(R"({{ "a".center(4611686018427387904, "é") | length }})");
  expect_budget_error(R"({{ "a".ljust(9223372036854775807) | length }})");
  expect_budget_error(R"({{ "a" | center(9223372036854775807) }})");
  EXPECT_EQ(ok_out(R"({{ "ab".center(5, "*") }}|{{ "é".rjust(3, "é") }}|{{ "-7".zfill(4) }})"), "**ab*|ééé|-007");
}

// fuzz/crashes/fuzz_jinja/ubsan-truncate-length-overflow.jinja: Python compares big ints,
// so the string is returned as is.
TEST(JinjaBudgetRegression, TruncateLengthOverflow) {
  EXPECT_EQ(ok_out(R"({{ "abc" | truncate(9223372036854775807) }})"), "abc");
  EXPECT_EQ(ok_out(R"({{ "abc" | truncate(9223372036854775807, leeway=9223372036854775807) }})"), "abc");
  EXPECT_EQ(ok_out(R"({{ "hello world foo" | truncate(9, leeway=0) }})"), "hello...");
}

// str.format shares the defects of `%` (width/precision overflow, 512-byte float buffer).
TEST(JinjaBudgetRegression, StrFormatWidthAndPrecision) {
  expect_budget_error(R"({{ "{:2000000000}".format("a") | length }})");
  expect_budget_error(R"({{ "{:99999999999999999999999}".format("a") | length }})");
  expect_budget_error(R"({{ "{:.2000000000f}".format(1.5) | length }})");
  expect_budget_error(R"({{ "{:.99999999999999999999f}".format(1.5) | length }})");
  EXPECT_EQ(ok_out(R"({{ "{:.600f}".format(1.5) | length }}|{{ "{:>5}".format("ab") }}|{{ "{:*^6.2f}".format(1.0) }})"), "602|   ab|*1.00*");
  expect_budget_error(R"({{ ("a\t" * 100).expandtabs(100000000) | length }})");
}

// The four inputs below are defects of the binary `*` and `%` operators, which live in
// src/jinja/interp.cpp (Interp::binop, Interp::percent_format, fmt_float_fixed) and call no
// helper of filters.cpp/value.cpp. They stay in fuzz/crashes/fuzz_jinja/ until interp.cpp is
// fixed; enable each test with its fix (as written they may hang or run into UB).
// fuzz/crashes/fuzz_jinja/timeout-list-repeat-overflow.jinja
TEST(JinjaBudgetRegression, DISABLED_ListRepeatOverflow) {
  expect_budget_error(R"({{ ([1, 2] * 1152921504606846976) | length }})");
}
// fuzz/crashes/fuzz_jinja/ubsan-format-width-int-overflow.jinja
TEST(JinjaBudgetRegression, DISABLED_PercentFormatWidthIntOverflow) {
  expect_budget_error(R"({{ "%99999999999s" % "a" }})");
}
// fuzz/crashes/fuzz_jinja/timeout-format-width-2g.jinja
TEST(JinjaBudgetRegression, DISABLED_PercentFormatWidth2G) {
  expect_budget_error(R"({{ ("%2000000000s" % "a") | length }})");
}
// fuzz/crashes/fuzz_jinja/timeout-format-precision-2g.jinja
TEST(JinjaBudgetRegression, DISABLED_PercentFormatPrecision2G) {
  expect_budget_error(R"({{ ("%.2000000000f" % 1.5) | length }})");
}
