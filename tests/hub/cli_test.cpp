// The `ckpt fetch` / `ckpt resolve` command lines against the mock hub.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "mock_hub.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt::test;

namespace {

const std::string kCommit = "3333333333333333333333333333333333333333";

std::string tiny_safetensors() {
  std::string header = R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out += header;
  out += std::string(16, '\0');
  return out;
}

struct CliTest : ::testing::Test {
  MockHub hub;
  TempDir tmp;
  void SetUp() override {
    MockFile cfg;
    cfg.path = "config.json";
    cfg.content = "{\"model_type\": \"llama\"}\n";
    MockFile st;
    st.path = "model.safetensors";
    st.content = tiny_safetensors();
    st.lfs = true;
    hub.add_commit("org/tiny", kCommit, {cfg, st});
    hub.set_ref("org/tiny", "main", kCommit);
  }
  std::vector<std::string> common() const {
    return {"--endpoint", hub.endpoint(), "--cache-dir", (tmp.path() / "hub").string(), "--stall-timeout", "1",
            "--backoff", "0.01", "--backoff-max", "0.05", "--retries", "1"};
  }
  CommandResult fetch(std::vector<std::string> args) {
    std::vector<std::string> a = {"fetch"};
    a.insert(a.end(), args.begin(), args.end());
    auto c = common();
    a.insert(a.end(), c.begin(), c.end());
    return run_ckpt(a, {"HF_TOKEN=", "HF_HUB_OFFLINE=0", "CI=1"});
  }
};

}  // namespace

