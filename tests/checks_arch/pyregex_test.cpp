// Python `re` emulation (quant::PyRegex) for the patterns quantization configs carry: a table
// of Python 3.11's own answers (re-checked against /usr/bin/python3 when it is installed),
// Python's syntax errors, the features ckpt declines to emulate, and the literal prefilters
// that keep std::regex off the common path.
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ckpt/quant.h"
#include "test_support.h"

namespace ckpt::test {
namespace {

using namespace std::literals;
using quant::PyRegex;

// ---- Python re emulation ---------------------------------------------------------------

struct ReCase {
  std::string_view pattern, text;
  PyRegex::Status status;  // what ckpt makes of the pattern
  bool py_match, py_search;  // what Python 3.11's re.match / re.search return
};

// Python's answers were produced by /usr/bin/python3 (3.11) and are re-checked against it
// below when it is installed. Unsupported patterns are valid Python that ckpt refuses to
// guess at: they never match.
const ReCase kReCases[] = {
    {".*lm_head$"sv, "lm_head"sv, PyRegex::Status::Ok, true, true},
    {".*lm_head$"sv, "model.lm_head"sv, PyRegex::Status::Ok, true, true},
    {".*lm_head$"sv, "lm_head.weight"sv, PyRegex::Status::Ok, false, false},
    {".*lm_head$"sv, "lm_head\n"sv, PyRegex::Status::Ok, true, true},
    {".*lm_head$"sv, "lm_head\n\n"sv, PyRegex::Status::Ok, false, false},
    {".*mlp.gate$"sv, "model.layers.0.mlp.gate"sv, PyRegex::Status::Ok, true, true},
    {".*mlp.gate$"sv, "model.layers.0.mlp.gate_proj"sv, PyRegex::Status::Ok, false, false},
    {".*mlp.gate$"sv, "model.layers.0.mlpXgate"sv, PyRegex::Status::Ok, true, true},
    {"^mtp\\..*"sv, "mtp.layers.0.eh_proj"sv, PyRegex::Status::Ok, true, true},
    {"^mtp\\..*"sv, "model.mtp.x"sv, PyRegex::Status::Ok, false, false},
    {"model.layers.\\d+.mlp.experts.*"sv, "model.layers.12.mlp.experts.3.up_proj"sv, PyRegex::Status::Ok, true, true},
    {"model.layers.\\d+.mlp.experts.*"sv, "model.language_model.layers.1.mlp.experts.0"sv, PyRegex::Status::Ok, false, true},
    {"layers\\.0\\."sv, "model.layers.0.mlp"sv, PyRegex::Status::Ok, false, true},
    {"(?i)LM_HEAD"sv, "lm_head"sv, PyRegex::Status::Ok, true, true},
    {"lm_head"sv, "LM_HEAD"sv, PyRegex::Status::Ok, false, false},
    {"a.c"sv, "a\nc"sv, PyRegex::Status::Ok, false, false},
    {"(?s)a.c"sv, "a\nc"sv, PyRegex::Status::Ok, true, true},
    {"a.c"sv, "a\rc"sv, PyRegex::Status::Ok, true, true},
    {"x{,2}y"sv, "xxy"sv, PyRegex::Status::Ok, true, true},
    {"x{,2}y"sv, "xxxy"sv, PyRegex::Status::Ok, false, true},
    {"a{"sv, "a{"sv, PyRegex::Status::Ok, true, true},
    {"a{1"sv, "a{1"sv, PyRegex::Status::Ok, true, true},
    {"x{ 2}"sv, "x{ 2}"sv, PyRegex::Status::Ok, true, true},
    {"[]a]+$"sv, "]a]"sv, PyRegex::Status::Ok, true, true},
    {"[^]a]"sv, "b"sv, PyRegex::Status::Ok, true, true},
    {"[^]a]"sv, "]"sv, PyRegex::Status::Ok, false, false},
    {"(?P<l>\\d+)\\.(?P=l)"sv, "3.3"sv, PyRegex::Status::Ok, true, true},
    {"(?P<l>\\d+)\\.(?P=l)"sv, "3.4"sv, PyRegex::Status::Ok, false, false},
    {"(a)b\\1"sv, "aba"sv, PyRegex::Status::Ok, true, true},
    {"(?x) model \\. layers # comment"sv, "model.layers"sv, PyRegex::Status::Ok, true, true},
    {"(?x) model \\  x"sv, "model x"sv, PyRegex::Status::Ok, true, true},
    {"\\Aab\\Z"sv, "ab"sv, PyRegex::Status::Ok, true, true},
    {"\\Aab\\Z"sv, "ab\n"sv, PyRegex::Status::Ok, false, false},
    {"ab$"sv, "ab\n"sv, PyRegex::Status::Ok, true, true},
    {"[[:alpha:]]"sv, "a]"sv, PyRegex::Status::Ok, true, true},
    {"[[:alpha:]]"sv, "a"sv, PyRegex::Status::Ok, false, false},
    {"model\\.layers\\.[0-9]+\\."sv, "model.layers.10.x"sv, PyRegex::Status::Ok, true, true},
    {"\\x6c\\155_head"sv, "lm_head"sv, PyRegex::Status::Ok, true, true},
    {"a\\_b"sv, "a_b"sv, PyRegex::Status::Ok, true, true},
    {"a\\-b"sv, "a-b"sv, PyRegex::Status::Ok, true, true},
    {"a\\/b"sv, "a/b"sv, PyRegex::Status::Ok, true, true},
    {".*(down|up)_proj$"sv, "model.layers.0.mlp.up_proj"sv, PyRegex::Status::Ok, true, true},
    {".*\\.(q|k|v)_proj$"sv, "model.layers.0.self_attn.qkv_proj"sv, PyRegex::Status::Ok, false, false},
    {"ab*?c"sv, "ac"sv, PyRegex::Status::Ok, true, true},
    {"\\bproj"sv, "x.proj"sv, PyRegex::Status::Ok, false, true},
    {"\\Bproj"sv, "xproj"sv, PyRegex::Status::Ok, false, true},
    {"(?=.*mlp).*gate"sv, "model.mlp.gate"sv, PyRegex::Status::Ok, true, true},
    {"(?!.*mlp).*gate"sv, "model.mlp.gate"sv, PyRegex::Status::Ok, false, true},
    {"a|b"sv, "cb"sv, PyRegex::Status::Ok, false, true},
    {"(?:a|b)+c"sv, "abac"sv, PyRegex::Status::Ok, true, true},
    {"\\d\\w\\s"sv, "1a "sv, PyRegex::Status::Ok, true, true},
    {"[\\d.]+"sv, "1.2"sv, PyRegex::Status::Ok, true, true},
    {"[a-c-]+"sv, "a-c"sv, PyRegex::Status::Ok, true, true},
    {"\\0"sv, "\x00"""sv, PyRegex::Status::Ok, true, true},
    {"\\07"sv, "\x07"""sv, PyRegex::Status::Ok, true, true},
    {"\\08"sv, "\x00""8"sv, PyRegex::Status::Ok, true, true},
    {"(?a)\\w+"sv, "abc"sv, PyRegex::Status::Ok, true, true},
    {"(?m)^b"sv, "a\nb"sv, PyRegex::Status::Ok, false, true},
    {"model.layers.0"sv, "model.layers.01.mlp"sv, PyRegex::Status::Ok, true, true},
    {"lm_head"sv, "lm_head_extra"sv, PyRegex::Status::Ok, true, true},
    {""sv, "anything"sv, PyRegex::Status::Ok, true, true},
    {"\xc3""\xa9"""sv, "\xc3""\xa9"""sv, PyRegex::Status::Ok, true, true},
    {"\xc3""\xa9""?x"sv, "x"sv, PyRegex::Status::Ok, true, true},
    {"("sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"[a"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"a**"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"*a"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"\\q"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"a(?i)b"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"(?<n>x)"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"x{3,1}"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"\\1(a)"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"(?L)a"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"a)"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"[z-a]"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"\\"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"\\x4"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"(?P<a>x)(?P<a>y)"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"[\\A]"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"(a\\1)"sv, "x"sv, PyRegex::Status::Invalid, false, false},
    {"(?<=a)b"sv, "ab"sv, PyRegex::Status::Unsupported, false, true},
    {"(?i:a)b"sv, "ab"sv, PyRegex::Status::Unsupported, true, true},
    {"(?>a)"sv, "a"sv, PyRegex::Status::Unsupported, true, true},
    {"a++"sv, "a"sv, PyRegex::Status::Unsupported, true, true},
    {"(a)?(?(1)a|b)"sv, "b"sv, PyRegex::Status::Unsupported, true, true},
    {"\\N{DIGIT ONE}"sv, "1"sv, PyRegex::Status::Unsupported, true, true},
    {"(?=a)*"sv, "a"sv, PyRegex::Status::Unsupported, true, true},
    {"a{1000}"sv, "a"sv, PyRegex::Status::Unsupported, false, false},
    {"\\u00e9"sv, "\xc3""\xa9"""sv, PyRegex::Status::Unsupported, true, true},
    {"[\xc3""\xa9""]"sv, "\xc3""\xa9"""sv, PyRegex::Status::Unsupported, true, true},
};

TEST(PyRegex, MatchesAsPythonReDoes) {
  for (const auto& c : kReCases) {
    PyRegex re(c.pattern);
    SCOPED_TRACE(std::string(c.pattern) + " on " + std::string(c.text));
    EXPECT_EQ(re.status(), c.status) << re.problem();
    if (c.status == PyRegex::Status::Ok) {
      EXPECT_EQ(re.match(c.text), c.py_match);
      EXPECT_EQ(re.search(c.text), c.py_search);
    } else {
      EXPECT_FALSE(re.problem().empty());
      EXPECT_FALSE(re.match(c.text));
      EXPECT_FALSE(re.search(c.text));
    }
  }
}

std::string json_str(std::string_view s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      o += '\\';
      o += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      o += buf;
    } else {
      o += static_cast<char>(ch);
    }
  }
  return o + "\"";
}

