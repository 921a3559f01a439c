// Clean, sparse, header-only stand-ins of the real layouts in corpus/configs must verify
// without a single CF/AR/QZ error: the real config.json, the real index's tensor names (one
// sparse shard), shapes from the registry (validated against each index's total_size by
// tests/arch/corpus_index_test.cpp). Config-only folders get the registry's own plan.
#include <set>

#include "helpers.h"

namespace ckpt::test {
namespace {

std::string slurp(const std::filesystem::path& p) { return read_text(p); }

std::vector<T> standin_tensors(const std::string& dir) {
  auto root = corpus_dir() / "configs" / dir;
  std::string cfg_text = slurp(root / "config.json");
  json::Value cfg = parse_json(cfg_text);
  std::vector<T> out;
  if (!std::filesystem::exists(root / "model.safetensors.index.json")) return plan_for(cfg_text, true, false);
  json::Value idx = parse_json(slurp(root / "model.safetensors.index.json"));
  std::set<std::string> names;
  for (const auto& [k, v] : idx.find("weight_map")->as_object()) names.insert(k);
  auto view = arch::resolve_config(cfg, [&](std::string_view n) { return names.count(std::string(n)) > 0; });
  auto scheme = quant::parse_scheme(cfg);
  auto plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
  std::map<std::string, const arch::ExpectedTensor*> by;
  for (const auto& x : plan) by[std::string(x.name)] = &x;
  for (const auto& n : names) {
    auto it = by.find(n);
    if (it != by.end())
      out.push_back({n, arch::resolve_dtype(it->second->dtype, view.model_dtype), it->second->shape});
    else if (n.find("rotary_emb.inv_freq") != std::string::npos)
      out.push_back({n, st::DType::F32, {64}});
    else
      ADD_FAILURE() << dir << ": no shape for " << n;
  }
  return out;
}

class CorpusStandin : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusStandin, VerifiesWithoutErrors) {
  CKPT_REQUIRE_CORPUS();
  const std::string dir = GetParam();
  auto root = corpus_dir() / "configs" / dir;
  auto ts = standin_tensors(dir);
  ASSERT_FALSE(ts.empty());
  auto fs = check(slurp(root / "config.json"), ts);
  EXPECT_CLEAN(fs);
}

INSTANTIATE_TEST_SUITE_P(
    Real, CorpusStandin,
    ::testing::Values("3PRYMMAL-PHI3-3B-SLERP", "Devstral-Small-2507", "Llama-2-7b-hf",
                      "Llama-3.1-8B-Computer-Networks", "Llama-3.2-3B", "Qwen3-1.7B-MLX-bf16",
                      "Qwen3-14B-MLX-4bit", "Qwen3.5-25B-REAP-A3B-Coding", "Qwen3.5-9B-multimodal",
                      "Reflection-Llama-3.1-70B", "WizardLM-2-8x22B", "cogito-v1-preview-qwen-14B",
                      "gemma-2b-finetune", "gpt-oss-20b", "medgemma-27b-it", "mimo_kor", "phi-3-mini-keyformer",
                      "sakura-14b-qwen2.5-v1.0",
                      // config only: the registry's plan
                      "DeepSeek-V3-config", "Genz-70b-GPTQ", "Orpheus_3B_Quantized", "Qwen1.5-0.5B-Chat-dense",
                      "dolphin-2.5-mixtral-8x7b", "gemma-2-2b-poem", "gemma-3-1b-it"),
    [](const auto& info) {
      std::string s = info.param;
      for (auto& c : s)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return s;
    });

// The MoE count of REAP (180 experts, pruned from 256) is found and checked.
TEST(CorpusStandinDefects, ReapExpertCountMismatchIsCaught) {
  CKPT_REQUIRE_CORPUS();
  auto root = corpus_dir() / "configs" / "Qwen3.5-25B-REAP-A3B-Coding";
  std::string cfg = slurp(root / "config.json");
  auto ts = standin_tensors("Qwen3.5-25B-REAP-A3B-Coding");
  auto p = cfg.find("\"num_experts\": 180");
  ASSERT_NE(p, std::string::npos);
  cfg.replace(p, 18, "\"num_experts\": 256");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "AR009", "holds 180 experts");
  EXPECT_LT(our_errors(fs).size(), 10u) << "one finding per problem, not one per tensor\n" << dump(fs);
}

