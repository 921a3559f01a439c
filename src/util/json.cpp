#include "ckpt/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include <simdjson.h>

#include "util/pyfloat.h"

namespace ckpt::json {

Array& Value::mutable_array() {
  auto& p = std::get<std::shared_ptr<Array>>(v_);
  if (p.use_count() > 1) p = std::make_shared<Array>(*p);
  return *p;
}

Object& Value::mutable_object() {
  auto& p = std::get<std::shared_ptr<Object>>(v_);
  if (p.use_count() > 1) p = std::make_shared<Object>(*p);
  return *p;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

std::optional<int64_t> Value::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v && v->is_int()) return v->as_int();
  return std::nullopt;
}
std::optional<double> Value::get_number(std::string_view key) const {
  const Value* v = find(key);
  if (v && v->is_number()) return v->as_double();
  return std::nullopt;
}
std::optional<std::string> Value::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v && v->is_string()) return v->as_string();
  return std::nullopt;
}
std::optional<bool> Value::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v && v->is_bool()) return v->as_bool();
  return std::nullopt;
}

bool Value::operator==(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (is_int() && o.is_int()) return as_int() == o.as_int();
    return as_double() == o.as_double();
  }
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::null: return true;
    case Type::boolean: return as_bool() == o.as_bool();
    case Type::string: return as_string() == o.as_string();
    case Type::array: return as_array() == o.as_array();
    case Type::object: return as_object() == o.as_object();
    default: return false;
  }
}

void append_quoted(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (c == 0x7f && ensure_ascii)) {  // json.dumps(ensure_ascii=True) keeps only ' '..'~'
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      // Decode one UTF-8 sequence; invalid bytes are escaped as themselves.
      uint32_t cp = c;
      size_t extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
      if (extra && i + extra < s.size()) {
        cp = c & (0x3F >> extra);
        for (size_t k = 1; k <= extra && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
        i += extra;
      }
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      }
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

std::string quoted(std::string_view s, bool ensure_ascii) {
  std::string out;
  append_quoted(out, s, ensure_ascii);
  return out;
}

static void dump_into(const Value& v, std::string& out) {
  switch (v.type()) {
    case Type::null: out += "null"; break;
    case Type::boolean: out += v.as_bool() ? "true" : "false"; break;
    case Type::integer: out += std::to_string(v.as_int()); break;
    case Type::number: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += util::python_float_repr(d);
      break;
    }
    case Type::string: append_quoted(out, v.as_string()); break;
    case Type::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& e : v.as_array()) {
        if (!first) out.push_back(',');
        first = false;
        dump_into(e, out);
      }
      out.push_back(']');
      break;
    }
    case Type::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.as_object()) {
        if (!first) out.push_back(',');
        first = false;
        append_quoted(out, k);
        out.push_back(':');
        dump_into(e, out);
      }
      out.push_back('}');
      break;
    }
  }
}

std::string Value::dump() const {
  std::string out;
  dump_into(*this, out);
  return out;
}

std::pair<uint32_t, uint32_t> line_column(std::string_view text, uint64_t offset) {
  uint32_t line = 1, col = 1;
  uint64_t end = std::min<uint64_t>(offset, text.size());
  for (uint64_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return {line, col};
}

namespace {

// A small validating scanner used only to say *where* a document is broken.
// Iterative (explicit stack) so hostile nesting cannot overflow the C++ stack.
struct Locator {
  std::string_view t;
  size_t i = 0;
  uint32_t max_depth;

  void ws() {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  }
  std::optional<ParseError> fail(std::string msg) { return ParseError{std::move(msg), i, 0, 0}; }

  std::optional<ParseError> string() {
    ++i;  // opening quote
    while (i < t.size()) {
      unsigned char c = static_cast<unsigned char>(t[i]);
      if (c == '"') { ++i; return std::nullopt; }
      if (c == '\\') {
        if (i + 1 >= t.size()) break;
        char e = t[i + 1];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k)
            if (i + 2 + k >= t.size() || !std::isxdigit(static_cast<unsigned char>(t[i + 2 + k]))) {
              i += 2 + k;
              return fail("invalid \\u escape in string");
            }
          i += 6;
          continue;
        }
        if (!std::strchr("\"\\/bfnrt", e) || e == 0) { ++i; return fail("invalid escape in string"); }
        i += 2;
        continue;
      }
      if (c < 0x20) return fail("control character in string (must be escaped)");
      ++i;
    }
    return fail("unterminated string");
  }

  std::optional<ParseError> number() {
    size_t start = i;
    if (t[i] == '-') ++i;
    if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return fail("invalid number");
    if (t[i] == '0') ++i;
    else while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    if (i < t.size() && t[i] == '.') {
      ++i;
      if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return fail("invalid number: digit expected after '.'");
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
      ++i;
      if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
      if (i >= t.size() || !std::isdigit(static_cast<unsigned char>(t[i]))) return fail("invalid number: digit expected in exponent");
      while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    }
    (void)start;
    return std::nullopt;
  }

  std::optional<ParseError> run() {
    std::vector<char> stack;  // '{' or '['
    ws();
    if (i >= t.size()) return fail("empty document: a JSON value was expected");
    bool expect_value = true;
    while (true) {
      ws();
      if (expect_value) {
        if (i >= t.size()) return fail("unexpected end of document: a value was expected");
        char c = t[i];
        if (c == '{' || c == '[') {
          if (stack.size() >= max_depth) return fail("nesting deeper than " + std::to_string(max_depth) + " levels");
          stack.push_back(c);
          ++i;
          ws();
          if (i < t.size() && t[i] == (c == '{' ? '}' : ']')) {
            stack.pop_back();
            ++i;
            expect_value = false;
            if (stack.empty()) break;
            continue;
          }
          if (c == '{') {
            if (i >= t.size() || t[i] != '"') return fail("object key (a quoted string) expected");
            if (auto e = string()) return e;
            ws();
            if (i >= t.size() || t[i] != ':') return fail("':' expected after object key");
            ++i;
          }
          continue;
        }
        if (c == '"') {
          if (auto e = string()) return e;
        } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
          if (auto e = number()) return e;
        } else if (t.substr(i, 4) == "true" || t.substr(i, 4) == "null") {
          i += 4;
        } else if (t.substr(i, 5) == "false") {
          i += 5;
        } else {
          return fail(std::string("unexpected character '") + c + "': a value was expected");
        }
        expect_value = false;
        if (stack.empty()) break;
        continue;
      }
      // After a value inside a container.
      if (i >= t.size()) return fail(std::string("unexpected end of document: '") + (stack.back() == '{' ? '}' : ']') + "' expected");
      char c = t[i];
      char close = stack.back() == '{' ? '}' : ']';
      if (c == ',') {
        ++i;
        ws();
        if (stack.back() == '{') {
          if (i >= t.size() || t[i] != '"') return fail("object key (a quoted string) expected after ','");
          if (auto e = string()) return e;
          ws();
          if (i >= t.size() || t[i] != ':') return fail("':' expected after object key");
          ++i;
        }
        expect_value = true;
        continue;
      }
      if (c == close) {
        ++i;
        stack.pop_back();
        if (stack.empty()) break;
        continue;
      }
      return fail(std::string("',' or '") + close + "' expected");
    }
    ws();
    if (i < t.size()) return fail("trailing characters after the JSON value");
    return std::nullopt;
  }
};

