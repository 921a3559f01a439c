// Jinja's builtin filters, json.dumps for `tojson`, and the Python str/dict/list methods
// the sandbox lets templates call.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "jinja/interp.h"
#include "util/pyfloat.h"

namespace ckpt::jinja {

const char* filter_name(int id);

namespace {

// ---- case mapping (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic)
uint32_t lower_cp(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c >= 0x100 && c <= 0x137 && c != 0x130) return c | 1;
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}
uint32_t upper_cp(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x137 && c != 0x131) return c & ~1u;
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c : c - 1;
  if (c >= 0x14A && c <= 0x177) return c & ~1u;
  if (c >= 0x179 && c <= 0x17E) return (c & 1) ? c : c - 1;
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}
bool cased(uint32_t c) { return lower_cp(c) != c || upper_cp(c) != c || c == 0xDF; }
bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}
// llama.cpp's upper/lower map ASCII letters only (recorded: micro upper_lower, 'straße'|upper
// is "STRAßE").
std::string ascii_case(std::string_view s, bool upper) {
  std::string out(s);
  for (char& c : out)
    c = upper ? ((c >= 'a' && c <= 'z') ? char(c - 32) : c) : ((c >= 'A' && c <= 'Z') ? char(c + 32) : c);
  return out;
}
std::string map_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    out.resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      out[i] = upper ? ((c >= 'a' && c <= 'z') ? char(c - 32) : c) : ((c >= 'A' && c <= 'Z') ? char(c + 32) : c);
    }
    return out;
  }
  for (uint32_t c : decode_utf8(s)) {
    if (upper && c == 0xDF) { out += "SS"; continue; }
    append_utf8(out, upper ? upper_cp(c) : lower_cp(c));
  }
  return out;
}
std::string py_title(std::string_view s) {
  std::string out;
  bool prev = false;
  for (uint32_t c : decode_utf8(s)) {
    bool cs = cased(c);
    if (cs) append_utf8(out, prev ? lower_cp(c) : upper_cp(c));
    else append_utf8(out, c);
    prev = cs;
  }
  return out;
}
std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (uint32_t c : decode_utf8(s)) {
    append_utf8(out, first ? upper_cp(c) : lower_cp(c));
    first = false;
  }
  return out;
}
// jinja's do_title: words start after runs of [-\s({\[<]
std::string jinja_title(std::string_view s) {
  std::string out;
  bool start = true;
  for (uint32_t c : decode_utf8(s)) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    if (sep) { append_utf8(out, c); start = true; continue; }
    append_utf8(out, start ? upper_cp(c) : lower_cp(c));
    start = false;
  }
  return out;
}

// Length of the whitespace code point at s[i] (Python's str.isspace), 0 when not whitespace.
size_t space_at(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
  uint32_t cp;
  size_t len;
  if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) { cp = ((c & 0x1Fu) << 6) | (s[i + 1] & 0x3F); len = 2; }
  else if ((c & 0xF0) == 0xE0 && i + 2 < s.size()) { cp = ((c & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3F); len = 3; }
  else return 0;
  return py_isspace(cp) ? len : 0;
}

// The [b, e) byte range left by str.strip() without arguments.
std::pair<size_t, size_t> strip_range(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e) {
      size_t l = space_at(s, b);
      if (!l) break;
      b += l;
    }
  if (right)
    while (e > b) {
      size_t p = e - 1;
      while (p > b && ((unsigned char)s[p] & 0xC0) == 0x80 && e - p < 4) --p;
      if (space_at(s, p) != e - p) break;
      e = p;
    }
  return {b, e};
}

std::string py_strip(std::string_view s, const Value* chars, bool left, bool right) {
  if (!chars || chars->is_none()) {
    auto [b, e] = strip_range(s, left, right);
    return std::string(s.substr(b, e - b));
  }
  auto set = decode_utf8(chars->s());
  auto in = [&](uint32_t c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  auto cps = decode_utf8(s);
  size_t b = 0, e = cps.size();
  if (left) while (b < e && in(cps[b])) ++b;
  if (right) while (e > b && in(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) append_utf8(out, cps[i]);
  return out;
}

size_t cp_index(std::string_view s, size_t byte) { return cp_len(s.substr(0, byte)); }

}  // namespace

static std::vector<std::string> split_ws(std::string_view s, int64_t maxsplit, bool from_right) {
  auto cps = decode_utf8(s);
  std::vector<std::pair<size_t, size_t>> parts;  // cp ranges
  if (!from_right) {
    size_t i = 0, n = cps.size();
    while (true) {
      while (i < n && py_isspace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        parts.push_back({i, n});
        break;
      }
      size_t j = i;
      while (j < n && !py_isspace(cps[j])) ++j;
      parts.push_back({i, j});
      i = j;
    }
  } else {
    int64_t i = int64_t(cps.size()) - 1;
    while (true) {
      while (i >= 0 && py_isspace(cps[i])) --i;
      if (i < 0) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {
        parts.push_back({0, size_t(i + 1)});
        break;
      }
      int64_t j = i;
      while (j >= 0 && !py_isspace(cps[j])) --j;
      parts.push_back({size_t(j + 1), size_t(i + 1)});
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<std::string> out;
  for (auto [b, e] : parts) {
    std::string p;
    for (size_t k = b; k < e; ++k) append_utf8(p, cps[k]);
    out.push_back(std::move(p));
  }
  return out;
}

static std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      size_t p = s.find(sep, start);
      if (p == std::string::npos) break;
      out.push_back(s.substr(start, p - start));
      start = p + sep.size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  std::vector<std::string> rev;
  while (maxsplit < 0 || int64_t(rev.size()) < maxsplit) {
    if (end < sep.size()) break;
    size_t p = s.rfind(sep, end - sep.size());
    if (p == std::string::npos) break;
    rev.push_back(s.substr(p + sep.size(), end - p - sep.size()));
    end = p;
  }
  rev.push_back(s.substr(0, end));
  std::reverse(rev.begin(), rev.end());
  return rev;
}

// Saturating arithmetic for result sizes: a wrapped product must never slip under the budget.
static uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
// Parses a run of decimal digits (a format width or precision), saturating instead of
// overflowing; the caller checks the value against the output budget.
static int64_t parse_digits(const std::string& f, size_t& i) {
  int64_t v = 0;
  while (i < f.size() && std::isdigit((unsigned char)f[i])) {
    int d = f[i++] - '0';
    v = v > (INT64_MAX - d) / 10 ? INT64_MAX : v * 10 + d;
  }
  return v;
}

// str.replace; the result size is computed and checked against the budget before it is built.
static std::string replace_all(Interp& in, const std::string& s, const std::string& old, const std::string& neu, int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = decode_utf8(s);
    uint64_t slots = uint64_t(cps.size()) + 1;
    uint64_t ins = count < 0 ? slots : std::min<uint64_t>(slots, uint64_t(count));
    uint64_t total = sat_add(s.size(), sat_mul(ins, neu.size()));
    in.check_size(total);
    out.reserve(total);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) { out += neu; ++done; }
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    return out;
  }
  uint64_t hits = 0;
  for (size_t p = s.find(old); p != std::string::npos && (count < 0 || hits < uint64_t(count)); p = s.find(old, p + old.size())) ++hits;
  if (neu.size() > old.size()) in.check_size(sat_add(s.size(), sat_mul(hits, neu.size() - old.size())));
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += neu;
    start = p + old.size();
    ++done;
  }
  out.append(s, start);
  return out;
}

