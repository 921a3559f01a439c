// Meta's original layout (consolidated.NN.pth per model-parallel rank + params.json): real
// files written by torch.save (tests/pytorch/meta_oracle.py, skipped without python3-torch)
// are read exactly as torch.load reads them, clean layouts give no PT015-PT021 finding, and
// each planted defect gives exactly its codes; in-code fixtures cover the same without torch.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ckpt/checks.h"
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

std::vector<Finding> verify(const fs::path& d, bool deep = false) {
  auto lr = load_checkpoint(d.string());
  EXPECT_TRUE(lr.checkpoint) << (lr.error ? lr.error->message : "");
  if (!lr.checkpoint) return {};
  VerifyOptions o;
  o.deep = deep;
  return run_checks(*lr.checkpoint, o);
}

std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += "\n  " + f.code + " " + std::string(severity_name(f.severity)) + " " + f.file + ": " + f.message;
  return s;
}

bool meta_code(const std::string& c) {
  if (c.size() != 5 || c.rfind("PT", 0) != 0) return false;
  const int n = std::stoi(c.substr(2));
  return n >= 15 && n <= 21;
}

std::set<std::string> meta_codes(const std::vector<Finding>& fs) {
  std::set<std::string> s;
  for (const auto& f : fs)
    if (meta_code(f.code)) s.insert(f.code);
  return s;
}

