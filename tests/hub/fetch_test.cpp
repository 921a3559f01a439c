// Fetch against the loopback mock hub: one test per injected fault, each asserting the end
// state: a verified file in the exact huggingface_hub layout, or a loud failure with nothing
// partial published.
#include <fcntl.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "hub_fixture.h"

using namespace hubtest;

TEST_F(HubTest, FetchesWholeRepoIntoExactCacheLayout) {
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.commit, kC1);
  EXPECT_EQ(r.files.size(), 3u);
  for (const auto& f : standard_files()) expect_published(kC1, f);
  EXPECT_EQ(read_text(repo_dir() / "refs" / "main"), kC1);  // no trailing newline
  EXPECT_TRUE(fs::exists(cache() / ".locks" / "models--org--model" / (MockHub::etag_of(file("config.json")) + ".lock")));
  EXPECT_EQ(r.snapshot_dir, repo_dir() / "snapshots" / kC1);
  EXPECT_EQ(hub.count("hub", "GET", "/api/models/org/model/revision/main"), 1);
  EXPECT_EQ(hub.count("hub", "GET", "/api/models/org/model/tree/" + kC1), 1);
  // Second run: everything cached, no file requests at all.
  int heads = hub.count("hub", "HEAD", "/");
  auto r2 = fetch(opts());
  ASSERT_TRUE(r2.ok);
  for (const auto& f : r2.files) EXPECT_TRUE(f.cached) << f.path;
  EXPECT_EQ(hub.count("hub", "HEAD", "/"), heads);
}

TEST_F(HubTest, StallAfterBytesIsAbortedAndResumed) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::stall_after, 100 * 1024, 0, 500, 1});
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_LT(since(t0), 8.0);
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(result_for(r, "model.safetensors")->retries, 1);
  bool resumed = false;
  for (const auto& l : hub.log())
    if (l.range == "bytes=102400-307199") resumed = true;
  EXPECT_TRUE(resumed) << "the retry resumes with Range from the received bytes";
}

TEST_F(HubTest, PermanentStallFailsLoudlyWithinBoundAndPublishesNothing) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::stall_after, 50 * 1024, 0, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(o);
  EXPECT_LT(since(t0), 10.0);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  ASSERT_NE(fr, nullptr);
  EXPECT_EQ(fr->kind, hub::ErrorKind::network);
  EXPECT_NE(fr->error.find("stalled"), std::string::npos) << fr->error;
  EXPECT_EQ(fr->expected, 300u * 1024);
  expect_not_published(kC1, file("model.safetensors"));
  EXPECT_FALSE(fs::exists(repo_dir() / "refs" / "main")) << "refs only after every file is published";
  // The other files are fine; the .incomplete remains for a later resume.
  expect_published(kC1, file("config.json"));
  EXPECT_TRUE(fs::exists(repo_dir() / "blobs" / (MockHub::etag_of(file("model.safetensors")) + ".incomplete")));
}

TEST_F(HubTest, ResetMidBodyIsResumed) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::reset_after, 64 * 1024, 0, 500, 2});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(result_for(r, "model.safetensors")->retries, 2);
}

TEST_F(HubTest, SlowDripBelowThresholdIsAbortedAndBounded) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::drip, 0, 0.05, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(o);
  EXPECT_LT(since(t0), 10.0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(result_for(r, "model.safetensors")->error.find("stalled"), std::string::npos);
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ServerErrorsOnGetAreRetried) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::status, 0, 0, 503, 2});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ServerErrorOnMetadataHeadIsRetried) {
  Fault f{FaultKind::status, 0, 0, 502, 1};
  f.on_head = true;
  hub.set_fault(kRepo, "config.json", f);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("config.json"));
}

