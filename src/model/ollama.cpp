#include "model/ollama.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "io/file.h"
#include "model/gguf_load.h"

namespace ckpt::ollama {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxManifestBytes = 1u << 20;

bool valid_part(std::string_view p, size_t max, bool dots) {
  if (p.empty() || p.size() > max) return false;
  auto word = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; };
  if (!word(p[0])) return false;
  for (char c : p)
    if (!word(c) && c != '-' && !(dots && c == '.')) return false;
  return true;
}

bool is_hex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); });
}

void add_file(Checkpoint& ck, const fs::path& root, const std::string& rel) {
  FileEntry fe;
  fe.rel = rel;
  struct stat st{};
  const fs::path abs = root / rel;
  if (::lstat(abs.c_str(), &st) != 0) return;  // absent: the layer says so
  if (S_ISREG(st.st_mode)) {
    fe.abs = abs;
    fe.size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISLNK(st.st_mode)) {
    fe.is_symlink = true;
    std::error_code ec;
    const fs::path target = fs::canonical(abs, ec);
    struct stat ts{};
    if (ec || ::stat(target.c_str(), &ts) != 0) fe.dangling = true;
    else if (!S_ISREG(ts.st_mode)) fe.unreadable = true, fe.error = "not a regular file";
    else fe.abs = target, fe.size = static_cast<uint64_t>(ts.st_size);
  } else {
    fe.unreadable = true;
    fe.error = "not a regular file";
  }
  ck.files.push_back(std::move(fe));
}

OllamaManifest read_manifest(const fs::path& root, const std::string& rel) {
  OllamaManifest m;
  m.file = rel;
  // manifests/<host>/<namespace>/<model>/<tag> -> host/namespace/model:tag
  std::string name = rel.substr(std::string("manifests/").size());
  if (const auto slash = name.rfind('/'); slash != std::string::npos) name[slash] = ':';
  m.name = name;
  std::string text;
  if (auto e = io::read_file(root / rel, kMaxManifestBytes, text); !e.empty()) {
    m.error = "cannot read: " + e;
    return m;
  }
  if (text.empty()) {
    m.error = "the manifest is empty (0 bytes): an interrupted write (ollama#7393)";
    return m;
  }
  auto parsed = json::parse(text);
  if (parsed.error) {
    m.error = "not JSON: " + parsed.error->message + " at " + std::to_string(parsed.error->line) + ":" + std::to_string(parsed.error->column);
    return m;
  }
  const json::Value& v = parsed.value;
  if (!v.is_object() || !v.find("layers") || !v.find("layers")->is_array()) {
    m.error = "not an Ollama manifest: no \"layers\" array";
    return m;
  }
  auto layer_of = [&](const json::Value& l, bool config) {
    OllamaLayer layer;
    layer.is_config = config;
    layer.media_type = l.get_string("mediaType").value_or("");
    layer.digest = l.get_string("digest").value_or("");
    layer.size = l.get_int("size").value_or(-1);
    std::string_view d = layer.digest;
    if ((d.rfind("sha256:", 0) == 0 || d.rfind("sha256-", 0) == 0) && is_hex64(d.substr(7)))
      layer.blob = "blobs/sha256-" + std::string(d.substr(7));
    return layer;
  };
  if (const auto* c = v.find("config"); c && c->is_object()) m.layers.push_back(layer_of(*c, true));
  for (const auto& l : v.find("layers")->as_array())
    if (l.is_object()) m.layers.push_back(layer_of(l, false));
  return m;
}

}  // namespace

fs::path models_root() {
  if (const char* env = std::getenv("OLLAMA_MODELS"); env && *env) {
    std::string s = env;
    auto trim = [](char c) { return c == '"' || c == '\'' || c == ' ' || c == '\t'; };
    while (!s.empty() && trim(s.front())) s.erase(s.begin());
    while (!s.empty() && trim(s.back())) s.pop_back();
    if (!s.empty()) return s;
  }
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "") / ".ollama" / "models";
}

std::string manifest_path(std::string_view name) {
  std::string tag = "latest";
  std::string n(name);
  // A ':' after the last '/' separates the tag (a ':' before it is a host port).
  const size_t slash = n.rfind('/');
  const size_t colon = n.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    tag = n.substr(colon + 1);
    n = n.substr(0, colon);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t next = n.find('/', start);
    parts.push_back(n.substr(start, next - start));
    if (next == std::string::npos) break;
    start = next + 1;
  }
  std::string host = "registry.ollama.ai", ns = "library", model;
  if (parts.size() == 1) model = parts[0];
  else if (parts.size() == 2) ns = parts[0], model = parts[1];
  else if (parts.size() == 3) host = parts[0], ns = parts[1], model = parts[2];
  else return {};
  if (host.empty() || host.size() > 350 || !valid_part(ns, 80, false) || !valid_part(model, 80, true) || !valid_part(tag, 80, true))
    return {};
  if (!std::isalnum(static_cast<unsigned char>(host[0])) || host.find("..") != std::string::npos) return {};  // never "." or ".."
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':')) return {};
  return "manifests/" + host + "/" + ns + "/" + model + "/" + tag;
}

bool is_models_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "manifests", ec) && fs::is_directory(dir / "blobs", ec);
}

void load(Checkpoint& ck, const std::string& only, unsigned threads) {
  OllamaStore store;
  std::vector<std::string> manifests;
  if (!only.empty()) {
    manifests.push_back(only);
  } else {
    // Ollama globs exactly four levels: manifests/*/*/*/*.
    std::error_code ec;
    const fs::path base = ck.root / "manifests";
    size_t seen = 0;
    for (auto it = fs::recursive_directory_iterator(base, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator() && seen < 10000; it.increment(ec), ++seen) {
      if (it.depth() == 3 && !it->is_directory(ec)) manifests.push_back(fs::relative(it->path(), ck.root, ec).string());
      if (it.depth() >= 3 && it->is_directory(ec)) it.disable_recursion_pending();
    }
    std::sort(manifests.begin(), manifests.end());
  }
  std::vector<std::string> ggufs;
  for (const auto& rel : manifests) {
    add_file(ck, ck.root, rel);
    OllamaManifest m = read_manifest(ck.root, rel);
    for (auto& l : m.layers) {
      if (l.blob.empty()) continue;
      const bool known = std::any_of(ck.files.begin(), ck.files.end(), [&](const FileEntry& f) { return f.rel == l.blob; });
      if (!known) add_file(ck, ck.root, l.blob);
      for (const auto& f : ck.files)
        if (f.rel == l.blob) {
          l.present = !f.dangling;
          l.actual_size = f.size;
        }
      const bool gguf_layer = l.media_type == "application/vnd.ollama.image.model" ||
                              l.media_type == "application/vnd.ollama.image.projector" ||
                              l.media_type == "application/vnd.ollama.image.adapter";
      if (gguf_layer && l.present && std::find(ggufs.begin(), ggufs.end(), l.blob) == ggufs.end()) ggufs.push_back(l.blob);
    }
    store.manifests.push_back(std::move(m));
  }
  ck.ollama = std::move(store);
  gguf_load::load(ck, threads, &ggufs);
}

}  // namespace ckpt::ollama