TEST(MetaLayout, TorchWrittenRanksAreReadAndJudged) {
  if (!have_torch()) GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 cannot import torch)";
  test::TempDir dir;
  auto r = test::run_program({"/usr/bin/python3", std::string(CKPT_SOURCE_DIR) + "/tests/pytorch/meta_oracle.py", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto parsed = json::parse(test::read_text(dir / "expected.json"));
  ASSERT_TRUE(parsed.ok());
  size_t cases = 0, clean = 0, rank_files = 0;
  for (const auto& [name, want] : parsed.value.as_object()) {
    SCOPED_TRACE(name);
    ++cases;
    const fs::path d = dir / name;
    // ckpt reads every rank as torch.load does.
    auto lr = load_checkpoint(d.string());
    ASSERT_TRUE(lr.checkpoint);
    for (const auto& [file, tensors] : want.find("ranks")->as_object()) {
      ++rank_files;
      const pt::FileScan* scan = nullptr;
      for (const auto& s : lr.checkpoint->pickle_scans)
        if (s.file == file) scan = &s;
      ASSERT_NE(scan, nullptr) << file;
      ASSERT_TRUE(scan->weights_read) << file;
      ASSERT_EQ(scan->tensors.size(), tensors.as_object().size()) << file;
      for (const auto& t : scan->tensors) {
        const json::Value* w = tensors.find(t.name);
        ASSERT_NE(w, nullptr) << file << " " << t.name;
        EXPECT_EQ(t.dtype, w->as_array()[0].as_string()) << t.name;
        std::vector<int64_t> shape;
        for (const auto& x : w->as_array()[1].as_array()) shape.push_back(x.as_int());
        EXPECT_EQ(t.shape, shape) << t.name;
      }
    }
    // The rank files are not one table: no duplicate-name or index findings from them.
    for (const auto& sh : lr.checkpoint->shards) EXPECT_NE(sh.file.rfind("consolidated.", 0), 0u) << sh.file;
    auto fs = run_checks(*lr.checkpoint);
    std::set<std::string> expect;
    for (const auto& c : want.find("defect_codes")->as_array()) expect.insert(c.as_string());
    EXPECT_EQ(meta_codes(fs), expect) << dump(fs);
    if (expect.empty()) {
      ++clean;
      // Nothing wrong with the weights (the directory has no tokenizer: TK001 may warn).
      for (const auto& f : fs)
        if (f.code.rfind("TK", 0) != 0) EXPECT_EQ(f.severity, Severity::info) << f.code << " " << f.message;
    }
  }
  EXPECT_EQ(cases, 16u);
  EXPECT_EQ(clean, 4u);
  EXPECT_GT(rank_files, 30u);
}

// The same rules on ranks ckpt writes itself (no Python needed).
std::vector<pt::TensorToSave> rank_tensors(int mp, int64_t dim = 32, int64_t layers = 1) {
  const int64_t heads = 4, kv = 2, hd = dim / heads, vocab = 16;
  int64_t h = static_cast<int64_t>(2.0 * static_cast<double>(4 * dim) / 3.0);
  h = 16 * ((h + 15) / 16);  // multiple_of 16, no ffn_dim_multiplier
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  std::vector<pt::TensorToSave> t;
  t.push_back({"tok_embeddings.weight", DType::BF16, {u(vocab), u(dim / mp)}, {}});
  for (int64_t i = 0; i < layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    t.push_back({p + "attention.wq.weight", DType::BF16, {u(heads * hd / mp), u(dim)}, {}});
    t.push_back({p + "attention.wk.weight", DType::BF16, {u(kv * hd / mp), u(dim)}, {}});
    t.push_back({p + "attention.wv.weight", DType::BF16, {u(kv * hd / mp), u(dim)}, {}});
    t.push_back({p + "attention.wo.weight", DType::BF16, {u(dim), u(heads * hd / mp)}, {}});
    t.push_back({p + "feed_forward.w1.weight", DType::BF16, {u(h / mp), u(dim)}, {}});
    t.push_back({p + "feed_forward.w2.weight", DType::BF16, {u(dim), u(h / mp)}, {}});
    t.push_back({p + "feed_forward.w3.weight", DType::BF16, {u(h / mp), u(dim)}, {}});
    t.push_back({p + "attention_norm.weight", DType::BF16, {u(dim)}, {}});
    t.push_back({p + "ffn_norm.weight", DType::BF16, {u(dim)}, {}});
  }
  t.push_back({"norm.weight", DType::BF16, {u(dim)}, {}});
  t.push_back({"output.weight", DType::BF16, {u(vocab / mp), u(dim)}, {}});
  return t;
}

void write_layout(const fs::path& d, int mp, const std::string& params, std::vector<int> ranks = {}) {
  fs::create_directories(d);
  if (ranks.empty())
    for (int r = 0; r < mp; ++r) ranks.push_back(r);
  for (int r : ranks) {
    char name[32];
    std::snprintf(name, sizeof name, "consolidated.%02d.pth", r);
    ASSERT_EQ(pt::write_torch_zip(d / name, rank_tensors(mp)), "");
  }
  if (!params.empty()) test::write_text(d / "params.json", params);
}

const char* kParams = R"({"dim": 32, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 16, "multiple_of": 16, "norm_eps": 1e-05})";

TEST(MetaLayout, InCodeRanks) {
  test::TempDir tmp;
  write_layout(tmp / "clean", 2, kParams);
  auto fs = verify(tmp / "clean");
  EXPECT_TRUE(meta_codes(fs).empty()) << dump(fs);
  // --deep scans the ranks too (zero-filled bf16 weights are all zero: HS004 names them)
  auto deep = verify(tmp / "clean", true);
  EXPECT_TRUE(std::any_of(deep.begin(), deep.end(), [](const Finding& f) {
    return f.code == "HS004" && f.file.rfind("consolidated.", 0) == 0;
  })) << dump(deep);

  write_layout(tmp / "gap", 4, kParams, {0, 1, 3});
  EXPECT_EQ(meta_codes(verify(tmp / "gap")), std::set<std::string>{"PT015"});

  write_layout(tmp / "stray", 2, kParams);
  fs::copy_file(tmp / "stray" / "consolidated.01.pth", tmp / "stray" / "backup.pth");
  auto st = verify(tmp / "stray");
  EXPECT_EQ(meta_codes(st), std::set<std::string>{"PT015"}) << dump(st);

  write_layout(tmp / "noparams", 2, "");
  EXPECT_EQ(meta_codes(verify(tmp / "noparams")), std::set<std::string>{"PT016"});

  // params.json that does not parse: FS011 only (PT016 does not repeat it)
  write_layout(tmp / "badjson", 2, "{\"dim\": 32,");
  auto bj = verify(tmp / "badjson");
  EXPECT_TRUE(meta_codes(bj).empty()) << dump(bj);
  EXPECT_TRUE(std::any_of(bj.begin(), bj.end(), [](const Finding& f) { return f.code == "FS011"; })) << dump(bj);

  // Meta's files in a subdirectory (Hugging Face repos of Meta models keep them in original/)
  write_layout(tmp / "hf" / "original", 2, kParams);
  auto hf = verify(tmp / "hf");
  EXPECT_TRUE(meta_codes(hf).empty()) << dump(hf);
  test::write_text(tmp / "hf" / "original" / "params.json", "{\"dim\": 32,");
  auto hfbad = verify(tmp / "hf");
  EXPECT_EQ(meta_codes(hfbad), std::set<std::string>{"PT016"}) << dump(hfbad);
  fs::remove(tmp / "hf" / "original" / "consolidated.01.pth");
  fs::remove(tmp / "hf" / "original" / "params.json");
  auto hfgone = verify(tmp / "hf");
  EXPECT_EQ(meta_codes(hfgone), (std::set<std::string>{"PT016"})) << dump(hfgone);  // one rank alone is a complete MP=1 set

  // an MP=2 split read with params of twice the width: every split tensor merges short
  write_layout(tmp / "wide", 2, R"({"dim": 64, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 16, "multiple_of": 16})");
  auto wide = verify(tmp / "wide");
  EXPECT_EQ(meta_codes(wide), std::set<std::string>{"PT019"}) << dump(wide);
}

}  // namespace
}  // namespace ckpt
