// tokenizer.json encoder: added tokens -> normalizer -> pre-tokenizers -> BPE -> post-processor,
// with the semantics of Hugging Face tokenizers (and transformers.js, which follows it).
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "ckpt/encode.h"
#include "ckpt/json.h"
#include "encode/common.h"

namespace ckpt::encode {
namespace {

using detail::Regex;
using json::Value;

constexpr size_t kMaxVocab = 4'000'000;
constexpr size_t kMaxMerges = 4'000'000;
constexpr size_t kMaxAdded = 1'000'000;
constexpr int kMaxNesting = 32;
constexpr size_t kMaxCacheEntries = 100'000;
constexpr size_t kMaxCachedWord = 256;

struct LoadError {
  std::string message;
};
[[noreturn]] void fail(std::string m) { throw LoadError{std::move(m)}; }

std::string type_of(const Value& v, const char* what) {
  if (!v.is_object()) fail(std::string(what) + " is not an object");
  auto t = v.get_string("type");
  if (!t) fail(std::string(what) + " has no \"type\"");
  return *t;
}

bool get_bool(const Value& v, std::string_view key, bool def) {
  const Value* x = v.find(key);
  if (!x || x->is_null()) return def;
  if (!x->is_bool()) fail("\"" + std::string(key) + "\" is not a boolean");
  return x->as_bool();
}

std::optional<std::string> get_opt_string(const Value& v, std::string_view key) {
  const Value* x = v.find(key);
  if (!x || x->is_null()) return std::nullopt;
  if (!x->is_string()) fail("\"" + std::string(key) + "\" is not a string");
  return x->as_string();
}

uint32_t as_id(const Value& v, const char* what) {
  if (!v.is_int() || v.as_int() < 0 || v.as_int() > 0xFFFFFFFELL) fail(std::string(what) + " is not a valid token id");
  return static_cast<uint32_t>(v.as_int());
}

// ---------------------------------------------------------------- patterns and splitting

// A Split/Replace pattern: {"String": s} or {"Regex": r}.
struct Pattern {
  std::string literal;
  std::unique_ptr<Regex> regex;
  bool find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out, std::string& error) const {
    if (regex) return regex->find_all(text, out, error);
    if (literal.empty()) return true;
    size_t pos = 0;
    while ((pos = text.find(literal, pos)) != std::string_view::npos) {
      out.emplace_back(pos, pos + literal.size());
      pos += literal.size();
    }
    return true;
  }
};

Pattern read_pattern(const Value& v) {
  if (!v.is_object()) fail("pattern is not an object");
  Pattern p;
  if (auto s = get_opt_string(v, "String")) {
    p.literal = *s;
  } else if (auto r = get_opt_string(v, "Regex")) {
    std::string err;
    p.regex = Regex::compile(*r, err);
    if (!p.regex) fail(err);
  } else {
    fail("pattern has neither \"String\" nor \"Regex\"");
  }
  return p;
}

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior read_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  fail("unknown split behavior '" + s + "'");
}

using Span = std::pair<size_t, size_t>;

// Splits `text` by the matches as tokenizers' NormalizedString::split does.
void split_by_matches(std::string_view text, const std::vector<Span>& matches, Behavior behavior, bool invert,
                      std::vector<std::string>& out) {
  std::vector<std::pair<Span, bool>> parts;
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) parts.push_back({{prev, b}, false});
    parts.push_back({{b, e}, true});
    prev = e;
  }
  if (prev != text.size()) parts.push_back({{prev, text.size()}, false});
  if (invert)
    for (auto& p : parts) p.second = !p.second;
  std::vector<Span> pieces;
  switch (behavior) {
    case Behavior::Isolated:
      for (auto& p : parts) pieces.push_back(p.first);
      break;
    case Behavior::Removed:
      for (auto& p : parts)
        if (!p.second) pieces.push_back(p.first);
      break;
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (auto& p : parts) {
        if (p.second && !prev_match && !pieces.empty())
          pieces.back().second = p.first.second;
        else
          pieces.push_back(p.first);
        prev_match = p.second;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->second && !prev_match && !pieces.empty())
          pieces.back().first = it->first.first;
        else
          pieces.push_back(it->first);
        prev_match = it->second;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev_match = false;
      bool first = true;
      for (auto& p : parts) {
        if (!first && p.second == prev_match)
          pieces.back().second = p.first.second;
        else
          pieces.push_back(p.first);
        prev_match = p.second;
        first = false;
      }
      break;
    }
  }
  for (auto [b, e] : pieces)
    if (e > b) out.emplace_back(text.substr(b, e - b));
}

