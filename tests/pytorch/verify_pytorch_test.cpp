// PyTorch checkpoints through the whole pipeline: ckpt fixture --format pytorch (read back by
// torch itself when python3-torch is installed), every planted pickle defect found by its code,
// sharded .bin checkpoints through the IX checks, the same architecture checks as the
// safetensors twin, and the reader's bounds on hostile bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "checks/pytorch_safety.h"
#include "ckpt/checks.h"
#include "ckpt/fixture.h"
#include "ckpt/pytorch_writer.h"
#include "format/pickle.h"
#include "format/zip.h"
#include "test_support.h"

namespace ckpt {
namespace {

namespace fs = std::filesystem;

std::vector<Finding> verify_dir(const fs::path& d) {
  auto lr = load_checkpoint(d.string());
  EXPECT_TRUE(lr.checkpoint) << (lr.error ? lr.error->message : "");
  if (!lr.checkpoint) return {};
  return run_checks(*lr.checkpoint);
}

std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += "\n  " + f.code + " " + std::string(severity_name(f.severity)) + " " + f.file + ": " + f.message;
  return s;
}

size_t count(const std::vector<Finding>& fs, std::string_view code) {
  return static_cast<size_t>(std::count_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == code; }));
}

std::set<std::string> error_codes(const std::vector<Finding>& fs) {
  std::set<std::string> s;
  for (const auto& f : fs)
    if (f.severity == Severity::error) s.insert(f.code);
  return s;
}

fixture::Result make(const fs::path& out, const std::string& arch, std::vector<std::string> defects = {}, uint32_t shards = 1) {
  fixture::Options o;
  o.arch = arch;
  o.out = out;
  o.format = Format::pytorch;
  o.defects = std::move(defects);
  o.shards = shards;
  return fixture::make_fixture(o);
}

TEST(PyTorchVerify, CleanFixturesVerifyLikeTheirSafetensorsTwin) {
  test::TempDir tmp;
  for (const char* arch : {"llama", "qwen3", "qwen3_moe", "gemma3_text", "mistral"}) {
    SCOPED_TRACE(arch);
    for (uint32_t shards : {1u, 3u}) {
      auto r = make(tmp / (std::string(arch) + std::to_string(shards)), arch, {}, shards);
      if (!r.error.empty()) {
        EXPECT_NE(r.error.find("needs"), std::string::npos) << r.error;
        continue;
      }
      auto fs = verify_dir(r.model_dir);
      EXPECT_TRUE(error_codes(fs).empty()) << dump(fs);
      // The twin: same architecture and seed as safetensors; the architecture/config verdicts agree.
      fixture::Options o;
      o.arch = arch;
      o.out = tmp / (std::string(arch) + std::to_string(shards) + "-st");
      o.shards = shards;
      auto twin = fixture::make_fixture(o);
      ASSERT_EQ(twin.error, "");
      auto tfs = verify_dir(twin.model_dir);
      auto conf = [](const std::vector<Finding>& v) {
        std::multiset<std::string> s;
        for (const auto& f : v)
          if (f.code.rfind("AR", 0) == 0 || f.code.rfind("CF", 0) == 0 || f.code.rfind("QZ", 0) == 0) s.insert(f.code + " " + f.message);
        return s;
      };
      EXPECT_EQ(conf(fs), conf(tfs));
      EXPECT_EQ(r.tensors, twin.tensors);
    }
  }
}

TEST(PyTorchVerify, EveryPickleDefectIsFoundByItsCode) {
  test::TempDir tmp;
  // What a defect may bring along (a cut archive also loses its version record and directory).
  const std::map<std::string, std::set<std::string>> collateral = {{"pt-truncated-storage", {"PT002", "PT003"}}};
  for (const auto& d : fixture::pytorch_defects()) {
    SCOPED_TRACE(std::string(d.name));
    for (uint32_t shards : {1u, 2u}) {
      auto r = make(tmp / (std::string(d.name) + std::to_string(shards)), "llama", {std::string(d.name)}, shards);
      ASSERT_EQ(r.error, "");
      auto fs = verify_dir(r.model_dir);
      EXPECT_GE(count(fs, d.code), 1u) << dump(fs);
      std::set<std::string> allowed = {std::string(d.code)};
      if (auto it = collateral.find(std::string(d.name)); it != collateral.end()) allowed.insert(it->second.begin(), it->second.end());
      for (const auto& c : error_codes(fs)) EXPECT_TRUE(allowed.count(c)) << "unexpected " << c << dump(fs);
    }
  }
  // Safetensors-only defects refuse the pickle format with a "needs" message.
  auto r = make(tmp / "bad", "llama", {"header-past-eof"});
  EXPECT_NE(r.error.find("needs --format safetensors"), std::string::npos) << r.error;
}

