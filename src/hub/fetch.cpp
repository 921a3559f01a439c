// The fetch pipeline: revision -> commit (API), tree listing at the commit, per-file
// HEAD (same-host redirects only), transfer with stall detection / retries / resume /
// parallel ranges, size + hash verification, atomic publish in huggingface_hub's layout.
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ckpt/hub.h"
#include "ckpt/json.h"
#include "hub/hash.h"
#include "hub/headers.h"
#include "hub/http.h"

namespace ckpt::hub {

namespace fs = std::filesystem;
using namespace detail;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------
// Error classification (X-Error-Code first, then the status), retry decisions.

struct Outcome {
  ErrorKind kind = ErrorKind::none;
  bool retryable = false;
  double retry_after = -1;  // seconds the server asked us to wait (429/503)
  std::string message;
};

std::string short_body(const std::string& body) {
  // The hub's JSON {"error": "..."}; else the first line of text, bounded.
  if (body.empty()) return {};
  auto pr = json::parse(std::string_view(body).substr(0, 64 * 1024));
  if (pr.ok() && pr.value.is_object()) {
    if (auto e = pr.value.get_string("error")) return e->substr(0, 300);
  }
  std::string s = body.substr(0, std::min<size_t>(body.find('\n'), 200));
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

// Seconds a 429/503 asks us to wait: RateLimit (r=0 -> t+1) first, as huggingface_hub, then
// Retry-After (seconds or an HTTP-date); -1 when neither says. Parsers in hub/headers.cpp.
double server_wait(const HttpResponse& r) {
  if (auto w = parse_ratelimit_wait(r.header_all("ratelimit"))) return *w;
  if (auto w = parse_retry_after(r.header("retry-after"), std::time(nullptr))) return *w;
  return -1;
}

Outcome classify(const HttpResponse& r, const std::string& what, bool have_token) {
  Outcome o;
  if (r.cancelled) {
    o.kind = ErrorKind::cancelled;
    o.message = what + ": cancelled";
    return o;
  }
  if (r.body_too_large) {  // an endless or absurd API answer: retrying would fetch it again
    o.kind = ErrorKind::protocol;
    o.message = what + ": the response body is larger than this client accepts (" +
                std::to_string(r.body.size() >> 20) + " MiB received); refused";
    return o;
  }
  if (!r.transport_ok() && !r.aborted_by_sink) {
    o.kind = ErrorKind::network;
    o.retryable = true;
    o.message = what + ": " + r.curl_error;
    return o;
  }
  long st = r.status;
  if (st >= 200 && st < 400) return o;
  std::string code = r.header("x-error-code");
  std::string emsg = r.header("x-error-message");
  std::string detail = emsg.empty() ? short_body(r.body) : emsg;
  std::string rid = r.header("x-request-id");
  std::string suffix = (detail.empty() ? "" : ": " + detail) + (rid.empty() ? "" : " (request id " + rid + ")");
  auto status_s = "HTTP " + std::to_string(st);
  if (code == "RepoNotFound") {
    o.kind = ErrorKind::repo_not_found;
    o.message = what + ": repository not found (" + status_s + ", RepoNotFound)" +
                (have_token ? "; check the repo id and that your token can read it"
                            : "; check the repo id, or set HF_TOKEN if it is private") + suffix;
  } else if (code == "GatedRepo") {
    o.kind = ErrorKind::gated;
    o.message = what + ": gated repository (" + status_s + ")" +
                (st == 401 || !have_token ? "; authenticate with a token (HF_TOKEN / --token) of an approved account"
                                          : "; your account is not in the authorized list, request access on the repo page") +
                suffix;
  } else if (code == "RevisionNotFound") {
    o.kind = ErrorKind::revision_not_found;
    o.message = what + ": revision not found (" + status_s + ", RevisionNotFound)" + suffix;
  } else if (code == "EntryNotFound") {
    o.kind = ErrorKind::entry_not_found;
    o.message = what + ": file not found in the repo at this revision (" + status_s + ", EntryNotFound)" + suffix;
  } else if (emsg == "Access to this resource is disabled.") {
    o.kind = ErrorKind::disabled;
    o.message = what + ": access to this repository is disabled (" + status_s + ")" + suffix;
  } else if (st == 401) {
    if (emsg == "Invalid credentials in Authorization header") {
      o.kind = ErrorKind::unauthorized;
      o.message = what + ": the token was rejected (HTTP 401, invalid credentials); check HF_TOKEN / --token";
    } else {
      o.kind = ErrorKind::repo_not_found;
      o.message = what + ": HTTP 401: repository not found, private or gated" +
                  std::string(have_token ? "" : " (no token was sent; set HF_TOKEN)") + suffix;
    }
  } else if (st == 408 || st == 429 || (st >= 500 && st <= 599)) {
    o.kind = st == 429 ? ErrorKind::rate_limited : ErrorKind::http;
    o.retryable = true;
    o.retry_after = server_wait(r);
    o.message = what + ": " + status_s + suffix;
  } else {
    o.kind = ErrorKind::http;
    o.message = what + ": " + status_s + suffix;
  }
  return o;
}

// ---------------------------------------------------------------------------------------
// Context shared by the workers of one fetch.

struct Meta {
  std::string commit, etag, location;
  uint64_t size = 0;
  bool cross_host = false;
  // What the bytes must hash to: the etag when it is a sha256 / git sha1 (any case), else the
  // tree listing's hash for the file; empty: only the size can be checked.
  std::string hash;
  EtagKind hash_kind = EtagKind::opaque;
};

struct TreeEntry {
  std::string path;
  std::optional<uint64_t> size;  // real size (lfs.size for LFS files)
  std::string oid, lfs_oid;      // git blob sha1 (of the pointer for LFS), LFS sha256
  // The listing's fields as huggingface_hub's trees/<commit>.json keeps them.
  bool cacheable = false;        // came from the tree API with every field well formed
  int64_t raw_size = 0, lfs_size = 0;
  bool has_lfs = false;
  std::string xet_hash;
};

struct Ctx {
  Ctx(const RepoSpec& s, FetchOptions o) : spec(s), opts(std::move(o)) {}
  const RepoSpec& spec;
  FetchOptions opts;
  std::string origin;          // origin of the endpoint (auth is sent only there)
  fs::path repo_dir;           // cache: <cache>/<folder>; local-dir: the local dir
  fs::path locks_dir;          // cache: <cache>/.locks/<folder>
  bool local = false;
  std::string commit;
  std::atomic<bool> tree_contradicted{false};  // a HEAD disagreed with the tree listing
  std::atomic<int> transfers{0};               // files downloading right now
  std::mt19937_64 rng{std::random_device{}()};
  std::mutex mu;

  void log(const std::string& s) {
    if (opts.on_log) {
      std::lock_guard<std::mutex> g(mu);
      opts.on_log(s);
    }
  }
  bool cancelled() const { return opts.cancel && opts.cancel->load(); }
  double jitter_delay(int attempt, double retry_after) {
    double d;
    if (retry_after >= 0) {
      d = std::min(retry_after, opts.retry_after_max);
    } else {
      double cap = std::min(opts.backoff_max, opts.backoff_base * std::pow(2.0, attempt));
      std::lock_guard<std::mutex> g(mu);
      std::uniform_real_distribution<double> dist(cap / 2, cap);  // "equal jitter"
      d = dist(rng);
    }
    return d;
  }
  void sleep_for(double secs) {
    auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(secs));
    while (Clock::now() < until && !cancelled())
      std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(50)));
  }
  std::vector<std::string> auth_headers(const std::string& url) const {
    std::vector<std::string> h;
    if (!opts.token.empty() && url_origin(url) == origin) h.push_back("Authorization: Bearer " + opts.token);
    return h;
  }
  HttpRequest base_request(const std::string& method, const std::string& url) const {
    HttpRequest r;
    r.method = method;
    r.url = url;
    r.headers = auth_headers(url);
    r.connect_timeout = opts.connect_timeout;
    r.stall_timeout = opts.stall_timeout;
    r.stall_bytes = opts.stall_bytes;
    r.cancel = opts.cancel;
    return r;
  }
  std::string type_plural() const { return spec.repo_type + "s"; }
  std::string url_prefix() const { return spec.repo_type == "model" ? "" : type_plural() + "/"; }
};