bool valid_utf8(std::string_view s, size_t& bad) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t n = (c >= 0xC2 && c <= 0xDF) ? 1 : (c >= 0xE0 && c <= 0xEF) ? 2 : (c >= 0xF0 && c <= 0xF4) ? 3 : 0;
    if (n == 0 || i + n >= s.size()) { bad = i; return false; }
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) { bad = i; return false; }
    i += n + 1;
  }
  return true;
}

struct Converter {
  std::vector<DuplicateKey>& dups;
  std::string path;

  Value convert(simdjson::dom::element e) {
    using T = simdjson::dom::element_type;
    switch (e.type()) {
      case T::NULL_VALUE: return Value();
      case T::BOOL: return Value(bool(e.get_bool().value_unsafe()));
      case T::INT64: return Value(int64_t(e.get_int64().value_unsafe()));
      case T::UINT64: {
        uint64_t u = e.get_uint64().value_unsafe();
        return Value(double(u));
      }
      case T::DOUBLE: return Value(double(e.get_double().value_unsafe()));
      case T::STRING: return Value(std::string(e.get_string().value_unsafe()));
      case T::ARRAY: {
        Array a;
        simdjson::dom::array arr = e.get_array().value_unsafe();
        a.reserve(arr.size());
        size_t idx = 0;
        for (auto child : arr) {
          size_t saved = path.size();
          path += "/" + std::to_string(idx++);
          a.push_back(convert(child));
          path.resize(saved);
        }
        return Value(std::move(a));
      }
      case T::OBJECT: {
        Object o;
        simdjson::dom::object obj = e.get_object().value_unsafe();
        o.reserve(obj.size());
        std::unordered_set<std::string_view> seen;
        for (auto field : obj) {
          size_t saved = path.size();
          path += "/";
          path += field.key;
          Value child = convert(field.value);
          path.resize(saved);
          if (!seen.insert(field.key).second) {
            dups.push_back({path.empty() ? "/" : path, std::string(field.key)});
            for (auto& m : o)
              if (m.first == field.key) m.second = std::move(child);  // last wins, first position
            continue;
          }
          o.emplace_back(std::string(field.key), std::move(child));
        }
        return Value(std::move(o));
      }
    }
    return Value();
  }
};

}  // namespace

ParseError locate_error(std::string_view text, uint32_t max_depth) {
  ParseError err;
  size_t bad = 0;
  if (!valid_utf8(text, bad)) {
    err = ParseError{"invalid UTF-8 byte sequence", bad, 0, 0};
  } else {
    Locator loc{text, 0, max_depth};
    if (auto e = loc.run()) err = *e;
    else err = ParseError{"the document could not be parsed", 0, 0, 0};
  }
  auto [l, c] = line_column(text, err.offset);
  err.line = l;
  err.column = c;
  return err;
}

ParseResult parse(std::string_view text, uint32_t max_depth) {
  ParseResult result;
  simdjson::dom::parser parser;
  if (parser.allocate(std::max<size_t>(text.size(), 64), max_depth) != simdjson::SUCCESS) {
    result.error = ParseError{"cannot allocate a parser for " + std::to_string(text.size()) + " bytes", 0, 1, 1};
    return result;
  }
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  auto code = parser.parse(padded).get(root);
  if (code != simdjson::SUCCESS) {
    ParseError located = locate_error(text, max_depth);
    if (located.message == "the document could not be parsed") {
      // Valid by our grammar but refused by simdjson (e.g. an integer beyond 64 bits).
      located.message = std::string("unsupported JSON: ") + simdjson::error_message(code);
    }
    result.error = located;
    return result;
  }
  Converter conv{result.duplicates, ""};
  result.value = conv.convert(root);
  return result;
}

}  // namespace ckpt::json