// Matches of single characters satisfying pred (a char pattern).
template <class Pred>
std::vector<Span> char_matches(std::string_view text, Pred pred) {
  std::vector<Span> m;
  size_t i = 0;
  while (i < text.size()) {
    size_t b = i;
    uint32_t cp = detail::decode_utf8(text, i);
    if (pred(cp)) m.emplace_back(b, i);
  }
  return m;
}

// ---------------------------------------------------------------- normalizers

struct Normalizer {
  enum Kind { NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip } kind;
  std::string text;  // Prepend: prefix; Replace: content
  Pattern pattern;
  bool left = false, right = false;
};

void read_normalizer(const Value& v, std::vector<Normalizer>& out, int depth) {
  if (v.is_null()) return;
  if (depth > kMaxNesting) fail("normalizer nesting too deep");
  std::string t = type_of(v, "normalizer");
  Normalizer n{};
  if (t == "Sequence") {
    const Value* list = v.find("normalizers");
    if (!list || !list->is_array()) fail("Sequence normalizer has no \"normalizers\" list");
    for (const auto& x : list->as_array()) read_normalizer(x, out, depth + 1);
    return;
  }
  if (t == "NFC") n.kind = Normalizer::NFC;
  else if (t == "NFD") n.kind = Normalizer::NFD;
  else if (t == "NFKC") n.kind = Normalizer::NFKC;
  else if (t == "NFKD") n.kind = Normalizer::NFKD;
  else if (t == "Lowercase") n.kind = Normalizer::Lowercase;
  else if (t == "Prepend") {
    n.kind = Normalizer::Prepend;
    auto p = get_opt_string(v, "prepend");
    if (!p) fail("Prepend normalizer has no \"prepend\"");
    n.text = *p;
  } else if (t == "Replace") {
    n.kind = Normalizer::Replace;
    const Value* p = v.find("pattern");
    if (!p) fail("Replace normalizer has no \"pattern\"");
    n.pattern = read_pattern(*p);
    auto c = get_opt_string(v, "content");
    if (!c) fail("Replace normalizer has no \"content\"");
    n.text = *c;
  } else if (t == "Strip") {
    n.kind = Normalizer::Strip;
    n.left = get_bool(v, "strip_left", true);
    n.right = get_bool(v, "strip_right", true);
  } else {
    fail("normalizer " + t + " is not supported for encoding");
  }
  out.push_back(std::move(n));
}

