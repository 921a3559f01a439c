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

// Defects of the binary `*` and `%` operators (src/jinja/interp.cpp: Interp::binop,
// Interp::percent_format); more `%` cases, compared with Python, in percent_format_test.cpp.
// fuzz/crashes/fuzz_jinja/timeout-list-repeat-overflow.jinja: 2 * 2^60 items, whose size in
// bytes wrapped to 0 under the budget check
TEST(JinjaBudgetRegression, ListRepeatOverflow) {
  expect_budget_error(R"({{ ([1, 2] * 1152921504606846976) | length }})");
  expect_budget_error(R"({{ ([1, 2] * 9223372036854775807) | length }})");
  expect_budget_error(R"({{ (9223372036854775807 * ("ab",)) | length }})");
  expect_budget_error(R"({{ ("ab" * 9223372036854775807) | length }})");
  // An empty operand gives an empty result at once, however large the count.
  EXPECT_EQ(ok_out(R"({{ ([] * 9223372036854775807) | length }}|{{ ("" * 9223372036854775807) | length }}|{{ (() * 9223372036854775807) | length }})"),
            "0|0|0");
  EXPECT_EQ(ok_out(R"({{ [1, 2] * 2 }}|{{ 3 * "ab" }}|{{ [1] * -1 }}|{{ (1,) * 2 }})"), "[1, 2, 1, 2]|ababab|[]|(1, 1)");
}
// fuzz/crashes/fuzz_jinja/ubsan-format-width-int-overflow.jinja (Python: MemoryError)
TEST(JinjaBudgetRegression, PercentFormatWidthIntOverflow) {
  expect_budget_error(R"({{ "%99999999999s" % "a" }})");
  expect_budget_error(R"({{ "%9223372036854775807s" % "a" }})");
  // Beyond 64 bits Python itself refuses the width.
  auto r = render(R"({{ "%99999999999999999999s" % "a" }})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->type, "ValueError") << r.error->format();
}
// fuzz/crashes/fuzz_jinja/timeout-format-width-2g.jinja
TEST(JinjaBudgetRegression, PercentFormatWidth2G) {
  expect_budget_error(R"({{ ("%2000000000s" % "a") | length }})");
  expect_budget_error(R"({{ ("%-2000000000s" % "a") | length }})");
  expect_budget_error(R"({{ ("%02000000000d" % 1) | length }})");
}
// fuzz/crashes/fuzz_jinja/timeout-format-precision-2g.jinja
TEST(JinjaBudgetRegression, PercentFormatPrecision2G) {
  expect_budget_error(R"({{ ("%.2000000000f" % 1.5) | length }})");
  expect_budget_error(R"({{ ("%.2000000000d" % 1) | length }})");
}
// fmt_float_fixed's 512-byte buffer cut fixed-format floats longer than 511 characters; the
// exact text is Python's (digits of the binary value, as CPython's dtoa gives them).
TEST(JinjaBudgetRegression, PercentFormatLongFloats) {
  EXPECT_EQ(ok_out(R"({{ ('%.300f' % 1e300) | length }}|{{ ('%f' % 1e308) | length }}|{{ ('%.600f' % 1.5) | length }})"), "602|316|602");
  EXPECT_EQ(ok_out(R"({{ '%f' % 1e308 }})"),
            "10000000000000000109790636294404554174049230967731184633681068290315758540491149153716332897849468889906124966"
            "97211725156115902837431400883283070091981460460312716645029330271856974896995885590433383844661650011784268976"
            "26212945177628091195786707458122783970171784415105291802893207873272974885715430223118336.000000");
  std::string s = ok_out(R"({{ '%.300f' % 1e300 }})");
  EXPECT_EQ(s.substr(0, 40), "1000000000000000052504760255204420248704");
  EXPECT_EQ(s.substr(301), "." + std::string(300, '0'));
}
