// Public helpers of the hub module: repo specs, URL encoding, globs, path safety, env.
#include "ckpt/checkpoint.h"
#include <fnmatch.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ckpt/hub.h"

namespace ckpt::hub {

namespace fs = std::filesystem;

static bool repo_part_ok(std::string_view s) {
  if (s.empty() || s.size() > 96 || s == "." || s == "..") return false;
  if (s.find("--") != std::string_view::npos || s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.')
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::optional<RepoSpec> parse_repo_spec(std::string_view spec, std::string* error) {
  auto fail = [&](std::string msg) -> std::optional<RepoSpec> {
    if (error) *error = std::move(msg);
    return std::nullopt;
  };
  RepoSpec out;
  std::string_view repo = spec;
  auto at = spec.rfind('@');
  if (at != std::string_view::npos) {
    repo = spec.substr(0, at);
    out.revision = std::string(spec.substr(at + 1));
    out.revision_given = true;
    if (out.revision.empty()) return fail("empty revision after '@' in '" + std::string(spec) + "'");
    for (char c : out.revision)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return fail("control character in revision");
    if (out.revision.size() > 256) return fail("revision too long");
    if (out.revision.find("..") != std::string::npos || out.revision.front() == '/' || out.revision.back() == '/')
      return fail("invalid revision '" + out.revision + "'");
  }
  for (std::string_view prefix : {"datasets/", "spaces/", "models/"}) {
    if (repo.rfind(prefix, 0) == 0) {
      out.repo_type = std::string(prefix.substr(0, prefix.size() - 2));
      if (out.repo_type == "models") out.repo_type = "model";
      if (prefix == "datasets/") out.repo_type = "dataset";
      if (prefix == "spaces/") out.repo_type = "space";
      repo.remove_prefix(prefix.size());
      break;
    }
  }
  auto slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos)
    return fail("expected org/name[@revision], got '" + std::string(spec) + "'");
  if (!repo_part_ok(repo.substr(0, slash)) || !repo_part_ok(repo.substr(slash + 1)))
    return fail("invalid repo id '" + std::string(repo) + "' (letters, digits, '-', '_', '.' only)");
  out.repo_id = std::string(repo);
  return out;
}

std::string_view error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::none: return "ok";
    case ErrorKind::repo_not_found: return "repo-not-found";
    case ErrorKind::gated: return "gated";
    case ErrorKind::disabled: return "disabled";
    case ErrorKind::unauthorized: return "unauthorized";
    case ErrorKind::revision_not_found: return "revision-not-found";
    case ErrorKind::entry_not_found: return "entry-not-found";
    case ErrorKind::rate_limited: return "rate-limited";
    case ErrorKind::network: return "network";
    case ErrorKind::http: return "http";
    case ErrorKind::protocol: return "protocol";
    case ErrorKind::integrity: return "integrity";
    case ErrorKind::io: return "io";
    case ErrorKind::offline_missing: return "offline-missing";
    case ErrorKind::cancelled: return "cancelled";
  }
  return "?";
}

std::string_view error_code(ErrorKind k) {
  switch (k) {
    case ErrorKind::none: return "";
    case ErrorKind::repo_not_found: return "NET001";
    case ErrorKind::gated: return "NET002";
    case ErrorKind::disabled: return "NET003";
    case ErrorKind::unauthorized: return "NET004";
    case ErrorKind::revision_not_found: return "NET005";
    case ErrorKind::entry_not_found: return "NET006";
    case ErrorKind::rate_limited: return "NET007";
    case ErrorKind::network: return "NET008";
    case ErrorKind::http: return "NET009";
    case ErrorKind::protocol: return "NET010";
    case ErrorKind::integrity: return "NET011";
    case ErrorKind::io: return "NET012";
    case ErrorKind::offline_missing: return "NET013";
    case ErrorKind::cancelled: return "NET014";
  }
  return "";
}

static std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

static bool env_true(const char* name) {
  auto v = env(name);
  for (auto& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

static fs::path hf_home() {
  auto h = env("HF_HOME");
  if (!h.empty()) return h;
  auto xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty()) return fs::path(xdg) / "huggingface";
  auto home = env("HOME");
  return fs::path(home.empty() ? "/" : home) / ".cache" / "huggingface";
}

// The same resolution `ckpt verify org/name` uses, so fetch writes where verify looks.
fs::path default_cache_dir() { return ckpt::hf_cache_root(); }

void apply_environment(FetchOptions& opts) {
  if (opts.endpoint.empty()) opts.endpoint = env("HF_ENDPOINT");
  if (opts.endpoint.empty()) opts.endpoint = "https://huggingface.co";
  while (!opts.endpoint.empty() && opts.endpoint.back() == '/') opts.endpoint.pop_back();
  if (opts.token.empty()) opts.token = env("HF_TOKEN");
  if (opts.token.empty()) opts.token = env("HUGGING_FACE_HUB_TOKEN");
  if (opts.token.empty() && !env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) {
    auto p = env("HF_TOKEN_PATH");
    fs::path tp = p.empty() ? hf_home() / "token" : fs::path(p);
    std::ifstream f(tp);
    if (f) {
      std::string line;
      std::getline(f, line);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\n')) line.pop_back();
      opts.token = line;
    }
  }
  if (opts.cache_dir.empty() && opts.local_dir.empty()) opts.cache_dir = default_cache_dir();
  if (env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE")) opts.offline = true;
}

std::string repo_folder(const RepoSpec& spec) {
  std::string type = spec.repo_type + "s";
  std::string out = type + "--";
  for (char c : spec.repo_id) {
    if (c == '/') out += "--";
    else out += c;
  }
  return out;
}

bool is_commit(std::string_view s) { return ckpt::is_commit_hash(s); }

bool glob_match(std::string_view pattern, std::string_view path) {
  std::string p(pattern), s(path);
  if (!p.empty() && p.back() == '/') p += '*';  // huggingface_hub: "dir/" means "dir/*"
  return ::fnmatch(p.c_str(), s.c_str(), 0) == 0;
}

bool safe_repo_path(std::string_view path) {
  if (path.empty() || path.size() > 4096) return false;
  if (path.front() == '/' || path.back() == '/') return false;
  if (path.size() >= 2 && path[1] == ':') return false;  // drive letters
  for (char c : path)
    if (c == '\\' || c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
  size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    auto comp = path.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == ".." || comp.size() > 255) return false;
    start = end + 1;
  }
  return true;
}

std::string percent_encode(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace ckpt::hub
