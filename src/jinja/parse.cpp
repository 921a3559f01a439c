// Lexer and parser: jinja2's tokenizer rules (trim_blocks, lstrip_blocks, `-`/`+` markers,
// brace balancing inside tags) and its recursive-descent grammar, producing an AST whose
// nodes keep their byte offset in the normalized source.
#include <cstring>

#include "jinja/engine.h"

namespace ckpt::jinja {
namespace {

enum class T : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Tok {
  T t;
  std::string v;
  uint32_t pos;
  Value num;
  bool raw = false;  // Data from a {% raw %} block: delimiters in it are meant
};

[[noreturn]] void fail(uint32_t pos, std::string msg, std::string type = "TemplateSyntaxError") {
  throw JError{std::move(type), std::move(msg), pos, true};
}

// Python's str.splitlines() line boundaries joined with "\n"; one trailing newline dropped.
std::string normalize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = in[i];
    if (c == '\r') {
      if (i + 1 < n && in[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) {
      out.push_back('\n');
    } else if (c == 0xC2 && i + 1 < n && (unsigned char)in[i + 1] == 0x85) {
      out.push_back('\n');
      ++i;
    } else if (c == 0xE2 && i + 2 < n && (unsigned char)in[i + 1] == 0x80 &&
               ((unsigned char)in[i + 2] == 0xA8 || (unsigned char)in[i + 2] == 0xA9)) {
      out.push_back('\n');
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of a whitespace code point at s[i] (Python's str.isspace), 0 when not whitespace.
size_t space_len(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return (c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
  uint32_t cp = 0;
  size_t len = 0;
  if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) { cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F); len = 2; }
  else if ((c & 0xF0) == 0xE0 && i + 2 < s.size()) { cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); len = 3; }
  else return 0;
  return py_isspace(cp) ? len : 0;
}

std::string_view rstrip_ws(std::string_view s) {
  // strip trailing whitespace code points
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) --start;
    if (space_len(s, start) == s.size() - start) s.remove_suffix(s.size() - start);
    else break;
  }
  return s;
}

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size()) {
    size_t l = space_len(s, i);
    if (!l) break;
    i += l;
  }
  return i;
}

// Python "unicode-escape" decoding of a string literal body (after backslashreplace).
std::string unescape(std::string_view s, uint32_t pos) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) { out.push_back(c); continue; }
    char e = s[++i];
    auto hex = [&](size_t n) -> uint32_t {
      if (i + n >= s.size() + 0 && i + n > s.size() - 1 + 1) fail(pos, "truncated \\x escape in string literal", "SyntaxError");
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= s.size()) fail(pos, "truncated escape in string literal", "SyntaxError");
        char h = s[i + k];
        int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) fail(pos, "truncated escape in string literal", "SyntaxError");
        v = v * 16 + d;
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': append_utf8(out, hex(2)); break;
      case 'u': append_utf8(out, hex(4)); break;
      case 'U': {
        uint32_t cp = hex(8);
        if (cp > 0x10FFFF) fail(pos, "illegal Unicode character in string literal", "SyntaxError");
        append_utf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) v = v * 8 + (s[++i] - '0');
          append_utf8(out, v);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

bool is_name_start(unsigned char c) { return std::isalpha(c) || c == '_'; }
bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '_'; }

// Delimiter-like fragments in a data token: broken tag openers/closers that will reach the
// output as plain text. A one-character-short tag such as `{- bos_token -}}` (LFM2.5, SwiftLM
// #141) is reported once, as the whole broken tag; an opener counts only when whitespace or a
// closer follows it on the same line, so `e^{-x}` or `{-1}` in prose stays quiet.
void find_fragments(std::string_view text, uint32_t base, std::vector<std::pair<uint32_t, std::string>>& out) {
  int depth = 0;  // braces opened in this text
  // The end (exclusive) of the first closer after `from` on the same line, or npos.
  auto closer_end = [&](size_t from) -> size_t {
    for (size_t j = from; j + 1 < text.size() && j < from + 200; ++j) {
      if (text[j] == '\n' || text[j] == '{') return std::string_view::npos;
      if ((text[j] == '}' || text[j] == '%' || text[j] == '#') && text[j + 1] == '}') return j + 2;
    }
    return std::string_view::npos;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    auto at = [&](const char* p) { return text.substr(i, std::strlen(p)) == p; };
    if (at("{-") || at("{+")) {
      const size_t end = closer_end(i + 2);
      const bool spaced = i + 2 < text.size() && (text[i + 2] == ' ' || text[i + 2] == '\t');
      if (end != std::string_view::npos) {
        out.push_back({uint32_t(base + i), std::string(text.substr(i, end - i))});
        i = end - 1;
        continue;
      }
      if (spaced) out.push_back({uint32_t(base + i), std::string(text.substr(i, 2))});
      ++depth;
      continue;
    }
    if (at("-}}") || at("-%}") || at("-#}")) { out.push_back({uint32_t(base + i), std::string(text.substr(i, 3))}); i += 2; continue; }
    if (at("%}") || at("#}")) { out.push_back({uint32_t(base + i), std::string(text.substr(i, 2))}); ++i; continue; }
    if (c == '{') { ++depth; continue; }
    if (at("}}")) {
      if (depth >= 2) { depth -= 2; ++i; continue; }
      out.push_back({uint32_t(base + i), "}}"});
      depth = 0;
      ++i;
      continue;
    }
    if (c == '}' && depth > 0) --depth;
  }
}

class Lexer {
 public:
  Lexer(const std::string& src, const Options& o) : s_(src), o_(o) {}