// Genz-70b-GPTQ: 3-bit, group_size -1, desc_act (mlx-lm refuses it; others load it).
TEST(CorpusStandinDefects, GptqConfigNotes) {
  CKPT_REQUIRE_CORPUS();
  auto root = corpus_dir() / "configs" / "Genz-70b-GPTQ";
  auto fs = check(slurp(root / "config.json"), standin_tensors("Genz-70b-GPTQ"));
  EXPECT_CLEAN(fs);
  EXPECT_FINDING(fs, "QZ010", "3-bit");
}

}  // namespace
}  // namespace ckpt::test

namespace ckpt::test {
namespace {

// The full pipeline on the real layout: the real config.json, tokenizer_config.json and
// generation_config.json, shards named and filled exactly as the real index maps them, the
// index with its real total_size — every family runs, and none may report an error.
class CorpusStandinFullLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusStandinFullLayout, EveryFamilyPasses) {
  CKPT_REQUIRE_CORPUS();
  const std::string dir = GetParam();
  auto root = corpus_dir() / "configs" / dir;
  auto ts = standin_tensors(dir);
  ASSERT_FALSE(ts.empty());
  json::Value idx = parse_json(slurp(root / "model.safetensors.index.json"));
  std::map<std::string, std::vector<st::TensorToWrite>> by_file;
  std::map<std::string, const T*> by_name;
  for (const auto& t : ts) by_name[t.name] = &t;
  for (const auto& [name, file] : idx.find("weight_map")->as_object()) {
    const T* t = by_name.at(name);
    st::DType dtype = t->dtype;
    // The real Qwen3.5 checkpoint keeps its Gated DeltaNet A_log and norm in F32 (the 7,680 B
    // that tests/arch/corpus_index_test.cpp explains); the stand-in must too, or its bytes
    // would not add up to the real total_size.
    if (dir == "Qwen3.5-9B-multimodal" &&
        (name.find("linear_attn.A_log") != std::string::npos || name.find("linear_attn.norm") != std::string::npos))
      dtype = st::DType::F32;
    by_file[file.as_string()].push_back({t->name, dtype, t->shape, {}});
  }
  TempDir d;
  for (auto& [file, tensors] : by_file) ASSERT_EQ(st::write_file(d / file, tensors), "");
  for (const char* side : {"config.json", "tokenizer_config.json", "generation_config.json",
                           "model.safetensors.index.json"})
    if (std::filesystem::exists(root / side)) std::filesystem::copy_file(root / side, d / side);
  auto fs = verify_dir(d.path());
  std::string errors;
  for (const auto& f : fs)
    if (f.severity == Severity::error) errors += "  " + f.code + " " + f.file + " " + f.tensor + ": " + f.message + "\n";
  EXPECT_EQ(errors, "") << dir;
}

INSTANTIATE_TEST_SUITE_P(
    RealIndexes, CorpusStandinFullLayout,
    ::testing::Values("Llama-3.2-3B", "Llama-2-7b-hf", "Reflection-Llama-3.1-70B", "Devstral-Small-2507",
                      "cogito-v1-preview-qwen-14B", "sakura-14b-qwen2.5-v1.0", "Qwen3-1.7B-MLX-bf16",
                      "Qwen3-14B-MLX-4bit", "gemma-2b-finetune", "3PRYMMAL-PHI3-3B-SLERP", "phi-3-mini-keyformer",
                      "WizardLM-2-8x22B", "gpt-oss-20b", "medgemma-27b-it", "Qwen3.5-25B-REAP-A3B-Coding",
                      "Llama-3.1-8B-Computer-Networks", "Qwen3.5-9B-multimodal", "mimo_kor"),
    [](const auto& info) {
      std::string n = info.param;
      for (auto& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return n;
    });

}  // namespace
}  // namespace ckpt::test
