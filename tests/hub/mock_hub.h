// A loopback-only mock of the Hugging Face Hub download endpoints, with per-file fault
// injection, for the fetch tests and the fetch benchmark. Plain POSIX sockets (HTTP/1.1,
// one request per connection) so faults can break the framing on purpose: wrong
// Content-Length, FIN or RST mid-body, stalls, drips, delayed headers.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ckpt::test {

enum class FaultKind {
  none,
  stall_after,     // send `after` body bytes, then go silent (socket open)
  reset_after,     // send `after` body bytes, then RST
  truncate_after,  // send `after` body bytes, then FIN (Content-Length is correct)
  drip,            // one byte every `seconds`
  status,          // answer `status` (5xx/408) instead of the body
  rate_limit,      // 429 with Retry-After: `seconds` (or RateLimit t= when `ratelimit_header`)
  wrong_length,    // Content-Length = size + 1000, then the true body and FIN
  short_length,    // Content-Length = `after`, body cut to it (a clean, short 200)
  corrupt,         // flip the byte at offset `after`
  headers_delay,   // sleep `seconds` before the status line
  forbidden,       // 403 (e.g. a signed CDN URL that expired)
  header_drip,     // the response headers one byte every `seconds`
  redirect_loop,   // 302 back to the same URL
  no_location,     // a 302 without Location
  range_416,       // 416 for any Range that does not start at 0
  wrong_total,     // Content-Range total off by one
};

struct Fault {
  FaultKind kind = FaultKind::none;
  uint64_t after = 0;
  double seconds = 0;
  int status = 500;
  int times = 1;          // GETs affected before serving normally; < 0 = every GET
  bool on_head = false;   // apply to the metadata HEAD instead of the GET
  bool ratelimit_header = false;
  bool retry_after_date = false;  // Retry-After as an HTTP-date (`seconds` from now)
};

struct MockFile {
  std::string path;
  std::string content;        // in-memory content, or
  std::string disk_path;      // served from disk (bench)
  uint64_t disk_size = 0;
  bool lfs = false;           // etag sha256, X-Linked-*; redirected to the CDN when one is set
  bool ignore_range = false;  // always 200 with the full body
  // Framing and header variants an independent hub may use (all on the GET/HEAD of the file).
  bool chunked = false;        // Transfer-Encoding: chunked, no Content-Length
  bool no_length = false;      // no Content-Length: the body ends when the connection closes
  bool gzip = false;           // the whole body gzip-encoded (Range ignored, 200)
  bool gzip_ranges = false;    // 206 answers gzip-encoded (CloudFront compressing a ranged answer)
  bool weak_etag = false;      // ETag: W/"<etag>" (and X-Linked-Etag the same)
  bool no_linked_size = false; // LFS without X-Linked-Size (size only from Content-Length)
  uint64_t head_length = 0;    // non-zero: the HEAD's Content-Length (X-Linked-Size stays true)
  uint64_t max_range = 0;      // non-zero: 206 answers carry at most this many bytes
  bool star_total = false;     // Content-Range: bytes a-b/*
  std::string xet_hash;        // listed as xetHash in the tree
  Fault fault;
  uint64_t size() const { return disk_path.empty() ? content.size() : disk_size; }
};

struct LoggedRequest {
  std::string server;  // "hub" | "cdn"
  std::string method;
  std::string target;
  std::string authorization;
  std::string range;
};

class MockHub {
 public:
  MockHub();
  ~MockHub();
  MockHub(const MockHub&) = delete;
  MockHub& operator=(const MockHub&) = delete;

