#include "ckpt/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_map>

#include <simdjson.h>

#include "io/limits.h"
#include "util/pyfloat.h"
#include "util/utf8.h"

namespace ckpt::json {

static_assert(kDefaultMaxDepth == limits::kMaxJsonDepth, "one nesting bound for JSON read as Python reads it");

namespace {

// Python's int-string conversion limit (sys.get_int_max_str_digits(), default 4300): int() of a
// longer decimal text raises ValueError, and so does json.loads of such an integer literal.
constexpr size_t kMaxIntDigits = 4300;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A decimal integer text: '-'? then "0" or [1-9][0-9]*.
bool canonical_integer(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i >= s.size()) return false;
  if (s[i] == '0') return s.size() == i + 1;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(i), s.end(), is_digit);
}

// Exact comparison of a double with an integer beyond int64 (its decimal text).
bool double_equals_big(double d, const std::string& big) {
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  char buf[400];  // the largest double has 309 digits
  int n = std::snprintf(buf, sizeof buf, "%.0f", d);  // glibc prints the exact value
  return n > 0 && static_cast<size_t>(n) < sizeof buf && big == std::string_view(buf, static_cast<size_t>(n));
}

bool double_equals_int(double d, int64_t i) {
  if (!std::isfinite(d) || d != std::trunc(d)) return false;
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(d) == i;
}

// A container Value that is the only owner of a non-empty array or object.
bool owns_nested(const Value& v) {
  if (v.is_array()) return !v.as_array().empty();
  if (v.is_object()) return !v.as_object().empty();
  return false;
}

}  // namespace

// ---- Value -------------------------------------------------------------------------------

std::optional<Value> integer_from_decimal(std::string_view decimal) {
  if (!canonical_integer(decimal)) return std::nullopt;
  int64_t v = 0;
  auto r = std::from_chars(decimal.data(), decimal.data() + decimal.size(), v);
  if (r.ec == std::errc() && r.ptr == decimal.data() + decimal.size()) return Value(v);  // "-0" too
  return Value(BigInt{std::string(decimal)});
}

Value::~Value() {
  if (type() == Type::array || type() == Type::object) release_nested();
}

// The last owner of a container destroys it. Nested containers it solely owns are first moved
// to a worklist, so no destructor below this one sees more than one level: destruction needs
// no stack proportional to the depth.
void Value::release_nested() noexcept {
  auto each_owned_child = [](Value& v, auto&& f) {
    if (auto* a = std::get_if<std::shared_ptr<Array>>(&v.v_)) {
      if (*a && a->use_count() == 1)
        for (Value& c : **a)
          if (c.type() == Type::array || c.type() == Type::object) f(c);
    } else if (auto* o = std::get_if<std::shared_ptr<Object>>(&v.v_)) {
      if (*o && o->use_count() == 1)
        for (auto& m : **o)
          if (m.second.type() == Type::array || m.second.type() == Type::object) f(m.second);
    }
  };
  // Moved-from containers hold no pointer; shared ones are not ours to take apart.
  auto takeable = [](const Value& c) {
    if (const auto* a = std::get_if<std::shared_ptr<Array>>(&c.v_)) return *a && a->use_count() == 1 && owns_nested(c);
    const auto* o = std::get_if<std::shared_ptr<Object>>(&c.v_);
    return *o && o->use_count() == 1 && owns_nested(c);
  };
  bool any = false;
  each_owned_child(*this, [&](Value& c) { any = any || takeable(c); });
  if (!any) return;  // one level: the members' destructors are all shallow
  try {
    std::vector<Value> work;
    auto take = [&](Value& c) {
      if (takeable(c)) work.push_back(std::move(c));
    };
    each_owned_child(*this, take);
    while (!work.empty()) {
      Value v = std::move(work.back());
      work.pop_back();
      each_owned_child(v, take);
    }  // v goes here with no nested container left in it
  } catch (...) {
    // No memory for the worklist: what is left is destroyed the recursive way.
  }
}

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

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_big_int()) {
    const std::string& t = big_int_text();
    double d = 0;
    auto r = std::from_chars(t.data(), t.data() + t.size(), d);  // correctly rounded
    if (r.ec == std::errc::result_out_of_range)  // an integer is never too small: too large
      return t[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return d;
  }
  return std::get<double>(v_);
}

std::string Value::integer_text() const { return is_int() ? std::to_string(as_int()) : big_int_text(); }