static Value str_list(std::vector<std::string> parts) {
  std::vector<Value> v;
  v.reserve(parts.size());
  for (auto& p : parts) v.push_back(Value::str(std::move(p)));
  return Value::list(std::move(v));
}

// ------------------------------------------------------------------ str.format
// Python's fixed-point format of a float; Interp::format_double checks the budget and stays
// exact for any precision.
static std::string fixed_float(Interp& in, double d, int64_t prec, char conv) {
  const bool upper = conv == 'F';
  if (std::isnan(d)) return upper ? "NAN" : "nan";  // Python never signs a NaN
  if (std::isinf(d)) return std::string(d < 0 ? "-" : "") + (upper ? "INF" : "inf");
  return in.format_double(d, 'f', prec, false);
}

static std::string format_spec(Interp& in, const Value& v, const std::string& spec) {
  if (spec.empty()) return py_str(v);
  // [[fill]align][sign][width][.precision][type]
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (spec.size() >= 2 && is_align(spec[1])) { fill = spec.substr(0, 1); align = spec[1]; i = 2; }
  else if (!spec.empty() && is_align(spec[0])) { align = spec[0]; i = 1; }
  bool zero = false;
  if (i < spec.size() && spec[i] == '0') { zero = true; ++i; }
  int64_t width = parse_digits(spec, i), prec = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    prec = parse_digits(spec, i);
  }
  char type = i < spec.size() ? spec[i] : 0;
  std::string body;
  if (type == 'f' || type == 'F') {
    if (!v.is_num()) in.fail("ValueError", "Unknown format code 'f' for object of type '" + type_name(v) + "'");
    double d = v.k == K::Float ? v.f : double(v.k == K::Int ? v.i : v.b);
    body = fixed_float(in, d, prec < 0 ? 6 : prec, type);
  } else if (type == 'd') {
    if (v.k != K::Int && v.k != K::Bool) in.fail("ValueError", "Unknown format code 'd' for object of type '" + type_name(v) + "'");
    body = std::to_string(v.k == K::Int ? v.i : v.b);
  } else {
    body = py_str(v);
    if (prec >= 0 && v.k == K::Str) {
      auto cps = decode_utf8(body);
      if (int64_t(cps.size()) > prec) {
        std::string t;
        for (int64_t k = 0; k < prec; ++k) append_utf8(t, cps[k]);
        body = t;
      }
    }
  }
  int64_t pad = width - int64_t(cp_len(body));
  if (pad > 0) {
    if (!align) align = (v.is_num() ? '>' : '<');
    if (zero && !align) fill = "0";
    in.check_size(sat_add(body.size(), sat_mul(uint64_t(pad), fill.size())));
    auto rep = [&](int64_t n) { std::string r; r.reserve(size_t(n) * fill.size()); for (int64_t k = 0; k < n; ++k) r += fill; return r; };
    if (align == '<') body += rep(pad);
    else if (align == '>' || align == '=') body = rep(pad) + body;
    else body = rep(pad / 2) + body + rep(pad - pad / 2);
  }
  return body;
}

static std::string py_format(Interp& in, const std::string& f, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '{') {
      if (i + 1 < f.size() && f[i + 1] == '{') { out.push_back('{'); ++i; continue; }
      size_t e = f.find('}', i);
      if (e == std::string::npos) in.fail("ValueError", "Single '{' encountered in format string");
      std::string field = f.substr(i + 1, e - i - 1);
      std::string spec;
      size_t colon = field.find(':');
      if (colon != std::string::npos) { spec = field.substr(colon + 1); field = field.substr(0, colon); }
      char conv = 0;
      size_t bang = field.find('!');
      if (bang != std::string::npos) { conv = bang + 1 < field.size() ? field[bang + 1] : 0; field = field.substr(0, bang); }
      // field name with optional .attr / [key]
      std::string head = field;
      std::string rest;
      size_t cut = field.find_first_of(".[");
      if (cut != std::string::npos) { head = field.substr(0, cut); rest = field.substr(cut); }
      Value v;
      if (head.empty()) {
        if (auto_idx >= a.pos.size()) in.fail("IndexError", "Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
        v = a.pos[auto_idx++];
      } else if (std::isdigit((unsigned char)head[0])) {
        size_t idx = std::stoul(head);
        if (idx >= a.pos.size()) in.fail("IndexError", "Replacement index " + head + " out of range for positional args tuple");
        v = a.pos[idx];
      } else {
        const Value* kv = a.get_kw(head);
        if (!kv) in.fail("KeyError", "'" + head + "'");
        v = *kv;
      }
      while (!rest.empty()) {
        if (rest[0] == '.') {
          size_t n = rest.find_first_of(".[", 1);
          std::string nm = rest.substr(1, n == std::string::npos ? std::string::npos : n - 1);
          v = in.getattr(v, nm);
          rest = n == std::string::npos ? "" : rest.substr(n);
        } else {
          size_t n = rest.find(']');
          if (n == std::string::npos) in.fail("ValueError", "Missing ']' in format string");
          std::string key = rest.substr(1, n - 1);
          bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit((unsigned char)ch); });
          v = in.getitem(v, digits ? Value::integer(std::stoll(key)) : Value::str(key));
          rest = rest.substr(n + 1);
        }
      }
      if (v.k == K::Undef) in.undefined_error(v);
      if (conv == 'r') v = Value::str(py_repr(v));
      else if (conv == 's') v = Value::str(py_str(v));
      out += format_spec(in, v, spec);
      i = e;
    } else if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') { out.push_back('}'); ++i; continue; }
      in.fail("ValueError", "Single '}' encountered in format string");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// ------------------------------------------------------------------ methods