TEST(PyTorchVerify, ShardedBinGoesThroughTheIndexChecks) {
  test::TempDir tmp;
  auto r = make(tmp / "m", "llama", {}, 3);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(fs::exists(r.model_dir / "pytorch_model.bin.index.json"));
  fs::remove(r.model_dir / "pytorch_model-00002-of-00003.bin");
  auto fs = verify_dir(r.model_dir);
  EXPECT_GE(count(fs, "IX001"), 1u) << dump(fs);  // the index names a missing shard
  EXPECT_GE(count(fs, "IX005") + count(fs, "AR001"), 1u) << dump(fs);
}

TEST(PyTorchVerify, SafetensorsBesideBinWinsAndTheBinIsStillScanned) {
  test::TempDir tmp;
  fixture::Options o;
  o.arch = "llama";
  o.out = tmp / "m";
  auto r = fixture::make_fixture(o);
  ASSERT_EQ(r.error, "");
  auto rb = make(tmp / "b", "llama", {"pt-dangerous-global"});
  ASSERT_EQ(rb.error, "");
  fs::copy_file(rb.model_dir / "pytorch_model.bin", r.model_dir / "pytorch_model.bin");
  auto lr = load_checkpoint(r.model_dir.string());
  ASSERT_TRUE(lr.checkpoint);
  for (const auto& sh : lr.checkpoint->shards) EXPECT_EQ(sh.format, Format::safetensors) << sh.file;
  auto fs = run_checks(*lr.checkpoint);
  EXPECT_EQ(count(fs, "PK001"), 1u) << dump(fs);
  EXPECT_EQ(count(fs, "AR002"), 0u) << dump(fs);  // the .bin's tensors are not counted twice
  // PT014 says which one loaders read, and that the .bin holds the same tensors (same arch and seed).
  auto pt14 = std::find_if(fs.begin(), fs.end(), [](const Finding& f) { return f.code == "PT014"; });
  ASSERT_NE(pt14, fs.end()) << dump(fs);
  EXPECT_NE(pt14->message.find("holds the same"), std::string::npos) << pt14->message;
}

TEST(PyTorchVerify, VerdictIgnoresTheFileName) {
  test::TempDir tmp;
  auto rb = make(tmp / "b", "llama", {"pt-dangerous-global"});
  ASSERT_EQ(rb.error, "");
  fs::create_directories(tmp / "c");
  fs::copy_file(rb.model_dir / "pytorch_model.bin", tmp / "c" / "notes.txt");
  fs::copy_file(rb.model_dir / "pytorch_model.bin", tmp / "c" / "model.safetensors.bak");
  auto fs = verify_dir(tmp / "c");
  EXPECT_EQ(count(fs, "PK001"), 2u) << dump(fs);
}

