// Helpers shared by the foundation tests (checks, model, cli): build checkpoints and
// Hugging Face cache layouts in a TempDir, load them, and query the findings.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "ckpt/safetensors.h"
#include "test_support.h"

namespace ckpt::ftest {

namespace fs = std::filesystem;
using test::read_text;
using test::TempDir;
using test::write_text;

struct T {  // a tensor to write: name, dtype, shape (data left sparse)
  std::string name;
  st::DType dtype = st::DType::F32;
  std::vector<uint64_t> shape = {4};
};

// A valid safetensors file written by the library writer (sparse data).
inline void write_st(const fs::path& p, const std::vector<T>& tensors,
                     std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}}) {
  std::vector<st::TensorToWrite> ws;
  for (const auto& t : tensors) ws.push_back({t.name, t.dtype, t.shape, {}});
  st::WriteOptions o;
  o.metadata = std::move(metadata);
  fs::create_directories(p.parent_path());
  std::string err = st::write_file(p, ws, o);
  ASSERT_EQ(err, "") << p;
}

// 8-byte little-endian length + header bytes exactly as given (no padding).
inline std::string frame(const std::string& header, uint64_t declared_len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((declared_len >> (8 * i)) & 0xFF);
  return out + header;
}
inline std::string frame(const std::string& header) { return frame(header, header.size()); }

// A raw safetensors file: prefix + header + `data_len` zero bytes.
inline void write_raw_st(const fs::path& p, const std::string& header, uint64_t data_len) {
  write_text(p, frame(header) + std::string(data_len, '\0'));
}

inline st::Header parse_bytes(const std::string& bytes) {
  return st::parse_header(std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()),
                          bytes.size());
}

inline Checkpoint load_ok(const std::string& target) {
  LoadResult r = load_checkpoint(target);
  if (r.error) ADD_FAILURE() << "load_checkpoint(" << target << "): " << r.error->message;
  if (!r.checkpoint) return Checkpoint{};
  return std::move(*r.checkpoint);
}
inline Checkpoint load_ok(const fs::path& dir) { return load_ok(dir.string()); }
inline Checkpoint load_ok(const char* target) { return load_ok(std::string(target)); }

inline std::vector<Finding> verify(const fs::path& dir) { return run_checks(load_ok(dir)); }
inline std::vector<Finding> verify(const std::string& target) { return run_checks(load_ok(target)); }
inline std::vector<Finding> verify(const char* target) { return run_checks(load_ok(std::string(target))); }

inline bool in_family(const Finding& f, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes)
    if (f.code.rfind(p, 0) == 0) return true;
  return false;
}

// Findings of the families under test only.
inline std::vector<Finding> only(const std::vector<Finding>& fs_, std::initializer_list<const char*> prefixes) {
  std::vector<Finding> out;
  for (const auto& f : fs_)
    if (in_family(f, prefixes)) out.push_back(f);
  return out;
}

inline std::string dump(const std::vector<Finding>& fs_) {
  std::string s;
  for (const auto& f : fs_)
    s += "  " + f.code + " [" + std::string(severity_name(f.severity)) + "] file=" + f.file + " tensor=" + f.tensor +
         ": " + f.message + "\n";
  return s.empty() ? "  (no findings)\n" : s;
}

inline std::vector<const Finding*> with_code(const std::vector<Finding>& fs_, const std::string& code) {
  std::vector<const Finding*> out;
  for (const auto& f : fs_)
    if (f.code == code) out.push_back(&f);
  return out;
}

// The first finding with `code` (and, when given, that file / tensor), or nullptr.
inline const Finding* find(const std::vector<Finding>& fs_, const std::string& code,
                           std::optional<std::string> file = std::nullopt,
                           std::optional<std::string> tensor = std::nullopt) {
  for (const auto& f : fs_)
    if (f.code == code && (!file || f.file == *file) && (!tensor || f.tensor == *tensor)) return &f;
  return nullptr;
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// No error-severity finding in the foundation families.
inline void expect_clean(const std::vector<Finding>& all) {
  for (const auto& f : all)
    if (f.severity == Severity::error && in_family(f, {"FS", "ST", "IX"}))
      ADD_FAILURE() << "unexpected error finding:\n" << dump(all);
}

// ---- checkpoints ----------------------------------------------------------

// A small clean 2-shard checkpoint with an index (names model-0000N-of-00002).
inline void make_two_shard(const fs::path& dir) {
  write_st(dir / "model-00001-of-00002.safetensors", {{"a.weight", st::DType::F32, {4, 4}}, {"b.weight", st::DType::BF16, {8}}});
  write_st(dir / "model-00002-of-00002.safetensors", {{"c.weight", st::DType::F16, {2, 3}}, {"lm_head.weight", st::DType::F32, {3}}});
  // total = 64 + 16 + 12 + 12 = 104
  write_text(dir / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 104}, "weight_map": {)"
             R"("a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00001-of-00002.safetensors", )"
             R"("c.weight": "model-00002-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}})");
  write_text(dir / "config.json", R"({"model_type": "llama"})");
}

