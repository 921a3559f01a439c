// `ckpt verify --cache` / `--targets`: a whole hub cache or a list in one run, one report per
// target in list order, a target that cannot be read as that target's FS013, --jobs not
// changing a byte, and --shard I/N splitting the work so the shards' union is the whole run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "../checks/builders.h"

namespace ckpt::ftest {
namespace {

using test::codes_of;
using test::CommandResult;
using test::run_ckpt;
using test::run_program;

std::string show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" +
         r.err.substr(0, 2000);
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    out.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

json::Value parse_line(const std::string& line) {
  auto p = json::parse(line);
  EXPECT_TRUE(p.ok()) << line;
  return p.value;
}

// A cache of five repos: three clean fixtures, one cut short, and one with blobs but no snapshot.
struct Cache {
  TempDir dir;
  fs::path hub() const { return dir.path() / "hub"; }
  Cache() {
    for (std::string arch : {"llama", "qwen2", "qwen3"}) {
      auto r = run_ckpt({"fixture", arch, hub().string(), "--hf-cache", "acme/tiny-" + arch});
      EXPECT_EQ(r.exit_code, 0) << show(r);
    }
    auto r = run_ckpt({"fixture", "llama", hub().string(), "--hf-cache", "acme/broken", "--defect", "truncated-shard"});
    EXPECT_EQ(r.exit_code, 0) << show(r);
    fs::create_directories(hub() / "models--acme--never-finished" / "blobs");
    write_text(hub() / "models--acme--never-finished" / "blobs" / "0123.incomplete", "partial");
    fs::create_directories(hub() / "datasets--acme--data" / "snapshots");  // not a model: not a target
  }
};

const std::vector<std::string> kExpectedOrder = {"acme/broken@", "acme/never-finished", "acme/tiny-llama@",
                                                 "acme/tiny-qwen2@", "acme/tiny-qwen3@"};

TEST(cli_verify_batch, cache_one_record_per_snapshot_in_order_then_summary) {
  Cache c;
  auto r = run_ckpt({"verify", "--cache", c.hub().string(), "--format", "jsonl"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), kExpectedOrder.size() + 1) << show(r);
  for (size_t i = 0; i < kExpectedOrder.size(); ++i) {
    auto v = parse_line(lines[i]);
    EXPECT_EQ(*v.get_string("record"), "target");
    std::string target = *v.get_string("target");
    EXPECT_EQ(target.rfind(kExpectedOrder[i], 0), 0u) << target;
    if (kExpectedOrder[i].back() == '@') EXPECT_EQ(target.size(), kExpectedOrder[i].size() + 40) << target;
    auto codes = codes_of(v);
    if (target.rfind("acme/broken@", 0) == 0) EXPECT_NE(std::find(codes.begin(), codes.end(), "ST014"), codes.end()) << lines[i];
    if (target == "acme/never-finished") {
      EXPECT_EQ(codes, std::vector<std::string>{"FS013"}) << lines[i];
      EXPECT_NE(lines[i].find("holds no snapshot"), std::string::npos) << lines[i];
      EXPECT_NE(lines[i].find("1 .incomplete"), std::string::npos) << lines[i];
    }
    if (target.rfind("acme/tiny-", 0) == 0) {
      EXPECT_EQ(v.find("summary")->get_int("errors"), 0) << lines[i];
    }
  }
  auto summary = parse_line(lines.back());
  EXPECT_EQ(*summary.get_string("record"), "summary");
  const auto* b = summary.find("batch");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->get_int("targets"), 5);
  EXPECT_EQ(b->get_int("listed"), 5);
  EXPECT_EQ(b->get_int("clean"), 3);
  EXPECT_EQ(b->get_int("with_errors"), 1);
  EXPECT_EQ(b->get_int("unreadable"), 1);
}

TEST(cli_verify_batch, record_equals_the_single_target_report) {
  Cache c;
  auto batch = run_ckpt({"verify", "--cache", c.hub().string(), "--format", "jsonl"});
  for (const auto& line : lines_of(batch.out)) {
    auto v = parse_line(line);
    if (*v.get_string("record") != "target" || *v.get_string("target") == "acme/never-finished") continue;
    std::string target = *v.get_string("target");
    // The same snapshot verified alone, by repo id and revision, reports the same findings.
    auto single = run_ckpt({"verify", target, "--format", "json"}, {"HF_HUB_CACHE=" + c.hub().string()});
    auto s = parse_line(lines_of(single.out).front());
    EXPECT_EQ(codes_of(s), codes_of(v)) << target;
    EXPECT_EQ(s.find("summary")->get_int("errors"), v.find("summary")->get_int("errors")) << target;
    EXPECT_EQ(s.find("summary")->get_int("tensors"), v.find("summary")->get_int("tensors")) << target;
    EXPECT_EQ(single.exit_code, v.find("summary")->get_int("errors").value_or(0) ? 1 : 0) << show(single);
  }
}

TEST(cli_verify_batch, jobs_do_not_change_the_output) {
  Cache c;
  auto one = run_ckpt({"verify", "--cache", c.hub().string(), "--format", "jsonl", "--jobs", "1"});
  auto many = run_ckpt({"verify", "--cache", c.hub().string(), "--format", "jsonl", "--jobs", "5"});
  EXPECT_EQ(one.out, many.out);
  auto text1 = run_ckpt({"verify", "--cache", c.hub().string(), "--jobs", "1"});
  auto text5 = run_ckpt({"verify", "--cache", c.hub().string(), "--jobs", "5"});
  // text carries each target's elapsed time; compare without it
  auto strip = [](std::string s) {
    std::string out;
    for (const auto& l : lines_of(s)) out += l.substr(0, l.find(", checked in ")) + "\n";
    return out;
  };
  EXPECT_EQ(strip(text1.out), strip(text5.out));
  EXPECT_NE(text1.out.find("FAIL: 5 targets"), std::string::npos) << show(text1);
}

TEST(cli_verify_batch, shards_partition_the_targets_and_their_union_is_the_whole_run) {
  Cache c;
  // More targets than the fixture cache has, so every shard gets some: list each snapshot and
  // each repo id several ways (the list is verified as written).
  std::string list;
  for (const auto& line : lines_of(run_ckpt({"verify", "--cache", c.hub().string(), "--format", "jsonl"}).out)) {
    auto v = parse_line(line);
    if (*v.get_string("record") != "target") continue;
    std::string t = *v.get_string("target");
    list += t + "\n";
    if (auto at = t.find('@'); at != std::string::npos) list += t.substr(0, at) + "\n" + *v.get_string("root") + "\n";
  }
  list += "acme/not-in-cache\n";
  fs::path file = c.dir.path() / "targets.txt";
  write_text(file, list);
  std::vector<std::string> env{"HF_HUB_CACHE=" + c.hub().string()};
  auto whole = run_ckpt({"verify", "--targets", file.string(), "--format", "jsonl"}, env);
  auto whole_lines = lines_of(whole.out);
  ASSERT_GT(whole_lines.size(), 10u) << show(whole);
  std::multiset<std::string> expected(whole_lines.begin(), whole_lines.end() - 1);
  for (int n : {2, 3, 7}) {
    std::multiset<std::string> got;
    uint64_t errors = 0;
    for (int i = 0; i < n; ++i) {
      auto part = run_ckpt({"verify", "--targets", file.string(), "--format", "jsonl", "--shard",
                            std::to_string(i) + "/" + std::to_string(n)}, env);
      auto lines = lines_of(part.out);
      ASSERT_FALSE(lines.empty()) << show(part);
      auto summary = parse_line(lines.back());
      EXPECT_EQ(summary.find("batch")->get_int("listed"), int64_t(expected.size()));
      EXPECT_EQ(*summary.find("batch")->get_string("shard"), std::to_string(i) + "/" + std::to_string(n));
      errors += uint64_t(summary.find("summary")->get_int("errors").value_or(0));
      got.insert(lines.begin(), lines.end() - 1);
    }
    EXPECT_EQ(got, expected) << "--shard I/" << n;
    EXPECT_EQ(errors, uint64_t(parse_line(whole_lines.back()).find("summary")->get_int("errors").value_or(0)));
  }
}

TEST(cli_verify_batch, targets_file_comments_order_stdin_and_unreadable_entries) {
  Cache c;
  fs::path snap;
  for (auto& e : fs::directory_iterator(c.hub() / "models--acme--tiny-llama" / "snapshots")) snap = e.path();
  std::string list = "# models to serve\n\n  " + snap.string() + "  \nacme/tiny-qwen2\n" +
                     (c.dir.path() / "no-such-dir").string() + "\nacme/tiny-qwen2@nosuchref\n";
  fs::path file = c.dir.path() / "t.txt";
  write_text(file, list);
  std::vector<std::string> env{"HF_HUB_CACHE=" + c.hub().string()};
  auto r = run_ckpt({"verify", "--targets", file.string(), "--format", "jsonl"}, env);
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 5u) << show(r);
  EXPECT_EQ(*parse_line(lines[0]).get_string("target"), snap.string());
  EXPECT_EQ(*parse_line(lines[1]).get_string("target"), "acme/tiny-qwen2");
  EXPECT_EQ(codes_of(parse_line(lines[2])), std::vector<std::string>{"FS013"});
  EXPECT_EQ(codes_of(parse_line(lines[3])), std::vector<std::string>{"FS013"});
  EXPECT_NE(lines[3].find("nosuchref"), std::string::npos) << lines[3];
  EXPECT_EQ(parse_line(lines[4]).find("batch")->get_int("unreadable"), 2);