// Every prefix of a real archive: no crash, and a finding for each cut (PT002 or PK005).
TEST(PyTorchVerify, EveryTruncationIsReportedNeverACrash) {
  std::vector<pt::TensorToSave> t = {{"a.weight", DType::F32, {4, 8}, {}}, {"b.weight", DType::F16, {16}, {}}};
  const std::string bytes = pt::torch_zip_bytes(t, "archive");
  ASSERT_FALSE(bytes.empty());
  size_t cuts = 0;
  for (size_t n = 1; n < bytes.size(); n += 7) {
    pt::FileScan s = pt::scan_bytes(bytes.substr(0, n), "pytorch_model.bin");
    Checkpoint ck;
    ck.pickle_scans.push_back(std::move(s));
    FindingSink sink;
    for (const auto& fam : check_families())
      if (fam.name == "PK" || fam.name == "PT") fam.run(ck, {}, sink);
    size_t errors = 0;
    for (const auto& f : sink.findings()) errors += f.severity != Severity::info;
    EXPECT_GT(errors, 0u) << "cut at " << n << " of " << bytes.size();
    ++cuts;
  }
  EXPECT_GT(cuts, 50u);
  pt::FileScan whole = pt::scan_bytes(bytes, "pytorch_model.bin");
  EXPECT_EQ(whole.tensors.size(), 2u);
  EXPECT_TRUE(whole.notes.empty());
}

// ---- the reader's judgement and bounds, on hand-made pickles ----

using namespace std::string_literals;

pt::FileScan scan(const std::string& bytes) { return pt::scan_bytes(bytes, "x.pkl"); }
std::vector<Finding> pk(const std::string& bytes) {
  FindingSink s;
  checks::pk::safety_findings(scan(bytes), s);
  return s.findings();
}

TEST(PickleJudge, AllowlistAndBypassShapes) {
  using checks::pk::judge_import;
  using checks::pk::Verdict;
  EXPECT_EQ(judge_import("torch._utils", "_rebuild_tensor_v2").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("collections", "OrderedDict").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("torch", "BFloat16Storage").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("numpy._core.multiarray", "_reconstruct").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("numpy.core.multiarray", "_reconstruct").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("__builtin__", "set").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("argparse", "Namespace").verdict, Verdict::Unknown);
  EXPECT_EQ(judge_import("transformers.training_args", "TrainingArguments").verdict, Verdict::Unknown);
  // the published bypass shapes
  EXPECT_EQ(judge_import("numpy", "prod.os.system").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("pathlib", "os.system").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("numpy", "core._internal.sys.modules").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("numpy", "__builtins__").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("builtins", "dict.get").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("asyncio.unix_events", "_UnixSubprocessTransport._start").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("bdb", "Bdb.run").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("torch.storage", "_load_from_bytes").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("pickle", "loads").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("torch", "load").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("torch.jit._pickle", "build_intlist").verdict, Verdict::Allowed);
  EXPECT_EQ(judge_import("torch.jit", "load").verdict, Verdict::Dangerous);
  EXPECT_EQ(judge_import("some.module", "Cls.__getattribute__").verdict, Verdict::Dangerous);
}

