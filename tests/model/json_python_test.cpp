// json::parse reads JSON exactly as Python's json.loads(data.decode("utf-8")) does.
//  - Unit tests of each rule, on both paths: parse() (simdjson first) and parse_exact() (the
//    reader parse() falls back to), which must agree on every document.
//  - A differential test against /usr/bin/python3 (tests/model/json_python.py) over generated
//    hostile documents and over every *.json file of the corpus.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/json.h"
#include "io/limits.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt;

namespace {

const char* kPython = "/usr/bin/python3";
using Strs = std::vector<std::string>;

std::string show(const json::ParseResult& r) {
  if (r.ok()) return "OK " + r.value.dump(true);
  return "REJECT at " + std::to_string(r.error->offset) + " (" + std::to_string(r.error->line) + ":" +
         std::to_string(r.error->column) + "): " + r.error->message;
}

// The two paths give the same value (dump(true) shows type and value: 1 vs 1.0, big ints in full,
// NaN), the same duplicates, or the same located error.
::testing::AssertionResult same_result(const json::ParseResult& a, const json::ParseResult& b) {
  if (show(a) != show(b)) return ::testing::AssertionFailure() << "parse: " << show(a).substr(0, 300) << "\nparse_exact: " << show(b).substr(0, 300);
  if (a.duplicates.size() != b.duplicates.size())
    return ::testing::AssertionFailure() << a.duplicates.size() << " vs " << b.duplicates.size() << " duplicates";
  for (size_t i = 0; i < a.duplicates.size(); ++i)
    if (a.duplicates[i].path != b.duplicates[i].path || a.duplicates[i].key != b.duplicates[i].key)
      return ::testing::AssertionFailure() << "duplicate " << i << ": " << a.duplicates[i].path << " " << a.duplicates[i].key
                                           << " vs " << b.duplicates[i].path << " " << b.duplicates[i].key;
  return ::testing::AssertionSuccess();
}

// Both paths; they must agree. Returns parse()'s result.
json::ParseResult both(std::string_view text, uint32_t depth = json::kDefaultMaxDepth) {
  json::ParseResult a = json::parse(text, depth);
  json::ParseResult b = json::parse_exact(text, depth);
  EXPECT_TRUE(same_result(a, b)) << "document: " << std::string(text.substr(0, 200));
  if (!a.ok()) {
    EXPECT_FALSE(a.error->message.empty());
    EXPECT_LE(a.error->offset, text.size());
    EXPECT_GE(a.error->line, 1u);
    EXPECT_GE(a.error->column, 1u);
    // locate_error names the same place.
    json::ParseError l = json::locate_error(text, depth);
    EXPECT_EQ(l.message, a.error->message);
    EXPECT_EQ(l.offset, a.error->offset);
  } else {
    EXPECT_EQ(json::locate_error(text, depth).message, "the document could not be parsed");
  }
  return a;
}

json::Value ok(std::string_view text) {
  json::ParseResult r = both(text);
  EXPECT_TRUE(r.ok()) << std::string(text.substr(0, 200)) << "\n" << show(r);
  return r.value;
}

json::ParseError rejected(std::string_view text) {
  json::ParseResult r = both(text);
  EXPECT_FALSE(r.ok()) << std::string(text.substr(0, 200)) << "\n" << show(r);
  return r.ok() ? json::ParseError{} : *r.error;
}

std::string nested_arrays(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }
std::string nested_objects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"k\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

// Runs f on a thread whose whole stack is `bytes`.
void on_small_stack(size_t bytes, std::function<void()> f) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, bytes), 0);
  pthread_t th;
  auto* fp = new std::function<void()>(std::move(f));
  ASSERT_EQ(pthread_create(&th, &attr, [](void* p) -> void* {
              auto* g = static_cast<std::function<void()>*>(p);
              (*g)();
              delete g;
              return nullptr;
            }, fp), 0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace

// ---- integers -----------------------------------------------------------------------------

TEST(JsonExact, IntegerBeyond64BitsIsKeptExactly) {
  // The real tokenizer_config.json of gemma / Llama-2 models.
  json::Value v = ok(R"({"model_max_length": 1000000000000000019884624838656, "x": 1})");
  const json::Value* m = v.find("model_max_length");
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->is_big_int());
  EXPECT_EQ(m->type(), json::Type::big_int);
  EXPECT_FALSE(m->is_int());  // as_int() callers never see it
  EXPECT_TRUE(m->is_integer());
  EXPECT_TRUE(m->is_number());
  EXPECT_EQ(m->big_int_text(), "1000000000000000019884624838656");
  EXPECT_EQ(m->integer_text(), "1000000000000000019884624838656");
  EXPECT_EQ(m->as_double(), 1e30);
  EXPECT_FALSE(v.get_int("model_max_length"));
  EXPECT_EQ(v.get_number("model_max_length"), 1e30);
  EXPECT_EQ(v.dump(), R"({"model_max_length":1000000000000000019884624838656,"x":1})");
}

