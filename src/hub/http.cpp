#include "hub/http.h"

#include "hub/headers.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>

namespace ckpt::hub::detail {

namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

struct Transfer {
  const HttpRequest* req = nullptr;
  HttpResponse* resp = nullptr;
  bool headers_done = false;
  bool abort_from_headers = false;
  // Stall window: (time, bytes seen) samples; bytes include header bytes.
  Clock::time_point start;
  uint64_t seen = 0;
  std::deque<std::pair<Clock::time_point, uint64_t>> samples;
};

size_t header_cb(char* data, size_t size, size_t nmemb, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t n = size * nmemb;
  std::string_view line(data, n);
  t->seen += n;
  if (line.rfind("HTTP/", 0) == 0) {  // a new status line (e.g. after 100 Continue)
    t->resp->headers.clear();
    t->headers_done = false;
    t->resp->status = parse_status_line(trim(line));  // 0 (no HTTP response) for a garbled one
    return n;
  }
  auto tl = trim(line);
  if (tl.empty()) {
    if (t->resp->status == 100) return n;  // interim response
    t->headers_done = true;
    t->resp->headers_received = true;
    if (t->req->on_headers && !t->req->on_headers(t->resp->status, t->resp->headers)) {
      t->abort_from_headers = true;
      return 0;
    }
    return n;
  }
  auto colon = tl.find(':');
  if (colon != std::string_view::npos && t->resp->headers.size() < 512)
    t->resp->headers.emplace_back(lower(trim(tl.substr(0, colon))), std::string(trim(tl.substr(colon + 1))));
  return n;
}

size_t write_cb(char* data, size_t size, size_t nmemb, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t n = size * nmemb;
  t->seen += n;
  t->resp->body_bytes += n;
  if (t->req->on_body) {
    if (!t->req->on_body(data, n)) {
      t->resp->aborted_by_sink = true;
      return CURL_WRITEFUNC_ERROR;
    }
    return n;
  }
  if (t->resp->body.size() + n > t->req->max_body) {
    t->resp->body_too_large = true;
    return CURL_WRITEFUNC_ERROR;
  }
  t->resp->body.append(data, n);
  return n;
}

int xfer_cb(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(ud);
  if (t->req->cancel && t->req->cancel->load(std::memory_order_relaxed)) {
    t->resp->cancelled = true;
    return 1;
  }
  if (t->req->stall_timeout <= 0) return 0;
  auto now = Clock::now();
  auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t->req->stall_timeout));
  t->samples.emplace_back(now, t->seen);
  // Keep the front as the newest sample at or before now - window.
  while (t->samples.size() >= 2 && t->samples[1].first <= now - window) t->samples.pop_front();
  if (now - t->start >= window) {
    const auto& [t0, b0] = t->samples.front();
    uint64_t moved = t0 <= now - window ? t->seen - b0 : t->seen;
    if (moved < t->req->stall_bytes) {
      t->resp->stalled = true;
      return 1;
    }
  }
  if (t->samples.size() > 4096) t->samples.erase(t->samples.begin() + 1, t->samples.begin() + 2048);
  return 0;
}

std::once_flag g_init;

struct EasyHandle {
  CURL* h = nullptr;
  EasyHandle() { h = curl_easy_init(); }
  ~EasyHandle() {
    if (h) curl_easy_cleanup(h);
  }
};

}  // namespace

std::string HttpResponse::header(std::string_view name) const {
  auto ln = lower(name);
  for (const auto& [k, v] : headers)
    if (k == ln) return v;
  return {};
}

std::string HttpResponse::header_all(std::string_view name) const {
  auto ln = lower(name);
  std::string out;
  for (const auto& [k, v] : headers)
    if (k == ln) out += (out.empty() ? "" : ", ") + v;
  return out;
}

bool HttpResponse::has_header(std::string_view name) const {
  auto ln = lower(name);
  for (const auto& [k, v] : headers)
    if (k == ln) return true;
  return false;
}

HttpResponse perform(const HttpRequest& req) {
  std::call_once(g_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  // One handle per thread, reset between requests: connections are kept alive and reused.
  thread_local EasyHandle easy;
  HttpResponse resp;
  CURL* h = easy.h;
  if (!h) {
    resp.curl_code = CURLE_FAILED_INIT;
    resp.curl_error = "curl_easy_init failed";
    return resp;
  }
  curl_easy_reset(h);
  Transfer t;
  t.req = &req;
  t.resp = &resp;
  t.start = Clock::now();
  t.samples.emplace_back(t.start, 0);
  char errbuf[CURL_ERROR_SIZE] = {0};

  curl_slist* hdrs = nullptr;
  bool has_accept_encoding = false;
  for (const auto& hv : req.headers) {
    hdrs = curl_slist_append(hdrs, hv.c_str());
    if (lower(hv).rfind("accept-encoding:", 0) == 0) has_accept_encoding = true;
  }
  hdrs = curl_slist_append(hdrs, "Expect:");

  curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "ckpt/" CKPT_VERSION " (libcurl)");
  // Ask for the bytes as stored ("identity", so sizes and Range offsets are the real ones),
  // but decode a gzip/deflate/br/zstd body a server sends anyway (CloudFront, proxies):
  // libcurl only decodes Content-Encoding when this option is set.
  if (!has_accept_encoding) curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "identity");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout * 1000));
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xfer_cb);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  // The largest receive buffer libcurl allows: fewer recv calls (64/128 KiB measured slower).
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  // Backstop for the stall detector: libcurl's own low-speed abort over the same window.
  if (req.stall_timeout > 0) {
    long secs = std::max(1L, static_cast<long>(req.stall_timeout + 0.999));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, secs + 1);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  }
  if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(hdrs);
  resp.curl_code = rc;
  if (rc != CURLE_OK) {
    if (resp.stalled) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", req.stall_timeout);
      resp.curl_error = "stalled: fewer than " + std::to_string(req.stall_bytes) + " bytes in " + secs + " s" +
                        (resp.headers_received ? "" : " (waiting for response headers)");
    } else if (resp.cancelled) {
      resp.curl_error = "cancelled";
    } else if (rc == CURLE_OPERATION_TIMEDOUT && !resp.aborted_by_sink) {
      resp.stalled = true;
      resp.curl_error = std::string("stalled: ") + (errbuf[0] ? errbuf : curl_easy_strerror(rc));
    } else {
      resp.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    }
  }
  if (t.abort_from_headers) resp.aborted_by_sink = true;
  return resp;
}

std::string url_origin(std::string_view url) {
  auto p = url.find("://");
  if (p == std::string_view::npos) return {};
  auto rest = url.substr(p + 3);
  auto end = rest.find_first_of("/?#");
  auto authority = rest.substr(0, end);
  auto at = authority.rfind('@');
  if (at != std::string_view::npos) authority = authority.substr(at + 1);
  return lower(url.substr(0, p + 3)) + lower(authority);
}

std::string resolve_location(std::string_view base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return std::string(location);
  auto origin = url_origin(base);
  if (location.rfind("//", 0) == 0) {
    auto p = base.find("://");
    return std::string(base.substr(0, p + 1)) + std::string(location);
  }
  if (!location.empty() && location.front() == '/') return origin + std::string(location);
  // Relative path: resolve against the directory of the base path.
  std::string b(base);
  auto q = b.find_first_of("?#", origin.size());
  if (q != std::string::npos) b.resize(q);
  auto slash = b.rfind('/');
  if (slash == std::string::npos || slash < origin.size()) return origin + "/" + std::string(location);
  return b.substr(0, slash + 1) + std::string(location);
}

}  // namespace ckpt::hub::detail