TEST_F(HubTest, ServerErrorsForeverFailWithStatus) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::status, 0, 0, 500, -1});
  auto o = opts();
  o.retries = 2;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(result_for(r, "model.safetensors")->error.find("HTTP 500"), std::string::npos);
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, RateLimitHonoursRetryAfter) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::rate_limit, 0, 1, 429, 1});
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(since(t0), 0.95) << "waited for Retry-After: 1";
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, RateLimitHonoursRateLimitHeader) {
  Fault f{FaultKind::rate_limit, 0, 0, 429, 1};
  f.ratelimit_header = true;  // "resolvers";r=0;t=0 -> wait t+1 = 1 s
  hub.set_fault(kRepo, "model.safetensors", f);
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(since(t0), 0.95);
}

TEST_F(HubTest, RangeIgnoredRestartsFromZero) {
  MockHub::etag_of(file("model.safetensors"));
  hub.add_commit(kRepo, kC1, [] {
    auto fs_ = standard_files();
    fs_[1].ignore_range = true;
    return fs_;
  }());
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::reset_after, 100 * 1024, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, WrongContentLengthIsRetried) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::wrong_length, 0, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ShortContentLengthForeverFails) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::short_length, 1000, 0, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_NE(fr->error.find("Content-Length"), std::string::npos) << fr->error;
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, TruncatedBodyIsResumedOrFailsLoudly) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::truncate_after, 200 * 1024, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, TruncatedBodyForeverFails) {
  hub.set_fault(kRepo, "config.json", {FaultKind::truncate_after, 5, 0, 500, -1});
  auto o = opts();
  o.retries = 1;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "config.json");
  EXPECT_EQ(fr->kind, hub::ErrorKind::network);
  expect_not_published(kC1, file("config.json"));
}

TEST_F(HubTest, CorruptedBytesOnceAreRedownloaded) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::corrupt, 1234, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, CorruptedBytesAlwaysFailHashAndPublishNothing) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::corrupt, 1234, 0, 500, -1});
  hub.set_fault(kRepo, "config.json", {FaultKind::corrupt, 3, 0, 500, -1});
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  EXPECT_EQ(fr->kind, hub::ErrorKind::integrity);
  EXPECT_NE(fr->error.find("sha256 mismatch"), std::string::npos) << fr->error;
  EXPECT_NE(result_for(r, "config.json")->error.find("git blob sha1 mismatch"), std::string::npos);
  expect_not_published(kC1, file("model.safetensors"));
  expect_not_published(kC1, file("config.json"));
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / (MockHub::etag_of(file("model.safetensors")) + ".incomplete")))
      << "corrupt bytes are not kept for resume";
}

TEST_F(HubTest, CdnRedirectDropsAuthorization) {
  hub.enable_cdn();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  int cdn_gets = 0;
  for (const auto& l : hub.log()) {
    if (l.server == "cdn") {
      ++cdn_gets;
      EXPECT_EQ(l.authorization, "") << "the token must not reach another host";
    } else {
      EXPECT_EQ(l.authorization, "Bearer hf_test") << l.target;
    }
  }
  EXPECT_GE(cdn_gets, 1);
}

TEST_F(HubTest, CdnStallIsResumedOnTheCdn) {
  hub.enable_cdn();
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::stall_after, 10 * 1024, 0, 500, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_GE(hub.count("cdn", "GET", "/blob/"), 2);
}

TEST_F(HubTest, GatedRepoWithoutTokenIs401Gated) {
  hub.set_gated(kRepo, "hf_approved");
  auto o = opts();
  o.token.clear();
  ::setenv("HF_TOKEN_PATH", (tmp.path() / "no-token").c_str(), 1);
  ::setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1", 1);
  ::unsetenv("HF_TOKEN");
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.kind, hub::ErrorKind::gated);
  EXPECT_NE(r.error.find("authenticate"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(repo_dir() / "snapshots"));
}