// A small request (API / HEAD) with retries on network errors, 408, 429 and 5xx.
// `final_status`: statuses returned at once, unretried (a HEAD the server refuses).
HttpResponse request_with_retries(Ctx& ctx, const HttpRequest& req, const std::string& what, Outcome* out,
                                  int* retries_used = nullptr, std::initializer_list<long> final_status = {}) {
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    r = perform(req);
    *out = classify(r, what, !ctx.opts.token.empty());
    if (std::find(final_status.begin(), final_status.end(), r.status) != final_status.end()) return r;
    if (out->kind == ErrorKind::none || !out->retryable || attempt >= ctx.opts.retries || ctx.cancelled()) return r;
    double d = ctx.jitter_delay(attempt, out->retry_after);
    ctx.log(out->message + "; retry " + std::to_string(attempt + 1) + "/" + std::to_string(ctx.opts.retries) +
            " in " + std::to_string(static_cast<int>(d * 1000)) + " ms");
    if (retries_used) ++*retries_used;
    ctx.sleep_for(d);
  }
}

// huggingface_hub's _normalize_etag: etag.lstrip("W/").strip('"') -- the blob is named by it.
std::string normalize_etag(std::string e) {
  size_t a = 0;
  while (a < e.size() && (e[a] == 'W' || e[a] == '/')) ++a;
  while (a < e.size() && e[a] == '"') ++a;
  size_t b = e.size();
  while (b > a && e[b - 1] == '"') --b;
  return e.substr(a, b - a);
}

bool safe_etag(const std::string& e) {
  if (e.empty() || e.size() > 200 || e == "." || e == "..") return false;
  for (char c : e)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::optional<uint64_t> parse_u64(const std::string& s) { return parse_decimal_u64(s); }

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

// Where the holder of a blob's lock writes, so a waiter can tell a working holder from a
// hung one: files in `dir` named `prefix`[.*].incomplete (ckpt and huggingface_hub <= 1.17:
// <etag>.incomplete; >= 1.18: <etag>.<uuid8>.incomplete; local-dir: <hash>.<etag>*.incomplete).
struct LockWatch {
  fs::path dir;
  std::string prefix;
};

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

// An exclusive flock on a blob's lock file, polled so cancellation works.
// Waiting is bounded the way a stalled download is: while the holder makes progress — bytes
// added to its .incomplete, or the heartbeat a ckpt holder keeps on the lock file (its mtime,
// every 0.5 s, retries and hashing included) — the waiter waits, logging every 10 s; after
// max(stall_timeout, 2 s) without either it gives up with a network error naming the holder.
// Nothing is then written: the holder may still resume and write into the same temp file.
class FileLock {
 public:
  FileLock(Ctx& ctx, const fs::path& p, const LockWatch& watch) {
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
  ~FileLock() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (heartbeat_.joinable()) heartbeat_.join();
    if (fd_ >= 0) ::close(fd_);  // releases the flock; the lock file stays (as huggingface_hub)
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  const std::string& error() const { return error_; }
  ErrorKind kind() const { return kind_; }
  bool unsupported() const { return unsupported_; }

 private:
  struct Observation {
    uint64_t bytes = 0;  // total size of the watched temp files
    int64_t newest = 0;  // newest mtime (ns) among them and the lock file
    size_t files = 0;
    bool operator!=(const Observation& o) const { return bytes != o.bytes || newest != o.newest || files != o.files; }
  };
  Observation observe(const LockWatch& w) const {
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
  int fd_ = -1;
  ErrorKind kind_ = ErrorKind::none;
  std::string error_;
  bool unsupported_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

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

// ---------------------------------------------------------------------------------------
// Transfer of one blob into a temp file, with resume, ranges, retries and verification.

// The content hash of the temp file's prefix [0, hashed). A single stream hashes each chunk
// in the write callback, straight from libcurl's buffer, so the bytes are never read back;
// after a resume or parallel ranges the missing part is read back from the file.
struct HashState {
  HashState(EtagKind k, uint64_t s) : kind(k), size(s) { reset(); }
  EtagKind kind;
  uint64_t size;
  std::unique_ptr<Hasher> h;
  uint64_t hashed = 0;
  bool broken = false;  // a read error while catching up: verification re-reads the file
  void reset() {
    h = std::make_unique<Hasher>(kind, size);
    hashed = 0;
  }
  bool active() const { return kind != EtagKind::opaque && !broken; }
  void update(const char* d, size_t n) {
    h->update(d, n);
    hashed += n;
  }
  void catch_up(const fs::path& p, uint64_t upto) {
    if (!active() || upto <= hashed) return;
    if (hash_file_range(p, *h, hashed, upto, nullptr)) hashed = upto;
    else broken = true;
  }
  // Finishes the hash: call once, when the file is complete.
  std::string digest() { return active() && hashed == size ? h->hex_digest() : std::string(); }
};

// Hashes the written, contiguous prefix of the temp file on a helper thread while parallel
// ranges (or a resumed stream) land, so the hash is nearly done when the last byte is.
class PrefixHasher {
 public:
  PrefixHasher(HashState& hs, const fs::path& p) : hs_(hs), path_(p) {
    if (hs_.active()) thread_ = std::thread([this] { run(); });
  }
  ~PrefixHasher() { stop(); }
  PrefixHasher(const PrefixHasher&) = delete;
  PrefixHasher& operator=(const PrefixHasher&) = delete;
  void advance(uint64_t contiguous) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (contiguous <= target_) return;
      target_ = contiguous;
    }
    cv_.notify_one();
  }
  // Stops promptly; whatever is left is hashed by HashState::catch_up afterwards.
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      hs_.broken = true;
      return;
    }
    constexpr size_t kChunk = 4u << 20;
    std::unique_ptr<char[]> buf(new char[kChunk]);
    while (true) {
      uint64_t target;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || target_ > hs_.hashed; });
        if (stop_) break;
        target = std::min(target_, hs_.size);
      }
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, target - hs_.hashed));
      ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(hs_.hashed));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        hs_.broken = true;
        break;
      }
      hs_.update(buf.get(), static_cast<size_t>(n));
    }
    ::close(fd);
  }
  HashState& hs_;
  fs::path path_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t target_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

struct TransferState {
  TransferState(Ctx& c, const std::string& p, FileResult& f) : ctx(c), repo_path(p), fr(f) {}
  Ctx& ctx;
  const std::string& repo_path;
  FileResult& fr;
  FileProgress prog;
  Clock::time_point last_report{};
  std::mutex mu;
  HashState* hs = nullptr;              // content hash of the temp file's prefix
  PrefixHasher* prefix_hasher = nullptr;  // set while a helper thread follows the file
  long last_status = 0;  // status of the latest GET (a CDN 403 triggers a fresh HEAD)

  void report(uint64_t received, bool force = false) {
    if (!ctx.opts.on_progress) return;
    auto now = Clock::now();
    std::lock_guard<std::mutex> g(mu);
    if (!force && now - last_report < std::chrono::milliseconds(100)) return;
    last_report = now;
    prog.received = received;
    prog.retries = fr.retries;
    ctx.opts.on_progress(prog);
  }
};

struct AttemptResult {
  bool complete = false;      // the temp file holds `size` bytes
  bool restart = false;       // throw the temp file away and start from 0
  bool no_ranges = false;     // server ignored a Range (parallel mode falls back)
  bool fatal = false;
  Outcome outcome;
  uint64_t progressed = 0;
};

// libcurl (7.88) hands the write callback at most 16 KiB at a time; the bytes go through a
// per-thread buffer so the file sees a quarter of the pwrite calls.
// 64 KiB measured best on the 2-core bench machine: 16 KiB costs more system calls, and from
// 128 KiB on the kernel's copy into the page cache got markedly slower (cache misses with
// eight transfers sharing two cores); bench/README.md, Fetch.
constexpr size_t kWriteBuffer = 64u << 10;
char* write_buffer() {
  thread_local std::unique_ptr<char[]> b(new char[kWriteBuffer]);
  return b.get();
}

