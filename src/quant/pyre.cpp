// Python `re` patterns, as quantization configs write them, run on ECMAScript std::regex.
//
// The configs' patterns are Python regexes read by Python loaders: compressed-tensors
// "re:" targets and ignore entries, GPTQ `dynamic` keys, AutoRound extra_config keys,
// transformers' modules_to_not_convert / llm_int8_skip_modules entries. They are translated
// once (per scheme, at parse time) into an equivalent ECMAScript regex:
//   - `.`  -> `[^\n]` (ECMAScript's dot also refuses \r, \u2028, \u2029); (?s) -> `[\s\S]`
//   - `$`  -> `(?=\n?(?![\s\S]))`: Python's `$` also matches before one trailing newline
//   - `\Z` -> `(?![\s\S])`, `\A` -> `^`, `\a` and octal escapes -> `\xHH`
//   - `{,n}` -> `{0,n}`; a `{` that does not start a valid repeat is a literal, as in Python
//   - `[]...]`: a leading `]` in a class is literal; `[` inside a class is escaped (libstdc++
//     would read `[:alpha:]` as a POSIX class, Python reads it literally)
//   - (?P<name>...) / (?P=name) -> numbered groups / back references; (?#...) dropped
//   - global flags at the start: (?i) icase, (?s) dotall, (?x) verbose (whitespace and
//     comments removed here), (?m) multiline, (?a) and (?u) accepted
// Python's own syntax errors (unbalanced parentheses, "nothing to repeat", bad escapes,
// bad ranges, flags not at the start, ...) make the pattern Invalid: the Python loader
// raises re.error on it. Valid Python that std::regex cannot express makes it Unsupported:
// lookbehind, scoped flags (?i:...), atomic groups, possessive quantifiers, conditionals,
// \N{...} and non-ASCII \u escapes, non-ASCII bytes inside a class, lookahead under a
// quantifier, repeat counts above 100, patterns over 2000 characters. Neither kind ever
// matches. Known differences that remain: \d \w \s \b follow ASCII (Python str patterns
// are Unicode-aware), and `.` or a class consumes one byte of non-ASCII text where Python
// consumes one code point; module names are ASCII, so neither shows in practice.
//
// A required literal (the longest run of literal characters every match must contain, when
// the pattern has no top-level alternation) and, for a pattern ending in literal + `$`, a
// required suffix are extracted at translation time and checked first: ".*lm_head$" never
// runs std::regex on a name without "lm_head" in it, ".*mlp.gate$" none on "...gate_proj".
#include <atomic>
#include <optional>
#include <regex>

#include "ckpt/quant.h"

