// The fetch pipeline: revision -> commit (API), tree listing at the commit, per-file
// HEAD (same-host redirects only), transfer with stall detection / retries / resume /
// parallel ranges, size + hash verification, atomic publish in huggingface_hub's layout.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "ckpt/hub.h"
#include "ckpt/json.h"
#include "hub/hash.h"
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

double parse_retry_after(const HttpResponse& r) {
  // RateLimit: "resolvers";r=0;t=172 -> wait t+1 when r == 0; else numeric Retry-After.
  auto rl = r.header("ratelimit");
  if (!rl.empty()) {
    auto rp = rl.find(";r=");
    auto tp = rl.find(";t=");
    if (rp != std::string::npos && tp != std::string::npos) {
      long rem = std::strtol(rl.c_str() + rp + 3, nullptr, 10);
      long t = std::strtol(rl.c_str() + tp + 3, nullptr, 10);
      if (rem == 0 && t >= 0) return static_cast<double>(t) + 1;
    }
  }
  auto ra = r.header("retry-after");
  if (!ra.empty()) {
    char* end = nullptr;
    double v = std::strtod(ra.c_str(), &end);
    if (end != ra.c_str() && v >= 0) return v;
  }
  return -1;
}

Outcome classify(const HttpResponse& r, const std::string& what, bool have_token) {
  Outcome o;
  if (r.cancelled) {
    o.kind = ErrorKind::cancelled;
    o.message = what + ": cancelled";
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
    o.retry_after = parse_retry_after(r);
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
};

struct TreeEntry {
  std::string path;
  std::optional<uint64_t> size;
  std::string oid, lfs_oid;
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
HttpResponse request_with_retries(Ctx& ctx, const HttpRequest& req, const std::string& what, Outcome* out,
                                  int* retries_used = nullptr) {
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    r = perform(req);
    *out = classify(r, what, !ctx.opts.token.empty());
    if (out->kind == ErrorKind::none || !out->retryable || attempt >= ctx.opts.retries || ctx.cancelled()) return r;
    double d = ctx.jitter_delay(attempt, out->retry_after);
    ctx.log(out->message + "; retry " + std::to_string(attempt + 1) + "/" + std::to_string(ctx.opts.retries) +
            " in " + std::to_string(static_cast<int>(d * 1000)) + " ms");
    if (retries_used) ++*retries_used;
    ctx.sleep_for(d);
  }
}

std::string normalize_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

bool safe_etag(const std::string& e) {
  if (e.empty() || e.size() > 200 || e == "." || e == "..") return false;
  for (char c : e)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::optional<uint64_t> parse_u64(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// Filesystem helpers.

bool write_file_atomic(const fs::path& p, const std::string& content, std::string* err) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  auto tmp = p.parent_path() / (".tmp." + p.filename().string() + "." + std::to_string(::getpid()) + "." +
                                std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << content;
    f.flush();
    if (!f) {
      if (err) *err = "cannot write " + tmp.string();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    if (err) *err = "cannot rename to " + p.string() + ": " + ec.message();
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

// An exclusive flock, polled so cancellation works; "Still waiting" logged every 10 s.
class FileLock {
 public:
  FileLock(Ctx& ctx, const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
    if (fd_ < 0) {
      error_ = "cannot open lock " + p.string() + ": " + std::strerror(errno);
      return;
    }
    auto start = Clock::now();
    auto next_log = start + std::chrono::seconds(10);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK && errno != EINTR) {
        // flock unsupported: cooperate without it (hash verification still guards the blob).
        ctx.log("warning: flock on " + p.string() + " failed (" + std::strerror(errno) + "); continuing without lock");
        return;
      }
      if (ctx.cancelled()) {
        error_ = "cancelled while waiting for lock";
        return;
      }
      if (Clock::now() >= next_log) {
        ctx.log("still waiting to acquire lock " + p.string() + " (another fetch of the same file)");
        next_log += std::chrono::seconds(10);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock; the lock file stays (as huggingface_hub)
  }
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
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

// Hashes the temp file while it downloads, following the contiguous written prefix on a
// second thread, so verification costs no extra pass over the bytes. Any truncation
// invalidates it and verify_blob falls back to hashing the file.
class HashFollower {
 public:
  HashFollower(const fs::path& p, EtagKind kind, uint64_t size) : path_(p), kind_(kind), size_(size) {
    if (kind_ == EtagKind::opaque) return;
    thread_ = std::thread([this] { run(); });
  }
  ~HashFollower() { finish(); }
  void advance(uint64_t contiguous) {
    uint64_t cur = avail_.load();
    while (contiguous > cur && !avail_.compare_exchange_weak(cur, contiguous)) {
    }
  }
  void invalidate() { invalid_ = true; }
  // The digest of [0, size) when the follower saw all of it untouched, else "".
  std::string finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (invalid_ || hashed_ != size_ || kind_ == EtagKind::opaque) return {};
    if (digest_.empty()) digest_ = hasher_.hex_digest();
    return digest_;
  }

 private:
  void run() {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      invalid_ = true;
      return;
    }
    std::vector<char> buf(2u << 20);
    while (!invalid_) {
      uint64_t a = std::min(avail_.load(), size_);
      if (a > hashed_) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), a - hashed_));
        ssize_t n = ::pread(fd, buf.data(), want, static_cast<off_t>(hashed_));
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          invalid_ = true;
          break;
        }
        hasher_.update(buf.data(), static_cast<size_t>(n));
        hashed_ += static_cast<uint64_t>(n);
        continue;
      }
      if (stop_ || hashed_ == size_) break;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    ::close(fd);
  }
  fs::path path_;
  EtagKind kind_;
  uint64_t size_;
  Hasher hasher_{kind_, size_};
  std::atomic<uint64_t> avail_{0};
  std::atomic<bool> invalid_{false}, stop_{false};
  uint64_t hashed_ = 0;
  std::string digest_;
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
  uint64_t received_total = 0;  // across range parts (for progress)
  HashFollower* follower = nullptr;
  long last_status = 0;  // status of the latest GET (a CDN 403 triggers a fresh HEAD)

  void report(uint64_t received, bool force = false) {
    if (!ctx.opts.on_progress) return;
    std::lock_guard<std::mutex> g(mu);
    auto now = Clock::now();
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

// GET `url` (following redirects, auth only on the endpoint's origin) for bytes [from, to),
// writing them at their offsets in fd. `pos` advances as bytes land.
AttemptResult get_range(TransferState& ts, const std::string& url0, int fd, uint64_t from, uint64_t to,
                        uint64_t size, bool whole_file_mode, std::atomic<uint64_t>& pos,
                        const std::atomic<bool>* abort_flag) {
  Ctx& ctx = ts.ctx;
  AttemptResult ar;
  std::string url = url0;
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request("GET", url);
    if (from > 0 || to < size || !whole_file_mode)
      req.headers.push_back("Range: bytes=" + std::to_string(from) + "-" + std::to_string(to - 1));
    bool bad = false;
    std::string bad_msg;
    bool redirect = false;
    std::string err_body;
    uint64_t write_pos = from;
    uint64_t start_pos = from;
    req.on_headers = [&](long status, const HeaderList& hl) {
      HttpResponse tmp;
      tmp.headers = hl;
      if (status >= 300 && status < 400 && !tmp.header("location").empty()) {
        redirect = true;
        return true;
      }
      if (status == 206) {
        // Content-Range: bytes a-b/total must match what we asked for.
        auto cr = tmp.header("content-range");
        unsigned long long a = 0, b = 0;
        char tot[32] = {0};
        if (std::sscanf(cr.c_str(), "bytes %llu-%llu/%31s", &a, &b, tot) != 3 || a != from || b + 1 != to ||
            (std::string(tot) != "*" && std::string(tot) != std::to_string(size))) {
          bad = true;
          bad_msg = "Content-Range '" + cr + "' does not match the requested bytes " + std::to_string(from) + "-" +
                    std::to_string(to - 1) + "/" + std::to_string(size);
          return false;
        }
        return true;
      }
      if (status == 200) {
        if (!whole_file_mode) {  // parallel part: the server ignores ranges
          ar.no_ranges = true;
          return false;
        }
        auto cl = tmp.header("content-length");
        if (!cl.empty() && parse_u64(cl) != size) {
          bad = true;
          bad_msg = "Content-Length " + cl + " differs from the expected size " + std::to_string(size);
          return false;
        }
        if (from > 0) {
          ctx.log(ts.repo_path + ": server ignored Range (200); restarting from byte 0");
          if (::ftruncate(fd, 0) != 0) {
            bad = true;
            bad_msg = std::string("ftruncate: ") + std::strerror(errno);
            return false;
          }
          write_pos = 0;
          start_pos = 0;
          pos = 0;
          if (ts.follower) ts.follower->invalidate();
        }
        return true;
      }
      return true;  // error status: body collected below for the message
    };
    req.on_body = [&](const char* data, size_t n) {
      if (redirect) return true;
      if (ar.outcome.kind != ErrorKind::none) return true;
      if (abort_flag && abort_flag->load()) return false;
      if (write_pos + n > to) {
        bad = true;
        bad_msg = "server sent more bytes than expected (" + std::to_string(write_pos + n - start_pos) + " > " +
                  std::to_string(to - start_pos) + ")";
        return false;
      }
      size_t off = 0;
      while (off < n) {
        ssize_t w = ::pwrite(fd, data + off, n - off, static_cast<off_t>(write_pos + off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          bad_msg = std::string("write failed: ") + std::strerror(errno);
          ar.fatal = true;
          return false;
        }
        off += static_cast<size_t>(w);
      }
      write_pos += n;
      pos = write_pos;
      if (whole_file_mode) {
        if (ts.follower) ts.follower->advance(write_pos);
        ts.report(write_pos);
      }
      return true;
    };
    // Error bodies (4xx/5xx) must not be written into the file: detect by status first.
    auto user_on_headers = req.on_headers;
    long seen_status = 0;
    req.on_headers = [&](long status, const HeaderList& hl) {
      seen_status = status;
      return user_on_headers(status, hl);
    };
    auto user_on_body = req.on_body;
    req.on_body = [&](const char* data, size_t n) {
      if (seen_status >= 400 || (seen_status >= 300 && seen_status < 400)) {
        if (err_body.size() < 4096) err_body.append(data, std::min<size_t>(n, 4096 - err_body.size()));
        return true;
      }
      return user_on_body(data, n);
    };
    HttpResponse r = perform(req);
    ts.last_status = r.status;
    ar.progressed = write_pos > start_pos ? write_pos - start_pos : 0;
    if (ar.fatal) {
      ar.outcome.kind = ErrorKind::io;
      ar.outcome.message = ts.repo_path + ": " + bad_msg;
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
    if (redirect && r.status >= 300 && r.status < 400) {
      std::string next = resolve_location(url, r.header("location"));
      if (url_origin(next) != url_origin(url)) ctx.log(ts.repo_path + ": following redirect to " + url_origin(next));
      url = next;
      continue;
    }
    r.body = err_body;
    ar.outcome = classify(r, ts.repo_path, !ctx.opts.token.empty());
    if (r.status == 416 && whole_file_mode) {
      // Asked beyond the end: the temp file is complete or wrong; restart when unsure.
      ar.restart = true;
      ar.outcome.kind = ErrorKind::protocol;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": HTTP 416 for Range bytes=" + std::to_string(from) + "- (Content-Range " +
                           r.header("content-range") + ")";
      return ar;
    }
    if (ar.outcome.kind != ErrorKind::none) return ar;
    if (write_pos != to) {
      ar.outcome.kind = ErrorKind::network;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": body ended early: received " + std::to_string(write_pos) + " of " +
                           std::to_string(to) + " bytes";
      return ar;
    }
    ar.complete = true;
    return ar;
  }
  ar.outcome.kind = ErrorKind::protocol;
  ar.outcome.message = ts.repo_path + ": too many redirects";
  return ar;
}

// Download the whole blob to `tmp` (resuming from its current size). Returns true when
// tmp holds exactly `size` bytes (not yet hash-verified).
bool transfer(TransferState& ts, const std::string& url, const fs::path& tmp, uint64_t size) {
  Ctx& ctx = ts.ctx;
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
  if (ts.follower) ts.follower->advance(have);
  if (have > 0) ctx.log(ts.repo_path + ": resuming from byte " + std::to_string(have) + " of " + std::to_string(size));
  int failures = 0;        // attempts that failed without real progress
  int total_attempts = 0;  // hard cap
  bool ranges_ok = true;
  const uint64_t progress_unit = std::max<uint64_t>(1u << 20, size / 20);
  Outcome last;
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
      for (unsigned i = 0; i <= parts; ++i) starts[i] = have + span * i / parts;
      std::vector<std::atomic<uint64_t>> pos(parts);
      for (unsigned i = 0; i < parts; ++i) pos[i] = starts[i];
      std::vector<AttemptResult> res(parts);
      std::atomic<bool> abort_all{false};
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
      // Progress for the whole file while parts run.
      while (true) {
        bool all_done = true;
        uint64_t got = 0;
        for (unsigned i = 0; i < parts; ++i) got += pos[i] - starts[i];
        ts.report(have + got);
        if (ts.follower) {
          uint64_t contiguous = have;
          for (unsigned i = 0; i < parts; ++i) {
            contiguous = pos[i];
            if (pos[i] < starts[i + 1]) break;
          }
          ts.follower->advance(contiguous);
        }
        for (unsigned i = 0; i < parts; ++i)
          if (pos[i] < starts[i + 1] && !abort_all) all_done = false;
        if (all_done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (ctx.cancelled()) abort_all = true;
      }
      for (auto& t : threads) t.join();
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
      bool no_ranges = false;
      for (auto& r : res) {
        if (r.no_ranges) no_ranges = true;
        if (r.outcome.kind != ErrorKind::none) last = r.outcome;
        if (r.fatal) ar.fatal = true;
      }
      if (no_ranges) {
        ctx.log(ts.repo_path + ": server does not honour Range requests; downloading in one stream");
        ranges_ok = false;
        continue;
      }
      if (ctx.cancelled()) continue;
      break;  // parts exhausted their retries
    }
    std::atomic<uint64_t> pos{have};
    ar = get_range(ts, url, fd, have, size, size, true, pos, nullptr);
    have = pos;
    if (ar.restart) {
      if (::ftruncate(fd, 0) != 0) {}
      have = 0;
      if (ts.follower) ts.follower->invalidate();
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

// HEAD /resolve/<commit>/<path>, following same-host redirects only.
bool head_metadata(Ctx& ctx, const std::string& path, Meta& meta, FileResult& fr) {
  std::string url = resolve_url(ctx, path);
  std::string commit_seen;
  for (int hop = 0; hop < 10; ++hop) {
    HttpRequest req = ctx.base_request("HEAD", url);
    Outcome o;
    HttpResponse r = request_with_retries(ctx, req, path, &o, &fr.retries);
    if (!r.header("x-repo-commit").empty()) commit_seen = r.header("x-repo-commit");
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
    auto loc = r.header("location");
    if (is_redirect && !loc.empty()) {
      std::string next = resolve_location(url, loc);
      if (url_origin(next) == url_origin(url)) {
        url = next;  // same host (e.g. /api/resolve-cache/...): follow, keep auth
        continue;
      }
      meta.location = next;
      meta.cross_host = true;
    } else if (is_redirect) {
      fr.kind = ErrorKind::protocol;
      fr.error = path + ": HTTP " + std::to_string(r.status) + " redirect without Location";
      return false;
    } else {
      meta.location = url;
    }
    meta.commit = r.header("x-repo-commit");
    if (meta.commit.empty()) meta.commit = commit_seen;
    meta.etag = normalize_etag(r.header("x-linked-etag"));
    if (meta.etag.empty()) meta.etag = normalize_etag(r.header("etag"));
    auto sz = r.header("x-linked-size");
    if (sz.empty() && !is_redirect) sz = r.header("content-length");
    std::vector<std::string> missing;
    if (meta.commit.empty()) missing.push_back("X-Repo-Commit");
    if (meta.etag.empty()) missing.push_back("ETag/X-Linked-Etag");
    auto size = parse_u64(sz);
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
  fr.error = path + ": too many same-host redirects on the metadata request";
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
                 std::string digest = {}) {
  uint64_t sz = file_size_or_zero(tmp);
  if (sz != meta.size) {
    fr.kind = ErrorKind::integrity;
    fr.error = path + ": size mismatch: expected " + std::to_string(meta.size) + " bytes, file has " + std::to_string(sz);
    return false;
  }
  auto kind = etag_kind(meta.etag);
  if (kind == EtagKind::opaque) {
    ctx.log("warning: " + path + ": etag '" + meta.etag + "' is not a sha256 or git sha1; only the size was verified");
    return true;
  }
  std::string err;
  if (digest.empty()) digest = hash_file(tmp, kind, meta.size, &err);
  if (digest.empty()) {
    fr.kind = ErrorKind::io;
    fr.error = path + ": " + err;
    return false;
  }
  if (digest != meta.etag) {
    fr.kind = ErrorKind::integrity;
    fr.error = path + ": " + (kind == EtagKind::sha256 ? "sha256" : "git blob sha1") + " mismatch: expected " +
               meta.etag + ", downloaded bytes hash to " + digest;
    return false;
  }
  return true;
}

// Download (if needed) and verify into `tmp`, retrying once from scratch on a hash mismatch.
bool obtain_verified(Ctx& ctx, TransferState& ts, const Meta& meta, const fs::path& tmp) {
  FileResult& fr = ts.fr;
  for (int round = 0; round < 2; ++round) {
    uint64_t before = file_size_or_zero(tmp);
    // Create the file first so the follower can open it.
    { int cfd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644); if (cfd >= 0) ::close(cfd); }
    HashFollower follower(tmp, etag_kind(meta.etag), meta.size);
    ts.follower = &follower;
    bool ok_transfer = transfer(ts, meta.location, tmp, meta.size);
    if (ok_transfer) follower.advance(meta.size);
    std::string digest = ok_transfer ? follower.finish() : std::string();
    if (!ok_transfer) follower.invalidate();
    follower.finish();
    ts.follower = nullptr;
    if (!ok_transfer) {
      // Over-the-network count for the summary.
      uint64_t now = file_size_or_zero(tmp);
      fr.downloaded += now > before ? now - before : 0;
      return false;
    }
    fr.downloaded += meta.size > before ? meta.size - before : 0;
    if (verify_blob(ctx, tmp, meta, fr, ts.repo_path, digest)) return true;
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
bool obtain_with_refresh(Ctx& ctx, TransferState& ts, Meta& meta, const fs::path& tmp) {
  for (int refresh = 0;; ++refresh) {
    ts.last_status = 0;
    if (obtain_verified(ctx, ts, meta, tmp)) return true;
    if (!meta.cross_host || (ts.last_status != 403 && ts.last_status != 401) || refresh >= 2 || ctx.cancelled())
      return false;
    ctx.log(ts.repo_path + ": the CDN refused the download URL (HTTP " + std::to_string(ts.last_status) +
            "); asking the hub for a fresh one");
    Meta fresh;
    FileResult scratch;
    if (!head_metadata(ctx, ts.repo_path, fresh, scratch)) return false;
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

// HEAD the file and check what the hub says against the commit being fetched and the tree
// listing; on failure `fr` holds the classified error. `outcome` ends the message
// ("nothing published" / "nothing written").
bool fetch_checked_metadata(Ctx& ctx, const TreeEntry& te, const std::string& path, Meta& meta, FileResult& fr,
                            const char* outcome) {
  if (!head_metadata(ctx, path, meta, fr)) return false;
  fr.etag = meta.etag;
  fr.expected = meta.size;
  if (meta.commit != ctx.commit) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": the hub answered for commit " + meta.commit + " while fetching commit " + ctx.commit +
               " (the revision moved or a proxy rewrote it); " + outcome;
    return false;
  }
  if (!safe_etag(meta.etag)) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": unusable etag '" + meta.etag.substr(0, 80) + "'";
    return false;
  }
  if (te.size && *te.size != meta.size) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": the tree listing says " + std::to_string(*te.size) + " bytes but the file metadata says " +
               std::to_string(meta.size);
    return false;
  }
  return true;
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
  std::string expected_hash = !te.lfs_oid.empty() ? te.lfs_oid : te.oid;
  if (!expected_hash.empty() && etag_kind(meta.etag) != EtagKind::opaque && expected_hash != meta.etag &&
      (etag_kind(meta.etag) == EtagKind::sha256 ? !te.lfs_oid.empty() : true)) {
    fr.kind = ErrorKind::protocol;
    fr.error = path + ": the tree listing's hash " + expected_hash + " differs from the file's etag " + meta.etag;
    return;
  }
  TransferState ts{ctx, path, fr};
  ts.prog.path = path;
  ts.prog.total = meta.size;
  fs::path blob = ctx.repo_dir / "blobs" / meta.etag;
  std::error_code ec;
  fs::create_directories(blob.parent_path(), ec);
  {
    FileLock lock(ctx, ctx.locks_dir / (meta.etag + ".lock"));
    if (!lock.error().empty()) {
      fr.kind = ErrorKind::io;
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
      fs::path tmp = ctx.repo_dir / "blobs" / (meta.etag + ".incomplete");
      ts.report(file_size_or_zero(tmp), true);
      if (!obtain_with_refresh(ctx, ts, meta, tmp)) {
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
  FileLock lock(ctx, lock_path);
  if (!lock.error().empty()) {
    fr.kind = ErrorKind::io;
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
  fs::path tmp = meta_path.parent_path() / (short_hash(meta_path.filename().string()) + "." + meta.etag + ".incomplete");
  std::error_code ec;
  fs::create_directories(tmp.parent_path(), ec);
  fs::create_directories(dest.parent_path(), ec);
  if (!obtain_with_refresh(ctx, ts, meta, tmp)) {
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
      if (!e.is_object() || e.get_string("type").value_or("file") != "file") continue;
      auto p = e.get_string("path");
      if (!p) continue;
      TreeEntry te;
      te.path = *p;
      if (auto s = e.get_int("size"); s && *s >= 0) te.size = static_cast<uint64_t>(*s);
      te.oid = e.get_string("oid").value_or("");
      if (auto* lfs = e.find("lfs"); lfs && lfs->is_object()) {
        te.lfs_oid = lfs->get_string("oid").value_or(lfs->get_string("sha256").value_or(""));
        if (auto s = lfs->get_int("size"); s && *s >= 0) te.size = static_cast<uint64_t>(*s);
      }
      out.push_back(std::move(te));
      if (out.size() > 10'000'000) {
        o.kind = ErrorKind::protocol;
        o.message = ctx.spec.repo_id + ": tree listing too large";
        return false;
      }
    }
    std::string next = next_link(r.header("link"));
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
  if (!ctx.opts.paths.empty()) {
    files = ctx.opts.paths;
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
    if (regular_file_exists(rl.snapshot_dir / p, &sz)) {
      fr.ok = fr.cached = true;
      fr.expected = fr.received = sz;
    } else {
      fr.kind = ErrorKind::offline_missing;
      fr.error = p + ": not in the cached snapshot " + rl.commit + " (offline mode)";
      res.ok = false;
    }
    res.files.push_back(std::move(fr));
  }
  if (!res.ok) res.kind = ErrorKind::offline_missing;
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
  if (!list_tree(ctx, tree, to)) {
    if (to.kind == ErrorKind::http || to.kind == ErrorKind::protocol) {
      ctx.log("warning: " + to.message + "; using the file list from the revision API (no sizes)");
      tree.clear();
      for (auto& s : siblings) tree.push_back(TreeEntry{s, std::nullopt, "", ""});
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
      plan.push_back(it != by_path.end() ? *it->second : TreeEntry{p, std::nullopt, "", ""});
    }
  } else {
    for (const auto& t : tree)
      if (selected(ctx.opts, t.path)) plan.push_back(t);
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
    for (const auto& t : plan) known += t.size.value_or(0);
    ctx.opts.on_plan(plan.size(), known);
  }
  if (ctx.local) {
    ensure_local_cache_dir(ctx.repo_dir);
    res.snapshot_dir = ctx.repo_dir;
  } else {
    res.snapshot_dir = ctx.repo_dir / "snapshots" / ctx.commit;
  }
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
  if (!ctx.local) {
    std::error_code ec;
    fs::create_directories(res.snapshot_dir, ec);
    // refs/<revision> last, only when every requested file is published.
    if (res.ok && spec.revision != ctx.commit) {
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
