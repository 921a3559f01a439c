// Template dialects as what they change relative to the Python reference (ckpt's own Jinja
// engine): a Python-faithful scan of the template into text, comments and tags, then each
// dialect's rules over it — where its lexer ends text, the statements and expressions its
// parser rejects, the rewrites its preprocessing applies. Rules and error texts come from
// specs/template-dialects.md (§1 swift-jinja, §2 @huggingface/jinja, §4 the incident) and
// specs/chat-templates.md §3; llama.cpp's come from common/jinja/{lexer,parser}.cpp as cited.
// Validated against the recorded engines in tests/engines/corpus_test.cpp.
#include <algorithm>
#include <cstring>

#include "ckpt/engines.h"

namespace ckpt::engines {

namespace {

struct Tok {
  enum Kind : uint8_t { name, str, num, op } kind;
  uint32_t pos = 0, len = 0;
  std::string_view text;  // the source bytes (strings: including the quotes)
  int depth = 0;          // bracket depth inside the tag before this token
};

struct Region {
  enum Kind : uint8_t { text, comment, tag } kind;
  uint32_t begin = 0, end = 0;  // [begin, end) of the whole region in the source
  // tags
  char tag_kind = 0;    // '{' expression, '%' statement
  char open_sign = 0;   // '-' / '+' after the opener, or 0
  char close_sign = 0;  // '-' / '+' before the closer, or 0
  uint32_t close = 0;   // offset of the closing delimiter (incl. its sign)
  std::vector<Tok> toks;
};

bool name_start(unsigned char c) { return std::isalpha(c) || c == '_'; }
bool name_char(unsigned char c) { return std::isalnum(c) || c == '_'; }

// Splits the template as jinja2's lexer does (openers {{ {% {#, closers only at bracket depth
// 0, strings skipped, {% raw %} bodies are text). Stops at the first construct Python itself
// cannot lex (the CT001 case); what was scanned until then is returned.
std::vector<Region> scan(std::string_view s) {
  std::vector<Region> out;
  size_t pos = 0, n = s.size();
  auto find_open = [&](size_t from) {
    for (size_t i = s.find('{', from); i != std::string_view::npos && i + 1 < n; i = s.find('{', i + 1))
      if (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#') return i;
    return std::string_view::npos;
  };
  while (pos < n) {
    size_t i = find_open(pos);
    if (i == std::string_view::npos) {
      out.push_back({Region::text, uint32_t(pos), uint32_t(n)});
      break;
    }
    if (i > pos) out.push_back({Region::text, uint32_t(pos), uint32_t(i)});
    char kind = s[i + 1];
    if (kind == '#') {
      size_t j = s.find("#}", i + 2);
      if (j == std::string_view::npos) return out;
      out.push_back({Region::comment, uint32_t(i), uint32_t(j + 2)});
      pos = j + 2;
      continue;
    }
    Region r{Region::tag, uint32_t(i), 0};
    r.tag_kind = kind;
    size_t p = i + 2;
    if (p < n && (s[p] == '-' || s[p] == '+')) r.open_sign = s[p++];
    const char* close = kind == '{' ? "}}" : "%}";
    int depth = 0;
    bool closed = false;
    while (p < n) {
      unsigned char c = s[p];
      if (depth == 0) {
        if ((c == '-' || c == '+') && s.substr(p + 1, 2) == close) {
          r.close_sign = char(c);
          r.close = uint32_t(p);
          p += 3;
          closed = true;
          break;
        }
        if (s.substr(p, 2) == close) {
          r.close = uint32_t(p);
          p += 2;
          closed = true;
          break;
        }
      }
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++p;
        continue;
      }
      Tok t{Tok::op, uint32_t(p), 1, {}, depth};
      if (c == '\'' || c == '"') {
        size_t q = p + 1;
        while (q < n && s[q] != char(c)) q += s[q] == '\\' ? 2 : 1;
        if (q >= n) return out;
        t.kind = Tok::str;
        t.len = uint32_t(q + 1 - p);
      } else if (std::isdigit(c)) {
        size_t q = p;
        while (q < n && (std::isdigit((unsigned char)s[q]) || s[q] == '_')) ++q;
        if (q + 1 < n && s[q] == '.' && std::isdigit((unsigned char)s[q + 1]) &&
            !(p > 0 && s[p - 1] == '.')) {
          ++q;
          while (q < n && (std::isdigit((unsigned char)s[q]) || s[q] == '_')) ++q;
        }
        if (q < n && (s[q] == 'e' || s[q] == 'E')) {
          size_t e = q + 1;
          if (e < n && (s[e] == '+' || s[e] == '-')) ++e;
          if (e < n && std::isdigit((unsigned char)s[e])) {
            while (e < n && std::isdigit((unsigned char)s[e])) ++e;
            q = e;
          }
        }
        t.kind = Tok::num;
        t.len = uint32_t(q - p);
      } else if (name_start(c)) {
        size_t q = p;
        while (q < n && name_char((unsigned char)s[q])) ++q;
        t.kind = Tok::name;
        t.len = uint32_t(q - p);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : two)
          if (s.substr(p, 2) == op) t.len = 2;
        if (t.len == 1) {
          if (c == '(' || c == '[' || c == '{') ++depth;
          else if (c == ')' || c == ']' || c == '}') --depth;
          if (depth < 0) return out;
        }
      }
      t.text = s.substr(p, t.len);
      r.toks.push_back(t);
      p += t.len;
    }
    if (!closed) return out;
    r.end = uint32_t(p);
    out.push_back(r);
    pos = p;
    // {% raw %}…{% endraw %}: the body is text for Python.
    if (kind == '%' && r.toks.size() == 1 && r.toks[0].kind == Tok::name && r.toks[0].text == "raw") {
      size_t q = pos;
      while (true) {
        q = s.find("{%", q);
        if (q == std::string_view::npos) return out;
        size_t k = q + 2;
        if (k < n && (s[k] == '-' || s[k] == '+')) ++k;
        while (k < n && s[k] == ' ') ++k;
        if (s.substr(k, 6) == "endraw") break;
        q += 2;
      }
      if (q > pos) out.push_back({Region::text, uint32_t(pos), uint32_t(q)});
      pos = q;
    }
  }
  return out;
}

void locate(std::string_view s, DialectIssue& is) {
  uint32_t line = 1, col = 1;
  for (size_t i = 0; i < is.offset && i < s.size(); ++i) {
    unsigned char c = s[i];
    if (c == '\n' || (c == '\r' && !(i + 1 < s.size() && s[i + 1] == '\n'))) {
      ++line;
      col = 1;
    } else if (c == '\r') {
      // CRLF: the LF ends the line
    } else if ((c & 0xC0) != 0x80) {
      ++col;
    }
  }
  is.line = line;
  is.column = col;
}

const char* kSwiftSrc = "template-dialects.md §1b (swift-jinja Parser.swift / Lexer.swift)";

bool keyword_operand(std::string_view w) {
  return w == "and" || w == "or" || w == "not" || w == "in" || w == "if" || w == "else" || w == "is";
}

// Does the token start a primary expression (a test argument without parentheses, ...)?
bool starts_primary(const Tok& t) {
  if (t.kind == Tok::num || t.kind == Tok::str) return true;
  if (t.kind == Tok::name) return !keyword_operand(t.text) && t.text != "recursive";
  return t.text == "(" || t.text == "[" || t.text == "{";
}

std::string_view hf_token_type(const Tok& t) {
  switch (t.kind) {
    case Tok::num: return "NumericLiteral";
    case Tok::str: return "StringLiteral";
    case Tok::name: return "Identifier";
    case Tok::op: break;
  }
  if (t.text == "(") return "OpenParen";
  if (t.text == "[") return "OpenSquareBracket";
  if (t.text == "{") return "OpenCurlyBracket";
  return "";
}

// Index of the token after a test name: toks[i] is `is`.
size_t test_name_index(const std::vector<Tok>& toks, size_t i) {
  size_t t = i + 1;
  if (t < toks.size() && toks[t].kind == Tok::name && toks[t].text == "not") ++t;
  return t;
}

// Escapes a dialect accepts in string literals; returns the first other one.
std::optional<std::pair<uint32_t, char>> bad_escape(const Tok& t, std::string_view ok) {
  for (size_t i = 1; i + 1 < t.text.size(); ++i) {
    if (t.text[i] != '\\') continue;
    char e = t.text[i + 1];
    if (ok.find(e) == std::string_view::npos) return std::make_pair(uint32_t(t.pos + i), e);
    ++i;
  }
  return std::nullopt;
}

struct Ctx {
  std::string_view src;
  const std::vector<Region>& regions;
  DialectPrediction& out;
  void add(DialectIssue::Kind k, uint32_t off, std::string engine_error, std::string what, std::string source) {
    DialectIssue is;
    is.kind = k;
    is.offset = off;
    is.engine_error = std::move(engine_error);
    is.what = std::move(what);
    is.source = std::move(source);
    locate(src, is);
    out.issues.push_back(std::move(is));
  }
};

std::string statement_of(const Region& r) {
  if (r.tag_kind != '%' || r.toks.empty() || r.toks[0].kind != Tok::name) return {};
  return std::string(r.toks[0].text);
}

// ---- swift-jinja ----

void swift_rules(const Dialect& d, Ctx& c) {
  const Version v = d.version;
  const bool old_lexer = v < Version{2, 4, 0};
  auto sw = [](std::string m) { return "parser('" + m + "')"; };  // as SwiftLM prints JinjaError.parser
  for (const Region& r : c.regions) {
    if (r.kind == Region::text) {
      std::string_view t = c.src.substr(r.begin, r.end - r.begin);
      for (size_t i = 0; i + 1 < t.size(); ++i) {
        bool dash = t[i] == '-' && i + 2 < t.size() && (t.substr(i + 1, 2) == "}}" || t.substr(i + 1, 2) == "%}");
        std::string_view two = t.substr(dash ? i + 1 : i, 2);
        if (two != "}}" && two != "%}" && two != "#}") continue;
        uint32_t off = uint32_t(r.begin + i);
        if (dash)
          c.add(DialectIssue::Kind::renders_differently, off, "",
                std::string("'-") + std::string(two) + "' in text loses its '-' and the whitespace after it "
                "(global -}}/-%} rewrite)", "template-dialects.md §1a step 1 (Lexer.swift:122-141)");
        if (old_lexer) {
          if (two == "#}")
            c.add(DialectIssue::Kind::hangs, off, "",
                  "a bare '#}' in text: extractTextToken returns an empty token without advancing and tokenize "
                  "loops forever (by reading, not executed)", "template-dialects.md §1a step 2 (2.0.0-2.3.6)");
          else
            c.add(DialectIssue::Kind::refuses, off,
                  sw(std::string("Unexpected token type: ") + (two == "}}" ? "closeExpression" : "closeStatement")),
                  std::string("a bare '") + std::string(two) + "' in text ends the text run and is lexed as a "
                  "closing delimiter (fixed in 2.4.0, swift-jinja PR #66)", "template-dialects.md §1a step 2, §4");
        }
        i += dash ? 2 : 1;
      }
      continue;
    }
    if (r.kind == Region::comment) {
      std::string_view t = c.src.substr(r.begin, r.end - r.begin);
      if (t.size() >= 5 && (t[2] == '-' || t[t.size() - 3] == '-'))
        c.add(DialectIssue::Kind::renders_differently, r.begin, "",
              "'{#-' / '-#}' strip no whitespace in swift-jinja", "template-dialects.md §1b (extractCommentToken)");
      continue;
    }
    const auto& toks = r.toks;
    if (r.open_sign == '+')
      c.add(DialectIssue::Kind::refuses, r.begin + 2, r.tag_kind == '%' ? sw("Unknown statement: +") : "",
            std::string("'") + (r.tag_kind == '%' ? "{%+" : "{{+") + "': '+' lexes as .plus", kSwiftSrc);
    std::string stmt = statement_of(r);
    if (stmt == "raw" || stmt == "with" || stmt == "include" || stmt == "import" || stmt == "extends" ||
        stmt == "block" || stmt == "do" || stmt == "from")
      c.add(DialectIssue::Kind::refuses, toks[0].pos, sw("Unknown statement: " + stmt),
            "'{% " + stmt + " %}' is not a swift-jinja statement", kSwiftSrc);
    if ((stmt == "generation" || stmt == "endgeneration") && v < Version{2, 1, 0})
      c.add(DialectIssue::Kind::refuses, toks[0].pos, sw("Unknown statement: generation"),
            "'{% generation %}' arrived in 2.1.0 (c1ef596, #35)", kSwiftSrc);
    if (stmt == "for") {
      size_t in = 1;
      while (in < toks.size() && !(toks[in].kind == Tok::name && toks[in].text == "in" && toks[in].depth == 0)) ++in;
      for (size_t k = in + 1; k < toks.size(); ++k) {
        const Tok& t = toks[k];
        if (t.depth != 0) continue;
        if (t.kind == Tok::name && (t.text == "if" || t.text == "recursive")) {
          if (t.text == "recursive")
            c.add(DialectIssue::Kind::refuses, t.pos, sw("Expected '%}' after for loop.. Got identifier instead"),
                  "'for … recursive' is not supported", kSwiftSrc);
          break;
        }
        if (t.kind == Tok::op && t.text == "+" && v < Version{2, 3, 6}) {
          c.add(DialectIssue::Kind::refuses, t.pos, sw("Expected '%}' after for loop.. Got plus instead"),
                "'+' in a for-loop iterable is supported from 2.3.6 (#59)", "template-dialects.md §1b, §3 item 7");
          break;
        }
      }
    }
    for (size_t k = 0; k < toks.size(); ++k) {
      const Tok& t = toks[k];
      if (t.kind == Tok::name && t.text == "is" && k + 1 < toks.size() && toks[k + 1].kind == Tok::name &&
          toks[k + 1].text == "in")
        c.add(DialectIssue::Kind::refuses, toks[k + 1].pos, sw("Expected test name but found in."),
              "'is in' is not a swift-jinja test", kSwiftSrc);
      if (t.kind == Tok::op && t.text == "." && k + 1 < toks.size()) {
        const Tok& nx = toks[k + 1];
        if (nx.kind == Tok::num)
          c.add(DialectIssue::Kind::refuses, nx.pos, sw("Expected identifier but found number."),
                "dot-integer member access ('x.0')", kSwiftSrc);
        else if (nx.kind == Tok::name && (nx.text == "filter" || nx.text == "call" || nx.text == "generation" ||
                                          nx.text == "endset"))
          c.add(DialectIssue::Kind::refuses, nx.pos, "",
                "keyword '" + std::string(nx.text) + "' as an attribute name (not in allowedAsIdentifier)", kSwiftSrc);
      }
      if (t.kind == Tok::op && t.text == "|" && k + 1 < toks.size() && toks[k + 1].kind == Tok::name) {
        size_t j = k + 2;
        if (j < toks.size() && toks[j].text == "(") {
          int depth = toks[j].depth;
          ++j;
          while (j < toks.size() && !(toks[j].text == ")" && toks[j].depth == depth + 1)) ++j;
          ++j;
        }
        if (j < toks.size() && toks[j].kind == Tok::op &&
            (toks[j].text == "%" || toks[j].text == "*" || toks[j].text == "/" || toks[j].text == "//")) {
          bool in_if = (stmt == "if" || stmt == "elif") && toks[j].text == "%" && toks[j].depth == 0;
          c.add(DialectIssue::Kind::refuses, toks[j].pos,
                in_if ? sw("Expected '%}' after if condition.. Got modulo instead") : "",
                "a filter followed by '" + std::string(toks[j].text) +
                    "' (parseFilter wraps parseFactor: nothing consumes the operator; by reading)",
                "template-dialects.md §1b (Parser.swift:338-352, 457-494)");
        }
      }
    }
  }
}

// ---- @huggingface/jinja and llama.cpp common/jinja (a port of the same lexer/parser) ----

void js_family_rules(const Dialect& d, Ctx& c) {
  const bool hf = d.kind == DialectKind::hf_jinja;
  const Version v = d.version;
  const std::string hf_src = "template-dialects.md §2 (@huggingface/jinja " + v.str() + "); chat-templates.md §3";
  const std::string ll_src = "chat-templates.md §3; llama.cpp common/jinja/parser.cpp@5c5f166e, lexer.h@5c5f166e";
  const std::string& src = hf ? hf_src : ll_src;
  auto top = [](const Region&, const Tok& t) { return t.depth == 0; };
  auto closing = [&](const Region& r, const Tok& got) -> std::string {
    if (hf) {
      auto ty = hf_token_type(got);
      if (ty.empty()) return "";
      return r.tag_kind == '{' ? "Parser Error: Expected closing expression token. " + std::string(ty) + " !== CloseExpression."
                               : "Parser Error: Expected closing statement token. " + std::string(ty) + " !== CloseStatement.";
    }
    return std::string("Parser Error: Expected ") + (r.tag_kind == '{' ? "}}" : "%}") + " (Got " + std::string(got.text) + ")";
  };
  for (const Region& r : c.regions) {
    if (r.kind != Region::tag) continue;
    const auto& toks = r.toks;
    if (r.tag_kind == '%' && r.open_sign == '+')
      c.add(DialectIssue::Kind::refuses, r.begin + 2, hf ? "Unknown statement, got UnaryOperator" : "Unknown statement",
            "'{%+': the '+' lexes as a unary operator", src);
    if (r.close_sign == '+')
      c.add(DialectIssue::Kind::refuses, r.close, "", "'+%}': the '+' lexes as a binary operator", src);
    std::string stmt = statement_of(r);
    if (!stmt.empty()) {
      static const char* hf_ok[] = {"if", "elif", "else", "endif", "for", "endfor", "set", "endset", "macro",
                                    "endmacro", "call", "endcall", "filter", "endfilter", "break", "continue",
                                    "generation", "endgeneration"};
      bool known = std::any_of(std::begin(hf_ok), std::end(hf_ok), [&](const char* k) { return stmt == k; });
      if (!known)
        c.add(DialectIssue::Kind::refuses, toks[0].pos,
              hf ? "Unknown statement type: " + stmt : "Unknown statement: " + stmt,
              "'{% " + stmt + " %}' is not a statement of this engine", src);
      if (hf && (stmt == "generation" || stmt == "endgeneration") && v < Version{0, 5, 8} &&
          (r.open_sign == '-' || r.close_sign == '-'))
        c.add(DialectIssue::Kind::refuses, toks[0].pos, "Unknown statement type: generation",
              "the dashed '{%- generation -%}' is stripped only from 0.5.8 (5e53f652)", "template-dialects.md §2");
    }
    for (size_t k = 0; k < toks.size(); ++k) {
      const Tok& t = toks[k];
      if (stmt == "for" && t.kind == Tok::name && t.text == "recursive" && t.depth == 0)
        c.add(DialectIssue::Kind::refuses, t.pos,
              hf ? "Parser Error: Expected closing statement token. Identifier !== CloseStatement."
                 : "Parser Error: Expected %} (Got recursive)",
              "'for … recursive' is not supported", src);
      if (t.kind == Tok::name && t.text == "is") {
        size_t name = test_name_index(toks, k);
        if (name + 1 < toks.size() && toks[name].kind == Tok::name) {
          const Tok& arg = toks[name + 1];
          bool paren = arg.text == "(";
          if (starts_primary(arg) && (hf || !paren))
            c.add(DialectIssue::Kind::refuses, arg.pos, top(r, arg) ? closing(r, arg) : "",
                  "a test with an argument ('is " + std::string(toks[name].text) + (paren ? "(…)" : " …") +
                      "'): " + (hf ? "tests take no arguments" : "only a parenthesised argument is read"),
                  src);
        }
      }
      if (t.kind == Tok::num) {
        size_t cut = t.text.find_first_of("eE_");
        if (cut != std::string_view::npos) {
          Tok rest = t;
          rest.kind = Tok::name;
          rest.text = t.text.substr(cut);
          c.add(DialectIssue::Kind::refuses, uint32_t(t.pos + cut), top(r, t) ? closing(r, rest) : "",
                "number literal '" + std::string(t.text) + "': no exponent or '_' (the lexer stops at '" +
                    std::string(1, t.text[cut]) + "')",
                src);
        }
      }
      if (t.kind == Tok::str) {
        std::string ok = "ntrbfv'\"\\";
        if (hf && v >= Version{0, 5, 11}) ok += "xu";
        if (auto bad = bad_escape(t, ok))
          c.add(DialectIssue::Kind::refuses, bad->first,
                hf ? "Unexpected escaped character: " + std::string(1, bad->second)
                   : "lexer: unknown escape character \\" + std::string(1, bad->second),
                std::string("string escape '\\") + bad->second + "'", src);
      }
      if (t.kind == Tok::op && t.text == "[" && k + 1 < toks.size() && toks[k + 1].text == "]" && k > 0 && hf) {
        const Tok& prev = toks[k - 1];
        if ((prev.kind == Tok::name && !keyword_operand(prev.text)) || prev.kind == Tok::str || prev.text == ")" ||
            prev.text == "]")
          c.add(DialectIssue::Kind::refuses, t.pos, "Expected at least one argument for member/slice expression",
                "an empty subscript 'x[]'", src);
      }
      if (t.kind == Tok::op && (t.text == "//" || t.text == "**")) {
        bool unsupported = hf ? (t.text == "//" ? v < Version{0, 5, 10} : v < Version{0, 5, 11}) : true;
        if (unsupported)
          c.add(DialectIssue::Kind::refuses, uint32_t(t.pos + 1),
                hf ? "" : std::string("Unexpected token: ") + t.text[0] + " of type 22",
                "operator '" + std::string(t.text) + "'" +
                    (hf ? (t.text == "//" ? " (added after 0.5.9, 6444e0d9)" : " (added in 0.5.11)")
                        : " is lexed as two tokens"),
                src);
      }
      if (!hf && t.kind == Tok::op && (t.text == "-" || t.text == "+") && k > 0 && toks[k - 1].kind == Tok::name &&
          keyword_operand(toks[k - 1].text))
        c.add(DialectIssue::Kind::refuses, t.pos, std::string("Unexpected token: ") + std::string(t.text) + " of type 21",
              "a sign after '" + std::string(toks[k - 1].text) +
                  "': the lexer reads '-'/'+' after any identifier as a binary operator",
              "llama.cpp common/jinja/lexer.cpp@0f3c5996 (unary operator check)");
    }
  }
}

}  // namespace