TEST_F(HubTest, GatedRepoWithUnapprovedTokenIs403Gated) {
  hub.set_gated(kRepo, "hf_approved");
  auto r = fetch(opts());
  EXPECT_EQ(r.kind, hub::ErrorKind::gated);
  EXPECT_NE(r.error.find("authorized list"), std::string::npos) << r.error;
  auto o = opts();
  o.token = "hf_approved";
  EXPECT_TRUE(fetch(o).ok);
}

TEST_F(HubTest, RepoNotFound) {
  hub::RepoSpec s;
  s.repo_id = "org/missing";
  auto r = hub::fetch(s, opts());
  EXPECT_EQ(r.kind, hub::ErrorKind::repo_not_found);
  EXPECT_NE(r.error.find("repository not found"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(cache() / "models--org--missing" / "snapshots"));
}

TEST_F(HubTest, RevisionNotFound) {
  auto r = fetch(opts(), "nope");
  EXPECT_EQ(r.kind, hub::ErrorKind::revision_not_found);
  EXPECT_NE(r.error.find("revision not found"), std::string::npos);
}

TEST_F(HubTest, EntryNotFoundWritesNoExistMarker) {
  auto o = opts();
  o.paths = {"config.json", "missing/generation_config.json"};
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "missing/generation_config.json");
  EXPECT_EQ(fr->kind, hub::ErrorKind::entry_not_found);
  EXPECT_TRUE(fs::is_regular_file(repo_dir() / ".no_exist" / kC1 / "missing" / "generation_config.json"));
  expect_published(kC1, file("config.json"));
}

TEST_F(HubTest, HeadersDelayedPastTimeoutAreRetried) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::headers_delay, 0, 5, 500, 1});
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_LT(since(t0), 4.5) << "did not wait for the delayed headers";
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, HeadersDelayedOnMetadataForeverFailsBounded) {
  Fault f{FaultKind::headers_delay, 0, 30, 500, -1};
  f.on_head = true;
  hub.set_fault(kRepo, "config.json", f);
  auto o = opts();
  o.retries = 1;
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(o);
  EXPECT_LT(since(t0), 10.0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(result_for(r, "config.json")->error.find("waiting for response headers"), std::string::npos);
  expect_not_published(kC1, file("config.json"));
}

TEST_F(HubTest, RevisionMovingBetweenCallsGivesTwoConsistentSnapshots) {
  auto files2 = standard_files();
  files2[0].content = "{\"model_type\": \"mistral\"}\n";
  hub.add_commit(kRepo, kC2, files2);
  hub.move_ref_after(kRepo, "main", 1, kC2);
  auto r1 = fetch(opts());
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_EQ(r1.commit, kC1);
  auto r2 = fetch(opts());
  ASSERT_TRUE(r2.ok) << r2.error;
  EXPECT_EQ(r2.commit, kC2);
  EXPECT_EQ(read_text(repo_dir() / "refs" / "main"), kC2);
  expect_published(kC1, file("config.json"));
  expect_published(kC2, files2[0]);
  // The unchanged blobs are shared, not downloaded twice.
  EXPECT_TRUE(result_for(r2, "model.safetensors")->cached);
}

TEST_F(HubTest, PullRequestRevisionIsPercentEncoded) {
  hub.set_ref(kRepo, "refs/pr/1", kC1);
  auto r = fetch(opts(), "refs/pr/1");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(read_text(repo_dir() / "refs" / "refs" / "pr" / "1"), kC1);
  EXPECT_EQ(hub.count("hub", "GET", "/api/models/org/model/revision/refs%2Fpr%2F1"), 1);
}

TEST_F(HubTest, EscapingFileNamesAreRejected) {
  auto files = standard_files();
  files.push_back(text_file("../escape.txt", "evil"));
  files.push_back(text_file("a/../../escape2.txt", "evil"));
  hub.add_commit(kRepo, kC1, files);
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(result_for(r, "../escape.txt")->error.find("escape"), std::string::npos);
  EXPECT_FALSE(fs::exists(repo_dir() / "snapshots" / "escape.txt"));
  EXPECT_FALSE(fs::exists(repo_dir() / "escape2.txt"));
  EXPECT_FALSE(fs::exists(tmp.path() / "escape.txt"));
  expect_published(kC1, file("config.json"));
}

TEST_F(HubTest, ParallelRangesWithAFaultInOnePart) {
  auto o = opts();
  o.range_threshold = 64 * 1024;
  o.range_parts = 4;
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::reset_after, 10 * 1024, 0, 500, 1});
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  int ranged = 0;
  for (const auto& l : hub.log())
    if (l.range.rfind("bytes=", 0) == 0 && l.method == "GET") ++ranged;
  EXPECT_GE(ranged, 5);
}