  // The same list on stdin; only the clean entries: exit 0.
  auto in = run_program({CKPT_CLI_PATH, "verify", "--targets", "-", "--format", "json"}, env,
                        snap.string() + "\nacme/tiny-qwen2\n");
  EXPECT_EQ(in.exit_code, 0) << show(in);
  auto doc = parse_line(lines_of(in.out).front());
  EXPECT_EQ(doc.find("targets")->as_array().size(), 2u);
  EXPECT_EQ(doc.find("batch")->get_int("clean"), 2);
}

TEST(cli_verify_batch, strict_and_engine_apply_to_every_target) {
  Cache c;
  fs::path file = c.dir.path() / "t.txt";
  write_text(file, "acme/tiny-llama\n");
  std::vector<std::string> env{"HF_HUB_CACHE=" + c.hub().string()};
  auto r = run_ckpt({"verify", "--targets", file.string(), "--engine", "vllm", "--select", "FS,ST", "--format", "jsonl"}, env);
  EXPECT_EQ(r.exit_code, 0) << show(r);
  auto single = run_ckpt({"verify", "acme/tiny-llama", "--engine", "vllm", "--select", "FS,ST", "--format", "json"}, env);
  EXPECT_EQ(codes_of(parse_line(lines_of(r.out)[0])), codes_of(parse_line(lines_of(single.out)[0])));
}

TEST(cli_verify_batch, usage_errors_exit_2) {
  Cache c;
  std::string hub = c.hub().string();
  EXPECT_EQ(run_ckpt({"verify", hub, "--cache", hub}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--targets", "x"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--shard", "3/3"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--shard", "1"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--shard", "a/2"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--format", "sarif"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", hub, "--jobs", "0"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--cache", (c.dir.path() / "absent").string()}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", "--targets", (c.dir.path() / "absent.txt").string()}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify", hub, "--shard", "0/2"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"verify"}).exit_code, 2);
  // --cache without DIR: the cache the loader resolves (HF_HUB_CACHE here).
  auto r = run_ckpt({"verify", "--cache", "--format", "jsonl"}, {"HF_HUB_CACHE=" + hub});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  EXPECT_EQ(lines_of(r.out).size(), 6u) << show(r);
}

}  // namespace
}  // namespace ckpt::ftest