std::strong_ordering Value::compare_integer(uint64_t u) const {
  if (is_int()) {
    int64_t i = as_int();
    if (i < 0) return std::strong_ordering::less;
    return static_cast<uint64_t>(i) <=> u;
  }
  const std::string& t = big_int_text();
  if (t[0] == '-') return std::strong_ordering::less;  // below INT64_MIN
  uint64_t big = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), big);
  if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return big <=> u;  // 2^63 .. 2^64-1
  return std::strong_ordering::greater;  // beyond UINT64_MAX
}

namespace {

bool numbers_equal(const Value& a, const Value& b) {
  Type x = a.type(), y = b.type();
  if (x == Type::integer && y == Type::integer) return a.as_int() == b.as_int();
  if (x == Type::big_int && y == Type::big_int) return a.big_int_text() == b.big_int_text();
  if (x == Type::number && y == Type::number) return a.as_double() == b.as_double();
  if (x == Type::number) return numbers_equal(b, a);
  if (y != Type::number) return false;  // int64 vs big int: never equal (canonical forms)
  return x == Type::integer ? double_equals_int(b.as_double(), a.as_int())
                            : double_equals_big(b.as_double(), a.big_int_text());
}

}  // namespace

bool Value::operator==(const Value& other) const {
  std::vector<std::pair<const Value*, const Value*>> work;
  const Value* a = this;
  const Value* b = &other;
  while (true) {
    if (a->is_number() && b->is_number()) {
      if (!numbers_equal(*a, *b)) return false;
    } else if (a->type() != b->type()) {
      return false;
    } else {
      switch (a->type()) {
        case Type::null: break;
        case Type::boolean:
          if (a->as_bool() != b->as_bool()) return false;
          break;
        case Type::string:
          if (a->as_string() != b->as_string()) return false;
          break;
        case Type::array: {
          const Array& x = a->as_array();
          const Array& y = b->as_array();
          if (x.size() != y.size()) return false;
          if (&x == &y) break;
          for (size_t i = x.size(); i-- > 0;) work.emplace_back(&x[i], &y[i]);
          break;
        }
        case Type::object: {
          const Object& x = a->as_object();
          const Object& y = b->as_object();
          if (x.size() != y.size()) return false;
          if (&x == &y) break;
          for (size_t i = x.size(); i-- > 0;) {
            if (x[i].first != y[i].first) return false;
            work.emplace_back(&x[i].second, &y[i].second);
          }
          break;
        }
        default: return false;  // numbers were handled above
      }
    }
    if (work.empty()) return true;
    std::tie(a, b) = work.back();
    work.pop_back();
  }
}

// ---- writing -----------------------------------------------------------------------------

