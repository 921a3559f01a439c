// `ckpt explain CODE` against docs/checks.md: for every documented code (and every registered
// one), the binary prints the entry exactly as this test extracts it from the document in the
// source tree, so the docs and the binary cannot drift apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <set>

#include "ckpt/checks.h"
#include "test_support.h"

namespace ckpt::test {
namespace {

struct DocEntry {
  std::string code, title, body;
};

// This test's own reading of docs/checks.md: a "## CODE — title" heading starts an entry, the
// next heading or "---" rule ends it; the **Means:**/**Why:**/**Example(s):**/**Fix:** labels
// start lines, blank lines around the entry are dropped.
std::vector<DocEntry> doc_entries() {
  std::string doc = read_text(std::filesystem::path(CKPT_SOURCE_DIR) / "docs/checks.md");
  std::vector<DocEntry> out;
  std::istringstream in(doc);
  std::string line;
  static const std::regex heading(R"(^## ([A-Z]{2,3}[0-9]{3}) — (.*)$)");
  std::vector<std::string> body;
  auto close = [&] {
    if (out.empty() || body.empty()) return body.clear();
    std::string text;
    for (const auto& l : body) text += l + "\n";
    text = std::regex_replace(text, std::regex(R"( *\*\*(Means|Why|Examples|Example|Fix):\*\*)"), "\n$1:");
    text = std::regex_replace(text, std::regex("\n\n(Means|Why|Examples|Example|Fix):"), "\n$1:");
    size_t a = text.find_first_not_of('\n'), b = text.find_last_not_of("\n ");
    out.back().body = a == std::string::npos ? "" : text.substr(a, b - a + 1) + "\n";
    body.clear();
  };
  bool open = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!line.empty() && (line[0] == '#' || line == "---")) {
      if (open) close();
      open = std::regex_match(line, m, heading);
      if (open) out.push_back({m[1], m[2], ""});
      continue;
    }
    if (open) body.push_back(line);
  }
  if (open) close();
  return out;
}

TEST(explain, every_code_prints_its_docs_entry) {
  auto entries = doc_entries();
  ASSERT_GT(entries.size(), 100u);
  std::set<std::string> documented;
  for (const auto& e : entries) {
    documented.insert(e.code);
    auto r = run_ckpt({"explain", e.code});
    ASSERT_EQ(r.exit_code, 0) << e.code << ": " << r.err;
    std::string expected = e.code + " — " + e.title + "\n\n" + e.body;
    if (const CheckInfo* c = find_check(e.code))
      expected += "\nDefault severity: " + std::string(severity_name(c->severity)) +
                  " (--engine and the check itself may raise or lower it; see docs/checks.md).\n";
    EXPECT_EQ(r.out, expected) << e.code;
    EXPECT_NE(r.out.find("Means:"), std::string::npos) << e.code << " has no meaning";
  }
  for (const auto& c : all_checks()) EXPECT_TRUE(documented.count(std::string(c.code))) << c.code << " undocumented";
}

TEST(explain, list_family_case_and_unknown) {
  auto list = run_ckpt({"explain", "--list"});
  ASSERT_EQ(list.exit_code, 0);
  EXPECT_EQ(static_cast<size_t>(std::count(list.out.begin(), list.out.end(), '\n')), doc_entries().size());
  EXPECT_NE(list.out.find("QZ004 "), std::string::npos) << list.out;
  auto family = run_ckpt({"explain", "ST"});
  EXPECT_EQ(family.exit_code, 0);
  EXPECT_NE(family.out.find("ST001  file shorter than the header length\n"), std::string::npos) << family.out;
  EXPECT_EQ(family.out.find("IX0"), std::string::npos) << family.out;
  EXPECT_EQ(run_ckpt({"explain", "qz004"}).out, run_ckpt({"explain", "QZ004"}).out);
  auto unknown = run_ckpt({"explain", "ZZ999"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("ckpt explain --list"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_ckpt({"explain"}).exit_code, 2);
}

// Text output points at explain once per code; a real run.
TEST(explain, verify_text_hints_explain_on_first_use) {
  TempDir d;
  ASSERT_EQ(run_ckpt({"fixture", "llama", (d / "m").string(), "--defect", "truncated-shard"}).exit_code, 0);
  auto r = run_ckpt({"verify", (d / "m").string()});
  EXPECT_EQ(r.exit_code, 1);
  size_t at = r.out.find("run 'ckpt explain ST014'");
  EXPECT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("run 'ckpt explain ST014'", at + 1), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ckpt::test
