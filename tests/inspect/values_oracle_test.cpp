// `ckpt diff --deep` by value, against an independent numpy implementation
// (tests/inspect/values_oracle.py: its own dequantizers and GGUF reader, written from
// specs/quantization-layouts.md and specs/gguf.md): a float fixture against each quantized
// export (MLX affine 4/8, compressed-tensors int4, GPTQ v1, FP8 block; AWQ gemm and GPTQ v2 with
// act-order written by numpy), and GGUF files of every decoded block type. The weights compared,
// their metrics (relative L2, cosine, max |B-A|) and the ones not compared must all agree.
#include <gtest/gtest.h>

#include "standin.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

bool python_numpy() {
  static const bool ok = [] {
    if (!fs::exists("/usr/bin/python3")) return false;
    return run_program({"/usr/bin/python3", "-c", "import numpy"}).exit_code == 0;
  }();
  return ok;
}

std::string oracle() { return std::string(CKPT_SOURCE_DIR) + "/tests/inspect/values_oracle.py"; }

void expect_oracle_agrees(const fs::path& a, const fs::path& b, const std::string& what) {
  auto r = run_program({"/usr/bin/python3", oracle(), "compare", CKPT_CLI_PATH, a.string(), b.string()});
  EXPECT_EQ(r.exit_code, 0) << what << "\n" << r.out << r.err;
  EXPECT_EQ(r.out.rfind("ok ", 0), 0u) << what << "\n" << r.out;
  EXPECT_EQ(r.out.find("ok 0 weights"), std::string::npos) << what << ": nothing was compared\n" << r.out;
}

void make_fixture(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"fixture"};
  a.insert(a.end(), args.begin(), args.end());
  auto r = run_ckpt(a);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(DiffValuesOracle, FloatAgainstEachQuantizedExport) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir tmp;
  for (const char* arch : {"llama", "qwen3_moe"}) {
    const fs::path base = tmp / (std::string(arch) + "-float");
    make_fixture({arch, base.string()});
    for (const char* q : {"mlx4", "mlx8", "ct-int4", "gptq4", "fp8"}) {
      const fs::path out = tmp / (std::string(arch) + "-" + q);
      make_fixture({arch, out.string(), "--quant", q});
      expect_oracle_agrees(base, out, std::string(arch) + " float vs " + q);
    }
  }
}

TEST(DiffValuesOracle, AwqAndGptqV2ActOrderWrittenByNumpy) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir tmp;
  const fs::path base = tmp / "qwen2";
  make_fixture({"qwen2", base.string()});
  for (const char* kind : {"make-awq", "make-gptq-v2"}) {
    const fs::path out = tmp / kind;
    auto w = run_program({"/usr/bin/python3", oracle(), kind, base.string(), out.string()});
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
    expect_oracle_agrees(base, out, kind);
  }
}

// mlx-lm stacks experts (switch_mlp.* [E, O, I]); the float model has them one by one. Each
// expert is compared with its slice, both ways round.
TEST(DiffValuesOracle, PerExpertAgainstStackedMlxExperts) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir tmp;
  const fs::path base = tmp / "float", mlx = tmp / "mlx4", stacked = tmp / "stacked";
  make_fixture({"qwen3_moe", base.string()});
  make_fixture({"qwen3_moe", mlx.string(), "--quant", "mlx4"});
  auto w = run_program({"/usr/bin/python3", oracle(), "make-stacked", mlx.string(), stacked.string()});
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  expect_oracle_agrees(base, stacked, "float vs stacked MLX experts");
  expect_oracle_agrees(stacked, base, "stacked MLX experts vs float");
  auto r = run_ckpt({"diff", base.string(), stacked.string(), "--deep", "--quiet"});
  EXPECT_NE(r.out.find("(expert 1 of model.layers.0.mlp.switch_mlp.gate_proj.weight)"), std::string::npos) << r.out;
}

