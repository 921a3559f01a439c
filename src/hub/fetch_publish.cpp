// The fetch pipeline, publish stage: verify a downloaded blob (size + hash, one retry from
// scratch), make it durable on request, and publish it atomically into huggingface_hub's cache
// layout under a per-blob lock; atomic small files and trees/<commit>.json.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ckpt/json.h"

#include "hub/fetch_internal.h"

namespace ckpt::hub::pipeline {

// ---------------------------------------------------------------------------------------
// Filesystem helpers.

// Small metadata files (refs, .metadata, trees/): temp file, fsync, rename. The fsync keeps a
// crash from leaving an empty refs/<rev> behind the rename (huggingface_hub would read "").
bool write_file_atomic(const fs::path& p, const std::string& content, std::string* err) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  auto tmp = p.parent_path() / (".tmp." + p.filename().string() + "." + std::to_string(::getpid()) + "." +
                                std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  bool ok = fd >= 0;
  size_t off = 0;
  while (ok && off < content.size()) {
    ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) ok = false;
    else off += static_cast<size_t>(w);
  }
  if (ok && ::fsync(fd) != 0) ok = false;
  if (fd >= 0 && ::close(fd) != 0) ok = false;
  if (!ok) {
    if (err) *err = "cannot write " + tmp.string() + ": " + std::strerror(errno);
    fs::remove(tmp, ec);
    return false;
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    if (err) *err = "cannot rename to " + p.string() + ": " + std::strerror(errno);
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

namespace {

// The pid holding an flock on the open file `fd` (from /proc/locks), 0 when unknown.
long flock_holder(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  char key[96];
  std::snprintf(key, sizeof key, "%02x:%02x:%llu", ::major(st.st_dev), ::minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF" (waiters carry "->" and are skipped)
    std::istringstream ls(line);
    std::string n, type, mode, rw, pid, dev;
    if (!(ls >> n >> type >> mode >> rw >> pid >> dev) || type != "FLOCK" || dev != key) continue;
    return std::strtol(pid.c_str(), nullptr, 10);
  }
  return 0;
}

}  // namespace

// FileLock (declared in fetch_internal.h): see there.
FileLock::FileLock(Ctx& ctx, const fs::path& p, const LockWatch& watch) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd_ < 0) {
    kind_ = ErrorKind::io;
    error_ = "cannot open lock " + p.string() + ": " + std::strerror(errno);
    return;
  }
  const bool bounded = ctx.opts.stall_timeout > 0;
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(ctx.opts.stall_timeout, 2.0)));
  auto start = Clock::now();
  auto next_log = start + std::chrono::seconds(10);
  auto next_look = start;
  auto last_change = start;
  Observation seen = observe(watch);
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      // flock unsupported (some network filesystems): cooperate without it. The caller then
      // downloads into a temp file of its own, so two writers never share one.
      ctx.log("warning: flock on " + p.string() + " failed (" + std::strerror(errno) +
              "); continuing without the lock, in a private temp file");
      unsupported_ = true;
      return;
    }
    if (ctx.cancelled()) {
      kind_ = ErrorKind::cancelled;
      error_ = "cancelled while waiting for lock";
      return;
    }
    auto now = Clock::now();
    if (now >= next_look) {
      Observation o = observe(watch);
      if (o != seen) {
        seen = o;
        last_change = now;
      }
      next_look = now + std::chrono::milliseconds(250);
    }
    double idle = std::chrono::duration<double>(now - last_change).count();
    if (bounded && now - last_change >= window) {
      long pid = flock_holder(fd_);
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.0f", idle);
      kind_ = ErrorKind::network;
      error_ = "another process" + (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string()) +
               " holds the lock " + p.string() + " for this file and made no progress for " + secs +
               " s (its " + (watch.dir / (watch.prefix + "*.incomplete")).string() + " stayed at " +
               std::to_string(seen.bytes) + " bytes); gave up waiting after " +
               std::to_string(static_cast<long>(std::chrono::duration<double>(now - start).count())) +
               " s. Stop or wait for that process, then re-run";
      return;
    }
    if (now >= next_log) {
      long pid = flock_holder(fd_);
      ctx.log("still waiting to acquire lock " + p.string() + " (held by " +
              (pid > 0 ? "pid " + std::to_string(pid) : std::string("another process")) +
              ", fetching the same file: its temp file has " + std::to_string(seen.bytes) + " bytes" +
              (idle >= 1 ? ", idle for " + std::to_string(static_cast<long>(idle)) + " s" : std::string()) + ")");
      next_log += std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  heartbeat_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      ::futimens(fd_, nullptr);  // "alive": a waiter keeps waiting while this moves
      cv_.wait_for(l, std::chrono::milliseconds(500), [&] { return stop_; });
    }
  });
}