  std::vector<Tok> run() {
    std::vector<Tok> toks;
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = s_.size();
    while (pos < n) {
      // find the next tag opener
      size_t i = pos;
      char kind = 0;
      while (true) {
        i = s_.find('{', i);
        if (i == std::string::npos || i + 1 >= n) { i = std::string::npos; break; }
        char c = s_[i + 1];
        if (c == '{' || c == '%' || c == '#') { kind = c; break; }
        ++i;
      }
      if (i == std::string::npos) {
        emit_data(toks, pos, n);
        break;
      }
      size_t open_len = 2;
      char sign = 0;
      if (i + 2 < n && (s_[i + 2] == '-' || s_[i + 2] == '+')) { sign = s_[i + 2]; open_len = 3; }
      // raw block
      size_t data_end = i;
      if (sign == '-') {
        data_end = pos + rstrip_ws(std::string_view(s_).substr(pos, i - pos)).size();
      } else if (sign != '+' && o_.lstrip_blocks && kind != '{') {
        std::string_view text = std::string_view(s_).substr(pos, i - pos);
        size_t nl = text.rfind('\n');
        size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          std::string_view tail = text.substr(l_pos);
          if (!tail.empty() && skip_ws(tail, 0) == tail.size()) data_end = pos + l_pos;
        }
      }
      if (kind == '%' && is_raw(i + open_len)) {
        emit_data(toks, pos, data_end);
        pos = lex_raw(toks, i, open_len, line_starting);
        continue;
      }
      emit_data(toks, pos, data_end);
      if (kind == '#') {
        // comment: find the first +#}, -#} or #}
        size_t j = i + open_len;
        while (true) {
          j = s_.find("#}", j);
          if (j == std::string::npos) fail(uint32_t(i), "Missing end of comment tag");
          break;
        }
        size_t end;
        if (j > i + open_len && s_[j - 1] == '-') end = skip_ws(s_, j + 2);
        else if (j > i + open_len && s_[j - 1] == '+') end = j + 2;
        else {
          end = j + 2;
          if (o_.trim_blocks && end < n && s_[end] == '\n') ++end;
        }
        line_starting = end > 0 && s_[end - 1] == '\n';
        pos = end;
        continue;
      }
      bool block = kind == '%';
      toks.push_back({block ? T::BlockBegin : T::VarBegin, {}, uint32_t(i), {}});
      pos = lex_tag(toks, i + open_len, block, line_starting, uint32_t(i));
    }
    toks.push_back({T::Eof, {}, uint32_t(n), {}});
    return toks;
  }

 private:
  bool is_raw(size_t p) {
    p = skip_ws(s_, p);
    if (s_.compare(p, 3, "raw") != 0) return false;
    p = skip_ws(s_, p + 3);
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    return s_.compare(p, 2, "%}") == 0;
  }

  size_t lex_raw(std::vector<Tok>& toks, size_t open, size_t open_len, bool& line_starting) {
    size_t p = skip_ws(s_, open + open_len) + 3;
    p = skip_ws(s_, p);
    bool strip_after = false;
    if (s_[p] == '-') { strip_after = true; ++p; } else if (s_[p] == '+') ++p;
    p += 2;
    if (strip_after) p = skip_ws(s_, p);
    else if (o_.trim_blocks && p < s_.size() && s_[p] == '\n') ++p;
    // find {% endraw %}
    size_t q = p;
    while (true) {
      q = s_.find("{%", q);
      if (q == std::string::npos) fail(uint32_t(open), "Missing end of raw directive");
      size_t r = q + 2;
      char sign = 0;
      if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) sign = s_[r++];
      r = skip_ws(s_, r);
      if (s_.compare(r, 6, "endraw") == 0) {
        r = skip_ws(s_, r + 6);
        char esign = 0;
        if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) esign = s_[r++];
        if (s_.compare(r, 2, "%}") == 0) {
          size_t data_end = q;
          if (sign == '-') data_end = p + rstrip_ws(std::string_view(s_).substr(p, q - p)).size();
          if (data_end > p) toks.push_back({T::Data, s_.substr(p, data_end - p), uint32_t(p), {}, true});
          r += 2;
          if (esign == '-') r = skip_ws(s_, r);
          else if (esign != '+' && o_.trim_blocks && r < s_.size() && s_[r] == '\n') ++r;
          line_starting = r > 0 && s_[r - 1] == '\n';
          return r;
        }
      }
      q += 2;
    }
  }

  void emit_data(std::vector<Tok>& toks, size_t from, size_t to) {
    if (to > from) toks.push_back({T::Data, s_.substr(from, to - from), uint32_t(from), {}});
  }

  size_t lex_tag(std::vector<Tok>& toks, size_t p, bool block, bool& line_starting, uint32_t open) {
    const size_t n = s_.size();
    std::vector<char> balance;
    while (true) {
      if (p >= n) fail(open, block ? "Unexpected end of template inside a block tag ('{%' not closed)" : "Unexpected end of template inside a variable tag ('{{' not closed)");
      // end of tag (only when brackets are balanced)
      if (balance.empty()) {
        const char* close = block ? "%}" : "}}";
        if (block && s_[p] == '+' && s_.compare(p + 1, 2, close) == 0) {
          toks.push_back({T::BlockEnd, {}, uint32_t(p), {}});
          line_starting = false;
          return p + 3;
        }
        if (s_[p] == '-' && s_.compare(p + 1, 2, close) == 0) {
          toks.push_back({block ? T::BlockEnd : T::VarEnd, {}, uint32_t(p), {}});
          size_t e = skip_ws(s_, p + 3);
          line_starting = e > p + 3 ? s_[e - 1] == '\n' : false;
          return e;
        }
        if (s_.compare(p, 2, close) == 0) {
          toks.push_back({block ? T::BlockEnd : T::VarEnd, {}, uint32_t(p), {}});
          size_t e = p + 2;
          if (block && o_.trim_blocks && e < n && s_[e] == '\n') ++e;
          line_starting = s_[e - 1] == '\n';
          return e;
        }
      }
      unsigned char c = s_[p];
      if (size_t l = space_len(s_, p)) { p += l; continue; }
      if (std::isdigit(c)) { p = lex_number(toks, p); continue; }
      if (is_name_start(c)) {
        size_t q = p;
        while (q < n && is_name_char(s_[q])) ++q;
        toks.push_back({T::Name, s_.substr(p, q - p), uint32_t(p), {}});
        p = q;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t q = p + 1;
        while (q < n && s_[q] != (char)c) {
          if (s_[q] == '\\') ++q;
          ++q;
        }
        if (q >= n) fail(uint32_t(p), "unexpected char '" + std::string(1, c) + "'");
        toks.push_back({T::String, unescape(std::string_view(s_).substr(p + 1, q - p - 1), uint32_t(p)), uint32_t(p), {}});
        p = q + 1;
        continue;
      }
      static const char* ops2[] = {"//", "**", "==", "!=", ">=", "<="};
      bool done = false;
      for (const char* op : ops2)
        if (s_.compare(p, 2, op) == 0) {
          toks.push_back({T::Op, op, uint32_t(p), {}});
          p += 2;
          done = true;
          break;
        }
      if (done) continue;
      if (std::strchr("+-/*%~[](){}=.:,|<>;", c) && c) {
        if (c == '(' || c == '[' || c == '{') balance.push_back(c);
        else if (c == ')' || c == ']' || c == '}') {
          char want = c == ')' ? '(' : c == ']' ? '[' : '{';
          if (balance.empty()) fail(uint32_t(p), std::string("unexpected '") + char(c) + "'");
          if (balance.back() != want) {
            char exp = balance.back() == '(' ? ')' : balance.back() == '[' ? ']' : '}';
            fail(uint32_t(p), std::string("unexpected '") + char(c) + "', expected '" + exp + "'");
          }
          balance.pop_back();
        }
        toks.push_back({T::Op, std::string(1, c), uint32_t(p), {}});
        ++p;
        continue;
      }
      fail(uint32_t(p), std::string("unexpected char '") + std::string(s_.substr(p, 1)) + "'");
    }
  }

  size_t lex_number(std::vector<Tok>& toks, size_t p) {
    const size_t n = s_.size();
    size_t q = p;
    auto digits = [&](size_t& x) {
      size_t st = x;
      while (x < n && (std::isdigit((unsigned char)s_[x]) || (s_[x] == '_' && x > st && x + 1 < n && std::isdigit((unsigned char)s_[x + 1])))) ++x;
      return x > st;
    };
    // hex/octal/binary
    if (s_[p] == '0' && p + 1 < n && std::strchr("xXoObB", s_[p + 1]) && s_[p + 1]) {
      int base = (s_[p + 1] == 'x' || s_[p + 1] == 'X') ? 16 : (s_[p + 1] == 'o' || s_[p + 1] == 'O') ? 8 : 2;
      q = p + 2;
      int64_t v = 0;
      size_t st = q;
      while (q < n) {
        char c = s_[q];
        int d = std::isdigit((unsigned char)c) ? c - '0' : std::isxdigit((unsigned char)c) ? (std::tolower(c) - 'a' + 10) : c == '_' ? -2 : -1;
        if (d == -2) { ++q; continue; }
        if (d < 0 || d >= base) break;
        if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) fail(uint32_t(p), "integer literal too large", "OverflowError");
        ++q;
      }
      if (q > st) {
        toks.push_back({T::Int, {}, uint32_t(p), Value::integer(v)});
        return q;
      }
      q = p;
    }
    digits(q);
    bool is_float = false;
    size_t r = q;
    bool after_dot = p > 0 && s_[p - 1] == '.';
    if (!after_dot && r < n && s_[r] == '.' && r + 1 < n && std::isdigit((unsigned char)s_[r + 1])) {
      ++r;
      digits(r);
      is_float = true;
      q = r;
    }
    if (!after_dot && q < n && (s_[q] == 'e' || s_[q] == 'E')) {
      size_t e = q + 1;
      if (e < n && (s_[e] == '+' || s_[e] == '-')) ++e;
      if (e < n && std::isdigit((unsigned char)s_[e])) {
        digits(e);
        q = e;
        is_float = true;
      }
    }
    std::string txt;
    for (size_t k = p; k < q; ++k)
      if (s_[k] != '_') txt.push_back(s_[k]);
    if (is_float) {
      toks.push_back({T::Float, txt, uint32_t(p), Value::flt(std::strtod(txt.c_str(), nullptr))});
    } else {
      int64_t v = 0;
      for (char c : txt)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) fail(uint32_t(p), "integer literal too large for ckpt (64-bit)", "OverflowError");
      toks.push_back({T::Int, txt, uint32_t(p), Value::integer(v)});
    }
    return q;
  }

  const std::string& s_;
  const Options& o_;
};

