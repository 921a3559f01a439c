// The 111 scanner samples of ../shared/corpus/pickles, classified exactly as its MANIFEST says,
// by content alone: each file is also scanned under a neutral name and as bytes in memory.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "checks/pytorch_safety.h"
#include "test_support.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

struct Row {
  std::string path, expected;
};

std::vector<Row> manifest(const fs::path& dir) {
  std::vector<Row> rows;
  std::ifstream in(dir / "MANIFEST.tsv");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string c;
    while (std::getline(ss, c, '\t')) cols.push_back(c);
    if (cols.size() >= 4) rows.push_back({cols[0], cols[3]});
  }
  return rows;
}

// The verdict the MANIFEST's vocabulary names, from the PK findings of one scan.
std::string classify(const pt::FileScan& scan, const std::vector<Finding>& f) {
  bool error = false, encrypted = false, other_warning = false;
  for (const auto& x : f) {
    if (x.severity == Severity::error) error = true;
    else if (x.code == "PK007") encrypted = true;
    else if (x.severity == Severity::warning) other_warning = true;
  }
  if (error) return "dangerous";
  if (encrypted) return "skip encrypted member with a warning, no crash";
  if (scan.container == pt::Container::NotPickle && f.empty()) return "clean: not a pickle, no error";
  if (other_warning) return "warning";
  return "clean";
}

std::string describe(const std::vector<Finding>& f) {
  std::string s;
  for (const auto& x : f) s += "\n    " + x.code + " " + std::string(severity_name(x.severity)) + " " + x.message;
  return s;
}

TEST(PickleCorpus, EverySampleClassifiedAsTheManifestSays) {
  CKPT_REQUIRE_CORPUS();
  const fs::path dir = test::corpus_dir() / "pickles";
  if (!fs::exists(dir / "MANIFEST.tsv")) GTEST_SKIP() << "no pickles/ corpus";
  const auto rows = manifest(dir);
  ASSERT_EQ(rows.size(), 111u);
  std::map<std::string, int> counts;
  for (const auto& r : rows) {
    const fs::path p = dir / r.path;
    pt::FileScan scan = pt::scan_file(p, r.path);
    FindingSink sink;
    checks::pk::safety_findings(scan, sink);
    const std::string got = classify(scan, sink.findings());
    EXPECT_EQ(got, r.expected) << r.path << " (" << pt::container_name(scan.container) << ")" << describe(sink.findings());
    ++counts[got];
    // The same bytes under a neutral name, from memory: the verdict must not move.
    const std::string bytes = test::read_text(p);
    pt::FileScan again = pt::scan_bytes(bytes, "weights.dat");
    FindingSink sink2;
    checks::pk::safety_findings(again, sink2);
    EXPECT_EQ(classify(again, sink2.findings()), got) << r.path << " classified differently from memory";
    EXPECT_EQ(sink2.findings().size(), sink.findings().size()) << r.path;
  }
  EXPECT_EQ(counts["dangerous"], 96);
  EXPECT_EQ(counts["clean"], 11);
  EXPECT_EQ(counts["clean: not a pickle, no error"], 2);
  EXPECT_EQ(counts["skip encrypted member with a warning, no crash"], 2);
}

}  // namespace
}  // namespace ckpt