TEST(DiffValuesOracle, GgufBlockTypes) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir tmp;
  const fs::path base = tmp / "f32";
  make_fixture({"llama", base.string(), "--format", "gguf", "--quant", "f32"});
  for (const char* q : {"f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q2_k"}) {
    const fs::path out = tmp / q;
    make_fixture({"llama", out.string(), "--format", "gguf", "--quant", q});
    expect_oracle_agrees(base, out, std::string("GGUF f32 vs ") + q);
  }
}

// The GGUF fixture quantizes the f32 fixture's values (round to nearest per block), so the
// error each type leaves is what its bits allow: the worst weight stays under a bound per type.
TEST(DiffValues, GgufFixtureQuantizationErrorIsBoundedByTheType) {
  TempDir tmp;
  make_fixture({"llama", (tmp / "f32").string(), "--format", "gguf", "--quant", "f32"});
  const std::vector<std::pair<std::string, double>> bounds = {
      {"f16", 1e-3}, {"q8_0", 0.01}, {"q6_k", 0.03}, {"q5_0", 0.05}, {"q5_1", 0.05}, {"q5_k", 0.05},
      {"q4_0", 0.1}, {"q4_1", 0.1}, {"q4_k", 0.1}};
  for (const auto& [q, bound] : bounds) {
    make_fixture({"llama", (tmp / q).string(), "--format", "gguf", "--quant", q});
    auto r = run_ckpt({"diff", (tmp / "f32").string(), (tmp / q).string(), "--deep", "--format", "json"});
    ASSERT_EQ(r.exit_code, 1) << r.err;
    const json::Value j = parse_json_text(r.out);
    const json::Value* v = j.find("values");
    ASSERT_TRUE(v && v->find("differ") && v->find("differ")->is_array()) << r.out;
    const auto& differ = v->find("differ")->as_array();
    ASSERT_FALSE(differ.empty()) << q;
    const double worst = differ.front().find("rel_l2")->as_double();
    EXPECT_LT(worst, bound) << q;
    EXPECT_GT(worst, 0.0) << q;
    for (const auto& e : differ) EXPECT_GT(e.find("cosine")->as_double(), 0.99) << q << " " << e.get_string("name").value_or("");
  }
}

