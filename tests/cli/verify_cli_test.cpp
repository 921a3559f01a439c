// `ckpt verify` as scripts and CI use it: the built binary, its exit codes, its four output
// formats, --strict/--ignore/--select, cache targets, and that it never modifies the model.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../checks/builders.h"

namespace ckpt::ftest {
namespace {

using test::codes_of;
using test::CommandResult;
using test::run_ckpt;

std::string show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 3000) + "\n--- stderr\n" + r.err.substr(0, 2000);
}

json::Value parse_json_out(const CommandResult& r) {
  auto p = json::parse(r.out);
  EXPECT_TRUE(p.ok()) << (p.error ? p.error->message : "") << "\n" << show(r);
  return p.value;
}

bool has_code(const json::Value& v, const std::string& code) {
  for (const auto& c : codes_of(v))
    if (c == code) return true;
  return false;
}

// A clean model dir, plus one with exactly one ST017 warning and one with an ST015 error.
void make_clean(const fs::path& d) {
  make_two_shard(d);
}
void make_warning(const fs::path& d) {
  write_text(d / "model.safetensors", frame("  {\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}    ") + std::string(1, '\0'));
  write_text(d / "config.json", R"({"model_type": "llama"})");
}
void make_error(const fs::path& d) {
  make_two_shard(d);
  auto p = d / "model-00002-of-00002.safetensors";
  write_text(p, read_text(p) + "trailing");
}

TEST(cli_verify, clean_exits_0) {
  TempDir d;
  make_clean(d.path());
  auto r = run_ckpt({"verify", d.path().string(), "--format", "json", "--select", "FS,ST,IX"});
  EXPECT_EQ(r.exit_code, 0) << show(r);
  auto v = parse_json_out(r);
  EXPECT_TRUE(codes_of(v).empty()) << show(r);
  EXPECT_EQ(v.find("summary")->get_int("files"), 4);
  EXPECT_EQ(v.find("summary")->get_int("tensors"), 4);
}

TEST(cli_verify, error_exits_1_and_names_the_file) {
  TempDir d;
  make_error(d.path());
  auto r = run_ckpt({"verify", d.path().string()});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  EXPECT_TRUE(contains(r.out, "ST015")) << show(r);
  EXPECT_TRUE(contains(r.out, "model-00002-of-00002.safetensors")) << show(r);
  EXPECT_TRUE(contains(r.out, "FAIL")) << show(r);
  EXPECT_EQ(r.out.find("\033["), std::string::npos) << "no colour when stdout is not a terminal";
}

TEST(cli_json, exactly_one_object_with_the_contract_keys) {
  TempDir d;
  make_error(d.path());
  auto r = run_ckpt({"verify", d.path().string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto v = parse_json_out(r);
  ASSERT_TRUE(v.is_object());
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.as_object()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"ckpt_version", "schema_version", "target", "findings", "summary"}));
  EXPECT_TRUE(v.find("ckpt_version")->is_string());
  EXPECT_EQ(v.get_string("target"), d.path().string());
  ASSERT_TRUE(v.find("findings")->is_array());
  bool saw_st015 = false;
  uint64_t errors = 0, warnings = 0, infos = 0;
  for (const auto& f : v.find("findings")->as_array()) {
    ASSERT_TRUE(f.is_object());
    std::vector<std::string> fk;
    for (const auto& [k, _] : f.as_object()) fk.push_back(k);
    EXPECT_EQ(fk, (std::vector<std::string>{"code", "severity", "message", "file", "tensor", "hint"}));
    EXPECT_TRUE(f.find("code")->is_string());
    std::string sev = *f.get_string("severity");
    EXPECT_TRUE(sev == "error" || sev == "warning" || sev == "info") << sev;
    errors += sev == "error";
    warnings += sev == "warning";
    infos += sev == "info";
    EXPECT_TRUE(f.find("message")->is_string());
    for (const char* k : {"file", "tensor", "hint"}) {
      const json::Value* x = f.find(k);
      ASSERT_NE(x, nullptr);
      EXPECT_TRUE(x->is_null() || (x->is_string() && !x->as_string().empty())) << k << " must be null or non-empty";
    }
    if (f.get_string("code") == "ST015") {
      saw_st015 = true;
      EXPECT_EQ(f.get_string("file"), "model-00002-of-00002.safetensors");
      EXPECT_TRUE(f.find("tensor")->is_null());
    }
  }
  EXPECT_TRUE(saw_st015) << show(r);
  const json::Value* s = v.find("summary");
  ASSERT_TRUE(s && s->is_object());
  std::vector<std::string> sk;
  for (const auto& [k, val] : s->as_object()) {
    sk.push_back(k);
    EXPECT_TRUE(val.is_int()) << k;
  }
  EXPECT_EQ(sk, (std::vector<std::string>{"errors", "warnings", "infos", "files", "tensors", "bytes"}));
  EXPECT_EQ(static_cast<uint64_t>(*s->get_int("errors")), errors);
  EXPECT_EQ(static_cast<uint64_t>(*s->get_int("warnings")), warnings);
  EXPECT_EQ(static_cast<uint64_t>(*s->get_int("infos")), infos);
  EXPECT_GT(*s->get_int("bytes"), 0);
  EXPECT_TRUE(r.err.empty()) << show(r);
}

