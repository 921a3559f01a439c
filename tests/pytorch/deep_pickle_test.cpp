// --deep over pickled tensors: NaN / Inf counted over the elements each tensor addresses (not
// the storage range), located by the tensor's own row-major index, in little- and big-endian
// archives. A torch-written file (tests/pytorch/deep_oracle.py, skipped without python3-torch)
// and its big-endian twin must give exactly what torch counts; in-code cases cover the span
// decomposition, the byte swap, the .bin-vs-safetensors byte comparison (PT022) and the
// legacy writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "checks/hashes_plan.h"
#include "ckpt/checks.h"
#include "ckpt/fixture.h"
#include "ckpt/json.h"
#include "ckpt/pytorch_writer.h"
#include "test_support.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

bool have_torch() {
  static const bool ok = test::run_program({"/usr/bin/python3", "-c", "import torch"}).exit_code == 0;
  return ok;
}

std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += "\n  " + f.code + " " + std::string(severity_name(f.severity)) + " " + f.file + " [" + f.tensor + "]: " + f.message;
  return s;
}

std::vector<Finding> deep_verify(const fs::path& d) {
  auto lr = load_checkpoint(d.string());
  EXPECT_TRUE(lr.checkpoint);
  if (!lr.checkpoint) return {};
  VerifyOptions o;
  o.deep = true;
  return run_checks(*lr.checkpoint, o);
}

const Finding* on(const std::vector<Finding>& fs, std::string_view code, std::string_view tensor) {
  for (const auto& f : fs)
    if (f.code == code && f.tensor == tensor) return &f;
  return nullptr;
}

std::string index_text(const json::Value& v) {
  std::string s = "index [";
  for (size_t i = 0; i < v.as_array().size(); ++i) s += (i ? ", " : "") + std::to_string(v.as_array()[i].as_int());
  return s + "]";
}

