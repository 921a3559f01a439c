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
  auto online = run_ckpt({"resolve", "org/tiny", "--endpoint", hub.endpoint(), "--cache-dir", (tmp.path() / "hub").string()},
                         {"HF_HUB_OFFLINE=0"});
  EXPECT_EQ(online.exit_code, 0) << online.err;
  EXPECT_EQ(online.out, snap.string() + "\n");
  EXPECT_EQ(static_cast<int>(hub.log().size()), before + 1) << "one revision API call";
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
