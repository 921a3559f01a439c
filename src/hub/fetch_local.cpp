// The fetch pipeline, --local-dir: files written in place (no symlinks) with huggingface_hub's
// .cache/huggingface/download/<path>.metadata beside them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "hub/fetch_internal.h"

namespace ckpt::hub::pipeline {

namespace {

// No symlink among the existing components between base and p (local-dir confinement).
bool no_symlink_below(const fs::path& base, const std::string& rel) {
  fs::path cur = base;
  std::string_view r = rel;
  size_t start = 0;
  while (true) {
    auto end = r.find('/', start);
    if (end == std::string_view::npos) return true;  // the leaf itself is replaced by rename
    cur /= std::string(r.substr(start, end - start));
    struct stat st;
    if (::lstat(cur.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) return false;
    start = end + 1;
  }
}

std::string b64url(const unsigned char* d, size_t n) {
  static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = d[i] << 16;
    if (i + 1 < n) v |= d[i + 1] << 8;
    if (i + 2 < n) v |= d[i + 2];
    out += tbl[(v >> 18) & 63];
    out += tbl[(v >> 12) & 63];
    out += i + 1 < n ? tbl[(v >> 6) & 63] : '=';
    out += i + 2 < n ? tbl[v & 63] : '=';
  }
  return out;
}

std::string short_hash(const std::string& name) {
  auto raw = sha1_bytes(name);
  return b64url(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

struct LocalMeta {
  std::string commit, etag;
  double timestamp = 0;
  bool valid = false;
};

LocalMeta read_local_meta(const fs::path& p) {
  LocalMeta m;
  std::ifstream f(p);
  if (!f) return m;
  std::string ts;
  if (!std::getline(f, m.commit) || !std::getline(f, m.etag) || !std::getline(f, ts)) return m;
  char* end = nullptr;
  m.timestamp = std::strtod(ts.c_str(), &end);
  m.valid = end != ts.c_str();
  return m;
}

}  // namespace

void ensure_local_cache_dir(const fs::path& local_dir) {
  auto d = local_dir / ".cache" / "huggingface";
  std::error_code ec;
  fs::create_directories(d, ec);
  if (!fs::exists(d / ".gitignore")) write_file_atomic(d / ".gitignore", "*", nullptr);
  if (!fs::exists(d / "CACHEDIR.TAG"))
    write_file_atomic(d / "CACHEDIR.TAG",
                      "Signature: 8a477f597d28d172789f06886806bc55\n"
                      "# This file is a cache directory tag created by huggingface_hub (written here by ckpt).\n"
                      "# For information about cache directory tags, see:\n#\thttps://bford.info/cachedir/\n",
                      nullptr);
}

void fetch_one_local(Ctx& ctx, const TreeEntry& te, FileResult& fr) {
  const std::string& path = te.path;
  fs::path dest = ctx.repo_dir / path;
  fs::path meta_root = ctx.repo_dir / ".cache" / "huggingface" / "download";
  fs::path meta_path = meta_root / (path + ".metadata");
  fs::path lock_path = meta_root / (path + ".lock");
  if (!no_symlink_below(ctx.repo_dir, path)) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": a directory on the way is a symlink; refusing to write through it";
    return;
  }
  auto valid_local = [&](const LocalMeta& lm) {
    struct stat st;
    if (!lm.valid || ::stat(dest.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    if (te.size && static_cast<uint64_t>(st.st_size) != *te.size) return false;
    return static_cast<double>(st.st_mtime) - 1 <= lm.timestamp;
  };
  LocalMeta lm = read_local_meta(meta_path);
  if (valid_local(lm) && lm.commit == ctx.commit) {
    fr.ok = fr.cached = true;
    fr.expected = fr.received = file_size_or_zero(dest);
    return;
  }
  Meta meta;
  if (!fetch_checked_metadata(ctx, te, path, meta, fr, "nothing written")) return;
  auto write_meta = [&]() {
    char ts[64];
    auto now = std::chrono::system_clock::now().time_since_epoch();
    std::snprintf(ts, sizeof ts, "%.6f", std::chrono::duration<double>(now).count());
    std::string err;
    if (!write_file_atomic(meta_path, ctx.commit + "\n" + meta.etag + "\n" + ts + "\n", &err)) {
      fr.kind = ErrorKind::io;
      fr.error = path + ": " + err;
      return false;
    }
    return true;
  };
  const std::string tmp_prefix = short_hash(meta_path.filename().string()) + "." + meta.etag;
  FileLock lock(ctx, lock_path, LockWatch{meta_path.parent_path(), tmp_prefix});
  if (!lock.error().empty()) {
    fr.kind = lock.kind();
    fr.error = path + ": " + lock.error();
    return;
  }
  if (valid_local(lm) && lm.etag == meta.etag && file_size_or_zero(dest) == meta.size) {
    if (!write_meta()) return;
    fr.ok = fr.cached = true;
    fr.received = meta.size;
    return;
  }
  TransferState ts{ctx, path, fr};
  ts.prog.path = path;
  ts.prog.total = meta.size;
  fs::path tmp = meta_path.parent_path() / (tmp_prefix + private_infix(ctx, lock.unsupported()) + ".incomplete");
  std::error_code ec;
  fs::create_directories(tmp.parent_path(), ec);
  fs::create_directories(dest.parent_path(), ec);
  if (!obtain_into_place(ctx, ts, te, meta, tmp, lock.unsupported(), dest, "the file")) return;
  if (!write_meta()) return;
  fr.ok = true;
  fr.received = meta.size;
  ts.prog.done = true;
  ts.report(meta.size, true);
}

}  // namespace ckpt::hub::pipeline