bool apply_normalizers(const std::vector<Normalizer>& ns, std::string& s, std::string& error) {
  for (const auto& n : ns) {
    std::string out;
    switch (n.kind) {
      case Normalizer::NFC:
      case Normalizer::NFD:
      case Normalizer::NFKC:
      case Normalizer::NFKD: {
        auto form = n.kind == Normalizer::NFC    ? detail::Form::NFC
                    : n.kind == Normalizer::NFD  ? detail::Form::NFD
                    : n.kind == Normalizer::NFKC ? detail::Form::NFKC
                                                 : detail::Form::NFKD;
        if (!detail::unicode_normalize(s, form, out)) {
          error = "unicode normalisation failed";
          return false;
        }
        s = std::move(out);
        break;
      }
      case Normalizer::Lowercase: s = detail::lowercase(s); break;
      case Normalizer::Prepend:
        if (!s.empty()) s = n.text + s;
        break;
      case Normalizer::Replace: {
        std::vector<Span> m;
        if (!n.pattern.find_all(s, m, error)) return false;
        size_t prev = 0;
        for (auto [b, e] : m) {
          if (e == b) continue;
          out.append(s, prev, b - prev);
          out += n.text;
          prev = e;
        }
        out.append(s, prev, std::string::npos);
        s = std::move(out);
        break;
      }
      case Normalizer::Strip: {
        std::string_view v = s;
        if (n.left) v = detail::trim_start(v);
        if (n.right) v = detail::trim_end(v);
        s = std::string(v);
        break;
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------- pre-tokenizers

const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct PreTok {
  enum Kind { ByteLevel, Split, Digits, Metaspace, Whitespace, WhitespaceSplit } kind;
  bool add_prefix_space = false;
  std::shared_ptr<Pattern> pattern;  // ByteLevel (use_regex), Split, Whitespace
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  bool individual_digits = false;
  std::string replacement;  // Metaspace
  enum Scheme { Always, First, Never } scheme = Always;
  bool split = true;
};

void read_pretok(const Value& v, std::vector<PreTok>& out, int depth, bool& byte_level) {
  if (v.is_null()) return;
  if (depth > kMaxNesting) fail("pre_tokenizer nesting too deep");
  std::string t = type_of(v, "pre_tokenizer");
  PreTok p{};
  if (t == "Sequence") {
    const Value* list = v.find("pretokenizers");
    if (!list || !list->is_array()) fail("Sequence pre_tokenizer has no \"pretokenizers\" list");
    for (const auto& x : list->as_array()) read_pretok(x, out, depth + 1, byte_level);
    return;
  }
  std::string err;
  if (t == "ByteLevel") {
    p.kind = PreTok::ByteLevel;
    byte_level = true;
    p.add_prefix_space = get_bool(v, "add_prefix_space", true);
    if (get_bool(v, "use_regex", true)) {
      p.pattern = std::make_shared<Pattern>();
      p.pattern->regex = Regex::compile(kGpt2Pattern, err);
      if (!p.pattern->regex) fail(err);
    }
  } else if (t == "Split") {
    p.kind = PreTok::Split;
    const Value* pat = v.find("pattern");
    if (!pat) fail("Split pre_tokenizer has no \"pattern\"");
    p.pattern = std::make_shared<Pattern>(read_pattern(*pat));
    auto b = get_opt_string(v, "behavior");
    if (!b) fail("Split pre_tokenizer has no \"behavior\"");
    p.behavior = read_behavior(*b);
    p.invert = get_bool(v, "invert", false);
  } else if (t == "Digits") {
    p.kind = PreTok::Digits;
    p.individual_digits = get_bool(v, "individual_digits", false);
  } else if (t == "Metaspace") {
    p.kind = PreTok::Metaspace;
    auto r = get_opt_string(v, "replacement");
    p.replacement = r ? *r : "\xE2\x96\x81";
    if (p.replacement.empty() || detail::utf8_len(p.replacement, 0) != p.replacement.size())
      fail("Metaspace replacement must be one character");
    p.split = get_bool(v, "split", true);
    if (auto s = get_opt_string(v, "prepend_scheme")) {
      if (*s == "always") p.scheme = PreTok::Always;
      else if (*s == "first") p.scheme = PreTok::First;
      else if (*s == "never") p.scheme = PreTok::Never;
      else fail("unknown Metaspace prepend_scheme '" + *s + "'");
    } else {
      p.scheme = get_bool(v, "add_prefix_space", true) ? PreTok::Always : PreTok::Never;
    }
  } else if (t == "Whitespace") {
    p.kind = PreTok::Whitespace;
    p.pattern = std::make_shared<Pattern>();
    p.pattern->regex = Regex::compile("\\w+|[^\\w\\s]+", err);
    if (!p.pattern->regex) fail(err);
  } else if (t == "WhitespaceSplit") {
    p.kind = PreTok::WhitespaceSplit;
  } else {
    fail("pre_tokenizer " + t + " is not supported for encoding");
  }
  out.push_back(std::move(p));
}

struct ByteAlphabet {
  std::string map[256];
  ByteAlphabet() {
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      bool direct = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      uint32_t cp = direct ? static_cast<uint32_t>(b) : 256 + n++;
      detail::append_utf8(map[b], cp);
    }
  }
};
const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

bool apply_pretoks(const std::vector<PreTok>& ps, std::string section, bool first_section,
                   std::vector<std::string>& pieces, std::string& error) {
  pieces.clear();
  pieces.push_back(std::move(section));
  for (const auto& p : ps) {
    std::vector<std::string> next;
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string& s = pieces[k];
      std::vector<Span> m;
      switch (p.kind) {
        case PreTok::ByteLevel: {
          if (p.add_prefix_space && (s.empty() || s[0] != ' ')) s.insert(s.begin(), ' ');
          std::vector<std::string> parts;
          if (p.pattern) {
            if (!p.pattern->find_all(s, m, error)) return false;
            split_by_matches(s, m, Behavior::Isolated, false, parts);
          } else if (!s.empty()) {
            parts.push_back(s);
          }
          const auto& a = byte_alphabet();
          for (auto& part : parts) {
            std::string mapped;
            mapped.reserve(part.size() * 2);
            for (unsigned char c : part) mapped += a.map[c];
            next.push_back(std::move(mapped));
          }
          break;
        }
        case PreTok::Split:
        case PreTok::Whitespace:
          if (!p.pattern->find_all(s, m, error)) return false;
          if (p.kind == PreTok::Split)
            split_by_matches(s, m, p.behavior, p.invert, next);
          else
            split_by_matches(s, m, Behavior::Removed, true, next);
          break;
        case PreTok::WhitespaceSplit:
          split_by_matches(s, char_matches(s, detail::is_unicode_space), Behavior::Removed, false, next);
          break;
        case PreTok::Digits:
          split_by_matches(s, char_matches(s, detail::is_numeric),
                           p.individual_digits ? Behavior::Isolated : Behavior::Contiguous, false, next);
          break;
        case PreTok::Metaspace: {
          std::string r;
          for (char c : s) {
            if (c == ' ') r += p.replacement;
            else r += c;
          }
          bool starts = r.compare(0, p.replacement.size(), p.replacement) == 0;
          if (!starts && (p.scheme == PreTok::Always || (p.scheme == PreTok::First && first_section && k == 0)))
            r = p.replacement + r;
          if (p.split) {
            std::string_view rv = r;
            std::vector<Span> mm;
            size_t pos = 0;
            while ((pos = rv.find(p.replacement, pos)) != std::string_view::npos) {
              mm.emplace_back(pos, pos + p.replacement.size());
              pos += p.replacement.size();
            }
            split_by_matches(rv, mm, Behavior::MergedWithNext, false, next);
          } else if (!r.empty()) {
            next.push_back(std::move(r));
          }
          break;
        }
      }
    }
    pieces = std::move(next);
  }
  return true;
}

// ---------------------------------------------------------------- BPE model

struct Bpe {
  std::unordered_map<std::string, uint32_t> vocab;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;  // (a,b) -> (rank, new id)
  std::optional<uint32_t> unk;
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  int byte_ids[256];
  mutable std::mutex mu;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> cache;

  static uint64_t key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

  bool encode_word(std::string_view w, std::vector<uint32_t>& ids, std::string& error) const {
    if (ignore_merges) {
      auto it = vocab.find(std::string(w));
      if (it != vocab.end()) {
        ids.push_back(it->second);
        return true;
      }
    }
    bool cacheable = w.size() <= kMaxCachedWord;
    if (cacheable) {
      std::lock_guard<std::mutex> g(mu);
      auto it = cache.find(std::string(w));
      if (it != cache.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return true;
      }
    }
    struct Sym {
      uint32_t id;
      int prev, next;
      bool alive;
    };
    std::vector<Sym> syms;
    bool last_unk = false;
    size_t i = 0;
    std::string ch;
    while (i < w.size()) {
      size_t b = i;
      detail::decode_utf8(w, i);
      ch.assign(w.substr(b, i - b));
      auto it = vocab.find(ch);
      if (it != vocab.end()) {
        syms.push_back({it->second, 0, 0, true});
        last_unk = false;
        continue;
      }
      if (byte_fallback) {
        bool all = true;
        for (size_t k = b; k < i; ++k)
          if (byte_ids[static_cast<unsigned char>(w[k])] < 0) all = false;
        if (all) {
          for (size_t k = b; k < i; ++k)
            syms.push_back({static_cast<uint32_t>(byte_ids[static_cast<unsigned char>(w[k])]), 0, 0, true});
          last_unk = false;
          continue;
        }
      }
      if (!unk) {
        size_t j = b;
        uint32_t cp = detail::decode_utf8(w, j);
        char buf[64];
        std::snprintf(buf, sizeof buf, "no token for character U+%04X (no byte fallback, no unk_token)", cp);
        error = buf;
        return false;
      }
      if (fuse_unk && last_unk) continue;
      syms.push_back({*unk, 0, 0, true});
      last_unk = true;
    }
    int n = static_cast<int>(syms.size());
    for (int k = 0; k < n; ++k) {
      syms[k].prev = k - 1;
      syms[k].next = k + 1 < n ? k + 1 : -1;
    }
    struct Cand {
      uint32_t rank;
      int left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
    auto consider = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      auto it = merges.find(key(syms[l].id, syms[r].id));
      if (it != merges.end()) q.push({it->second.first, l, r});
    };
    for (int k = 0; k + 1 < n; ++k) consider(k, k + 1);
    while (!q.empty()) {
      Cand c = q.top();
      q.pop();
      Sym& L = syms[c.left];
      Sym& R = syms[c.right];
      if (!L.alive || !R.alive || L.next != c.right) continue;
      auto it = merges.find(key(L.id, R.id));
      if (it == merges.end() || it->second.first != c.rank) continue;
      L.id = it->second.second;
      L.next = R.next;
      if (R.next >= 0) syms[R.next].prev = c.left;
      R.alive = false;
      consider(L.prev, c.left);
      consider(c.left, L.next);
    }
    size_t start = ids.size();
    for (int k = n ? 0 : -1; k >= 0; k = syms[k].next) ids.push_back(syms[k].id);
    if (cacheable) {
      std::lock_guard<std::mutex> g(mu);
      if (cache.size() >= kMaxCacheEntries) cache.clear();
      cache.emplace(std::string(w), std::vector<uint32_t>(ids.begin() + static_cast<long>(start), ids.end()));
    }
    return true;
  }
};

void read_bpe(const Value& m, Bpe& bpe) {
  const Value* vocab = m.find("vocab");
  if (!vocab || !vocab->is_object()) fail("BPE model has no \"vocab\" object");
  if (vocab->as_object().size() > kMaxVocab) fail("BPE vocab larger than 4000000 entries");
  bpe.vocab.reserve(vocab->as_object().size());
  for (const auto& [tok, id] : vocab->as_object()) bpe.vocab[tok] = as_id(id, "vocab entry");
  for (auto k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto s = get_opt_string(m, k);
    if (s && !s->empty()) fail(std::string("BPE ") + k + " is not supported for encoding");
  }
  if (const Value* d = m.find("dropout"); d && !d->is_null() && d->is_number() && d->as_double() > 0.0)
    fail("BPE dropout is not supported for encoding");
  bpe.byte_fallback = get_bool(m, "byte_fallback", false);
  bpe.fuse_unk = get_bool(m, "fuse_unk", false);
  bpe.ignore_merges = get_bool(m, "ignore_merges", false);
  if (auto u = get_opt_string(m, "unk_token")) {
    auto it = bpe.vocab.find(*u);
    if (it == bpe.vocab.end()) fail("unk_token '" + *u + "' is not in the vocabulary");
    bpe.unk = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    auto it = bpe.vocab.find(buf);
    bpe.byte_ids[b] = it == bpe.vocab.end() ? -1 : static_cast<int>(it->second);
  }
  const Value* merges = m.find("merges");
  if (!merges || merges->is_null()) return;
  if (!merges->is_array()) fail("BPE \"merges\" is not a list");
  const auto& list = merges->as_array();
  if (list.size() > kMaxMerges) fail("BPE has more than 4000000 merges");
  bpe.merges.reserve(list.size());
  for (size_t r = 0; r < list.size(); ++r) {
    std::string a, b;
    const Value& e = list[r];
    if (e.is_string()) {
      const std::string& s = e.as_string();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("merge " + std::to_string(r) + " is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.as_array().size() == 2 && e.as_array()[0].is_string() &&
               e.as_array()[1].is_string()) {
      a = e.as_array()[0].as_string();
      b = e.as_array()[1].as_string();
    } else {
      fail("merge " + std::to_string(r) + " is neither \"a b\" nor [a, b]");
    }
    auto ia = bpe.vocab.find(a), ib = bpe.vocab.find(b), ic = bpe.vocab.find(a + b);
    if (ia == bpe.vocab.end() || ib == bpe.vocab.end() || ic == bpe.vocab.end())
      fail("merge " + std::to_string(r) + " refers to a token not in the vocabulary");
    bpe.merges.emplace(Bpe::key(ia->second, ib->second), std::make_pair(static_cast<uint32_t>(r), ic->second));
  }
}

// ---------------------------------------------------------------- Unigram model

// tokenizers' Unigram (encode_optimized): Viterbi over the vocab's scores, unknown characters as
// unk with score min - 10, consecutive unks fused, then byte fallback / unk for pieces not in vocab.
struct Unigram {
  std::vector<std::pair<std::string, double>> vocab;
  std::unordered_map<std::string, uint32_t> ids;
  detail::ByteTrie trie;
  std::optional<uint32_t> unk;
  bool byte_fallback = false;
  double min_score = 0;
  int byte_ids[256];

  bool encode_word(std::string_view w, std::vector<uint32_t>& out, std::string& error) const {
    struct Node {
      double score = 0;
      int64_t start = -1;
      uint32_t id = 0;
    };
    std::vector<Node> best(w.size() + 1);
    const double unk_score = min_score - 10.0;
    size_t pos = 0;
    while (pos < w.size()) {
      size_t mblen = detail::utf8_len(w, pos);
      if (!mblen) mblen = 1;
      const double here = best[pos].score;
      bool single = false;
      trie.prefixes(w, pos, [&](size_t len, uint32_t id) {
        Node& t = best[pos + len];
        double cand = vocab[id].second + here;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(pos), id};
        if (len == mblen) single = true;
      });
      if (!single) {
        if (!unk) {
          error = "Unigram: a character has no piece and the model has no unk_id";
          return false;
        }
        Node& t = best[pos + mblen];
        double cand = unk_score + here;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(pos), *unk};
      }
      pos += mblen;
    }
    std::vector<std::pair<size_t, size_t>> pieces;  // (start, end), reversed
    size_t end = w.size();
    std::optional<std::pair<size_t, size_t>> fused;
    while (end > 0) {
      const Node& n = best[end];
      size_t start = static_cast<size_t>(n.start);
      if (unk && n.id == *unk) {
        fused = fused ? std::make_pair(start, fused->second) : std::make_pair(start, end);
      } else {
        if (fused) pieces.push_back(*fused), fused.reset();
        pieces.emplace_back(start, end);
      }
      end = start;
    }
    if (fused) pieces.push_back(*fused);
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      std::string piece(w.substr(it->first, it->second - it->first));
      auto f = ids.find(piece);
      if (f != ids.end()) {
        out.push_back(f->second);
        continue;
      }
      if (byte_fallback) {
        bool all = true;
        for (unsigned char c : piece)
          if (byte_ids[c] < 0) all = false;
        if (all) {
          for (unsigned char c : piece) out.push_back(static_cast<uint32_t>(byte_ids[c]));
          continue;
        }
      }
      out.push_back(*unk);
    }
    return true;
  }
};

