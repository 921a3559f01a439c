// Fetch against hub variants an independent server may legitimately (or not) produce: other
// framings, header spellings, redirect shapes, range answers and encodings. Each test asserts
// the end state: a verified file in the exact layout, or a loud failure with nothing published.
#include "hub_fixture.h"

using namespace hubtest;

namespace {

std::vector<MockFile> with(std::function<void(MockFile&)> change) {
  auto files = standard_files();
  for (auto& f : files) change(f);
  return files;
}

bool logged(const MockHub& hub, const std::string& method, const std::string& needle, const std::string& range = "-") {
  for (const auto& l : hub.log())
    if (l.method == method && l.target.find(needle) != std::string::npos && (range == "-" || l.range == range))
      return true;
  return false;
}

}  // namespace

TEST_F(HubTest, ChunkedTransferEncodingWithoutContentLength) {
  // GET bodies chunked, HEADs without Content-Length: the small files' sizes come from the tree.
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.chunked = true; }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, ChunkedBodyCutMidChunkIsResumed) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.chunked = true; }));
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 100 * 1000, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "bytes=100000-307199"));
}

TEST_F(HubTest, CloseDelimitedBodiesWithoutContentLength) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.no_length = true; }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, CloseDelimitedBodyEndingEarlyIsResumedNotPublished) {
  // Without Content-Length a connection closed early looks like a complete body to HTTP:
  // only the expected size tells, and the missing bytes are asked for with Range.
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.no_length = true; }));
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 64 * 1024, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "bytes=65536-307199"));
}

TEST_F(HubTest, HeadContentLengthDifferingFromLinkedSizeUsesLinkedSize) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) {
    if (f.lfs) f.head_length = 134;  // the pointer's size, as a proxy might answer
  }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(result_for(r, "model.safetensors")->expected, 300u * 1024);
}

TEST_F(HubTest, LfsWithoutLinkedSizeUsesTheDirectContentLength) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.no_linked_size = true; }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, RelativePathRedirectsAreFollowed) {
  hub.relative_redirects(true);  // Location: "tokenizer.json?direct=1"
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "GET", "/org/model/resolve/" + kC1 + "/sub/dir/tokenizer.json?direct=1"));
}

TEST_F(HubTest, RedirectLoopOnMetadataFailsLoudlyAndBounded) {
  Fault f{FaultKind::redirect_loop, 0, 0, 500, -1};
  f.on_head = true;
  hub.set_fault(kRepo, "config.json", f);
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  EXPECT_LT(since(t0), 10.0);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "config.json");
  EXPECT_EQ(fr->kind, hub::ErrorKind::protocol);
  EXPECT_NE(fr->error.find("redirect"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("config.json"));
  expect_published(kC1, file("model.safetensors"));
  EXPECT_FALSE(fs::exists(repo_dir() / "refs" / "main"));
}

TEST_F(HubTest, RedirectLoopOnDownloadFailsLoudly) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::redirect_loop, 0, 0, 500, -1});
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_NE(fr->error.find("too many redirects"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, RedirectWithoutLocationOnDownloadFailsLoudly) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::no_location, 0, 0, 500, -1});
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_EQ(fr->kind, hub::ErrorKind::protocol);
  EXPECT_NE(fr->error.find("without a Location"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, SameHostAbsoluteRedirectKeepsAuthAndTheLinkedEtag) {
  // LFS via a 302 to http://<hub>/lfs/<sha256>, whose own ETag is an S3-style multipart etag:
  // the blob is named by X-Linked-Etag from the 302 (as huggingface_hub reads it there).
  hub.same_host_lfs(true);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  bool lfs_get = false;
  for (const auto& l : hub.log())
    if (l.method == "GET" && l.target.rfind("/lfs/", 0) == 0) {
      lfs_get = true;
      EXPECT_EQ(l.authorization, "Bearer hf_test") << "same host: the token is kept";
    }
  EXPECT_TRUE(lfs_get);
}

TEST_F(HubTest, SameHostAbsoluteRedirectWithoutLinkedSizeIsFollowed) {
  hub.same_host_lfs(true);
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.no_linked_size = true; }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));  // still named by the sha256, not the S3 etag
}

TEST_F(HubTest, WeakQuotedEtagsAreNormalised) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.weak_etag = true; }));
  hub.enable_cdn();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, GzipEncodedApiJsonIsDecoded) {
  hub.gzip_api(true);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_TRUE(fs::exists(repo_dir() / "trees" / (kC1 + ".json"))) << "the (gzip) tree listing was used";
}