// The table above is Python's behaviour: ask Python itself (when it is installed).
TEST(PyRegex, TableAgreesWithInstalledPython) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "/usr/bin/python3 not available";
  std::string in = "[";
  for (const auto& c : kReCases) in += (in.size() > 1 ? "," : "") + ("[" + json_str(c.pattern) + "," + json_str(c.text) + "]");
  in += "]";
  auto r = run_program({"/usr/bin/python3", "-W", "ignore", "-c",
                        "import json,re,sys\n"
                        "for p,t in json.loads(sys.stdin.buffer.read().decode('utf-8')):\n"
                        "  try:\n"
                        "    x=re.compile(p); print('ok', int(bool(x.match(t))), int(bool(x.search(t))))\n"
                        "  except re.error: print('invalid 0 0')\n"},
                       {}, in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  for (const auto& c : kReCases) {
    std::string st;
    int m = 0, s = 0;
    ASSERT_TRUE(lines >> st >> m >> s) << "python printed too little:\n" << r.out;
    SCOPED_TRACE(std::string(c.pattern) + " on " + std::string(c.text));
    EXPECT_EQ(st == "invalid", c.status == PyRegex::Status::Invalid) << "Python: " << st;
    EXPECT_EQ(m != 0, c.py_match);
    EXPECT_EQ(s != 0, c.py_search);
  }
}

