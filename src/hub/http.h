// A small libcurl wrapper: one request, no automatic redirects, explicit timeouts and a
// stall detector (fewer than N bytes in S seconds, header phase included, aborts).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::hub::detail {

using HeaderList = std::vector<std::pair<std::string, std::string>>;  // lowercase names

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Called once the response headers are complete; return false to abort the transfer.
  std::function<bool(long status, const HeaderList& headers)> on_headers;
  // Body bytes; when empty the body is collected into HttpResponse::body (up to max_body).
  std::function<bool(const char* data, size_t n)> on_body;
  size_t max_body = 64u << 20;
  double connect_timeout = 10;
  double stall_timeout = 30;
  uint64_t stall_bytes = 1;
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  long status = 0;          // 0: no HTTP response
  int curl_code = 0;        // CURLcode
  std::string curl_error;   // human text when curl_code != 0
  HeaderList headers;
  std::string body;
  uint64_t body_bytes = 0;  // bytes delivered to the sink / body
  bool stalled = false;     // aborted by the stall detector
  bool headers_received = false;
  bool cancelled = false;
  bool aborted_by_sink = false;
  bool body_too_large = false;
  std::string header(std::string_view name) const;  // first value, "" when absent
  std::string header_all(std::string_view name) const;  // every value joined with ", "
  bool has_header(std::string_view name) const;
  bool transport_ok() const { return curl_code == 0; }
};

HttpResponse perform(const HttpRequest& req);

// URL pieces (scheme://host[:port]) for same-host comparisons; lowercased.
std::string url_origin(std::string_view url);
// Resolve a Location value against the request URL (absolute, scheme-relative, absolute-path).
std::string resolve_location(std::string_view base, std::string_view location);

}  // namespace ckpt::hub::detail