  // Repos: commits hold files; refs map revision names to commits.
  void add_commit(const std::string& repo, const std::string& commit, std::vector<MockFile> files);
  void set_ref(const std::string& repo, const std::string& rev, const std::string& commit);
  // After `calls` answers of the revision API for `rev`, the ref moves to `commit`.
  void move_ref_after(const std::string& repo, const std::string& rev, int calls, const std::string& commit);
  void set_gated(const std::string& repo, const std::string& approved_token);  // 401 anon, 403 others
  void set_private(const std::string& repo, const std::string& token);       // 401/404 as RepoNotFound
  void set_tree_page_size(size_t n) { tree_page_size_ = n; }
  void enable_cdn();  // LFS files redirect (302, absolute) to a second server on another port
  void strip_commit_header(bool on) { strip_commit_ = on; }  // as a proxy that drops X-Repo-Commit
  // API JSON (revision, tree) gzip-encoded whatever Accept-Encoding says.
  void gzip_api(bool on) { gzip_api_ = on; }
  // Small files: a relative-path Location ("<name>?direct=1") instead of /api/resolve-cache/...
  void relative_redirects(bool on) { relative_redirects_ = on; }
  // LFS files: 302 to an absolute URL on the hub itself (/lfs/<etag>, opaque ETag, no hub headers)
  // instead of being served by /resolve directly; with enable_cdn() the CDN still wins.
  void same_host_lfs(bool on) { same_host_lfs_ = on; }
  // With enable_cdn(): the HEAD of an LFS file is answered by the hub itself (200 with X-Linked-*),
  // only the GET is redirected to the CDN.
  void cdn_get_only(bool on) { cdn_get_only_ = on; }
  // Tree pages: relative Link URLs, each rel in its own Link header (a rel="prev" first).
  void tree_link_variants(bool on) { tree_link_variants_ = on; }
  void break_tree_api(bool on) { break_tree_ = on; }
  // Every HEAD (hub and CDN) answered with this status (405 Method Not Allowed, 501 Not
  // Implemented), as servers without HEAD support do; 0: HEAD served normally.
  void refuse_head(int status) { refuse_head_ = status; }
  // Every response says "Connection: keep-alive", then the server closes the connection anyway
  // (an idle timeout of zero): a client reusing it finds it dead on its next request.
  void keep_alive_lie(bool on) { keep_alive_lie_ = on; }
  // Files answered as an HTTP/1.0 server does: "HTTP/1.0" status line, no Content-Length (the
  // body ends when the connection closes), Range still honoured.
  void http10_files(bool on) { http10_ = on; }
  // HTTP/1.1 keep-alive: several requests per connection (faults that break framing still close).
  void keep_alive(bool on) { keep_alive_ = on; }
  // Requests served on connections that carried more than one (keep_alive mode).
  int reused_requests() const {
    std::lock_guard<std::mutex> g(mu_);
    return reused_;
  }  // 404 for /tree (clients fall back to siblings)
  // Tree listing sizes off by one for this path (the HEAD stays right).
  void lie_in_tree(const std::string& path) { tree_lie_ = path; }
  void set_fault(const std::string& repo, const std::string& path, Fault f);

  std::string endpoint() const;  // http://127.0.0.1:<port>
  int cdn_port() const { return cdn_port_; }
  std::vector<LoggedRequest> log() const;
  int count(const std::string& server, const std::string& method, const std::string& target_prefix) const;

  static std::string sha256_hex(const std::string& data);
  static std::string git_sha1_hex(const std::string& data);
  static std::string etag_of(const MockFile& f);
  static std::string tree_oid(const MockFile& f);  // the listing's oid (pointer sha1 for LFS)

 private:
  struct Repo {
    std::map<std::string, std::vector<MockFile>> commits;
    std::map<std::string, std::string> refs;
    struct Move {
      std::string rev;
      int calls;
      std::string commit;
    };
    std::vector<Move> moves;
    std::map<std::string, int> rev_calls;
    std::string gated_token, private_token;
    bool gated = false, priv = false;
    std::map<std::string, Fault> faults;
    std::map<std::string, int> fault_hits;
  };
  struct Request;
  void serve(int listen_fd, const std::string& name);
  void handle(int fd, const std::string& name);
  void route_hub(int fd, Request& rq);
  void route_cdn(int fd, Request& rq);
  void serve_file(int fd, Request& rq, const std::string& repo, const MockFile& f, const std::string& commit,
                  bool cdn, bool opaque_etag = false);
  bool wait(int fd, double seconds);  // false when stopping or the peer hung up

  mutable std::mutex mu_;
  std::map<std::string, Repo> repos_;
  std::map<std::string, std::pair<std::string, std::string>> cdn_blobs_;  // etag -> repo, path
  size_t tree_page_size_ = 1000;
  std::atomic<bool> strip_commit_{false}, gzip_api_{false}, relative_redirects_{false}, same_host_lfs_{false},
      tree_link_variants_{false}, break_tree_{false}, keep_alive_{false}, cdn_get_only_{false};
  std::atomic<int> refuse_head_{0};
  std::atomic<bool> keep_alive_lie_{false}, http10_{false};
  int reused_ = 0;
  std::string tree_lie_;
  int hub_fd_ = -1, cdn_fd_ = -1;
  int hub_port_ = 0, cdn_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> acceptors_;
  std::mutex conn_mu_;
  std::vector<std::thread> conns_;
  std::vector<int> open_fds_;
  std::vector<LoggedRequest> log_;
};

}  // namespace ckpt::test
