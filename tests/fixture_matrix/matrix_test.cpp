// Proof both ways: every clean fixture (architecture x scheme) passes ckpt's checks with no
// error, every defect fixture fails with the code its catalogue entry names and nothing else
// unexpected; and the fixtures are real for an independent reader (python3 + numpy).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "ckpt/checks.h"
#include "ckpt/checkpoint.h"
#include "ckpt/fixture.h"
#include "test_support.h"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSchemes = {"", "mlx4", "mlx8", "ct-int4", "gptq4", "fp8"};

// Collateral errors a defect implies by construction (documented in docs/fixtures.md):
// e.g. a zero-byte shard is also shorter than any header (ST001).
const std::map<std::string, std::set<std::string>> kCollateral = {
    {"overlapping-offsets", {"ST012"}},             // the displaced tensor's bytes become a gap
    {"index-missing-shard", {"AR001", "AR009", "IX009", "QZ002", "TK014"}},  // its tensors are gone
    {"zero-byte-shard", {"ST001", "AR001", "QZ002"}},
    {"lfs-pointer-shard", {"AR001", "QZ002", "FS008"}},
    {"truncated-shard", {}},
    {"expert-count-mismatch", {"AR004"}},           // router rows follow the declared count
    {"config-field-removed", {"AR001", "AR002", "AR004", "AR005", "AR006", "CF007", "QZ003", "QZ004", "QZ005"}},
    {"missing-tensor", {"QZ002"}},
    {"declared-8-stored-4", {"AR004"}},
    {"declared-4-stored-8", {"AR004"}},
};

// Detecting families not registered yet: their defects are generated and reported as pending;
// the test becomes strict for them automatically once the code is registered (find_check).
const std::set<std::string> kExpectedButPendingFamilies = {"CT"};

std::vector<Finding> verify(const fs::path& dir) {
  auto lr = load_checkpoint(dir.string());
  if (!lr.checkpoint) return {Finding{"LOAD", Severity::error, lr.error ? lr.error->message : "load failed"}};
  return run_checks(*lr.checkpoint);
}

std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs)
    if (f.severity != Severity::info) s += "  " + f.code + " " + f.file + " " + f.tensor + ": " + f.message + "\n";
  return s;
}

bool python_numpy() {
  static int ok = -1;
  if (ok < 0) {
    auto r = test::run_program({"/usr/bin/python3", "-c", "import numpy"});
    ok = r.exit_code == 0;
  }
  return ok == 1;
}

std::string reader() { return std::string(CKPT_SOURCE_DIR) + "/tests/fixture_matrix/read_fixture.py"; }

}  // namespace

TEST(FixtureMatrix, EveryCleanFixturePasses) {
  test::TempDir tmp;
  size_t n = 0;
  for (const auto& a : fixture::architectures()) {
    for (const auto& q : kSchemes) {
      for (uint32_t shards : {1u, 2u}) {
        if (shards == 2 && !q.empty()) continue;
        fixture::Options o;
        o.arch = a.model_type;
        o.quant = q;
        o.shards = shards;
        o.out = tmp / (a.model_type + "-" + q + "-" + std::to_string(shards));
        auto r = fixture::make_fixture(o);
        ASSERT_EQ(r.error, "") << a.model_type << " " << q;
        auto fs = verify(r.model_dir);
        std::vector<Finding> errors;
        for (const auto& f : fs)
          if (f.severity == Severity::error) errors.push_back(f);
        EXPECT_TRUE(errors.empty()) << a.model_type << " --quant " << q << " --shards " << shards << "\n"
                                    << dump(errors);
        ++n;
      }
    }
  }
  EXPECT_GE(n, 20u * 7u);
}

TEST(FixtureMatrix, UnigramAndHfCacheVariantsPass) {
  test::TempDir tmp;
  fixture::Options o;
  o.arch = "qwen2";
  o.out = tmp / "u";
  o.unigram = true;
  auto r = fixture::make_fixture(o);
  ASSERT_EQ(r.error, "");
  auto fs = verify(r.model_dir);
  EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](const Finding& f) { return f.severity == Severity::error; }), 0)
      << dump(fs);
  EXPECT_TRUE(std::any_of(fs.begin(), fs.end(), [](const Finding& f) { return f.code == "TK016"; }));
  // The cache layout is found by repo id, as offline loaders find it.
  o.unigram = false;
  o.out = tmp / "hub";
  o.hf_repo = "acme/tiny";
  r = fixture::make_fixture(o);
  ASSERT_EQ(r.error, "");
  auto cli = test::run_ckpt({"verify", "acme/tiny", "--format", "json"}, {"HF_HUB_CACHE=" + (tmp / "hub").string()});
  EXPECT_EQ(cli.exit_code, 0) << cli.out << cli.err;
  EXPECT_NE(cli.out.find("\"errors\":0"), std::string::npos) << cli.out;
}