void read_unigram(const Value& m, Unigram& u) {
  const Value* vocab = m.find("vocab");
  if (!vocab || !vocab->is_array()) fail("Unigram model has no \"vocab\" list");
  const auto& list = vocab->as_array();
  if (list.size() > kMaxVocab) fail("Unigram vocab larger than 4000000 entries");
  u.vocab.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const Value& e = list[i];
    if (!e.is_array() || e.as_array().size() != 2 || !e.as_array()[0].is_string() || !e.as_array()[1].is_number())
      fail("Unigram vocab entry " + std::to_string(i) + " is not [piece, score]");
    double score = e.as_array()[1].as_double();
    if (!(score == score) || score > 1e300 || score < -1e300) fail("Unigram score is not finite");
    u.vocab.emplace_back(e.as_array()[0].as_string(), score);
    u.ids.emplace(u.vocab.back().first, static_cast<uint32_t>(i));
    u.trie.add(u.vocab.back().first, static_cast<uint32_t>(i));
    u.min_score = i == 0 ? score : std::min(u.min_score, score);
  }
  if (const Value* id = m.find("unk_id"); id && !id->is_null()) {
    uint32_t x = as_id(*id, "unk_id");
    if (x >= u.vocab.size()) fail("unk_id beyond the vocab");
    u.unk = x;
  }
  u.byte_fallback = get_bool(m, "byte_fallback", false);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    auto it = u.ids.find(buf);
    u.byte_ids[b] = it == u.ids.end() ? -1 : static_cast<int>(it->second);
  }
}