// ------------------------------------------------------------------ parser
class Parser {
 public:
  Parser(std::vector<Tok> toks, const Options& o, Parsed& out) : t_(std::move(toks)), o_(o), out_(out) {}

  // A new AST node in the template's arena.
  template <class T, class... A>
  std::unique_ptr<T, NodeDelete> make_node(A&&... a) {
    return std::unique_ptr<T, NodeDelete>(new (out_.arena.alloc(sizeof(T), alignof(T))) T(std::forward<A>(a)...));
  }

  Body parse_all() {
    std::vector<std::string> none;
    Body b = subparse({}, nullptr);
    if (cur().t != T::Eof) fail(cur().pos, "unexpected token");
    return b;
  }

 private:
  const Tok& cur() const { return t_[i_]; }
  const Tok& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() { if (i_ + 1 < t_.size()) ++i_; }
  bool is_op(const char* op) const { return cur().t == T::Op && cur().v == op; }
  bool is_name(const char* nm) const { return cur().t == T::Name && cur().v == nm; }
  bool skip_op(const char* op) { if (is_op(op)) { next(); return true; } return false; }
  bool skip_name(const char* nm) { if (is_name(nm)) { next(); return true; } return false; }
  std::string describe(const Tok& k) const {
    switch (k.t) {
      case T::Eof: return "end of template";
      case T::BlockEnd: return "end of statement block";
      case T::VarEnd: return "end of print statement";
      case T::BlockBegin: return "begin of statement block";
      case T::VarBegin: return "begin of print statement";
      case T::Data: return "template data";
      case T::String: return "string";
      case T::Int: return "integer";
      case T::Float: return "float";
      default: return "'" + k.v + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(cur().pos, std::string("expected token '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().t != T::Name) fail(cur().pos, "expected token 'name', got " + describe(cur()));
    std::string v = cur().v;
    next();
    return v;
  }
  void expect_block_end() {
    if (cur().t != T::BlockEnd) fail(cur().pos, "expected token 'end of statement block', got " + describe(cur()));
    next();
  }
  struct Depth {
    Parser& p;
    explicit Depth(Parser& pp, uint32_t pos) : p(pp) {
      if (++p.depth_ > p.o_.max_depth) fail(pos, "template nesting too deep (limit " + std::to_string(p.o_.max_depth) + ")", "TemplateSyntaxError");
    }
    ~Depth() { --p.depth_; }
  };

  // Parses statements until one of `ends` (a block tag name) is next; leaves the name current.
  Body subparse(const std::vector<const char*>& ends, const Tok* opener) {
    Body body;
    while (true) {
      const Tok& k = cur();
      if (k.t == T::Data) {
        auto st = make_node<Stmt>(SK::Data, k.pos);
        st->text = k.v;
        if (!k.raw) find_fragments(k.v, k.pos, st->fragments);
        body.push_back(std::move(st));
        next();
      } else if (k.t == T::VarBegin) {
        uint32_t p = k.pos;
        next();
        auto st = make_node<Stmt>(SK::Output, p);
        st->expr = parse_tuple(true, false, {});
        if (cur().t != T::VarEnd) fail(cur().pos, "expected token 'end of print statement', got " + describe(cur()));
        next();
        body.push_back(std::move(st));
      } else if (k.t == T::BlockBegin) {
        next();
        if (cur().t == T::Name)
          for (const char* e : ends)
            if (cur().v == e) return body;
        if (cur().t != T::Name) fail(cur().pos, "tag name expected");
        body.push_back(parse_statement(ends));
      } else if (k.t == T::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          std::string msg = "Unexpected end of template. Jinja was looking for the following tags: " + want + ".";
          if (opener) {
            // report the opening tag of the innermost unclosed block
            fail(opener->pos, msg + " The innermost block that needs to be closed is '" + opener->v + "' (opened here).");
          }
          fail(k.pos, msg);
        }
        return body;
      } else {
        fail(k.pos, "unexpected " + describe(k));
      }
    }
  }

  // Block body until `end` names; the closing name is consumed (and its block end).
  Body block_body(const std::vector<const char*>& ends, const Tok& opener, bool drop_end = true) {
    Body b = subparse(ends, &opener);
    if (drop_end) {
      next();  // the end name
      expect_block_end();
    }
    return b;
  }

  StmtP parse_statement(const std::vector<const char*>& outer_ends) {
    Tok tag = cur();
    Depth guard(*this, tag.pos);
    const std::string& nm = tag.v;
    uint32_t p = tag.pos;
    if (nm == "if") return parse_if();
    if (nm == "for") return parse_for();
    if (nm == "set") return parse_set();
    if (nm == "macro") return parse_macro();
    if (nm == "call") return parse_call_block();
    if (nm == "filter") {
      next();
      auto st = make_node<Stmt>(SK::FilterBlock, p);
      st->filter = parse_filter(nullptr, true);
      expect_block_end();
      st->body = block_body({"endfilter"}, tag);
      return st;
    }
    if (nm == "generation" || nm == "block" || nm == "autoescape") {
      next();
      if (nm == "block") {
        expect_name();
        if (skip_name("scoped")) {}
        if (skip_name("required")) {}
      } else if (nm == "autoescape") {
        parse_expression(true);
      }
      expect_block_end();
      auto st = make_node<Stmt>(SK::Body, p);
      std::string endname = "end" + nm;
      const char* e = nm == "generation" ? "endgeneration" : nm == "block" ? "endblock" : "endautoescape";
      st->body = subparse({e}, &tag);
      next();
      if (nm == "block" && cur().t == T::Name) next();
      expect_block_end();
      return st;
    }
    if (nm == "break" || nm == "continue") {
      if (loop_depth_ == 0) fail(p, "'" + nm + "' outside of a loop", "TemplateSyntaxError");
      next();
      expect_block_end();
      return make_node<Stmt>(nm == "break" ? SK::Break : SK::Continue, p);
    }
    if (nm == "print") {
      next();
      auto st = make_node<Stmt>(SK::Output, p);
      st->expr = parse_tuple(true, false, {});
      expect_block_end();
      return st;
    }
    if (nm == "with") {
      next();
      auto st = make_node<Stmt>(SK::With, p);
      while (cur().t != T::BlockEnd) {
        if (!st->with_vars.empty()) expect_op(",");
        ExprP target = parse_assign_target(false, false, {});
        expect_op("=");
        st->with_vars.push_back({std::move(target), parse_expression(true)});
      }
      expect_block_end();
      st->body = block_body({"endwith"}, tag);
      return st;
    }
    if (nm == "extends" || nm == "include" || nm == "import" || nm == "from") {
      // jinja2 parses these and fails when rendering: transformers' environment has no loader
      next();
      while (cur().t != T::BlockEnd && cur().t != T::Eof) next();
      expect_block_end();
      auto st = make_node<Stmt>(SK::Unsupported, p);
      st->text = nm;
      return st;
    }
    std::string msg = "Encountered unknown tag '" + nm + "'.";
    if (!outer_ends.empty()) {
      msg += " Jinja was looking for the following tags: ";
      for (size_t k = 0; k < outer_ends.size(); ++k) msg += (k ? " or '" : "'") + std::string(outer_ends[k]) + "'";
      msg += ".";
    }
    fail(p, msg);
  }

  StmtP parse_if() {
    Tok tag = cur();
    next();
    auto st = make_node<Stmt>(SK::If, tag.pos);
    ExprP cond = parse_tuple(false, false, {});
    expect_block_end();
    while (true) {
      Body b = subparse({"elif", "else", "endif"}, &tag);
      st->branches.push_back({std::move(cond), std::move(b)});
      if (is_name("elif")) {
        tag = cur();
        next();
        cond = parse_tuple(false, false, {});
        expect_block_end();
        continue;
      }
      if (is_name("else")) {
        tag = cur();
        next();
        expect_block_end();
        Body eb = subparse({"endif"}, &tag);
        st->branches.push_back({nullptr, std::move(eb)});
      }
      next();  // endif
      expect_block_end();
      return st;
    }
  }

  StmtP parse_for() {
    Tok tag = cur();
    next();
    auto st = make_node<Stmt>(SK::For, tag.pos);
    st->target = parse_assign_target(true, false, {"in"});
    if (!skip_name("in")) fail(cur().pos, "expected token 'in', got " + describe(cur()));
    st->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) st->test = parse_expression(true);
    if (skip_name("recursive")) st->recursive = true;
    expect_block_end();
    ++loop_depth_;
    st->body = subparse({"endfor", "else"}, &tag);
    --loop_depth_;
    if (is_name("else")) {
      next();
      expect_block_end();
      st->else_body = subparse({"endfor"}, &tag);
    }
    next();
    expect_block_end();
    return st;
  }

  StmtP parse_set() {
    Tok tag = cur();
    next();
    ExprP target = parse_assign_target(true, true, {});
    if (skip_op("=")) {
      auto st = make_node<Stmt>(SK::Set, tag.pos);
      st->target = std::move(target);
      st->expr = parse_tuple(true, false, {});
      expect_block_end();
      return st;
    }
    auto st = make_node<Stmt>(SK::SetBlock, tag.pos);
    st->target = std::move(target);
    if (is_op("|")) st->filter = parse_filter(nullptr, false);
    expect_block_end();
    st->body = block_body({"endset"}, tag);
    return st;
  }

  void parse_signature(MacroDef& m) {
    expect_op("(");
    bool seen_default = false;
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      uint32_t pp = cur().pos;
      std::string nm = expect_name();
      m.params.push_back(nm);
      if (skip_op("=")) {
        m.defaults.push_back(parse_expression(true));
        seen_default = true;
      } else if (seen_default) {
        fail(pp, "non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  static void scan_names(const Body& b, MacroDef& m);
  static void scan_expr(const Expr* e, MacroDef& m) {
    if (!e) return;
    if (e->kind == EK::Name) {
      if (e->name == "varargs") m.catch_varargs = true;
      else if (e->name == "kwargs") m.catch_kwargs = true;
      else if (e->name == "caller") m.caller = true;
    }
    for (auto& k : e->kids) scan_expr(k.get(), m);
    for (auto& kw : e->kwargs) scan_expr(kw.second.get(), m);
    scan_expr(e->a.get(), m);
    scan_expr(e->b.get(), m);
    scan_expr(e->c.get(), m);
    scan_expr(e->dyn_args.get(), m);
    scan_expr(e->dyn_kwargs.get(), m);
  }

  StmtP parse_macro() {
    Tok tag = cur();
    next();
    auto st = make_node<Stmt>(SK::Macro, tag.pos);
    auto m = std::make_shared<MacroDef>();
    m->pos = tag.pos;
    m->name = expect_name();
    parse_signature(*m);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    m->body = block_body({"endmacro"}, tag);
    loop_depth_ = saved;
    scan_names(m->body, *m);
    for (auto& d : m->defaults) scan_expr(d.get(), *m);
    st->macro = m;
    return st;
  }

  StmtP parse_call_block() {
    Tok tag = cur();
    next();
    auto st = make_node<Stmt>(SK::CallBlock, tag.pos);
    auto m = std::make_shared<MacroDef>();
    m->name = "caller";
    m->pos = tag.pos;
    if (is_op("(")) parse_signature(*m);
    st->expr = parse_expression(true);
    if (st->expr->kind != EK::Call) fail(tag.pos, "expected call");
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    m->body = block_body({"endcall"}, tag);
    loop_depth_ = saved;
    scan_names(m->body, *m);
    st->macro = m;
    return st;
  }

  ExprP parse_assign_target(bool with_tuple, bool with_namespace, const std::vector<const char*>& extra_end) {
    uint32_t p = cur().pos;
    if (with_namespace && cur().t == T::Name && peek().t == T::Op && peek().v == ".") {
      std::string ns = cur().v;
      next();
      next();
      std::string attr = expect_name();
      auto e = make_node<Expr>(EK::Attr, p);
      e->a = make_node<Expr>(EK::Name, p);
      e->a->name = ns;
      e->name = attr;
      return e;
    }
    ExprP target;
    if (with_tuple) {
      std::vector<ExprP> items;
      bool is_tuple = false;
      while (true) {
        if (!items.empty()) expect_op(",");
        if (tuple_end(extra_end)) break;
        items.push_back(parse_primary());
        if (is_op(",")) is_tuple = true;
        else break;
      }
      if (!is_tuple) {
        if (items.empty()) fail(cur().pos, "Expected an expression, got " + describe(cur()));
        target = std::move(items[0]);
      } else {
        target = make_node<Expr>(EK::Tuple, p);
        target->kids = std::move(items);
      }
    } else {
      target = parse_primary();
    }
    auto check = [&](const Expr* e) {
      if (e->kind != EK::Name) fail(e->pos, "can't assign to this expression");
      if (e->name == "true" || e->name == "false" || e->name == "none" || e->name == "True" || e->name == "False" || e->name == "None")
        fail(e->pos, "can't assign to '" + e->name + "'");
    };
    if (target->kind == EK::Tuple) for (auto& k : target->kids) check(k.get());
    else check(target.get());
    return target;
  }

  bool tuple_end(const std::vector<const char*>& extra_end) const {
    if (cur().t == T::VarEnd || cur().t == T::BlockEnd || is_op(")")) return true;
    for (const char* e : extra_end)
      if (is_name(e)) return true;
    return false;
  }

  ExprP parse_tuple(bool with_condexpr, bool explicit_parens, const std::vector<const char*>& extra_end) {
    uint32_t p = cur().pos;
    std::vector<ExprP> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail(cur().pos, "Expected an expression, got " + describe(cur()));
    }
    auto e = make_node<Expr>(EK::Tuple, p);
    e->kids = std::move(items);
    return e;
  }

  ExprP parse_expression(bool with_condexpr) {
    Depth guard(*this, cur().pos);
    if (!with_condexpr) return parse_or();
    ExprP e = parse_or();
    while (is_name("if")) {
      uint32_t p = cur().pos;
      next();
      ExprP cond = parse_or();
      ExprP other;
      if (skip_name("else")) other = parse_expression(true);
      auto c = make_node<Expr>(EK::Cond, p);
      c->a = std::move(cond);
      c->b = std::move(e);
      c->c = std::move(other);
      e = std::move(c);
    }
    return e;
  }

  ExprP bin(EK k, uint32_t p, ExprP l, ExprP r, std::string op = {}) {
    auto e = make_node<Expr>(k, p);
    e->a = std::move(l);
    e->b = std::move(r);
    e->name = std::move(op);
    return e;
  }

  ExprP parse_or() {
    ExprP l = parse_and();
    while (is_name("or")) { uint32_t p = cur().pos; next(); l = bin(EK::Or, p, std::move(l), parse_and()); }
    return l;
  }
  ExprP parse_and() {
    ExprP l = parse_not();
    while (is_name("and")) { uint32_t p = cur().pos; next(); l = bin(EK::And, p, std::move(l), parse_not()); }
    return l;
  }
  ExprP parse_not() {
    if (is_name("not")) {
      uint32_t p = cur().pos;
      next();
      Depth guard(*this, p);
      auto e = make_node<Expr>(EK::Not, p);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    uint32_t p = cur().pos;
    ExprP first = parse_math1();
    ExprP cmp;
    while (true) {
      std::string op;
      if (cur().t == T::Op && (cur().v == "==" || cur().v == "!=" || cur().v == "<" || cur().v == ">" || cur().v == "<=" || cur().v == ">=")) {
        op = cur().v;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().t == T::Name && peek().v == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make_node<Expr>(EK::Compare, p);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprP parse_math1() {
    ExprP l = parse_concat();
    while (is_op("+") || is_op("-")) {
      uint32_t p = cur().pos;
      std::string op = cur().v;
      next();
      l = bin(EK::Bin, p, std::move(l), parse_concat(), op);
    }
    return l;
  }
  ExprP parse_concat() {
    uint32_t p = cur().pos;
    ExprP first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make_node<Expr>(EK::Concat, p);
    e->kids.push_back(std::move(first));
    while (skip_op("~")) e->kids.push_back(parse_math2());
    return e;
  }
  ExprP parse_math2() {
    ExprP l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      uint32_t p = cur().pos;
      std::string op = cur().v;
      next();
      l = bin(EK::Bin, p, std::move(l), parse_pow(), op);
    }
    return l;
  }
  ExprP parse_pow() {
    ExprP l = parse_unary(true);
    while (is_op("**")) {
      uint32_t p = cur().pos;
      next();
      l = bin(EK::Bin, p, std::move(l), parse_unary(true), "**");
    }
    return l;
  }
  ExprP parse_unary(bool with_filter) {
    uint32_t p = cur().pos;
    Depth guard(*this, p);
    ExprP node;
    if (is_op("-") || is_op("+")) {
      EK k = is_op("-") ? EK::Neg : EK::Pos;
      next();
      node = make_node<Expr>(k, p);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprP parse_primary() {
    const Tok& k = cur();
    uint32_t p = k.pos;
    Depth guard(*this, p);
    if (k.t == T::Name) {
      const std::string& v = k.v;
      auto e = make_node<Expr>(EK::Const, p);
      if (v == "true" || v == "True") e->cval = Value::boolean(true);
      else if (v == "false" || v == "False") e->cval = Value::boolean(false);
      else if (v == "none" || v == "None") e->cval = Value::none();
      else {
        e->kind = EK::Name;
        e->name = v;
        out_.names_read.push_back(v);
      }
      next();
      return e;
    }
    if (k.t == T::String) {
      std::string s;
      while (cur().t == T::String) {
        s += cur().v;
        next();
      }
      auto e = make_node<Expr>(EK::Const, p);
      e->cval = Value::str(std::move(s));
      return e;
    }
    if (k.t == T::Int || k.t == T::Float) {
      auto e = make_node<Expr>(EK::Const, p);
      e->cval = k.num;
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprP e = parse_tuple(true, true, {});
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = make_node<Expr>(EK::List, p);
      while (!is_op("]")) {
        if (!e->kids.empty()) expect_op(",");
        if (is_op("]")) break;
        e->kids.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = make_node<Expr>(EK::Dict, p);
      while (!is_op("}")) {
        if (!e->kids.empty()) expect_op(",");
        if (is_op("}")) break;
        e->kids.push_back(parse_expression(true));
        expect_op(":");
        e->kids.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail(p, "unexpected " + describe(k));
  }

  ExprP parse_postfix(ExprP node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprP parse_filter_expr(ExprP node) {
    while (true) {
      if (is_op("|")) node = parse_filter(std::move(node), false);
      else if (is_name("is")) node = parse_test(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprP parse_subscript(ExprP node) {
    uint32_t p = cur().pos;
    if (skip_op(".")) {
      if (cur().t == T::Name) {
        auto e = make_node<Expr>(EK::Attr, p);
        e->a = std::move(node);
        e->name = cur().v;
        next();
        return e;
      }
      if (cur().t == T::Int) {
        auto e = make_node<Expr>(EK::Item, p);
        e->a = std::move(node);
        e->b = make_node<Expr>(EK::Const, cur().pos);
        e->b->cval = cur().num;
        next();
        return e;
      }
      fail(cur().pos, "expected name or number");
    }
    expect_op("[");
    std::vector<ExprP> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make_node<Expr>(EK::Item, p);
    e->a = std::move(node);
    if (args.size() == 1) e->b = std::move(args[0]);
    else {
      e->b = make_node<Expr>(EK::Tuple, p);
      e->b->kids = std::move(args);
    }
    return e;
  }

  ExprP parse_subscribed() {
    uint32_t p = cur().pos;
    ExprP start, stop, step;
    if (is_op(":")) {
      next();
    } else {
      ExprP node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      start = std::move(node);
    }
    if (!is_op(":") && !is_op("]") && !is_op(",")) stop = parse_expression(true);
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) step = parse_expression(true);
    }
    auto e = make_node<Expr>(EK::Slice, p);
    e->a = std::move(start);
    e->b = std::move(stop);
    e->c = std::move(step);
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      uint32_t p = cur().pos;
      if (is_op("*")) {
        next();
        if (e.dyn_args || e.dyn_kwargs) fail(p, "invalid syntax for function call expression");
        e.dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        next();
        if (e.dyn_kwargs) fail(p, "invalid syntax for function call expression");
        e.dyn_kwargs = parse_expression(true);
      } else if (cur().t == T::Name && peek().t == T::Op && peek().v == "=") {
        if (e.dyn_kwargs) fail(p, "invalid syntax for function call expression");
        std::string key = cur().v;
        next();
        next();
        e.kwargs.push_back({key, parse_expression(true)});
      } else {
        if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty()) fail(p, "invalid syntax for function call expression");
        e.kids.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprP parse_call(ExprP node) {
    auto e = make_node<Expr>(EK::Call, cur().pos);
    e->a = std::move(node);
    parse_call_args(*e);
    return e;
  }

  ExprP parse_filter(ExprP node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      uint32_t p = cur().pos;
      std::string nm = expect_name();
      while (is_op(".")) {
        next();
        nm += "." + expect_name();
      }
      auto e = make_node<Expr>(EK::Filter, p);
      e->a = std::move(node);
      e->name = nm;
      e->id = filter_id(nm);
      if (is_op("(")) parse_call_args(*e);
      node = std::move(e);
    }
    return node;
  }

  ExprP parse_test(ExprP node) {
    uint32_t p = cur().pos;
    next();  // is
    bool negated = skip_name("not");
    std::string nm = expect_name();
    while (is_op(".")) {
      next();
      nm += "." + expect_name();
    }
    auto e = make_node<Expr>(EK::Test, p);
    e->a = std::move(node);
    e->name = nm;
    e->negated = negated;
    e->id = test_id(nm);
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().t == T::Name || cur().t == T::String || cur().t == T::Int || cur().t == T::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(cur().pos, "You cannot chain multiple tests with is");
      ExprP arg = parse_primary();
      e->kids.push_back(parse_postfix(std::move(arg)));
    }
    return e;
  }

  std::vector<Tok> t_;
  size_t i_ = 0;
  const Options& o_;
  Parsed& out_;
  uint32_t depth_ = 0;
  int loop_depth_ = 0;
};

void Parser::scan_names(const Body& b, MacroDef& m) {
  for (auto& st : b) {
    scan_expr(st->expr.get(), m);
    scan_expr(st->test.get(), m);
    scan_expr(st->filter.get(), m);
    for (auto& br : st->branches) {
      scan_expr(br.first.get(), m);
      scan_names(br.second, m);
    }
    for (auto& wv : st->with_vars) scan_expr(wv.second.get(), m);
    scan_names(st->body, m);
    scan_names(st->else_body, m);
    if (st->kind == SK::CallBlock && st->macro) {
      // names inside a call block's body belong to the caller, but jinja still marks the
      // enclosing macro as using `caller` only through its own references.
    }
    if (st->kind == SK::Macro) {
      // a nested macro's names are its own
    }
  }
}

// jinja2 reports an unknown filter or test when compiling, except inside an `if` (its tests
// and bodies) or a conditional expression ("soft" frames), where the error is deferred to
// the moment the filter is called. Loops, macros, call/filter/set blocks start hard frames.
void check_expr(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == EK::Cond) soft = true;
  if ((e->kind == EK::Filter || e->kind == EK::Test) && e->id < 0 && !soft)
    fail(e->pos, std::string("No ") + (e->kind == EK::Filter ? "filter" : "test") + " named '" + e->name + "'.",
         "TemplateAssertionError");
  check_expr(e->a.get(), soft);
  check_expr(e->b.get(), soft);
  check_expr(e->c.get(), soft);
  for (auto& k : e->kids) check_expr(k.get(), soft);
  for (auto& kw : e->kwargs) check_expr(kw.second.get(), soft);
  check_expr(e->dyn_args.get(), soft);
  check_expr(e->dyn_kwargs.get(), soft);
}

void check_body(const Body& b, bool soft) {
  for (auto& st : b) {
    switch (st->kind) {
      case SK::If:
        for (auto& br : st->branches) {
          check_expr(br.first.get(), true);
          check_body(br.second, true);
        }
        break;
      case SK::For:
        check_expr(st->expr.get(), soft);
        check_expr(st->test.get(), false);
        check_body(st->body, false);
        check_body(st->else_body, false);
        break;
      case SK::Macro:
        for (auto& d : st->macro->defaults) check_expr(d.get(), false);
        check_body(st->macro->body, false);
        break;
      case SK::CallBlock:
        check_expr(st->expr.get(), soft);
        check_body(st->macro->body, false);
        break;
      case SK::FilterBlock:
      case SK::SetBlock:
        check_expr(st->filter.get(), false);
        check_body(st->body, false);
        break;
      case SK::With:
        for (auto& wv : st->with_vars) check_expr(wv.second.get(), false);
        check_body(st->body, false);
        break;
      default:
        check_expr(st->expr.get(), soft);
        check_body(st->body, soft);
    }
  }
}

// After parsing: interns every variable name (frames then compare integer ids), records
// what each attribute name can denote, marks the loops whose body reads `loop`, and takes
// the AST's constant objects out of reference counting (renders on several threads share
// them; Values only borrow them).
struct Resolver {
  explicit Resolver(Parsed& parsed) : p(parsed) {}
  Parsed& p;
  int scope = 0;                  // > 0 inside a loop, macro, call block or with block
  std::vector<bool> bound_below;  // by name id: bound in some frame other than the root
  std::vector<Expr*> name_nodes;

  void bind(int id) {
    if (scope == 0) return;
    if (bound_below.size() <= size_t(id)) bound_below.resize(size_t(id) + 1, false);
    bound_below[size_t(id)] = true;
  }
  // the names an assignment target binds
  void bind_target(const Expr* t) {
    if (!t) return;
    if (t->kind == EK::Name) bind(t->id);
    else if (t->kind == EK::Tuple)
      for (auto& k : t->kids) bind_target(k.get());
  }

  int intern(const std::string& n) {
    for (size_t i = 0; i < p.names.size(); ++i)
      if (p.names[i] == n) return int(i);
    p.names.push_back(n);
    return int(p.names.size() - 1);
  }
  void own(Value& v) {
    if (!v.counted) return;
    p.consts.emplace_back(v.o);
    v.counted = false;
  }
  void expr(Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case EK::Name:
        e->id = intern(e->name);
        e->cval = Value::str(e->name);
        own(e->cval);
        name_nodes.push_back(e);
        break;
      case EK::Attr:
        e->info = attr_info(e->name);
        e->cval = Value::str(e->name);
        own(e->cval);
        e->name_key = e->a && e->a->kind == EK::Name;
        break;
      case EK::Item:
        if (e->b && e->b->kind == EK::Const && e->b->cval.k == K::Str) {
          e->info = attr_info(e->b->cval.s());
          e->name_key = e->a && e->a->kind == EK::Name;
        } else {
          e->info = kInfoUnknown;
        }
        break;
      case EK::Bin:
        e->op = e->name.size() == 1 ? e->name[0] : (e->name[0] == '/' ? 'F' : 'P');
        break;
      case EK::Compare:
        // `x in ['a', 'b']`: a list or tuple of constants that only serves as the container
        // of a membership test is built once (it cannot be seen, or changed, by the template)
        for (size_t i = 0; i < e->ops.size() && i < e->kids.size(); ++i)
          if (e->ops[i] == "in" || e->ops[i] == "notin") fold_constant_sequence(e->kids[i]);
        break;
      default: own(e->cval);
    }
    any_child(*e, [this](Expr* k) {
      expr(k);
      return false;
    });
  }
  void fold_constant_sequence(ExprP& e) {
    if (!e || (e->kind != EK::List && e->kind != EK::Tuple)) return;
    std::vector<Value> items;
    for (auto& k : e->kids) {
      if (k->kind != EK::Const) return;
      own(k->cval);
      items.push_back(k->cval);
    }
    ExprP c(new (p.arena.alloc(sizeof(Expr), alignof(Expr))) Expr(EK::Const, e->pos));
    c->cval = e->kind == EK::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    own(c->cval);
    e = std::move(c);
  }
  void macro(MacroDef& m) {
    m.name_id = intern(m.name);
    ++scope;  // parameters, defaults and body run in the call's frame
    for (auto& prm : m.params) {
      m.param_ids.push_back(intern(prm));
      bind(m.param_ids.back());
      m.param_strs.push_back(Value::str(prm));
      own(m.param_strs.back());
    }
    for (int id : {int(kNameVarargs), int(kNameKwargs), int(kNameCaller)}) bind(id);
    for (auto& d : m.defaults) expr(d.get());
    body(m.body);
    --scope;
  }
  void stmt(Stmt* st) {
    switch (st->kind) {
      case SK::For:
        expr(st->expr.get());  // the sequence: in the enclosing frame
        ++scope;
        expr(st->target.get());
        bind_target(st->target.get());
        bind(kNameLoop);
        expr(st->test.get());
        body(st->body);
        body(st->else_body);
        --scope;
        st->uses_loop = reads_loop(st->body) || reads_loop_expr(st->test.get());
        return;
      case SK::With:
        for (auto& wv : st->with_vars) expr(wv.second.get());  // values: in the enclosing frame
        ++scope;
        for (auto& wv : st->with_vars) {
          expr(wv.first.get());
          bind_target(wv.first.get());
        }
        body(st->body);
        --scope;
        return;
      case SK::Macro:
        macro(*st->macro);
        bind(st->macro->name_id);  // defined in the current frame
        return;
      case SK::CallBlock:
        expr(st->expr.get());
        macro(*st->macro);
        return;
      default: break;
    }
    expr(st->expr.get());
    expr(st->target.get());
    if (st->kind == SK::Set || st->kind == SK::SetBlock) bind_target(st->target.get());
    expr(st->test.get());
    expr(st->filter.get());
    for (auto& br : st->branches) {
      expr(br.first.get());
      body(br.second);
    }
    body(st->body);
    body(st->else_body);
  }
  void finish() {
    for (Expr* e : name_nodes)
      e->root_only = size_t(e->id) >= bound_below.size() || !bound_below[size_t(e->id)];
  }
  void body(Body& b) {
    for (auto& st : b) stmt(st.get());
  }
  // Whether `loop` is read anywhere below (conservative: nested scopes count).
  static bool reads_loop_expr(const Expr* e) {
    if (!e) return false;
    if (e->kind == EK::Name && e->name == "loop") return true;
    return any_child(*e, [](const Expr* k) { return reads_loop_expr(k); });
  }
  static bool reads_loop(const Body& b) {
    for (auto& st : b) {
      if (reads_loop_expr(st->expr.get()) || reads_loop_expr(st->target.get()) || reads_loop_expr(st->test.get()) ||
          reads_loop_expr(st->filter.get()))
        return true;
      for (auto& br : st->branches)
        if (reads_loop_expr(br.first.get()) || reads_loop(br.second)) return true;
      for (auto& wv : st->with_vars)
        if (reads_loop_expr(wv.first.get()) || reads_loop_expr(wv.second.get())) return true;
      if (st->macro) {
        for (auto& d : st->macro->defaults)
          if (reads_loop_expr(d.get())) return true;
        if (reads_loop(st->macro->body)) return true;
      }
      if (reads_loop(st->body) || reads_loop(st->else_body)) return true;
    }
    return false;
  }
};

}  // namespace

std::string normalize_source(std::string_view text) { return normalize(text); }

std::unique_ptr<Parsed> parse_template(std::string_view text, const Options& opts) {
  auto out = std::make_unique<Parsed>();
  out->source = normalize(text);
  Lexer lx(out->source, opts);
  std::vector<Tok> toks = lx.run();
  Parser ps(std::move(toks), opts, *out);
  out->body = ps.parse_all();
  check_body(out->body, false);
  for (const char* reserved : {"loop", "varargs", "kwargs", "caller"}) out->names.push_back(reserved);
  Resolver r(*out);
  r.body(out->body);
  r.finish();
  for (auto& n : out->names) out->name_global.push_back(global_id(n));
  return out;
}

}  // namespace ckpt::jinja
