// tokenizer.json's two big sections, model.vocab and model.merges (nearly all of a 150k-token
// file), read straight from the file's bytes instead of through a simdjson DOM: a DOM of the
// whole file touches about three times the file's size in fresh memory (structural indexes,
// tape, string copies), and in a fresh `ckpt verify` process every fresh page is a page fault.
//
// The TK reader uses them this way: skim_sections() walks the file's top levels and hands the
// two sections, where it finds them, to the strict scanners below, which read them in one pass
// (the vocabulary into the token table, the merges into their checker) and accept a plain
// subset of JSON (string keys -> non-negative integer ids; merges as strings or pairs of
// strings), giving up on anything else. The rest of the file, each section replaced by a
// sentinel number, is then parsed by the DOM as before (a few KB). Giving up, or any doubt
// about where the sections are, sends the whole file through the DOM reader, so what is
// reported never depends on this path.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <cstring>
#include <string_view>
#include <vector>

#include "io/json_scan.h"
#include "io/string_arena.h"

namespace ckpt::tok {

// Numbers standing in for the sections in the DOM-parsed remainder (valid int64s no writer
// uses as a vocabulary or merge list; where they are found is checked as well).
inline constexpr int64_t kVocabSentinel = -8000000000000000001;
inline constexpr int64_t kMergesSentinel = -8000000000000000002;

struct SectionRanges {
  // [begin, end) byte ranges in the file; end == 0 when the section was not found.
  size_t vocab_begin = 0, vocab_end = 0;  // the "{...}" of the root's "model" member's "vocab"
  size_t merges_begin = 0, merges_end = 0;  // the "[...]" of its "merges"
};

// Storage for unescaped strings; views into it stay valid for the arena's lifetime.
using StringArena = io::StringArena;

namespace detail {
struct Cursor;
}

// What reads the sections when the skim reaches them: each reads one value at the cursor
// (scan_vocab / scan_merges) and leaves the cursor after it; false gives up.
class SectionReader {
 public:
  virtual bool vocab(detail::Cursor& c) = 0;
  virtual bool merges(detail::Cursor& c) = 0;

 protected:
  ~SectionReader() = default;
};

// Walks a document assumed valid (the caller validates the rest with the DOM; the scanners
// validate the sections) and hands the root's "model" member's "vocab" object and "merges"
// array to `reader`. nullopt when the document is not of the plain shape: root not an object,
// "model" (or its "vocab" / "merges") written twice, an escaped key at those levels, bytes the
// skim does not expect, or a reader that gave up.
std::optional<SectionRanges> skim_sections(std::string_view text, StringArena& arena, SectionReader& reader);

// The vocab object's entries, in file order: on_entry(key, id). False (at any point, after
// some entries were given) when the object is not one of string keys and non-negative integer
// ids below 10^18, or is not valid JSON.
template <class F>
bool scan_vocab(detail::Cursor& c, F&& on_entry);

// The merges array's elements, in order: on_string(i, s) for "left right" strings, on_pair(i,
// a, b) for [a, b] pairs of non-empty strings. False when an element is anything else or the
// array is not valid JSON.
template <class S, class P>
bool scan_merges(detail::Cursor& c, S&& on_string, P&& on_pair);

// For tests: read every tokenizer.json with the DOM alone (the reference the fast path is
// compared with), and whether the calling thread's last check_tokenizer read the sections.
void set_dom_reader_only(bool on);
// For tests: merges sections of at least this many bytes are checked on a second thread while
// they are read (default 256 KiB; 0: always, SIZE_MAX: never).
void set_merge_pipeline_min_bytes(size_t bytes);
bool last_read_used_sections();

// ---- implementation -----------------------------------------------------------------------

namespace detail {

// A strict cursor over [p, end): JSON whitespace, strings, small non-negative integers.
struct Cursor {
  const char* p;
  const char* end;
  StringArena& arena;