namespace ckpt::quant {

struct PyRegexImpl {
  std::string pattern;
  PyRegex::Status status = PyRegex::Status::Ok;
  std::string problem;
  std::optional<std::regex> re;
  std::string required;  // literal every match contains ("" = none known)
  std::string suffix;    // literal every matched text ends with, before an optional "\n"
};

namespace {

std::atomic<size_t> g_compiled{0}, g_runs{0};

constexpr size_t kMaxPattern = 2000;
constexpr size_t kMaxText = 4096;   // std::regex recursion grows with the text
constexpr int kMaxRepeat = 100;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_oct(char c) { return c >= '0' && c <= '7'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_val(char c) { return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_word(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }

std::string hex_escape(unsigned v) {
  const char* d = "0123456789abcdef";
  return std::string("\\x") + d[(v >> 4) & 15] + d[v & 15];
}

class Translator {
 public:
  explicit Translator(std::string_view p) : p_(p) {}

  void run(PyRegexImpl& out) {
    parse_flags();
    while (ok() && i_ < p_.size()) step();
    if (ok() && !open_.empty()) invalid("missing ), unterminated subpattern", open_.back().pos);
    finish_run();
    out.status = st_;
    out.problem = problem_;
    if (!ok()) return;
    auto fl = std::regex::ECMAScript;
    if (icase_) fl |= std::regex::icase;
    if (multiline_) fl |= std::regex::multiline;
    try {
      g_compiled.fetch_add(1, std::memory_order_relaxed);
      out.re.emplace(out_, fl);
    } catch (const std::regex_error& e) {
      out.status = PyRegex::Status::Unsupported;
      out.problem = std::string("std::regex cannot express it (") + e.what() + ")";
      return;
    }
    if (!top_alt_ && !icase_) {
      out.required = best_;
      if (suffix_armed_) out.suffix = suffix_;
    }
  }

 private:
  struct Open {
    size_t pos;
    int group;       // capturing group number, 0 = none
    bool lookahead;
  };
  enum class Last { None, Atom, Anchor, Quant, Lookahead };

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
  PyRegex::Status st_ = PyRegex::Status::Ok;
  std::string problem_;
  bool icase_ = false, dotall_ = false, verbose_ = false, multiline_ = false;
  int groups_ = 0;
  std::vector<int> closed_;  // closed capturing groups
  std::vector<std::pair<std::string, int>> names_;
  std::vector<Open> open_;
  Last last_ = Last::None;
  bool last_top_literal_ = false;  // the last atom extended the current literal run
  bool top_alt_ = false;
  std::string run_, best_;
  // the literal run right before a final top-level `$` ("lm_head" in ".*lm_head$")
  bool suffix_armed_ = false;
  std::string suffix_;

  bool ok() const { return st_ == PyRegex::Status::Ok; }
  void invalid(std::string why, size_t at) {
    if (!ok()) return;
    st_ = PyRegex::Status::Invalid;
    problem_ = why + " at position " + std::to_string(at);
  }
  void unsupported(std::string why, size_t at) {
    if (!ok()) return;
    st_ = PyRegex::Status::Unsupported;
    problem_ = why + " at position " + std::to_string(at);
  }
  void finish_run() {
    if (run_.size() > best_.size()) best_ = run_;
    run_.clear();
  }
  // an atom that is not a plain literal character
  void atom(const std::string& s, Last kind = Last::Atom) {
    out_ += s;
    finish_run();
    last_ = kind;
    last_top_literal_ = false;
  }
  void literal(unsigned char c) {
    if (c >= 0x80) {  // one byte of a UTF-8 sequence: group the whole sequence
      size_t j = i_;
      std::string seq(1, static_cast<char>(c));
      while (j < p_.size() && (static_cast<unsigned char>(p_[j]) & 0xC0) == 0x80) seq += p_[j++];
      i_ = j;
      out_ += "(?:" + seq + ")";
      finish_run();  // (not added to the run: a quantifier may make it optional)
      last_top_literal_ = false;
      last_ = Last::Atom;
      return;
    }
    if (c < 0x20 || c == 0x7f) out_ += hex_escape(c);
    else if (std::string_view("^$\\.*+?()[]{}|").find(static_cast<char>(c)) != std::string_view::npos)
      out_ += std::string("\\") + static_cast<char>(c);
    else out_ += static_cast<char>(c);
    if (open_.empty()) {
      run_ += static_cast<char>(c);
      last_top_literal_ = true;
    } else {
      finish_run();
      last_top_literal_ = false;
    }
    last_ = Last::Atom;
  }
  void skip_verbose() {
    while (verbose_ && i_ < p_.size()) {
      if (is_space(p_[i_])) {
        ++i_;
      } else if (p_[i_] == '#') {
        while (i_ < p_.size() && p_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  // (?aimsux) groups before the first item
  void parse_flags() {
    for (;;) {
      skip_verbose();
      if (!(i_ + 2 < p_.size() && p_[i_] == '(' && p_[i_ + 1] == '?')) return;
      size_t j = i_ + 2;
      bool any = false;
      bool i = icase_, s = dotall_, x = verbose_, m = multiline_;
      while (j < p_.size() && std::string_view("aiLmsux").find(p_[j]) != std::string_view::npos) {
        switch (p_[j]) {
          case 'i': i = true; break;
          case 's': s = true; break;
          case 'x': x = true; break;
          case 'm': m = true; break;
          case 'L': invalid("bad inline flags: cannot use 'L' flag with a str pattern", j); return;
          default: break;  // a, u: ASCII / Unicode classes (see the header note)
        }
        any = true;
        ++j;
      }
      if (!any || j >= p_.size() || p_[j] != ')') return;  // scoped flags or another group
      icase_ = i;
      dotall_ = s;
      verbose_ = x;
      multiline_ = m;
      i_ = j + 1;
    }
  }

  void step() {
    skip_verbose();
    if (i_ >= p_.size()) return;
    suffix_armed_ = false;  // something follows the `$`
    const size_t at = i_;
    const char c = p_[i_++];
    switch (c) {
      case '\\': escape(at); return;
      case '[': char_class(at); return;
      case '(': group(at); return;
      case ')': {
        if (open_.empty()) return invalid("unbalanced parenthesis", at);
        Open o = open_.back();
        open_.pop_back();
        if (o.group) closed_.push_back(o.group);
        atom(")", o.lookahead ? Last::Lookahead : Last::Atom);
        return;
      }
      case '|':
        if (open_.empty()) top_alt_ = true;
        out_ += '|';
        finish_run();
        last_ = Last::None;
        last_top_literal_ = false;
        return;
      case '.': atom(dotall_ ? "[\\s\\S]" : "[^\\n]"); return;
      case '^': atom("^", Last::Anchor); return;
      case '$': {
        std::string before = open_.empty() && last_top_literal_ ? run_ : std::string();
        atom(multiline_ ? "(?=\\n|(?![\\s\\S]))" : "(?=\\n?(?![\\s\\S]))", Last::Anchor);
        if (!multiline_ && !before.empty()) {
          suffix_armed_ = true;
          suffix_ = std::move(before);
        }
        return;
      }
      case '*': quantifier(at, 0, -1, 1); return;
      case '+': quantifier(at, 1, -1, 1); return;
      case '?': quantifier(at, 0, 1, 1); return;
      case '{': {
        // a valid repeat is {m}, {m,}, {,n}, {m,n}, {,}; anything else is a literal "{"
        size_t j = i_;
        std::string a, b;
        while (j < p_.size() && is_digit(p_[j])) a += p_[j++];
        bool comma = j < p_.size() && p_[j] == ',';
        if (comma) {
          ++j;
          while (j < p_.size() && is_digit(p_[j])) b += p_[j++];
        }
        if (j < p_.size() && p_[j] == '}' && (comma || !a.empty())) {
          auto num = [](const std::string& s) { return s.size() > 6 ? 1000000 : std::stoi(s); };
          int lo = a.empty() ? 0 : num(a);
          int hi = comma ? (b.empty() ? -1 : num(b)) : lo;
          if (hi >= 0 && lo > hi) return invalid("min repeat greater than max repeat", at + 1);
          quantifier(at, lo, hi, j + 1 - at);
          return;
        }
        literal('{');
        return;
      }
      default: literal(static_cast<unsigned char>(c)); return;
    }
  }

  // `len` characters of quantifier start at `at` (i_ may still point into them)
  void quantifier(size_t at, int lo, int hi, size_t len) {
    i_ = at + len;
    if (last_ == Last::None || last_ == Last::Anchor) return invalid("nothing to repeat", at);
    if (last_ == Last::Quant) return invalid("multiple repeat", at);
    if (last_ == Last::Lookahead) return unsupported("a quantified lookahead", at);
    if (lo > kMaxRepeat || hi > kMaxRepeat) return unsupported("a repeat count above 100", at);
    std::string q;
    if (lo == 0 && hi == -1) q = "*";
    else if (lo == 1 && hi == -1) q = "+";
    else if (lo == 0 && hi == 1) q = "?";
    else q = "{" + std::to_string(lo) + (hi == lo ? "" : "," + (hi < 0 ? std::string() : std::to_string(hi))) + "}";
    if (i_ < p_.size() && p_[i_] == '?') {
      q += '?';
      ++i_;
    } else if (i_ < p_.size() && p_[i_] == '+') {
      return unsupported("a possessive quantifier", i_);
    }
    if (last_top_literal_) {
      // the repeated character belongs to the run only if it must occur at least once
      if (lo == 0 && !run_.empty()) run_.pop_back();
      finish_run();
    }
    out_ += q;
    last_ = Last::Quant;
    last_top_literal_ = false;
  }

  void group(size_t at) {
    if (i_ < p_.size() && p_[i_] == '?') {
      ++i_;
      if (i_ >= p_.size()) return invalid("unexpected end of pattern", i_);
      char k = p_[i_];
      if (k == ':') {
        ++i_;
        return open("(?:", at, 0, false);
      }
      if (k == '=' || k == '!') {
        ++i_;
        return open(std::string("(?") + k, at, 0, true);
      }
      if (k == '#') {
        while (i_ < p_.size() && p_[i_] != ')') ++i_;
        if (i_ >= p_.size()) return invalid("missing ), unterminated comment", at);
        ++i_;
        return;
      }
      if (k == 'P') {
        ++i_;
        if (i_ < p_.size() && p_[i_] == '<') {
          ++i_;
          std::string name = read_name('>', at);
          if (!ok()) return;
          for (const auto& [n, g] : names_)
            if (n == name) return invalid("redefinition of group name '" + name + "'", at);
          names_.emplace_back(name, groups_ + 1);
          return open("(", at, ++groups_, false);
        }
        if (i_ < p_.size() && p_[i_] == '=') {
          ++i_;
          std::string name = read_name(')', at);
          if (!ok()) return;
          for (const auto& [n, g] : names_)
            if (n == name) return backref(g, at);
          return invalid("unknown group name '" + name + "'", at);
        }
        return invalid("unknown extension ?P", at);
      }
      if (k == '<') {
        if (i_ + 1 < p_.size() && (p_[i_ + 1] == '=' || p_[i_ + 1] == '!')) return unsupported("lookbehind", at);
        return invalid("unknown extension ?<", at);
      }
      if (k == '>') return unsupported("an atomic group", at);
      if (k == '(') return unsupported("a conditional group", at);
      if (std::string_view("aiLmsux-").find(k) != std::string_view::npos) {
        size_t j = i_;
        while (j < p_.size() && std::string_view("aiLmsux-").find(p_[j]) != std::string_view::npos) ++j;
        if (j < p_.size() && p_[j] == ':') return unsupported("scoped inline flags (?flags:...)", at);
        return invalid("global flags not at the start of the expression", at);
      }
      return invalid(std::string("unknown extension ?") + k, at);
    }
    open("(", at, ++groups_, false);
  }
  void open(const std::string& s, size_t at, int group, bool lookahead) {
    out_ += s;
    finish_run();
    open_.push_back({at, group, lookahead});
    last_ = Last::None;
    last_top_literal_ = false;
  }
  std::string read_name(char end, size_t at) {
    std::string name;
    while (i_ < p_.size() && p_[i_] != end) name += p_[i_++];
    if (i_ >= p_.size()) {
      invalid("missing " + std::string(1, end) + ", unterminated name", at);
      return name;
    }
    ++i_;
    bool ident = !name.empty() && !is_digit(name[0]);
    for (char ch : name) ident = ident && (is_word(ch) || static_cast<unsigned char>(ch) >= 0x80);
    if (!ident) invalid("bad character in group name '" + name + "'", at);
    return name;
  }
  void backref(int g, size_t at) {
    bool closed = false;
    for (int c : closed_) closed = closed || c == g;
    if (g > groups_ || g <= 0) return invalid("invalid group reference " + std::to_string(g), at + 1);
    if (!closed) return invalid("cannot refer to an open group", at);
    atom("(?:\\" + std::to_string(g) + ")");
  }

  // \x \u \U \N and octal escapes give one character (nullopt after an error)
  std::optional<unsigned> char_escape(char e, size_t at) {
    switch (e) {
      case 'a': return 7;
      case 'f': return 12;
      case 'n': return 10;
      case 'r': return 13;
      case 't': return 9;
      case 'v': return 11;
      case 'x': case 'u': case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        unsigned v = 0;
        for (size_t k = 0; k < n; ++k) {
          if (i_ >= p_.size() || !is_hex(p_[i_])) {
            invalid(std::string("incomplete escape \\") + e, at);
            return std::nullopt;
          }
          v = v * 16 + static_cast<unsigned>(hex_val(p_[i_++]));
        }
        if (v >= 0x80) {
          unsupported("a non-ASCII \\" + std::string(1, e) + " escape", at);
          return std::nullopt;
        }
        return v;
      }
      case 'N':
        unsupported("a \\N{...} named character", at);
        return std::nullopt;
      default: break;
    }
    return std::nullopt;
  }

  void escape(size_t at) {
    if (i_ >= p_.size()) return invalid("bad escape (end of pattern)", at);
    const char e = p_[i_++];
    switch (e) {
      case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        return atom(std::string("\\") + e);
      case 'b': case 'B': return atom(std::string("\\") + e, Last::Anchor);
      case 'A':
        if (multiline_) return unsupported("\\A with (?m)", at);
        return atom("^", Last::Anchor);
      case 'Z': return atom("(?![\\s\\S])", Last::Anchor);
      case '0': {
        unsigned v = 0;
        for (int k = 0; k < 2 && i_ < p_.size() && is_oct(p_[i_]); ++k) v = v * 8 + static_cast<unsigned>(p_[i_++] - '0');
        return literal(static_cast<unsigned char>(v));
      }
      default: break;
    }
    if (e >= '1' && e <= '9') {
      if (i_ < p_.size() && is_digit(p_[i_])) {
        if (is_oct(e) && is_oct(p_[i_]) && i_ + 1 < p_.size() && is_oct(p_[i_ + 1])) {
          unsigned v = static_cast<unsigned>((e - '0') * 64 + (p_[i_] - '0') * 8 + (p_[i_ + 1] - '0'));
          i_ += 2;
          if (v > 0377) return invalid("octal escape value outside of range 0-0o377", at);
          if (v >= 0x80) return unsupported("a non-ASCII octal escape", at);
          return literal(static_cast<unsigned char>(v));
        }
        int g = (e - '0') * 10 + (p_[i_++] - '0');
        return backref(g, at);
      }
      return backref(e - '0', at);
    }
    if (auto v = char_escape(e, at)) return literal(static_cast<unsigned char>(*v));
    if (!ok()) return;
    if (is_alpha(e)) return invalid(std::string("bad escape \\") + e, at);
    literal(static_cast<unsigned char>(e));  // an escaped punctuation character is itself
  }

  void char_class(size_t at) {
    std::string cls = "[";
    if (i_ < p_.size() && p_[i_] == '^') {
      cls += '^';
      ++i_;
    }
    bool first = true;
    // previous single character (for range checks); -1 = none / a class escape
    int prev = -1;
    bool range_pending = false;
    auto emit_char = [&](unsigned v) {
      if (v < 0x20 || v == 0x7f) cls += hex_escape(v);
      else if (std::string_view("]\\^-[").find(static_cast<char>(v)) != std::string_view::npos)
        cls += std::string("\\") + static_cast<char>(v);
      else cls += static_cast<char>(v);
    };
    for (;;) {
      if (i_ >= p_.size()) return invalid("unterminated character set", at);
      const size_t here = i_;
      char c = p_[i_++];
      if (c == ']' && !first) break;
      first = false;
      int single = -1;      // the character this item denotes, if one
      std::string text;     // or a class escape such as \d
      if (static_cast<unsigned char>(c) >= 0x80) return unsupported("a non-ASCII character in a class", here);
      if (c == '\\') {
        if (i_ >= p_.size()) return invalid("bad escape (end of pattern)", here);
        char e = p_[i_++];
        if (std::string_view("dDwWsS").find(e) != std::string_view::npos) {
          text = std::string("\\") + e;
        } else if (e == 'b') {
          single = 8;
        } else if (is_oct(e)) {
          unsigned v = static_cast<unsigned>(e - '0');
          for (int k = 0; k < 2 && i_ < p_.size() && is_oct(p_[i_]); ++k) v = v * 8 + static_cast<unsigned>(p_[i_++] - '0');
          if (v > 0377) return invalid("octal escape value outside of range 0-0o377", here);
          if (v >= 0x80) return unsupported("a non-ASCII octal escape", here);
          single = static_cast<int>(v);
        } else if (auto v = char_escape(e, here)) {
          single = static_cast<int>(*v);
        } else {
          if (!ok()) return;
          if (is_alpha(e) || is_digit(e)) return invalid(std::string("bad escape \\") + e, here);
          single = static_cast<unsigned char>(e);
        }
      } else if (c == '-' && prev >= 0 && !range_pending && i_ < p_.size() && p_[i_] != ']') {
        range_pending = true;
        continue;
      } else {
        single = static_cast<unsigned char>(c);
      }
      if (range_pending) {
        if (single < 0) return invalid("bad character range", here);
        if (single < prev) return invalid("bad character range", here);
        cls += '-';
        emit_char(static_cast<unsigned>(single));
        range_pending = false;
        prev = -1;
        continue;
      }
      if (single >= 0) {
        emit_char(static_cast<unsigned>(single));
        prev = single;
      } else {
        if (i_ < p_.size() && p_[i_] == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']')
          return invalid("bad character range", here);
        cls += text;
        prev = -1;
      }
    }
    atom(cls + "]");
  }
};

}  // namespace

PyRegex::PyRegex(std::string_view pattern) {
  auto impl = std::make_shared<PyRegexImpl>();
  impl->pattern = std::string(pattern);
  if (pattern.size() > kMaxPattern) {
    impl->status = Status::Unsupported;
    impl->problem = "longer than 2000 characters";
  } else {
    Translator(pattern).run(*impl);
  }
  impl_ = std::move(impl);
}

const std::string& PyRegex::pattern() const {
  static const std::string empty;
  return impl_ ? impl_->pattern : empty;
}
PyRegex::Status PyRegex::status() const { return impl_ ? impl_->status : Status::Unsupported; }
const std::string& PyRegex::problem() const {
  static const std::string none = "no pattern";
  return impl_ ? impl_->problem : none;
}
const std::string& PyRegex::required_literal() const {
  static const std::string empty;
  return impl_ ? impl_->required : empty;
}

const std::string& PyRegex::required_suffix() const {
  static const std::string empty;
  return impl_ ? impl_->suffix : empty;
}

bool PyRegex::run(std::string_view text, bool anchored) const {
  if (!impl_ || !impl_->re || text.size() > kMaxText) return false;
  if (!impl_->required.empty() && text.find(impl_->required) == std::string_view::npos) return false;
  if (const std::string& sfx = impl_->suffix; !sfx.empty()) {
    // the pattern ends in sfx + `$`, which matches at the end or before a final newline
    auto ends = [](std::string_view t, std::string_view x) {
      return t.size() >= x.size() && t.substr(t.size() - x.size()) == x;
    };
    if (!ends(text, sfx) && !(ends(text, "\n") && ends(text.substr(0, text.size() - 1), sfx))) return false;
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  try {
    return std::regex_search(text.begin(), text.end(), *impl_->re,
                             anchored ? std::regex_constants::match_continuous
                                      : std::regex_constants::match_default);
  } catch (const std::regex_error&) {  // error_complexity / error_stack: no match
    return false;
  }
}

bool PyRegex::match(std::string_view text) const { return run(text, true); }
size_t PyRegex::compilations() { return g_compiled.load(std::memory_order_relaxed); }
size_t PyRegex::executions() { return g_runs.load(std::memory_order_relaxed); }
bool PyRegex::search(std::string_view text) const { return run(text, false); }

}  // namespace ckpt::quant
