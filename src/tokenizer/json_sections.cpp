#include "tokenizer/json_sections.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace ckpt::tok {

namespace detail {

namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool hex4(const char* p, const char* end, uint32_t& out) {
  if (end - p < 4) return false;
  out = 0;
  for (int i = 0; i < 4; ++i) {
    int h = hex(p[i]);
    if (h < 0) return false;
    out = out << 4 | uint32_t(h);
  }
  return true;
}

}  // namespace

// The slow part of Cursor::string(): [start, p) held no escape and p is at a backslash.
bool Cursor::escaped(const char* start, std::string_view& out) {
  const char* close = p;  // the closing quote: escaped characters are skipped
  while (close < end && *close != '"') close += *close == '\\' ? 2 : 1;
  if (close >= end) return false;
  // Unescaping never lengthens a string (\uXXXX is 6 bytes for at most 3, a pair 12 for 4).
  char* first = arena.allocate(size_t(close - start));
  char* d = first;
  std::memcpy(d, start, size_t(p - start));
  d += p - start;
  while (p < close) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20) return false;
    if (c != '\\') {
      *d++ = char(c);
      ++p;
      continue;
    }
    if (close - p < 2) return false;
    char e = p[1];
    p += 2;
    switch (e) {
      case '"': *d++ = '"'; break;
      case '\\': *d++ = '\\'; break;
      case '/': *d++ = '/'; break;
      case 'b': *d++ = '\b'; break;
      case 'f': *d++ = '\f'; break;
      case 'n': *d++ = '\n'; break;
      case 'r': *d++ = '\r'; break;
      case 't': *d++ = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!hex4(p, close, cp)) return false;
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate: its low half must follow
          uint32_t lo;
          if (close - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, close, lo) || lo < 0xDC00 || lo > 0xDFFF)
            return false;
          p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return false;  // a lone low surrogate
        }
        if (cp < 0x80) {
          *d++ = char(cp);
        } else if (cp < 0x800) {
          *d++ = char(0xC0 | (cp >> 6));
          *d++ = char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          *d++ = char(0xE0 | (cp >> 12));
          *d++ = char(0x80 | ((cp >> 6) & 0x3F));
          *d++ = char(0x80 | (cp & 0x3F));
        } else {
          *d++ = char(0xF0 | (cp >> 18));
          *d++ = char(0x80 | ((cp >> 12) & 0x3F));
          *d++ = char(0x80 | ((cp >> 6) & 0x3F));
          *d++ = char(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: return false;
    }
  }
  p = close + 1;
  out = std::string_view(first, size_t(d - first));
  return true;
}

}  // namespace detail

namespace {

// Byte classes for skipping a container: most bytes of a vocabulary or merge list (letters,
// digits, spaces, colons) need no decision, and one table lookup per byte finds the rest.
enum : uint8_t { kPlain = 0, kQuote, kOpen, kClose, kComma };
constexpr auto kClass = [] {
  std::array<uint8_t, 256> t{};
  t['"'] = kQuote;
  t['{'] = t['['] = kOpen;
  t['}'] = t[']'] = kClose;
  t[','] = kComma;
  return t;
}();
constexpr auto kStringStop = [] {  // bytes that end a run inside a string
  std::array<bool, 256> t{};
  t['"'] = t['\\'] = true;
  return t;
}();

// A non-validating walk over a document assumed valid: strings are skipped escape-aware,
// containers by their bracket depth. Wherever the bytes are not what valid JSON would hold
// there, it gives up.
struct Skim {
  const char* p;
  const char* end;