TEST(cli_github, error_and_warning_lines) {
  TempDir d;
  make_error(d.path());
  make_warning(d.path());  // adds model.safetensors with ST017 beside the indexed shards
  auto r = run_ckpt({"verify", d.path().string(), "--format", "github"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  std::string prefix = "::error file=" + d.path().string() + "/model-00002-of-00002.safetensors";
  bool err_line = false, warn_line = false;
  size_t start = 0;
  while (start < r.out.size()) {
    size_t nl = r.out.find('\n', start);
    std::string line = r.out.substr(start, nl - start);
    start = nl == std::string::npos ? r.out.size() : nl + 1;
    if (line.rfind(prefix, 0) == 0 && contains(line, "::ST015 ")) err_line = true;
    if (line.rfind("::warning file=" + d.path().string() + "/model.safetensors", 0) == 0 && contains(line, "::ST017 "))
      warn_line = true;
  }
  EXPECT_TRUE(err_line) << show(r);
  EXPECT_TRUE(warn_line) << show(r);
}

TEST(cli_sarif, parses_as_sarif_2_1_0) {
  TempDir d;
  make_error(d.path());
  auto r = run_ckpt({"verify", d.path().string(), "--format", "sarif"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto v = parse_json_out(r);
  EXPECT_EQ(v.get_string("version"), "2.1.0");
  const auto& results = v.find("runs")->as_array().at(0).find("results")->as_array();
  bool found = false;
  for (const auto& x : results) found |= x.get_string("ruleId") == "ST015" && x.get_string("level") == "error";
  EXPECT_TRUE(found) << show(r);
}

TEST(cli_verify, strict_turns_warnings_into_exit_1) {
  TempDir d;
  make_warning(d.path());
  auto plain = run_ckpt({"verify", d.path().string(), "--format", "json", "--select", "ST,FS,IX"});
  EXPECT_EQ(plain.exit_code, 0) << show(plain);
  auto v = parse_json_out(plain);
  EXPECT_TRUE(has_code(v, "ST017")) << show(plain);
  auto strict = run_ckpt({"verify", d.path().string(), "--strict", "--select", "ST,FS,IX"});
  EXPECT_EQ(strict.exit_code, 1) << show(strict);
  auto strict_ignored = run_ckpt({"verify", d.path().string(), "--strict", "--select", "ST,FS,IX", "--ignore", "ST017,ST019"});
  EXPECT_EQ(strict_ignored.exit_code, 0) << show(strict_ignored);
}

TEST(cli_verify, ignore_and_select_by_code_and_prefix) {
  TempDir d;
  make_error(d.path());
  make_warning(d.path());
  auto base = parse_json_out(run_ckpt({"verify", d.path().string(), "--format", "json"}));
  ASSERT_TRUE(has_code(base, "ST015"));
  ASSERT_TRUE(has_code(base, "ST017"));
  ASSERT_TRUE(has_code(base, "IX002")) << "model.safetensors is a stray beside the index";

  auto ig = run_ckpt({"verify", d.path().string(), "--format", "json", "--ignore", "ST015"});
  auto vi = parse_json_out(ig);
  EXPECT_FALSE(has_code(vi, "ST015"));
  EXPECT_TRUE(has_code(vi, "ST017"));
  EXPECT_TRUE(has_code(vi, "IX002"));

  auto ig_prefix = parse_json_out(run_ckpt({"verify", d.path().string(), "--format", "json", "--ignore", "ST"}));
  for (const auto& c : codes_of(ig_prefix)) EXPECT_NE(c.rfind("ST", 0), 0u) << c;
  EXPECT_TRUE(has_code(ig_prefix, "IX002"));

  auto two = run_ckpt({"verify", d.path().string(), "--format", "json", "--ignore", "ST015", "--ignore", "IX"});
  auto vt = parse_json_out(two);
  EXPECT_FALSE(has_code(vt, "ST015"));
  EXPECT_FALSE(has_code(vt, "IX002"));

  auto sel = parse_json_out(run_ckpt({"verify", d.path().string(), "--format", "json", "--select", "ST017"}));
  EXPECT_EQ(codes_of(sel), std::vector<std::string>{"ST017"});

  auto sel_prefix = run_ckpt({"verify", d.path().string(), "--format", "json", "--select", "IX,ST01"});
  auto vs = parse_json_out(sel_prefix);
  for (const auto& c : codes_of(vs)) EXPECT_TRUE(c.rfind("IX", 0) == 0 || c.rfind("ST01", 0) == 0) << c;
  EXPECT_TRUE(has_code(vs, "IX002"));
  EXPECT_TRUE(has_code(vs, "ST015"));
  // Only selected findings count towards the exit code.
  auto sel_warn = run_ckpt({"verify", d.path().string(), "--select", "ST017"});
  EXPECT_EQ(sel_warn.exit_code, 0) << show(sel_warn);
  EXPECT_EQ(parse_json_out(run_ckpt({"verify", d.path().string(), "--format", "json", "--select", "ST017"}))
                .find("summary")->get_int("errors"),
            0);
}

TEST(cli_verify, usage_errors_exit_2) {
  TempDir d;
  make_clean(d.path());
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"verify"},
           {"verify", d.path().string(), "--format", "xml"},
           {"verify", d.path().string(), "--no-such-flag"},
           {"verify", d.path().string(), "--ignore", "S"},
       }) {
    auto r = run_ckpt(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << "\n" << show(r);
    EXPECT_FALSE(r.err.empty() && r.out.empty()) << "a usage error says something";
  }
}

TEST(cli_verify, unreadable_targets_exit_2_with_message) {
  TempDir d;
  write_text(d / "file.txt", "x");
  auto r1 = run_ckpt({"verify", (d / "missing").string()});
  EXPECT_EQ(r1.exit_code, 2) << show(r1);
  EXPECT_TRUE(contains(r1.err, "missing")) << show(r1);
  EXPECT_TRUE(r1.out.empty()) << show(r1);
  auto r2 = run_ckpt({"verify", (d / "file.txt").string()});
  EXPECT_EQ(r2.exit_code, 2) << show(r2);
  EXPECT_TRUE(contains(r2.err, "not a directory")) << show(r2);
}

// ---- cache targets ---------------------------------------------------------------------

struct CliCache {
  TempDir tmp;
  fs::path root = tmp / "hub";
  CacheRepo repo{root, "org/name"};
  std::vector<std::string> env() const { return {"HF_HUB_CACHE=" + root.string(), "HF_HOME=" + (tmp / "nohome").string()}; }
};

TEST(cli_cache, repo_id_clean_exits_0) {
  CliCache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  auto r = run_ckpt({"verify", "org/name", "--format", "json", "--select", "FS,ST,IX"}, c.env());
  EXPECT_EQ(r.exit_code, 0) << show(r);
  auto v = parse_json_out(r);
  EXPECT_EQ(v.get_string("target"), "org/name");
  EXPECT_EQ(v.find("summary")->get_int("tensors"), 1);
}

TEST(cli_cache, HF_HOME_is_honoured) {
  CliCache c;
  CacheRepo repo(c.tmp / "home" / "hub", "org/name");
  repo.clean_snapshot(kCommitA);
  repo.ref("main", kCommitA);
  auto r = run_ckpt({"verify", "org/name", "--select", "FS,ST,IX"},
                    {"HF_HUB_CACHE=", "HUGGINGFACE_HUB_CACHE=", "HF_HOME=" + (c.tmp / "home").string()});
  EXPECT_EQ(r.exit_code, 0) << show(r);
}

TEST(cli_cache, dangling_main_ref_exits_1_with_FS005) {
  CliCache c;
  c.repo.ref("main", kCommitB);
  auto r = run_ckpt({"verify", "org/name", "--format", "json"}, c.env());
  EXPECT_EQ(r.exit_code, 1) << show(r);
  EXPECT_TRUE(has_code(parse_json_out(r), "FS005")) << show(r);
}

TEST(cli_cache, commit_and_branch_revisions) {
  CliCache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.clean_snapshot(kCommitB, "f");
  c.repo.ref("main", kCommitA);
  c.repo.ref("dev", kCommitB);
  auto r1 = run_ckpt({"verify", std::string("org/name@") + kCommitB, "--select", "FS,ST,IX"}, c.env());
  EXPECT_EQ(r1.exit_code, 0) << show(r1);
  auto r2 = run_ckpt({"verify", "org/name@dev", "--select", "FS,ST,IX"}, c.env());
  EXPECT_EQ(r2.exit_code, 0) << show(r2);
  EXPECT_TRUE(contains(r2.out, kCommitB)) << "the resolved snapshot is shown\n" << show(r2);
}

TEST(cli_cache, unknown_repo_and_ref_exit_2) {
  CliCache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  auto r1 = run_ckpt({"verify", "org/absent"}, c.env());
  EXPECT_EQ(r1.exit_code, 2) << show(r1);
  EXPECT_TRUE(contains(r1.err, "org/absent") && contains(r1.err, "cache")) << show(r1);
  auto r2 = run_ckpt({"verify", "org/name@nope"}, c.env());
  EXPECT_EQ(r2.exit_code, 2) << show(r2);
  EXPECT_TRUE(contains(r2.err, "nope")) << show(r2);
  auto r3 = run_ckpt({"verify", std::string("org/name@") + kCommitB}, c.env());  // commit not on disk
  EXPECT_NE(r3.exit_code, 0) << show(r3);
}

TEST(cli_cache, broken_cache_reports_fs_codes) {
  CliCache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", std::string(kCommitA) + "\n");
  const std::string etag = "9a7e000000000000000000000000000000000000000000000000000000000000";
  c.repo.link(kCommitA, "model-00002-of-00002.safetensors", etag);
  write_text(c.repo.dir() / "blobs" / (etag + ".incomplete"), "part");
  auto r = run_ckpt({"verify", "org/name", "--format", "json"}, c.env());
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto v = parse_json_out(r);
  EXPECT_TRUE(has_code(v, "FS001")) << show(r);
  EXPECT_TRUE(has_code(v, "FS002")) << show(r);
  EXPECT_TRUE(has_code(v, "FS007")) << show(r);
}

// ---- do no harm: verify leaves the model byte-identical ------------------------------------

void expect_unchanged(const fs::path& root, const std::vector<std::string>& args, const std::vector<std::string>& env) {
  // Push every mtime into the past so a rewrite in the same second would still show.
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    ::utimensat(AT_FDCWD, it->path().c_str(), ts, AT_SYMLINK_NOFOLLOW);
  }
  auto before = tree_state(root);
  ASSERT_FALSE(before.empty());
  for (const char* fmt : {"text", "json", "github", "sarif"}) {
    std::vector<std::string> a = args;
    a.push_back("--format");
    a.push_back(fmt);
    auto r = run_ckpt(a, env);
    EXPECT_NE(r.exit_code, 2) << show(r);
  }
  auto after = tree_state(root);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [rel, st] : before) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << rel << " disappeared";
    EXPECT_EQ(it->second.kind, st.kind) << rel;
    EXPECT_EQ(it->second.content, st.content) << rel << " content changed";
    EXPECT_EQ(it->second.mtime_ns, st.mtime_ns) << rel << " mtime changed";
    EXPECT_EQ(it->second.mode, st.mode) << rel << " mode changed";
  }
}

