// printf-style `%` formatting (str % args, Markup % args) against Python jinja2, case by
// case: flags, width, precision, `*`, every conversion, the argument rules (tuple, single
// value, mapping, unused arguments), Markup escaping, and fixed-format floats longer than any
// fixed buffer. Python's output must be reproduced byte for byte, and where Python raises,
// ckpt must raise the same exception type. Skips visibly without python3 + jinja2.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "ckpt/jinja.h"
#include "ckpt/json.h"
#include "test_support.h"

using namespace ckpt;

namespace {

const char* const kCases[] = {
    // conversions and flags
    R"({{ '%s|%r|%a' % ('é', 'é', 'é') }})",
    R"({{ '%s|%r|%a' % ([1, 'x'], {'k': none}, 'x\u2028😀') }})",
    R"({{ '%d|%i|%u|%o|%x|%X' % (42, -42, True, 8, 255, 255) }})",
    R"({{ '%#o|%#x|%#X|%#5x|%#05x|%-#7x|' % (8, 255, 255, 1, 1, 1) }})",
    R"({{ '%+d|% d|%+ d|%05d|%-05d|%+05d|% 05d|%-+6d|' % (3, 3, 3, -3, -3, 3, 3, 4) }})",
    R"({{ '%.5d|%8.5d|%-8.5d|%+.3d|%#.5o|%#.4x|%.0d' % (3, -3, 3, 7, 8, 255, 0) }})",
    R"({{ '%f|%.2f|%10.3f|%-10.1f|%+f|% f|%010.2f|%#.0f|%.0f|%.0f' % (1.5, 2.675, -3.14159, 2.5, 1, 1, -1.5, 3, 0.5, 2.5) }})",
    R"({{ '%e|%E|%.2e|%#.0e|%g|%G|%.3g|%#g|%g|%g|%.0g' % (12345.678, 1e-7, 0, 5, 1e20, 1e-20, 1234567, 1.5, 100000, 1e16, 0.5) }})",
    R"({{ '%f|%F|%e|%g|%+f|%05f|%-6f|%G' % (1e999, -1e999, 1e999, -1e999, 1e999, 1e999, 1e999, -1e999) }})",
    R"({{ '%f|%F|%e|%+g|%05.1f' % (0 * 1e999, 0 * 1e999, 0 * 1e999, 0 * 1e999, 0 * 1e999) }})",
    R"({{ '%.1f|%d|%x' % (-0.0, -0.0, 0) }})",
    R"({{ '%d|%i|%d|%d' % (3.99, -3.99, 1e18, -9.3e18) }})",
    R"({{ '%d|%.3d|%+d' % (1e300, 1e20, -1e19) }})",
    R"({{ '%c|%c|%c|%5c|%-3c|' % (65, 'é', 128512, 'x', 66) }})",
    R"({{ '%5s|%-5s|%.2s|%5.1s|%05s|%.0s|%.3r|%.2a' % ('ab', 'ab', 'éèê', 'xyz', 'a', 'q', 'abc', 'é') }})",
    R"({{ '%10s|%-10r|' % ('日本語', 'é') }})",
    R"({{ '%hd|%ld|%Lf|%lx' % (1, 2, 3.5, 255) }})",
    R"({{ '%%|%s%%|%%%s' % (1, 2) }})",
    R"({{ '100%%' % () }})",
    R"({{ 'plain' % () }})",
    // `*` width and precision
    R"({{ '%*d|%-*d|%*d|%.*f|%*.*f|%.*s' % (5, 1, 4, 2, -4, 3, 2, 3.14159, 8, 3, 2.5, 2, 'abcdef') }})",
    R"({{ '%*s|' % (true, 'x') }})",
    R"({{ '%.*f' % (-3, 1.23456) }})",
    // argument rules
    R"({{ '%s' % 5 }}|{{ '%s' % 'x' }}|{{ '%s' % none }}|{{ '%s' % (1,) }}|{{ '%s' % [1, 2] }}|{{ '%s' % {'a': 1} }})",
    R"({{ 'abc' % [1] }}|{{ 'abc' % {'a': 1} }}|{{ 'abc' % [] }})",
    R"({{ '%(a)s %(b)r %(a)5d|%(c)s' % {'a': 1, 'b': 'x', 'c': [1]} }})",
    R"({{ '%(a(b))s' % {'a(b)': 7} }})",
    R"({{ '%s' % foo }}|{{ '%r' % foo }}|{{ 'abc' % foo }}|{{ '%s|%s' % (foo, 1) }})",
    R"({{ '%s' % ns }}{% set ns = namespace(a=1) %})",
    R"({{ '%s|%s' % message.content }})",
    R"({{ '%s and %s' % (message.role, message.content) }})",
    R"({% for m in messages %}{{ '[%d] %-9s: %s\n' % (loop.index, m.role, m.content) }}{% endfor %})",
    // Markup % args escapes every argument
    R"({{ ('<b>%s</b>' | safe) % '<i>' }})",
    R"({{ ('%s|%r|%a' | safe) % ('<&>', '<é>', '<é>') }})",
    R"({{ ('%s|%s' | safe) % ('<x>' | safe, 3) }})",
    R"({{ ('%(a)s|%(b)s' | safe) % {'a': '<a>', 'b': 2} }})",
    R"({{ ('%s' | safe) % ['<'] }}|{{ ('%s' | safe) % {'a': '<'} }})",
    R"({{ ('%d|%d|%d|%i' | safe) % (3.7, '12', ' -4 ', true) }})",
    R"({{ ('%f|%.1f|%e|%g' | safe) % ('1.5', ' 2 ', '1e3', 'inf') }})",
    R"({{ ('%d' | safe) % 'x' }})",
    R"({{ ('%f' | safe) % 'x' }})",
    R"({{ ('%x' | safe) % 255 }})",
    R"({{ ('%c' | safe) % 65 }})",
    R"({{ ('%*d' | safe) % (3, 4) }})",
    R"({{ ('abc' | safe) % 'x' }})",
    R"({{ ('%s %s' | safe) % 'x' }})",
    R"({{ (('%s' | safe) % '<') ~ '<' }})",
    // long fixed-format floats (past any fixed-size buffer)
    R"({{ '%.300f' % 1e300 }})",
    R"({{ '%f' % 1e308 }})",
    R"({{ '%f|%.20f' % (-1.7976931348623157e308, 5e-324) }})",
    R"({{ '%.600f' % 1.5 }})",
    R"({{ '%.400e|%.400g' % (1e300, 1e300) }})",
    R"({{ '%#.400g' % 1.5 }})",
    R"({{ '%1000.3f|' % 2.5 }})",
    R"({{ '%0600.1f' % -2.5 }})",
    R"({{ ('%.1000f' % 1e-300) | length }})",
    R"({{ ('%.2000g|%#.2000g|%.2000e|%#.1500g' % (1e-300, 1e-300, 5e-324, 2.5)) }})",
    R"({{ '%.1200f|%#.900e|%.900g' % (5e-324, 1e300, 1.5) }})",
    // str.format shares the float formatting
    R"({{ '{:.2f}|{:.2F}|{:f}|{:.1200f}'.format(nan_s | float, inf_s | float, -(nan_s | float), 5e-324) }})",
    // errors
    R"({{ '%' % () }})",
    R"({{ '%5' % 1 }})",
    R"({{ '%5%' % () }})",
    R"({{ '%q' % 1 }})",
    R"({{ 'é%y' % 1 }})",
    R"({{ '%s %s' % (1,) }})",
    R"({{ '%s' % (1, 2) }})",
    R"({{ '%s' % () }})",
    R"({{ '%s %s' % {'a': 1} }})",
    R"({{ 'abc' % 5 }})",
    R"({{ 'abc' % (1,) }})",
    R"({{ '%(a)s' % (1,) }})",
    R"({{ '%(a)s' % {'b': 1} }})",
    R"({{ '%(a)s' % [1] }})",
    R"({{ '%(a)s' % foo }})",
    R"({{ '%(a' % {'a': 1} }})",
    R"({{ '%(a)' % {'a': 1} }})",
    R"({{ '%d' % 'x' }})",
    R"({{ '%d' % none }})",
    R"({{ '%d' % foo }})",
    R"({{ '%x' % foo }})",
    R"({{ '%f' % foo }})",
    R"({{ '%c' % foo }})",
    R"({{ '%x' % 1.5 }})",
    R"({{ '%o' % 'x' }})",
    R"({{ '%d' % (nan_s | float) }})",
    R"({{ '%d' % (inf_s | float) }})",
    R"({{ '%f|%e|%g|%5.1F|%+f|%d' % (nan_s | float, nan_s | float, -(nan_s | float), nan_s | float, inf_s | float, -1e300) }})",
    R"({{ '%f' % 'x' }})",
    R"({{ '%e' % none }})",
    R"({{ '%c' % 'ab' }})",
    R"({{ '%c' % '' }})",
    R"({{ '%c' % -1 }})",
    R"({{ '%c' % 1114112 }})",
    R"({{ '%c' % 1.5 }})",
    R"({{ '%*d' % ('x', 1) }})",
    R"({{ '%.*f' % (1.5, 1.0) }})",
    R"({{ '%.*f' % (2147483648, 1.0) }})",
    R"({{ '%.2147483648f' % 1.5 }})",
    R"({{ '%99999999999999999999s' % 'a' }})",
    R"({{ foo % 2 }})",
    R"({{ 5 % 'x' }})",
};

const char* kContext =
    R"({"nan_s": "nan", "inf_s": "-inf", "message": {"role": "user", "content": "hi"}, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "<b>Hello</b> 100%"}]})";

struct Outcome {
  bool ok = false;
  std::string output;
  std::string type;
  std::string error;
};

std::map<std::string, Outcome> run_python(const json::Value& ctx) {
  std::string req;
  for (size_t i = 0; i < std::size(kCases); ++i) {
    json::Value line = json::Object{{"id", std::to_string(i)}, {"template", std::string(kCases[i])}, {"context", ctx},
                                    {"trim_blocks", true}, {"lstrip_blocks", true}};
    req += line.dump();
    req += '\n';
  }
  auto r = test::run_program({"python3", std::string(CKPT_SOURCE_DIR) + "/tests/jinja/oracle.py"}, {"TZ=UTC"}, req);
  std::map<std::string, Outcome> out;
  if (r.exit_code != 0) return out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    auto v = json::parse(line);
    if (!v.ok()) continue;
    Outcome o;
    o.ok = v.value.get_bool("ok").value_or(false);
    o.output = v.value.get_string("output").value_or("");
    o.type = v.value.get_string("error_type").value_or("");
    o.error = v.value.get_string("error").value_or("");
    out[*v.value.get_string("id")] = o;
  }
  return out;
}

}  // namespace