FileLock::~FileLock() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the lock file stays (as huggingface_hub)
}

FileLock::Observation FileLock::observe(const LockWatch& w) const {
  Observation o;
  auto ns = [](const struct stat& st) { return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; };
  struct stat st;
  if (fd_ >= 0 && ::fstat(fd_, &st) == 0) o.newest = ns(st);
  std::error_code ec;
  for (auto it = fs::directory_iterator(w.dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    // <prefix>.incomplete or <prefix>.<anything>.incomplete
    if (name.size() < w.prefix.size() + 11 || name.compare(0, w.prefix.size(), w.prefix) != 0 ||
        name[w.prefix.size()] != '.' || name.compare(name.size() - 11, 11, ".incomplete") != 0)
      continue;
    if (::stat(it->path().c_str(), &st) != 0) continue;
    o.bytes += static_cast<uint64_t>(st.st_size);
    o.newest = std::max(o.newest, ns(st));
    ++o.files;
  }
  return o;
}

uint64_t file_size_or_zero(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return static_cast<uint64_t>(st.st_size);
}

bool regular_file_exists(const fs::path& p, uint64_t* size) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (size) *size = static_cast<uint64_t>(st.st_size);
  return true;
}

namespace {

std::string relative_blob_link(const std::string& repo_path, const std::string& etag) {
  // snapshots/<commit>/<a>/<b>/file -> ../../../../blobs/<etag>
  std::string up = "../../";
  for (char c : repo_path)
    if (c == '/') up += "../";
  return up + "blobs/" + etag;
}

bool make_symlink_atomic(const fs::path& link, const std::string& target, std::string* err) {
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  auto tmp = link.parent_path() / (".tmp-link." + link.filename().string() + "." + std::to_string(::getpid()));
  fs::remove(tmp, ec);
  if (::symlink(target.c_str(), tmp.c_str()) != 0) {
    if (err) *err = "symlink " + tmp.string() + ": " + std::strerror(errno);
    return false;
  }
  if (::rename(tmp.c_str(), link.c_str()) != 0) {
    if (err) *err = "rename " + tmp.string() + " -> " + link.string() + ": " + std::strerror(errno);
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace

mode_t umask_mode() {
  static mode_t m = [] {
    mode_t u = ::umask(0);
    ::umask(u);
    return static_cast<mode_t>(0666 & ~u);
  }();
  return m;
}

namespace {

bool verify_blob(Ctx& ctx, const fs::path& tmp, const Meta& meta, FileResult& fr, const std::string& path,
                 HashState* hs) {
  uint64_t sz = file_size_or_zero(tmp);
  if (sz != meta.size) {
    fr.kind = ErrorKind::integrity;
    fr.error = path + ": size mismatch: expected " + std::to_string(meta.size) + " bytes, file has " + std::to_string(sz);
    return false;
  }
  if (meta.hash_kind == EtagKind::opaque) {
    ctx.log("warning: " + path + ": etag '" + meta.etag +
            "' is not a sha256 or git sha1 and the tree listing gave no hash; only the size was verified");
    return true;
  }
  std::string digest;
  if (hs) {
    hs->catch_up(tmp, meta.size);
    digest = hs->digest();
  }
  std::string err;
  if (digest.empty()) digest = hash_file(tmp, meta.hash_kind, meta.size, &err);
  if (digest.empty()) {
    fr.kind = ErrorKind::io;
    fr.error = path + ": " + err;
    return false;
  }
  if (digest != meta.hash) {
    fr.kind = ErrorKind::integrity;
    fr.error = path + ": " + (meta.hash_kind == EtagKind::sha256 ? "sha256" : "git blob sha1") + " mismatch: expected " +
               meta.hash + ", downloaded bytes hash to " + digest;
    return false;
  }
  return true;
}

// Make the downloaded bytes durable before the rename publishes them, so a crash cannot leave
// a published blob shorter than its name says (nothing re-checks a cached blob's hash).
bool sync_file(const fs::path& p, std::string* err) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fdatasync(fd) != 0) {
    *err = "cannot sync " + p.string() + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

// Download (if needed) and verify into `tmp`, retrying once from scratch on a hash mismatch.
bool obtain_verified(Ctx& ctx, TransferState& ts, const Meta& meta, const fs::path& tmp) {
  FileResult& fr = ts.fr;
  for (int round = 0; round < 2; ++round) {
    uint64_t before = file_size_or_zero(tmp);
    HashState hs(meta.hash_kind, meta.size);
    ts.hs = &hs;
    bool ok_transfer = transfer(ts, meta.location, tmp, meta.size);
    ts.hs = nullptr;
    if (!ok_transfer) {
      // Over-the-network count for the summary.
      uint64_t now = file_size_or_zero(tmp);
      fr.downloaded += now > before ? now - before : 0;
      return false;
    }
    fr.downloaded += meta.size > before ? meta.size - before : 0;
    if (verify_blob(ctx, tmp, meta, fr, ts.repo_path, &hs)) {
      if (!ctx.opts.durable) return true;
      std::string err;
      if (sync_file(tmp, &err)) return true;
      fr.kind = ErrorKind::io;
      fr.error = ts.repo_path + ": " + err;
      return false;
    }
    std::error_code ec;
    fs::remove(tmp, ec);  // corrupt bytes are never resumed from
    fr.received = 0;
    if (fr.kind != ErrorKind::integrity || round == 1) return false;
    ctx.log(fr.error + "; discarding the download and retrying once from byte 0");
    fr.kind = ErrorKind::none;
    fr.error.clear();
    ++fr.retries;
  }
  return false;
}

}  // namespace

bool obtain_into_place(Ctx& ctx, TransferState& ts, const TreeEntry& te, Meta& meta, const fs::path& tmp,
                       bool private_tmp, const fs::path& dest, std::string_view what) {
  std::error_code ec;
  if (!obtain_with_refresh(ctx, ts, te, meta, tmp)) {
    if (private_tmp) fs::remove(tmp, ec);  // nobody resumes a private temp file
    ts.prog.failed = true;
    ts.report(ts.fr.received, true);
    return false;
  }
  ::chmod(tmp.c_str(), umask_mode());
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    ts.fr.kind = ErrorKind::io;
    ts.fr.error = ts.repo_path + ": cannot move " + std::string(what) + " into place: " + std::strerror(errno);
    return false;
  }
  return true;
}

// A signed CDN URL can expire mid-download (403/401 from the CDN): ask the hub for a fresh
// location (same etag and size) and continue, at most twice.
bool obtain_with_refresh(Ctx& ctx, TransferState& ts, const TreeEntry& te, Meta& meta, const fs::path& tmp) {
  for (int refresh = 0;; ++refresh) {
    ts.last_status = 0;
    if (obtain_verified(ctx, ts, meta, tmp)) return true;
    const long status = ts.last_status;
    if (!meta.cross_host || (status != 403 && status != 401) || refresh >= 2 || ctx.cancelled()) return false;
    ctx.log(ts.repo_path + ": the CDN refused the download URL (HTTP " + std::to_string(status) +
            "); asking the hub for a fresh one");
    Meta fresh;
    FileResult scratch;
    if (!head_metadata(ctx, ts.repo_path, &te, fresh, scratch)) return false;
    if (fresh.etag != meta.etag || fresh.size != meta.size) {
      ts.fr.kind = ErrorKind::protocol;
      ts.fr.error = ts.repo_path + ": the file changed on the hub during the download (etag " + meta.etag + " -> " +
                    fresh.etag + ")";
      return false;
    }
    meta.location = fresh.location;
    meta.cross_host = fresh.cross_host;
    ts.fr.kind = ErrorKind::none;
    ts.fr.error.clear();
    ++ts.fr.retries;
  }
}

// "" for the shared, resumable temp name; ".<8 hex>" for a private one.
std::string private_infix(Ctx& ctx, bool needed) {
  if (!needed) return {};
  std::lock_guard<std::mutex> g(ctx.mu);
  char buf[16];
  std::snprintf(buf, sizeof buf, ".%08x", static_cast<unsigned>(ctx.rng() & 0xffffffffu));
  return buf;
}

void fetch_one_cache(Ctx& ctx, const TreeEntry& te, FileResult& fr) {
  const std::string& path = te.path;
  fs::path snap = ctx.repo_dir / "snapshots" / ctx.commit / path;
  // Already in the snapshot (a symlink to an existing blob of the right size)?
  uint64_t have = 0;
  if (regular_file_exists(snap, &have) && (!te.size || *te.size == have)) {
    fr.ok = fr.cached = true;
    fr.expected = fr.received = have;
    return;
  }
  Meta meta;
  if (!fetch_checked_metadata(ctx, te, path, meta, fr, "nothing published")) return;
  TransferState ts{ctx, path, fr};
  ts.prog.path = path;
  ts.prog.total = meta.size;
  fs::path blob = ctx.repo_dir / "blobs" / meta.etag;
  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  {
    FileLock lock(ctx, ctx.locks_dir / (meta.etag + ".lock"), LockWatch{blob.parent_path(), meta.etag});
    if (!lock.error().empty()) {
      fr.kind = lock.kind();
      fr.error = path + ": " + lock.error();
      return;
    }
    uint64_t bsz = 0;
    bool blob_ok = regular_file_exists(blob, &bsz) && bsz == meta.size;
    if (!blob_ok) {
      if (fs::exists(fs::symlink_status(blob))) {
        ctx.log(path + ": existing blob " + blob.string() + " has " + std::to_string(bsz) + " bytes, expected " +
                std::to_string(meta.size) + "; replacing it");
      }
      // Without a working flock another process may be writing <etag>.incomplete: use a temp
      // file of our own (as huggingface_hub >= 1.18 always does), removed again on failure.
      fs::path tmp = ctx.repo_dir / "blobs" / (meta.etag + private_infix(ctx, lock.unsupported()) + ".incomplete");
      ts.report(file_size_or_zero(tmp), true);
      if (!obtain_into_place(ctx, ts, te, meta, tmp, lock.unsupported(), blob, "blob")) return;
    } else {
      fr.cached = true;
    }
    std::string err;
    if (!make_symlink_atomic(snap, relative_blob_link(path, meta.etag), &err)) {
      fr.kind = ErrorKind::io;
      fr.error = path + ": " + err;
      return;
    }
  }
  fr.ok = true;
  fr.received = meta.size;
  ts.prog.done = true;
  ts.report(meta.size, true);
}

// ---------------------------------------------------------------------------------------
// The tree cache.

namespace {

bool xet_hash_usable(const std::string& h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// huggingface_hub's trees/<commit>.json (format_version 1, _tree_cache.py): every file of the
// listing, sorted, json.dump(indent=1) with its default ensure_ascii (\uXXXX outside ' '..'~').
// A redacted xetHash (64 '*' on gated repos, xet-core#895) is left out rather than cached.
std::string trees_json(const std::vector<TreeEntry>& tree) {
  std::map<std::string, const TreeEntry*> files;  // byte order == code point order for UTF-8
  for (const auto& t : tree) files[t.path] = &t;
  std::string out = "{\n \"format_version\": 1,\n \"files\": {";
  bool first = true;
  for (const auto& [p, t] : files) {
    out += first ? "\n  " : ",\n  ";
    first = false;
    json::append_quoted(out, p, /*ensure_ascii=*/true);
    out += ": {\n   \"size\": " + std::to_string(t->raw_size) + ",\n   \"blob_id\": ";
    json::append_quoted(out, t->oid, /*ensure_ascii=*/true);
    if (t->has_lfs) {
      out += ",\n   \"lfs_sha256\": ";
      json::append_quoted(out, t->lfs_oid, /*ensure_ascii=*/true);
      out += ",\n   \"lfs_size\": " + std::to_string(t->lfs_size);
    }
    if (xet_hash_usable(t->xet_hash)) {
      out += ",\n   \"xet_hash\": ";
      json::append_quoted(out, t->xet_hash, /*ensure_ascii=*/true);
    }
    out += "\n  }";
  }
  out += first ? "}" : "\n }";
  out += "\n}";
  return out;
}

}  // namespace

// Writes the listing of `commit` unless a usable one is there already (a commit's listing
// never changes; one of another format_version is left to the huggingface_hub that wrote it).
// Returns true when this call wrote the file.
bool write_tree_cache(Ctx& ctx, const fs::path& folder, const std::vector<TreeEntry>& tree) {
  for (const auto& t : tree)
    if (!t.cacheable) {
      ctx.log("note: the tree listing has an entry without size/oid (" + t.path.substr(0, 100) +
              "); trees/" + ctx.commit + ".json not written");
      return false;
    }
  fs::path p = folder / "trees" / (ctx.commit + ".json");
  std::string content = trees_json(tree);
  std::ifstream in(p, std::ios::binary);
  if (in) {
    std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (old == content) return false;
    auto pr = json::parse(old);
    if (pr.ok() && pr.value.is_object() && pr.value.find("format_version")) {
      if (pr.value.get_int("format_version") == 1)
        ctx.log("warning: " + p.string() + " differs from the hub's listing of the same commit; left as is");
      return false;
    }
  }
  std::string err;
  if (!write_file_atomic(p, content, &err)) {
    ctx.log("warning: " + err + " (the tree cache is optional)");
    return false;
  }
  return true;
}

// A format-1 trees/<commit>.json as path -> real size (lfs_size, else size); nullopt when
// absent or not exactly that format (huggingface_hub ignores those too).
std::optional<std::map<std::string, uint64_t>> read_tree_cache(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto pr = json::parse(text);
  if (!pr.ok() || !pr.value.is_object() || pr.value.get_int("format_version") != 1) return std::nullopt;
  const json::Value* files = pr.value.find("files");
  if (!files || !files->is_object()) return std::nullopt;
  std::map<std::string, uint64_t> out;
  for (const auto& [path, e] : files->as_object()) {
    auto size = e.get_int("lfs_size");
    if (!size) size = e.get_int("size");
    if (!size || *size < 0 || !e.get_string("blob_id")) return std::nullopt;
    out[path] = static_cast<uint64_t>(*size);
  }
  return out;
}

}  // namespace ckpt::hub::pipeline