namespace {

// \uXXXX, lower-case hex as json.dumps writes it; `unit` is one UTF-16 code unit.
void append_u_escape(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char buf[6] = {'\\', 'u', kHex[(unit >> 12) & 15], kHex[(unit >> 8) & 15], kHex[(unit >> 4) & 15], kHex[unit & 15]};
  out.append(buf, sizeof buf);
}

// ED A0..BF 80..BF: the WTF-8 form of a surrogate code point (a lone \uD800-\uDFFF escape).
bool wtf8_surrogate_at(std::string_view s, size_t i) {
  return i + 2 < s.size() && static_cast<unsigned char>(s[i]) == 0xED &&
         (static_cast<unsigned char>(s[i + 1]) & 0xE0) == 0xA0 && (static_cast<unsigned char>(s[i + 2]) & 0xC0) == 0x80;
}

}  // namespace

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
      append_u_escape(out, c);
    } else if (c == 0xED && wtf8_surrogate_at(s, i)) {
      append_u_escape(out, 0xD000u | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
                               (static_cast<unsigned char>(s[i + 2]) & 0x3Fu));
      i += 2;
    } else if (c >= 0x80 && ensure_ascii) {
      // Decode one UTF-8 sequence; invalid bytes are escaped as themselves.
      uint32_t cp = c;
      size_t extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
      if (extra && i + extra < s.size()) {
        cp = c & (0x3F >> extra);
        for (size_t k = 1; k <= extra; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
        i += extra;
      }
      if (cp >= 0x10000) {
        cp -= 0x10000;
        append_u_escape(out, 0xD800 + (cp >> 10));
        append_u_escape(out, 0xDC00 + (cp & 0x3FF));
      } else {
        append_u_escape(out, cp);
      }
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

namespace {

// Iterative: an explicit stack of the containers being written.
void dump_into(const Value& root, std::string& out, bool ascii) {
  struct Frame {
    const Value* v;
    size_t next;
  };
  std::vector<Frame> stack;
  auto open = [&](const Value& v) {
    switch (v.type()) {
      case Type::null: out += "null"; break;
      case Type::boolean: out += v.as_bool() ? "true" : "false"; break;
      case Type::integer: {
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, v.as_int());
        out.append(buf, r.ptr);
        break;
      }
      case Type::big_int: out += v.big_int_text(); break;
      case Type::number: {
        double d = v.as_double();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += util::python_float_repr(d);
        break;
      }
      case Type::string: append_quoted(out, v.as_string(), ascii); break;
      case Type::array:
        if (v.as_array().empty()) {
          out += "[]";
        } else {
          out.push_back('[');
          stack.push_back({&v, 0});
        }
        break;
      case Type::object:
        if (v.as_object().empty()) {
          out += "{}";
        } else {
          out.push_back('{');
          stack.push_back({&v, 0});
        }
        break;
    }
  };
  open(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    const Value* child;
    if (f.v->is_array()) {
      const Array& a = f.v->as_array();
      if (f.next == a.size()) {
        out.push_back(']');
        stack.pop_back();
        continue;
      }
      if (f.next) out.push_back(',');
      child = &a[f.next++];
    } else {
      const Object& o = f.v->as_object();
      if (f.next == o.size()) {
        out.push_back('}');
        stack.pop_back();
        continue;
      }
      if (f.next) out.push_back(',');
      const Member& m = o[f.next++];
      append_quoted(out, m.first, ascii);
      out.push_back(':');
      child = &m.second;
    }
    open(*child);  // may grow the stack: f is not used after this
  }
}

}  // namespace

std::string Value::dump(bool ensure_ascii) const {
  std::string out;
  dump_into(*this, out, ensure_ascii);
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

// ---- reading -----------------------------------------------------------------------------

namespace {

// Builds Values from a stream of events (both readers feed it), so the two paths cannot differ
// in how containers, duplicate keys and their paths come out. Keys passed to key() must stay
// valid until their object ends (simdjson's tape, the document text, or the reader's arena).
// With build=false only the depth is kept (locate_error validates without building).
class Builder {
 public:
  Builder(std::vector<DuplicateKey>* dups, bool build) : dups_(dups), build_(build) {}

  size_t depth() const { return depth_; }
  bool in_object() const { return top_is_object_.back(); }

  void begin(bool object, size_t reserve = 0) {
    ++depth_;
    top_is_object_.push_back(object);
    if (!build_) return;
    Frame f;
    f.object = object;
    f.path_len = path_.size();
    if (!stack_.empty()) {
      const Frame& parent = stack_.back();
      path_.push_back('/');
      if (parent.object) path_.append(parent.key);
      else path_ += std::to_string(parent.a.size());
    }
    if (object) f.o.reserve(reserve);
    else f.a.reserve(reserve);
    stack_.push_back(std::move(f));
  }

  void key(std::string_view k) {
    if (build_) stack_.back().key = k;
  }

  void scalar(Value v) {
    if (build_) deliver(std::move(v));
  }

  void end() {
    --depth_;
    top_is_object_.pop_back();
    if (!build_) return;
    Frame& f = stack_.back();
    Value v = f.object ? Value(std::move(f.o)) : Value(std::move(f.a));
    path_.resize(f.path_len);
    stack_.pop_back();
    deliver(std::move(v));
  }

  Value take_root() { return std::move(root_); }

 private:
  static constexpr size_t kIndexFrom = 16;  // objects with more members look keys up in a hash map

  struct Frame {
    bool object = false;
    Array a;
    Object o;
    std::vector<std::string_view> keys;  // o's keys, stable views
    std::unordered_map<std::string_view, uint32_t> index;  // from kIndexFrom members on
    std::string_view key;  // the member being read
    size_t path_len = 0;   // path_'s length before this container's segment
  };

  void deliver(Value v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return;
    }
    Frame& f = stack_.back();
    if (!f.object) {
      f.a.push_back(std::move(v));
      return;
    }
    std::optional<size_t> at;
    if (f.keys.size() < kIndexFrom) {
      for (size_t i = 0; i < f.keys.size(); ++i)
        if (f.keys[i] == f.key) {
          at = i;
          break;
        }
    } else if (auto it = f.index.find(f.key); it != f.index.end()) {
      at = it->second;
    }
    if (at) {  // Python: the last value wins, at the first key's position
      f.o[*at].second = std::move(v);
      dups_->push_back({path_.empty() ? "/" : path_, std::string(f.key)});
      return;
    }
    f.o.emplace_back(std::string(f.key), std::move(v));
    f.keys.push_back(f.key);
    if (f.keys.size() == kIndexFrom) {
      f.index.reserve(2 * kIndexFrom);
      for (size_t i = 0; i < f.keys.size(); ++i) f.index.emplace(f.keys[i], static_cast<uint32_t>(i));
    } else if (f.keys.size() > kIndexFrom) {
      f.index.emplace(f.key, static_cast<uint32_t>(f.keys.size() - 1));
    }
  }

  std::vector<DuplicateKey>* dups_;
  bool build_;
  size_t depth_ = 0;
  std::vector<bool> top_is_object_;
  std::vector<Frame> stack_;
  std::string path_;
  Value root_;
};

// ---- the exact reader --------------------------------------------------------------------

// What Python's strict utf-8 codec rejects, or nullptr: overlong forms, encoded surrogates
// (ED A0..BF), code points beyond U+10FFFF, stray continuation bytes, truncated sequences.
const char* utf8_problem(std::string_view s, size_t& at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    // Skip ASCII eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    at = i;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    else if (c >= 0x80 && c <= 0xBF) return "a continuation byte without a lead byte";
    else if (c == 0xC0 || c == 0xC1) return "an overlong encoding";
    else return "a byte that never appears in UTF-8";
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (i + 1 >= n) return "a truncated sequence (the document ends inside it)";
    if (p[i + 1] < lo || p[i + 1] > hi) {
      if ((p[i + 1] & 0xC0) != 0x80) return "a truncated sequence (a lead byte without its continuation bytes)";
      if (c == 0xED) return "an encoded surrogate (U+D800..U+DFFF)";
      if (c == 0xF4) return "a code point beyond U+10FFFF";
      return "an overlong encoding";
    }
    for (size_t k = 2; k < len; ++k)
      if (i + k >= n || (p[i + k] & 0xC0) != 0x80) return "a truncated sequence (a lead byte without its continuation bytes)";
    i += len;
  }
  return nullptr;
}

// Python's json.loads (the C scanner of CPython 3.11) on an already decoded document, one
// event at a time: no recursion, no memory beyond the values it builds, a stack of at most
// max_depth containers and an arena of unescaped keys.
class ExactReader {
 public:
  ExactReader(std::string_view text, uint32_t max_depth, Builder& b) : t_(text), max_depth_(max_depth), b_(b) {}

  // nullopt when the document is accepted (the builder then holds its value).
  std::optional<ParseError> run() {
    // Python decodes the bytes first (strict utf-8), then json.loads refuses a leading BOM.
    size_t bad = 0;
    if (const char* why = utf8_problem(t_, bad))
      return fail(std::string("invalid UTF-8 byte sequence: ") + why + " (Python's strict utf-8 decoding rejects the file)", bad);
    if (t_.substr(0, 3) == "\xEF\xBB\xBF")
      return fail("unexpected UTF-8 BOM at the start of the document (Python's json.loads rejects it)", 0);
    ws();
    if (i_ >= t_.size()) return fail("empty document: a JSON value was expected");
    bool want_value = true;
    while (true) {
      if (want_value) {
        bool complete = false;
        if (auto e = value(complete)) return e;
        want_value = !complete;  // an opened container wants its first member
        continue;
      }
      // After a complete value: close containers, or go on to the next member.
      ws();
      if (b_.depth() == 0) {
        if (i_ < t_.size()) return fail("extra data after the JSON value: " + found() + " where the document should end");
        return std::nullopt;
      }
      bool obj = b_.in_object();
      char close = obj ? '}' : ']';
      if (i_ < t_.size() && t_[i_] == close) {
        ++i_;
        b_.end();
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        if (obj)
          if (auto e = member_key()) return e;
        want_value = true;
        continue;
      }
      return fail(std::string("expected ',' or '") + close + "' after " + (obj ? "an object member" : "an array element") +
                  ", found " + found());
    }
  }

 private:
  std::optional<ParseError> fail(std::string msg) { return fail(std::move(msg), i_); }
  std::optional<ParseError> fail(std::string msg, size_t at) { return ParseError{std::move(msg), at, 0, 0}; }

  std::string found() const {
    if (i_ >= t_.size()) return "the end of the document";
    unsigned char c = static_cast<unsigned char>(t_[i_]);
    char buf[16];
    if (c >= 0x21 && c < 0x7f) std::snprintf(buf, sizeof buf, "'%c'", c);
    else std::snprintf(buf, sizeof buf, "byte 0x%02X", c);
    return buf;
  }

  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }

  bool literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  // One value at i_. A scalar or an empty container is delivered whole (complete = true); a
  // non-empty container is opened, with an object's first key read (complete = false).
  std::optional<ParseError> value(bool& complete) {
    complete = true;
    ws();
    if (i_ >= t_.size()) return fail("unexpected end of the document: a value was expected");
    char c = t_[i_];
    switch (c) {
      case '[':
      case '{': {
        if (b_.depth() >= max_depth_)
          return fail("nesting deeper than " + std::to_string(max_depth_) +
                      " levels (the bound for JSON read as Python reads it)");
        bool obj = c == '{';
        ++i_;
        b_.begin(obj);
        ws();
        if (i_ < t_.size() && t_[i_] == (obj ? '}' : ']')) {
          ++i_;
          b_.end();
          return std::nullopt;
        }
        complete = false;
        if (obj) return member_key();
        return std::nullopt;
      }
      case '"': {
        std::string s;
        std::string_view view;
        bool escaped = false;
        if (auto e = string(s, view, escaped)) return e;
        b_.scalar(Value(escaped ? std::move(s) : std::string(view)));
        return std::nullopt;
      }
      case 'n':
        if (!literal("null")) break;
        b_.scalar(Value());
        return std::nullopt;
      case 't':
        if (!literal("true")) break;
        b_.scalar(Value(true));
        return std::nullopt;
      case 'f':
        if (!literal("false")) break;
        b_.scalar(Value(false));
        return std::nullopt;
      case 'N':
        if (!literal("NaN")) break;
        b_.scalar(Value(std::numeric_limits<double>::quiet_NaN()));
        return std::nullopt;
      case 'I':
        if (!literal("Infinity")) break;
        b_.scalar(Value(HUGE_VAL));
        return std::nullopt;
      case '-':
        if (literal("-Infinity")) {
          b_.scalar(Value(-HUGE_VAL));
          return std::nullopt;
        }
        return number();
      default:
        if (is_digit(c)) return number();
        break;
    }
    return fail("expected a value (an object, array, string, number, true, false, null, NaN, Infinity or -Infinity), found " +
                found());
  }

  // '"' key '"' ws ':' at i_ (after '{' or ','); the member's value follows.
  std::optional<ParseError> member_key() {
    ws();
    if (i_ >= t_.size() || t_[i_] != '"')
      return fail("expected an object key (a string in double quotes), found " + found());
    std::string s;
    std::string_view view;
    bool escaped = false;
    if (auto e = string(s, view, escaped)) return e;
    if (escaped) view = keys_.emplace_back(std::move(s));  // stable until the parse ends
    b_.key(view);
    ws();
    if (i_ >= t_.size() || t_[i_] != ':') return fail("expected ':' after an object key, found " + found());
    ++i_;
    return std::nullopt;
  }

  bool hex4(size_t at, uint32_t& out) const {
    if (at + 4 > t_.size()) return false;
    out = 0;
    for (size_t k = 0; k < 4; ++k) {
      char h = t_[at + k];
      uint32_t d;
      if (h >= '0' && h <= '9') d = static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') d = static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') d = static_cast<uint32_t>(h - 'A' + 10);
      else return false;
      out = out << 4 | d;
    }
    return true;
  }

  // The string at i_ ('"'). Without escapes `view` points into the text; else `escaped` is set
  // and `out` holds it decoded (lone surrogate escapes as WTF-8).
  std::optional<ParseError> string(std::string& out, std::string_view& view, bool& escaped) {
    size_t open = i_++;
    size_t start = i_;
    escaped = false;
    while (i_ < t_.size()) {
      unsigned char c = static_cast<unsigned char>(t_[i_]);
      if (c == '"' || c == '\\' || c < 0x20) break;
      ++i_;
    }
    if (i_ < t_.size() && t_[i_] == '"') {
      view = t_.substr(start, i_ - start);
      ++i_;
      return std::nullopt;
    }
    escaped = true;
    out.assign(t_.substr(start, i_ - start));
    while (i_ < t_.size()) {
      unsigned char c = static_cast<unsigned char>(t_[i_]);
      if (c == '"') {
        ++i_;
        return std::nullopt;
      }
      if (c < 0x20) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "control character U+%04X in a string (it must be written as an escape)", c);
        return fail(buf);
      }
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        ++i_;
        continue;
      }
      if (i_ + 1 >= t_.size()) break;
      char e = t_[i_ + 1];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!hex4(i_ + 2, cp)) return fail("invalid \\uXXXX escape in a string: four hex digits must follow \\u");
          i_ += 6;
          // A high surrogate followed by \u: the next four must be hex digits (CPython checks
          // them here); a low surrogate joins it, anything else leaves it lone.
          if (cp >= 0xD800 && cp <= 0xDBFF && t_.substr(i_, 2) == "\\u") {
            uint32_t lo;
            if (!hex4(i_ + 2, lo)) return fail("invalid \\uXXXX escape in a string: four hex digits must follow \\u");
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              i_ += 6;
            }
          }
          util::append_utf8(out, cp);  // a lone surrogate as WTF-8
          continue;
        }
        default: return fail(std::string("invalid escape '\\") + (e >= 0x21 && e < 0x7f ? std::string(1, e) : "?") +
                             "' in a string (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
      }
      i_ += 2;
    }
    return fail("unterminated string (it starts here)", open);
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? at i_, as int (any size up to Python's
  // digit limit) or float (correctly rounded; beyond the double range: +-inf or +-0.0).
  std::optional<ParseError> number() {
    size_t start = i_;
    bool neg = t_[i_] == '-';
    if (neg) ++i_;
    if (i_ >= t_.size() || !is_digit(t_[i_])) return fail("invalid number: a digit must follow '-'");
    size_t int_begin = i_;
    if (t_[i_] == '0') ++i_;
    else
      while (i_ < t_.size() && is_digit(t_[i_])) ++i_;
    size_t int_end = i_;
    if (t_[int_begin] == '0' && i_ < t_.size() && is_digit(t_[i_]))
      return fail("invalid number: leading zeros are not allowed");
    bool is_float = false;
    size_t frac_begin = 0, frac_end = 0;
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      if (i_ >= t_.size() || !is_digit(t_[i_])) return fail("invalid number: a digit must follow '.'");
      frac_begin = i_;
      while (i_ < t_.size() && is_digit(t_[i_])) ++i_;
      frac_end = i_;
      is_float = true;
    }
    int64_t exp = 0;
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      bool eneg = false;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) eneg = t_[i_++] == '-';
      if (i_ >= t_.size() || !is_digit(t_[i_])) return fail("invalid number: a digit must follow the exponent's 'e'");
      while (i_ < t_.size() && is_digit(t_[i_])) {
        if (exp < 1'000'000'000'000'000) exp = exp * 10 + (t_[i_] - '0');  // saturates far beyond any double
        ++i_;
      }
      if (eneg) exp = -exp;
      is_float = true;
    }
    std::string_view lit = t_.substr(start, i_ - start);
    if (!is_float) {
      size_t digits = int_end - int_begin;
      if (digits > kMaxIntDigits)
        return fail("integer literal of " + std::to_string(digits) + " digits: Python's int() refuses more than " +
                        std::to_string(kMaxIntDigits) + " (sys.get_int_max_str_digits()), so json.loads raises ValueError",
                    start);
      b_.scalar(*integer_from_decimal(lit));
      return std::nullopt;
    }
    double d = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), d);  // correctly rounded, as float()
    if (r.ec == std::errc::result_out_of_range) {
      // Too large (inf) or too small (0.0) for a double. The decimal exponent of the first
      // significant digit tells which: |value| = 0.d... * 10^k.
      int64_t k;
      if (t_[int_begin] != '0') {
        k = static_cast<int64_t>(int_end - int_begin) + exp;
      } else {
        size_t j = frac_begin;
        while (j < frac_end && t_[j] == '0') ++j;
        k = -static_cast<int64_t>(j - frac_begin) + exp;
      }
      d = k > 0 ? HUGE_VAL : 0.0;
      if (neg) d = -d;
    } else if (r.ec != std::errc() || r.ptr != lit.data() + lit.size()) {
      return fail("invalid number", start);  // not reached: the grammar was checked above
    }
    b_.scalar(Value(d));
    return std::nullopt;
  }

  std::string_view t_;
  size_t i_ = 0;
  uint32_t max_depth_;
  Builder& b_;
  std::deque<std::string> keys_;  // unescaped keys (deque: elements never move)
};