TEST(PyTorchDeepOracle, StridedViewsAndBigEndianCountWhatTorchCounts) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 cannot import torch)";
  test::TempDir dir;
  auto r = test::run_program({"/usr/bin/python3", std::string(CKPT_SOURCE_DIR) + "/tests/pytorch/deep_oracle.py", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto parsed = json::parse(test::read_text(dir / "expected.json"));
  ASSERT_TRUE(parsed.ok());
  for (const char* order : {"le", "be"}) {
    SCOPED_TRACE(order);
    auto fs = deep_verify(dir / order);
    size_t checked = 0;
    for (const auto& [name, want] : parsed.value.as_object()) {
      SCOPED_TRACE(name);
      for (const auto& [code, count, first] : {std::tuple{"HS002", "nan", "first_nan"}, std::tuple{"HS003", "inf", "first_inf"}}) {
        const int64_t n = want.find(count)->as_int();
        const Finding* f = on(fs, code, name);
        if (n == 0) {
          EXPECT_EQ(f, nullptr) << dump(fs);
          continue;
        }
        ASSERT_NE(f, nullptr) << code << dump(fs);
        const std::string of = std::to_string(n) + " of " + std::to_string(want.find("values")->as_int()) +
                               (want.find("distinct")->as_bool() ? " distinct stored " : " ");
        EXPECT_EQ(f->message.rfind(of, 0), 0u) << f->message;
        EXPECT_NE(f->message.find(index_text(*want.find(first))), std::string::npos) << f->message;
        ++checked;
      }
    }
    EXPECT_EQ(checked, 6u);
    EXPECT_EQ(on(fs, "HS004", "clean.weight"), nullptr);
    const bool warned = std::any_of(fs.begin(), fs.end(), [](const Finding& f) { return f.code == "PT011"; });
    EXPECT_EQ(warned, std::string(order) == "be") << dump(fs);
  }
}

// ---- the span decomposition, in code ----

pt::Tensor tensor(std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t offset = 0) {
  pt::Tensor t;
  t.dtype = "float32";
  t.itemsize = 4;
  t.shape = std::move(shape);
  t.stride = std::move(stride);
  t.storage_offset = offset;
  t.storage = 0;
  return t;
}

pt::Storage storage(uint64_t numel) {
  pt::Storage s;
  s.itemsize = 4;
  s.numel = numel;
  s.bytes = numel * 4;
  s.available = s.bytes;
  s.present = true;
  s.data_offset = 1000;
  return s;
}

TEST(PyTorchDeepSpans, EachTensorAsItAddressesItsStorage) {
  using checks::hs::strided_spans;
  // contiguous: one span, identity order
  auto c = strided_spans(tensor({3, 4}, {4, 1}, 2), storage(14), 64);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->spans.size(), 1u);
  EXPECT_EQ(c->spans[0].offset, 1008u);
  EXPECT_EQ(c->spans[0].nbytes, 48u);
  EXPECT_EQ(c->map(7), 7u);
  // transposed (4,3) stride (1,4): one span of 12; storage element 6 = row 1 col 2 of the base
  // = [2, 1] of the transpose = flat 7
  auto t = strided_spans(tensor({4, 3}, {1, 4}), storage(12), 64);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->spans.size(), 1u);
  EXPECT_EQ(t->map(6), 7u);
  // every other column: one span per element run (4 rows x 3 single elements = 12 spans)
  auto w = strided_spans(tensor({4, 3}, {6, 2}), storage(24), 64);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->spans.size(), 12u);
  EXPECT_EQ(w->elements, 12u);
  EXPECT_EQ(w->spans[4].offset, 1000u + 4u * (6 + 2));  // row 1, column 1 -> storage element 8
  // too many spans for the cap
  EXPECT_FALSE(strided_spans(tensor({4, 3}, {6, 2}), storage(24), 8));
  // expand: the stride-0 dim is dropped, each stored value once
  auto e = strided_spans(tensor({3, 4}, {0, 1}), storage(4), 64);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->distinct_only);
  EXPECT_EQ(e->elements, 4u);
  EXPECT_EQ(e->map(1), 1u);
  // a slice of a larger storage: only its elements
  auto s = strided_spans(tensor({5}, {1}, 10), storage(100), 64);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->spans[0].offset, 1040u);
  EXPECT_EQ(s->spans[0].nbytes, 20u);
  // outside the storage, overlapping, negative: not scanned (PT007/PT008 report them)
  EXPECT_FALSE(strided_spans(tensor({4, 4}, {4, 1}), storage(15), 64));
  EXPECT_FALSE(strided_spans(tensor({4, 4}, {2, 1}), storage(64), 64));
  EXPECT_FALSE(strided_spans(tensor({4}, {-1}), storage(64), 64));
  // zero-size: nothing to scan
  auto z = strided_spans(tensor({0, 4}, {4, 1}), storage(0), 64);
  ASSERT_TRUE(z);
  EXPECT_EQ(z->elements, 0u);
}

