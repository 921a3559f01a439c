// Progress where work is long: verify --deep and diff --deep print plain `progress:` lines (bytes,
// rate, ETA) when stderr is not a terminal, a last one at the end; nothing with --quiet, and
// nothing for the header-only verify.
#include <gtest/gtest.h>

#include "test_support.h"

namespace ckpt::test {
namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(progress, verify_deep_plain_lines_off_a_terminal) {
  TempDir d;
  ASSERT_EQ(run_ckpt({"fixture", "llama", (d / "m").string()}).exit_code, 0);
  auto r = run_ckpt({"verify", (d / "m").string(), "--deep", "--progress-interval", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "progress: verify --deep " + (d / "m").string() + ": ")) << r.err;
  EXPECT_TRUE(has(r.err, "(100%)")) << r.err;
  EXPECT_TRUE(has(r.err, "/s ETA ")) << r.err;
  EXPECT_FALSE(has(r.err, "\x1b[")) << "no terminal escapes on a pipe";
  auto ci = run_ckpt({"verify", (d / "m").string(), "--deep", "--progress-interval", "0"}, {"CI=1"});
  EXPECT_TRUE(has(ci.err, "progress: verify --deep")) << ci.err;
  auto quiet = run_ckpt({"verify", (d / "m").string(), "--deep", "--progress-interval", "0", "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, r.out.substr(0, r.out.find(" checked in ")) + quiet.out.substr(quiet.out.find(" checked in ")))
      << "progress goes to stderr only";
  auto header_only = run_ckpt({"verify", (d / "m").string(), "--progress-interval", "0"});
  EXPECT_EQ(header_only.err, "");
  // The default interval (5 s) prints nothing for a run this short.
  EXPECT_EQ(run_ckpt({"verify", (d / "m").string(), "--deep"}).err, "");
}

TEST(progress, diff_deep_plain_lines) {
  TempDir d;
  ASSERT_EQ(run_ckpt({"fixture", "llama", (d / "a").string(), "--seed", "1"}).exit_code, 0);
  ASSERT_EQ(run_ckpt({"fixture", "llama", (d / "b").string(), "--seed", "2"}).exit_code, 0);
  auto r = run_ckpt({"diff", (d / "a").string(), (d / "b").string(), "--deep", "--progress-interval", "0"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "progress: diff --deep: ")) << r.err;
  EXPECT_TRUE(has(r.err, "(100%)")) << r.err;
  auto quiet = run_ckpt({"diff", (d / "a").string(), (d / "b").string(), "--deep", "-q", "--progress-interval", "0"});
  EXPECT_EQ(quiet.err, "");
}

}  // namespace
}  // namespace ckpt::test
