// Real checkpoints written by Debian's python3-torch (torch.save: zip and legacy formats, tied
// weights, views, parameters, nested dicts, 1500 tensors): ckpt must read exactly the names,
// dtypes, shapes, strides, storage offsets and storage sharing that torch.load(weights_only=True)
// reports, and find nothing wrong with them. Skipped when torch is not installed.
#include <gtest/gtest.h>

#include <map>

#include "checks/pytorch_safety.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "test_support.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

bool have_torch() {
  static const bool ok = test::run_program({"/usr/bin/python3", "-c", "import torch"}).exit_code == 0;
  return ok;
}

struct Oracle {
  test::TempDir dir;
  json::Value expected;
  bool ok = false;
  Oracle() {
    auto r = test::run_program({"/usr/bin/python3", std::string(CKPT_SOURCE_DIR) + "/tests/pytorch/torch_oracle.py", dir.path().string()});
    if (r.exit_code != 0) {
      ADD_FAILURE() << "torch_oracle.py failed: " << r.err;
      return;
    }
    auto parsed = json::parse(test::read_text(dir / "expected.json"));
    if (!parsed.ok()) {
      ADD_FAILURE() << "expected.json does not parse";
      return;
    }
    expected = parsed.value;
    ok = true;
  }
};

std::vector<int64_t> ints(const json::Value& a) {
  std::vector<int64_t> v;
  for (const auto& x : a.as_array()) v.push_back(x.as_int());
  return v;
}

TEST(TorchOracle, ReadsWhatTorchLoadReads) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 cannot import torch)";
  Oracle o;
  ASSERT_TRUE(o.ok);
  size_t files = 0, tensors = 0;
  for (const auto& [fname, want] : o.expected.as_object()) {
    SCOPED_TRACE(fname);
    ++files;
    pt::FileScan scan = pt::scan_file(o.dir / fname, fname);
    EXPECT_EQ(scan.container, want.find("zip")->as_bool() ? pt::Container::TorchZip : pt::Container::Legacy);
    ASSERT_TRUE(scan.weights_read);
    const auto& rows = want.find("tensors")->as_array();
    ASSERT_EQ(scan.tensors.size(), rows.size());
    std::map<std::string, int32_t> storage_of;
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const pt::Tensor& t = scan.tensors[i];
      SCOPED_TRACE(t.name);
      ++tensors;
      EXPECT_EQ(t.name, r.find("name")->as_string());
      EXPECT_EQ(t.dtype, r.find("dtype")->as_string());
      EXPECT_EQ(t.shape, ints(*r.find("shape")));
      EXPECT_EQ(t.stride, ints(*r.find("stride")));
      EXPECT_EQ(t.storage_offset, r.find("offset")->as_int());
      EXPECT_TRUE(t.problem.empty()) << t.problem;
      ASSERT_GE(t.storage, 0);
      storage_of[t.name] = t.storage;
      // Same storage exactly when torch says so.
      EXPECT_EQ(t.storage, storage_of[r.find("storage_group")->as_string()]);
      const pt::Storage& s = scan.storages[static_cast<size_t>(t.storage)];
      EXPECT_EQ(s.numel, static_cast<uint64_t>(r.find("storage_numel")->as_int()));
      EXPECT_TRUE(s.present);
      EXPECT_EQ(s.bytes, static_cast<uint64_t>(r.find("storage_nbytes")->as_int()));
      EXPECT_EQ(s.available, s.bytes);
    }
    // A legitimate torch.save checkpoint: no error or warning from PK or PT.
    Checkpoint ck;
    ck.pickle_scans.push_back(std::move(scan));
    FindingSink sink;
    for (const auto& fam : check_families())
      if (fam.name == "PK" || fam.name == "PT") fam.run(ck, {}, sink);
    for (const auto& f : sink.findings())
      EXPECT_EQ(f.severity, Severity::info) << f.code << " " << f.message;
  }
  EXPECT_EQ(files, 10u);
  EXPECT_GT(tensors, 1500u);
}

}  // namespace
}  // namespace ckpt