TEST_F(HubTest, ParallelRangesFallBackWhenRangeIgnored) {
  hub.add_commit(kRepo, kC1, [] {
    auto f = standard_files();
    f[1].ignore_range = true;
    return f;
  }());
  auto o = opts();
  o.range_threshold = 64 * 1024;
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ResumesAcrossRunsFromIncomplete) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::stall_after, 120 * 1024, 0, 500, 1});
  auto o = opts();
  o.retries = 0;
  auto r1 = fetch(o);
  EXPECT_FALSE(r1.ok);
  auto inc = repo_dir() / "blobs" / (MockHub::etag_of(file("model.safetensors")) + ".incomplete");
  ASSERT_TRUE(fs::exists(inc));
  EXPECT_EQ(fs::file_size(inc), 120u * 1024);
  auto r2 = fetch(opts());
  ASSERT_TRUE(r2.ok) << r2.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(result_for(r2, "model.safetensors")->downloaded, 180u * 1024);
}

TEST_F(HubTest, ConcurrentFetchesOfTheSameRepoCooperate) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::drip, 0, 0.0002, 500, 1});
  hub::FetchResult a, b;
  std::thread t1([&] { a = fetch(opts()); });
  std::thread t2([&] { b = fetch(opts()); });
  t1.join();
  t2.join();
  EXPECT_TRUE(a.ok) << a.error;
  EXPECT_TRUE(b.ok) << b.error;
  for (const auto& f : standard_files()) expect_published(kC1, f);
}

TEST_F(HubTest, LocalDirModeWritesMetadata) {
  auto o = opts();
  o.local_dir = tmp.path() / "local";
  o.cache_dir.clear();
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : standard_files()) {
    EXPECT_EQ(read_text(o.local_dir / f.path), f.content);
    EXPECT_FALSE(fs::is_symlink(o.local_dir / f.path));
    auto meta = read_text(o.local_dir / ".cache/huggingface/download" / (f.path + ".metadata"));
    EXPECT_EQ(meta.substr(0, 41 + MockHub::etag_of(f).size() + 1), kC1 + "\n" + MockHub::etag_of(f) + "\n");
  }
  EXPECT_EQ(read_text(o.local_dir / ".cache/huggingface/.gitignore"), "*");
  int gets = hub.count("hub", "GET", "/org/model/resolve/");
  auto r2 = fetch(o);
  ASSERT_TRUE(r2.ok);
  for (const auto& f : r2.files) EXPECT_TRUE(f.cached);
  EXPECT_EQ(hub.count("hub", "GET", "/org/model/resolve/"), gets);
  EXPECT_FALSE(fs::exists(cache()));
}

TEST_F(HubTest, OfflineUsesOnlyTheCache) {
  ASSERT_TRUE(fetch(opts()).ok);
  auto before = hub.log().size();
  auto o = opts();
  o.offline = true;
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.commit, kC1);
  EXPECT_EQ(r.files.size(), 3u);
  EXPECT_EQ(hub.log().size(), before) << "offline touched the network";
  hub::RepoSpec s;
  s.repo_id = "org/other";
  auto miss = hub::fetch(s, o);
  EXPECT_EQ(miss.kind, hub::ErrorKind::offline_missing);
  auto rl = hub::resolve_local(hub::RepoSpec{kRepo, "main", false, "model"}, cache());
  ASSERT_TRUE(rl.ok) << rl.error;
  EXPECT_EQ(rl.snapshot_dir, repo_dir() / "snapshots" / kC1);
}

