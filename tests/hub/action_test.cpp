// The GitHub Action (action.yml) run locally: its `run:` steps, with the inputs as environment
// (tests/package/run_action.py), against the loopback mock hub. Fetch is pinned and verified,
// the cache key follows the pinned revisions, verify prints annotations and fails as fail-on says.
#include <gtest/gtest.h>

#include <filesystem>

#include "mock_hub.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt::test;

namespace {

const std::string kGood = "1111111111111111111111111111111111111111";
const std::string kBad = "2222222222222222222222222222222222222222";

std::vector<MockFile> files_of(const fs::path& dir) {
  std::vector<MockFile> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    MockFile f;
    f.path = fs::relative(e.path(), dir).string();
    if (f.path.rfind(".ckpt-fixture", 0) == 0) continue;
    f.content = read_text(e.path());
    f.lfs = f.path.size() > 12 && f.path.substr(f.path.size() - 12) == ".safetensors";
    out.push_back(std::move(f));
  }
  return out;
}

struct ActionTest : ::testing::Test {
  MockHub hub;
  TempDir tmp;
  void SetUp() override {
    if (run_program({"python3", "-c", "import yaml"}).exit_code != 0) GTEST_SKIP() << "python3-yaml is not installed";
    ASSERT_EQ(run_ckpt({"fixture", "llama", (tmp / "good").string()}).exit_code, 0);
    ASSERT_EQ(run_ckpt({"fixture", "llama", (tmp / "bad").string(), "--defect", "truncated-shard"}).exit_code, 0);
    hub.add_commit("org/good", kGood, files_of(tmp / "good"));
    hub.set_ref("org/good", "main", kGood);
    hub.add_commit("org/bad", kBad, files_of(tmp / "bad"));
  }
  CommandResult action(const std::string& models, std::vector<std::string> more = {}) {
    std::vector<std::string> argv = {"python3", std::string(CKPT_SOURCE_DIR) + "/tests/package/run_action.py",
                                     std::string(CKPT_SOURCE_DIR) + "/action.yml", "--input", "models=" + models,
                                     "--input", "cache-dir=" + (tmp / "hub").string(), "--input",
                                     "endpoint=" + hub.endpoint()};
    for (auto& m : more) argv.insert(argv.end(), {"--input", m});
    std::string path = fs::path(CKPT_CLI_PATH).parent_path().string() + ":" + std::getenv("PATH");
    return run_program(argv, {"PATH=" + path, "HF_TOKEN=", "HF_HUB_OFFLINE=0", "HOME=" + tmp.path().string()});
  }
  static std::string key_of(const CommandResult& r) {
    auto p = r.out.find("\"cache-key\": \"");
    return p == std::string::npos ? "" : r.out.substr(p + 14, r.out.find('"', p + 14) - p - 14);
  }
};

}  // namespace

TEST_F(ActionTest, FetchesVerifiesAndAnnotates) {
  auto r = action("org/good@" + kGood + "\norg/bad@" + kBad + "\n", {"engine=vllm"});
  std::string all = r.out + r.err;
  EXPECT_EQ(r.exit_code, 1) << all;
  EXPECT_NE(all.find("fetched org/good@" + kGood), std::string::npos) << all;
  EXPECT_NE(all.find("fetched org/bad@" + kBad), std::string::npos) << all;
  EXPECT_NE(all.find("skipped (actions/cache@v4"), std::string::npos) << all;
  // The bad model's truncated shard is an ::error annotation naming the file; the summary line
  // names the repo and revision.
  EXPECT_NE(all.find("::error file=model.safetensors,title=ST014::ST014 "), std::string::npos) << all;
  EXPECT_NE(all.find("ckpt verify org/bad@" + kBad + ": 1 error"), std::string::npos) << all;
  EXPECT_NE(all.find("ckpt verify org/good@" + kGood + ": 0 errors"), std::string::npos) << all;
  EXPECT_EQ(all.find("is not pinned"), std::string::npos) << all;
  EXPECT_EQ(key_of(r).rfind("ckpt-hf-", 0), 0u) << all;
}

TEST_F(ActionTest, CacheKeyFollowsThePins) {
  auto a = action("org/good@" + kGood);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto again = action("  org/good@" + kGood + "  # the same pin\n\n");
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(key_of(a), key_of(again)) << "the same pins, the same key";
  EXPECT_NE(again.out.find("(0 downloaded, "), std::string::npos) << "second run resumes from the cache: " << again.out;
  auto both = action("org/good@" + kGood + "\norg/bad@" + kBad, {"fail-on=never"});
  EXPECT_EQ(both.exit_code, 0) << "fail-on never: " << both.out << both.err;
  EXPECT_NE(key_of(both), key_of(a)) << "another pin, another key";
  auto unpinned = action("org/good@main");
  EXPECT_EQ(unpinned.exit_code, 0) << unpinned.out << unpinned.err;
  EXPECT_NE((unpinned.out + unpinned.err).find("::warning::ckpt: org/good@main is not pinned"), std::string::npos)
      << unpinned.out << unpinned.err;
}

TEST_F(ActionTest, FetchFailureFailsTheAction) {
  auto r = action("org/missing@" + kGood);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE((r.out + r.err).find("::error::ckpt fetch org/missing"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("=== Fetch (pinned, resumable, hash-verified): exit 1"), std::string::npos) << r.out;
}

TEST_F(ActionTest, FailOnWarningIsStrict) {
  auto bad = action("org/good@" + kGood, {"fail-on=sometimes"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE((bad.out + bad.err).find("fail-on must be error, warning or never"), std::string::npos);
}