bool pwrite_all(int fd, const char* d, size_t n, uint64_t off, std::string* err) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd, d + done, n - done, static_cast<off_t>(off + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = std::string("write failed: ") + (w < 0 ? std::strerror(errno) : "no progress");
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

bool http_scheme(const std::string& url) {
  auto o = url_origin(url);
  return o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0;
}

std::string content_encoding(const HeaderList& hl) {
  for (const auto& [k, v] : hl)
    if (k == "content-encoding") {
      std::string e;
      for (char c : v) e += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (e != "identity" && !e.empty()) return e;
    }
  return {};
}

// GET `url` (following redirects, auth only on the endpoint's origin) for bytes [from, to),
// writing them at their offsets in fd. `pos` advances as bytes reach the file. A 206 that
// covers only the start of the asked range is accepted and the rest asked for again.
AttemptResult get_range(TransferState& ts, const std::string& url0, int fd, uint64_t from, uint64_t to,
                        uint64_t size, bool whole_file_mode, std::atomic<uint64_t>& pos,
                        const std::atomic<bool>* abort_flag) {
  Ctx& ctx = ts.ctx;
  AttemptResult ar;
  std::string url = url0;
  uint64_t cur = from;  // next byte to ask for
  char* buf = write_buffer();
  int hops = 0;
  for (int requests = 0; requests < 100000; ++requests) {
    if (hops > 10) break;
    HttpRequest req = ctx.base_request("GET", url);
    if (cur > 0 || to < size || !whole_file_mode)
      req.headers.push_back("Range: bytes=" + std::to_string(cur) + "-" + std::to_string(to - 1));
    bool bad = false;
    std::string bad_msg;
    bool redirect = false;
    long seen_status = 0;
    std::string err_body;
    uint64_t write_pos = cur;  // next byte expected from the body
    uint64_t range_end = to;   // end of what this response carries
    // Buffered writes: buf holds [buf_start, buf_start + used).
    uint64_t buf_start = cur;
    size_t used = 0;
    std::string write_err;
    uint64_t kicked = cur;  // durable mode: writeback already started for [.., kicked)
    auto flush = [&]() {
      if (used == 0) return true;
      if (!pwrite_all(fd, buf, used, buf_start, &write_err)) return false;
      buf_start += used;
      used = 0;
      pos = buf_start;
      if (ctx.opts.durable && buf_start - kicked >= (8u << 20)) {
        // Start writeback as the bytes arrive, so the fdatasync before publishing has little left.
        ::sync_file_range(fd, static_cast<off_t>(kicked), static_cast<off_t>(buf_start - kicked), SYNC_FILE_RANGE_WRITE);
        kicked = buf_start;
      }
      if (ts.prefix_hasher) ts.prefix_hasher->advance(buf_start);
      return true;
    };
    req.on_headers = [&](long status, const HeaderList& hl) {
      seen_status = status;
      HttpResponse tmp;
      tmp.headers = hl;
      if (status >= 300 && status < 400) {
        redirect = !tmp.header("location").empty();
        return true;  // a body, if any, is discarded; no Location is reported below
      }
      if (status >= 400) return true;  // error body collected for the message
      std::string enc = content_encoding(hl);
      if (status == 206) {
        // Content-Range: bytes a-b/total must start where we asked and stay inside it.
        auto cr = tmp.header("content-range");
        auto range = parse_content_range(cr);
        if (!enc.empty()) {
          if (!whole_file_mode) {  // ranges come back content-encoded: useless for parts
            ar.no_ranges = true;
            return false;
          }
          bad = true;
          bad_msg = "a ranged response came back with Content-Encoding: " + enc;
          return false;
        }
        if (!range || range->unsatisfied || range->first != cur || range->last >= to ||
            (range->total && *range->total != size)) {
          bad = true;
          bad_msg = "Content-Range '" + cr + "' does not match the requested bytes " + std::to_string(cur) + "-" +
                    std::to_string(to - 1) + "/" + std::to_string(size);
          return false;
        }
        range_end = range->last + 1;
        return true;
      }
      if (status == 200) {
        if (!whole_file_mode) {  // parallel part: the server ignores ranges
          ar.no_ranges = true;
          return false;
        }
        auto cl = tmp.header("content-length");
        if (enc.empty() && !cl.empty() && parse_u64(cl) != size) {
          bad = true;
          bad_msg = "Content-Length " + cl + " differs from the expected size " + std::to_string(size);
          return false;
        }
        if (cur > 0) {
          ctx.log(ts.repo_path + ": server ignored Range (200); restarting from byte 0");
          // A helper thread hashing the file must be gone before the file and the hash are
          // reset; the rest of this stream is then hashed by verify_blob's catch-up.
          if (ts.prefix_hasher) ts.prefix_hasher->stop();
          if (::ftruncate(fd, 0) != 0) {
            write_err = std::string("ftruncate: ") + std::strerror(errno);
            ar.fatal = true;
            return false;
          }
          cur = write_pos = buf_start = kicked = 0;
          pos = 0;
          if (ts.hs) ts.hs->reset();
        }
        range_end = to;
        return true;
      }
      bad = true;
      bad_msg = "unexpected HTTP " + std::to_string(status) + " for a download";
      return false;
    };
    req.on_body = [&](const char* data, size_t n) {
      if (seen_status >= 300 || redirect) {
        if (err_body.size() < 4096) err_body.append(data, std::min<size_t>(n, 4096 - err_body.size()));
        return true;
      }
      if (abort_flag && abort_flag->load(std::memory_order_relaxed)) return false;
      if (write_pos + n > range_end) {
        bad = true;
        bad_msg = "server sent more bytes than expected (" + std::to_string(write_pos + n - cur) + " > " +
                  std::to_string(range_end - cur) + ")";
        return false;
      }
      if (ts.hs && whole_file_mode && !ts.prefix_hasher && ts.hs->active() && ts.hs->hashed == write_pos)
        ts.hs->update(data, n);
      if (used + n > kWriteBuffer && !flush()) {
        ar.fatal = true;
        return false;
      }
      if (n > kWriteBuffer) {
        if (!pwrite_all(fd, data, n, write_pos, &write_err)) {
          ar.fatal = true;
          return false;
        }
        buf_start = write_pos + n;
        pos = buf_start;
      } else {
        std::memcpy(buf + used, data, n);
        used += n;
      }
      write_pos += n;
      if (whole_file_mode) ts.report(write_pos);
      return true;
    };
    HttpResponse r = perform(req);
    if (!ar.fatal && !flush()) ar.fatal = true;
    ts.last_status = r.status;
    ar.progressed += write_pos > cur ? write_pos - cur : 0;
    if (ar.fatal) {
      ar.outcome.kind = ErrorKind::io;
      ar.outcome.message = ts.repo_path + ": " + write_err;
      return ar;
    }
    if (ar.no_ranges) return ar;
    if (bad) {
      ar.outcome.kind = ErrorKind::protocol;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": " + bad_msg;
      ar.restart = whole_file_mode;
      return ar;
    }
    if (r.status >= 300 && r.status < 400 && r.transport_ok()) {
      if (!redirect) {
        ar.outcome.kind = ErrorKind::protocol;
        ar.outcome.message = ts.repo_path + ": HTTP " + std::to_string(r.status) + " without a Location to follow";
        return ar;
      }
      std::string next = resolve_location(url, r.header("location"));
      if (!http_scheme(next)) {
        ar.outcome.kind = ErrorKind::protocol;
        ar.outcome.message = ts.repo_path + ": redirect to a non-HTTP location refused (" + next.substr(0, 100) + ")";
        return ar;
      }
      if (url_origin(next) != url_origin(url)) ctx.log(ts.repo_path + ": following redirect to " + url_origin(next));
      url = next;
      ++hops;
      continue;
    }
    r.body = err_body;
    ar.outcome = classify(r, ts.repo_path, !ctx.opts.token.empty());
    if (r.status == 416) {
      if (!whole_file_mode) {  // parts beyond what the server holds: let one stream sort it out
        ar.no_ranges = true;
        return ar;
      }
      // Asked beyond the end: the temp file is complete or wrong; restart when unsure.
      ar.restart = true;
      ar.outcome.kind = ErrorKind::protocol;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": HTTP 416 for Range bytes=" + std::to_string(cur) + "- (Content-Range " +
                           r.header("content-range") + ")";
      return ar;
    }
    if (ar.outcome.kind != ErrorKind::none) return ar;
    if (write_pos == to) {
      ar.complete = true;
      return ar;
    }
    if (write_pos == range_end && range_end > cur) {
      // The server answered a smaller range than asked (allowed): ask for the rest.
      cur = write_pos;
      hops = 0;
      continue;
    }
    ar.outcome.kind = ErrorKind::network;
    ar.outcome.retryable = true;
    ar.outcome.message = ts.repo_path + ": body ended early: received " + std::to_string(write_pos) + " of " +
                         std::to_string(to) + " bytes" + (seen_status ? "" : " (no response)");
    return ar;
  }
  ar.outcome.kind = ErrorKind::protocol;
  ar.outcome.message = ts.repo_path + (hops > 10 ? ": too many redirects (a redirect loop?)"
                                                 : ": the server kept answering with tiny partial ranges; gave up");
  return ar;
}

// Download the whole blob to `tmp` (resuming from its current size). Returns true when
// tmp holds exactly `size` bytes (not yet hash-verified).
bool transfer(TransferState& ts, const std::string& url, const fs::path& tmp, uint64_t size) {
  Ctx& ctx = ts.ctx;
  struct Count {
    std::atomic<int>& n;
    explicit Count(std::atomic<int>& c) : n(c) { ++n; }
    ~Count() { --n; }
  } counting(ctx.transfers);
  FileResult& fr = ts.fr;
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fr.kind = ErrorKind::io;
    fr.error = "cannot open " + tmp.string() + ": " + std::strerror(errno);
    return false;
  }
  uint64_t have = file_size_or_zero(tmp);
  if (have > size) {
    if (::ftruncate(fd, 0) != 0) {}
    have = 0;
  }
  if (have > 0) ctx.log(ts.repo_path + ": resuming from byte " + std::to_string(have) + " of " + std::to_string(size));
  int failures = 0;        // attempts that failed without real progress
  int total_attempts = 0;  // hard cap
  bool ranges_ok = true;
  const uint64_t progress_unit = std::max<uint64_t>(1u << 20, size / 20);
  Outcome last;
  auto hash_ready = [&](uint64_t upto) {  // hs->hashed must not exceed what the file keeps
    if (ts.hs && ts.hs->hashed > upto) ts.hs->reset();
  };
  while (have < size) {
    if (ctx.cancelled()) {
      fr.kind = ErrorKind::cancelled;
      fr.error = "cancelled";
      break;
    }
    ++total_attempts;
    uint64_t before = have;
    AttemptResult ar;
    if (ranges_ok && ctx.opts.range_parts > 1 && size - have >= ctx.opts.range_threshold) {
      // Parallel ranges over [have, size); each part writes contiguously from its start.
      unsigned parts = ctx.opts.range_parts;
      uint64_t span = size - have;
      std::vector<uint64_t> starts(parts + 1);
      for (unsigned i = 0; i <= parts; ++i)  // 128-bit: span * i overflows for absurd sizes
        starts[i] = have + static_cast<uint64_t>(static_cast<unsigned __int128>(span) * i / parts);
      std::vector<std::atomic<uint64_t>> pos(parts);
      for (unsigned i = 0; i < parts; ++i) pos[i] = starts[i];
      std::vector<AttemptResult> res(parts);
      std::atomic<bool> abort_all{false};
      hash_ready(have);
      std::optional<PrefixHasher> ph;
      if (ts.hs) ph.emplace(*ts.hs, tmp);
      std::vector<std::thread> threads;
      for (unsigned i = 0; i < parts; ++i) {
        threads.emplace_back([&, i] {
          int part_fail = 0;
          while (pos[i] < starts[i + 1] && !abort_all && !ctx.cancelled()) {
            res[i] = get_range(ts, url, fd, pos[i], starts[i + 1], size, false, pos[i], &abort_all);
            if (res[i].complete) break;
            if (res[i].no_ranges || res[i].fatal || !res[i].outcome.retryable) {
              abort_all = true;
              break;
            }
            if (res[i].progressed < progress_unit / 4 && ++part_fail > ctx.opts.retries) {
              abort_all = true;
              break;
            }
            {
              std::lock_guard<std::mutex> g(ts.mu);
              ++fr.retries;
            }
            double d = ctx.jitter_delay(part_fail, res[i].outcome.retry_after);
            ctx.log(res[i].outcome.message + " (range part " + std::to_string(i + 1) + "/" + std::to_string(parts) +
                    "); retrying in " + std::to_string(static_cast<int>(d * 1000)) + " ms");
            ctx.sleep_for(d);
          }
        });
      }
      // Progress for the whole file, and the contiguous prefix for the hasher, while parts run.
      while (true) {
        bool all_done = true;
        uint64_t got = 0;
        for (unsigned i = 0; i < parts; ++i) got += pos[i] - starts[i];
        ts.report(have + got);
        if (ph) {
          uint64_t contiguous = have;
          for (unsigned i = 0; i < parts; ++i) {
            contiguous = pos[i];
            if (pos[i] < starts[i + 1]) break;
          }
          ph->advance(contiguous);
        }
        for (unsigned i = 0; i < parts; ++i)
          if (pos[i] < starts[i + 1] && !abort_all) all_done = false;
        if (all_done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (ctx.cancelled()) abort_all = true;
      }
      for (auto& t : threads) t.join();
      if (ph) ph->stop();
      // The contiguous prefix is what a later run can resume from.
      uint64_t prefix = have;
      bool all_complete = true;
      for (unsigned i = 0; i < parts; ++i) {
        if (pos[i] == starts[i + 1]) {
          prefix = starts[i + 1];
          continue;
        }
        prefix = pos[i];
        all_complete = false;
        break;
      }
      if (all_complete) {
        have = size;
        break;
      }
      if (::ftruncate(fd, static_cast<off_t>(prefix)) != 0) {}
      have = prefix;
      hash_ready(have);
      bool no_ranges = false;
      for (auto& r : res) {
        if (r.no_ranges) no_ranges = true;
        if (r.outcome.kind != ErrorKind::none) last = r.outcome;
        if (r.fatal) ar.fatal = true;
      }
      if (ar.fatal) break;
      if (no_ranges) {
        ctx.log(ts.repo_path + ": server does not honour Range requests; downloading in one stream");
        ranges_ok = false;
        continue;
      }
      if (ctx.cancelled()) continue;
      break;  // parts exhausted their retries
    }
    // One stream from `have`: hashed inline when the hash is at `have`, else a helper
    // thread catches up from the file and follows it.
    hash_ready(have);
    std::optional<PrefixHasher> ph;
    // The only transfer running, with a core to spare: the hash follows the file on a helper
    // thread (reading it back from the page cache) instead of in the write callback, so hashing
    // overlaps receiving. With several transfers the cores are busy anyway: inline is cheaper.
    bool offload = ctx.transfers.load() == 1 && size - have >= (16u << 20) && std::thread::hardware_concurrency() > 1;
    if (ts.hs && ts.hs->active() && (ts.hs->hashed < have || offload)) {
      ph.emplace(*ts.hs, tmp);
      ph->advance(have);
      ts.prefix_hasher = &*ph;
    }
    std::atomic<uint64_t> pos{have};
    ar = get_range(ts, url, fd, have, size, size, true, pos, nullptr);
    if (ph) {
      ph->stop();
      ts.prefix_hasher = nullptr;
    }
    have = pos;
    if (ar.restart) {
      if (::ftruncate(fd, 0) != 0) {}
      have = 0;
      hash_ready(0);
    }
    if (ar.complete) {
      have = size;
      break;
    }
    last = ar.outcome;
    if (ar.fatal || !ar.outcome.retryable) break;
    bool progressed = have >= before + progress_unit;
    if (!progressed) ++failures;
    if (failures > ctx.opts.retries || total_attempts > 4 * (ctx.opts.retries + 1) + 20) break;
    ++fr.retries;
    double d = ctx.jitter_delay(failures, ar.outcome.retry_after);
    ctx.log(ar.outcome.message + "; retry " + std::to_string(failures) + "/" + std::to_string(ctx.opts.retries) +
            " in " + std::to_string(static_cast<int>(d * 1000)) + " ms (have " + std::to_string(have) + "/" +
            std::to_string(size) + " bytes)");
    ctx.sleep_for(d);
  }
  ::close(fd);
  fr.received = have;
  if (have == size) return true;
  if (fr.kind == ErrorKind::none) {
    fr.kind = last.kind == ErrorKind::none ? ErrorKind::network : last.kind;
    fr.error = last.message.empty() ? "download failed" : last.message;
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Per-file pipeline.

std::string resolve_url(const Ctx& ctx, const std::string& path) {
  return ctx.opts.endpoint + "/" + ctx.url_prefix() + ctx.spec.repo_id + "/resolve/" + percent_encode(ctx.commit, false) +
         "/" + percent_encode(path, true);
}

// HEAD /resolve/<commit>/<path>, as huggingface_hub's get_hf_file_metadata: a relative
// Location (the 307 to /api/resolve-cache/...) is followed; an absolute one is where the GET
// goes and the metadata comes from the response that named it. A same-host absolute redirect
// whose response lacks the metadata (an alternative endpoint, HH#4739) is followed as well.
// Values missing from the last response come from earlier hops, then from the tree listing.
// The metadata request as a GET of the first byte (huggingface.js and hf_transfer ask that way):
// for servers that refuse HEAD. The body is never read (the transfer stops at the headers of a
// 2xx); error bodies are kept for the message.
void make_metadata_get(HttpRequest& req) {
  req.method = "GET";
  req.headers.push_back("Range: bytes=0-0");
  req.max_body = 64u << 10;
  req.on_headers = [](long status, const HeaderList&) { return status < 200 || status >= 300; };
}

// The complete size the server reports for a download URL, from a ranged GET of its first byte
// (206: Content-Range's complete length; 200: an unencoded Content-Length), following up to 10
// redirects; nullopt when it does not say.
std::optional<uint64_t> probe_size(Ctx& ctx, std::string url, const std::string& path, FileResult& fr) {
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request("GET", url);
    make_metadata_get(req);
    Outcome o;
    HttpResponse r = request_with_retries(ctx, req, path, &o, &fr.retries);
    if (o.kind != ErrorKind::none) return std::nullopt;
    if (r.status >= 300 && r.status < 400) {
      auto loc = r.header("location");
      if (loc.empty()) return std::nullopt;
      url = resolve_location(url, loc);
      if (!http_scheme(url)) return std::nullopt;
      continue;
    }
    if (!r.header("content-encoding").empty() && r.header("content-encoding") != "identity") return std::nullopt;
    if (r.status == 206) {
      auto cr = parse_content_range(r.header("content-range"));
      return cr ? cr->total : std::nullopt;
    }
    if (r.status == 200) return parse_decimal_u64(r.header("content-length"));
    return std::nullopt;
  }
  return std::nullopt;
}

bool head_metadata(Ctx& ctx, const std::string& path, const TreeEntry* te, Meta& meta, FileResult& fr) {
  std::string url = resolve_url(ctx, path);
  std::string commit_seen, linked_etag_seen, etag_seen, linked_size_seen;
  bool use_get = false;  // the server refused HEAD (405 / 501): GET the first byte instead
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request(use_get ? "GET" : "HEAD", url);
    if (use_get) make_metadata_get(req);
    Outcome o;
    HttpResponse r = request_with_retries(ctx, req, path, &o, &fr.retries, {405, 501});
    if (!use_get && (r.status == 405 || r.status == 501)) {
      ctx.log(path + ": the server refuses HEAD (HTTP " + std::to_string(r.status) +
              "); reading the file's metadata from a GET of its first byte");
      use_get = true;
      --hop;
      continue;
    }
    std::string commit = r.header("x-repo-commit");
    if (!commit.empty()) commit_seen = commit;
    if (o.kind != ErrorKind::none) {
      fr.kind = o.kind;
      fr.error = o.message;
      if (o.kind == ErrorKind::entry_not_found && !commit_seen.empty() && !ctx.local && is_commit(commit_seen) &&
          safe_repo_path(path)) {
        // huggingface_hub's negative cache: .no_exist/<commit>/<path>
        auto p = ctx.repo_dir / ".no_exist" / commit_seen / path;
        std::error_code ec;
        fs::create_directories(p.parent_path(), ec);
        std::ofstream(p, std::ios::app);
      }
      return false;
    }
    bool is_redirect = r.status >= 300 && r.status < 400;
    // X-Linked-* (the hub's word on the content) beat a plain ETag / Content-Length, which on a
    // storage server after a redirect may describe something else (an S3 multipart etag).
    std::string linked_etag = normalize_etag(r.header("x-linked-etag"));
    std::string plain_etag = normalize_etag(r.header("etag"));
    std::string linked_size = r.header("x-linked-size");
    std::string plain_size;
    bool encoded = !r.header("content-encoding").empty() && r.header("content-encoding") != "identity";
    if (!is_redirect && !encoded && r.status == 200) plain_size = r.header("content-length");
    if (r.status == 206 && !encoded)  // the GET fallback: the complete length of Content-Range
      if (auto cr = parse_content_range(r.header("content-range")); cr && cr->total)
        plain_size = std::to_string(*cr->total);
    auto loc = r.header("location");
    if (is_redirect && loc.empty()) {
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": HTTP " + std::to_string(r.status) + " redirect without Location on the metadata request";
      return false;
    }
    if (!is_redirect && r.status != 200 && !(use_get && r.status == 206)) {
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": unexpected HTTP " + std::to_string(r.status) + " on the metadata request";
      return false;
    }
    if (is_redirect) {
      std::string next = resolve_location(url, loc);
      if (!http_scheme(next)) {
        fr.kind = ErrorKind::protocol;
        fr.error = path + ": redirect to a non-HTTP location refused (" + next.substr(0, 100) + ")";
        return false;
      }
      bool relative = loc.find("://") == std::string::npos && loc.rfind("//", 0) != 0;
      bool same_host = url_origin(next) == url_origin(url);
      bool complete = !commit_seen.empty() && !(linked_etag.empty() && plain_etag.empty()) && parse_u64(linked_size);
      if (relative || (same_host && !complete)) {
        if (!linked_etag.empty()) linked_etag_seen = linked_etag;
        if (!plain_etag.empty()) etag_seen = plain_etag;
        if (!linked_size.empty()) linked_size_seen = linked_size;
        url = next;  // same host: follow, keep auth
        continue;
      }
      meta.location = next;
      meta.cross_host = !same_host;
    } else {
      meta.location = url;
    }
    meta.commit = commit_seen;
    for (const std::string* e : {&linked_etag, &linked_etag_seen, &plain_etag, &etag_seen})
      if (meta.etag.empty()) meta.etag = *e;
    auto size = parse_u64(linked_size);
    if (!size) size = parse_u64(linked_size_seen);
    if (!size) size = parse_u64(plain_size);
    // The tree listing fills what the metadata response left out (and is checked against
    // it where both exist, in fetch_checked_metadata).
    std::string tree_hash = te ? (!te->lfs_oid.empty() ? te->lfs_oid : te->oid) : std::string();
    if (meta.etag.empty() && !tree_hash.empty() && etag_kind(tree_hash) != EtagKind::opaque) {
      ctx.log(path + ": no ETag on the metadata response; using the tree listing's hash " + tree_hash);
      meta.etag = tree_hash;
    }
    if (!size && te && te->size) {
      ctx.log(path + ": no X-Linked-Size/Content-Length on the metadata response; using the tree listing's size");
      size = te->size;
    }
    if (!size && !meta.commit.empty() && !meta.etag.empty()) {
      // Neither the hub nor a listing gives the size. When the bytes can be hash-verified, the
      // download URL may tell it (a ranged GET of one byte): a wrong answer cannot pass the hash.
      std::string e = meta.etag;
      for (auto& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool hashable = etag_kind(e) != EtagKind::opaque ||
                      (te && etag_kind(!te->lfs_oid.empty() ? te->lfs_oid : te->oid) != EtagKind::opaque);
      if (hashable) {
        size = probe_size(ctx, meta.location, path, fr);
        if (size) ctx.log(path + ": no size in the metadata; the download URL reports " + std::to_string(*size) + " bytes");
      }
    }
    std::vector<std::string> missing;
    if (meta.commit.empty()) missing.push_back("X-Repo-Commit");
    if (meta.etag.empty()) missing.push_back("ETag/X-Linked-Etag");
    if (!size) missing.push_back("X-Linked-Size/Content-Length");
    if (!missing.empty()) {
      std::string m;
      for (auto& s : missing) m += (m.empty() ? "" : ", ") + s;
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": the hub's metadata response lacks " + m +
                 " (a proxy or mirror in the way? huggingface_hub fails the same way)";
      return false;
    }
    meta.size = *size;
    return true;
  }
  fr.kind = ErrorKind::protocol;
  fr.error = path + ": too many same-host redirects on the metadata request (a redirect loop?)";
  return false;
}

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

mode_t umask_mode() {
  static mode_t m = [] {
    mode_t u = ::umask(0);
    ::umask(u);
    return static_cast<mode_t>(0666 & ~u);
  }();
  return m;
}

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

// A signed CDN URL can expire mid-download (403/401 from the CDN): ask the hub for a fresh
// location (same etag and size) and continue, at most twice.
bool obtain_with_refresh(Ctx& ctx, TransferState& ts, const TreeEntry& te, Meta& meta, const fs::path& tmp) {
  for (int refresh = 0;; ++refresh) {
    ts.last_status = 0;
    if (obtain_verified(ctx, ts, meta, tmp)) return true;
    if (!meta.cross_host || (ts.last_status != 403 && ts.last_status != 401) || refresh >= 2 || ctx.cancelled())
      return false;
    ctx.log(ts.repo_path + ": the CDN refused the download URL (HTTP " + std::to_string(ts.last_status) +
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

std::string lower_hex(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// HEAD the file and check what the hub says against the commit being fetched and the tree
// listing; on failure `fr` holds the classified error. `outcome` ends the message
// ("nothing published" / "nothing written").
bool fetch_checked_metadata(Ctx& ctx, const TreeEntry& te, const std::string& path, Meta& meta, FileResult& fr,
                            const char* outcome) {
  if (!head_metadata(ctx, path, &te, meta, fr)) return false;
  fr.etag = meta.etag;
  fr.expected = meta.size;
  auto fail = [&](std::string msg) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": " + msg + "; " + outcome;
    return false;
  };
  if (meta.commit != ctx.commit)
    return fail("the hub answered for commit " + meta.commit + " while fetching commit " + ctx.commit +
                " (the revision moved or a proxy rewrote it)");
  if (!safe_etag(meta.etag)) return fail("unusable etag '" + meta.etag.substr(0, 80) + "'");
  if (te.size && *te.size != meta.size) {
    ctx.tree_contradicted = true;
    return fail("the tree listing says " + std::to_string(*te.size) + " bytes but the file metadata says " +
                std::to_string(meta.size));
  }
  // The hash the bytes must have: the etag (sha256 for LFS, git sha1 otherwise, any case),
  // else the listing's.
  std::string etag_l = lower_hex(meta.etag);
  EtagKind ek = etag_kind(etag_l);
  std::string tree_hash = lower_hex(!te.lfs_oid.empty() ? te.lfs_oid : te.oid);
  EtagKind tk = etag_kind(tree_hash);
  if (ek != EtagKind::opaque) {
    // A git-sha1 etag is compared with the listing's oid; a sha256 one with its lfs.oid.
    bool comparable = tk == ek && (ek == EtagKind::git_sha1 || !te.lfs_oid.empty());
    if (comparable && tree_hash != etag_l) {
      ctx.tree_contradicted = true;
      return fail("the tree listing's hash " + tree_hash + " differs from the file's etag " + meta.etag);
    }
    meta.hash = etag_l;
    meta.hash_kind = ek;
  } else if (tk != EtagKind::opaque) {
    meta.hash = tree_hash;
    meta.hash_kind = tk;
  }
  return true;
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
      if (!obtain_with_refresh(ctx, ts, te, meta, tmp)) {
        if (lock.unsupported()) fs::remove(tmp, ec);
        ts.prog.failed = true;
        ts.report(fr.received, true);
        return;
      }
      ::chmod(tmp.c_str(), umask_mode());
      if (::rename(tmp.c_str(), blob.c_str()) != 0) {
        fr.kind = ErrorKind::io;
        fr.error = path + ": cannot move blob into place: " + std::strerror(errno);
        return;
      }
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
  if (!obtain_with_refresh(ctx, ts, te, meta, tmp)) {
    if (lock.unsupported()) fs::remove(tmp, ec);
    ts.prog.failed = true;
    ts.report(fr.received, true);
    return;
  }
  ::chmod(tmp.c_str(), umask_mode());
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    fr.kind = ErrorKind::io;
    fr.error = path + ": cannot move the file into place: " + std::strerror(errno);
    return;
  }
  if (!write_meta()) return;
  fr.ok = true;
  fr.received = meta.size;
  ts.prog.done = true;
  ts.report(meta.size, true);
}

// ---------------------------------------------------------------------------------------
// Revision and tree.

RemoteRevision remote_revision(Ctx& ctx, std::vector<std::string>* siblings) {
  RemoteRevision rr;
  std::string url = ctx.opts.endpoint + "/api/" + ctx.type_plural() + "/" + ctx.spec.repo_id + "/revision/" +
                    percent_encode(ctx.spec.revision, false);
  HttpRequest req = ctx.base_request("GET", url);
  Outcome o;
  HttpResponse r = request_with_retries(ctx, req, ctx.spec.repo_id + "@" + ctx.spec.revision, &o);
  if (o.kind != ErrorKind::none) {
    rr.kind = o.kind;
    rr.error = o.message;
    return rr;
  }
  if (r.status != 200) {
    rr.kind = ErrorKind::http;
    rr.error = ctx.spec.repo_id + "@" + ctx.spec.revision + ": unexpected HTTP " + std::to_string(r.status) +
               " from the revision API";
    return rr;
  }
  auto pr = json::parse(r.body);
  if (!pr.ok() || !pr.value.is_object()) {
    rr.kind = ErrorKind::protocol;
    rr.error = ctx.spec.repo_id + ": the revision API answered with invalid JSON" +
               (pr.error ? " (" + pr.error->message + ")" : std::string());
    return rr;
  }
  auto sha = pr.value.get_string("sha");
  if (!sha || !is_commit(*sha)) {
    rr.kind = ErrorKind::protocol;
    rr.error = ctx.spec.repo_id + "@" + ctx.spec.revision + ": the revision API gave no 40-hex commit sha";
    return rr;
  }
  if (siblings) {
    if (auto* s = pr.value.find("siblings"); s && s->is_array())
      for (const auto& e : s->as_array())
        if (e.is_object())
          if (auto f = e.get_string("rfilename")) siblings->push_back(*f);
  }
  rr.ok = true;
  rr.commit = *sha;
  return rr;
}

std::string next_link(const std::string& link) {
  // Link: <url>; rel="next", <url2>; rel="prev"
  size_t p = 0;
  while (p < link.size()) {
    auto lt = link.find('<', p);
    if (lt == std::string::npos) break;
    auto gt = link.find('>', lt);
    if (gt == std::string::npos) break;
    auto comma = link.find(",", gt);
    auto params = link.substr(gt + 1, comma == std::string::npos ? std::string::npos : comma - gt - 1);
    if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
      return link.substr(lt + 1, gt - lt - 1);
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  return {};
}

bool list_tree(Ctx& ctx, std::vector<TreeEntry>& out, Outcome& o) {
  std::string url = ctx.opts.endpoint + "/api/" + ctx.type_plural() + "/" + ctx.spec.repo_id + "/tree/" +
                    percent_encode(ctx.commit, false) + "?recursive=true&expand=false";
  std::set<std::string> seen_urls;
  for (int page = 0; page < 100000 && !url.empty(); ++page) {
    if (!seen_urls.insert(url).second) {
      o.kind = ErrorKind::protocol;
      o.message = ctx.spec.repo_id + ": tree pagination loops";
      return false;
    }
    HttpRequest req = ctx.base_request("GET", url);
    HttpResponse r = request_with_retries(ctx, req, ctx.spec.repo_id + " tree listing", &o);
    if (o.kind != ErrorKind::none) return false;
    auto pr = json::parse(r.body);
    if (r.status != 200 || !pr.ok() || !pr.value.is_array()) {
      o.kind = ErrorKind::protocol;
      o.message = ctx.spec.repo_id + ": the tree API answered HTTP " + std::to_string(r.status) + " without a JSON list";
      return false;
    }
    for (const auto& e : pr.value.as_array()) {
      auto type = e.is_object() ? e.get_string("type") : std::nullopt;
      if (!e.is_object() || type.value_or("file") != "file") continue;
      auto p = e.get_string("path");
      if (!p) continue;
      TreeEntry te;
      te.path = *p;
      const json::Value* sz = e.find("size");
      if (auto s = e.get_int("size"); s && *s >= 0) te.size = static_cast<uint64_t>(*s);
      te.oid = e.get_string("oid").value_or("");
      const json::Value* lfs = e.find("lfs");
      bool lfs_ok = true;
      if (lfs && lfs->is_object()) {
        te.lfs_oid = lfs->get_string("oid").value_or(lfs->get_string("sha256").value_or(""));
        auto ls = lfs->get_int("size");
        if (ls && *ls >= 0) {
          te.size = static_cast<uint64_t>(*ls);
          te.lfs_size = *ls;
        }
        te.has_lfs = true;
        lfs_ok = ls && *ls >= 0 && lfs->get_string("oid");
      } else if (lfs && !lfs->is_null()) {
        lfs_ok = false;
      }
      // Kept for trees/<commit>.json only when every field huggingface_hub stores is well formed.
      if (const json::Value* xh = e.find("xetHash"); xh && xh->is_string()) te.xet_hash = xh->as_string();
      te.cacheable = type.has_value() && sz && sz->is_int() && sz->as_int() >= 0 && e.get_string("oid") && lfs_ok;
      if (te.cacheable) te.raw_size = sz->as_int();
      out.push_back(std::move(te));
      if (out.size() > 10'000'000) {
        o.kind = ErrorKind::protocol;
        o.message = ctx.spec.repo_id + ": tree listing too large";
        return false;
      }
    }
    std::string next = next_link(r.header_all("link"));
    if (!next.empty()) {
      next = resolve_location(url, next);
      if (url_origin(next) != ctx.origin) {
        o.kind = ErrorKind::protocol;
        o.message = ctx.spec.repo_id + ": tree pagination points to another host (" + url_origin(next) + ")";
        return false;
      }
    }
    url = next;
  }
  return true;
}

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

bool selected(const FetchOptions& o, const std::string& path) {
  if (!o.include.empty()) {
    bool any = false;
    for (const auto& g : o.include) any = any || glob_match(g, path);
    if (!any) return false;
  }
  for (const auto& g : o.exclude)
    if (glob_match(g, path)) return false;
  return true;
}

void walk_snapshot(const fs::path& root, const fs::path& dir, std::vector<std::string>& out, int depth) {
  if (depth > 32 || out.size() > 1'000'000) return;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) {
      walk_snapshot(root, it->path(), out, depth + 1);
    } else {
      out.push_back(fs::relative(it->path(), root, ec).generic_string());
    }
  }
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

FetchResult fetch_offline(Ctx& ctx, FetchResult res) {
  if (ctx.local) {
    res.kind = ErrorKind::offline_missing;
    res.error = "offline mode with --local-dir: nothing to resolve without the network";
    return res;
  }
  auto rl = resolve_local(ctx.spec, ctx.opts.cache_dir);
  if (!rl.ok) {
    res.kind = ErrorKind::offline_missing;
    res.error = rl.error + " (offline mode: the network was not used)";
    return res;
  }
  res.commit = rl.commit;
  res.snapshot_dir = rl.snapshot_dir;
  std::vector<std::string> files;
  // With a cached listing (trees/<commit>.json) the snapshot is checked against it, as
  // snapshot_download(local_files_only=True) does: a file it lists that is missing (or, here, of
  // another size) is reported instead of the partial snapshot passing for whole.
  auto listing = read_tree_cache(ctx.repo_dir / "trees" / (rl.commit + ".json"));
  if (!ctx.opts.paths.empty()) {
    files = ctx.opts.paths;
  } else if (listing) {
    for (const auto& [p, size] : *listing)
      if (selected(ctx.opts, p)) files.push_back(p);
  } else {
    walk_snapshot(rl.snapshot_dir, rl.snapshot_dir, files, 0);
    std::sort(files.begin(), files.end());
    std::erase_if(files, [&](const std::string& p) { return !selected(ctx.opts, p); });
  }
  res.ok = true;
  for (const auto& p : files) {
    FileResult fr;
    fr.path = p;
    uint64_t sz = 0;
    std::optional<uint64_t> listed;
    if (listing)
      if (auto it = listing->find(p); it != listing->end()) listed = it->second;
    if (!safe_repo_path(p)) {
      fr.kind = ErrorKind::protocol;
      fr.error = "unsafe file name in the cached listing: '" + p.substr(0, 200) + "'";
      res.ok = false;
    } else if (!regular_file_exists(rl.snapshot_dir / p, &sz)) {
      fr.kind = ErrorKind::offline_missing;
      fr.error = p + ": not in the cached snapshot " + rl.commit + (listed ? " (listed in its trees/ entry)" : "") +
                 " (offline mode)";
      fr.expected = listed.value_or(0);
      res.ok = false;
    } else if (listed && *listed != sz) {
      fr.kind = ErrorKind::integrity;
      fr.error = p + ": the cached file has " + std::to_string(sz) + " bytes, the commit's listing says " +
                 std::to_string(*listed) + " (offline mode)";
      fr.expected = *listed;
      res.ok = false;
    } else {
      fr.ok = fr.cached = true;
      fr.expected = fr.received = sz;
    }
    res.files.push_back(std::move(fr));
  }
  if (!res.ok) {
    size_t failed = 0;
    for (const auto& f : res.files) {
      failed += !f.ok;
      if (!f.ok && res.kind == ErrorKind::none) res.kind = f.kind;
    }
    res.error = std::to_string(failed) + " of " + std::to_string(res.files.size()) +
                " files missing or different in the cached snapshot (offline mode: the network was not used)";
  }
  return res;
}

}  // namespace

ResolveResult resolve_local(const RepoSpec& spec, const fs::path& cache_dir_in) {
  ResolveResult rr;
  fs::path cache_dir = cache_dir_in.empty() ? default_cache_dir() : cache_dir_in;
  fs::path repo_dir = cache_dir / repo_folder(spec);
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec)) {
    rr.error = spec.repo_id + " is not in the cache (" + repo_dir.string() + " does not exist)";
    return rr;
  }
  if (is_commit(spec.revision)) {
    rr.commit = spec.revision;
  } else {
    if (!safe_repo_path(spec.revision)) {
      rr.error = "invalid revision '" + spec.revision + "'";
      return rr;
    }
    fs::path ref = repo_dir / "refs" / spec.revision;
    std::ifstream f(ref, std::ios::binary);
    if (!f) {
      rr.error = spec.repo_id + "@" + spec.revision + ": no refs/" + spec.revision + " in " + repo_dir.string();
      return rr;
    }
    std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!is_commit(content)) {
      std::string shown = content.substr(0, 60);
      for (auto& c : shown)
        if (c == '\n') c = '~';
      rr.error = spec.repo_id + ": refs/" + spec.revision + " is not exactly a 40-hex commit (found '" + shown +
                 "'); huggingface_hub would fail on it too";
      return rr;
    }
    rr.commit = content;
  }
  rr.snapshot_dir = repo_dir / "snapshots" / rr.commit;
  if (!fs::is_directory(rr.snapshot_dir, ec)) {
    rr.error = spec.repo_id + "@" + spec.revision + ": snapshot " + rr.commit + " is not in the cache";
    return rr;
  }
  rr.ok = true;
  return rr;
}