const DialectIssue* DialectPrediction::first_refusal() const {
  for (const auto& i : issues)
    if (i.kind != DialectIssue::Kind::renders_differently) return &i;
  return nullptr;
}

DialectPrediction predict_dialect(const Dialect& d, std::string_view text) {
  DialectPrediction out;
  if (d.kind == DialectKind::python_jinja2) return out;
  std::vector<Region> regions = scan(text);
  Ctx c{text, regions, out};
  if (d.kind == DialectKind::swift_jinja) swift_rules(d, c);
  else js_family_rules(d, c);
  std::stable_sort(out.issues.begin(), out.issues.end(),
                   [](const DialectIssue& a, const DialectIssue& b) { return a.offset < b.offset; });
  // Global preprocessing that changes what renders: swift-jinja (every v2 version) and
  // @huggingface/jinja up to 0.5.2 replace -}}\s* with }} and -%}\s* with %} over the whole
  // source; swift-jinja also keeps {#- -#} from stripping.
  bool rewrite = d.kind == DialectKind::swift_jinja || (d.kind == DialectKind::hf_jinja && d.version <= Version{0, 5, 2});
  if (rewrite) {
    std::string r;
    r.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '-' && (text.substr(i + 1, 2) == "}}" || text.substr(i + 1, 2) == "%}")) {
        r.append(text.substr(i + 1, 2));
        i += 3;
        while (i < text.size() && std::strchr(" \t\n\r\f\v", text[i])) ++i;
        --i;
        continue;
      }
      r.push_back(text[i]);
    }
    if (d.kind == DialectKind::swift_jinja) {
      // {#- x -#} -> {# x #}: comments keep the surrounding whitespace.
      std::string q;
      q.reserve(r.size());
      for (size_t i = 0; i < r.size(); ++i) {
        if (r.compare(i, 3, "{#-") == 0) {
          q += "{#";
          i += 2;
        } else if (r.compare(i, 3, "-#}") == 0) {
          q += "#}";
          i += 2;
        } else {
          q.push_back(r[i]);
        }
      }
      r = std::move(q);
    }
    if (r != text) out.rewritten = std::move(r);
  }
  return out;
}

}  // namespace ckpt::engines