Value Interp::call_method(const Value& self, const std::string& name, CallArgs& a) {
  static const Value none = Value::none();
  auto need_str = [&](const Value& v, const char* what) -> const std::string& {
    if (v.k != K::Str) fail("TypeError", std::string(what) + " must be str, not " + type_name(v));
    return v.s();
  };
  if (!a.kw.empty()) {
    static const char* const kw_ok[] = {"split", "rsplit", "splitlines", "expandtabs", "format", "get"};
    bool ok = false;
    for (auto m : kw_ok)
      if (name == m) ok = true;
    if (!ok || (name == "get" && self.k == K::Dict)) fail("TypeError", type_name(self) + "." + name + "() takes no keyword arguments");
  }
  if (self.k == K::Str) {
    const std::string& s = self.s();
    if (name == "upper") return str_val((options().runtime == Runtime::llama_cpp ? ascii_case(s, true) : map_case(s, true)));
    if (name == "lower" || name == "casefold") return str_val((options().runtime == Runtime::llama_cpp ? ascii_case(s, false) : map_case(s, false)));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      Value chars = arg(a, 0, "chars", none);
      if (!chars.is_none() && chars.k != K::Str) fail("TypeError", name + " arg must be None or str");
      return str_val(py_strip(s, &chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
      Value sep = arg(a, 0, "sep", none);
      Value mx = arg(a, 1, "maxsplit", Value::integer(-1));
      if (mx.k != K::Int) fail("TypeError", "maxsplit must be an integer");
      // llama.cpp splits on each single space when no separator is given (recorded: hft:SPLIT,
      // hft:SPLIT_4, micro split_variants), so runs of spaces give empty strings.
      if (sep.is_none() && options().runtime == Runtime::llama_cpp && mx.i < 0)
        return str_list(split_sep(s, " ", -1, false));
      if (sep.is_none()) return str_list(split_ws(s, mx.i, name == "rsplit"));
      const std::string& sp = need_str(sep, "sep");
      if (sp.empty()) fail("ValueError", "empty separator");
      return str_list(split_sep(s, sp, mx.i, name == "rsplit"));
    }
    if (name == "startswith" || name == "endswith") {
      if (a.pos.empty()) fail("TypeError", name + "() takes at least 1 argument (0 given)");
      std::string sub = s;
      if (a.pos.size() > 1) {
        Value stop = a.pos.size() > 2 ? a.pos[2] : Value::none();
        sub = py_str(slice(self, &a.pos[1], &stop, nullptr));
      }
      auto test = [&](const Value& p) {
        const std::string& x = need_str(p, name == "startswith" ? "startswith first arg" : "endswith first arg");
        if (name == "startswith") return sub.compare(0, x.size(), x) == 0 && sub.size() >= x.size();
        return sub.size() >= x.size() && sub.compare(sub.size() - x.size(), x.size(), x) == 0;
      };
      if (a.pos[0].k == K::Tuple) {
        for (auto& p : a.pos[0].items())
          if (test(p)) return Value::boolean(true);
        return Value::boolean(false);
      }
      return Value::boolean(test(a.pos[0]));
    }
    if (name == "replace") {
      if (a.pos.size() < 2) fail("TypeError", "replace expected at least 2 arguments");
      Value cnt = arg(a, 2, "count", Value::integer(-1));
      std::string r = replace_all(*this, s, need_str(a.pos[0], "replace() argument 1"), need_str(a.pos[1], "replace() argument 2"), cnt.k == K::Int ? cnt.i : -1);
      return str_val(std::move(r));
    }
    if (name == "title") return str_val(py_title(s));
    if (name == "capitalize") return str_val(py_capitalize(s));
    if (name == "swapcase") {
      std::string out;
      for (uint32_t c : decode_utf8(s)) append_utf8(out, lower_cp(c) != c ? lower_cp(c) : upper_cp(c));
      return str_val(out);
    }
    if (name == "format") return str_val(py_format(*this, s, a));
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
      if (a.pos.empty()) fail("TypeError", name + "() takes at least 1 argument");
      const std::string& sub = need_str(a.pos[0], "must be str");
      if (name == "count") {
        if (sub.empty()) return Value::integer(int64_t(cp_len(s)) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      size_t p = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
      if (p == std::string::npos) {
        if (name == "index" || name == "rindex") fail("ValueError", "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(int64_t(cp_index(s, p)));
    }
    if (name == "join") {
      if (a.pos.size() != 1) fail("TypeError", "join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (auto& it : iterate(a.pos[0])) {
        if (it.k != K::Str) fail("TypeError", "sequence item: expected str instance, " + type_name(it) + " found");
        if (!first) out += s;
        first = false;
        out += it.s();
        check_size(out.size());
      }
      return Value::str(std::move(out));
    }
    if (name == "splitlines") {
      bool keep = truthy(arg(a, 0, "keepends", Value::boolean(false)));
      std::vector<std::string> parts;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          size_t e = i;
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          parts.push_back(s.substr(start, (keep ? i + 1 : e) - start));
          start = i + 1;
        }
      }
      if (start < s.size()) parts.push_back(s.substr(start));
      return str_list(std::move(parts));
    }
    auto all_cp = [&](auto pred) {
      auto cps = decode_utf8(s);
      if (cps.empty()) return false;
      for (uint32_t c : cps)
        if (!pred(c)) return false;
      return true;
    };
    if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return Value::boolean(all_cp([](uint32_t c) { return c >= '0' && c <= '9'; }));
    if (name == "isalpha") return Value::boolean(all_cp([](uint32_t c) { return (c < 0x80 && std::isalpha(int(c))) || (c >= 0x80 && cased(c)); }));
    if (name == "isalnum") return Value::boolean(all_cp([](uint32_t c) { return (c < 0x80 && std::isalnum(int(c))) || (c >= 0x80 && cased(c)); }));
    if (name == "isspace") return Value::boolean(all_cp([](uint32_t c) { return py_isspace(c); }));
    if (name == "isascii") return Value::boolean(is_ascii(s));
    if (name == "isupper" || name == "islower") {
      bool any = false;
      for (uint32_t c : decode_utf8(s)) {
        if (!cased(c)) continue;
        any = true;
        if (name == "isupper" ? lower_cp(c) == c && c != 0xDF : upper_cp(c) == c) return Value::boolean(false);
      }
      return Value::boolean(any);
    }
    if (name == "istitle") return Value::boolean(!s.empty() && py_title(s) == s);
    if (name == "removeprefix" || name == "removesuffix") {
      if (a.pos.size() != 1) fail("TypeError", name + "() takes exactly one argument");
      const std::string& x = need_str(a.pos[0], name.c_str());
      if (name == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size()) return str_val(s.substr(x.size()));
      if (name == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) return str_val(s.substr(0, s.size() - x.size()));
      return self;
    }
    if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
      if (a.pos.empty()) fail("TypeError", name + "() takes at least 1 argument");
      int64_t w = as_int_arg(a.pos[0]);
      std::string fill = name == "zfill" ? "0" : (a.pos.size() > 1 ? need_str(a.pos[1], "fillchar") : " ");
      if (cp_len(fill) != 1) fail("TypeError", "The fill character must be exactly one character long");
      int64_t len = int64_t(cp_len(s));
      if (w <= len) return self;
      int64_t pad = w - len;
      check_size(sat_add(s.size(), sat_mul(uint64_t(pad), fill.size())));
      auto rep = [&](int64_t n) { std::string r; r.reserve(size_t(n) * fill.size()); for (int64_t k = 0; k < n; ++k) r += fill; return r; };
      if (name == "ljust") return str_val(s + rep(pad));
      if (name == "rjust") return str_val(rep(pad) + s);
      if (name == "zfill") {
        if (!s.empty() && (s[0] == '-' || s[0] == '+')) return str_val(s.substr(0, 1) + rep(pad) + s.substr(1));
        return str_val(rep(pad) + s);
      }
      int64_t left = pad / 2 + (pad & w & 1);
      return str_val(rep(left) + s + rep(pad - left));
    }
    if (name == "partition" || name == "rpartition") {
      if (a.pos.size() != 1) fail("TypeError", name + "() takes exactly one argument");
      const std::string& sep = need_str(a.pos[0], "sep");
      if (sep.empty()) fail("ValueError", "empty separator");
      size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
      if (p == std::string::npos) {
        if (name == "partition") return Value::tuple({self, Value::str(""), Value::str("")});
        return Value::tuple({Value::str(""), Value::str(""), self});
      }
      return Value::tuple({Value::str(s.substr(0, p)), Value::str(sep), Value::str(s.substr(p + sep.size()))});
    }
    if (name == "expandtabs") {
      std::string out;
      int64_t ts = a.pos.empty() ? 8 : as_int_arg(a.pos[0]);
      int64_t col = 0;
      for (uint32_t c : decode_utf8(s)) {
        if (c == '\t') {
          if (ts > 0) {
            int64_t n = ts - col % ts;
            if (sat_add(out.size(), uint64_t(n)) > opts_.max_output) check_size(sat_add(out.size(), uint64_t(n)));
            out.append(size_t(n), ' ');
            col += n;
          }
        }
        else if (c == '\n' || c == '\r') { append_utf8(out, c); col = 0; }
        else { append_utf8(out, c); ++col; }
      }
      return str_val(out);
    }
    fail("TemplateRuntimeError", "str." + name + "() is not supported by ckpt");
  }
  if (self.k == K::Dict) {
    auto& d = self.d();
    // swift-jinja's Value(any:) sorts a dict's keys (template-dialects.md §1b row "dict .items()
    // ...", #54), so items()/keys()/values() come in sorted key order, not insertion order.
    auto entries = d.v;
    if (options().runtime == Runtime::swift_jinja)
      std::stable_sort(entries.begin(), entries.end(), [&](auto& x, auto& y) { return less(x.first, y.first); });
    if (name == "items") {
      std::vector<Value> out;
      for (auto& [k, v] : entries) out.push_back(Value::tuple({k, v}));
      return Value::list(std::move(out));
    }
    if (name == "keys" || name == "values") {
      std::vector<Value> out;
      for (auto& [k, v] : entries) out.push_back(name == "keys" ? k : v);
      return Value::list(std::move(out));
    }
    if (name == "get") {
      if (a.pos.empty() || a.pos.size() > 2) fail("TypeError", "get expected 1 or 2 arguments");
      if (a.pos[0].k == K::List || a.pos[0].k == K::Dict) fail("TypeError", "unhashable type: '" + type_name(a.pos[0]) + "'");
      if (const Value* v = d.find(a.pos[0])) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    }
    if (name == "copy") {
      Value c = Value::dict();
      c.d().v = d.v;
      return c;
    }
  }
  if (self.k == K::List || self.k == K::Tuple) {
    auto& it = self.items();
    if (name == "index") {
      if (a.pos.empty()) fail("TypeError", "index expected at least 1 argument");
      for (size_t i = 0; i < it.size(); ++i)
        if (py_equal(it[i], a.pos[0])) return Value::integer(int64_t(i));
      fail("ValueError", py_repr(a.pos[0]) + " is not in " + type_name(self));
    }
    if (name == "count") {
      if (a.pos.empty()) fail("TypeError", "count() takes exactly one argument");
      int64_t n = 0;
      for (auto& x : it) n += py_equal(x, a.pos[0]);
      return Value::integer(n);
    }
    if (name == "copy") return Value::list(it);
  }
  fail("TemplateRuntimeError", type_name(self) + "." + name + "() is not supported by ckpt");
}

int64_t Interp::as_int_arg(const Value& v) {
  if (v.k == K::Int) return v.i;
  if (v.k == K::Bool) return v.b;
  if (v.k == K::Undef) undefined_error(v);
  fail("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer");
}

// ------------------------------------------------------------------ json
static void json_str(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hexd = "0123456789abcdef";
  out.push_back('"');
  if (!ensure_ascii) {
    for (unsigned char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) { out += "\\u00"; out.push_back(hexd[c >> 4]); out.push_back(hexd[c & 15]); }
          else out.push_back(char(c));
      }
    }
  } else {
    for (uint32_t c : decode_utf8(s)) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c >= 0x20 && c < 0x7F) out.push_back(char(c));
          else {
            auto u4 = [&](uint32_t x) { out += "\\u"; for (int sh = 12; sh >= 0; sh -= 4) out.push_back(hexd[(x >> sh) & 15]); };
            if (c >= 0x10000) { c -= 0x10000; u4(0xD800 + (c >> 10)); u4(0xDC00 + (c & 0x3FF)); }
            else u4(c);
          }
      }
    }
  }
  out.push_back('"');
}

