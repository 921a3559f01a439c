// libFuzzer: the hub module's pure string functions, which see server-supplied text (file
// listings, Location headers) and user-supplied specs. An input is up to five lines:
//   repo spec \n glob pattern \n repo path \n base URL \n Location value
// Invariants: no crash/UB, an accepted spec names a one-level cache folder, a path the hub
// calls safe is one the loader will open, percent-encoding round-trips.
// (The Content-Range / Retry-After / header-line parsing in src/hub is not reachable as a
// pure function: it lives inside fetch.cpp and http.cpp callbacks.)
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/hub.h"
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
  while (f.size() < 4) {
    size_t nl = in.find('\n');
    if (nl == std::string_view::npos) break;
    f.push_back(in.substr(0, nl));
    in.remove_prefix(nl + 1);
  }
  f.push_back(in);
  f.resize(5);

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
  return 0;
}
