// ckpt smoke against an independent implementation: tiny models of every supported family are
// trained with python3-torch (tools/smoke/train_tiny.py, cached by ensure_model.py), then
//  - the clean model must be judged ok, and its logits, per-stage hidden-state RMS and
//    perplexity must agree with tests/smoke/torch_forward.py (a float32 torch forward pass
//    written from the families' published definitions) within the tolerances below;
//  - each planted numeric defect (tools/smoke/plant_defect.py) must turn the verdict suspect
//    or garbage and name the layer it was planted in.
// Without /usr/bin/python3 and torch, sentencepiece and regex the tests say skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "ckpt/smoke.h"
#include "format/float_decode.h"
#include "smoke_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt;

namespace {

using namespace test::smoke_support;

std::vector<uint32_t> ids_of(const fs::path& model) { return smoke_ids_of(model); }

smoke::Result smoke_of(const fs::path& model, std::vector<float>* logits = nullptr) {
  auto loaded = load_checkpoint(model.string());
  EXPECT_FALSE(loaded.error) << (loaded.error ? loaded.error->message : "");
  if (loaded.error) return {};
  smoke::Options o;
  o.threads = 2;
  o.max_tokens = 0;  // the whole text: every position the tiny model was trained on
  return smoke::run_tokens(*loaded.checkpoint, ids_of(model), o, logits);
}

std::string describe(const smoke::Result& r) {
  std::string s = std::string(smoke::verdict_name(r.verdict)) + " ppl " + std::to_string(r.perplexity) + " located " +
                  std::to_string(r.located_layer) + " first_broken '" + r.first_broken + "'";
  for (const auto& f : r.findings) s += "\n  " + f.code + ": " + f.message;
  return s;
}

const std::vector<std::string> kFamilies = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma",
                                            "gemma2", "gemma3", "mixtral", "qwen3_moe"};

class SmokeFamily : public ::testing::TestWithParam<std::string> {};

// ckpt's figures for `model` against torch_forward.py run on `torch_model` (the same weights in
// float, for a quantized model its dequantized copy), over the model's own smoke ids.
void expect_agrees_with_torch(const fs::path& model, const fs::path& torch_model, const smoke::Result& r,
                              const std::vector<float>& logits) {
  test::TempDir tmp;
  auto ref = test::run_program({kPython, source("tests/smoke/torch_forward.py"), torch_model.string(), "--tokens",
                                (model / "smoke_tokens.json").string(), "--out", (tmp / "torch.json").string()});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  auto parsed = json::parse(test::read_text(tmp / "torch.json"));
  ASSERT_TRUE(parsed.ok());
  const json::Value& t = parsed.value;
  const auto& rows = t.find("logits")->as_array();
  const size_t T = r.tokens.size();
  ASSERT_EQ(rows.size(), T);
  const size_t V = rows[0].as_array().size();
  ASSERT_EQ(logits.size(), T * V);
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < T; ++i)
    for (size_t j = 0; j < V; ++j) {
      const double d = std::fabs(double(logits[i * V + j]) - rows[i].as_array()[j].as_double());
      if (d > worst) worst = d, worst_at = i * V + j;
    }
  EXPECT_LE(worst, kLogitTolerance) << "position " << worst_at / V << " token " << worst_at % V;
  EXPECT_NEAR(std::log(r.perplexity), t.find("nll_mean")->as_double(), kNllTolerance);
  const auto& rms = t.find("hidden_rms")->as_array();
  // torch reports the hidden state after each decoder layer; ckpt's stages are embed, each layer, final norm.
  ASSERT_EQ(rms.size() + 2, r.layers.size());
  for (size_t i = 0; i < rms.size(); ++i)
    EXPECT_NEAR(r.layers[i + 1].rms, rms[i].as_double(), kRmsRelTolerance * rms[i].as_double()) << r.layers[i + 1].name;
  const double top1 = t.find("top1_accuracy")->as_double();
  EXPECT_NEAR(r.top1_accuracy, top1, 2.0 / double(T)) << "at most a near-tie flipped";
}

TEST_P(SmokeFamily, CleanModelIsOkAndAgreesWithTorch) {
  REQUIRE_TORCH();
  const fs::path model = trained(GetParam());
  ASSERT_TRUE(fs::exists(model / "model.safetensors"));
  std::vector<float> logits;
  smoke::Result r = smoke_of(model, &logits);
  EXPECT_EQ(r.verdict, smoke::Verdict::ok) << describe(r);
  EXPECT_LT(r.perplexity, 2.0) << describe(r);
  EXPECT_EQ(r.family, GetParam() == "gemma3" ? "gemma3_text" : GetParam());
  expect_agrees_with_torch(model, model, r, logits);
}

