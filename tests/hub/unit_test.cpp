// Pure helpers of the hub module, including hostile inputs.
#include <gtest/gtest.h>

#include <set>

#include "ckpt/hub.h"
#include "hub/hash.h"
#include "hub/headers.h"
#include "hub/http.h"

using namespace ckpt::hub;

TEST(HubSpec, ParsesRepoAndRevision) {
  std::string err;
  auto s = parse_repo_spec("Qwen/Qwen2.5-0.5B@refs/pr/1", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->repo_id, "Qwen/Qwen2.5-0.5B");
  EXPECT_EQ(s->revision, "refs/pr/1");
  auto d = parse_repo_spec("org/name", &err);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->revision, "main");
  EXPECT_FALSE(d->revision_given);
  auto ds = parse_repo_spec("datasets/org/name@v1", &err);
  ASSERT_TRUE(ds);
  EXPECT_EQ(ds->repo_type, "dataset");
  EXPECT_EQ(repo_folder(*ds), "datasets--org--name");
}

TEST(HubSpec, RejectsHostileSpecs) {
  std::string err;
  for (const char* bad : {"", "noslash", "a/b/c", "../x", "a/..", "org/name@", "@rev", "a--b/c", "org/na me",
                          "org/name@../../etc", "org/name@/abs", "/org/name", "org/", "/name"}) {
    EXPECT_FALSE(parse_repo_spec(bad, &err)) << bad;
  }
  std::string ctrl = "org/name@ma\nin";
  EXPECT_FALSE(parse_repo_spec(ctrl, &err));
  EXPECT_FALSE(parse_repo_spec(std::string(300, 'a') + "/b", &err));
}

TEST(HubPaths, SafeRepoPath) {
  EXPECT_TRUE(safe_repo_path("model.safetensors"));
  EXPECT_TRUE(safe_repo_path("a/b/c.json"));
  EXPECT_TRUE(safe_repo_path(".gitattributes"));
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a\\b", "C:/x", "a/", "..", "."})
    EXPECT_FALSE(safe_repo_path(bad)) << bad;
  EXPECT_FALSE(safe_repo_path(std::string("a\0b", 3)));
}

TEST(HubPaths, GlobsMatchLikeHuggingfaceHub) {
  EXPECT_TRUE(glob_match("*.json", "config.json"));
  EXPECT_TRUE(glob_match("*.json", "sub/tokenizer.json"));  // fnmatch: '*' crosses '/'
  EXPECT_TRUE(glob_match("sub/", "sub/x.bin"));
  EXPECT_FALSE(glob_match("*.safetensors", "model.bin"));
  EXPECT_TRUE(glob_match("model-0000[1-2]-*", "model-00002-of-00002.safetensors"));
}