TEST(JinjaPercentFormat, MatchesPython) {
  auto ctx = json::parse(kContext);
  ASSERT_TRUE(ctx.ok());
  auto py = run_python(ctx.value);
  if (py.size() != std::size(kCases)) GTEST_SKIP() << "python3 with jinja2 unavailable";
  size_t same_ok = 0, same_err = 0;
  for (size_t i = 0; i < std::size(kCases); ++i) {
    const Outcome& p = py.at(std::to_string(i));
    auto r = jinja::render_string(kCases[i], ctx.value, jinja::Options{}, "t.jinja");
    if (p.ok) {
      EXPECT_TRUE(r.ok()) << kCases[i] << "\n  python: " << p.output << "\n  ckpt: " << r.error->format();
      if (r.ok()) {
        EXPECT_EQ(r.output, p.output) << kCases[i];
        same_ok += r.output == p.output;
      }
      continue;
    }
    ASSERT_FALSE(r.ok()) << kCases[i] << "\n  python: " << p.type << ": " << p.error << "\n  ckpt: ok " << r.output;
    // Where Python would allocate without limit (a 10^20-wide field) ckpt stops at its budget.
    bool budget = p.type == "MemoryError" || p.type == "OverflowError";
    if (budget && r.error->type == "BudgetExceeded") { ++same_err; continue; }
    EXPECT_EQ(r.error->type, p.type) << kCases[i] << "\n  python: " << p.error << "\n  ckpt: " << r.error->format();
    same_err += r.error->type == p.type;
  }
  std::printf("[percent format] %zu cases: %zu identical output, %zu same exception type\n", std::size(kCases), same_ok, same_err);
}

// Python formats these into strings of gigabytes; ckpt stops at the output budget, quickly.
TEST(JinjaPercentFormat, HugeFieldsStopAtTheBudget) {
  for (const char* t : {R"({{ '%2000000000s' % 'a' }})", R"({{ '%.2000000000f' % 1.5 }})", R"({{ '%.2000000000e' % 1.5 }})",
                        R"({{ '%.2000000000g' % 1.5 }})", R"({{ '%.2000000000d' % 1 }})", R"({{ '%#.2000000000x' % 1 }})",
                        R"({{ '%-2000000000d|' % 1 }})", R"({{ '%*s' % (9223372036854775807, 'a') }})",
                        R"({{ '%*s' % (-9223372036854775807 - 1, 'a') }})", R"({{ '%9223372036854775807s' % 'a' }})",
                        R"({{ '%40000000s%40000000s' % ('a', 'b') }})", R"({{ '%.60000000f%.60000000f' % (1, 2) }})"}) {
    auto r = jinja::render_string(t, json::parse("{}").value, jinja::Options{}, "t.jinja");
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.error->type, "BudgetExceeded") << t << ": " << r.error->format();
    EXPECT_EQ(r.error->line, 1u) << t;
  }
}