// ---------------------------------------------------------------- added tokens

struct Added {
  std::string content;
  uint32_t id;
  bool lstrip, rstrip;
};

// Leftmost-longest matcher over the contents (a byte trie).
struct Matcher {
  struct Node {
    std::map<unsigned char, int> kids;
    int token = -1;
  };
  std::vector<Node> nodes{1};
  void add(const std::string& s, int token) {
    int n = 0;
    for (unsigned char c : s) {
      auto it = nodes[n].kids.find(c);
      if (it == nodes[n].kids.end()) {
        nodes[n].kids[c] = static_cast<int>(nodes.size());
        int nn = static_cast<int>(nodes.size());
        nodes.emplace_back();
        n = nn;
      } else {
        n = it->second;
      }
    }
    if (nodes[n].token < 0) nodes[n].token = token;
  }
  bool empty() const { return nodes.size() == 1; }
  // longest match at pos: (length, token) or (0, -1)
  std::pair<size_t, int> match(std::string_view s, size_t pos) const {
    int n = 0;
    std::pair<size_t, int> best{0, -1};
    for (size_t i = pos; i < s.size(); ++i) {
      auto it = nodes[n].kids.find(static_cast<unsigned char>(s[i]));
      if (it == nodes[n].kids.end()) break;
      n = it->second;
      if (nodes[n].token >= 0) best = {i + 1 - pos, nodes[n].token};
    }
    return best;
  }
};