RemoteRevision resolve_remote(const RepoSpec& spec, const FetchOptions& opts_in) {
  Ctx ctx{spec, opts_in};
  apply_environment(ctx.opts);
  ctx.origin = url_origin(ctx.opts.endpoint);
  if (ctx.opts.offline) {
    RemoteRevision rr;
    rr.kind = ErrorKind::offline_missing;
    rr.error = "offline mode";
    return rr;
  }
  return remote_revision(ctx, nullptr);
}

FetchResult fetch(const RepoSpec& spec, const FetchOptions& opts_in) {
  auto t0 = Clock::now();
  FetchResult res;
  res.spec = spec;
  Ctx ctx{spec, opts_in};
  apply_environment(ctx.opts);
  ctx.origin = url_origin(ctx.opts.endpoint);
  if (ctx.opts.jobs == 0) ctx.opts.jobs = 1;
  if (ctx.opts.jobs > 64) ctx.opts.jobs = 64;
  if (ctx.opts.range_parts > 32) ctx.opts.range_parts = 32;
  if (!ctx.opts.local_dir.empty()) {
    ctx.local = true;
    ctx.repo_dir = ctx.opts.local_dir;
  } else {
    ctx.repo_dir = ctx.opts.cache_dir / repo_folder(spec);
    ctx.locks_dir = ctx.opts.cache_dir / ".locks" / repo_folder(spec);
  }
  auto finish = [&](FetchResult& r) {
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (const auto& f : r.files) r.bytes_downloaded += f.downloaded;
    return r;
  };
  for (const auto& p : ctx.opts.paths) {
    if (!safe_repo_path(p)) {
      res.kind = ErrorKind::protocol;
      res.error = "unsafe file name '" + p + "' (absolute, '..' or backslash): refused";
      return finish(res);
    }
  }
  if (ctx.opts.offline) {
    res = fetch_offline(ctx, std::move(res));
    return finish(res);
  }
  // A commit revision whose requested files are all cached needs no network.
  if (!ctx.local && is_commit(spec.revision) && !ctx.opts.paths.empty()) {
    auto snap = ctx.repo_dir / "snapshots" / spec.revision;
    bool all = true;
    for (const auto& p : ctx.opts.paths) all = all && regular_file_exists(snap / p, nullptr);
    if (all) {
      res = fetch_offline(ctx, std::move(res));
      return finish(res);
    }
  }
  std::vector<std::string> siblings;
  auto rr = remote_revision(ctx, &siblings);
  if (!rr.ok) {
    res.kind = rr.kind;
    res.error = rr.error;
    return finish(res);
  }
  ctx.commit = res.commit = rr.commit;
  std::vector<TreeEntry> tree;
  Outcome to;
  bool listed = list_tree(ctx, tree, to);
  if (!listed) {
    if (to.kind == ErrorKind::http || to.kind == ErrorKind::protocol) {
      ctx.log("warning: " + to.message + "; using the file list from the revision API (no sizes)");
      tree.clear();
      for (auto& s : siblings) {
        TreeEntry te;
        te.path = s;
        tree.push_back(std::move(te));
      }
    } else {
      res.kind = to.kind;
      res.error = to.message;
      return finish(res);
    }
  }
  std::vector<TreeEntry> plan;
  std::vector<FileResult> rejected;
  if (!ctx.opts.paths.empty()) {
    std::map<std::string, const TreeEntry*> by_path;
    for (const auto& t : tree) by_path[t.path] = &t;
    for (const auto& p : ctx.opts.paths) {
      auto it = by_path.find(p);
      TreeEntry bare;
      bare.path = p;
      plan.push_back(it != by_path.end() ? *it->second : bare);
    }
  } else {
    for (const auto& t : tree)
      if (selected(ctx.opts, t.path)) plan.push_back(t);
  }
  {  // one worker per path, even if the listing repeats one (the last entry wins, as a dict)
    std::map<std::string, size_t> last;
    for (size_t i = 0; i < plan.size(); ++i) last[plan[i].path] = i;
    std::vector<TreeEntry> unique;
    for (size_t i = 0; i < plan.size(); ++i)
      if (last[plan[i].path] == i) unique.push_back(std::move(plan[i]));
    plan = std::move(unique);
  }
  std::erase_if(plan, [&](const TreeEntry& t) {
    bool bad = !safe_repo_path(t.path) || (ctx.local && (t.path == ".cache" || t.path.rfind(".cache/", 0) == 0));
    if (bad) {
      FileResult fr;
      fr.path = t.path;
      fr.kind = ErrorKind::protocol;
      fr.error = "unsafe file name in the repo listing: '" + t.path.substr(0, 200) +
                 "' would escape the target directory; refused";
      rejected.push_back(std::move(fr));
    }
    return bad;
  });
  if (ctx.opts.on_plan) {
    uint64_t known = 0;
    for (const auto& t : plan) known = t.size.value_or(0) > UINT64_MAX - known ? UINT64_MAX : known + t.size.value_or(0);
    ctx.opts.on_plan(plan.size(), known);
  }
  if (ctx.local) {
    ensure_local_cache_dir(ctx.repo_dir);
    res.snapshot_dir = ctx.repo_dir;
  } else {
    res.snapshot_dir = ctx.repo_dir / "snapshots" / ctx.commit;
  }
  // trees/<commit>.json: written, as huggingface_hub >= 1.22 does, from a complete listing and
  // before any file, so a snapshot this run leaves incomplete (failure, Ctrl-C, --include) is
  // reported by snapshot_download(local_files_only=True) instead of loading silently.
  bool wrote_tree = listed && write_tree_cache(ctx, ctx.local ? ctx.repo_dir / ".cache" / "huggingface" : ctx.repo_dir, tree);
  // Workers: one file each, `jobs` at a time.
  std::vector<FileResult> results(plan.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    while (true) {
      size_t i = next++;
      if (i >= plan.size()) return;
      results[i].path = plan[i].path;
      if (ctx.cancelled()) {
        results[i].kind = ErrorKind::cancelled;
        results[i].error = "cancelled";
        continue;
      }
      try {
        if (ctx.local) fetch_one_local(ctx, plan[i], results[i]);
        else fetch_one_cache(ctx, plan[i], results[i]);
      } catch (const std::exception& e) {
        results[i].ok = false;
        results[i].kind = ErrorKind::io;
        results[i].error = plan[i].path + ": " + e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  unsigned n = std::min<unsigned>(ctx.opts.jobs, static_cast<unsigned>(std::max<size_t>(plan.size(), 1)));
  for (unsigned i = 0; i + 1 < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  res.files = std::move(results);
  for (auto& r : rejected) res.files.push_back(std::move(r));
  res.ok = true;
  for (const auto& f : res.files)
    if (!f.ok) {
      res.ok = false;
      if (res.kind == ErrorKind::none) res.kind = f.kind;
    }
  if (wrote_tree && ctx.tree_contradicted) {
    // The hub's own metadata disagreed with its listing: the cache keeps no listing it cannot trust.
    std::error_code ec;
    fs::remove((ctx.local ? ctx.repo_dir / ".cache" / "huggingface" : ctx.repo_dir) / "trees" / (ctx.commit + ".json"), ec);
  }
  if (!ctx.local && res.ok) {
    std::error_code ec;
    fs::create_directories(res.snapshot_dir, ec);
    // refs/<revision> last, only when every requested file is published.
    fs::path ref = ctx.repo_dir / "refs" / spec.revision;
    std::ifstream cur_ref(ref, std::ios::binary);
    std::string cur((std::istreambuf_iterator<char>(cur_ref)), std::istreambuf_iterator<char>());
    if (spec.revision != ctx.commit && cur != ctx.commit) {  // as huggingface_hub: only when it changes
      std::string err;
      if (!write_file_atomic(ctx.repo_dir / "refs" / spec.revision, ctx.commit, &err)) {
        res.ok = false;
        res.kind = ErrorKind::io;
        res.error = err;
      }
    }
  }
  if (!res.ok && res.error.empty()) {
    size_t failed = 0;
    for (const auto& f : res.files) failed += !f.ok;
    res.error = std::to_string(failed) + " of " + std::to_string(res.files.size()) + " files failed";
  }
  return finish(res);
}

}  // namespace ckpt::hub