// ckpt inspect on a GGUF: parameters and bytes from the tensor infos, the KV cache from the
// metadata, as the numpy reader computes them (f16 K and V per layer, the context padded to 256).
TEST(InspectGguf, ParametersBytesAndKvMatchAnIndependentReader) {
  if (!python_numpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy not available";
  TempDir tmp;
  for (const char* q : {"f16", "q4_k", "q8_0"}) {
    const fs::path dir = tmp / q;
    make_fixture({"llama", dir.string(), "--format", "gguf", "--quant", q});
    fs::path file;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".gguf") file = e.path();
    auto facts_run = run_program({"/usr/bin/python3", oracle(), "gguf-facts", file.string()});
    ASSERT_EQ(facts_run.exit_code, 0) << facts_run.out << facts_run.err;
    const json::Value facts = parse_json_text(facts_run.out);
    // llama.cpp pads the context to a multiple of 256 cells: 1000 is sized as 1024
    auto r = run_ckpt({"inspect", dir.string(), "--format", "json", "--context", "1000"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const json::Value j = parse_json_text(r.out);
    const json::Value* p = j.find("parameters");
    const json::Value* b = j.find("bytes");
    const json::Value* kv = j.find("kv_cache");
    ASSERT_TRUE(p && b && kv) << r.out;
    EXPECT_EQ(p->get_int("total"), facts.get_int("params")) << q;
    EXPECT_EQ(b->get_int("tensor_data"), facts.get_int("tensor_bytes")) << q;
    EXPECT_EQ(kv->get_int("bytes_per_token"), facts.get_int("kv_bytes_per_token")) << q;
    EXPECT_EQ(kv->get_int("bytes"), *facts.get_int("kv_bytes_per_token") * 1024) << q;
    const json::Value* model = j.find("model");
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->get_int("layers"), facts.get_int("layers"));
    if (std::string(q) != "f16") {
      const json::Value* qz = j.find("quantization");
      ASSERT_NE(qz, nullptr);
      EXPECT_EQ(qz->get_string("method").value_or(""), "gguf") << r.out;
    }
  }
}

// The report a person reads: the worst weights first, each with both encodings, exit 1.
TEST(DiffValues, TextReportNamesTheEncodings) {
  TempDir tmp;
  make_fixture({"llama", (tmp / "a").string()});
  make_fixture({"llama", (tmp / "b").string(), "--quant", "mlx4"});
  auto r = run_ckpt({"diff", (tmp / "a").string(), (tmp / "b").string(), "--deep", "--quiet"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("values (--deep, quantized weights dequantized)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("F16 -> MLX affine 4-bit g64"), std::string::npos) << r.out;
  // header-only without --deep: no values section
  auto h = run_ckpt({"diff", (tmp / "a").string(), (tmp / "b").string()});
  EXPECT_EQ(h.out.find("values ("), std::string::npos) << h.out;
  auto j = parse_json_text(run_ckpt({"diff", (tmp / "a").string(), (tmp / "b").string(), "--format", "json"}).out);
  ASSERT_NE(j.find("values"), nullptr);
  EXPECT_TRUE(j.find("values")->is_null());
}

// Pickled tensors are read in place (contiguous little-endian storages): two seeds compared as
// .bin give exactly the figures the same two seeds give as safetensors.
TEST(DiffValues, PickledTensorsMatchTheirSafetensorsTwins) {
  TempDir tmp;
  for (const char* fmt : {"safetensors", "pytorch"})
    for (const char* seed : {"0", "3"})
      make_fixture({"llama", (tmp / (std::string(fmt) + seed)).string(), "--format", fmt, "--seed", seed});
  auto values = [&](const char* fmt) {
    auto r = run_ckpt({"diff", (tmp / (std::string(fmt) + "0")).string(), (tmp / (std::string(fmt) + "3")).string(), "--deep",
                       "--format", "json"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    return parse_json_text(r.out);
  };
  const json::Value st = values("safetensors"), pt = values("pytorch");
  const json::Value* a = st.find("values");
  const json::Value* b = pt.find("values");
  ASSERT_TRUE(a && b && a->find("differ") && b->find("differ"));
  EXPECT_GT(a->get_int("differ_count").value_or(0), 10);
  EXPECT_EQ(a->get_int("differ_count"), b->get_int("differ_count"));
  const auto& da = a->find("differ")->as_array();
  const auto& db = b->find("differ")->as_array();
  ASSERT_EQ(da.size(), db.size());
  for (size_t i = 0; i < da.size(); ++i) {
    EXPECT_EQ(da[i].get_string("name"), db[i].get_string("name"));
    EXPECT_EQ(da[i].find("rel_l2")->dump(), db[i].find("rel_l2")->dump());
    EXPECT_EQ(da[i].find("max_abs_diff")->dump(), db[i].find("max_abs_diff")->dump());
  }
}

// Same weights, another container dtype: values equal, nothing listed as differing.
TEST(DiffValues, ExactRetypeIsEqual) {
  TempDir tmp;
  make_fixture({"llama", (tmp / "a").string(), "--format", "gguf", "--quant", "f16"});
  fs::create_directories(tmp / "b");
  fs::copy(tmp / "a", tmp / "b", fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto j = parse_json_text(run_ckpt({"diff", (tmp / "a").string(), (tmp / "b").string(), "--deep", "--format", "json"}).out);
  const json::Value* v = j.find("values");
  ASSERT_NE(v, nullptr);
  // identical files: nothing needs decoding
  EXPECT_EQ(v->get_int("differ_count").value_or(-1), 0);
}

}  // namespace
}  // namespace ckpt::test
