// Renderers: one Report in text, json, github and sarif; the JSON shapes are the CLI contract
// (DESIGN.md), checked by parsing the output back.
#include <gtest/gtest.h>

#include <set>

#include "../checks/builders.h"
#include "ckpt/report.h"

namespace ckpt::ftest {
namespace {

Report sample() {
  Report r;
  r.target = "/models/m";
  r.root = "/models/m";
  r.file_prefix = "/models/m/";
  r.findings = {
      {"ST014", Severity::error, "file is 10 bytes but its header needs 20", "model.safetensors", "lm_head.weight",
       "re-download"},
      {"ST017", Severity::warning, "2 whitespace byte(s)", "model.safetensors", "", ""},
      {"FS009", Severity::info, "weights in formats ckpt does not verify yet: a.bin", "", "", "prefer safetensors"},
  };
  r.summary = count_findings(r.findings);
  r.summary.files = 3;
  r.summary.tensors = 7;
  r.summary.bytes = 1234;
  return r;
}

const json::Value& member(const json::Value& v, const char* k) {
  const json::Value* m = v.find(k);
  EXPECT_NE(m, nullptr) << k;
  static const json::Value null;
  return m ? *m : null;
}

TEST(report_summary, count_findings_by_severity) {
  auto s = count_findings(sample().findings);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.warnings, 1u);
  EXPECT_EQ(s.infos, 1u);
  EXPECT_EQ(count_findings({}).errors, 0u);
}

TEST(report_json, schema_and_types) {
  std::string out = render_json(sample());
  auto p = json::parse(out);
  ASSERT_TRUE(p.ok()) << out;
  EXPECT_TRUE(p.duplicates.empty());
  const json::Value& v = p.value;
  ASSERT_TRUE(v.is_object());
  std::vector<std::string> keys;
  for (const auto& [k, _] : v.as_object()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"ckpt_version", "schema_version", "target", "findings", "summary"}));
  EXPECT_TRUE(member(v, "ckpt_version").is_string());
  EXPECT_EQ(member(v, "target").as_string(), "/models/m");
  const auto& fs_ = member(v, "findings").as_array();
  ASSERT_EQ(fs_.size(), 3u);
  for (const auto& f : fs_) {
    std::vector<std::string> fk;
    for (const auto& [k, _] : f.as_object()) fk.push_back(k);
    EXPECT_EQ(fk, (std::vector<std::string>{"code", "severity", "message", "file", "tensor", "hint"}));
    EXPECT_TRUE(member(f, "code").is_string());
    EXPECT_TRUE(member(f, "severity").is_string());
    EXPECT_TRUE(member(f, "message").is_string());
  }
  EXPECT_EQ(member(fs_[0], "severity").as_string(), "error");
  EXPECT_EQ(member(fs_[0], "file").as_string(), "model.safetensors") << "file is relative to the root, unprefixed";
  EXPECT_EQ(member(fs_[0], "tensor").as_string(), "lm_head.weight");
  EXPECT_TRUE(member(fs_[1], "tensor").is_null());
  EXPECT_TRUE(member(fs_[1], "hint").is_null());
  EXPECT_EQ(member(fs_[1], "severity").as_string(), "warning");
  EXPECT_TRUE(member(fs_[2], "file").is_null());
  EXPECT_EQ(member(fs_[2], "severity").as_string(), "info");
  const json::Value& s = member(v, "summary");
  std::vector<std::string> sk;
  for (const auto& [k, val] : s.as_object()) {
    sk.push_back(k);
    EXPECT_TRUE(val.is_int()) << k;
  }
  EXPECT_EQ(sk, (std::vector<std::string>{"errors", "warnings", "infos", "files", "tensors", "bytes"}));
  EXPECT_EQ(s.get_int("errors"), 1);
  EXPECT_EQ(s.get_int("bytes"), 1234);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one JSON object, one line";
}

TEST(report_json, empty_report) {
  Report r;
  r.target = "x";
  auto p = json::parse(render_json(r));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p.value.find("findings")->as_array().empty());
}

