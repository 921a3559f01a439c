#include "mock_hub.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "ckpt/json.h"

namespace ckpt::test {

namespace {

std::string hex(const unsigned char* d, unsigned n) {
  static const char* h = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += h[d[i] >> 4];
    s += h[d[i] & 15];
  }
  return s;
}

std::string digest(const EVP_MD* md, const std::string& prefix, const std::string& data) {
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  EVP_DigestInit_ex(c, md, nullptr);
  if (!prefix.empty()) EVP_DigestUpdate(c, prefix.data(), prefix.size());
  EVP_DigestUpdate(c, data.data(), data.size());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(c, out, &n);
  EVP_MD_CTX_free(c);
  return hex(out, n);
}

std::string pct_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string pct_encode_path(const std::string& s) {
  static const char* h = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') out += static_cast<char>(c);
    else {
      out += '%';
      out += h[c >> 4];
      out += h[c & 15];
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    auto p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

bool send_all(int fd, const char* d, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, d, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    d += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool send_str(int fd, const std::string& s) { return send_all(fd, s.data(), s.size()); }

uint32_t crc32(const std::string& d) {
  static uint32_t table[256];
  static bool init = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)init;
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : d) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// A valid gzip member made of stored (uncompressed) deflate blocks: no zlib needed.
std::string gzip_stored(const std::string& d) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  size_t off = 0;
  do {
    size_t n = std::min<size_t>(65535, d.size() - off);
    bool last = off + n == d.size();
    out += static_cast<char>(last ? 1 : 0);
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(~n & 0xFF);
    out += static_cast<char>((~n >> 8) & 0xFF);
    out.append(d, off, n);
    off += n;
  } while (off < d.size());
  auto le32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  le32(crc32(d));
  le32(static_cast<uint32_t>(d.size()));
  return out;
}

std::string http_date(double from_now) {
  time_t t = std::time(nullptr) + static_cast<time_t>(from_now);
  char buf[64];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

const char* reason(int st) {
  switch (st) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 302: return "Found";
    case 307: return "Temporary Redirect";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

int listen_loopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only
  a.sin_port = 0;                              // ephemeral
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0)
    throw std::runtime_error("bind/listen on 127.0.0.1 failed");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

struct MockHub::Request {
  std::string server, method, target, path, query;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string header(const std::string& k) const {
    auto it = headers.find(k);
    return it == headers.end() ? std::string() : it->second;
  }
  std::string token() const {
    auto a = header("authorization");
    return a.rfind("Bearer ", 0) == 0 ? a.substr(7) : std::string();
  }
};

std::string MockHub::sha256_hex(const std::string& data) { return digest(EVP_sha256(), "", data); }
std::string MockHub::git_sha1_hex(const std::string& data) {
  std::string prefix = "blob " + std::to_string(data.size());
  prefix.push_back('\0');
  return digest(EVP_sha1(), prefix, data);
}
std::string MockHub::etag_of(const MockFile& f) {
  if (!f.disk_path.empty()) return f.content;  // bench: etag precomputed into `content`
  return f.lfs ? sha256_hex(f.content) : git_sha1_hex(f.content);
}

MockHub::MockHub() {
  hub_fd_ = listen_loopback(&hub_port_);
  acceptors_.emplace_back([this] { serve(hub_fd_, "hub"); });
}

void MockHub::enable_cdn() {
  std::lock_guard<std::mutex> g(mu_);
  if (cdn_fd_ >= 0) return;
  cdn_fd_ = listen_loopback(&cdn_port_);
  acceptors_.emplace_back([this] { serve(cdn_fd_, "cdn"); });
}

MockHub::~MockHub() {
  stopping_ = true;
  for (int fd : {hub_fd_, cdn_fd_})
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  for (auto& t : acceptors_) t.join();
  {
    std::lock_guard<std::mutex> g(conn_mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& t : conns_) t.join();
  for (int fd : {hub_fd_, cdn_fd_})
    if (fd >= 0) ::close(fd);
}

std::string MockHub::endpoint() const { return "http://127.0.0.1:" + std::to_string(hub_port_); }

void MockHub::add_commit(const std::string& repo, const std::string& commit, std::vector<MockFile> files) {
  std::lock_guard<std::mutex> g(mu_);
  auto& r = repos_[repo];
  for (const auto& f : files) cdn_blobs_[etag_of(f)] = {repo, f.path};
  r.commits[commit] = std::move(files);
}

void MockHub::set_ref(const std::string& repo, const std::string& rev, const std::string& commit) {
  std::lock_guard<std::mutex> g(mu_);
  repos_[repo].refs[rev] = commit;
}

void MockHub::move_ref_after(const std::string& repo, const std::string& rev, int calls, const std::string& commit) {
  std::lock_guard<std::mutex> g(mu_);
  repos_[repo].moves.push_back({rev, calls, commit});
}

void MockHub::set_gated(const std::string& repo, const std::string& token) {
  std::lock_guard<std::mutex> g(mu_);
  repos_[repo].gated = true;
  repos_[repo].gated_token = token;
}

void MockHub::set_private(const std::string& repo, const std::string& token) {
  std::lock_guard<std::mutex> g(mu_);
  repos_[repo].priv = true;
  repos_[repo].private_token = token;
}

void MockHub::set_fault(const std::string& repo, const std::string& path, Fault f) {
  std::lock_guard<std::mutex> g(mu_);
  repos_[repo].faults[path] = f;
  repos_[repo].fault_hits[path] = 0;
}

std::vector<LoggedRequest> MockHub::log() const {
  std::lock_guard<std::mutex> g(mu_);
  return log_;
}

int MockHub::count(const std::string& server, const std::string& method, const std::string& prefix) const {
  std::lock_guard<std::mutex> g(mu_);
  int n = 0;
  for (const auto& r : log_)
    if (r.server == server && r.method == method && r.target.rfind(prefix, 0) == 0) ++n;
  return n;
}

void MockHub::serve(int lfd, const std::string& name) {
  while (!stopping_) {
    pollfd p{lfd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> g(conn_mu_);
    open_fds_.push_back(fd);
    conns_.emplace_back([this, fd, name] {
      handle(fd, name);
      std::lock_guard<std::mutex> g2(conn_mu_);
      open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
      ::close(fd);
    });
  }
}

bool MockHub::wait(int fd, double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (stopping_) return false;
    pollfd p{fd, POLLRDHUP, 0};
    if (::poll(&p, 1, 10) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return false;
  }
  return true;
}

// Per connection: whether this response may keep the connection open (keep_alive mode and a
// cleanly framed answer). Faults that break the framing clear it.
thread_local bool t_keep = false;

void MockHub::handle(int fd, const std::string& name) {
  std::string buf;
  char tmp[4096];
  int served = 0;
  while (true) {  // one request per connection unless keep_alive()
    while (buf.find("\r\n\r\n") == std::string::npos) {
      if (buf.size() > 65536 || stopping_) return;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return;
      buf.append(tmp, static_cast<size_t>(n));
    }
    auto end = buf.find("\r\n\r\n");
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);  // GET/HEAD carry no body: the rest is the next request
    Request rq;
    rq.server = name;
    auto lines = split(head, '\n');
    auto first = split(lines[0], ' ');
    if (first.size() < 2) return;
    rq.method = first[0];
    rq.target = first[1];
    auto q = rq.target.find('?');
    rq.path = rq.target.substr(0, q);
    rq.query = q == std::string::npos ? "" : rq.target.substr(q + 1);
    for (size_t i = 1; i < lines.size(); ++i) {
      auto l = lines[i];
      if (!l.empty() && l.back() == '\r') l.pop_back();
      auto c = l.find(':');
      if (c == std::string::npos) continue;
      std::string k = l.substr(0, c);
      for (auto& ch : k) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      auto v = l.substr(c + 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      rq.headers[k] = v;
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      log_.push_back({name, rq.method, rq.target, rq.header("authorization"), rq.header("range")});
      if (++served > 1) ++reused_;
    }
    t_keep = keep_alive_ || keep_alive_lie_;
    if (rq.method == "HEAD" && refuse_head_ != 0) {
      std::string h = "HTTP/1.1 " + std::to_string(refuse_head_.load()) + " " +
                      (refuse_head_ == 405 ? "Method Not Allowed" : "Not Implemented") +
                      "\r\nAllow: GET\r\nContent-Length: 0\r\n" + (t_keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n") + "\r\n";
      send_str(fd, h);
      if (!t_keep || keep_alive_lie_) return;
      continue;
    }
    if (name == "cdn") route_cdn(fd, rq);
    else route_hub(fd, rq);
    if (!t_keep || keep_alive_lie_) return;
  }
}

const char* connection_header() { return t_keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n"; }

static void respond(int fd, int status, const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::string& body_in, bool head = false, bool gzip = false) {
  std::string body = gzip ? gzip_stored(body_in) : body_in;
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  if (gzip) h += "Content-Encoding: gzip\r\n";
  h += "Content-Length: " + std::to_string(body.size()) + "\r\n" + connection_header() + "\r\n";
  send_str(fd, h);
  if (!head) send_str(fd, body);
}

static void error_response(int fd, int status, const std::string& code, const std::string& msg,
                           const std::string& commit = {}, bool head = false) {
  std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"},
                                                        {"X-Request-Id", "Root=1-mock"}};
  if (!code.empty()) h.emplace_back("X-Error-Code", code);
  if (!msg.empty()) h.emplace_back("X-Error-Message", msg);
  if (!commit.empty()) h.emplace_back("X-Repo-Commit", commit);
  respond(fd, status, h, "{\"error\":" + json::quoted(msg) + "}", head);
}

void MockHub::route_hub(int fd, Request& rq) {
  bool head = rq.method == "HEAD";
  auto seg = split(rq.path, '/');  // "", ...
  // /api/models/org/name/(revision|tree)/REV  or  /api/resolve-cache/models/org/name/commit/path...
  // /org/name/resolve/REV/path...
  std::string repo, kind, rev, file;
  bool resolve_cache = false;
  if (seg.size() == 3 && seg[1] == "lfs") {  // same-host LFS storage (same_host_lfs)
    route_cdn(fd, rq);
    return;
  }
  // Repos other than models are keyed "datasets/org/name" / "spaces/org/name".
  auto typed = [](const std::string& type_plural, const std::string& id) {
    return type_plural == "models" ? id : type_plural + "/" + id;
  };
  auto is_type = [](const std::string& t) { return t == "models" || t == "datasets" || t == "spaces"; };
  std::string type_plural = "models";
  if (seg.size() >= 6 && seg[1] == "api" && is_type(seg[2])) {
    type_plural = seg[2];
    repo = typed(seg[2], seg[3] + "/" + seg[4]);
    kind = seg[5];
    rev = seg.size() > 6 ? pct_decode(seg[6]) : "main";
  } else if (seg.size() >= 8 && seg[1] == "api" && seg[2] == "resolve-cache") {
    resolve_cache = true;
    type_plural = seg[3];
    repo = typed(seg[3], seg[4] + "/" + seg[5]);
    kind = "resolve";
    rev = seg[6];
    for (size_t i = 7; i < seg.size(); ++i) file += (i > 7 ? "/" : "") + seg[i];
    file = pct_decode(file);
  } else if (seg.size() >= 6 && (seg[3] == "resolve" || (seg.size() >= 7 && is_type(seg[1]) && seg[4] == "resolve"))) {
    size_t o = seg[3] == "resolve" ? 0 : 1;  // /datasets/org/name/resolve/...
    if (o) type_plural = seg[1];
    repo = typed(type_plural, seg[1 + o] + "/" + seg[2 + o]);
    kind = "resolve";
    rev = pct_decode(seg[4 + o]);
    for (size_t i = 5 + o; i < seg.size(); ++i) file += (i > 5 + o ? "/" : "") + seg[i];
    file = pct_decode(file);
    resolve_cache = rq.query.find("direct=1") != std::string::npos;  // relative_redirects target
  } else {
    error_response(fd, 404, "", "not found", {}, head);
    return;
  }
  std::string bare_repo = type_plural == "models" ? repo : repo.substr(type_plural.size() + 1);
  std::unique_lock<std::mutex> g(mu_);
  auto rit = repos_.find(repo);
  if (rit == repos_.end()) {
    g.unlock();
    error_response(fd, 401, "RepoNotFound", "Repository Not Found for url: " + rq.path + ".", {}, head);
    return;
  }
  Repo& r = rit->second;
  std::string tok = rq.token();
  if (r.priv && tok != r.private_token) {
    g.unlock();
    error_response(fd, tok.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found for url: " + rq.path + ".",
                   {}, head);
    return;
  }
  if (r.gated && tok != r.gated_token) {
    g.unlock();
    if (tok.empty())
      error_response(fd, 401, "GatedRepo",
                     "Access to model " + repo + " is restricted. You must have access to it and be authenticated to access it. Please log in.",
                     {}, head);
    else
      error_response(fd, 403, "GatedRepo",
                     "Access to model " + repo + " is restricted and you are not in the authorized list. Visit https://huggingface.co/" + repo + " to ask for access.",
                     {}, head);
    return;
  }
  // Revision -> commit (the revision API counts calls for moving refs).
  std::string commit;
  if (r.commits.count(rev)) {
    commit = rev;
  } else if (r.refs.count(rev)) {
    if (kind == "revision") {
      int calls = ++r.rev_calls[rev];
      for (const auto& m : r.moves)
        if (m.rev == rev && calls > m.calls) r.refs[rev] = m.commit;
    }
    commit = r.refs[rev];
  } else {
    g.unlock();
    error_response(fd, 404, "RevisionNotFound", "Invalid rev id: " + rev, {}, head);
    return;
  }
  const auto& files = r.commits[commit];
  if (kind == "revision") {
    std::string body = "{\"id\":" + json::quoted(repo) + ",\"sha\":\"" + commit + "\",\"siblings\":[";
    for (size_t i = 0; i < files.size(); ++i) body += (i ? "," : "") + std::string("{\"rfilename\":") + json::quoted(files[i].path) + "}";
    body += "]}";
    g.unlock();
    respond(fd, 200, {{"Content-Type", "application/json"}}, body, head, gzip_api_);
    return;
  }
  if (kind == "tree") {
    if (break_tree_) {
      g.unlock();
      error_response(fd, 404, "", "tree listing unavailable", {}, head);
      return;
    }
    std::vector<const MockFile*> sorted;
    for (const auto& f : files) sorted.push_back(&f);
    std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->path < b->path; });
    size_t cursor = 0;
    auto cp = rq.query.find("cursor=");
    if (cp != std::string::npos) cursor = std::stoul(rq.query.substr(cp + 7));
    std::string body = "[";
    size_t end = std::min(sorted.size(), cursor + tree_page_size_);
    bool firstent = true;
    for (size_t i = cursor; i < end; ++i) {
      const auto& f = *sorted[i];
      auto slash = f.path.rfind('/');
      if (slash != std::string::npos) {  // a directory entry too, which clients must skip
        body += std::string(firstent ? "" : ",") + "{\"type\":\"directory\",\"oid\":\"" + std::string(40, '0') +
                "\",\"size\":0,\"path\":" + json::quoted(f.path.substr(0, slash)) + "}";
        firstent = false;
      }
      std::string et = etag_of(f);
      uint64_t listed = f.size() + (f.path == tree_lie_ ? 1 : 0);
      body += std::string(firstent ? "" : ",") + "{\"type\":\"file\",\"oid\":\"" + tree_oid(f) +
              "\",\"size\":" + std::to_string(listed) + ",\"path\":" + json::quoted(f.path);
      if (f.lfs) body += ",\"lfs\":{\"oid\":\"" + et + "\",\"size\":" + std::to_string(listed) + ",\"pointerSize\":134}";
      if (!f.xet_hash.empty()) body += ",\"xetHash\":" + json::quoted(f.xet_hash);
      body += "}";
      firstent = false;
    }
    body += "]";
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"}};
    if (end < sorted.size()) {
      std::string next = "?recursive=true&cursor=" + std::to_string(end);
      if (tree_link_variants_) {  // relative to the request path, after a separate rel="prev"
        h.emplace_back("Link", "<" + seg.back() + "?recursive=true&cursor=0>; rel=\"prev\"");
        h.emplace_back("Link", "<" + seg.back() + next + ">; rel=\"next\"");
      } else {
        h.emplace_back("Link", "<" + endpoint() + rq.path + next + ">; rel=\"next\"");
      }
    }
    g.unlock();
    respond(fd, 200, h, body, head, gzip_api_);
    return;
  }
  if (kind != "resolve") {
    g.unlock();
    error_response(fd, 404, "", "unknown api", {}, head);
    return;
  }
  const MockFile* f = nullptr;
  for (const auto& x : files)
    if (x.path == file) f = &x;
  if (!f) {
    g.unlock();
    error_response(fd, 404, "EntryNotFound", file + " does not exist on \"" + rev + "\"", commit, head);
    return;
  }
  MockFile copy = *f;
  std::string etag = etag_of(copy);
  g.unlock();
  if (!resolve_cache && !copy.lfs) {
    // Small files: a relative 307 to the commit-pinned resolve-cache URL (same host).
    auto slash = copy.path.rfind('/');
    std::string base = slash == std::string::npos ? copy.path : copy.path.substr(slash + 1);
    respond(fd, 307,
            {{"Location", relative_redirects_ ? pct_encode_path(base) + "?direct=1"
                                              : "/api/resolve-cache/" + type_plural + "/" + bare_repo + "/" + commit + "/" +
                                                    pct_encode_path(copy.path) + "?etag=%22" + etag + "%22"},
             {strip_commit_ ? "X-Stripped" : "X-Repo-Commit", commit},
             {"ETag", "\"" + etag + "\""},
             {"Accept-Ranges", "bytes"},
             {"RateLimit", "\"resolvers\";r=2999;t=172"}},
            "", head);
    return;
  }
  if (copy.lfs && (cdn_fd_ >= 0 || same_host_lfs_) && !resolve_cache && !(cdn_get_only_ && head)) {
    // Fault on the metadata call happens here (HEAD), the body faults on the CDN.
    Fault fl;
    {
      std::lock_guard<std::mutex> g2(mu_);
      fl = r.faults.count(copy.path) ? r.faults[copy.path] : Fault{};
      if (fl.kind != FaultKind::none && fl.on_head && head) {
        int& hits = r.fault_hits[copy.path];
        if (fl.times < 0 || hits < fl.times) ++hits;
        else fl.kind = FaultKind::none;
      } else {
        fl.kind = FaultKind::none;
      }
    }
    if (fl.kind == FaultKind::headers_delay && !wait(fd, fl.seconds)) return;
    if (fl.kind == FaultKind::status) {
      error_response(fd, fl.status, "", "injected", {}, head);
      return;
    }
    std::string where = cdn_fd_ >= 0 ? "http://127.0.0.1:" + std::to_string(cdn_port_) + "/blob/" + etag +
                                           "?Expires=9999&Signature=mock"
                                     : endpoint() + "/lfs/" + etag;
    respond(fd, 302,
            {{"Location", where},
             {strip_commit_ ? "X-Stripped" : "X-Repo-Commit", commit},
             {"X-Linked-Etag", copy.weak_etag ? "W/\"" + etag + "\"" : "\"" + etag + "\""},
             {copy.no_linked_size ? "X-No-Size" : "X-Linked-Size", std::to_string(copy.size())},
             {"ETag", "\"" + etag + "\""}},
            "", head);
    return;
  }
  serve_file(fd, rq, repo, copy, commit, false);
}

void MockHub::route_cdn(int fd, Request& rq) {
  auto seg = split(rq.path, '/');
  if (seg.size() != 3 || (seg[1] != "blob" && seg[1] != "lfs")) {
    respond(fd, 404, {}, "no such blob", rq.method == "HEAD");
    return;
  }
  std::unique_lock<std::mutex> g(mu_);
  auto it = cdn_blobs_.find(seg[2]);
  if (it == cdn_blobs_.end()) {
    g.unlock();
    respond(fd, 404, {}, "no such blob", rq.method == "HEAD");
    return;
  }
  auto [repo, path] = it->second;
  const MockFile* f = nullptr;
  for (const auto& [c, files] : repos_[repo].commits)
    for (const auto& x : files)
      if (x.path == path && etag_of(x) == seg[2]) f = &x;
  if (!f) {
    g.unlock();
    respond(fd, 404, {}, "no such blob", rq.method == "HEAD");
    return;
  }
  MockFile copy = *f;
  g.unlock();
  serve_file(fd, rq, repo, copy, "", true, seg[1] == "lfs");
}

std::string MockHub::tree_oid(const MockFile& f) {
  std::string et = etag_of(f);
  return f.lfs ? git_sha1_hex("version https://git-lfs.github.com/spec/v1\noid sha256:" + et + "\nsize " +
                              std::to_string(f.size()) + "\n")
               : et;
}

void MockHub::serve_file(int fd, Request& rq, const std::string& repo, const MockFile& f, const std::string& commit,
                         bool cdn, bool opaque_etag) {
  bool head = rq.method == "HEAD";
  Fault fl;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& r = repos_[repo];
    if (r.faults.count(f.path)) {
      fl = r.faults[f.path];
      if (fl.on_head != head) {
        fl.kind = FaultKind::none;
      } else {
        int& hits = r.fault_hits[f.path];
        if (fl.times < 0 || hits < fl.times) ++hits;
        else fl.kind = FaultKind::none;
      }
    }
  }
  std::string etag = etag_of(f);
  std::string shown_etag = f.weak_etag ? "W/\"" + etag + "\"" : "\"" + etag + "\"";
  std::vector<std::pair<std::string, std::string>> h;
  if (!cdn) {
    if (!strip_commit_) h.emplace_back("X-Repo-Commit", commit);
    h.emplace_back("ETag", shown_etag);
    if (f.lfs) {
      h.emplace_back("X-Linked-Etag", shown_etag);
      if (!f.no_linked_size) h.emplace_back("X-Linked-Size", std::to_string(f.size()));
    }
  } else if (opaque_etag) {
    h.emplace_back("ETag", "\"d41d8cd98f00b204e9800998ecf8427e-7\"");  // an S3 multipart etag: not the content hash
  }
  h.emplace_back("Accept-Ranges", "bytes");
  h.emplace_back("Content-Type", "application/octet-stream");
  if (fl.kind == FaultKind::headers_delay && !wait(fd, fl.seconds)) return;
  if (fl.kind == FaultKind::status) {
    error_response(fd, fl.status, "", "injected server error", {}, head);
    return;
  }
  if (fl.kind == FaultKind::forbidden) {
    respond(fd, 403, {}, "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>", head);
    return;
  }
  if (fl.kind == FaultKind::redirect_loop) {
    respond(fd, 302, {{"Location", rq.target}}, "", head);
    return;
  }
  if (fl.kind == FaultKind::no_location) {
    respond(fd, 302, {}, "moved somewhere", head);
    return;
  }
  if (fl.kind == FaultKind::rate_limit) {
    std::vector<std::pair<std::string, std::string>> rh;
    if (fl.ratelimit_header) {
      rh.emplace_back("RateLimit", "\"resolvers\";r=0;t=" + std::to_string(static_cast<int>(fl.seconds)));
    } else if (fl.retry_after_date) {
      rh.emplace_back("Retry-After", http_date(fl.seconds));
    } else {
      rh.emplace_back("Retry-After", std::to_string(static_cast<int>(fl.seconds)));
    }
    rh.emplace_back("Content-Type", "application/json");
    respond(fd, 429, rh, "{\"error\":\"rate limited\"}", head);
    return;
  }
  uint64_t size = f.size();
  uint64_t a = 0, b = size ? size - 1 : 0;
  int status = 200;
  auto range = rq.header("range");
  if (!range.empty() && !f.ignore_range && !f.gzip && range.rfind("bytes=", 0) == 0) {
    auto spec = range.substr(6);
    auto dash = spec.find('-');
    a = std::stoull(spec.substr(0, dash));
    if (dash + 1 < spec.size()) b = std::min<uint64_t>(std::stoull(spec.substr(dash + 1)), size ? size - 1 : 0);
    if (a >= size || (fl.kind == FaultKind::range_416 && a > 0)) {
      respond(fd, 416, {{"Content-Range", "bytes */" + std::to_string(size)}}, "", head);
      return;
    }
    if (f.max_range && b - a + 1 > f.max_range) b = a + f.max_range - 1;
    status = 206;
    std::string total = f.star_total ? "*" : std::to_string(size + (fl.kind == FaultKind::wrong_total ? 1 : 0));
    h.emplace_back("Content-Range", "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" + total);
  }
  uint64_t len = size ? b - a + 1 : 0;
  std::string body;
  if (f.disk_path.empty()) {
    body = f.content.substr(a, len);
    if (fl.kind == FaultKind::corrupt && fl.after >= a && fl.after < a + len) body[fl.after - a] ^= 0x5a;
    if (f.gzip || (f.gzip_ranges && status == 206)) {
      body = gzip_stored(body);
      h.emplace_back("Content-Encoding", "gzip");
    }
  }
  uint64_t claimed = f.gzip || (f.gzip_ranges && status == 206) ? body.size() : len;
  if (fl.kind == FaultKind::wrong_length) claimed = len + 1000;
  if (fl.kind == FaultKind::short_length) claimed = std::min<uint64_t>(len, fl.after);
  if (head && f.head_length) claimed = f.head_length;
  bool clean = fl.kind == FaultKind::none || fl.kind == FaultKind::corrupt || fl.kind == FaultKind::headers_delay;
  const bool http10 = http10_;
  if (!clean || f.no_length || http10) t_keep = false;
  std::string hd = std::string(http10 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(status) + " " + reason(status) + "\r\n";
  for (const auto& [k, v] : h) hd += k + ": " + v + "\r\n";
  if (http10) {}  // no framing headers at all: the close ends the body
  else if (f.chunked) hd += "Transfer-Encoding: chunked\r\n";
  else if (!f.no_length) hd += "Content-Length: " + std::to_string(claimed) + "\r\n";
  if (!http10) hd += connection_header();
  hd += "\r\n";
  if (fl.kind == FaultKind::header_drip) {
    for (char c : hd)
      if (!send_all(fd, &c, 1) || !wait(fd, fl.seconds)) return;
  } else if (!send_str(fd, hd)) {
    return;
  }
  if (head) return;
  if (!f.disk_path.empty()) {
    int in = ::open(f.disk_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return;
    off_t off = static_cast<off_t>(a);
    uint64_t left = len;
    while (left > 0 && !stopping_) {
      ssize_t n = ::sendfile(fd, in, &off, std::min<uint64_t>(left, 1u << 30));
      if (n <= 0) break;
      left -= static_cast<uint64_t>(n);
    }
    ::close(in);
    return;
  }
  if (f.chunked) {
    // The body in 7919-byte chunks; faults below act on the unframed bytes.
    uint64_t limit = body.size();
    if (fl.kind == FaultKind::truncate_after || fl.kind == FaultKind::reset_after || fl.kind == FaultKind::stall_after)
      limit = std::min<uint64_t>(fl.after, body.size());
    for (uint64_t off = 0; off < limit; off += 7919) {
      uint64_t n = std::min<uint64_t>(7919, limit - off);
      char szbuf[32];
      std::snprintf(szbuf, sizeof szbuf, "%llx\r\n", static_cast<unsigned long long>(n));
      if (!send_str(fd, szbuf) || !send_all(fd, body.data() + off, n) || !send_str(fd, "\r\n")) return;
    }
    if (limit == body.size()) {
      send_str(fd, "0\r\n\r\n");
      return;
    }
  }
  switch (fl.kind) {
    case FaultKind::stall_after:
      if (!f.chunked) send_all(fd, body.data(), std::min<uint64_t>(fl.after, body.size()));
      wait(fd, 1e9);
      return;
    case FaultKind::reset_after: {
      if (!f.chunked) send_all(fd, body.data(), std::min<uint64_t>(fl.after, body.size()));
      linger lg{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      return;  // close() now sends RST
    }
    case FaultKind::truncate_after:
      if (!f.chunked) send_all(fd, body.data(), std::min<uint64_t>(fl.after, body.size()));
      ::shutdown(fd, SHUT_WR);
      return;
    case FaultKind::drip:
      for (char c : body) {
        if (!send_all(fd, &c, 1) || !wait(fd, fl.seconds)) return;
      }
      return;
    case FaultKind::short_length:
      send_all(fd, body.data(), claimed);
      return;
    default:
      send_str(fd, body);
      return;
  }
}

}  // namespace ckpt::test
