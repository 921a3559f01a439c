// What the stages of the fetch pipeline share (internal to src/hub). The stages, in the
// order a file goes through them:
//   fetch_protocol.cpp  HTTP classification and retries, revision and tree listing, HEAD/metadata
//   fetch_transfer.cpp  one blob into a temp file: ranges, resume, write buffer, hashing
//   fetch_publish.cpp   verify + publish into the cache: locks, atomic writes, blobs, symlinks,
//                       fsync, trees/<commit>.json
//   fetch_local.cpp     the same for --local-dir (files + .cache/huggingface/download metadata)
//   fetch.cpp           orchestration: plan, workers, refs, offline mode, resolve_*
#pragma once
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/hub.h"
#include "hub/hash.h"
#include "hub/headers.h"
#include "hub/http.h"

namespace ckpt::hub::pipeline {

namespace fs = std::filesystem;
using namespace ckpt::hub::detail;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------
// Protocol (fetch_protocol.cpp): error classification (X-Error-Code first, then the status),
// retry decisions.

struct Outcome {
  ErrorKind kind = ErrorKind::none;
  bool retryable = false;
  double retry_after = -1;  // seconds the server asked us to wait (429/503)
  std::string message;
};

Outcome classify(const HttpResponse& r, const std::string& what, bool have_token);

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
                                  int* retries_used = nullptr, std::initializer_list<long> final_status = {});

inline std::optional<uint64_t> parse_u64(const std::string& s) { return parse_decimal_u64(s); }
bool http_scheme(const std::string& url);

// HEAD /resolve/<commit>/<path> (redirects, GET fallback, tree-listing fill-ins).
bool head_metadata(Ctx& ctx, const std::string& path, const TreeEntry* te, Meta& meta, FileResult& fr);
// HEAD the file and check what the hub says against the commit being fetched and the tree
// listing; on failure `fr` holds the classified error. `outcome` ends the message
// ("nothing published" / "nothing written").
bool fetch_checked_metadata(Ctx& ctx, const TreeEntry& te, const std::string& path, Meta& meta, FileResult& fr,
                            const char* outcome);
RemoteRevision remote_revision(Ctx& ctx, std::vector<std::string>* siblings);
bool list_tree(Ctx& ctx, std::vector<TreeEntry>& out, Outcome& o);

// ---------------------------------------------------------------------------------------
// Transfer (fetch_transfer.cpp): one blob into a temp file, with resume, ranges, retries.

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

class PrefixHasher;
class MemoryHasher;

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
  MemoryHasher* memory_hasher = nullptr;  // set while a helper thread hashes the write buffers
  // Status of the latest GET (a CDN 403 triggers a fresh HEAD); parallel range parts each
  // store theirs, so it is atomic.
  std::atomic<long> last_status{0};

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

// Download the whole blob to `tmp` (resuming from its current size). Returns true when
// tmp holds exactly `size` bytes (not yet hash-verified).
bool transfer(TransferState& ts, const std::string& url, const fs::path& tmp, uint64_t size);

// ---------------------------------------------------------------------------------------
// Publish (fetch_publish.cpp): filesystem helpers, locks, verification, the cache layout.

// Small metadata files (refs, .metadata, trees/): temp file, fsync, rename.
bool write_file_atomic(const fs::path& p, const std::string& content, std::string* err);

// Where the holder of a blob's lock writes, so a waiter can tell a working holder from a
// hung one: files in `dir` named `prefix`[.*].incomplete (ckpt and huggingface_hub <= 1.17:
// <etag>.incomplete; >= 1.18: <etag>.<uuid8>.incomplete; local-dir: <hash>.<etag>*.incomplete).
struct LockWatch {
  fs::path dir;
  std::string prefix;
};

// An exclusive flock on a blob's lock file, polled so cancellation works.
// Waiting is bounded the way a stalled download is: while the holder makes progress — bytes
// added to its .incomplete, or the heartbeat a ckpt holder keeps on the lock file (its mtime,
// every 0.5 s, retries and hashing included) — the waiter waits, logging every 10 s; after
// max(stall_timeout, 2 s) without either it gives up with a network error naming the holder.
// Nothing is then written: the holder may still resume and write into the same temp file.
class FileLock {
 public:
  FileLock(Ctx& ctx, const fs::path& p, const LockWatch& watch);
  ~FileLock();
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
  Observation observe(const LockWatch& w) const;
  int fd_ = -1;
  ErrorKind kind_ = ErrorKind::none;
  std::string error_;
  bool unsupported_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread heartbeat_;
};

uint64_t file_size_or_zero(const fs::path& p);
bool regular_file_exists(const fs::path& p, uint64_t* size);
mode_t umask_mode();
// A signed CDN URL can expire mid-download: download + verify into `tmp`, asking the hub for
// a fresh location when the CDN refuses it.
bool obtain_with_refresh(Ctx& ctx, TransferState& ts, const TreeEntry& te, Meta& meta, const fs::path& tmp);
// obtain_with_refresh into `tmp`, then rename it to `dest` with the umask's mode. On failure
// the error is in ts.fr ("cannot move <what> into place" for the rename) and a private temp
// file is removed.
bool obtain_into_place(Ctx& ctx, TransferState& ts, const TreeEntry& te, Meta& meta, const fs::path& tmp,
                       bool private_tmp, const fs::path& dest, std::string_view what);
// "" for the shared, resumable temp name; ".<8 hex>" for a private one.
std::string private_infix(Ctx& ctx, bool needed);
void fetch_one_cache(Ctx& ctx, const TreeEntry& te, FileResult& fr);
bool write_tree_cache(Ctx& ctx, const fs::path& folder, const std::vector<TreeEntry>& tree);
std::optional<std::map<std::string, uint64_t>> read_tree_cache(const fs::path& p);

// ---------------------------------------------------------------------------------------
// Local dir (fetch_local.cpp).

void ensure_local_cache_dir(const fs::path& local_dir);
void fetch_one_local(Ctx& ctx, const TreeEntry& te, FileResult& fr);

}  // namespace ckpt::hub::pipeline