namespace {
struct JsonCtx {
  Interp& in;
  bool indent_on;
  std::string indent;
  std::string item_sep, key_sep;
  bool ensure_ascii, sort_keys;
  std::string out;
  void key(const Value& k) {
    switch (k.k) {
      case K::Str: json_str(out, k.s(), ensure_ascii); return;
      case K::Int: out += "\"" + std::to_string(k.i) + "\""; return;
      case K::Bool: out += k.b ? "\"true\"" : "\"false\""; return;
      case K::None: out += "\"null\""; return;
      case K::Float: out += "\"" + util::python_float_repr(k.f) + "\""; return;
      default: in.fail("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }
  void nl(int level) {
    if (!indent_on) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += indent;
  }
  void val(const Value& v, int level) {
    if (level > 500) in.fail("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
    in.check_size(out.size());
    switch (v.k) {
      case K::None: out += "null"; return;
      case K::Bool: out += v.b ? "true" : "false"; return;
      case K::Int: out += std::to_string(v.i); return;
      case K::Float:
        if (std::isnan(v.f)) out += "NaN";
        else if (std::isinf(v.f)) out += v.f > 0 ? "Infinity" : "-Infinity";
        else if (in.options().runtime == Runtime::hf_jinja && v.f == std::trunc(v.f) && std::fabs(v.f) < 9e15)
          out += std::to_string(static_cast<int64_t>(v.f));  // JSON.stringify(1.0) is "1"
        else out += util::python_float_repr(v.f);
        return;
      case K::Str: json_str(out, v.s(), ensure_ascii); return;
      case K::List:
      case K::Tuple: {
        auto& it = v.items();
        if (it.empty()) { out += "[]"; return; }
        out.push_back('[');
        for (size_t i = 0; i < it.size(); ++i) {
          if (i) out += item_sep;
          nl(level + 1);
          val(it[i], level + 1);
        }
        nl(level);
        out.push_back(']');
        return;
      }
      case K::Dict: {
        auto items = v.d().v;
        if (items.empty()) { out += "{}"; return; }
        if (sort_keys)
          std::stable_sort(items.begin(), items.end(), [&](auto& x, auto& y) { return in.less(x.first, y.first); });
        out.push_back('{');
        bool first = true;
        for (auto& [k, x] : items) {
          if (!first) out += item_sep;
          first = false;
          nl(level + 1);
          key(k);
          out += key_sep;
          val(x, level + 1);
        }
        nl(level);
        out.push_back('}');
        return;
      }
      default: in.fail("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};
}  // namespace

std::string Interp::tojson(const Value& v, const Value& indent, bool ensure_ascii, const Value& separators, bool sort_keys) {
  JsonCtx c{*this, false, "", ", ", ": ", ensure_ascii, sort_keys, {}};
  if (!indent.is_none() && !indent.is_undef()) {
    c.indent_on = true;
    if (indent.k == K::Str) c.indent = indent.s();
    else if (indent.k == K::Int || indent.k == K::Bool) {
      int64_t n = indent.k == K::Int ? indent.i : indent.b;
      if (n > 1000) fail("ValueError", "indent too large");
      c.indent = std::string(n > 0 ? size_t(n) : 0, ' ');
    } else fail("TypeError", "indent must be an int or a string");
    c.item_sep = ",";
  }
  if (!separators.is_none() && !separators.is_undef()) {
    auto parts = iterate(separators);
    if (parts.size() != 2 || parts[0].k != K::Str || parts[1].k != K::Str) fail("ValueError", "separators must be a (item_separator, key_separator) pair of strings");
    c.item_sep = parts[0].s();
    c.key_sep = parts[1].s();
  }
  c.val(v, 0);
  return std::move(c.out);
}

// ------------------------------------------------------------------ filters
Value Interp::attr_path(const Value& obj, const Value& attribute) {
  if (attribute.is_none()) return obj;
  if (attribute.k == K::Str) {
    Value cur = obj;
    const std::string& s = attribute.s();
    size_t start = 0;
    while (true) {
      size_t dot = s.find('.', start);
      std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit((unsigned char)c); });
      cur = getitem(cur, digits ? Value::integer(std::stoll(part)) : Value::str(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return cur;
  }
  return getitem(obj, attribute);
}

Value Interp::apply_filter_chain(const Expr* e, const Value& base, Frame* f) {
  Value v = e->a ? apply_filter_chain(e->a.get(), base, f) : base;
  CallArgs args = eval_args(e, f);
  cur_pos_ = e->pos;
  if (e->id < 0) fail("TemplateRuntimeError", "No filter named '" + e->name + "' found.");
  return apply_filter(e->id, v, args, f);
}

static Value ignore_case(const Value& v) {
  if (v.k == K::Str) return Value::str(map_case(v.s(), false));
  return v;
}

enum FilterId { F_abs, F_attr, F_batch, F_capitalize, F_center, F_count, F_d, F_default, F_dictsort, F_e, F_escape, F_filesizeformat, F_first, F_float, F_forceescape, F_format, F_groupby, F_indent, F_int, F_items, F_join, F_last, F_length, F_list, F_lower, F_map, F_max, F_min, F_pprint, F_random, F_reject, F_rejectattr, F_replace, F_reverse, F_round, F_safe, F_select, F_selectattr, F_slice, F_sort, F_string, F_striptags, F_sum, F_title, F_tojson, F_trim, F_truncate, F_unique, F_upper, F_urlencode, F_urlize, F_wordcount, F_wordwrap, F_xmlattr };

Value Interp::apply_filter(int id, const Value& v, CallArgs& a, Frame* f) {
  static const Value none = Value::none();
  static const Value empty_str = Value::str("");
  static const Value f_false = Value::boolean(false);
  std::string_view n = filter_name(id);
  (void)n;
  auto soft_str = [&](const Value& x) -> Value {
    if (x.k == K::Str) return x;
    if (x.is_security()) undefined_error(x);
    // llama.cpp's string/upper/lower spell a non-string as Python does, although printing
    // differs (recorded: ljt120 none to string, ljt071 print array with mixed types, ljt076
    // upper array, hft:FILTER_OPERATOR_13).
    if (options().runtime == Runtime::llama_cpp) return Value::str(py_str(x));
    return Value::str(to_output(x));
  };
  if (id == F_tojson) {
    // swift-jinja: keys always sorted, compact {"a":1,"b":[1,2]}, ensure_ascii true by default
    // (template-dialects.md §1b row "tojson", Filters.swift:1065-1105).
    const bool swift = options().runtime == Runtime::swift_jinja;
    Value ea = arg(a, 0, "ensure_ascii", swift ? Value::boolean(true) : f_false);
    Value indent = arg(a, 1, "indent", none);
    Value seps = arg(a, 2, "separators", none);
    Value sk = arg(a, 3, "sort_keys", f_false);
    if (swift && (indent.is_none() || indent.is_undef()) && (seps.is_none() || seps.is_undef()))
      seps = Value::tuple({Value::str(","), Value::str(":")});
    if (swift) sk = Value::boolean(true);
    for (auto& [k, x] : a.kw)
      if (k != "ensure_ascii" && k != "indent" && k != "separators" && k != "sort_keys") fail("TypeError", "tojson() got an unexpected keyword argument '" + k + "'");
    return str_val(tojson(v, indent, truthy(ea), seps, truthy(sk)));
  }
  if (id == F_length || id == F_count) return Value::integer(length(v));
  if (id == F_trim) {
    Value s = soft_str(v);
    Value chars = arg(a, 0, "chars", none);
    if (chars.is_none()) {
      auto [b, e] = strip_range(s.s(), true, true);
      if (b == 0 && e == s.s().size()) return s;  // Python returns the same string object
      return str_val(s.s().substr(b, e - b), s.markup);
    }
    return str_val(py_strip(s.s(), &chars, true, true), s.markup);
  }
  if (id == F_string) return soft_str(v);
  if (id == F_list) return Value::list(iterate(v));
  if (id == F_upper || id == F_lower) { Value s = soft_str(v); return str_val((options().runtime == Runtime::llama_cpp ? ascii_case(s.s(), id == F_upper) : map_case(s.s(), id == F_upper)), s.markup); }
  if (id == F_capitalize) { Value s = soft_str(v); return str_val(py_capitalize(s.s()), s.markup); }
  if (id == F_title) { Value s = soft_str(v); return str_val(jinja_title(s.s()), s.markup); }
  if (id == F_safe) {
    if (v.k == K::Str && v.markup) return v;
    Value s = soft_str(v);
    return Value::str(s.s(), true);
  }
  if (id == F_escape || id == F_e) return escape(v);
  if (id == F_forceescape) return str_val(html_escape_str(py_str(v)), true);
  if (id == F_default || id == F_d) {
    Value dv = arg(a, 0, "default_value", empty_str);
    bool boolean = truthy(arg(a, 1, "boolean", f_false));
    if (v.k == K::Undef || (boolean && !truthy(v))) return dv;
    // llama.cpp's default also replaces None (recorded: micro default_filter).
    if (v.k == K::None && options().runtime == Runtime::llama_cpp) return dv;
    return v;
  }
  if (id == F_join) {
    Value d = arg(a, 0, "d", empty_str);
    Value attribute = arg(a, 1, "attribute", none);
    std::string sep = to_output(d);
    std::string out;
    bool first = true;
    for (auto& it : iterate(v)) {
      if (!first) out += sep;
      first = false;
      Value x = attribute.is_none() ? it : attr_path(it, attribute);
      if (x.is_security()) undefined_error(x);
      out += to_output(x);
      check_size(out.size());
    }
    return Value::str(std::move(out));
  }
  if (id == F_items) {
    if (v.k == K::Undef) return Value::gen({}, "do_items");
    if (v.k != K::Dict) fail("FilterArgumentError", "Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (auto& [k, x] : v.d().v) out.push_back(Value::tuple({k, x}));
    return Value::gen(std::move(out), "do_items");
  }
  if (id == F_map) {
    std::vector<Value> out;
    if (!truthy(v)) return Value::gen({}, "sync_do_map");
    if (a.pos.empty()) {
      const Value* attribute = a.get_kw("attribute");
      const Value* dflt = a.get_kw("default");
      for (auto& [k, x] : a.kw)
        if (k != "attribute" && k != "default") fail("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
      if (!attribute) fail("FilterArgumentError", "map requires a filter argument");
      for (auto& it : iterate(v)) {
        Value r = attr_path(it, *attribute);
        if (dflt && !dflt->is_none() && r.k == K::Undef) r = *dflt;
        out.push_back(std::move(r));
      }
      return Value::gen(std::move(out), "sync_do_map");
    }
    if (a.pos[0].k != K::Str) fail("TypeError", "map filter name must be a string");
    int fid = filter_id(a.pos[0].s());
    if (fid < 0) fail("TemplateRuntimeError", "No filter named '" + a.pos[0].s() + "'.");
    CallArgs sub;
    sub.pos.assign(a.pos.begin() + 1, a.pos.end());
    sub.kw = a.kw;
    for (auto& it : iterate(v)) {
      CallArgs s2 = sub;
      out.push_back(apply_filter(fid, it, s2, f));
    }
    return Value::gen(std::move(out), "sync_do_map");
  }
  if (id == F_select || id == F_reject || id == F_selectattr || id == F_rejectattr) {
    bool attr = id == F_selectattr || id == F_rejectattr;
    bool keep_true = id == F_select || id == F_selectattr;
    const char* what = "select_or_reject";
    if (!truthy(v)) return Value::gen({}, what);
    size_t off = 0;
    Value attribute;
    if (attr) {
      if (a.pos.empty()) fail("FilterArgumentError", "Missing parameter for attribute name");
      attribute = a.pos[0];
      off = 1;
    }
    int tid = -1;
    std::string tname;
    CallArgs targs;
    if (a.pos.size() > off) {
      if (a.pos[off].k != K::Str) fail("TypeError", "test name must be a string");
      tname = a.pos[off].s();
      tid = test_id(tname);
      if (tid < 0) fail("TemplateRuntimeError", "No test named '" + tname + "'.");
      targs.pos.assign(a.pos.begin() + off + 1, a.pos.end());
      targs.kw = a.kw;
    }
    std::vector<Value> out;
    for (auto& it : iterate(v)) {
      Value x = attr ? attr_path(it, attribute) : it;
      bool r;
      if (tid >= 0) {
        CallArgs t2 = targs;
        r = apply_test(tid, tname, x, t2);
      } else {
        r = truthy(x);
      }
      if (r == keep_true) out.push_back(it);
    }
    return Value::gen(std::move(out), what);
  }
  if (id == F_first) {
    if (v.k == K::Gen) {
      auto items = iterate(v);
      return items.empty() ? Value::undef("No first item, sequence was empty.") : items[0];
    }
    auto items = iterate(v);
    return items.empty() ? Value::undef("No first item, sequence was empty.") : items[0];
  }
  if (id == F_last) {
    if (v.k == K::Gen) fail("TypeError", "'generator' object is not reversible");
    auto items = iterate(v);
    return items.empty() ? Value::undef("No last item, sequence was empty.") : items.back();
  }
  if (id == F_reverse) {
    if (v.k == K::Str) {
      auto cps = decode_utf8(v.s());
      std::string out;
      for (size_t i = cps.size(); i-- > 0;) append_utf8(out, cps[i]);
      return Value::str(std::move(out), v.markup);
    }
    if (v.k == K::Gen) fail("TypeError", "'generator' object is not reversible");
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::gen(std::move(items), "reversed");
  }
  if (id == F_sort || id == F_dictsort || id == F_unique || id == F_min || id == F_max) {
    bool cs;
    Value attribute;
    bool reverse = false;
    if (id == F_sort) {
      reverse = truthy(arg(a, 0, "reverse", f_false));
      // llama.cpp sorts strings case-sensitively by default (recorded: micro
      // sort_case_insensitive, ['b', 'A', 'a', 'B']|sort gives ABab).
      cs = truthy(arg(a, 1, "case_sensitive", Value::boolean(options().runtime == Runtime::llama_cpp)));
      attribute = arg(a, 2, "attribute", none);
    } else if (id == F_dictsort) {
      cs = truthy(arg(a, 0, "case_sensitive", f_false));
      // llama.cpp compares keys case-sensitively whatever the argument (recorded:
      // hft:FILTER_OPERATOR_DICTSORT_4, micro dictsort ordering 'B' before 'a').
      if (options().runtime == Runtime::llama_cpp) cs = true;
      Value by = arg(a, 1, "by", Value::str("key"));
      reverse = truthy(arg(a, 2, "reverse", f_false));
      if (by.k != K::Str || (by.s() != "key" && by.s() != "value")) fail("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
      attribute = Value::integer(by.s() == "key" ? 0 : 1);
    } else {
      cs = truthy(arg(a, 0, "case_sensitive", f_false));
      attribute = arg(a, 1, "attribute", none);
    }
    std::vector<Value> items;
    if (id == F_dictsort) {
      if (v.k != K::Dict) fail("AttributeError", "'" + type_name(v) + "' object has no attribute 'items'");
      for (auto& [k, x] : v.d().v) items.push_back(Value::tuple({k, x}));
    } else {
      items = iterate(v);
    }
    std::vector<Value> keys;
    keys.reserve(items.size());
    for (auto& it : items) {
      Value k = attribute.is_none() ? it : attr_path(it, attribute);
      keys.push_back(cs ? k : ignore_case(k));
    }
    if (id == F_unique) {
      std::vector<Value> out, seen;
      for (size_t i = 0; i < items.size(); ++i) {
        bool dup = false;
        for (auto& s : seen)
          if (py_equal(s, keys[i])) { dup = true; break; }
        if (!dup) { seen.push_back(keys[i]); out.push_back(items[i]); }
      }
      return Value::gen(std::move(out), "do_unique");
    }
    if (id == F_min || id == F_max) {
      if (items.empty()) return Value::undef("No aggregated item, sequence was empty.");
      size_t best = 0;
      for (size_t i = 1; i < items.size(); ++i) {
        if (id == F_min ? less(keys[i], keys[best]) : less(keys[best], keys[i])) best = i;
      }
      return items[best];
    }
    std::vector<size_t> idx(items.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    // `sort` keys are lists (make_multi_attrgetter): equal items are never ordered with `<`
    auto lt = [&](const Value& x, const Value& y) {
      if (id == F_sort && py_equal(x, y)) return false;
      return less(x, y);
    };
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return reverse ? lt(keys[y], keys[x]) : lt(keys[x], keys[y]); });
    std::vector<Value> out;
    for (size_t i : idx) out.push_back(items[i]);
    return Value::list(std::move(out));
  }
  if (id == F_replace) {
    if (a.pos.size() < 2 && !(a.get_kw("old") && a.get_kw("new"))) fail("TypeError", "replace() missing arguments");
    Value old = arg(a, 0, "old", none);
    Value neu = arg(a, 1, "new", none);
    Value cnt = arg(a, 2, "count", none);
    Value s = soft_str(v);
    return str_val(replace_all(*this, s.s(), py_str(old), py_str(neu), cnt.k == K::Int ? cnt.i : -1));
  }
  if (id == F_int) {
    Value dflt = arg(a, 0, "default", Value::integer(0));
    Value base = arg(a, 1, "base", Value::integer(10));
    if (v.k == K::Int) return v;
    if (v.k == K::Bool) return Value::integer(v.b);
    if (v.k == K::Float) {
      if (!std::isfinite(v.f)) fail("OverflowError", "cannot convert float infinity to integer");
      return Value::integer(int64_t(v.f));
    }
    if (v.k == K::Undef) undefined_error(v);
    if (v.k == K::Str) {
      std::string s = py_strip(v.s(), nullptr, true, true);
      int b = base.k == K::Int ? int(base.i) : 10;
      std::string t;
      for (char c : s)
        if (c != '_') t.push_back(c);
      if (!t.empty()) {
        char* end = nullptr;
        errno = 0;
        long long x = std::strtoll(t.c_str(), &end, b == 0 ? 0 : b);
        if (end && *end == 0 && errno == 0 && !std::isspace((unsigned char)t[0])) return Value::integer(x);
        double d = std::strtod(t.c_str(), &end);
        if (end && *end == 0 && std::isfinite(d) && t.find_first_of("xX") == std::string::npos) return Value::integer(int64_t(d));
      }
    }
    return dflt;
  }
  if (id == F_float) {
    Value dflt = arg(a, 0, "default", Value::flt(0.0));
    if (v.k == K::Float) return v;
    if (v.k == K::Int) return Value::flt(double(v.i));
    if (v.k == K::Bool) return Value::flt(v.b);
    if (v.k == K::Undef) undefined_error(v);
    if (v.k == K::Str) {
      std::string s = py_strip(v.s(), nullptr, true, true);
      char* end = nullptr;
      if (!s.empty()) {
        double d = std::strtod(s.c_str(), &end);
        if (end && *end == 0) return Value::flt(d);
      }
    }
    return dflt;
  }
  if (id == F_abs) {
    if (v.k == K::Int) { if (v.i == INT64_MIN) fail("OverflowError", "integer overflow"); return Value::integer(v.i < 0 ? -v.i : v.i); }
    if (v.k == K::Bool) return Value::integer(v.b);
    if (v.k == K::Float) return Value::flt(std::fabs(v.f));
    if (v.k == K::Undef) undefined_error(v);
    fail("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (id == F_round) {
    int64_t prec = as_int_arg(arg(a, 0, "precision", Value::integer(0)));
    Value method = arg(a, 1, "method", Value::str("common"));
    if (v.k == K::Undef) undefined_error(v);
    if (!v.is_num()) fail("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
    double x = v.k == K::Float ? v.f : double(v.k == K::Int ? v.i : v.b);
    double m = std::pow(10.0, double(prec));
    std::string md = method.k == K::Str ? method.s() : "";
    if (md == "common") {
      if (v.k != K::Float) return Value::integer(v.k == K::Int ? v.i : v.b);
      double r = std::nearbyint(x * m) / m;  // banker's rounding, as Python's round()
      return Value::flt(r);
    }
    if (md == "ceil") return Value::flt(std::ceil(x * m) / m);
    if (md == "floor") return Value::flt(std::floor(x * m) / m);
    fail("FilterArgumentError", "method must be common, ceil or floor");
  }
  if (id == F_sum) {
    Value attribute = arg(a, 0, "attribute", none);
    Value total = arg(a, 1, "start", Value::integer(0));
    for (auto& it : iterate(v)) total = binop("+", total, attribute.is_none() ? it : attr_path(it, attribute));
    return total;
  }
  if (id == F_indent) {
    Value width = arg(a, 0, "width", Value::integer(4));
    bool first = truthy(arg(a, 1, "first", f_false));
    bool blank = truthy(arg(a, 2, "blank", f_false));
    std::string ind;
    if (width.k == K::Str) {
      ind = width.s();
    } else {
      int64_t w = std::max<int64_t>(0, as_int_arg(width));
      check_size(uint64_t(w));
      ind.assign(size_t(w), ' ');
    }
    Value sv = soft_str(v);
    std::string s = sv.s() + "\n";
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    // Size of the result, checked before it is built: each line, its newline, and one
    // indent per line that gets one.
    uint64_t n_ind = first ? 1 : 0;
    for (size_t i = 1; i < lines.size(); ++i)
      if (blank || !lines[i].empty()) ++n_ind;
    check_size(sat_add(s.size(), sat_mul(n_ind, ind.size())));
    std::string rv;
    if (blank) {
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i) rv += "\n" + ind;
        rv += lines[i];
      }
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (size_t i = 1; i < lines.size(); ++i) {
        rv += "\n";
        if (!lines[i].empty()) rv += ind;
        rv += lines[i];
      }
    }
    if (first) rv = ind + rv;
    return str_val(std::move(rv), sv.markup);
  }
  if (id == F_center) {
    CallArgs ca;
    ca.pos.push_back(arg(a, 0, "width", Value::integer(80)));
    return call_method(soft_str(v), "center", ca);
  }
  if (id == F_wordcount) {
    int64_t words = 0;
    bool in_word = false;
    for (uint32_t c : decode_utf8(soft_str(v).s())) {
      bool w = c == '_' || (c < 0x80 ? std::isalnum(int(c)) != 0 : !py_isspace(c));
      if (w && !in_word) ++words;
      in_word = w;
    }
    return Value::integer(words);
  }
  if (id == F_truncate) {
    Value sv = soft_str(v);
    int64_t len = as_int_arg(arg(a, 0, "length", Value::integer(255)));
    bool killwords = truthy(arg(a, 1, "killwords", f_false));
    std::string end = py_str(arg(a, 2, "end", Value::str("...")));
    Value lw = arg(a, 3, "leeway", none);
    int64_t leeway = lw.is_none() ? 5 : as_int_arg(lw);
    auto cps = decode_utf8(sv.s());
    // Python ints do not overflow: compare and subtract in 128 bits.
    if (__int128(cps.size()) <= __int128(len) + leeway) return sv;
    int64_t keep = int64_t(std::max<__int128>(0, __int128(len) - __int128(cp_len(end))));
    std::string head;
    for (int64_t i = 0; i < keep && i < int64_t(cps.size()); ++i) append_utf8(head, cps[i]);
    if (killwords) return str_val(head + end);
    size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head = head.substr(0, sp);
    return str_val(head + end);
  }
  if (id == F_format) {
    if (!a.pos.empty() && !a.kw.empty()) fail("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
    Value args;
    if (!a.kw.empty()) {
      args = Value::dict();
      for (auto& [k, x] : a.kw) args.d().set(Value::str(k), x);
    } else {
      args = Value::tuple(a.pos.vec());
    }
    return percent_format(soft_str(v), args);
  }
  if (id == F_attr) {
    Value nm = arg(a, 0, "name", none);
    std::string name = py_str(nm);
    if (v.k == K::Dict) {
      Value r = getattr(v, name);
      if (r.k != K::Func && !(r.is_security()))
        return Value::undef("'dict object' has no attribute '" + name + "'");
      return r;
    }
    return getattr(v, name);
  }
  if (id == F_batch || id == F_slice) {
    int64_t cnt = as_int_arg(arg(a, 0, id == F_batch ? "linecount" : "slices", none));
    Value fill = arg(a, 1, "fill_with", none);
    auto items = iterate(v);
    std::vector<Value> out;
    if (cnt <= 0) fail("ValueError", "count must be positive");
    // Budget the rows before building them (a Value is counted as 8 bytes, as for list `*`):
    // batch pads its last row up to `cnt` items, slice always yields `cnt` rows.
    if (id == F_batch) {
      uint64_t rem = items.size() % uint64_t(cnt);
      if (!fill.is_none() && rem) check_size(sat_mul(sat_add(items.size(), uint64_t(cnt) - rem), 8));
    } else {
      check_size(sat_mul(sat_add(items.size(), uint64_t(cnt)), 8));
    }
    if (id == F_batch) {
      for (size_t i = 0; i < items.size(); i += size_t(cnt)) {
        std::vector<Value> row(items.begin() + i, items.begin() + std::min(items.size(), i + size_t(cnt)));
        if (!fill.is_none()) while (int64_t(row.size()) < cnt) row.push_back(fill);
        out.push_back(Value::list(std::move(row)));
      }
    } else {
      size_t len = items.size(), per = len / size_t(cnt), extra = len % size_t(cnt), offset = 0;
      for (size_t s = 0; s < size_t(cnt); ++s) {
        size_t start = offset + s * per;
        if (s < extra) ++offset;
        size_t end = offset + (s + 1) * per;
        std::vector<Value> row(items.begin() + start, items.begin() + end);
        if (!fill.is_none() && s >= extra) row.push_back(fill);
        out.push_back(Value::list(std::move(row)));
      }
    }
    return Value::gen(std::move(out), id == F_batch ? "do_batch" : "sync_do_slice");
  }
  if (id == F_groupby) {
    Value attribute = arg(a, 0, "attribute", none);
    Value dflt = arg(a, 1, "default", none);
    bool cs = truthy(arg(a, 2, "case_sensitive", f_false));
    auto items = iterate(v);
    std::vector<std::pair<Value, Value>> keyed;
    for (auto& it : items) {
      Value k = attr_path(it, attribute);
      if (k.k == K::Undef && !dflt.is_none()) k = dflt;
      keyed.push_back({cs ? k : ignore_case(k), it});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](auto& x, auto& y) { return less(x.first, y.first); });
    std::vector<Value> out;
    for (size_t i = 0; i < keyed.size();) {
      size_t j = i;
      std::vector<Value> grp;
      while (j < keyed.size() && py_equal(keyed[j].first, keyed[i].first)) grp.push_back(keyed[j++].second);
      Value key = keyed[i].first;
      if (!cs) key = attr_path(grp[0], attribute);
      out.push_back(Value::tuple({key, Value::list(std::move(grp))}));
      i = j;
    }
    return Value::list(std::move(out));
  }
  if (id == F_pprint) return str_val(py_repr(v));
  if (id == F_striptags) {
    std::string s = soft_str(v).s(), out;
    bool tag = false;
    for (char c : s) {
      if (c == '<') tag = true;
      else if (c == '>' && tag) tag = false;
      else if (!tag) out.push_back(c);
    }
    return str_val(split_join_ws(out));
  }
  fail("TemplateRuntimeError", "filter '" + std::string(n) + "' is not supported by ckpt");
}

std::string Interp::split_join_ws(const std::string& s) {
  auto parts = split_ws(s, -1, false);
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out.push_back(' ');
    out += parts[i];
  }
  return out;
}


}  // namespace ckpt::jinja