TEST_F(HubTest, GzipEncodedFileBodyIsDecodedAndVerified) {
  // The server compresses although identity was asked: the decoded bytes are verified, and the
  // HEAD's (compressed) Content-Length is not taken for the size.
  hub.add_commit(kRepo, kC1, with([](MockFile& f) {
    if (!f.lfs) f.gzip = true;
  }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, RetryAfterAsHttpDateIsHonoured) {
  Fault f{FaultKind::rate_limit, 0, 2, 429, 1};
  f.retry_after_date = true;
  hub.set_fault(kRepo, "model.safetensors", f);
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(since(t0), 0.9) << "waited for the date (1-2 s away at one-second resolution)";
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, HugeRetryAfterIsCapped) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::rate_limit, 0, 3600, 429, 1});
  auto o = opts();
  o.retry_after_max = 0.5;
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_LT(since(t0), 5.0);
}

TEST_F(HubTest, HeadersDribbledSlowerThanTheStallLimitAreAborted) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::header_drip, 0, 0.1, 500, 1});
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_LT(since(t0), 8.0);
  expect_published(kC1, file("model.safetensors"));
  EXPECT_GE(result_for(r, "model.safetensors")->retries, 1);
}

TEST_F(HubTest, ConnectionClosedAfterHeadersIsRetried) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 0, 0, 500, 2});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ConnectionAlwaysClosedAfterHeadersFailsLoudly) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 0, 0, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_EQ(fr->kind, hub::ErrorKind::network) << fr->error;
  EXPECT_EQ(fr->received, 0u);
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, EmptyOkBodyForANonEmptyFileFailsLoudly) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::short_length, 0, 0, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_NE(fr->error.find("Content-Length 0 differs"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, RangeNotSatisfiableOnResumeRestartsFromZero) {
  const auto& f = file("model.safetensors");
  auto inc = repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete");
  write_text(inc, f.content.substr(0, 100 * 1024));
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::range_416, 0, 0, 500, -1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "bytes=102400-307199"));
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "")) << "then the whole file without Range";
}

TEST_F(HubTest, AlreadyCompleteIncompleteIsPublishedWithoutDownloading) {
  // A run that died between the last byte and the rename: nothing left to ask for (no 416).
  const auto& f = file("model.safetensors");
  write_text(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete"), f.content);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
  EXPECT_FALSE(logged(hub, "GET", "model.safetensors"));
  EXPECT_EQ(result_for(r, "model.safetensors")->downloaded, 0u);
}

TEST_F(HubTest, FullSizeButCorruptIncompleteIsDiscardedAndRedownloaded) {
  const auto& f = file("model.safetensors");
  std::string bad = f.content;
  bad[5000] ^= 1;
  write_text(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete"), bad);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
}

TEST_F(HubTest, ContentRangeWithUnknownTotalIsAccepted) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.star_total = true; }));
  const auto& f = file("model.safetensors");
  write_text(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete"), f.content.substr(0, 1000));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
  EXPECT_EQ(result_for(r, "model.safetensors")->downloaded, 300u * 1024 - 1000);
}

TEST_F(HubTest, ContentRangeWithAnotherTotalRestartsFromZero) {
  const auto& f = file("model.safetensors");
  write_text(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete"), f.content.substr(0, 1000));
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::wrong_total, 0, 0, 500, -1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
}

TEST_F(HubTest, PartialRangeAnswersAreContinued) {
  // A server that answers at most 40 KB per ranged request (RFC 9110 allows fewer bytes).
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.max_range = 40000; }));
  auto o = opts();
  o.range_threshold = 64 * 1024;
  o.range_parts = 3;
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(result_for(r, "model.safetensors")->retries, 0) << "continuing a short range is no retry";
}

TEST_F(HubTest, PathsWithSpacesAndUnicodeArePercentEncoded) {
  auto files = standard_files();
  files.push_back(text_file("dir with space/ünï cödé #1?.json", "{\"x\": 1}"));
  MockFile w = lfs_file("weights/模型 a+b.safetensors", 70 * 1024, 11);
  files.push_back(w);
  hub.add_commit(kRepo, kC1, files);
  hub.enable_cdn();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : files) expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "HEAD", "/resolve/" + kC1 + "/dir%20with%20space/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9%20%231%3F.json"));
  EXPECT_TRUE(logged(hub, "HEAD", "/resolve/" + kC1 + "/weights/%E6%A8%A1%E5%9E%8B%20a%2Bb.safetensors"));
}