// ---- simdjson's tape to Values -----------------------------------------------------------

void convert(simdjson::dom::element root, Builder& b) {
  using T = simdjson::dom::element_type;
  struct Open {
    bool object;
    simdjson::dom::array::iterator ai, ae;
    simdjson::dom::object::iterator oi, oe;
  };
  std::vector<Open> open;
  auto visit = [&](simdjson::dom::element e) {
    switch (e.type()) {
      case T::NULL_VALUE: b.scalar(Value()); return;
      case T::BOOL: b.scalar(Value(bool(e.get_bool().value_unsafe()))); return;
      case T::INT64: b.scalar(Value(int64_t(e.get_int64().value_unsafe()))); return;
      case T::UINT64: {  // only above INT64_MAX: a big int for us, as for Python
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, uint64_t(e.get_uint64().value_unsafe()));
        b.scalar(*integer_from_decimal(std::string_view(buf, static_cast<size_t>(r.ptr - buf))));
        return;
      }
      case T::DOUBLE: b.scalar(Value(double(e.get_double().value_unsafe()))); return;
      case T::STRING: b.scalar(Value(std::string(e.get_string().value_unsafe()))); return;
      case T::ARRAY: {
        simdjson::dom::array a = e.get_array().value_unsafe();
        b.begin(false, a.size());
        open.push_back({false, a.begin(), a.end(), {}, {}});
        return;
      }
      case T::OBJECT: {
        simdjson::dom::object o = e.get_object().value_unsafe();
        b.begin(true, o.size());
        open.push_back({true, {}, {}, o.begin(), o.end()});
        return;
      }
    }
  };
  visit(root);
  while (!open.empty()) {
    Open& top = open.back();
    if (!top.object) {
      if (!(top.ai != top.ae)) {
        open.pop_back();
        b.end();
        continue;
      }
      simdjson::dom::element e = *top.ai;
      ++top.ai;
      visit(e);  // may grow `open`: top is not used after this
    } else {
      if (!(top.oi != top.oe)) {
        open.pop_back();
        b.end();
        continue;
      }
      simdjson::dom::key_value_pair field = *top.oi;
      ++top.oi;
      b.key(field.key);
      visit(field.value);
    }
  }
}

