// ckpt smoke and verify --smoke as a user runs them: exit codes, hostile inputs (a clear message
// and exit 2, never a crash), baselines written and read back, and the SM codes' documentation.
// The models are `ckpt fixture` checkpoints (seeded noise weights: the pass must call them garbage).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "ckpt/json.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt;

namespace {

fs::path fixture(const fs::path& dir, const std::string& arch, const std::vector<std::string>& extra = {}) {
  fs::path out = dir / arch;
  std::vector<std::string> args = {"fixture", arch, out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = test::run_ckpt(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

fs::path ids_file(const fs::path& dir, const std::vector<int>& ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
  test::write_text(dir / "ids.json", text + "]");
  return dir / "ids.json";
}

std::vector<int> some_ids(int n, int vocab) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

json::Value parse_or_fail(const std::string& text) {
  auto parsed = json::parse(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed.ok() ? parsed.value : json::Value();
}

}  // namespace

TEST(smoke_cli, noise_weights_are_garbage_with_exit_1) {
  test::TempDir t;
  fs::path model = fixture(t.path(), "llama");
  auto r = test::run_ckpt({"smoke", model.string(), "--token-ids", ids_file(t.path(), some_ids(64, 200)).string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  json::Value v = parse_or_fail(r.out);
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.find("verdict")->as_string(), "garbage") << r.out;
  EXPECT_EQ(v.find("token_count")->as_int(), 64);
  EXPECT_TRUE(v.find("baseline")->is_null());
  bool sm001 = false;
  for (const auto& f : v.find("findings")->as_array()) sm001 |= f.find("code")->as_string() == "SM001";
  EXPECT_TRUE(sm001) << r.out;
}

TEST(smoke_cli, baseline_recorded_then_read_back_agrees_exactly) {
  test::TempDir t;
  fs::path model = fixture(t.path(), "qwen3");
  fs::path ids = ids_file(t.path(), some_ids(40, 200));
  fs::path base = t.path() / "base.json";
  auto rec = test::run_ckpt({"smoke", model.string(), "--token-ids", ids.string(), "--record-baseline", base.string()});
  ASSERT_TRUE(fs::exists(base)) << rec.err;
  json::Value b = parse_or_fail(test::read_text(base));
  EXPECT_EQ(b.find("format")->as_string(), "ckpt-smoke-baseline/1");
  EXPECT_EQ(b.find("token_ids")->as_array().size(), 40u);
  auto r = test::run_ckpt({"smoke", model.string(), "--token-ids", ids.string(), "--baseline", base.string(), "--format", "json"});
  json::Value v = parse_or_fail(r.out);
  ASSERT_TRUE(v.is_object()) << r.err;
  ASSERT_TRUE(v.find("baseline")->is_object()) << r.out;
  for (const auto& s : v.find("stages")->as_array()) EXPECT_EQ(s.find("baseline_deviation")->as_double(), 0.0) << r.out;
  for (const auto& f : v.find("findings")->as_array()) EXPECT_NE(f.find("code")->as_string(), "SM008") << r.out;
  // Other ids than the baseline's: not compared, and said so.
  auto other = test::run_ckpt({"smoke", model.string(), "--token-ids", ids_file(t.path(), some_ids(30, 150)).string(), "--baseline",
                               base.string(), "--format", "json"});
  EXPECT_NE(other.out.find("\"SM008\""), std::string::npos) << other.out;
}

TEST(smoke_cli, malformed_inputs_are_clear_errors) {
  test::TempDir t;
  fs::path model = fixture(t.path(), "llama");
  // A target that does not exist.
  auto missing = test::run_ckpt({"smoke", (t.path() / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_FALSE(missing.err.empty());
  // --token-ids: not JSON, not ids, an id past the vocabulary.
  test::write_text(t.path() / "bad.json", "[1, 2,");
  auto bad = test::run_ckpt({"smoke", model.string(), "--token-ids", (t.path() / "bad.json").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(std::regex_search(bad.err, std::regex("bad\\.json:1:[0-9]+:"))) << bad.err;
  test::write_text(t.path() / "neg.json", "[1, -2]");
  auto neg = test::run_ckpt({"smoke", model.string(), "--token-ids", (t.path() / "neg.json").string()});
  EXPECT_EQ(neg.exit_code, 2);
  EXPECT_NE(neg.err.find("ids[1]"), std::string::npos) << neg.err;
  auto past = test::run_ckpt({"smoke", model.string(), "--token-ids", ids_file(t.path(), {1, 2, 99999999}).string(), "--format", "json"});
  EXPECT_NE(past.out.find("\"SM015\""), std::string::npos) << past.out << past.err;
  EXPECT_NE(past.out.find("99999999"), std::string::npos) << past.out;
  // A malformed baseline in the model directory: a warning, and the pass still runs.
  test::write_text(model / "ckpt-smoke-baseline.json", "{\"format\": \"ckpt-smoke-baseline/1\", \"token_ids\": \"x\"}");
  auto base = test::run_ckpt({"smoke", model.string(), "--token-ids", ids_file(t.path(), some_ids(20, 200)).string(), "--format", "json"});
  EXPECT_EQ(base.exit_code, 1) << base.err;
  EXPECT_NE(base.out.find("\"SM008\""), std::string::npos) << base.out;
  fs::remove(model / "ckpt-smoke-baseline.json");
  // A config without a forward pass: SM010 and exit 2.
  std::string cfg = test::read_text(model / "config.json");
  cfg = std::regex_replace(cfg, std::regex("\"model_type\": *\"llama\""), "\"model_type\": \"mamba\"");
  test::write_text(model / "config.json", cfg);
  auto mamba = test::run_ckpt({"smoke", model.string(), "--token-ids", ids_file(t.path(), some_ids(20, 200)).string()});
  EXPECT_EQ(mamba.exit_code, 2) << mamba.out;
  EXPECT_NE(mamba.out.find("SM010"), std::string::npos) << mamba.out;
}

TEST(smoke_cli, verify_smoke_skips_a_checkpoint_with_header_errors) {
  test::TempDir t;
  fs::path model = fixture(t.path(), "llama", {"--defect", "truncated-shard"});
  auto r = test::run_ckpt({"verify", model.string(), "--smoke", "--format", "json"});
  EXPECT_EQ(r.exit_code, 1);
  json::Value v = parse_or_fail(r.out);
  auto codes = test::codes_of(v);
  EXPECT_NE(std::find(codes.begin(), codes.end(), "ST014"), codes.end()) << r.out;
  EXPECT_NE(std::find(codes.begin(), codes.end(), "SM009"), codes.end()) << r.out;
  auto batch = test::run_ckpt({"verify", "--targets", (t.path() / "list").string(), "--smoke"});
  EXPECT_EQ(batch.exit_code, 2);
}

// Every SM code the sources raise is documented, and every documented one is raised somewhere.
TEST(smoke_cli, every_sm_code_is_documented) {
  const fs::path src = CKPT_SOURCE_DIR;
  std::set<std::string> raised;
  std::regex code("\"(SM[0-9]{3})\"");
  std::vector<fs::path> files = {src / "tools/ckpt/verify_smoke.cpp", src / "tools/ckpt/smoke.cpp"};
  for (const auto& e : fs::directory_iterator(src / "src/smoke")) files.push_back(e.path());
  for (const auto& f : files) {
    std::string text = test::read_text(f);
    for (std::sregex_iterator it(text.begin(), text.end(), code), end; it != end; ++it) raised.insert((*it)[1]);
  }
  std::string docs = test::read_text(src / "docs/checks.md");
  std::set<std::string> documented;
  std::regex heading("\n## (SM[0-9]{3}) — ");
  for (std::sregex_iterator it(docs.begin(), docs.end(), heading), end; it != end; ++it) documented.insert((*it)[1]);
  EXPECT_EQ(raised, documented);
  EXPECT_GE(raised.size(), 15u);
}