// What a user runs: `ckpt smoke MODEL` with no ids. The built-in text, encoded by ckpt's own
// encoder (src/encode) from the model's tokenizer files, must give exactly the ids the training
// script encoded (tools/smoke/bpe.py, python3-sentencepiece), so the baseline is compared, and
// the verdict is the same.
TEST_P(SmokeFamily, BuiltInTextEncodesAsTheTrainingScriptAndIsOk) {
  REQUIRE_TORCH();
  const fs::path model = trained(GetParam());
  auto loaded = load_checkpoint(model.string());
  ASSERT_FALSE(loaded.error);
  smoke::Options o;
  o.threads = 2;
  o.max_tokens = 0;
  smoke::Result r = smoke::run(*loaded.checkpoint, "", o);
  EXPECT_EQ(r.tokens, ids_of(model)) << describe(r);
  EXPECT_FALSE(r.tokenizer.empty());
  EXPECT_EQ(r.verdict, smoke::Verdict::ok) << describe(r);
  EXPECT_FALSE(r.baseline_file.empty()) << describe(r);
  for (const auto& f : r.findings) EXPECT_NE(f.code, "SM008") << f.message;
}

INSTANTIATE_TEST_SUITE_P(Families, SmokeFamily, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return info.param; });

// A planted defect: the family, the defect, the layer it is planted in (-1: every tensor).
struct Planted {
  std::string family, defect;
  int layer;
  std::string dtype = "bf16";
};

std::vector<Planted> planted_cases() {
  std::vector<Planted> out;
  for (const auto& f : kFamilies) {
    for (int layer : {0, 1, 2}) {
      out.push_back({f, "transpose-square", layer});
      out.push_back({f, "swap-gate-up", layer});
      out.push_back({f, "norm-convention", layer});
      if (f == "mixtral" || f == "qwen3_moe") out.push_back({f, "expert-wrong-axis", layer});
    }
    out.push_back({f, "bf16-as-f16", -1});
    out.push_back({f, "bf16-as-f16", 1});
  }
  out.push_back({"llama", "f16-as-bf16", -1, "f16"});
  out.push_back({"gemma2", "f16-as-bf16", 1, "f16"});
  return out;
}

class SmokeDefect : public ::testing::TestWithParam<Planted> {};

TEST_P(SmokeDefect, IsNotOkAndNamesTheLayer) {
  REQUIRE_TORCH();
  const Planted& p = GetParam();
  const fs::path clean = trained(p.family, p.dtype);
  test::TempDir tmp;
  std::vector<std::string> argv = {kPython, source("tools/smoke/plant_defect.py"), clean.string(), (tmp / "m").string(), p.defect};
  if (p.layer >= 0) argv.insert(argv.end(), {"--layer", std::to_string(p.layer)});
  auto planted = test::run_program(argv);
  ASSERT_EQ(planted.exit_code, 0) << planted.err;
  // Every shape and dtype still checks out: the header checks find no error.
  auto loaded = load_checkpoint((tmp / "m").string());
  ASSERT_FALSE(loaded.error);
  for (const auto& f : run_checks(*loaded.checkpoint)) EXPECT_NE(f.severity, Severity::error) << f.code << " " << f.message;
  smoke::Result r = smoke_of(tmp / "m");
  EXPECT_NE(r.verdict, smoke::Verdict::ok) << describe(r);
  EXPECT_NE(r.verdict, smoke::Verdict::not_run) << describe(r);
  if (p.layer >= 0) EXPECT_EQ(r.first_broken_layer, p.layer) << describe(r);
}