TEST(report_json, escapes_hostile_strings) {
  Report r;
  r.target = "dir \"with\" quotes\\";
  r.findings = {{"ST006", Severity::error, "line1\nline2\t\x01\x1f end", "a\"b.safetensors", "t\\\"}", "h\r"}};
  r.summary = count_findings(r.findings);
  std::string out = render_json(r);
  auto p = json::parse(out);
  ASSERT_TRUE(p.ok()) << out;
  const auto& f = p.value.find("findings")->as_array()[0];
  EXPECT_EQ(f.get_string("message"), "line1\nline2\t\x01\x1f end");
  EXPECT_EQ(f.get_string("file"), "a\"b.safetensors");
  EXPECT_EQ(f.get_string("tensor"), "t\\\"}");
  EXPECT_EQ(p.value.get_string("target"), r.target);
}

TEST(report_json, non_utf8_bytes_still_give_valid_json) {
  // File names on disk and ref contents are arbitrary bytes; the output must stay parseable.
  Report r;
  r.target = "/m/\xff";
  r.findings = {{"FS007", Severity::error, "refs/main holds \"\xc3\x28\xfe\"", "bad\xff\xfe.incomplete", "", ""}};
  r.summary = count_findings(r.findings);
  std::string out = render_json(r);
  auto p = json::parse(out);
  ASSERT_TRUE(p.ok()) << p.error->message;
  const auto& f = p.value.find("findings")->as_array()[0];
  EXPECT_EQ(*f.get_string("file"), "bad\xEF\xBF\xBD\xEF\xBF\xBD.incomplete") << "invalid bytes become U+FFFD";
  Report ok;
  ok.findings = {{"TK001", Severity::error, "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe4\xb8\xad", "", "", ""}};
  auto p2 = json::parse(render_json(ok));
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2.value.find("findings")->as_array()[0].get_string("message"), ok.findings[0].message)
      << "valid UTF-8 passes through unchanged";
  std::string sarif = render_sarif(r);
  EXPECT_TRUE(json::parse(sarif).ok());
}

TEST(report_github, one_line_per_finding) {
  std::string out = render_github(sample());
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    lines.push_back(out.substr(start, nl - start));
    start = nl + 1;
  }
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("::error file=/models/m/model.safetensors", 0), 0u) << lines[0];
  EXPECT_TRUE(contains(lines[0], "::ST014 file is 10 bytes")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "lm_head.weight")) << lines[0];
  EXPECT_EQ(lines[1].rfind("::warning file=/models/m/model.safetensors", 0), 0u) << lines[1];
  EXPECT_TRUE(contains(lines[1], "::ST017 ")) << lines[1];
  EXPECT_EQ(lines[2].rfind("::notice ", 0), 0u) << lines[2];
  EXPECT_FALSE(contains(lines[2], "file=")) << "no file property for checkpoint-wide findings";
  EXPECT_TRUE(contains(lines[2], "::FS009 ")) << lines[2];
}

TEST(report_github, escapes_workflow_command_syntax) {
  Report r;
  r.file_prefix = "";
  r.findings = {{"IX001", Severity::error, "100% broken\nsecond line", "we,ird:name.safetensors", "", ""}};
  r.summary = count_findings(r.findings);
  std::string out = render_github(r);
  std::string first = out.substr(0, out.find('\n'));
  EXPECT_TRUE(contains(first, "file=we%2Cird%3Aname.safetensors")) << first;
  EXPECT_TRUE(contains(first, "100%25 broken%0Asecond line")) << first;
}

TEST(report_sarif, parses_with_version_rules_and_levels) {
  std::string out = render_sarif(sample());
  auto p = json::parse(out);
  ASSERT_TRUE(p.ok()) << out.substr(0, 400);
  EXPECT_EQ(p.value.get_string("version"), "2.1.0");
  const auto& runs = p.value.find("runs")->as_array();
  ASSERT_EQ(runs.size(), 1u);
  const auto& driver = *runs[0].find("tool")->find("driver");
  EXPECT_EQ(driver.get_string("name"), "ckpt");
  const auto& rules = driver.find("rules")->as_array();
  EXPECT_EQ(rules.size(), all_checks().size());
  std::set<std::string> ids;
  for (const auto& rule : rules) ids.insert(*rule.get_string("id"));
  EXPECT_TRUE(ids.count("ST014") && ids.count("FS001") && ids.count("IX013"));
  const auto& results = runs[0].find("results")->as_array();
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].get_string("ruleId"), "ST014");
  EXPECT_EQ(results[0].get_string("level"), "error");
  EXPECT_EQ(results[1].get_string("level"), "warning");
  EXPECT_EQ(results[2].get_string("level"), "note");
  const auto& loc = results[0].find("locations")->as_array()[0];
  EXPECT_EQ(loc.find("physicalLocation")->find("artifactLocation")->get_string("uri"), "/models/m/model.safetensors");
  EXPECT_EQ(results[2].find("locations"), nullptr);
}