TEST(PickleReader, HostileShapesAreBoundedAndReported) {
  // billion laughs: a list appended to itself through the memo, far past the opcode cap
  {
    std::string p = "\x80\x02]q\x00"s;
    for (int i = 0; i < 200; ++i) p += "(h\x00h\x00h\x00h\x00h\x00h\x00h\x00h\x00" "e"s;
    p += ".";
    auto r = pickle::read(p);
    EXPECT_TRUE(r.stopped) << r.error;  // small enough: read completely
    pickle::Limits lim;
    lim.max_ops = 500;
    auto capped = pickle::read(p, 0, lim);
    EXPECT_TRUE(capped.limit_hit);
  }
  // LONG_BINPUT at 0xFFFFFFFF: a hash-map memo, no 2^32 allocation
  {
    std::string p = std::string("\x80\x02N", 3) + "r\xff\xff\xff\xff" + "j\xff\xff\xff\xff" + ".";
    auto r = pickle::read(p);
    EXPECT_TRUE(r.stopped) << r.error;
  }
  // MARK nesting beyond the cap
  {
    std::string p = "\x80\x02" + std::string(10000, '(') + ".";
    auto fs = pk("\x80\x02" "cos\nsystem\n" + std::string(10000, '(') + ".");
    EXPECT_EQ(count(fs, "PK001"), 1u) << dump(fs);
    EXPECT_EQ(count(fs, "PK006"), 1u) << dump(fs);
    (void)p;
  }
  // a string length far past the end: truncation, not an allocation
  {
    auto r = pickle::read(std::string("\x80\x02X\xff\xff\xff\x7f", 7));
    EXPECT_FALSE(r.stopped);
    EXPECT_TRUE(r.ran_out);
  }
  // EXT opcodes name callables through copyreg: unresolvable
  EXPECT_EQ(count(pk(std::string("\x80\x02\x82\x01)R.", 6)), "PK002"), 1u);
  // STACK_GLOBAL from a call's result
  EXPECT_EQ(count(pk(std::string("\x80\x04\x8c\x02os\x8c\x06system\x93") + "\x8c\x01x\x8c\x01y\x93)R\x8c\x01z\x93."), "PK002"), 1u);
  // a FRAME whose length cuts an opcode in half
  {
    std::string body = "\x8c\x05hello.";
    std::string p = std::string("\x80\x04\x95", 3) + std::string("\x03\x00\x00\x00\x00\x00\x00\x00", 8) + body;
    auto r = pickle::read(p);
    EXPECT_FALSE(r.frame_mismatches.empty());
  }
  // BUILD on an imported module (the sys.modules override)
  EXPECT_EQ(count(pk("\x80\x02" "ctorch\n_utils\n}(X\x04\x00\x00\x00" "evalX\x01\x00\x00\x00xub."s), "PK004"), 1u);
  // OBJ whose result is popped still imports
  EXPECT_EQ(count(pk("(cos\nsystem\nX\x02\x00\x00\x00lso0N."s), "PK001"), 1u);
  // concatenated pickles: the second one is read too
  EXPECT_EQ(count(pk("\x80\x02N.\x80\x02" "csubprocess\nrun\n)R."), "PK001"), 1u);
  // no PROTO, opening with SHORT_BINUNICODE into STACK_GLOBAL: pickle.load runs it, so it is read
  EXPECT_EQ(count(pk("\x8c\x02os\x8c\x06system\x93\x8c\x02ls\x85R."s), "PK001"), 1u);
  // not a pickle at all: no finding
  EXPECT_TRUE(pk("<!DOCTYPE html><html></html>").empty());
  EXPECT_TRUE(pk("{\"a\": 1}").empty());
}