// index JSON from (tensor, file) pairs, with an optional total_size.
inline std::string index_json(const std::vector<std::pair<std::string, std::string>>& map,
                              std::optional<uint64_t> total = std::nullopt) {
  std::string s = "{";
  if (total) s += "\"metadata\": {\"total_size\": " + std::to_string(*total) + "}, ";
  s += "\"weight_map\": {";
  bool first = true;
  for (const auto& [t, f] : map) {
    if (!first) s += ", ";
    first = false;
    s += json::quoted(t) + ": " + json::quoted(f);
  }
  return s + "}}";
}

// ---- Hugging Face cache ----------------------------------------------------

inline constexpr const char* kCommitA = "0123456789abcdef0123456789abcdef01234567";
inline constexpr const char* kCommitB = "89abcdef0123456789abcdef0123456789abcdef";

// Sets an environment variable for the scope of the object (tests run single-threaded).
class EnvGuard {
 public:
  EnvGuard(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvGuard() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Builds models--org--name inside a cache root. Files are written as blobs and linked
// from snapshots/<commit>/ with relative ../../blobs/<etag> symlinks, as huggingface_hub does.
class CacheRepo {
 public:
  CacheRepo(const fs::path& cache_root, const std::string& repo_id) : cache_(cache_root) {
    repo_ = cache_root / repo_folder_name(repo_id);
    fs::create_directories(repo_ / "blobs");
    fs::create_directories(repo_ / "refs");
    fs::create_directories(repo_ / "snapshots");
  }
  const fs::path& dir() const { return repo_; }
  fs::path snapshot(const std::string& commit) const { return repo_ / "snapshots" / commit; }

  // Links snapshots/<commit>/<rel> -> ../../blobs/<etag> (one more ../ per subdirectory).
  void link(const std::string& commit, const std::string& rel, const std::string& etag) {
    fs::path link = snapshot(commit) / rel;
    fs::create_directories(link.parent_path());
    std::string up = "../../";
    for (char c : rel)
      if (c == '/') up += "../";
    fs::create_symlink(up + "blobs/" + etag, link);
  }
  // A blob holding `content`, linked at rel.
  void add_text(const std::string& commit, const std::string& rel, const std::string& content, const std::string& etag) {
    write_text(repo_ / "blobs" / etag, content);
    link(commit, rel, etag);
  }
  // A blob holding a safetensors file, linked at rel.
  void add_st(const std::string& commit, const std::string& rel, const std::vector<T>& tensors, const std::string& etag) {
    write_st(repo_ / "blobs" / etag, tensors);
    link(commit, rel, etag);
  }
  void ref(const std::string& name, const std::string& content) { write_text(repo_ / "refs" / name, content); }

  // A complete small snapshot: one shard + config, refs/main -> commit.
  void clean_snapshot(const std::string& commit, const std::string& etag_prefix = "e") {
    add_st(commit, "model.safetensors", {{"w", st::DType::F32, {4}}}, etag_prefix + "1111111111111111111111111111111111111111");
    add_text(commit, "config.json", R"({"model_type": "llama"})", etag_prefix + "2222222222222222222222222222222222222222");
    fs::create_directories(snapshot(commit));
  }

 private:
  fs::path cache_;
  fs::path repo_;
};

// ---- byte-identity snapshots -----------------------------------------------

struct FileState {
  std::string kind;  // "file", "dir", "link"
  std::string content;  // file bytes or link text
  int64_t mtime_ns = 0;
  uint64_t mode = 0;
  bool operator==(const FileState&) const = default;
};

// Every entry below `root` (without following symlinks): contents, link texts, mtimes, modes.
inline std::map<std::string, FileState> tree_state(const fs::path& root) {
  std::map<std::string, FileState> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct stat st{};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    FileState s;
    s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    s.mode = st.st_mode;
    if (S_ISLNK(st.st_mode)) {
      s.kind = "link";
      s.content = fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      s.kind = "dir";
    } else if (S_ISREG(st.st_mode)) {
      s.kind = "file";
      s.content = read_text(it->path());
    } else {
      s.kind = "other";
    }
    out[fs::relative(it->path(), root).string()] = s;
  }
  return out;
}

}  // namespace ckpt::ftest