void finish(ParseError& e, std::string_view text) {
  auto [l, c] = line_column(text, e.offset);
  e.line = l;
  e.column = c;
}

}  // namespace

ParseResult parse_exact(std::string_view text, uint32_t max_depth) {
  ParseResult result;
  Builder b(&result.duplicates, true);
  ExactReader reader(text, max_depth, b);
  if (auto e = reader.run()) {
    finish(*e, text);
    result.error = std::move(e);
    result.duplicates.clear();
    return result;
  }
  result.value = b.take_root();
  return result;
}

ParseError locate_error(std::string_view text, uint32_t max_depth) {
  Builder b(nullptr, false);
  ExactReader reader(text, max_depth, b);
  ParseError err{"the document could not be parsed", 0, 0, 0};
  if (auto e = reader.run()) err = std::move(*e);
  finish(err, text);
  return err;
}

ParseResult parse(std::string_view text, uint32_t max_depth) {
  // simdjson reads what it can; everything it declines goes to the exact reader. It never
  // accepts what Python rejects (tests/model/json_python_test.cpp holds it to that); a leading
  // UTF-8 BOM goes to the exact reader first, whatever the simdjson release does with one
  // (3.0.1 refuses it; a release that skipped it would accept what Python rejects).
  if (text.substr(0, 3) == "\xEF\xBB\xBF") return parse_exact(text, max_depth);
  ParseResult result;
  simdjson::dom::parser parser;
  if (parser.allocate(std::max<size_t>(text.size(), 64), max_depth) != simdjson::SUCCESS) {
    result.error = ParseError{"cannot allocate a parser for " + std::to_string(text.size()) + " bytes", 0, 1, 1};
    return result;
  }
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) return parse_exact(text, max_depth);
  Builder b(&result.duplicates, true);
  convert(root, b);
  result.value = b.take_root();
  return result;
}

}  // namespace ckpt::json