TEST(HubUrl, PercentEncoding) {
  EXPECT_EQ(percent_encode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(percent_encode("dir/a b+c.json", true), "dir/a%20b%2Bc.json");
  EXPECT_EQ(is_commit(std::string(40, 'a')), true);
  EXPECT_EQ(is_commit(std::string(40, 'A')), false);
  EXPECT_EQ(is_commit("main"), false);
}

TEST(HubUrl, OriginsAndLocations) {
  using namespace ckpt::hub::detail;
  EXPECT_EQ(url_origin("https://Huggingface.co/api/x?y"), "https://huggingface.co");
  EXPECT_EQ(url_origin("http://user@127.0.0.1:8080/x"), "http://127.0.0.1:8080");
  EXPECT_EQ(resolve_location("http://h:1/a/b?q", "/c/d?e"), "http://h:1/c/d?e");
  EXPECT_EQ(resolve_location("http://h:1/a/b", "https://cdn/x"), "https://cdn/x");
  EXPECT_EQ(resolve_location("http://h:1/a/b", "//cdn/x"), "http://cdn/x");
  EXPECT_EQ(resolve_location("http://h:1/a/b", "c"), "http://h:1/a/c");
}

TEST(HubHash, GitBlobSha1AndSha256) {
  using namespace ckpt::hub::detail;
  Hasher g(EtagKind::git_sha1, 6);
  g.update("hello\n", 6);
  EXPECT_EQ(g.hex_digest(), "ce013625030ba8dba906f756967f9e9ca394464a");  // git hash-object
  Hasher s(EtagKind::sha256, 0);
  s.update("abc", 3);
  EXPECT_EQ(s.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(etag_kind(std::string(64, 'f')), EtagKind::sha256);
  EXPECT_EQ(etag_kind(std::string(40, '0')), EtagKind::git_sha1);
  EXPECT_EQ(etag_kind("\"abc\""), EtagKind::opaque);
}

TEST(HubErrors, KindNamesAreDistinct) {
  EXPECT_EQ(error_kind_name(ErrorKind::gated), "gated");
  EXPECT_EQ(error_kind_name(ErrorKind::integrity), "integrity");
  // NET codes are stable: a kind's code never changes and no two kinds share one.
  EXPECT_EQ(error_code(ErrorKind::none), "");
  EXPECT_EQ(error_code(ErrorKind::repo_not_found), "NET001");
  EXPECT_EQ(error_code(ErrorKind::network), "NET008");
  EXPECT_EQ(error_code(ErrorKind::integrity), "NET011");
  EXPECT_EQ(error_code(ErrorKind::cancelled), "NET014");
  std::set<std::string_view> seen;
  for (int k = 1; k <= static_cast<int>(ErrorKind::cancelled); ++k)
    EXPECT_TRUE(seen.insert(error_code(static_cast<ErrorKind>(k))).second) << k;
}

// The header parsers see server-supplied text: hostile values must be refused, never wrap.
TEST(HubHeaders, DecimalAndStatusLine) {
  using namespace ckpt::hub::detail;
  EXPECT_EQ(parse_decimal_u64("0"), 0u);
  EXPECT_EQ(parse_decimal_u64("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.0", "0x10", "18446744073709551616", "99999999999999999999999",
                          "1e3", "inf", "nan"})
    EXPECT_FALSE(parse_decimal_u64(bad)) << bad;
  EXPECT_EQ(parse_status_line("HTTP/1.1 206 Partial Content"), 206);
  EXPECT_EQ(parse_status_line("HTTP/2 200"), 200);
  EXPECT_EQ(parse_status_line("HTTP/1.0 404"), 404);
  for (const char* bad : {"HTTP/1.1 99999999999999999999999999 X", "HTTP/1.1 -200 OK", "HTTP/1.1 2000 OK",
                          "HTTP/1.1 20 OK", "HTTP/1.1 099 Odd", "HTTP/1.1", "HTTP/1.1 abc", "ICY 200 OK", ""})
    EXPECT_EQ(parse_status_line(bad), 0) << bad;
}

TEST(HubHeaders, ContentRange) {
  using namespace ckpt::hub::detail;
  auto a = parse_content_range("bytes 100-199/1000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->first, 100u);
  EXPECT_EQ(a->last, 199u);
  EXPECT_EQ(a->total, 1000u);
  auto b = parse_content_range("Bytes 0-0/*");
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->total);
  auto c = parse_content_range("bytes */4096");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->unsatisfied);
  EXPECT_EQ(c->total, 4096u);
  auto big = parse_content_range("bytes 0-18446744073709551614/18446744073709551615");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->last, UINT64_MAX - 1);
  for (const char* bad : {"", "bytes", "bytes 1-2", "bytes -1-5/10", "bytes 5-1/10", "bytes 0-10/10",
                          "bytes 0-18446744073709551616/*", "bytes 0-18446744073709551615/18446744073709551615",
                          "items 0-1/2", "bytes 0 -1/2", "bytes 0-1/2x", "bytes 0-1/-2", "bytes */*", "bytes a-b/c",
                          "bytes 0-1/+2", "bytes=0-1/2", "bytes 1-/2", "bytes -/2"})
    EXPECT_FALSE(parse_content_range(bad)) << bad;
}

TEST(HubHeaders, RetryAfter) {
  using namespace ckpt::hub::detail;
  const std::time_t now = 1'700'000'000;  // 2023-11-14 22:13:20 UTC
  EXPECT_EQ(parse_retry_after("120", now), 120.0);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0.0);
  EXPECT_EQ(parse_retry_after("99999999999999999999999999", now), 365.0 * 24 * 3600);  // saturates
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:14:20 GMT", now), 60.0);
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now), 0.0);  // in the past
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 9999 08:49:37 GMT", now), 365.0 * 24 * 3600);
  for (const char* bad : {"", "-5", "1.5", "1e9", "inf", "nan", "0x10", "soon", "5 seconds", "Mon", "12:00",
                          "--", "-9223372036854775808"})
    EXPECT_FALSE(parse_retry_after(bad, now)) << bad;
}

TEST(HubHeaders, RateLimit) {
  using namespace ckpt::hub::detail;
  EXPECT_EQ(parse_ratelimit_wait("\"resolvers\";r=0;t=172"), 173.0);
  EXPECT_FALSE(parse_ratelimit_wait("\"resolvers\";r=2999;t=172"));  // quota left: no wait
  EXPECT_EQ(parse_ratelimit_wait("\"a\";r=0;t=5, \"b\";r=0;t=9, \"c\";r=3;t=50"), 10.0);  // longest exhausted
  EXPECT_EQ(parse_ratelimit_wait("limit=100, remaining=0, reset=50"), 51.0);
  EXPECT_EQ(parse_ratelimit_wait("\"x\";r=0;t=99999999999999999999999"), 365.0 * 24 * 3600 + 1);  // saturates
  for (const char* bad : {"", "\"x\";r=0", "\"x\";t=5", "\"x\";r=-1;t=5", "\"x\";r=0;t=-5", "\"x\";r=0;t=1.5",
                          "\"x\";r=0;t=", "\"x\";r=;t=5", "garbage", ";;;,,,==", "remaining=0", "reset=5",
                          "remaining=-0, reset=5"})
    EXPECT_FALSE(parse_ratelimit_wait(bad)) << bad;
}