TEST_F(HubTest, TreePaginationWithRelativeAndSeparateLinkHeaders) {
  hub.set_tree_page_size(1);
  hub.tree_link_variants(true);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.files.size(), 3u);
  EXPECT_EQ(hub.count("hub", "GET", "/api/models/org/model/tree/"), 3);
}

TEST_F(HubTest, TreeApiUnavailableFallsBackToSiblings) {
  hub.break_tree_api(true);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_FALSE(fs::exists(repo_dir() / "trees")) << "no listing to cache";
}

TEST_F(HubTest, RepeatedListingEntriesAreFetchedOnce) {
  auto files = standard_files();
  files.push_back(files[0]);
  hub.add_commit(kRepo, kC1, files);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.files.size(), 3u);
  expect_published(kC1, files[0]);
}

TEST_F(HubTest, ListingThatContradictsTheMetadataFailsThatFile) {
  hub.lie_in_tree("config.json");
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "config.json");
  EXPECT_EQ(fr->kind, hub::ErrorKind::protocol);
  EXPECT_NE(fr->error.find("tree listing says"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("config.json"));
}

TEST_F(HubTest, KeepAliveConnectionsAreReusedAcrossHeadGetAndErrors) {
  // An HTTP/1.1 server that keeps connections open: HEADs (no body), 307s, error bodies and
  // downloads share connections; a fault that breaks the framing closes one and is retried.
  hub.keep_alive(true);
  hub.enable_cdn();
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::status, 0, 0, 503, 1});
  auto o = opts();
  o.jobs = 1;
  o.paths = {"config.json", "model.safetensors", "sub/dir/tokenizer.json", "missing.json"};
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(result_for(r, "missing.json")->kind, hub::ErrorKind::entry_not_found);
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_GT(hub.reused_requests(), 3);
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 50 * 1024, 0, 500, 1});
  fs::remove_all(repo_dir());
  o.paths.pop_back();
  auto r2 = fetch(o);
  ASSERT_TRUE(r2.ok) << r2.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, RedirectOnlyOnTheGetStillDropsAuthorization) {
  // The HEAD is answered by the hub (200 + X-Linked-*), the GET 302s to the CDN.
  hub.enable_cdn();
  hub.cdn_get_only(true);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  int cdn = 0;
  for (const auto& l : hub.log())
    if (l.server == "cdn") {
      ++cdn;
      EXPECT_EQ(l.authorization, "");
    }
  EXPECT_GE(cdn, 1);
}

TEST_F(HubTest, ContentEncodedRangedAnswersAreNotUsed) {
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.gzip_ranges = true; }));
  const auto& f = file("model.safetensors");
  write_text(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete"), f.content.substr(0, 5000));
  auto o = opts();
  o.range_threshold = 64 * 1024;  // parts get encoded answers too: one stream, then from byte 0
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, f);
}

TEST_F(HubTest, FsyncModePublishesTheSameLayout) {
  // --fsync: each blob is fdatasync'ed (writeback started as it downloads) before the rename.
  auto o = opts();
  o.durable = true;
  o.range_threshold = 64 * 1024;  // the parallel-range writers too
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::reset_after, 20 * 1024, 0, 500, 1});
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, DatasetRepoUsesItsUrlPrefixAndCacheFolder) {
  hub.add_commit("datasets/org/data", kC1, standard_files());
  hub.set_ref("datasets/org/data", "main", kC1);
  hub.enable_cdn();
  hub::RepoSpec s;
  s.repo_id = "org/data";
  s.repo_type = "dataset";
  auto r = hub::fetch(s, opts());
  ASSERT_TRUE(r.ok) << r.error;
  auto dir = cache() / "datasets--org--data";
  for (const auto& f : standard_files()) {
    auto link = dir / "snapshots" / kC1 / f.path;
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    EXPECT_EQ(read_text(link), f.content);
  }
  EXPECT_EQ(read_text(dir / "refs" / "main"), kC1);
  EXPECT_TRUE(fs::is_regular_file(dir / "trees" / (kC1 + ".json")));
  EXPECT_EQ(hub.count("hub", "GET", "/api/datasets/org/data/revision/main"), 1);
  EXPECT_EQ(hub.count("hub", "GET", "/api/datasets/org/data/tree/" + kC1), 1);
  EXPECT_GE(hub.count("hub", "HEAD", "/datasets/org/data/resolve/" + kC1 + "/"), 3);
  EXPECT_GE(hub.count("hub", "HEAD", "/api/resolve-cache/datasets/org/data/"), 2);
  EXPECT_FALSE(fs::exists(cache() / "models--org--data"));
}