  // Pretty-printed files put a newline and an indent of spaces before every vocabulary entry
  // and merge: runs of spaces are skipped eight bytes at a time.
  void ws() {
    // Most calls stand on a token already (a quote, ':', ',', a digit): JSON whitespace and the
    // control bytes the loop below also stops at are the bytes at or below ' '.
    if (p < end && static_cast<unsigned char>(*p) > ' ') return;
    static_assert(std::endian::native == std::endian::little, "the lowest differing byte is the first");
    constexpr uint64_t spaces = 0x2020202020202020ull;
    for (;;) {
      if (end - p >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        const uint64_t x = w ^ spaces;  // a byte of x is zero exactly where w has a space
        if (x == 0) {
          p += 8;
          continue;
        }
        p += __builtin_ctzll(x) / 8;  // the first byte that is not a space
      } else {
        while (p < end && *p == ' ') ++p;
        if (p == end) return;
      }
      if (static_cast<unsigned char>(*p) > ' ' || (*p != '\n' && *p != '\r' && *p != '\t')) return;
      ++p;
    }
  }
  bool eat(char c) {
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  // At '"': the string's value (a view into the file, or an unescaped copy in the arena).
  bool string(std::string_view& out) {
    if (!eat('"')) return false;
    const char* start = p;
    // To the first quote, backslash or control byte, sixteen bytes at a time where SSE2 is
    // available (the safetensors header and index scanners' search).
    p = io::find_string_stop(p, end);
    return finish_string(start, out);
  }
  // From the cursor (at or before the string's first quote, backslash or control byte) to the
  // end of the string that began at `start`.
  bool finish_string(const char* start, std::string_view& out) {
    while (p < end) {
      unsigned char c = static_cast<unsigned char>(*p);
      if (c == '"') {
        out = std::string_view(start, size_t(p - start));
        ++p;
        return true;
      }
      if (c == '\\') return escaped(start, out);
      if (c < 0x20) return false;  // control characters must be escaped
      ++p;
    }
    return false;
  }
  bool escaped(const char* start, std::string_view& out);
  // A non-negative integer of at most 18 digits (no sign, fraction or exponent).
  bool small_uint(int64_t& out) {
    const char* s = p;
    uint64_t v = 0;  // wraps past 19 digits, but more than 18 are refused below
    if (end - p >= 8) {  // ids of up to 8 digits (every vocabulary's) in one step
      const io::LeadingDigits first = io::leading_digits8(p);
      v = first.value;
      p += first.count;
      if (first.count == 8)
        while (p < end && static_cast<unsigned char>(*p - '0') <= 9) v = v * 10 + uint64_t(*p++ - '0');
    } else {
      while (p < end && static_cast<unsigned char>(*p - '0') <= 9) v = v * 10 + uint64_t(*p++ - '0');
    }
    size_t n = size_t(p - s);
    if (n == 0 || n > 18 || (n > 1 && *s == '0')) return false;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return false;
    out = static_cast<int64_t>(v);
    return true;
  }
};

}  // namespace detail

template <class F>
bool scan_vocab(detail::Cursor& c, F&& on_entry) {
  if (!c.eat('{')) return false;
  c.ws();
  if (c.eat('}')) return true;
  for (;;) {
    std::string_view key;
    int64_t id;
    c.ws();
    if (!c.string(key)) return false;
    c.ws();
    if (!c.eat(':')) return false;
    c.ws();
    if (!c.small_uint(id)) return false;
    on_entry(key, id);
    c.ws();
    if (c.eat(',')) continue;
    return c.eat('}');
  }
}

template <class S, class P>
bool scan_merges(detail::Cursor& c, S&& on_string, P&& on_pair) {
  if (!c.eat('[')) return false;
  c.ws();
  if (c.eat(']')) return true;
  for (size_t i = 0;; ++i) {
    c.ws();
    if (c.p < c.end && *c.p == '"') {
      std::string_view s;
      if (!c.string(s)) return false;
      on_string(i, s);
    } else {
      std::string_view a, b;
      if (!c.eat('[')) return false;
      c.ws();
      if (!c.string(a)) return false;
      c.ws();
      if (!c.eat(',')) return false;
      c.ws();
      if (!c.string(b)) return false;
      c.ws();
      if (!c.eat(']') || a.empty() || b.empty()) return false;  // other shapes: the DOM reader words them
      on_pair(i, a, b);
    }
    c.ws();
    if (c.eat(',')) continue;
    return c.eat(']');
  }
}

}  // namespace ckpt::tok
