#include "encode/common.h"

#include <oniguruma.h>
#include <utf8proc.h>

#include <cstdlib>
#include <mutex>

#include "ckpt/encode.h"
#include "util/utf8.h"

namespace ckpt::encode {

Encoder::~Encoder() = default;

namespace detail {

size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const size_t n = s.size();
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (i + 1 < n && (b(i + 1) & 0xC0) == 0x80) ? 2 : 0;
  if (c < 0xF0) {
    if (i + 2 >= n) return 0;
    unsigned char c1 = b(i + 1);
    if ((c1 & 0xC0) != 0x80 || (b(i + 2) & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (i + 3 >= n) return 0;
    unsigned char c1 = b(i + 1);
    if ((c1 & 0xC0) != 0x80 || (b(i + 2) & 0xC0) != 0x80 || (b(i + 3) & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && c1 < 0x90) return 0;
    if (c == 0xF4 && c1 >= 0x90) return 0;
    return 4;
  }
  return 0;
}

size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t l = utf8_len(s, i);
    if (l == 0) return i;
    i += l;
  }
  return std::string_view::npos;
}

uint32_t decode_utf8(std::string_view s, size_t& i) {
  size_t l = utf8_len(s, i);
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(s[k])); };
  uint32_t cp;
  switch (l) {
    case 1: cp = b(i); break;
    case 2: cp = ((b(i) & 0x1F) << 6) | (b(i + 1) & 0x3F); break;
    case 3: cp = ((b(i) & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F); break;
    case 4: cp = ((b(i) & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) | (b(i + 3) & 0x3F); break;
    default: cp = 0xFFFD; l = 1; break;
  }
  i += l;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) { util::append_utf8(out, cp); }

bool is_unicode_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool is_numeric(uint32_t cp) {
  auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

std::string_view trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    uint32_t cp = decode_utf8(s, j);
    if (!is_unicode_space(cp)) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view trim_end(std::string_view s) {
  size_t end = 0, i = 0;
  while (i < s.size()) {
    uint32_t cp = decode_utf8(s, i);
    if (!is_unicode_space(cp)) end = i;
  }
  return s.substr(0, end);
}

namespace {
std::once_flag onig_once;
constexpr unsigned long kRetryLimit = 20'000'000;
}  // namespace

std::unique_ptr<Regex> Regex::compile(std::string_view pattern, std::string& error) {
  std::call_once(onig_once, [] {
    OnigEncoding encs[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(encs, 1);
  });
  if (pattern.size() > 65536) {
    error = "regex pattern longer than 65536 bytes";
    return nullptr;
  }
  if (first_invalid_utf8(pattern) != std::string_view::npos) {
    error = "regex pattern is not valid UTF-8";
    return nullptr;
  }
  OnigRegex reg = nullptr;
  OnigErrorInfo einfo;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  int r = onig_new(&reg, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(buf, r, &einfo);
    error = "invalid regex '" + std::string(pattern.substr(0, 200)) + "': " + reinterpret_cast<char*>(buf);
    return nullptr;
  }
  std::unique_ptr<Regex> out(new Regex());
  out->reg_ = reg;
  return out;
}

Regex::~Regex() {
  if (reg_) onig_free(static_cast<OnigRegex>(reg_));
}

bool Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out, std::string& error) const {
  auto reg = static_cast<OnigRegex>(reg_);
  const auto* start = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = start + text.size();
  OnigRegion* region = onig_region_new();
  OnigMatchParam* mp = onig_new_match_param();
  onig_initialize_match_param(mp);
  onig_set_retry_limit_in_match_of_match_param(mp, kRetryLimit);
  onig_set_retry_limit_in_search_of_match_param(mp, kRetryLimit);
  size_t pos = 0;
  bool ok = true;
  while (pos <= text.size()) {
    int r = onig_search_with_param(reg, start, end, start + pos, end, region, ONIG_OPTION_NONE, mp);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      OnigUChar buf[ONIG_MAX_ERROR_MESSAGE_LEN];
      onig_error_code_to_str(buf, r);
      error = std::string("regex search failed: ") + reinterpret_cast<char*>(buf);
      ok = false;
      break;
    }
    size_t b = static_cast<size_t>(region->beg[0]), e = static_cast<size_t>(region->end[0]);
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= text.size()) break;
      size_t l = utf8_len(text, e);
      pos = e + (l ? l : 1);
    }
    onig_region_clear(region);
  }
  onig_free_match_param(mp);
  onig_region_free(region, 1);
  return ok;
}

void ByteTrie::add(std::string_view s, uint32_t value) {
  uint32_t node = 0;
  for (unsigned char c : s) {
    uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
    auto it = edges_.find(key);
    if (it == edges_.end()) {
      uint32_t n = static_cast<uint32_t>(values_.size());
      values_.push_back(kNone);
      edges_.emplace(key, n);
      node = n;
    } else {
      node = it->second;
    }
  }
  if (values_[node] == kNone) values_[node] = value;
}

uint32_t ByteTrie::child(uint32_t node, unsigned char c) const {
  auto it = edges_.find((static_cast<uint64_t>(node) << 8) | c);
  return it == edges_.end() ? kNone : it->second;
}

bool unicode_normalize(std::string_view in, Form form, std::string& out) {
  int opts = UTF8PROC_STABLE;
  switch (form) {
    case Form::NFC: opts |= UTF8PROC_COMPOSE; break;
    case Form::NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case Form::NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Form::NFKD: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  if (in.empty()) {
    out.clear();
    return true;
  }
  utf8proc_uint8_t* res = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                                    static_cast<utf8proc_ssize_t>(in.size()), &res,
                                    static_cast<utf8proc_option_t>(opts));
  if (n < 0) {
    std::free(res);
    return false;
  }
  out.assign(reinterpret_cast<char*>(res), static_cast<size_t>(n));
  std::free(res);
  return true;
}

std::string lowercase(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    uint32_t cp = decode_utf8(in, i);
    if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping
      out += "i\xCC\x87";
      continue;
    }
    append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  }
  return out;
}

}  // namespace detail
}  // namespace ckpt::encode