struct Section {
  std::string text;
  int token = -1;  // index into added list, or -1 for text
};

std::vector<Section> split_added(std::string_view text, const Matcher& m, const std::vector<Added>& added) {
  std::vector<Section> out;
  if (m.empty()) {
    out.push_back({std::string(text), -1});
    return out;
  }
  size_t start = 0, i = 0;
  while (i < text.size()) {
    auto [len, tok] = m.match(text, i);
    if (tok < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({std::string(text.substr(start, i - start)), -1});
    out.push_back({std::string(text.substr(i, len)), tok});
    i += len;
    start = i;
  }
  if (start < text.size()) out.push_back({std::string(text.substr(start)), -1});
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].token < 0) continue;
    const Added& a = added[static_cast<size_t>(out[k].token)];
    if (a.lstrip && k > 0 && out[k - 1].token < 0) out[k - 1].text = std::string(detail::trim_end(out[k - 1].text));
    if (a.rstrip && k + 1 < out.size() && out[k + 1].token < 0)
      out[k + 1].text = std::string(detail::trim_start(out[k + 1].text));
  }
  return out;
}

// ---------------------------------------------------------------- post-processors

struct PostItem {
  bool sequence = false;
  std::vector<uint32_t> ids;
};

void read_post(const Value& v, std::vector<std::vector<PostItem>>& out, int depth) {
  if (v.is_null()) return;
  if (depth > kMaxNesting) fail("post_processor nesting too deep");
  std::string t = type_of(v, "post_processor");
  if (t == "Sequence") {
    const Value* list = v.find("processors");
    if (!list || !list->is_array()) fail("Sequence post_processor has no \"processors\" list");
    for (const auto& x : list->as_array()) read_post(x, out, depth + 1);
    return;
  }
  if (t == "ByteLevel") return;
  std::vector<PostItem> items;
  if (t == "TemplateProcessing") {
    const Value* single = v.find("single");
    const Value* specials = v.find("special_tokens");
    if (!single || !single->is_array()) fail("TemplateProcessing has no \"single\" list");
    for (const auto& it : single->as_array()) {
      if (!it.is_object()) fail("TemplateProcessing item is not an object");
      if (it.find("Sequence")) {
        items.push_back({true, {}});
      } else if (const Value* st = it.find("SpecialToken")) {
        auto name = st->get_string("id");
        if (!name) fail("TemplateProcessing SpecialToken has no id");
        const Value* e = specials ? specials->find(*name) : nullptr;
        const Value* ids = e ? e->find("ids") : nullptr;
        if (!ids || !ids->is_array()) fail("TemplateProcessing special token '" + *name + "' has no ids");
        PostItem p;
        for (const auto& id : ids->as_array()) p.ids.push_back(as_id(id, "special token"));
        items.push_back(std::move(p));
      } else {
        fail("TemplateProcessing item is neither Sequence nor SpecialToken");
      }
    }
  } else if (t == "BertProcessing" || t == "RobertaProcessing") {
    auto pair_id = [&](const char* k) {
      const Value* x = v.find(k);
      if (!x || !x->is_array() || x->as_array().size() != 2) fail(t + " has no \"" + k + "\" pair");
      return as_id(x->as_array()[1], k);
    };
    items.push_back({false, {pair_id("cls")}});
    items.push_back({true, {}});
    items.push_back({false, {pair_id("sep")}});
  } else {
    fail("post_processor " + t + " is not supported for encoding");
  }
  out.push_back(std::move(items));
}

