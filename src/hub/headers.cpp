#include "hub/headers.h"

#include <curl/curl.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ckpt::hub::detail {

namespace {

constexpr uint64_t kYear = 365ull * 24 * 3600;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

// 1*DIGIT, saturating at `cap` instead of overflowing; nullopt when not all digits.
std::optional<uint64_t> digits_saturating(std::string_view s, uint64_t cap) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    if (v < cap) v = std::min<uint64_t>(cap, v * 10 + static_cast<uint64_t>(c - '0'));
  }
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto p = s.find(sep);
    out.push_back(s.substr(0, p));
    if (p == std::string_view::npos) return out;
    s.remove_prefix(p + 1);
  }
}

}  // namespace

std::optional<uint64_t> parse_decimal_u64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

long parse_status_line(std::string_view line) {
  if (line.substr(0, 5) != "HTTP/") return 0;
  auto sp = line.find(' ');
  if (sp == std::string_view::npos) return 0;
  auto rest = line.substr(sp + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.size() < 3 || rest[0] < '1' || rest[0] > '9' || !is_digit(rest[1]) || !is_digit(rest[2])) return 0;
  if (rest.size() > 3 && is_digit(rest[3])) return 0;  // four digits or more: not a status code
  return (rest[0] - '0') * 100 + (rest[1] - '0') * 10 + (rest[2] - '0');
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
  v = trim(v);
  auto sp = v.find_first_of(" \t");
  if (sp == std::string_view::npos || !iequals(v.substr(0, sp), "bytes")) return std::nullopt;
  auto spec = trim(v.substr(sp + 1));
  auto slash = spec.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto range = spec.substr(0, slash), complete = spec.substr(slash + 1);
  ContentRange cr;
  if (complete != "*") {
    cr.total = parse_decimal_u64(complete);
    if (!cr.total) return std::nullopt;
  }
  if (range == "*") {
    if (!cr.total) return std::nullopt;  // "bytes */*" says nothing
    cr.unsatisfied = true;
    return cr;
  }
  auto dash = range.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto first = parse_decimal_u64(range.substr(0, dash)), last = parse_decimal_u64(range.substr(dash + 1));
  if (!first || !last || *first > *last) return std::nullopt;
  if (cr.total && *last >= *cr.total) return std::nullopt;
  cr.first = *first;
  cr.last = *last;
  return cr;
}

std::optional<double> parse_retry_after(std::string_view v, std::time_t now) {
  v = trim(v);
  if (v.empty() || v.size() > 128) return std::nullopt;
  if (is_digit(v.front())) {
    auto secs = digits_saturating(v, kYear);
    if (secs) return static_cast<double>(*secs);
    // Not all digits: only an asctime-style date could start with one ("06 Nov 1994 ..." is
    // not an HTTP-date), so refuse rather than guess.
    return std::nullopt;
  }
  // An HTTP-date names a month and a time of day; anything else ("-5", "1.5", "soon") is refused
  // before libcurl's lenient date parser could read something into it.
  static const char* months[] = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"};
  std::string low(v);
  for (auto& c : low) c = lower(c);
  bool month = std::any_of(std::begin(months), std::end(months),
                           [&](const char* m) { return low.find(m) != std::string::npos; });
  if (!month || low.find(':') == std::string::npos) return std::nullopt;
  std::string z(v);
  time_t when = curl_getdate(z.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  if (when <= now) return 0.0;
  double d = static_cast<double>(when) - static_cast<double>(now);
  return std::min<double>(d, static_cast<double>(kYear));
}

std::optional<double> parse_ratelimit_wait(std::string_view v) {
  if (v.size() > 4096) v = v.substr(0, 4096);
  std::optional<double> wait;
  auto consider = [&](uint64_t t) {
    double w = static_cast<double>(t) + 1;
    if (!wait || w > *wait) wait = w;
  };
  // The older draft's single policy spread over comma-separated members.
  std::optional<uint64_t> remaining, reset;
  for (auto item : split(v, ',')) {
    std::optional<uint64_t> r, t;
    bool bad = false;
    for (auto param : split(item, ';')) {
      param = trim(param);
      auto eq = param.find('=');
      if (eq == std::string_view::npos) continue;  // the policy name ("resolvers") or a bare flag
      auto key = trim(param.substr(0, eq));
      auto val = trim(param.substr(eq + 1));
      auto num = digits_saturating(val, kYear);
      if (iequals(key, "r")) {
        r = num;
        bad = bad || !num;
      } else if (iequals(key, "t")) {
        t = num;
        bad = bad || !num;
      } else if (iequals(key, "remaining") && num) {
        remaining = num;
      } else if (iequals(key, "reset") && num) {
        reset = num;
      }
    }
    if (!bad && r && t && *r == 0) consider(*t);
  }
  if (remaining && reset && *remaining == 0) consider(*reset);
  return wait;
}

}  // namespace ckpt::hub::detail