TEST(FixtureMatrix, EveryDefectIsDetectedByItsCode) {
  test::TempDir tmp;
  std::vector<std::string> pending;
  for (const auto& d : fixture::defects()) {
    const bool registered = find_check(d.code) != nullptr;
    if (!registered) {
      ASSERT_TRUE(kExpectedButPendingFamilies.count(std::string(d.detecting_family)))
          << d.name << ": " << d.code << " is not registered and its family is not listed as pending";
    }
    size_t ran = 0;
    for (const auto& a : fixture::architectures()) {
      fixture::Options o;
      o.arch = a.model_type;
      o.defects = {std::string(d.name)};
      o.out = tmp / (std::string(d.name) + "-" + a.model_type);
      auto r = fixture::make_fixture(o);
      if (!r.error.empty()) {
        // Only a documented precondition may refuse (a dense model has no experts, ...).
        EXPECT_EQ(r.error.find("internal"), std::string::npos) << d.name << " " << a.model_type << ": " << r.error;
        EXPECT_NE(r.error.find("needs"), std::string::npos) << d.name << " " << a.model_type << ": " << r.error;
        continue;
      }
      ++ran;
      auto fs = verify(r.model_dir);
      if (!registered) continue;
      bool found = std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == d.code; });
      EXPECT_TRUE(found) << d.name << " on " << a.model_type << ": expected " << d.code << "\n" << dump(fs);
      std::set<std::string> allowed = {std::string(d.code)};
      if (auto it = kCollateral.find(std::string(d.name)); it != kCollateral.end())
        allowed.insert(it->second.begin(), it->second.end());
      for (const auto& f : fs)
        if (f.severity == Severity::error && !allowed.count(f.code))
          ADD_FAILURE() << d.name << " on " << a.model_type << ": unexpected " << f.code << " " << f.message;
    }
    EXPECT_GE(ran, 1u) << d.name << " ran on no architecture";
    if (!registered) pending.push_back(std::string(d.name) + " (" + std::string(d.code) + ")");
  }
  if (!pending.empty()) {
    std::string s;
    for (const auto& p : pending) s += " " + p;
    std::printf("[ PENDING  ] expected-but-pending (detecting family not registered yet):%s\n", s.c_str());
  }
}

TEST(FixtureMatrix, DefectsCombine) {
  test::TempDir tmp;
  fixture::Options o;
  o.arch = "qwen3_moe";
  o.out = tmp / "multi";
  o.defects = {"stray-shard", "missing-tokenizer", "expert-count-mismatch", "eos-out-of-range"};
  auto r = fixture::make_fixture(o);
  ASSERT_EQ(r.error, "");
  auto fs = verify(r.model_dir);
  for (const char* code : {"IX002", "TK001", "AR009", "TK013"})
    EXPECT_TRUE(std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == code; })) << code << dump(fs);
}

TEST(FixtureMatrix, CliRoundTrip) {
  test::TempDir tmp;
  auto gen = test::run_ckpt({"fixture", "gemma4", (tmp / "g").string(), "--quant", "mlx4"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto v = test::run_ckpt({"verify", (tmp / "g").string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  gen = test::run_ckpt({"fixture", "gemma4", (tmp / "d").string(), "--defect", "packed-scaled-linear"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  v = test::run_ckpt({"verify", (tmp / "d").string(), "--format", "github"});
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.out.find("QZ004"), std::string::npos) << v.out;
  auto l = test::run_ckpt({"fixture", "--list-defects"});
  EXPECT_EQ(l.exit_code, 0);
  for (const auto& d : fixture::defects()) EXPECT_NE(l.out.find(std::string(d.name)), std::string::npos);
  auto bad = test::run_ckpt({"fixture", "qwen2"});
  EXPECT_EQ(bad.exit_code, 2);
  test::write_text(tmp / "mine" / "notes.txt", "keep");
  bad = test::run_ckpt({"fixture", "qwen2", (tmp / "mine").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(test::read_text(tmp / "mine" / "notes.txt"), "keep");
}

// ---- independent reader: python3 + numpy, no ckpt code ------------------------------------

TEST(FixtureIndependentReader, HeadersSizesAndFiniteValues) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  test::TempDir tmp;
  std::vector<std::string> args = {"/usr/bin/python3", reader(), "check"};
  for (const auto& a : fixture::architectures())
    for (const auto& q : kSchemes) {
      fixture::Options o;
      o.arch = a.model_type;
      o.quant = q;
      o.shards = q.empty() ? 2 : 1;
      o.out = tmp / (a.model_type + "-" + q);
      auto r = fixture::make_fixture(o);
      ASSERT_EQ(r.error, "");
      args.push_back(r.model_dir.string());
    }
  auto r = test::run_program(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), long(args.size() - 3)) << r.out;
}

TEST(FixtureIndependentReader, QuantizedPackingDecodesToTheFloatReference) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  test::TempDir tmp;
  for (const char* arch : {"qwen2", "qwen3_moe"}) {
    fixture::Options o;
    o.arch = arch;
    o.seed = 3;
    o.out = tmp / (std::string(arch) + "-float");
    ASSERT_EQ(fixture::make_fixture(o).error, "");
    for (const char* q : {"mlx4", "mlx8", "ct-int4", "gptq4", "fp8"}) {
      o.quant = q;
      o.out = tmp / (std::string(arch) + "-" + q);
      ASSERT_EQ(fixture::make_fixture(o).error, "");
      auto r = test::run_program({"/usr/bin/python3", reader(), "dequant", (tmp / (std::string(arch) + "-float")).string(),
                                  o.out.string(), q});
      EXPECT_EQ(r.exit_code, 0) << arch << " " << q << "\n" << r.out << r.err;
      EXPECT_NE(r.out.find("ok " + std::string(q)), std::string::npos) << r.out;
      o.quant.clear();
    }
  }
}

TEST(FixtureIndependentReader, MlpBlockShapesCompose) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  test::TempDir tmp;
  std::vector<std::string> args = {"/usr/bin/python3", reader(), "mlp"};
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma2", "olmo2"}) {
    fixture::Options o;
    o.arch = arch;
    o.out = tmp / arch;
    ASSERT_EQ(fixture::make_fixture(o).error, "");
    args.push_back(o.out.string());
  }
  auto r = test::run_program(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
}