// ---------------------------------------------------------------- the encoder

class JsonEncoder final : public Encoder {
 public:
  std::vector<Added> added;
  Matcher raw_matcher, norm_matcher;
  std::vector<Normalizer> normalizers;
  std::vector<PreTok> pretoks;
  Bpe bpe;
  std::unique_ptr<Unigram> unigram;
  std::vector<std::vector<PostItem>> post;
  bool byte_level = false;
  size_t n_tokens = 0;

  bool encode(std::string_view text, bool add_special, std::vector<uint32_t>& ids, std::string& error) const override {
    ids.clear();
    if (size_t bad = detail::first_invalid_utf8(text); bad != std::string_view::npos) {
      error = "text is not valid UTF-8 at byte " + std::to_string(bad);
      return false;
    }
    auto sections = split_added(text, raw_matcher, added);
    std::vector<std::string> pieces;
    for (size_t si = 0; si < sections.size(); ++si) {
      const Section& sec = sections[si];
      if (sec.text.empty()) continue;
      if (sec.token >= 0) {
        ids.push_back(added[static_cast<size_t>(sec.token)].id);
        continue;
      }
      std::string s = sec.text;
      if (!apply_normalizers(normalizers, s, error)) return false;
      if (s.empty()) continue;
      for (const auto& sub : split_added(s, norm_matcher, added)) {
        if (sub.text.empty()) continue;
        if (sub.token >= 0) {
          ids.push_back(added[static_cast<size_t>(sub.token)].id);
          continue;
        }
        if (!apply_pretoks(pretoks, sub.text, si == 0, pieces, error)) return false;
        for (const auto& p : pieces)
          if (!p.empty() && !(unigram ? unigram->encode_word(p, ids, error) : bpe.encode_word(p, ids, error)))
            return false;
      }
    }
    if (add_special) {
      for (const auto& proc : post) {
        std::vector<uint32_t> out;
        for (const auto& item : proc) {
          if (item.sequence) out.insert(out.end(), ids.begin(), ids.end());
          else out.insert(out.end(), item.ids.begin(), item.ids.end());
        }
        ids = std::move(out);
      }
    }
    return true;
  }

