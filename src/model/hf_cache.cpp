// Hugging Face hub cache conventions, as huggingface_hub resolves them.
#include <cstdlib>

#include "ckpt/checkpoint.h"

namespace ckpt {

namespace fs = std::filesystem;

static std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

static fs::path expand_user(const std::string& p) {
  if (p.size() >= 1 && p[0] == '~' && (p.size() == 1 || p[1] == '/')) {
    std::string home = env("HOME");
    return fs::path(home) / p.substr(p.size() > 1 ? 2 : 1);
  }
  return fs::path(p);
}

fs::path hf_cache_root() {
  if (auto v = env("HF_HUB_CACHE"); !v.empty()) return expand_user(v);
  if (auto v = env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return expand_user(v);
  if (auto v = env("HF_HOME"); !v.empty()) return expand_user(v) / "hub";
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return expand_user(v) / "huggingface" / "hub";
  return expand_user("~/.cache/huggingface/hub");
}

std::string repo_folder_name(std::string_view repo_id) {
  std::string out = "models";
  size_t start = 0;
  while (true) {
    size_t slash = repo_id.find('/', start);
    out += "--";
    out += repo_id.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

bool is_commit_hash(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool looks_like_repo_id(std::string_view target) {
  std::string_view id = target.substr(0, target.rfind('@'));
  size_t slash = id.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= id.size()) return false;
  if (id.find('/', slash + 1) != std::string_view::npos) return false;
  if (id.find("..") != std::string_view::npos || id.find("--") != std::string_view::npos) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/')) return false;
  // As huggingface_hub's validator (\b[\w\-.]+\b): each part starts and ends with a word character,
  // so "./model" or "../x" (a mistyped path) is not taken for a repo id.
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::string_view part : {id.substr(0, slash), id.substr(slash + 1)})
    if (!word(part.front()) || !word(part.back())) return false;
  return true;
}

bool is_safe_relative_path(std::string_view p) {
  if (p.empty() || p[0] == '/' || p.find('\\') != std::string_view::npos) return false;
  if (p.size() >= 2 && p[1] == ':') return false;
  if (p.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (true) {
    size_t slash = p.find('/', start);
    std::string_view part = p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == ".." || part.empty()) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

}  // namespace ckpt