TEST(JsonExact, IntegerBoundaries) {
  struct Case {
    const char* text;
    bool fits;
  } cases[] = {{"9223372036854775807", true},    {"9223372036854775808", false},  {"-9223372036854775808", true},
               {"-9223372036854775809", false},  {"18446744073709551615", false}, {"18446744073709551616", false},
               {"-18446744073709551616", false}, {"0", true},                     {"-0", true}};
  for (const auto& c : cases) {
    json::Value v = ok(c.text);
    EXPECT_EQ(v.is_int(), c.fits) << c.text;
    EXPECT_EQ(v.is_big_int(), !c.fits) << c.text;
    EXPECT_EQ(v.dump(), std::string(c.text) == "-0" ? "0" : c.text);  // Python: int("-0") is 0
    // In an array and as an object value, through simdjson's tape as through the exact reader.
    std::string arr = std::string("[1,") + c.text + ",2]";
    EXPECT_EQ(ok(arr).dump(), arr == "[1,-0,2]" ? "[1,0,2]" : arr);
    EXPECT_EQ(ok(std::string("{\"a\":") + c.text + "}").find("a")->integer_text(), v.integer_text());
  }
  EXPECT_EQ(ok("9223372036854775807").as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ok("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ok("18446744073709551615").as_double(), 18446744073709551615.0);
}

TEST(JsonExact, PythonsDigitLimit) {
  std::string d4300 = "1" + std::string(4299, '7');
  std::string d4301 = d4300 + "3";
  EXPECT_EQ(ok(d4300).big_int_text(), d4300);
  EXPECT_EQ(ok("-" + d4300).big_int_text(), "-" + d4300);  // the sign is not a digit
  EXPECT_EQ(ok("[" + d4300 + "]").as_array()[0].big_int_text(), d4300);
  std::pair<std::string, size_t> too_long[] = {{d4301, 0}, {"-" + d4301, 0}, {"[1, " + d4301 + "]", 4},
                                               {"{\"a\": " + d4301 + "}", 6}};
  for (const auto& [doc, at] : too_long) {
    json::ParseError e = rejected(doc);
    EXPECT_NE(e.message.find("4301 digits"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("4300"), std::string::npos) << e.message;
    EXPECT_EQ(e.offset, at) << doc.substr(0, 10);  // the literal's first character
  }
  // A float is not an int: no limit (Python's float() has none).
  EXPECT_EQ(ok(d4301 + ".0").as_double(), HUGE_VAL);
  EXPECT_EQ(ok("1" + std::string(5000, '0') + "e-5000").as_double(), 1.0);
}

TEST(JsonExact, BigIntDoubleAndComparisons) {
  std::string huge = "1" + std::string(400, '0');
  EXPECT_EQ(ok(huge).as_double(), HUGE_VAL);
  EXPECT_EQ(ok("-" + huge).as_double(), -HUGE_VAL);
  // Correct rounding: 2^64 + 1 is nearest to 2^64.
  EXPECT_EQ(ok("18446744073709551617").as_double(), 18446744073709551616.0);

  using std::strong_ordering;
  EXPECT_EQ(ok("-1").compare_integer(0), strong_ordering::less);
  EXPECT_EQ(ok("5").compare_integer(5), strong_ordering::equal);
  EXPECT_EQ(ok("5").compare_integer(4), strong_ordering::greater);
  EXPECT_EQ(ok("9223372036854775808").compare_integer(9223372036854775808ull), strong_ordering::equal);
  EXPECT_EQ(ok("18446744073709551615").compare_integer(UINT64_MAX), strong_ordering::equal);
  EXPECT_EQ(ok("18446744073709551615").compare_integer(1), strong_ordering::greater);
  EXPECT_EQ(ok("18446744073709551616").compare_integer(UINT64_MAX), strong_ordering::greater);
  // A 10^30 token id against a vocabulary of 256000 rows: out of range.
  EXPECT_TRUE(ok("1000000000000000000000000000000").compare_integer(256000) >= 0);
  EXPECT_EQ(ok("-" + huge).compare_integer(0), strong_ordering::less);
  EXPECT_THROW((void)ok("1.0").compare_integer(1), std::bad_variant_access);

  // integer_from_decimal: the only way to make a big int by hand; int64 when it fits.
  EXPECT_TRUE(json::integer_from_decimal("42")->is_int());
  EXPECT_EQ(json::integer_from_decimal("-0")->as_int(), 0);
  EXPECT_TRUE(json::integer_from_decimal(huge)->is_big_int());
  for (const char* bad : {"", "-", "007", "-01", "1e5", "1.0", "+1", " 1", "1 ", "0x10"})
    EXPECT_FALSE(json::integer_from_decimal(bad)) << bad;

  // Python's ==: exact across int and float.
  EXPECT_EQ(ok("1000000000000000019884624838656"), json::Value(1e30));
  EXPECT_NE(ok("1000000000000000000000000000000"), json::Value(1e30));
  EXPECT_NE(ok("9007199254740993"), json::Value(9007199254740992.0));
  EXPECT_EQ(ok("9007199254740992"), json::Value(9007199254740992.0));
  EXPECT_NE(ok("9223372036854775808"), ok("9223372036854775807"));
  EXPECT_EQ(ok("[9223372036854775808]"), ok("[9223372036854775808]"));
}

// ---- literals and floats ------------------------------------------------------------------

TEST(JsonExact, NanAndInfinityLiterals) {
  json::Value v = ok(R"([NaN, Infinity, -Infinity, {"a": NaN, "b": -Infinity}])");
  const auto& a = v.as_array();
  EXPECT_TRUE(std::isnan(a[0].as_double()));
  EXPECT_EQ(a[1].as_double(), HUGE_VAL);
  EXPECT_EQ(a[2].as_double(), -HUGE_VAL);
  EXPECT_EQ(a[0].type(), json::Type::number);
  EXPECT_EQ(v.dump(), R"([NaN,Infinity,-Infinity,{"a":NaN,"b":-Infinity}])");
  EXPECT_EQ(ok("NaN").dump(), "NaN");
  EXPECT_EQ(ok(" -Infinity ").dump(), "-Infinity");
  for (const char* bad : {"nan", "NAN", "Nan", "infinity", "INFINITY", "Infinit", "Infinityy", "-NaN", "+Infinity",
                          "-infinity", "- Infinity", "NaN1", "[NaN Infinity]", "tru", "True", "TRUE", "nul", "None",
                          "null1", "fals", "falsee", "undefined", "[true false]", "+1", "--1", "-Inf"})
    rejected(bad);
  EXPECT_EQ(ok("[true,false,null]").dump(), "[true,false,null]");
}

TEST(JsonExact, FloatsBeyondTheDoubleRange) {
  auto num = [](const std::string& t) { return ok(t).as_double(); };
  EXPECT_EQ(num("1e400"), HUGE_VAL);
  EXPECT_EQ(num("-1e400"), -HUGE_VAL);
  EXPECT_EQ(num("1e-400"), 0.0);
  EXPECT_FALSE(std::signbit(num("1e-400")));
  EXPECT_TRUE(std::signbit(num("-1e-400")));
  EXPECT_EQ(ok("-1e-400").dump(), "-0.0");
  EXPECT_EQ(ok("[1e400,-1e400,1e-400]").dump(), "[Infinity,-Infinity,0.0]");
  EXPECT_EQ(num("1.7976931348623157e308"), std::numeric_limits<double>::max());
  EXPECT_EQ(num("1.7976931348623158e308"), std::numeric_limits<double>::max());
  EXPECT_EQ(num("1.7976931348623159e308"), HUGE_VAL);
  // Exactly halfway between DBL_MAX and 2^1024: rounds to even, which is infinity.
  const std::string half =
      "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887"
      "910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914"
      "819860834936475292719074168444365510704342711559699508093042880177904174497792";
  EXPECT_EQ(num(half + ".0"), HUGE_VAL);
  EXPECT_EQ(num(half.substr(0, half.size() - 1) + "1.9"), std::numeric_limits<double>::max());
  EXPECT_EQ(num("5e-324"), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(num("3e-324"), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(num("2e-324"), 0.0);
  EXPECT_EQ(num("2.4703282292062328e-324"), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(num("2.4703282292062327e-324"), 0.0);
  EXPECT_EQ(num("1e99999999999999999999"), HUGE_VAL);
  EXPECT_EQ(num("-1e-99999999999999999999"), 0.0);
  EXPECT_EQ(num("0e99999999999999999999"), 0.0);
  EXPECT_EQ(num("0." + std::string(400, '0') + "1e400"), 0.1);
  EXPECT_EQ(num("1" + std::string(400, '0') + "e-400"), 1.0);
  EXPECT_EQ(num("0.00000000000000000000000000000000000000000000000000001e-300"), 0.0);
  // Types and Python's repr.
  EXPECT_EQ(ok("[-0, -0.0, 0e0, 1E5, 1e+5, 1.5e-3, 0.1, 1e16, 1e22, 123456789012345678901234567890.0]").dump(),
            "[0,-0.0,0.0,100000.0,100000.0,0.0015,0.1,1e+16,1e+22,1.2345678901234568e+29]");
  for (const char* bad : {"01", "-01", "00", "1.", ".5", "1e", "1e+", "1E-", "0x10", "1_000", "1.e5", "-", "- 1",
                          "1.5.5", "1e5.5", "[1.]", "[-]", "0.0.0", "1ee5"})
    rejected(bad);
}

TEST(JsonExact, BothPathsRoundNumbersAlike) {
  // simdjson's float parser and the exact reader's from_chars must agree bit for bit.
  std::mt19937_64 rng(1234);
  auto digits = [&](size_t n, bool lead_nonzero) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(char('0' + (i == 0 && lead_nonzero ? 1 + rng() % 9 : rng() % 10)));
    return s;
  };
  std::string doc = "[";
  for (int i = 0; i < 20000; ++i) {
    std::string n = rng() % 4 == 0 ? "-" : "";
    size_t int_len = 1 + rng() % (rng() % 8 == 0 ? 40 : 17);
    n += int_len == 1 ? digits(1, false) : digits(int_len, true);
    if (rng() % 3) n += "." + digits(1 + rng() % (rng() % 8 == 0 ? 60 : 17), false);
    if (rng() % 2) n += (rng() % 2 ? "e" : "E") + std::string(rng() % 3 == 0 ? "-" : rng() % 2 ? "+" : "") + std::to_string(rng() % 330);
    if (i) doc += ",";
    doc += n;
  }
  doc += "]";
  json::ParseResult fast = json::parse(doc), exact = json::parse_exact(doc);
  ASSERT_TRUE(fast.ok()) << show(fast).substr(0, 300);
  ASSERT_TRUE(exact.ok()) << show(exact).substr(0, 300);
  const auto& a = fast.value.as_array();
  const auto& b = exact.value.as_array();
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = a[i].type() == b[i].type() && a[i].dump() == b[i].dump();
    if (a[i].type() == json::Type::number && b[i].type() == json::Type::number) {
      double x = a[i].as_double(), y = b[i].as_double();
      same = same && std::memcmp(&x, &y, sizeof x) == 0;
    }
    if (!same && ++differ < 10) ADD_FAILURE() << "element " << i << ": " << a[i].dump() << " vs " << b[i].dump();
  }
  EXPECT_EQ(differ, 0u);
}

// ---- strings ------------------------------------------------------------------------------

TEST(JsonExact, SurrogateEscapes) {
  // A pair joins into one code point (UTF-8).
  EXPECT_EQ(ok(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(ok(R"("\uD83D\uDE00")").as_string(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(ok(R"("\uDBFF\uDFFF")").as_string(), "\xF4\x8F\xBF\xBF");
  // Lone surrogates are kept (WTF-8), as Python keeps them in its str.
  EXPECT_EQ(ok(R"("\ud800")").as_string(), "\xED\xA0\x80");
  EXPECT_EQ(ok(R"("\udc00x")").as_string(), "\xED\xB0\x80x");
  EXPECT_EQ(ok(R"("\ud800\ud800\udc00")").as_string(), "\xED\xA0\x80\xF0\x90\x80\x80");
  EXPECT_EQ(ok(R"("\udc00\ud800")").as_string(), "\xED\xB0\x80\xED\xA0\x80");
  EXPECT_EQ(ok(R"("\ud800\u0041")").as_string(), "\xED\xA0\x80" "A");
  EXPECT_EQ(ok(R"("\ud800\n")").as_string(), "\xED\xA0\x80\n");
  // Written back as Python writes them, in both modes; a dump re-reads to the same value.
  json::Value v = ok(R"({"\ud800": ["\udfff", "\ud83d\ude00", "\ud800\ud800\udc00"]})");
  EXPECT_EQ(v.dump(true), R"({"\ud800":["\udfff","\ud83d\ude00","\ud800\ud800\udc00"]})");
  EXPECT_EQ(v.dump(false), "{\"\\ud800\":[\"\\udfff\",\"\xF0\x9F\x98\x80\",\"\\ud800\xF0\x90\x80\x80\"]}");
  EXPECT_EQ(ok(v.dump(false)), v);
  EXPECT_EQ(ok(v.dump(true)), v);
  // After a high surrogate, "\u" must be followed by four hex digits (CPython checks them there).
  for (const char* bad : {R"("\ud800\uzzzz")", R"("\ud800\u12")", R"("\ud800\")", R"("\ud800\u)"}) rejected(bad);
}

TEST(JsonExact, EscapesAndControlCharacters) {
  EXPECT_EQ(ok(R"("\"\\\/\b\f\n\r\t")").as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(ok(R"("\u0000\u001f\u007f\u00e9\uFFFF")").as_string(), std::string("\0\x1f\x7f\xC3\xA9\xEF\xBF\xBF", 8));
  EXPECT_EQ(ok("\"\x7f\"").as_string(), "\x7f");  // DEL needs no escape
  for (const char* bad : {R"("\x41")", R"("\a")", R"("\'")", R"("\U0041")", R"("\u00G0")", R"("\u004")", "\"\\", "\"abc",
                          "\"\\u"})
    rejected(bad);
  for (int c = 0; c < 0x20; ++c) {
    std::string doc = "[\"a" + std::string(1, char(c)) + "b\"]";
    json::ParseError e = rejected(doc);
    EXPECT_EQ(e.offset, 3u) << c;
    EXPECT_NE(e.message.find("control character"), std::string::npos) << e.message;
    rejected("{\"a" + std::string(1, char(c)) + "\":1}");
  }
  // An escaped key and its raw form are the same key.
  json::ParseResult r = both(R"({"\ud83d\ude00": 1, "😀": 2, "a": 3, "\u0061": 4})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value.dump(true), R"({"\ud83d\ude00":2,"a":4})");
  EXPECT_EQ(r.duplicates.size(), 2u);
}

// ---- rejections, located --------------------------------------------------------------------

TEST(JsonExact, ByteOrderMarkIsRejected) {
  for (std::string doc : {std::string("\xEF\xBB\xBF{}"), std::string("\xEF\xBB\xBF" "1"), std::string("\xEF\xBB\xBF")}) {
    json::ParseError e = rejected(doc);
    EXPECT_EQ(e.offset, 0u);
    EXPECT_NE(e.message.find("BOM"), std::string::npos) << e.message;
  }
  rejected(" \xEF\xBB\xBF{}");
  rejected("{}\xEF\xBB\xBF");
  EXPECT_EQ(ok("\"\xEF\xBB\xBF\"").as_string(), "\xEF\xBB\xBF");  // inside a string it is a character
  EXPECT_EQ(ok(R"("\ufeff")").as_string(), "\xEF\xBB\xBF");
}

TEST(JsonExact, InvalidUtf8AnywhereIsRejected) {
  struct Case {
    std::string bytes;
    const char* why;
  } cases[] = {{"\xC0\x80", "overlong"},         {"\xC1\xBF", "overlong"},         {"\xE0\x80\x80", "overlong"},
               {"\xE0\x9F\xBF", "overlong"},     {"\xF0\x80\x80\x80", "overlong"}, {"\xF0\x8F\xBF\xBF", "overlong"},
               {"\xED\xA0\x80", "surrogate"},    {"\xED\xBF\xBF", "surrogate"},    {"\xF4\x90\x80\x80", "U+10FFFF"},
               {"\xF5\x80\x80\x80", "never"},    {"\xF8\x88\x80\x80\x80", "never"}, {"\xFE", "never"},
               {"\xFF", "never"},                {"\x80", "continuation"},         {"\xBF", "continuation"},
               {"\xE2\x82", "truncated"},        {"\xE2\x28\xA1", "truncated"},    {"\xC3", "truncated"},
               {"\xF0\x9F\x98", "truncated"}};
  for (const auto& c : cases) {
    for (std::string doc : {"[\"ab" + c.bytes + "\"]", "{\"k" + c.bytes + "\":1}", "[1]" + c.bytes, c.bytes}) {
      json::ParseError e = rejected(doc);
      EXPECT_EQ(e.message.rfind("invalid UTF-8 byte sequence", 0), 0u) << e.message;
      EXPECT_NE(e.message.find(c.why), std::string::npos) << e.message;
      EXPECT_EQ(e.offset, doc.find(c.bytes)) << e.message;
    }
  }
  // Python decodes before it parses: bad UTF-8 after a syntax error is what is reported.
  EXPECT_EQ(rejected("[1,,2, \"\xFF\"]").message.rfind("invalid UTF-8", 0), 0u);
  // The boundaries of what is valid.
  EXPECT_EQ(ok("\"\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF\xF4\x8F\xBF\xBF\xF0\x90\x80\x80\xC2\x80\"").as_string().size(), 19u);
}

TEST(JsonExact, TrailingDataEmptyDocumentsAndWhitespace) {
  json::ParseError e = rejected("{} x");
  EXPECT_EQ(e.offset, 3u);
  EXPECT_EQ(e.line, 1u);
  EXPECT_EQ(e.column, 4u);
  EXPECT_NE(e.message.find("extra data"), std::string::npos) << e.message;
  e = rejected("{\n  \"a\": 1\n}\n]");
  EXPECT_EQ(e.line, 4u);
  EXPECT_EQ(e.column, 1u);
  for (const std::string& bad : Strs{"[]]", "1 2", "{}{}", "\"a\"\"b\"", "null null", std::string("{}\0", 3), "{}\x1a",
                                     "[1]//c", "{} ,", "", " ", "\n", "\t\r\n "})
    rejected(bad);
  e = rejected("");
  EXPECT_NE(e.message.find("empty"), std::string::npos) << e.message;
  // Only space, tab, LF and CR are whitespace.
  EXPECT_EQ(ok(" \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ \t\n\r1 \t\n\r, \t\n\r2 \t\n\r] \t\n\r} \t\n\r").dump(), R"({"a":[1,2]})");
  for (std::string bad : {"\f{}", "{}\f", "\v1", "1\v", "\xC2\xA0" "1", "\xE2\x80\xA8" "1", "\xE3\x80\x80" "1", "[1,\f2]",
                          "{\"a\":\x0b" "1}"})
    rejected(bad);
}

TEST(JsonExact, StructureErrorsSayWhatWasExpected) {
  struct Case {
    const char* doc;
    size_t offset;
    const char* says;
  } cases[] = {{"[1,]", 3, "expected a value"},
               {"{\"a\":1,}", 7, "expected an object key"},
               {"[,1]", 1, "expected a value"},
               {"{,}", 1, "expected an object key"},
               {"{\"a\"}", 4, "expected ':'"},
               {"{\"a\" 1}", 5, "expected ':'"},
               {"{1:2}", 1, "expected an object key"},
               {"{'a':1}", 1, "expected an object key"},
               {"[1 2]", 3, "expected ',' or ']'"},
               {"{\"a\":1 \"b\":2}", 7, "expected ',' or '}'"},
               {"[", 1, "a value was expected"},
               {"[1", 2, "expected ',' or ']'"},
               {"{\"a\":", 5, "a value was expected"},
               {"{\"a\":1", 6, "expected ',' or '}'"},
               {"]", 0, "expected a value"},
               {"\"abc", 0, "unterminated string"}};
  for (const auto& c : cases) {
    json::ParseError e = rejected(c.doc);
    EXPECT_EQ(e.offset, c.offset) << c.doc << ": " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.doc << ": " << e.message;
  }
}

// ---- duplicates ---------------------------------------------------------------------------

TEST(JsonExact, DuplicateKeysLastWinsAtTheFirstPosition) {
  json::ParseResult r = both(R"({"a":1,"b":2,"a":3})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value.dump(), R"({"a":3,"b":2})");
  ASSERT_EQ(r.duplicates.size(), 1u);
  EXPECT_EQ(r.duplicates[0].path, "/");
  EXPECT_EQ(r.duplicates[0].key, "a");

  r = both(R"({"x":{"a":1,"a":{"b":1,"b":2}},"l":[{"k":1,"k":2},{"k":3,"k":4}],"x":5})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value.dump(), R"({"x":5,"l":[{"k":2},{"k":4}]})");
  std::vector<std::string> got;
  for (const auto& d : r.duplicates) got.push_back(d.path + " " + d.key);
  EXPECT_EQ(got, (std::vector<std::string>{"/x/a b", "/x a", "/l/0 k", "/l/1 k", "/ x"}));

  // Objects large enough to look keys up in a hash map.
  std::string big = "{";
  for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  big += "\"k5\":\"five\",\"k39\":null,\"k0\":[]}";
  r = both(big);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value.as_object().size(), 40u);
  EXPECT_EQ(r.value.find("k5")->as_string(), "five");
  EXPECT_TRUE(r.value.find("k39")->is_null());
  EXPECT_EQ(r.value.as_object()[0].first, "k0");
  EXPECT_TRUE(r.value.as_object()[0].second.is_array());
  EXPECT_EQ(r.duplicates.size(), 3u);
}

// ---- nesting ------------------------------------------------------------------------------

TEST(JsonExact, NestingUpToTheBound) {
  const uint32_t bound = limits::kMaxJsonDepth;
  EXPECT_EQ(bound, json::kDefaultMaxDepth);
  for (uint32_t d : {1u, 2u, 100u, bound - 1, bound}) {
    ok(nested_arrays(d));
    ok(nested_objects(d));
  }
  for (uint32_t d : {bound + 1, bound + 10, 100000u}) {
    for (const std::string& doc : {nested_arrays(d), nested_objects(d)}) {
      json::ParseError e = rejected(doc);
      EXPECT_NE(e.message.find("nesting deeper than " + std::to_string(bound)), std::string::npos) << e.message;
      EXPECT_EQ(e.offset, doc[0] == '[' ? bound : bound * 5);  // the container one level too deep
    }
  }
  // A smaller bound on request.
  EXPECT_TRUE(both(nested_arrays(4), 4).ok());
  EXPECT_FALSE(both(nested_arrays(5), 4).ok());
  EXPECT_FALSE(both("[{\"a\":[{}]}]", 3).ok());
  EXPECT_TRUE(both("[{\"a\":[1]}]", 3).ok());
}

TEST(JsonExact, DeepValuesAreSafeOnAThreadStack) {
  // Parsing, converting, dumping, comparing and destroying use no stack proportional to the
  // depth: all of it runs on a 256 KiB thread, for documents at the bound and for a value built
  // 200000 levels deep (which recursion would need megabytes for).
  on_small_stack(256 << 10, [] {
    for (const std::string& doc : {nested_arrays(json::kDefaultMaxDepth), nested_objects(json::kDefaultMaxDepth)}) {
      json::ParseResult a = json::parse(doc), b = json::parse_exact(doc);
      ASSERT_TRUE(a.ok());
      ASSERT_TRUE(b.ok());
      EXPECT_EQ(a.value.dump(), doc);
      EXPECT_TRUE(a.value == b.value);
      json::Value copy = a.value;  // shared: destroying one leaves the other whole
      a = json::ParseResult{};
      EXPECT_EQ(copy.dump(), doc);
      EXPECT_FALSE(json::parse(doc + "x").ok());
    }
    json::Value v = json::Array{};
    for (int i = 0; i < 200000; ++i) {
      json::Array a;
      a.push_back(std::move(v));
      if (i % 2) {
        v = json::Value(std::move(a));
      } else {
        json::Object o;
        o.emplace_back("k", json::Value(std::move(a)));
        v = json::Value(std::move(o));
      }
    }
    std::string text = v.dump();
    EXPECT_EQ(text.size(), 200000u / 2 * (6 + 2) + 200000u + 2);
    json::Value w = v;
    w.mutable_array();  // copy-on-write of the top level only
    EXPECT_TRUE(v == w);
    v = json::Value();
    w = json::Value();
  });
}

// ---- the fast path declines only what the exact reader must judge --------------------------

TEST(JsonExact, LocateErrorOnValidDocuments) {
  for (const char* valid : {"{}", "[1e400]", "[1000000000000000000000]", "[NaN]", R"(["\ud800"])"})
    EXPECT_EQ(json::locate_error(valid).message, "the document could not be parsed") << valid;
}

// ---- against Python -------------------------------------------------------------------------

namespace {

struct Doc {
  std::string name;
  std::string bytes;
};

// Hostile documents for the differential test: every rule above, in many positions.
std::vector<Doc> hostile_documents() {
  std::vector<Doc> docs;
  auto add = [&](std::string name, std::string bytes) { docs.push_back({std::move(name), std::move(bytes)}); };
  int n = 0;
  auto many = [&](const std::string& prefix, std::initializer_list<std::string> list) {
    for (const auto& s : list) add(prefix + "_" + std::to_string(n++), s);
  };

  // Big integers in every position.
  std::string d30 = "1000000000000000019884624838656";
  std::string d4300 = "9" + std::string(4299, '1'), d4301 = d4300 + "1";
  for (const std::string& i : Strs{d30, "-" + d30, "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                        "-9223372036854775809", "18446744073709551615", "18446744073709551616", "-18446744073709551615",
                        "-18446744073709551616", "99999999999999999999", d4300, "-" + d4300, d4301, "-" + d4301, "0", "-0",
                        "123456789012345678901234567890123456789012345678901234567890"}) {
    many("int_top", {i, " " + i + " "});
    many("int_array", {"[" + i + "]", "[1, " + i + ", 2]", "[[" + i + "]]"});
    many("int_object", {"{\"a\": " + i + "}", "{\"model_max_length\": " + i + ", \"x\": [" + i + "]}",
                        "{\"a\": {\"b\": [{\"c\": " + i + "}]}}"});
    many("int_float", {i + ".0", i + "e0", i + "e-10", i + ".5e3"});
  }
  // Literals and misspellings.
  many("lit", {"NaN", "Infinity", "-Infinity", "[NaN,Infinity,-Infinity]", "{\"a\":NaN,\"b\":Infinity,\"c\":-Infinity}",
               "[[NaN],{\"x\":[-Infinity]}]", "true", "false", "null", "[true,false,null]", " true ", "nan", "NAN", "Nan",
               "infinity", "INFINITY", "Infinit", "Infinityy", "-NaN", "+Infinity", "-infinity", "- Infinity", "NaN1",
               "[NaN Infinity]", "tru", "True", "TRUE", "nul", "None", "null1", "fals", "falsee", "undefined",
               "[true false]", "[truefalse]", "-Inf", "Inf", "+NaN", "[-NaN]", "{\"a\":nan}", "t", "n", "f", "N", "I"});
  // Floats at and beyond the double range.
  std::string half =
      "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887"
      "910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914"
      "819860834936475292719074168444365510704342711559699508093042880177904174497792";
  many("float", {"1e308", "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "1e309", "1e400",
                 "-1e400", "1e-400", "-1e-400", "[1e400,-1e400,1e-400,-1e-400]", "{\"a\":1e999}", "5e-324", "2e-324",
                 "3e-324", "2.4703282292062328e-324", "2.4703282292062327e-324", "2.2250738585072011e-308",
                 "2.2250738585072014e-308", "4.9e-324", "1e-323", half, half + ".0", half + "e0", "-" + half + ".0",
                 half.substr(0, half.size() - 1) + "1.9", "1e99999999999999999999", "-1e-99999999999999999999",
                 "0e99999999999999999999", "0.0", "-0.0", "-0", "0e0", "-0e-0", "0E+0", "1E5", "1e+5", "1.5E-3", "0.1",
                 "0.30000000000000004", "123456789012345678901234567890.123", "0." + std::string(400, '0') + "1e400",
                 "1" + std::string(400, '0') + "e-400", "9007199254740993.0", "9007199254740993", "1e22", "1e23",
                 "1e16", "1e15", "1e-4", "1e-5", "0.0001", "0.00001", "123456789.123456789", "[0.1,0.2,0.30000000000000004]",
                 "1" + std::string(5000, '1') + ".0", "0." + std::string(5000, '3'), "1e0000000000000000000000000001",
                 "0." + std::string(100000, '0') + "1e100000", "1" + std::string(100000, '0') + "e-100000",
                 "1e-9223372036854775808", "1e9223372036854775807", "1e18446744073709551616", "-1e-18446744073709551616",
                 "01", "-01", "00", "1.", ".5", "1e", "1e+", "1E-", "0x10", "1_000", "1.e5", "-", "- 1", "1.5.5", "1e5.5",
                 "[1.]", "[-]", "0.0.0", "1ee5", "[1e]", "{\"a\":-}", "+1", "[+1]", "[01]", "[1.5e]", "2.", "-.5"});
  {
    std::mt19937_64 rng(42);
    std::string arr = "[";
    for (int i = 0; i < 3000; ++i) {
      if (i) arr += ",";
      std::string x = rng() % 3 == 0 ? "-" : "";
      size_t len = 1 + rng() % 20;
      x += std::to_string(1 + rng() % 9);
      for (size_t k = 1; k < len; ++k) x += char('0' + rng() % 10);
      if (rng() % 2) {
        x += ".";
        for (size_t k = 0, m = 1 + rng() % 25; k < m; ++k) x += char('0' + rng() % 10);
      }
      if (rng() % 2) x += "e" + std::to_string(int(rng() % 700) - 350);
      arr += x;
    }
    add("float_random_3000", arr + "]");
  }
  // Nesting: every depth up to the bound and beyond.
  const uint32_t bound = limits::kMaxJsonDepth;
  for (uint32_t d = 1; d <= bound + 1; ++d) {
    add("depth_array_" + std::to_string(d), nested_arrays(d));
    if (d % 10 == 0 || d + 6 >= bound) add("depth_object_" + std::to_string(d), nested_objects(d));
  }
  for (uint32_t d : {bound + 2, bound + 10, 1000u, 5000u}) {
    add("depth_array_" + std::to_string(d), nested_arrays(d));
    add("depth_object_" + std::to_string(d), nested_objects(d));
  }
  for (uint32_t d : {bound - 1, bound, bound + 1}) {
    std::string mixed;
    for (uint32_t i = 0; i < d; ++i) mixed += i % 2 ? "{\"a\":" : "[";
    for (uint32_t i = d; i-- > 0;) mixed += i % 2 ? "}" : "]";
    add("depth_mixed_" + std::to_string(d), mixed);
    add("depth_scalar_" + std::to_string(d), std::string(d, '[') + "1" + std::string(d, ']'));
  }
  // BOM.
  many("bom", {"\xEF\xBB\xBF{}", "\xEF\xBB\xBF" "1", "\xEF\xBB\xBF", " \xEF\xBB\xBF{}", "{}\xEF\xBB\xBF", "\"\xEF\xBB\xBF\"",
               "\"\\ufeff\"", "{\"\xEF\xBB\xBF\":1}", "\xEF\xBB{}", "\xEF{}"});
  // Invalid UTF-8 (and the edges of valid).
  for (std::string b : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
                        "\xED\xA0\x80\xED\xB0\x80", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80",
                        "\xF5\x80\x80\x80", "\xF8\x88\x80\x80\x80", "\xFC\x84\x80\x80\x80\x80", "\xFE", "\xFF", "\x80",
                        "\xBF", "\xE2\x82", "\xE2\x28\xA1", "\xC3", "\xF0\x9F\x98", "\xC3\x28", "\xED\x9F\xBF", "\xEE\x80\x80",
                        "\xEF\xBF\xBF", "\xEF\xBF\xBE", "\xF4\x8F\xBF\xBF", "\xF0\x90\x80\x80", "\xC2\x80", "\xDF\xBF"}) {
    many("utf8", {"\"" + b + "\"", "[\"a" + b + "b\"]", "{\"" + b + "\":1}", "[1]" + b, b, "[1," + b + "]", " " + b + " 1"});
  }
  // Surrogates, lone and paired.
  many("surrogate", {R"("\ud800")", R"("\udbff")", R"("\udc00")", R"("\udfff")", R"("\udc00x")", R"("\ud800x")",
                     R"("\ud800\udc00")", R"("\uD83D\uDE00")", R"("\ud83d\ude00\ud83d")", R"("\ud800\ud800\udc00")",
                     R"("\udc00\ud800")", R"("\ud800\u0041")", R"("\ud800\uzzzz")", R"("\ud800\u12")", R"("\ud800\")",
                     R"("\ud800\n")", R"({"\ud800":1})", R"({"\ud83d\ude00":1,"😀":2})", R"(["\ud800","\udc00"])",
                     R"("\uDBFF\uDFFF")", R"("\ud800\\udc00")", R"("\ud800\/")", R"("\ud800\udbff\udfff")",
                     R"("\udfff\udfff")", R"("\ud800)", R"("\ud800\u)", R"("\ud800\ud)"});
  // Duplicate keys at several depths.
  {
    std::string big = "{";
    for (int i = 0; i < 40; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
    big += "\"k5\":\"five\",\"k39\":null,\"k0\":[]}";
    many("dup", {R"({"a":1,"a":2})", R"({"a":1,"b":2,"a":3})", R"({"x":{"a":1,"a":{"b":1,"b":2}},"x":5})",
                 R"([{"k":1,"k":2},{"k":3,"k":4}])", R"({"a":1,"\u0061":2})", R"({"":1,"":2})", big,
                 R"({"a":{"a":{"a":1,"a":2},"a":3},"a":4})", R"({"a":[1,{"b":1,"b":[{"c":1,"c":2}]}],"a":null})"});
  }
  // Escapes and control characters.
  many("escape", {R"("\"\\\/\b\f\n\r\t")", R"("\u0000")", R"("\u001f")", R"("\u007f")", R"("\u00e9\u00E9")",
                  R"("\uFFFF\uFFFE")", R"("\x41")", R"("\a")", R"("\'")", R"("\U0041")", R"("\u00G0")", R"("\u004")",
                  "\"\\", "\"\\u", "\"\x7f\"", R"({"\n":"\t"})", "\"abc", "\"", "\"\\\"", R"(["a\"])"});
  for (int c = 0; c < 0x20; ++c) {
    add("control_value_" + std::to_string(c), "[\"a" + std::string(1, char(c)) + "b\"]");
    add("control_key_" + std::to_string(c), "{\"a" + std::string(1, char(c)) + "\":1}");
  }
  // Trailing garbage, empty documents, whitespace.
  many("trailing", {"{} x", "[]]", "1 2", "{}{}", "\"a\"\"b\"", "null null", std::string("{}\0", 3), std::string("\0{}", 3),
                    "{}\x1a", "[1]//c", "{} ,", "{}\n\n\nx", "[1]\n", "1\r\n", "NaN NaN", "[] []"});
  many("empty", {"", " ", "\n", "\t\r\n ", "\f", std::string("\0", 1)});
  many("ws", {" \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ \t\n\r1 \t\n\r, \t\n\r2 \t\n\r] \t\n\r} \t\n\r", "\f{}", "{}\f",
              "\v1", "1\v", "\xC2\xA0" "1", "\xE2\x80\xA8" "1", "\xE3\x80\x80" "1", "[1,\f2]", "{\"a\":\x0b" "1}",
              "\xC2\x85" "1", "[1,\xC2\xA0" "2]", "\r\r\r[]\r"});
  // Structure.
  many("structure", {"[1,]", "{\"a\":1,}", "[,1]", "{,}", "{\"a\"}", "{\"a\" 1}", "{1:2}", "{'a':1}", "[1 2]",
                     "{\"a\":1 \"b\":2}", "[", "]", "{", "}", "[1", "{\"a\":", "{\"a\":1", ":", ",", "[]", "{}", "\"\"",
                     "[[],{}]", "{\"\":\"\"}", "[[[]]]", "{\"a\":[]}", "[{}]", "{\"a\"::1}", "[1,,2]", "{\"a\":1,,\"b\":2}",
                     "{\"a\":1}}", "[1]]", "[}", "{]"});
  // Real-world shapes.
  many("real", {R"({"add_bos_token": true, "model_max_length": 1000000000000000019884624838656, "pad_token": "<pad>"})",
                R"({"bos_token_id": 2, "eos_token_id": [1, 107], "pad_token_id": 0, "cache_implementation": "hybrid"})",
                R"({"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}, "rms_norm_eps": 1e-05})",
                R"({"metadata": {"total_size": 18446744073709551616}, "weight_map": {"a": "model.safetensors"}})"});
  return docs;
}

struct Comparison {
  size_t compared = 0, agree = 0, both_reject = 0, both_accept = 0;
  std::vector<std::string> disagreements;
};

// Runs the oracle over `files` and compares each with ckpt's verdict.
void compare_with_python(const std::vector<fs::path>& files, const fs::path& scratch, Comparison& c) {
  fs::path manifest = scratch / "manifest.txt";
  {
    std::ofstream m(manifest);
    for (const auto& f : files) m << f.string() << "\n";
  }
  std::string script = std::string(CKPT_SOURCE_DIR) + "/tests/model/json_python.py";
  // -I: isolated (no PYTHON* variables such as PYTHONINTMAXSTRDIGITS, no user site).
  test::CommandResult r = test::run_program({kPython, "-I", script, manifest.string(), scratch.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream out(r.out);
  std::string line;
  ASSERT_TRUE(std::getline(out, line));
  ASSERT_EQ(line.rfind("DEPTH_LIMIT ", 0), 0u) << line;
  // The bound is what this interpreter reads at the oracle's call depth (see json_python.py).
  EXPECT_EQ(std::stoul(line.substr(12)), limits::kMaxJsonDepth);
  for (const auto& f : files) {
    std::string py;
    ASSERT_TRUE(std::getline(out, py)) << "no verdict for " << f;
    std::string bytes = test::read_text(f);
    json::ParseResult ours = json::parse(bytes);
    json::ParseResult exact = json::parse_exact(bytes);
    if (!same_result(ours, exact)) c.disagreements.push_back(f.filename().string() + ": parse and parse_exact differ");
    bool py_ok = py.rfind("OK ", 0) == 0;
    ++c.compared;
    std::string mine = ours.ok() ? "OK " + ours.value.dump(true) : "REJECT";
    if (py_ok ? mine == py : !ours.ok()) {
      ++c.agree;
      ++(py_ok ? c.both_accept : c.both_reject);
    } else {
      c.disagreements.push_back(f.string() + "\n    python: " + py.substr(0, 240) + "\n    ckpt:   " +
                                (ours.ok() ? mine : show(ours)).substr(0, 240));
    }
  }
  EXPECT_FALSE(std::getline(out, line)) << "extra output: " << line;
}

void report(const Comparison& c, const char* what) {
  std::cout << "[ json_python ] " << what << ": " << c.compared << " files compared, " << c.agree << " agree ("
            << c.both_accept << " accepted with the same value, " << c.both_reject << " rejected by both), "
            << c.disagreements.size() << " disagreements\n";
  std::string list;
  for (const auto& d : c.disagreements) list += d + "\n";
  EXPECT_TRUE(c.disagreements.empty()) << c.disagreements.size() << " disagreements:\n" << list;
  ::testing::Test::RecordProperty("compared", static_cast<int>(c.compared));
  ::testing::Test::RecordProperty("agree", static_cast<int>(c.agree));
}

bool have_python() { return fs::exists(kPython); }

}  // namespace

TEST(JsonPython, HostileDocumentsReadAsPythonReadsThem) {
  if (!have_python()) GTEST_SKIP() << kPython << " not found: the differential test needs Debian's Python";
  test::TempDir tmp;
  std::vector<fs::path> files;
  std::vector<Doc> docs = hostile_documents();
  for (size_t i = 0; i < docs.size(); ++i) {
    fs::path p = tmp / (std::to_string(i) + "_" + docs[i].name + ".json");
    test::write_text(p, docs[i].bytes);
    files.push_back(p);
  }
  Comparison c;
  compare_with_python(files, tmp.path(), c);
  EXPECT_GT(c.both_accept, 1000u);
  EXPECT_GT(c.both_reject, 300u);
  report(c, "hostile documents");
}

TEST(JsonPython, CorpusReadAsPythonReadsIt) {
  CKPT_REQUIRE_CORPUS();
  if (!have_python()) GTEST_SKIP() << kPython << " not found: the differential test needs Debian's Python";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(test::corpus_dir()))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  test::TempDir tmp;
  Comparison c;
  compare_with_python(files, tmp.path(), c);
  report(c, "corpus");
}
