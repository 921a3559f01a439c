// Fetching checkpoints from a Hugging Face-compatible hub into the exact cache layout
// huggingface_hub writes (or a --local-dir), with stall detection, retries, resume,
// size + hash verification and atomic publishing. See docs/fetch.md.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::hub {

// "org/name[@revision]" (split at the last '@'); revision defaults to "main".
struct RepoSpec {
  std::string repo_id;
  std::string revision = "main";
  bool revision_given = false;
  std::string repo_type = "model";  // model | dataset | space
};
// Returns nullopt and sets *error for a malformed spec (empty parts, "..", bad characters).
std::optional<RepoSpec> parse_repo_spec(std::string_view spec, std::string* error);

// What went wrong, so callers (and exit codes) can tell "no such repo" from "network".
enum class ErrorKind {
  none,
  repo_not_found,      // RepoNotFound, or 401 without a token
  gated,               // GatedRepo (401 unauthenticated / 403 not approved)
  disabled,            // "Access to this resource is disabled."
  unauthorized,        // "Invalid credentials in Authorization header" (bad token)
  revision_not_found,  // RevisionNotFound
  entry_not_found,     // EntryNotFound (file not in the repo at that commit)
  rate_limited,        // 429 after every retry
  network,             // connect errors, resets, stalls, timeouts after every retry
  http,                // other HTTP status
  protocol,            // missing/inconsistent metadata, bad Content-Range, unsafe file name
  integrity,           // size or hash mismatch after every retry
  io,                  // local filesystem error
  offline_missing,     // offline and not in the cache
  cancelled,
};
std::string_view error_kind_name(ErrorKind k);
// The stable NET-family code of a failure kind ("NET008"; "" for none), printed on the
// `::error::` lines of `ckpt fetch`. Table in docs/fetch.md; codes are never reused.
std::string_view error_code(ErrorKind k);

// Live progress, delivered from worker threads (the callback must be thread-safe).
struct FileProgress {
  std::string path;
  uint64_t received = 0;  // bytes on disk for this file (including resumed bytes)
  uint64_t total = 0;     // expected size (0 until known)
  int retries = 0;
  bool done = false;
  bool failed = false;
};

struct FetchOptions {
  std::string endpoint;                 // empty: HF_ENDPOINT or https://huggingface.co
  std::string token;                    // empty: HF_TOKEN / HUGGING_FACE_HUB_TOKEN / $HF_HOME/token
  std::filesystem::path cache_dir;      // empty: HF_HUB_CACHE / $HF_HOME/hub / ~/.cache/huggingface/hub
  std::filesystem::path local_dir;      // non-empty: local-dir mode (no cache, no symlinks)
  std::vector<std::string> paths;       // explicit files (exact repo paths)
  std::vector<std::string> include;     // fnmatch globs (as huggingface_hub allow_patterns)
  std::vector<std::string> exclude;     // fnmatch globs (ignore_patterns)
  bool offline = false;                 // resolve from the cache only; no network at all
  unsigned jobs = 8;                    // files in parallel
  int retries = 5;                      // retries per request after the first attempt
  double connect_timeout = 10;          // seconds
  double stall_timeout = 30;            // seconds: an attempt moving fewer than stall_bytes in
  uint64_t stall_bytes = 1;             //   this window (headers included) is aborted and retried
  double backoff_base = 1.0;            // seconds; delay = min(max, base*2^n) with full jitter
  double backoff_max = 30.0;
  double retry_after_max = 60.0;        // cap on a server's Retry-After / RateLimit wait
  uint64_t range_threshold = 64ull << 20;  // files at least this big download in parallel ranges
  unsigned range_parts = 4;             // ranges per large file
  bool direct_io = false;                // lone streams write with O_DIRECT, bypassing the page cache
  bool durable = false;                 // fdatasync each blob before the rename publishes it (--fsync)
  std::function<void(const FileProgress&)> on_progress;  // may be empty
  std::function<void(size_t files, uint64_t known_bytes)> on_plan;  // after listing; may be empty
  std::function<void(const std::string&)> on_log;        // retries, warnings; may be empty
  const std::atomic<bool>* cancel = nullptr;             // set to abort everything
};
// Fill the unset fields of `opts` from the environment as huggingface_hub does.
void apply_environment(FetchOptions& opts);

struct FileResult {
  std::string path;            // repo path
  bool ok = false;
  bool cached = false;         // already present (nothing downloaded)
  uint64_t expected = 0;
  uint64_t received = 0;       // bytes on disk for it at the end (0 when published is false)
  uint64_t downloaded = 0;     // bytes moved over the network in this run
  int retries = 0;
  std::string etag;
  ErrorKind kind = ErrorKind::none;
  std::string error;
};

struct FetchResult {
  RepoSpec spec;
  bool ok = false;
  std::string commit;
  std::filesystem::path snapshot_dir;  // snapshots/<commit> or the local dir
  std::vector<FileResult> files;
  ErrorKind kind = ErrorKind::none;    // repo-level failure (files may be empty)
  std::string error;
  uint64_t bytes_downloaded = 0;
  double seconds = 0;
};

FetchResult fetch(const RepoSpec& spec, const FetchOptions& opts);

// Local lookup of a snapshot: a commit-hash revision, or refs/<revision>. No network.
struct ResolveResult {
  bool ok = false;
  std::string commit;
  std::filesystem::path snapshot_dir;
  std::string error;
};
ResolveResult resolve_local(const RepoSpec& spec, const std::filesystem::path& cache_dir);

// Ask the hub which commit a revision points to (one API call with retries).
struct RemoteRevision {
  bool ok = false;
  std::string commit;
  ErrorKind kind = ErrorKind::none;
  std::string error;
};
RemoteRevision resolve_remote(const RepoSpec& spec, const FetchOptions& opts);

// Helpers shared with the CLI and tests.
std::filesystem::path default_cache_dir();                      // env resolution
std::string repo_folder(const RepoSpec& spec);                  // models--org--name
bool is_commit(std::string_view s);                             // 40 lowercase hex
bool glob_match(std::string_view pattern, std::string_view path);  // fnmatch, '*' crosses '/'
bool safe_repo_path(std::string_view path);                     // relative, no '..', no '\\'
std::string percent_encode(std::string_view s, bool keep_slash);

}  // namespace ckpt::hub
