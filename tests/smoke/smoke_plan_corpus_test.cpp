// The smoke pass's model plan on every real config of a supported family in the corpus
// (../shared/corpus/configs): a header-only stand-in with the tensors the registry plans for
// the config (and its quantization) must give a plan, and its hyperparameters must be what
// tests/smoke/config_oracle.py (a Python reading of the config.json with transformers' config
// defaults, written apart from src/smoke/plan.cpp) says the family's modelling code uses.
// Skipped without the corpus or /usr/bin/python3.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "ckpt/arch.h"
#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "ckpt/safetensors.h"
#include "smoke/internal.h"
#include "smoke_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt;

namespace {

using test::smoke_support::kPython;

// The registry's required tensors for the config, as a sparse safetensors file beside it.
bool write_standin(const fs::path& config, const fs::path& dir, std::string& why) {
  auto parsed = json::parse(test::read_text(config));
  if (!parsed.ok()) {
    why = "config.json does not parse";
    return false;
  }
  const arch::ConfigView view = arch::resolve_config(parsed.value);
  if (!view.arch) {
    why = "not in the registry";
    return false;
  }
  auto scheme = quant::parse_scheme(parsed.value);
  std::vector<st::TensorToWrite> tensors;
  for (const auto& x : arch::expected_tensors(view, scheme ? &*scheme : nullptr)) {
    if (x.presence != arch::Presence::Required || x.tower || x.mtp) continue;
    tensors.push_back({std::string(x.name), arch::resolve_dtype(x.dtype, view.model_dtype),
                       std::vector<uint64_t>(x.shape.begin(), x.shape.end()), {}});
  }
  fs::create_directories(dir);
  fs::copy_file(config, dir / "config.json");
  why = st::write_file(dir / "model.safetensors", std::move(tensors));
  return why.empty();
}

double num(const json::Value& o, const char* k) {
  const json::Value* v = o.find(k);
  return v && v->is_number() ? v->as_double() : NAN;
}
bool flag(const json::Value& o, const char* k) {
  const json::Value* v = o.find(k);
  return v && v->is_bool() && v->as_bool();
}
std::vector<bool> flags(const json::Value& o, const char* k) {
  std::vector<bool> out;
  if (const json::Value* v = o.find(k); v && v->is_array())
    for (const auto& b : v->as_array()) out.push_back(b.is_bool() && b.as_bool());
  return out;
}

TEST(SmokePlanCorpus, EveryRealConfigOfASupportedFamilyPlansAsTransformersReadsIt) {
  const fs::path corpus = fs::path(CKPT_CORPUS_DIR) / "configs";
  if (!fs::is_directory(corpus)) GTEST_SKIP() << "skipped: " << corpus << " is absent";
  if (!fs::exists(kPython)) GTEST_SKIP() << "skipped: /usr/bin/python3 is absent";
  std::vector<std::string> argv = {kPython, std::string(CKPT_SOURCE_DIR) + "/tests/smoke/config_oracle.py"};
  std::vector<fs::path> configs;
  for (const auto& e : fs::directory_iterator(corpus))
    if (fs::exists(e.path() / "config.json")) configs.push_back(e.path() / "config.json");
  std::sort(configs.begin(), configs.end());
  for (const auto& c : configs) argv.push_back(c.string());
  const auto oracle = test::run_program(argv);
  ASSERT_EQ(oracle.exit_code, 0) << oracle.err;

  size_t planned = 0;
  std::string seen;
  std::istringstream lines(oracle.out);
  for (std::string line; std::getline(lines, line);) {
    auto parsed = json::parse(line);
    ASSERT_TRUE(parsed.ok()) << line;
    const json::Value& want = parsed.value;
    const json::Value* fam = want.find("family");
    if (!fam || !fam->is_string()) continue;  // not a smoke family
    const fs::path config = *want.get_string("config");
    const std::string name = config.parent_path().filename().string();
    SCOPED_TRACE(name);
    test::TempDir tmp;
    std::string why;
    ASSERT_TRUE(write_standin(config, tmp / "m", why)) << why;
    auto loaded = load_checkpoint((tmp / "m").string());
    ASSERT_TRUE(loaded.checkpoint.has_value());
    smoke::Plan plan;
    FindingSink sink;
    ASSERT_TRUE(smoke::make_plan(*loaded.checkpoint, plan, sink))
        << (sink.findings().empty() ? std::string() : sink.findings().front().message);
    const smoke::Hyper& hp = plan.hp;
    EXPECT_EQ(hp.family, fam->as_string());
    EXPECT_EQ(hp.H, num(want, "H"));
    EXPECT_EQ(hp.L, num(want, "L"));
    EXPECT_EQ(hp.nh, num(want, "nh"));
    EXPECT_EQ(hp.nkv, num(want, "nkv"));
    EXPECT_EQ(hp.hd, num(want, "hd"));
    EXPECT_EQ(hp.I, num(want, "I"));
    EXPECT_EQ(hp.V, num(want, "V"));
    EXPECT_DOUBLE_EQ(hp.eps, num(want, "eps"));
    EXPECT_EQ(hp.act == smoke::Act::gelu_tanh ? "gelu_tanh" : "silu", *want.get_string("act"));
    EXPECT_EQ(hp.norm_plus_one, flag(want, "norm_plus_one"));
    EXPECT_EQ(hp.embed_scale, flag(want, "embed_scale"));
    EXPECT_EQ(hp.sandwich_norms, flag(want, "sandwich_norms"));
    EXPECT_EQ(hp.qk_norm, flag(want, "qk_norm"));
    EXPECT_EQ(hp.fused_qkv, flag(want, "fused"));
    EXPECT_NEAR(hp.attn_scale, num(want, "attn_scale"), 1e-12);
    EXPECT_DOUBLE_EQ(hp.attn_softcap, num(want, "attn_softcap"));
    EXPECT_DOUBLE_EQ(hp.final_softcap, num(want, "final_softcap"));
    EXPECT_EQ(hp.sliding, flags(want, "sliding"));
    if (num(want, "sliding_window") > 0) EXPECT_EQ(hp.sliding_window, num(want, "sliding_window"));
    EXPECT_DOUBLE_EQ(hp.rope.theta, num(want, "theta"));
    EXPECT_EQ(hp.rope.rot_dim, num(want, "rot_dim"));
    EXPECT_EQ(hp.rope.scaling, *want.get_string("scaling"));
    if (!std::isnan(num(want, "factor"))) EXPECT_DOUBLE_EQ(hp.rope.factor, num(want, "factor"));
    EXPECT_DOUBLE_EQ(hp.rope_local.theta, num(want, "local_theta"));
    EXPECT_EQ(hp.tied, flag(want, "tied"));
    if (want.find("experts")) {
      EXPECT_EQ(hp.n_experts, num(want, "experts"));
      EXPECT_EQ(hp.top_k, num(want, "top_k"));
      EXPECT_EQ(hp.moe_I, num(want, "moe_I"));
      EXPECT_EQ(hp.norm_topk, flag(want, "norm_topk"));
      EXPECT_EQ(hp.moe_layer, flags(want, "moe_layer"));
    }
    ++planned;
    seen += " " + name;
  }
  // llama x6, mistral, qwen2 x3, qwen3 x2, phi3 x2, gemma, gemma2, gemma3 x2, mixtral x2 in the corpus today
  EXPECT_GE(planned, 19u) << seen;
  std::printf("smoke plan agrees with config_oracle.py on %zu real configs:%s\n", planned, seen.c_str());
}

}  // namespace