  static bool space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  void ws() {
    while (p < end && space(*p)) ++p;
  }
  bool eat(char c) {
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  bool skip_string() {  // at '"'
    ++p;
    for (;;) {
      while (p < end && !kStringStop[static_cast<unsigned char>(*p)]) ++p;
      if (p >= end) return false;
      if (*p == '"') {
        ++p;
        return true;
      }
      p += 2;  // a backslash and the byte it escapes
    }
  }
  // A key without escapes (the plain spelling every writer uses at these levels).
  bool plain_key(std::string_view& key) {
    if (p >= end || *p != '"') return false;
    const char* start = ++p;
    while (p < end && *p != '"') {
      if (*p == '\\') return false;
      ++p;
    }
    if (p >= end) return false;
    key = std::string_view(start, size_t(p - start));
    ++p;
    return true;
  }
  // Skips one value; for a container, `count` gets its number of members or elements.
  bool value(size_t* count = nullptr) {
    ws();
    if (p >= end) return false;
    char open = *p;
    if (open == '"') return skip_string();
    if (open != '{' && open != '[') {
      const char* start = p;
      while (p < end && *p != ',' && *p != '}' && *p != ']' && !space(*p)) ++p;
      return p > start;
    }
    ++p;
    ws();
    if (p < end && (*p == '}' || *p == ']')) {
      ++p;
      if (count) *count = 0;
      return true;
    }
    size_t depth = 1, commas = 0;
    for (;;) {
      uint8_t k = kPlain;
      while (p < end && (k = kClass[static_cast<unsigned char>(*p)]) == kPlain) ++p;
      if (p >= end) return false;
      switch (k) {
        case kQuote:
          if (!skip_string()) return false;
          continue;
        case kOpen: ++depth; break;
        case kClose:
          if (--depth == 0) {
            ++p;
            if (count) *count = commas + 1;
            return true;
          }
          break;
        default: commas += depth == 1; break;
      }
      ++p;
    }
  }
};

}  // namespace

std::optional<SectionRanges> skim_sections(std::string_view text, StringArena& arena, SectionReader& reader) {
  Skim s{text.data(), text.data() + text.size()};
  SectionRanges r;
  auto at = [&] { return size_t(s.p - text.data()); };
  // Hands the value at the skim's position to a section reader and moves past what it read.
  auto section = [&](bool (SectionReader::*read)(detail::Cursor&), size_t& begin, size_t& end) {
    detail::Cursor c{s.p, s.end, arena};
    begin = at();
    if (!(reader.*read)(c)) return false;
    s.p = c.p;
    end = at();
    return true;
  };
  s.ws();
  if (!s.eat('{')) return std::nullopt;
  s.ws();
  if (s.eat('}')) return r;
  bool model_seen = false;
  for (;;) {
    std::string_view key;
    s.ws();
    if (!s.plain_key(key)) return std::nullopt;
    s.ws();
    if (!s.eat(':')) return std::nullopt;
    s.ws();
    if (key != "model" || s.p >= s.end || *s.p != '{') {
      if (key == "model" && model_seen) return std::nullopt;
      model_seen = model_seen || key == "model";
      if (!s.value()) return std::nullopt;
    } else {
      if (model_seen) return std::nullopt;
      model_seen = true;
      ++s.p;
      s.ws();
      bool vocab_seen = false, merges_seen = false;
      if (!s.eat('}')) {
        for (;;) {
          std::string_view mkey;
          s.ws();
          if (!s.plain_key(mkey)) return std::nullopt;
          s.ws();
          if (!s.eat(':')) return std::nullopt;
          s.ws();
          bool vocab = mkey == "vocab", merges = mkey == "merges";
          if ((vocab && vocab_seen) || (merges && merges_seen)) return std::nullopt;
          vocab_seen = vocab_seen || vocab;
          merges_seen = merges_seen || merges;
          if (vocab && s.p < s.end && *s.p == '{') {
            if (!section(&SectionReader::vocab, r.vocab_begin, r.vocab_end)) return std::nullopt;
          } else if (merges && s.p < s.end && *s.p == '[') {
            if (!section(&SectionReader::merges, r.merges_begin, r.merges_end)) return std::nullopt;
          } else if (!s.value()) {
            return std::nullopt;
          }
          s.ws();
          if (s.eat(',')) continue;
          if (s.eat('}')) break;
          return std::nullopt;
        }
      }
    }
    s.ws();
    if (s.eat(',')) continue;
    if (s.eat('}')) break;
    return std::nullopt;
  }
  return r;
}

}  // namespace ckpt::tok
