// Pure parsers for the response header values the fetcher acts on. Every input is
// server-supplied text, so each parser is strict (digits only, no signs, no whitespace inside
// numbers), never overflows (a number too large for its type is refused or saturated, as
// documented per function) and never throws. Fuzzed by fuzz/fuzz_hub.cpp.
#pragma once
#include <cstdint>
#include <ctime>
#include <optional>
#include <string_view>

namespace ckpt::hub::detail {

// 1*DIGIT as a uint64_t; nullopt for empty, non-digits (signs, spaces, '.') or overflow.
std::optional<uint64_t> parse_decimal_u64(std::string_view s);

// The status code of an HTTP status line ("HTTP/1.1 206 Partial Content", "HTTP/2 200"):
// exactly three digits, the first 1-9, after the protocol token; else 0.
long parse_status_line(std::string_view line);

// Content-Range (RFC 9110 14.4): "bytes FIRST-LAST/COMPLETE", "bytes FIRST-LAST/*" or, on a
// 416, "bytes */COMPLETE". The unit is case-insensitive; FIRST <= LAST < COMPLETE must hold.
struct ContentRange {
  bool unsatisfied = false;        // "bytes */N": no range, only the complete length
  uint64_t first = 0, last = 0;    // inclusive; meaningful unless `unsatisfied`
  std::optional<uint64_t> total;   // nullopt for '*'
};
std::optional<ContentRange> parse_content_range(std::string_view v);

// Retry-After (RFC 9110 10.2.3): delay-seconds (1*DIGIT; a value beyond a year saturates to a
// year: callers cap it anyway) or an HTTP-date, as seconds from `now` (a date in the past is 0).
// nullopt for anything else: negative or fractional numbers, garbage, an empty value.
std::optional<double> parse_retry_after(std::string_view v, std::time_t now);

// RateLimit, as the hub sends it (`"resolvers";r=0;t=172`, IETF structured-field draft) or in
// the older draft's form (`limit=100, remaining=0, reset=50`). Returns the seconds to wait —
// t + 1 (reset + 1) when the remaining quota r is 0, the longest over several policies — or
// nullopt when no policy is exhausted or the value does not parse. t saturates at a year.
std::optional<double> parse_ratelimit_wait(std::string_view v);

}  // namespace ckpt::hub::detail
