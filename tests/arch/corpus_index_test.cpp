// The registry against reality: for every real model folder in corpus/configs with an index,
// the predicted tensor names equal the index's names exactly and the predicted byte total
// equals metadata.total_size. The few explained exceptions are listed with their reason.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ckpt/arch.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "test_support.h"

namespace {

using namespace ckpt;

json::Value load_json(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  auto r = json::parse(ss.str());
  EXPECT_TRUE(r.ok()) << p;
  return r.value;
}

struct Exception {
  const char* dir;
  const char* name_substring;  // index names containing this are not predicted
  uint64_t bytes;              // bytes those entries account for in total_size
  const char* reason;
};

// Every explained difference between the formulas and a real index.
const Exception kExceptions[] = {
    {"Llama-2-7b-hf", "rotary_emb.inv_freq", 32 * 64 * 4,
     "a non-persistent rotary buffer saved by an old transformers; loaders drop it (AR003)"},
    // The formulas give every float tensor the model dtype; this checkpoint keeps the
    // Gated-DeltaNet A_log [nv] and linear_attn.norm [dv] of its 24 linear layers in F32
    // (loaders cast on load, so the check accepts any float dtype there).
    {"Qwen3.5-9B-multimodal", nullptr, 24 * (32 + 128) * 2,
     "A_log and linear_attn.norm stored as F32 instead of BF16: 24 x (32 + 128) x 2 extra bytes"},
};

struct Result {
  size_t index_names = 0;
  std::vector<std::string> missing, extra;
  uint64_t predicted_bytes = 0, total_size = 0;
  bool bytes_known = true;
};

Result compare(const std::string& dir) {
  Result r;
  auto root = test::corpus_dir() / "configs" / dir;
  json::Value cfg = load_json(root / "config.json");
  json::Value idx = load_json(root / "model.safetensors.index.json");
  std::set<std::string> names;
  for (const auto& [k, v] : idx.find("weight_map")->as_object()) names.insert(k);
  r.index_names = names.size();
  r.total_size = static_cast<uint64_t>(idx.find("metadata")->get_int("total_size").value_or(0));

  auto view = arch::resolve_config(cfg, [&](std::string_view n) { return names.count(std::string(n)) > 0; });
  EXPECT_NE(view.arch, nullptr) << dir << " model_type " << view.model_type;
  auto scheme = quant::parse_scheme(cfg);
  auto plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
  std::map<std::string, const arch::ExpectedTensor*> by_name;
  for (const auto& t : plan) by_name[std::string(t.name)] = &t;

  uint64_t exception_bytes = 0;
  for (const auto& n : names) {
    bool excepted = false;
    for (const auto& e : kExceptions)
      if (dir == e.dir && e.name_substring && n.find(e.name_substring) != std::string::npos)
        excepted = true;
    if (excepted) continue;
    auto it = by_name.find(n);
    if (it == by_name.end()) {
      r.extra.push_back(n);
      continue;
    }
    const auto& t = *it->second;
    auto nb = st::tensor_nbytes(arch::resolve_dtype(t.dtype, view.model_dtype), t.shape);
    if (!nb) r.bytes_known = false;
    else r.predicted_bytes += *nb;
  }
  for (const auto& e : kExceptions)
    if (dir == e.dir) exception_bytes += e.bytes;
  r.predicted_bytes += exception_bytes;
  for (const auto& t : plan)
    if (t.presence == arch::Presence::Required && !names.count(std::string(t.name))) r.missing.emplace_back(t.name);
  return r;
}

std::string head(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 5; ++i) s += v[i] + " ";
  return s;
}

class CorpusIndex : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusIndex, NamesAndBytesMatch) {
  CKPT_REQUIRE_CORPUS();
  Result r = compare(GetParam());
  EXPECT_TRUE(r.missing.empty()) << r.missing.size() << " predicted but absent: " << head(r.missing);
  EXPECT_TRUE(r.extra.empty()) << r.extra.size() << " in the index but not predicted: " << head(r.extra);
  EXPECT_TRUE(r.bytes_known);
  EXPECT_EQ(r.predicted_bytes, r.total_size);
}

INSTANTIATE_TEST_SUITE_P(
    Real, CorpusIndex,
    ::testing::Values("3PRYMMAL-PHI3-3B-SLERP", "Devstral-Small-2507", "Llama-2-7b-hf",
                      "Llama-3.1-8B-Computer-Networks", "Llama-3.2-3B", "Qwen3-1.7B-MLX-bf16",
                      "Qwen3-14B-MLX-4bit", "Qwen3.5-25B-REAP-A3B-Coding", "Qwen3.5-9B-multimodal",
                      "Reflection-Llama-3.1-70B", "WizardLM-2-8x22B", "cogito-v1-preview-qwen-14B",
                      "gemma-2b-finetune", "gpt-oss-20b", "medgemma-27b-it", "mimo_kor",
                      "phi-3-mini-keyformer", "sakura-14b-qwen2.5-v1.0"),
    [](const auto& info) {
      std::string s = info.param;
      for (auto& c : s)
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      return s;
    });

// Every corpus folder with an index is covered above.
TEST(CorpusIndex, EveryIndexedFolderIsListed) {
  CKPT_REQUIRE_CORPUS();
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::corpus_dir() / "configs"))
    if (std::filesystem::exists(e.path() / "model.safetensors.index.json")) ++n;
  EXPECT_EQ(n, 18u);
}

}  // namespace