TEST_F(CliTest, FetchThenResolve) {
  auto r = fetch({"org/tiny", "--no-verify"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fetched org/tiny -> " + kCommit), std::string::npos) << r.out;
  auto snap = tmp.path() / "hub" / "models--org--tiny" / "snapshots" / kCommit;
  EXPECT_NE(r.out.find("snapshot: " + snap.string()), std::string::npos);
  auto res = run_ckpt({"resolve", "org/tiny", "--offline", "--cache-dir", (tmp.path() / "hub").string()});
  EXPECT_EQ(res.exit_code, 0) << res.err;
  EXPECT_EQ(res.out, snap.string() + "\n");
  int before = static_cast<int>(hub.log().size());
  // Without --refresh the answer comes from the cache's refs, without the network, and says so.
  auto cached = run_ckpt({"resolve", "org/tiny", "--endpoint", hub.endpoint(), "--cache-dir", (tmp.path() / "hub").string()},
                         {"HF_HUB_OFFLINE=0"});
  EXPECT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(cached.out, snap.string() + "\n");
  EXPECT_EQ(static_cast<int>(hub.log().size()), before) << "no request without --refresh";
  EXPECT_NE(cached.err.find("main is " + kCommit + ", from the cache's refs (no network"), std::string::npos) << cached.err;
  auto online = run_ckpt({"resolve", "org/tiny", "--refresh", "--endpoint", hub.endpoint(), "--cache-dir",
                          (tmp.path() / "hub").string()},
                         {"HF_HUB_OFFLINE=0"});
  EXPECT_EQ(online.exit_code, 0) << online.err;
  EXPECT_EQ(online.out, snap.string() + "\n");
  EXPECT_EQ(static_cast<int>(hub.log().size()), before + 1) << "one revision API call";
  EXPECT_NE(online.err.find("as the hub says now"), std::string::npos) << online.err;
  // A moved branch is noticed only when asked.
  const std::string moved = "4444444444444444444444444444444444444444";
  hub.add_commit("org/tiny", moved, {});
  hub.set_ref("org/tiny", "main", moved);
  auto stale = run_ckpt({"resolve", "org/tiny", "--refresh", "--endpoint", hub.endpoint(), "--cache-dir",
                         (tmp.path() / "hub").string()},
                        {"HF_HUB_OFFLINE=0"});
  EXPECT_EQ(stale.exit_code, 1) << stale.err;
  EXPECT_NE(stale.err.find("moved upstream"), std::string::npos) << stale.err;
  auto missing = run_ckpt({"resolve", "org/other@main", "--offline", "--cache-dir", (tmp.path() / "hub").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not in the cache"), std::string::npos) << missing.err;
}

TEST_F(CliTest, FetchRunsVerifyOnTheSnapshot) {
  // The tiny repo has no tokenizer and a config without dimensions: verify reports errors.
  auto r = fetch({"org/tiny"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verify:"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("::warning::ckpt fetch org/tiny: every file was fetched"), std::string::npos) << r.err;
  auto strict = fetch({"org/tiny", "--fail-on-verify"});
  EXPECT_EQ(strict.exit_code, 1) << strict.out << strict.err;
  EXPECT_NE(strict.err.find("::error::"), std::string::npos);
}

TEST_F(CliTest, FailureIsLoudWithBytesAndNonZeroExit) {
  // Stalls after 40 bytes of every response: 2 attempts (retries 1) leave 80 bytes.
  hub.set_fault("org/tiny", "model.safetensors", {FaultKind::stall_after, 40, 0, 500, -1});
  auto r = fetch({"org/tiny", "--stall-bytes", "16"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("::error::ckpt fetch org/tiny: model.safetensors:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("received 80 of " + std::to_string(tiny_safetensors().size()) +
                       " bytes; nothing published for it) [NET008 network]"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(tmp.path() / "hub/models--org--tiny/snapshots" / kCommit / "model.safetensors")));
}

// A file whose bytes never match its hash comes down twice (one retry from byte 0): the error
// says what came over the network, not the 0 bytes left on disk.
TEST_F(CliTest, HashMismatchCountsWhatCameDown) {
  hub.set_fault("org/tiny", "model.safetensors", {FaultKind::corrupt, 20, 0, 500, -1});
  auto r = fetch({"org/tiny", "--no-verify"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string n = std::to_string(tiny_safetensors().size());
  EXPECT_NE(r.err.find("received " + std::to_string(2 * tiny_safetensors().size()) + " bytes over the network for its " +
                       n + " in 2 attempts; nothing published for it)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("received 0 of"), std::string::npos) << r.err;
}

// The report printed after a fetch is timed, and both print the same totals for the snapshot.
TEST_F(CliTest, PostFetchReportTimedWithTheFetchTotals) {
  auto r = fetch({"org/tiny"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("checked in 0.0 ms"), std::string::npos) << r.out;
  const std::string total = std::to_string(tiny_safetensors().size() + 24) + " B";  // config.json is 24 bytes
  EXPECT_NE(r.out.find("2 files (2 downloaded, 0 cached, 0 failed), " + total + ","), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 files (" + total + "), 1 tensor in "), std::string::npos) << r.out;
  auto snap = tmp.path() / "hub" / "models--org--tiny" / "snapshots" / kCommit;
  auto v = run_ckpt({"verify", snap.string()});
  EXPECT_NE(v.out.find("2 files (" + total + "), 1 tensor in "), std::string::npos) << v.out;
}

// verify finds org/name in the cache --cache-dir names (fetch and resolve take it too).
TEST_F(CliTest, VerifyCacheDir) {
  ASSERT_EQ(fetch({"org/tiny", "--no-verify"}).exit_code, 0);
  auto hub_dir = (tmp.path() / "hub").string();
  auto v = run_ckpt({"verify", "org/tiny", "--cache-dir", hub_dir, "--format", "json"}, {"HF_HUB_CACHE=/nonexistent"});
  EXPECT_NE(v.exit_code, 2) << v.err;
  EXPECT_NE(v.out.find("\"target\":\"org/tiny\""), std::string::npos) << v.out;
  auto missing = run_ckpt({"verify", "org/tiny"}, {"HF_HUB_CACHE=/nonexistent", "HF_HOME="});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("HF_HUB_CACHE"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("--cache-dir"), std::string::npos) << missing.err;
}

TEST_F(CliTest, SeveralReposEachReported) {
  auto r = fetch({"org/tiny@main", "config.json", "org/missing"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("fetched org/tiny@main"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("::error::ckpt fetch org/missing: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("repository not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[NET001 repo-not-found]"), std::string::npos) << r.err;
}

TEST_F(CliTest, UsageErrors) {
  EXPECT_EQ(run_ckpt({"fetch"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"fetch", "not-a-repo"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"fetch", "org/tiny", "../../etc/passwd"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"fetch", "org/tiny", "--cache-dir", "a", "--local-dir", "b"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"resolve", "org/a/b"}).exit_code, 2);
}

TEST_F(CliTest, OfflineEnvironmentNeverTouchesTheNetwork) {
  auto r = run_ckpt({"fetch", "org/tiny", "--endpoint", hub.endpoint(), "--cache-dir", (tmp.path() / "hub").string()},
                    {"HF_HUB_OFFLINE=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(hub.log().empty());
  EXPECT_NE(r.err.find("offline"), std::string::npos) << r.err;
}

TEST_F(CliTest, PlainProgressLinesOffTty) {
  hub.set_fault("org/tiny", "model.safetensors", {FaultKind::drip, 0, 0.004, 500, 1});
  auto r = fetch({"org/tiny", "--no-verify", "--progress-interval", "0.2", "--stall-bytes", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("progress: org/tiny: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\x1b["), std::string::npos) << "no terminal escapes on a pipe";
}

TEST_F(CliTest, OfflineReportsFilesTheCachedListingMisses) {
  ASSERT_EQ(fetch({"org/tiny", "--no-verify"}).exit_code, 0);
  auto snap = tmp.path() / "hub" / "models--org--tiny" / "snapshots" / kCommit;
  fs::remove(snap / "config.json");
  auto r = run_ckpt({"fetch", "org/tiny", "--offline", "--no-verify", "--cache-dir", (tmp.path() / "hub").string()},
                    {"HF_HUB_OFFLINE=0"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("::error::ckpt fetch org/tiny: config.json: not in the cached snapshot"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("::error::ckpt fetch org/tiny: 1 of 2 files missing or different in the cached snapshot"),
            std::string::npos)
      << r.err;
}