TEST(cli_harm, plain_dir_is_byte_identical_after_verify) {
  TempDir d;
  make_error(d.path());
  make_warning(d.path());
  write_text(d / "tokenizer.json", R"({"model": {"type": "BPE"}})");
  write_text(d / "partial.safetensors.incomplete", "x");
  fs::create_symlink("gone.safetensors", d / "dangling.safetensors");
  expect_unchanged(d.path(), {"verify", d.path().string()}, {});
}

TEST(cli_harm, cache_layout_is_byte_identical_after_verify) {
  CliCache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", std::string(kCommitA) + "\n");
  c.repo.ref("v2", kCommitB);
  c.repo.link(kCommitA, "model-00002-of-00002.safetensors", "abc");
  write_text(c.repo.dir() / "blobs" / "abc.incomplete", "part");
  expect_unchanged(c.root, {"verify", "org/name"}, c.env());
  expect_unchanged(c.root, {"verify", c.repo.snapshot(kCommitA).string()}, c.env());
}

// ---- hostile inputs through the binary ------------------------------------------------------

TEST(cli_hostile, hostile_model_dir_ends_in_findings) {
  TempDir d;
  write_text(d / "model-00001-of-00003.safetensors", frame("", 100'000'000));
  write_text(d / "model-00002-of-00003.safetensors", frame("{\"t\":" + std::string(10000, '[') + std::string(10000, ']') + "}"));
  write_text(d / "model-00003-of-00003.safetensors",
             frame(R"({"t":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})") + std::string(16, '\0'));
  write_text(d / "config.json", std::string(10000, '[') + std::string(10000, ']'));
  write_text(d / "model.safetensors.index.json", "{\"weight_map\":" + std::string(10000, '{') + "}");
  fs::create_symlink("loop2", d / "loop1");
  fs::create_symlink("loop1", d / "loop2");
  ASSERT_EQ(::mkfifo((d / "fifo.safetensors").c_str(), 0644), 0);
  auto r = run_ckpt({"verify", d.path().string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto v = parse_json_out(r);
  for (const char* code : {"ST003", "ST005", "ST009", "IX010"}) EXPECT_TRUE(has_code(v, code)) << code << "\n" << show(r);
}

TEST(cli_hostile, non_utf8_names_keep_json_valid) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "junk\xff\xfe.incomplete", "x");
  auto r = run_ckpt({"verify", d.path().string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << show(r);
  auto v = parse_json_out(r);
  EXPECT_TRUE(has_code(v, "FS002"));
  auto s = run_ckpt({"verify", d.path().string(), "--format", "sarif"});
  EXPECT_TRUE(json::parse(s.out).ok()) << show(s);
}

}  // namespace
}  // namespace ckpt::ftest

namespace ckpt::ftest {
namespace {

// CKPT_TIMINGS=1 is a diagnostic: the phases go to stderr, the report on stdout is unchanged.
TEST(cli_verify, timings_go_to_stderr_only) {
  TempDir d;
  make_error(d.path());
  auto plain = test::run_ckpt({"verify", d.path().string(), "--format", "json"});
  auto timed = test::run_ckpt({"verify", d.path().string(), "--format", "json"}, {"CKPT_TIMINGS=1"});
  EXPECT_EQ(timed.exit_code, plain.exit_code);
  EXPECT_EQ(timed.out, plain.out);
  EXPECT_EQ(plain.err, "");
  for (const char* phase : {"load: discover", "load: parse (parallel)", "load: finalize", "checks (all families)",
                            "render + write", "total"})
    EXPECT_NE(timed.err.find(phase), std::string::npos) << phase << "\n" << timed.err;
}

}  // namespace
}  // namespace ckpt::ftest