TEST(PyRegex, ProblemsSayWhatAndWhere) {
  EXPECT_EQ(PyRegex("([").problem(), "unterminated character set at position 1");
  EXPECT_EQ(PyRegex("a**").problem(), "multiple repeat at position 2");
  EXPECT_EQ(PyRegex("(?<=x)y").problem(), "lookbehind at position 0");
  EXPECT_EQ(PyRegex(std::string(2001, 'a')).status(), PyRegex::Status::Unsupported);
  // a default-constructed pattern matches nothing
  EXPECT_FALSE(PyRegex().match(""));
}

TEST(PyRegex, RequiredLiteralSkipsTheEngine) {
  EXPECT_EQ(PyRegex(".*lm_head$").required_literal(), "lm_head");
  EXPECT_EQ(PyRegex("model.layers.\\d+.mlp.experts.*").required_literal(), "experts");
  EXPECT_EQ(PyRegex("^mtp\\..*").required_literal(), "mtp.");
  EXPECT_EQ(PyRegex("ab?c").required_literal(), "a");  // b is optional, so "ab" is not required
  EXPECT_EQ(PyRegex("a|lm_head").required_literal(), "");  // alternation: nothing is required
  EXPECT_EQ(PyRegex("(?i)lm_head").required_literal(), "");
  PyRegex head(".*lm_head$");
  size_t runs = PyRegex::executions();
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(head.match("model.layers." + std::to_string(i) + ".mlp.down_proj"));
  EXPECT_EQ(PyRegex::executions(), runs) << "names without the literal never reach std::regex";
  EXPECT_TRUE(head.match("model.lm_head"));
  EXPECT_EQ(PyRegex::executions(), runs + 1);
  // a literal before a final `$` must end the name (or precede its final newline)
  PyRegex gate(".*mlp.gate$");
  EXPECT_EQ(gate.required_suffix(), "gate");
  EXPECT_EQ(PyRegex(".*(gate)$").required_suffix(), "");
  EXPECT_EQ(PyRegex("a|gate$").required_suffix(), "");
  EXPECT_EQ(PyRegex(".*gate$x").required_suffix(), "");
  runs = PyRegex::executions();
  EXPECT_FALSE(gate.match("model.layers.0.mlp.gate_proj"));
  EXPECT_FALSE(gate.search("model.layers.0.mlp.gate_up_proj"));
  EXPECT_EQ(PyRegex::executions(), runs);
  EXPECT_TRUE(gate.match("model.layers.0.mlp.gate\n"));
  EXPECT_TRUE(gate.match("model.layers.0.mlp.gate"));
}

TEST(PyRegex, HugeTextsAndCopiesAreSafe) {
  PyRegex re(".*a$");
  std::string big(100000, 'a');
  EXPECT_FALSE(re.match(big)) << "texts over 4096 bytes are not run (std::regex recursion)";
  PyRegex copy = re;  // copies share the compiled pattern
  size_t built = PyRegex::compilations();
  EXPECT_TRUE(copy.match("xa"));
  EXPECT_EQ(PyRegex::compilations(), built);
}

}  // namespace
}  // namespace ckpt::test