TEST_F(HubTest, TreePaginationIsFollowed) {
  hub.set_tree_page_size(1);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.files.size(), 3u);
  EXPECT_GE(hub.count("hub", "GET", "/api/models/org/model/tree/"), 3);
}

TEST_F(HubTest, IncludeExcludeGlobs) {
  auto o = opts();
  o.include = {"*.json"};
  o.exclude = {"sub/*"};
  auto r = fetch(o);
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].path, "config.json");
}

TEST_F(HubTest, ExistingTruncatedBlobIsReplaced) {
  ASSERT_TRUE(fetch(opts()).ok);
  auto blob = repo_dir() / "blobs" / MockHub::etag_of(file("model.safetensors"));
  fs::resize_file(blob, 1000);
  fs::remove(repo_dir() / "snapshots" / kC1 / "model.safetensors");
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, ExpiredCdnUrlIsRefreshedThroughTheHub) {
  hub.enable_cdn();
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::forbidden, 0, 0, 403, 1});
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, file("model.safetensors"));
  EXPECT_EQ(hub.count("hub", "HEAD", "/org/model/resolve/" + kC1 + "/model.safetensors"), 2);
}

TEST_F(HubTest, CdnForbiddenForeverFailsLoudly) {
  hub.enable_cdn();
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::forbidden, 0, 0, 403, -1});
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(result_for(r, "model.safetensors")->error.find("HTTP 403"), std::string::npos);
  expect_not_published(kC1, file("model.safetensors"));
}

TEST_F(HubTest, MissingCommitHeaderIsAProtocolError) {
  // Metadata without X-Repo-Commit (a proxy in the way): fail loudly, publish nothing.
  hub.strip_commit_header(true);
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  for (const auto& f : standard_files()) {
    auto* fr = result_for(r, f.path);
    ASSERT_NE(fr, nullptr);
    EXPECT_EQ(fr->kind, hub::ErrorKind::protocol);
    EXPECT_NE(fr->error.find("X-Repo-Commit"), std::string::npos) << fr->error;
    expect_not_published(kC1, f);
  }
}

// The only transfer, >= 16 MiB, one stream: hashed on a helper thread from the write buffers
// (MemoryHasher in fetch_transfer.cpp). Clean, resumed after resets (the hash carried over),
// restarted when the resumed GET is answered 200, and downloaded again after corrupt bytes.
// Each case runs twice: buffered writes, and --direct (O_DIRECT writes by a second helper,
// the file's tail and unaligned resumes through the buffered descriptor).
struct LoneLargeStreamBase : HubTest {
  MockFile big = lfs_file("model.safetensors", (24u << 20) + 12345, 11);
  void SetUp() override {
    HubTest::SetUp();
    hub.add_commit(kRepo, kC1, {big});
  }
  hub::FetchOptions lone_stream(bool direct) const {
    auto o = opts();
    o.jobs = 1;
    o.range_parts = 1;
    o.direct_io = direct;
    return o;
  }
};
struct LoneLargeStream : LoneLargeStreamBase, ::testing::WithParamInterface<bool> {
  hub::FetchOptions one_stream() const { return lone_stream(GetParam()); }
};

TEST_P(LoneLargeStream, IsHashedAndPublished) {
  auto r = fetch(one_stream());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, big);
}

TEST_P(LoneLargeStream, ResetsAreResumed) {
  hub.set_fault(kRepo, big.path, {FaultKind::reset_after, 3u << 20, 0, 500, 2});
  auto r = fetch(one_stream());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, big);
  EXPECT_EQ(result_for(r, big.path)->retries, 2);
}