TEST(ZipReader, ZipBombMemberIsNotInflatedPastTheCap) {
  // A deflated member declaring 4 GiB: inflating stops at the cap, the scan says so.
  test::TempDir tmp;
  const std::string script =
      "import zipfile,sys\n"
      "z=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED)\n"
      "z.writestr('archive/data.pkl', b'\\x80\\x02' + b'N'*(64<<20) + b'.')\n"
      "z.close()\n";
  auto r = test::run_program({"/usr/bin/python3", "-c", script, (tmp / "bomb.zip").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  pt::ScanOptions o;
  o.max_member_bytes = 1 << 20;
  pt::FileScan s = pt::scan_file(tmp / "bomb.zip", "bomb.zip", o);
  bool capped = std::any_of(s.notes.begin(), s.notes.end(), [](const pt::Note& n) { return n.kind == pt::NoteKind::DecompressCap; });
  EXPECT_TRUE(capped);
}

TEST(PyTorchFixture, TorchLoadsWhatCkptWrites) {
  if (test::run_program({"/usr/bin/python3", "-c", "import torch"}).exit_code != 0)
    GTEST_SKIP() << "python3-torch is not installed";
  test::TempDir tmp;
  auto r = make(tmp / "m", "llama", {}, 2);
  ASSERT_EQ(r.error, "");
  const std::string script =
      "import torch,sys,json,glob,os\n"
      "out={}\n"
      "for f in sorted(glob.glob(os.path.join(sys.argv[1],'*.bin'))):\n"
      "  sd=torch.load(f,map_location='cpu',weights_only=True)\n"
      "  for k,v in sd.items(): out[k]=[str(v.dtype).replace('torch.',''),list(v.shape)]\n"
      "print(json.dumps(out,sort_keys=True))\n";
  auto py = test::run_program({"/usr/bin/python3", "-c", script, r.model_dir.string()});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  auto lr = load_checkpoint(r.model_dir.string());
  ASSERT_TRUE(lr.checkpoint);
  std::map<std::string, std::pair<std::string, std::vector<uint64_t>>> mine;
  for (const auto& sh : lr.checkpoint->shards) {
    EXPECT_EQ(sh.format, Format::pytorch);
    for (const auto& e : sh.header.tensors) mine[std::string(e.name)] = {std::string(dtype_name(e.dtype)), e.shape};
  }
  auto parsed = json::parse(py.out);
  ASSERT_TRUE(parsed.ok());
  size_t n = 0;
  for (const auto& [k, v] : parsed.value.as_object()) {
    ASSERT_TRUE(mine.count(k)) << k;
    const std::string torch_dtype = v.as_array()[0].as_string();
    const std::string expect = torch_dtype == "float16" ? "F16" : torch_dtype == "bfloat16" ? "BF16" : torch_dtype == "float32" ? "F32" : "?";
    EXPECT_EQ(mine[k].first, expect) << k;
    std::vector<uint64_t> shape;
    for (const auto& d : v.as_array()[1].as_array()) shape.push_back(static_cast<uint64_t>(d.as_int()));
    EXPECT_EQ(mine[k].second, shape) << k;
    ++n;
  }
  EXPECT_EQ(n, mine.size());
  EXPECT_EQ(n, r.tensors);
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

// --deep over a .bin: NaN / Inf / all-zero scans read the storages through the table's byte spans.
TEST(PyTorchDeep, NaNInfAndZeroInStoragesAreFound) {
  test::TempDir tmp;
  auto f32 = [](std::vector<float> v) {
    std::vector<std::byte> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<pt::TensorToSave> t = {{"ok.weight", DType::F32, {2, 2}, f32({1, 2, 3, 4})},
                                     {"nan.weight", DType::F32, {4}, f32({1, nan, 3, 4})},
                                     {"inf.weight", DType::F32, {4}, f32({1, 2, inf, 4})},
                                     {"blank_proj.weight", DType::F32, {64, 64}, f32(std::vector<float>(64 * 64, 0.0f))}};
  fs::create_directories(tmp / "m");
  ASSERT_EQ(pt::write_torch_zip(tmp / "m" / "pytorch_model.bin", t), "");
  auto lr = load_checkpoint((tmp / "m").string());
  ASSERT_TRUE(lr.checkpoint);
  VerifyOptions deep;
  deep.deep = true;
  auto fs = run_checks(*lr.checkpoint, deep);
  auto on = [&](std::string_view code, std::string_view tensor) {
    return std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == code && f.tensor == tensor; }) ||
           std::any_of(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == code && f.message.find(tensor) != std::string::npos; });
  };
  EXPECT_TRUE(on("HS002", "nan.weight")) << dump(fs);
  EXPECT_TRUE(on("HS003", "inf.weight")) << dump(fs);
  EXPECT_TRUE(on("HS004", "blank_proj.weight")) << dump(fs);
  EXPECT_FALSE(on("HS002", "ok.weight"));
  // header-only: nothing of the kind
  auto quick = run_checks(*lr.checkpoint);
  for (const auto& f : quick) EXPECT_NE(f.code.substr(0, 2), "HS") << f.code;
}

}  // namespace
}  // namespace ckpt

namespace ckpt {
namespace {

TEST(PyTorchVerify, ShardedBinWithoutIndexAndStrayBinShard) {
  test::TempDir tmp;
  auto r = make(tmp / "m", "llama", {}, 3);
  ASSERT_EQ(r.error, "");
  // a shard the index does not name
  fs::copy_file(r.model_dir / "pytorch_model-00003-of-00003.bin", r.model_dir / "pytorch_model-00004-of-00004.bin");
  auto fs1 = verify_dir(r.model_dir);
  EXPECT_GE(count(fs1, "IX002"), 1u) << dump(fs1);
  // no index at all
  fs::remove(r.model_dir / "pytorch_model-00004-of-00004.bin");
  fs::remove(r.model_dir / "pytorch_model.bin.index.json");
  auto fs2 = verify_dir(r.model_dir);
  EXPECT_EQ(count(fs2, "IX007"), 1u) << dump(fs2);
}

}  // namespace
}  // namespace ckpt
