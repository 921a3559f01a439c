// libFuzzer: the hub module's pure string functions, which see server-supplied text (file
// listings, Location and other response headers) and user-supplied specs. An input is up to
// eight lines:
//   repo spec \n glob pattern \n repo path \n base URL \n Location value \n
//   Content-Range \n Retry-After \n RateLimit (also read as a status line and a decimal)
// Invariants: no crash/UB, an accepted spec names a one-level cache folder, a path the hub
// calls safe is one the loader will open, percent-encoding round-trips; the header parsers
// (hub/headers.h) never accept a range with first > last or last >= its complete length, never
// return a negative, NaN or unbounded wait, and a status is 0 or three digits.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hub.h"
#include "hub/headers.h"
#include "hub/http.h"

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) std::abort();  // truncated escape
    int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) std::abort();
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> f;
  while (f.size() < 7) {
    size_t nl = in.find('\n');
    if (nl == std::string_view::npos) break;
    f.push_back(in.substr(0, nl));
    in.remove_prefix(nl + 1);
  }
  f.push_back(in);
  f.resize(8);

  std::string err;
  if (auto spec = hub::parse_repo_spec(f[0], &err)) {
    if (spec->repo_id.find('/') == std::string::npos || spec->revision.empty()) std::abort();
    std::string folder = hub::repo_folder(*spec);
    if (folder.find('/') != std::string::npos || folder == "." || folder == "..") std::abort();
  } else if (err.empty()) {
    std::abort();  // a refusal always says why
  }

  // fnmatch needs NUL-terminated strings: glob_match copies, so embedded NULs just cut short.
  (void)hub::glob_match(f[1], f[2]);
  if (hub::safe_repo_path(f[2]) && !is_safe_relative_path(f[2])) std::abort();

  for (bool keep_slash : {false, true}) {
    std::string enc = hub::percent_encode(f[2], keep_slash);
    for (char c : enc)
      if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
    if (percent_decode(enc) != f[2]) std::abort();
  }

  std::string origin = hub::detail::url_origin(f[3]);
  for (char c : origin)
    if (c >= 'A' && c <= 'Z') std::abort();
  (void)hub::detail::resolve_location(f[3], f[4]);

  using namespace hub::detail;
  if (auto cr = parse_content_range(f[5])) {
    if (cr->unsatisfied ? !cr->total : cr->first > cr->last) std::abort();
    if (!cr->unsatisfied && cr->total && cr->last >= *cr->total) std::abort();
  }
  constexpr double kYear = 365.0 * 24 * 3600;
  for (std::time_t now : {std::time_t(0), std::time_t(1'700'000'000), std::time_t(-1)}) {
    if (auto w = parse_retry_after(f[6], now); w && !(*w >= 0 && *w <= kYear)) std::abort();
  }
  if (auto w = parse_ratelimit_wait(f[7]); w && !(*w >= 1 && *w <= kYear + 1)) std::abort();
  long st = parse_status_line(f[7]);
  if (st != 0 && (st < 100 || st > 999)) std::abort();
  if (auto v = parse_decimal_u64(f[6]); v && std::to_string(*v) != f[6] && f[6].front() != '0') std::abort();
  return 0;
}