std::vector<std::byte> f32(std::vector<float> v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(PyTorchDeepSpans, BigEndianZipIsSwappedBeforeTheScan) {
  test::TempDir tmp;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1.0f is 0x3f800000: unswapped, its big-endian bytes read as 0x0000803f (a tiny number, no NaN);
  // a NaN's big-endian bytes 0x7fc00000 read little-endian as 0x0000c07f (not NaN either).
  std::vector<pt::TensorToSave> t = {{"a.weight", DType::F32, {2, 2}, f32({1, nan, 1, 1})},
                                     {"b.weight", DType::F32, {4}, f32({1, 1, 1, 1})}};
  pt::WriterDefects be;
  be.big_endian = true;
  fs::create_directories(tmp / "be");
  ASSERT_EQ(pt::write_torch_zip(tmp / "be" / "pytorch_model.bin", t, be), "");
  auto fs = deep_verify(tmp / "be");
  const Finding* f = on(fs, "HS002", "a.weight");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_NE(f->message.find("1 of 4 F32 values are NaN, the first at index [0, 1]"), std::string::npos) << f->message;
  EXPECT_EQ(on(fs, "HS002", "b.weight"), nullptr) << dump(fs);
}

// ---- PT022: the .bin and the safetensors beside it, byte for byte ----

TEST(PyTorchTwins, DeepComparesTheBytesOfBothFormats) {
  test::TempDir tmp;
  fixture::Options o;
  o.arch = "llama";
  o.out = tmp / "m";
  auto st = fixture::make_fixture(o);
  ASSERT_EQ(st.error, "");
  o.out = tmp / "b";
  o.format = Format::pytorch;
  auto bin = fixture::make_fixture(o);
  ASSERT_EQ(bin.error, "");
  fs::copy_file(bin.model_dir / "pytorch_model.bin", st.model_dir / "pytorch_model.bin");
  auto same = deep_verify(st.model_dir);
  EXPECT_EQ(std::count_if(same.begin(), same.end(), [](const Finding& f) { return f.code == "PT022"; }), 0) << dump(same);
  auto info = std::find_if(same.begin(), same.end(), [](const Finding& f) {
    return f.code == "PT014" && f.message.find("--deep compared") != std::string::npos;
  });
  ASSERT_NE(info, same.end()) << dump(same);
  EXPECT_NE(info->message.find(std::to_string(st.tensors) + " identical, 0 different"), std::string::npos) << info->message;
  // Another seed: same names, dtypes and shapes, other values.
  o.out = tmp / "b2";
  o.seed = 7;
  auto other = fixture::make_fixture(o);
  ASSERT_EQ(other.error, "");
  fs::remove(st.model_dir / "pytorch_model.bin");
  fs::copy_file(other.model_dir / "pytorch_model.bin", st.model_dir / "pytorch_model.bin");
  auto differ = deep_verify(st.model_dir);
  const auto n22 = std::count_if(differ.begin(), differ.end(), [](const Finding& f) { return f.code == "PT022"; });
  EXPECT_GE(n22, 1) << dump(differ);
  auto first = std::find_if(differ.begin(), differ.end(), [](const Finding& f) { return f.code == "PT022" && !f.tensor.empty(); });
  ASSERT_NE(first, differ.end());
  EXPECT_NE(first->message.find("the first difference is at element ["), std::string::npos) << first->message;
  // header-only: no byte comparison
  auto lr = load_checkpoint(st.model_dir.string());
  ASSERT_TRUE(lr.checkpoint);
  for (const auto& f : run_checks(*lr.checkpoint)) EXPECT_NE(f.code, "PT022");
}

// ---- the legacy writer: ckpt reads it back, torch.load reads it ----

TEST(PyTorchLegacyWriter, FixtureInTheLegacyStream) {
  test::TempDir tmp;
  fixture::Options o;
  o.arch = "llama";
  o.out = tmp / "m";
  o.format = Format::pytorch;
  o.pytorch_legacy = true;
  o.shards = 2;
  auto r = fixture::make_fixture(o);
  ASSERT_EQ(r.error, "");
  auto lr = load_checkpoint(r.model_dir.string());
  ASSERT_TRUE(lr.checkpoint);
  size_t tensors = 0;
  for (const auto& s : lr.checkpoint->pickle_scans) {
    if (s.file.find(".bin") == std::string::npos || s.file.find("index") != std::string::npos) continue;
    EXPECT_EQ(s.container, pt::Container::Legacy) << s.file;
    tensors += s.tensors.size();
  }
  EXPECT_EQ(tensors, r.tensors);
  auto fs = run_checks(*lr.checkpoint);
  for (const auto& f : fs) EXPECT_NE(f.severity, Severity::error) << f.code << " " << f.message;
  // every pickle defect is found in the legacy stream too
  for (const auto& d : fixture::pytorch_defects()) {
    SCOPED_TRACE(std::string(d.name));
    fixture::Options od = o;
    od.out = tmp / std::string(d.name);
    od.shards = 1;
    od.defects = {std::string(d.name)};
    auto rd = fixture::make_fixture(od);
    ASSERT_EQ(rd.error, "");
    auto dl = load_checkpoint(rd.model_dir.string());
    ASSERT_TRUE(dl.checkpoint);
    auto dfs = run_checks(*dl.checkpoint);
    EXPECT_TRUE(std::any_of(dfs.begin(), dfs.end(), [&](const Finding& f) { return f.code == d.code; })) << dump(dfs);
  }
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed: torch.load of the legacy files not checked";
  const std::string script =
      "import torch,sys,json,glob,os\n"
      "out={}\n"
      "for f in sorted(glob.glob(os.path.join(sys.argv[1],'*.bin'))):\n"
      "  sd=torch.load(f,map_location='cpu',weights_only=True)\n"
      "  for k,v in sd.items(): out[k]=[str(v.dtype).replace('torch.',''),list(v.shape),float(v.float().abs().sum())]\n"
      "print(json.dumps(out,sort_keys=True))\n";
  auto py = test::run_program({"/usr/bin/python3", "-c", script, r.model_dir.string()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto parsed = json::parse(py.out);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value.as_object().size(), r.tensors);
  // the same weights as the zip writer's (torch reads both; the sums agree)
  o.pytorch_legacy = false;
  o.out = tmp / "zip";
  auto z = fixture::make_fixture(o);
  ASSERT_EQ(z.error, "");
  auto pz = test::run_program({"/usr/bin/python3", "-c", script, z.model_dir.string()});
  ASSERT_EQ(pz.exit_code, 0) << pz.err;
  EXPECT_EQ(py.out, pz.out);
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

// ZIP64: a sparse stand-in with a 4.5 GiB record and a record past 4 GiB. ckpt's reader and
// Python's zipfile (an independent reader of the central directory) must agree on every record.
TEST(PyTorchZip64Writer, RecordsAndOffsetsPastFourGiB) {
  test::TempDir tmp;
  const uint64_t big = (1ull << 31) + (1ull << 28);  // F16 elements: 4.5 GiB
  std::vector<pt::TensorToSave> t = {{"big.weight", DType::F16, {big}, {}}, {"after.weight", DType::F32, {4}, {}}};
  const fs::path p = tmp / "pytorch_model.bin";
  ASSERT_EQ(pt::write_torch_zip_sparse(p, t), "");
  pt::FileScan s = pt::scan_file(p, "pytorch_model.bin");
  EXPECT_EQ(s.container, pt::Container::TorchZip);
  for (const auto& n : s.notes) ADD_FAILURE() << n.detail;
  ASSERT_EQ(s.tensors.size(), 2u);
  ASSERT_EQ(s.storages.size(), 2u);
  EXPECT_EQ(s.storages[0].bytes, big * 2);
  EXPECT_EQ(s.storages[0].available, big * 2);
  EXPECT_GT(s.storages[1].data_offset, 0xFFFFFFFFull);
  EXPECT_EQ(s.storages[1].data_offset % 64, 0u);
  EXPECT_EQ(s.storages[1].bytes, 16u);
  const std::string script =
      "import zipfile,sys\n"
      "z=zipfile.ZipFile(sys.argv[1])\n"
      "for i in z.infolist(): print(i.filename, i.file_size, i.header_offset)\n";
  auto py = test::run_program({"/usr/bin/python3", "-c", script, p.string()});
  if (py.exit_code != 0 && py.err.find("No such file") != std::string::npos) GTEST_SKIP() << "no /usr/bin/python3";
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_NE(py.out.find("pytorch_model/data/0 " + std::to_string(big * 2) + " "), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("pytorch_model/data/1 16 "), std::string::npos) << py.out;
}

}  // namespace
}  // namespace ckpt