TEST(report_text, verdict_codes_and_grouping) {
  std::string out = render_text(sample(), false);
  EXPECT_EQ(out.find("\033["), std::string::npos) << "no colour when asked";
  EXPECT_TRUE(contains(out, "ST014")) << out;
  EXPECT_TRUE(contains(out, "tensor: lm_head.weight")) << out;
  EXPECT_TRUE(contains(out, "(checkpoint)")) << out;
  EXPECT_TRUE(contains(out, "FAIL: 1 error, 1 warning, 1 info")) << out;
  EXPECT_TRUE(contains(out, "3 files, 7 tensors in 1.2 KiB of weights, checked in")) << out;
  Report ok;
  ok.target = "m";
  std::string o2 = render_text(ok, false);
  EXPECT_TRUE(contains(o2, "no findings")) << o2;
  EXPECT_TRUE(contains(o2, "OK: 0 errors")) << o2;
  EXPECT_NE(render_text(sample(), true).find("\033["), std::string::npos);
}

// The first finding of each code points at `ckpt explain CODE`, once per code.
TEST(report_text, explain_hint_once_per_code) {
  Report r = sample();
  r.findings.push_back({"ST014", Severity::error, "another short file", "z.safetensors", "", ""});
  r.summary = count_findings(r.findings);
  std::string out = render_text(r, false);
  for (const char* code : {"ST014", "ST017", "FS009"}) {
    std::string hint = std::string("run 'ckpt explain ") + code + "'";
    size_t first = out.find(hint);
    EXPECT_NE(first, std::string::npos) << code << "\n" << out;
    EXPECT_EQ(out.find(hint, first + 1), std::string::npos) << code << " hinted twice\n" << out;
  }
  // After the finding's own hint line, before the next finding.
  EXPECT_TRUE(contains(out, "hint: re-download\n                   run 'ckpt explain ST014'\n")) << out;
  EXPECT_FALSE(contains(render_text(Report{}, false), "ckpt explain"));
}

TEST(report_jsonl, one_finding_per_line_then_the_summary) {
  Report r = sample();
  std::string out = render_jsonl(r);
  std::vector<json::Value> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    ASSERT_NE(nl, std::string::npos) << "every line ends with a newline";
    auto p = json::parse(out.substr(start, nl - start));
    ASSERT_TRUE(p.ok()) << out.substr(start, nl - start);
    lines.push_back(p.value);
    start = nl + 1;
  }
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i].get_string("record"), "finding");
    EXPECT_EQ(lines[i].get_string("code"), r.findings[i].code);
  }
  EXPECT_EQ(lines[3].get_string("record"), "summary");
  EXPECT_EQ(lines[3].get_string("target"), "/models/m");
  EXPECT_EQ(member(lines[3], "schema_version").as_int(), kReportSchemaVersion);
  EXPECT_EQ(member(member(lines[3], "summary"), "errors").as_int(), 1);
  EXPECT_EQ(render_jsonl(Report{}).find("\"record\":\"finding\""), std::string::npos);
}

}  // namespace
}  // namespace ckpt::ftest

namespace ckpt::ftest {
namespace {

// json::quoted matches Python's json.dumps: ensure_ascii=True keeps only ' '..'~' (DEL
// included in the escapes), ensure_ascii=False escapes only what JSON requires.
TEST(json_quoted, matches_python_json_dumps) {
  const std::string s = "a\x7f\"\\\n\x01 \xc3\xa9 \xf0\x9f\x98\x80";
  EXPECT_EQ(json::quoted(s, true), R"("a\u007f\"\\\n\u0001 \u00e9 \ud83d\ude00")");
  EXPECT_EQ(json::quoted(s, false), "\"a\x7f\\\"\\\\\\n\\u0001 \xc3\xa9 \xf0\x9f\x98\x80\"");
}

}  // namespace
}  // namespace ckpt::ftest