TEST_F(HubTest, HeadRefusedWith405FallsBackToAGetOfTheFirstByte) {
  // A server without HEAD: the metadata comes from GET Range: bytes=0-0 (huggingface.js and
  // hf_transfer ask that way), its Content-Range giving the size; nothing is downloaded twice.
  hub.refuse_head(405);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "GET", "/org/model/resolve/" + kC1 + "/model.safetensors", "bytes=0-0"));
  EXPECT_EQ(hub.count("hub", "HEAD", "/org/model/resolve/"), 3);  // one refused HEAD per file, no retries
}

TEST_F(HubTest, HeadRefusedWith501IsNotRetriedAsAServerError) {
  hub.refuse_head(501);
  hub.enable_cdn();
  auto o = opts();
  o.backoff_base = 1;  // a retried 501 would cost seconds
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(o);
  EXPECT_LT(since(t0), 5.0);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_EQ(hub.count("hub", "HEAD", "/org/model/resolve/"), 3);
  // The LFS file's 302 (with X-Linked-*) answered the GET: the CDN saw only the download.
  EXPECT_FALSE(logged(hub, "GET", "/blob/", "bytes=0-0"));
}

TEST_F(HubTest, CdnRedirectWithoutLinkedSizeOrListingTakesTheSizeFromTheCdn) {
  // No X-Linked-Size on the 302 and no tree API: the sha256 etag still pins the bytes, so the
  // size the CDN reports for a one-byte range is used (huggingface_hub fails here).
  hub.enable_cdn();
  hub.break_tree_api(true);
  hub.add_commit(kRepo, kC1, with([](MockFile& f) { f.no_linked_size = true; }));
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "GET", "/blob/", "bytes=0-0"));
  for (const auto& l : hub.log())
    if (l.server == "cdn") EXPECT_EQ(l.authorization, "") << l.target;
}

TEST_F(HubTest, KeepAliveAnnouncedButClosedAfterEveryResponse) {
  // "Connection: keep-alive", then a close: the reused connection is found dead on the next
  // request and a fresh one opened, without a failed attempt or a retry being counted.
  hub.keep_alive_lie(true);
  auto o = opts();
  o.jobs = 1;  // one connection per thread, so every request after the first tries to reuse it
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  for (const auto& f : r.files) EXPECT_EQ(f.retries, 0) << f.path;
}

TEST_F(HubTest, Http10FilesWithoutContentLengthAndACutBodyAreResumed) {
  // HTTP/1.0 answers end with the connection: a body cut short looks complete to HTTP, so only
  // the expected size tells; the rest is asked for with Range (206, still without a length).
  hub.http10_files(true);
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 100 * 1000, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "bytes=100000-307199"));
}

namespace {
// A repo whose LFS file is large enough (>= 16 MiB) for a lone single stream to be hashed on a
// helper thread that follows the file, instead of in the write callback.
std::vector<MockFile> with_large_lfs(bool ignore_range) {
  auto files = standard_files();
  for (auto& f : files)
    if (f.lfs) {
      f.content = random_bytes(17u << 20, 11);
      f.ignore_range = ignore_range;
    }
  return files;
}
const MockFile& large_lfs(const std::vector<MockFile>& files) {
  for (const auto& f : files)
    if (f.lfs) return f;
  throw std::runtime_error("no lfs file");
}
}  // namespace

TEST_F(HubTest, LoneLargeStreamHashedOnAHelperSurvivesARestartFromZero) {
  // Cut after 5 MB, then Range ignored (200): the helper thread is stopped before the file and
  // the hash are reset, and the restarted stream is verified in full.
  auto files = with_large_lfs(true);
  hub.add_commit(kRepo, kC1, files);
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 5'000'000, 0, 500, 1});
  auto o = opts();
  o.jobs = 1;
  auto r = fetch(o, kC1);  // by commit: HEAD and GET of the big file are the only transfers
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, large_lfs(files));
  EXPECT_TRUE(logged(hub, "GET", "model.safetensors", "bytes=5000000-17825791"));
}

TEST_F(HubTest, LoneLargeStreamHashedOnAHelperCatchesCorruption) {
  auto files = with_large_lfs(false);
  hub.add_commit(kRepo, kC1, files);
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::corrupt, 12u << 20, 0, 500, 1});
  auto o = opts();
  o.jobs = 1;
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, large_lfs(files));
  EXPECT_EQ(result_for(r, "model.safetensors")->retries, 1);  // the mismatch, then a clean download
}