  std::string describe() const override {
    return std::string("tokenizer.json: ") + (unigram ? "Unigram" : "BPE") + (byte_level ? " (byte-level)" : "") + ", " +
           std::to_string(n_tokens) + " tokens";
  }
};

}  // namespace

std::unique_ptr<Encoder> load_tokenizer_json(std::string_view text, std::string_view tokenizer_config,
                                             std::string& error) {
  (void)tokenizer_config;  // transformers.js takes the special-token behaviour from the post-processor
  auto parsed = json::parse(text);
  if (!parsed.ok()) {
    error = "tokenizer.json: " + parsed.error->message;
    return nullptr;
  }
  const Value& root = parsed.value;
  try {
    if (!root.is_object()) fail("not a JSON object");
    const Value* model = root.find("model");
    if (!model || !model->is_object()) fail("no \"model\" object");
    auto type = model->get_string("type");
    std::string mt = type ? *type : (model->find("merges") ? "BPE" : "unknown");
    if (mt != "BPE" && mt != "Unigram") fail("model type " + mt + " is not supported for encoding");
    auto enc = std::make_unique<JsonEncoder>();
    if (mt == "BPE") {
      read_bpe(*model, enc->bpe);
    } else {
      enc->unigram = std::make_unique<Unigram>();
      read_unigram(*model, *enc->unigram);
    }
    if (const Value* n = root.find("normalizer")) read_normalizer(*n, enc->normalizers, 0);
    if (const Value* p = root.find("pre_tokenizer")) read_pretok(*p, enc->pretoks, 0, enc->byte_level);
    if (const Value* p = root.find("post_processor")) read_post(*p, enc->post, 0);
    std::unordered_map<uint32_t, bool> extra_ids;
    if (const Value* at = root.find("added_tokens"); at && !at->is_null()) {
      if (!at->is_array()) fail("\"added_tokens\" is not a list");
      if (at->as_array().size() > kMaxAdded) fail("more than 1000000 added tokens");
      for (const auto& t : at->as_array()) {
        if (!t.is_object()) fail("added token is not an object");
        const Value* id = t.find("id");
        auto content = t.get_string("content");
        if (!id || !content) fail("added token without id or content");
        Added a{*content, as_id(*id, "added token id"), get_bool(t, "lstrip", false), get_bool(t, "rstrip", false)};
        bool special = get_bool(t, "special", false);
        bool normalized = get_bool(t, "normalized", !special);
        if (a.content.empty()) continue;
        if (detail::first_invalid_utf8(a.content) != std::string_view::npos) fail("added token is not valid UTF-8");
        int index = static_cast<int>(enc->added.size());
        if (normalized && !enc->normalizers.empty()) {
          std::string nc = a.content;
          std::string err;
          if (!apply_normalizers(enc->normalizers, nc, err)) fail(err);
          if (!nc.empty()) enc->norm_matcher.add(nc, index);
        } else {
          enc->raw_matcher.add(a.content, index);
        }
        extra_ids[a.id] = true;
        enc->added.push_back(std::move(a));
      }
    }
    for (const auto& [tok, id] : enc->bpe.vocab) extra_ids.erase(id);
    if (enc->unigram)
      for (size_t id = 0; id < enc->unigram->vocab.size(); ++id) extra_ids.erase(static_cast<uint32_t>(id));
    enc->n_tokens = (enc->unigram ? enc->unigram->vocab.size() : enc->bpe.vocab.size()) + extra_ids.size();
    return enc;
  } catch (const LoadError& e) {
    error = "tokenizer.json: " + e.message;
    return nullptr;
  } catch (const std::exception& e) {
    error = std::string("tokenizer.json: ") + e.what();
    return nullptr;
  }
}

bool encode(const Encoder& e, std::string_view utf8_text, bool add_special_tokens, std::vector<uint32_t>& ids,
            std::string& error) {
  return e.encode(utf8_text, add_special_tokens, ids, error);
}

std::string describe(const Encoder& e) { return e.describe(); }

}  // namespace ckpt::encode