INSTANTIATE_TEST_SUITE_P(Planted, SmokeDefect, ::testing::ValuesIn(planted_cases()), [](const auto& info) {
  std::string n = info.param.family + "_" + info.param.defect + "_" + info.param.dtype + "_" +
                  (info.param.layer < 0 ? std::string("all") : "layer" + std::to_string(info.param.layer));
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// Quantized exports: tools/smoke/quantize.py (an independent Python quantizer written from the
// layout facts) writes the trained model in MLX affine or GPTQ form and a baseline computed by torch on
// the weights it dequantized. ckpt must read the same numbers (logits against torch on that
// float copy), judge the clean export ok, and name the layer whose scales were shifted by one
// group (tools/smoke/plant_defect.py scales-shifted).
struct Quantized {
  std::string family, scheme;
};

class SmokeQuantized : public ::testing::TestWithParam<Quantized> {};

TEST_P(SmokeQuantized, CleanAgreesWithTorchAndShiftedScalesNameTheLayer) {
  REQUIRE_TORCH();
  const Quantized& q = GetParam();
  const fs::path clean = trained(q.family);
  test::TempDir tmp;
  const fs::path model = tmp / "q", dequantized = tmp / "float";
  auto made = test::run_program({kPython, source("tools/smoke/quantize.py"), clean.string(), model.string(), "--scheme",
                                 q.scheme, "--float-copy", dequantized.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // The export is what the real exporter writes: the header checks (ckpt verify's QZ family
  // among them) find no error, and every quantized module is dequantized, none skipped.
  {
    auto loaded = load_checkpoint(model.string());
    ASSERT_FALSE(loaded.error) << loaded.error->message;
    for (const auto& f : run_checks(*loaded.checkpoint)) EXPECT_NE(f.severity, Severity::error) << f.code << " " << f.message;
  }
  std::vector<float> logits;
  smoke::Result r = smoke_of(model, &logits);
  EXPECT_EQ(r.verdict, smoke::Verdict::ok) << describe(r);
  ASSERT_FALSE(r.baseline_file.empty()) << describe(r);
  EXPECT_NEAR(std::log(r.perplexity), std::log(r.baseline_perplexity), kNllTolerance);
  expect_agrees_with_torch(model, dequantized, r, logits);
  for (int layer : {0, 1, 2}) {
    const fs::path broken = tmp / ("shifted-" + std::to_string(layer));
    auto planted = test::run_program({kPython, source("tools/smoke/plant_defect.py"), model.string(), broken.string(),
                                      "scales-shifted", "--layer", std::to_string(layer)});
    ASSERT_EQ(planted.exit_code, 0) << planted.err;
    smoke::Result b = smoke_of(broken);
    EXPECT_NE(b.verdict, smoke::Verdict::ok) << "layer " << layer << ": " << describe(b);
    EXPECT_NE(b.verdict, smoke::Verdict::not_run) << describe(b);
    EXPECT_EQ(b.first_broken_layer, layer) << describe(b);
  }
}

std::vector<Quantized> quantized_cases() {
  std::vector<Quantized> out;
  for (const auto& f : kFamilies) out.push_back({f, "mlx4"});
  out.push_back({"llama", "mlx8"});
  out.push_back({"qwen3_moe", "mlx8"});
  for (const char* scheme : {"gptq4", "awq4", "ct-pack4", "fp8-block"})
    for (const char* f : {"llama", "qwen3", "qwen3_moe"}) out.push_back({f, scheme});
  for (const char* scheme : {"awq4", "ct-pack4", "fp8-block"})
    for (const char* f : {"mixtral", "phi3"}) out.push_back({f, scheme});  // phi3: fused qkv_proj, gate_up_proj
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schemes, SmokeQuantized, ::testing::ValuesIn(quantized_cases()),
                         [](const auto& info) {
                           std::string n = info.param.family + "_" + info.param.scheme;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// The FP8 E4M3 encoder of tools/smoke/quantize.py (tools/smoke/e4m3.py, numpy) checks itself
// against a table of the 256 codes read from the format definition; that table must also be
// what ckpt's decoder (format/float_decode.h, used by every FP8 reader) gives, code by code.
TEST(SmokeE4m3, TableFromTheDefinitionIsCkptsDecoder) {
  REQUIRE_TORCH();
  test::TempDir tmp;
  auto r = test::run_program({kPython, source("tools/smoke/e4m3.py"), "--table", (tmp / "e4m3.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto parsed = json::parse(test::read_text(tmp / "e4m3.json"));
  ASSERT_TRUE(parsed.ok());
  const auto& values = parsed.value.as_array();
  ASSERT_EQ(values.size(), 256u);
  for (unsigned code = 0; code < 256; ++code) {
    const float mine = floats::from_e4m3(uint8_t(code));
    if (values[code].is_null()) {
      EXPECT_TRUE(std::isnan(mine)) << "code " << code;
    } else {
      EXPECT_EQ(mine, float(values[code].as_double())) << "code " << code;
      EXPECT_EQ(std::signbit(mine), code >= 0x80) << "code " << code;
    }
  }
}

}  // namespace