TEST_P(LoneLargeStream, RangeIgnoredOnResumeRestartsFromZero) {
  big.ignore_range = true;
  hub.add_commit(kRepo, kC1, {big});
  hub.set_fault(kRepo, big.path, {FaultKind::reset_after, 3u << 20, 0, 500, 1});
  auto r = fetch(one_stream());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, big);
}

TEST_P(LoneLargeStream, CorruptBytesAreDownloadedAgain) {
  hub.set_fault(kRepo, big.path, {FaultKind::corrupt, 10u << 20, 0, 500, 1});
  auto r = fetch(one_stream());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, big);
}

TEST_P(LoneLargeStream, AResetAtAnUnalignedOffsetIsResumed) {
  // The resumed stream starts off a page boundary: direct mode writes it buffered.
  hub.set_fault(kRepo, big.path, {FaultKind::reset_after, (5u << 20) + 777, 0, 500, 1});
  auto r = fetch(one_stream());
  ASSERT_TRUE(r.ok) << r.error;
  expect_published(kC1, big);
  EXPECT_EQ(result_for(r, big.path)->retries, 1);
}

TEST_P(LoneLargeStream, AFailedWriteFailsTheFileAndPublishesNothing) {
  // The file-size limit makes the write past 4 MiB fail (EFBIG), as a full disk would.
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 4u << 20;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  auto r = fetch(one_stream());
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(r.ok);
  const auto* fr = result_for(r, big.path);
  ASSERT_NE(fr, nullptr);
  EXPECT_NE(fr->error.find("write failed"), std::string::npos) << fr->error;
  EXPECT_LT(fr->received, big.content.size());
  expect_not_published(kC1, big);
}

TEST_F(LoneLargeStreamBase, DirectWritesLeaveThePageCacheAlone) {
  auto r = fetch(lone_stream(true));
  ASSERT_TRUE(r.ok) << r.error;
  struct statfs sf {};
  ASSERT_EQ(::statfs(cache().c_str(), &sf), 0);
  if (sf.f_type == TMPFS_MAGIC) GTEST_SKIP() << "tmpfs: every page of a file is in memory";
  const auto blob = fs::canonical(repo_dir() / "snapshots" / kC1 / big.path);
  int fd = ::open(blob.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const size_t len = big.content.size(), page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(m, MAP_FAILED);
  std::vector<unsigned char> resident((len + page - 1) / page);
  ASSERT_EQ(::mincore(m, len, resident.data()), 0);
  ::munmap(m, len);
  size_t in_cache = 0;
  for (unsigned char v : resident) in_cache += v & 1;
  // The 1 MiB slots went around the page cache; what is there came from the unaligned tail
  // and reads after the download.
  EXPECT_LT(in_cache, resident.size() / 4) << in_cache << " of " << resident.size() << " pages cached";
  expect_published(kC1, big);  // reads the file: after the residency count
}

INSTANTIATE_TEST_SUITE_P(BufferedAndDirect, LoneLargeStream, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "direct" : "buffered"; });

TEST_F(HubTest, DirectModeFetchesSeveralFilesAtOnceAndDurably) {
  // --direct --fsync --jobs 3: every transfer has its own hashing and writing helpers.
  std::vector<MockFile> files;
  for (int i = 0; i < 3; ++i)
    files.push_back(lfs_file("model-0000" + std::to_string(i + 1) + "-of-00003.safetensors", (3u << 20) + 1000 * i, 20 + i));
  hub.add_commit(kRepo, kC1, files);
  hub.set_fault(kRepo, files[1].path, {FaultKind::reset_after, (1u << 20) + 4096, 0, 500, 1});
  auto o = opts();
  o.jobs = 3;
  o.direct_io = true;
  o.durable = true;
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  for (const auto& f : files) expect_published(kC1, f);
  EXPECT_EQ(result_for(r, files[1].path)->retries, 1);
}
