// Per-module quantization overrides resolved as each library resolves them (issue 13):
// compressed-tensors' most-specific-target rule and vLLM's first-in-order rule (QZ011 where
// they differ), and for every scheme's override or exclusion mechanism an end-to-end case per
// direction of disagreement with the packed geometry plus one where declaration and files
// agree. Each case asserts the code, the tensor, and the group or rule that decided. The
// Python-re emulation the patterns run on is tested in pyregex_test.cpp.
#include "helpers.h"

namespace ckpt::test {
namespace {

using quant::PyRegex;

// ---- helpers ---------------------------------------------------------------------------

// A small qwen3: H 128, I 256, heads 4 x 32, kv 2, V 256, two layers.
std::string qwen3(const std::string& quant) {
  return R"({"model_type":"qwen3","hidden_size":128,"num_hidden_layers":2,"intermediate_size":256,
 "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"tie_word_embeddings":false,
 "torch_dtype":"bfloat16")" + (quant.empty() ? std::string() : "," + quant) + "}";
}
std::string llama(const std::string& quant) {
  return R"({"model_type":"llama","hidden_size":128,"num_hidden_layers":2,"intermediate_size":256,
 "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":256,"tie_word_embeddings":false,
 "torch_dtype":"bfloat16")" + (quant.empty() ? std::string() : "," + quant) + "}";
}

// Replace every tensor of `module` in `ts` by the ones `from` has for it.
void swap_module(std::vector<T>& ts, const std::vector<T>& from, const std::string& module) {
  auto mine = [&](const T& t) {
    return t.name.rfind(module, 0) == 0 && t.name.size() > module.size() && t.name[module.size()] == '.';
  };
  size_t before = ts.size();
  std::erase_if(ts, mine);
  ASSERT_LT(ts.size(), before) << "no tensors of " << module;
  size_t added = 0;
  for (const auto& t : from)
    if (mine(t)) {
      ts.push_back(t);
      ++added;
    }
  ASSERT_GT(added, 0u) << "the donor has no tensors of " << module;
}

// The one finding of `code` on `tensor` whose message + hint contain every needle.
const Finding* find(const std::vector<Finding>& fs, const std::string& code, const std::string& tensor,
                    std::initializer_list<std::string_view> needles = {}) {
  for (const auto& f : fs) {
    if (f.code != code || f.tensor != tensor) continue;
    std::string text = f.message + " " + f.hint;
    bool all = true;
    for (auto n : needles) all = all && text.find(n) != std::string::npos;
    if (all) return &f;
  }
  return nullptr;
}
#define EXPECT_HAS(fs, sev, code, tensor, ...)                                                         \
  do {                                                                                                 \
    const ::ckpt::Finding* f_ = find(fs, code, tensor, {__VA_ARGS__});                                 \
    EXPECT_NE(f_, nullptr) << "want " << code << " on " << tensor << "\n" << dump(fs);                 \
    if (f_) {                                                                                          \
      EXPECT_EQ(f_->severity, sev) << dump(fs);                                                        \
    }                                                                                                  \
  } while (0)

size_t count_code(const std::vector<Finding>& fs, const std::string& code) {
  return static_cast<size_t>(std::count_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.code == code; }));
}

quant::QuantScheme scheme_of(const std::string& cfg) {
  auto s = quant::parse_scheme(parse_json(cfg));
  EXPECT_TRUE(s.has_value());
  return s ? *s : quant::QuantScheme{};
}

// ---- compressed-tensors ------------------------------------------------------------------

std::string ct_cfg(const std::string& groups, const std::string& ignore = "[]") {
  return qwen3(R"("quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized",)"
               R"("config_groups":{)" + groups + R"(},"ignore":)" + ignore + "}");
}
std::string grp(const std::string& name, const std::string& targets, int bits) {
  return "\"" + name + "\":{\"targets\":" + targets + ",\"weights\":{\"num_bits\":" + std::to_string(bits) +
         ",\"type\":\"int\",\"symmetric\":true,\"strategy\":\"group\",\"group_size\":64}}";
}
const std::string kLinear4 = grp("group_0", R"(["Linear"])", 4);
const std::string kLinear8 = grp("group_0", R"(["Linear"])", 8);

// qwen #122 ("declares int8 over int4"): the class group comes first in the config, the head
// group second; compressed-tensors gives the head to the regex, so its 4-bit tensors are wrong.
TEST(CtOverride, HeadRegexOutranksLinearDeclared8OverStored4) {
  auto cfg = ct_cfg(kLinear4 + "," + grp("group_head", R"(["re:.*lm_head$"])", 8));
  auto ts = plan_for(ct_cfg(kLinear4));  // everything, the head included, packed at 4 bits
  ASSERT_EQ(find_t(ts, "lm_head.weight_packed")->shape, (std::vector<uint64_t>{256, 16}));
  auto fs = check(cfg, ts);
  EXPECT_HAS(fs, Severity::error, "QZ003", "lm_head.weight_packed", "stored packed at 4 bits", "group_head",
             "re:.*lm_head$", "a regex outranks a class name");
  for (const auto& e : our_errors(fs)) EXPECT_EQ(e.tensor.rfind("lm_head.", 0), 0u) << "only the head is wrong\n" << dump(fs);
  auto mq = scheme_of(cfg).for_module("lm_head", arch::ModuleKind::Linear, 128);
  EXPECT_EQ(mq.bits, 8);
  EXPECT_NE(mq.reason.find("group_head"), std::string::npos) << mq.reason;
}

TEST(CtOverride, HeadRegexDeclared4OverStored8) {
  auto cfg = ct_cfg(kLinear8 + "," + grp("group_head", R"(["re:.*lm_head$"])", 4));
  auto fs = check(cfg, plan_for(ct_cfg(kLinear8)));
  EXPECT_HAS(fs, Severity::error, "QZ003", "lm_head.weight_packed", "stored packed at 8 bits", "group_head");
}

TEST(CtOverride, ExactNameOutranksLinearStored8IsClean) {
  auto cfg = ct_cfg(kLinear4 + "," + grp("group_1", R"(["model.layers.0.mlp.down_proj"])", 8));
  auto ts = plan_for(ct_cfg(kLinear4));
  swap_module(ts, plan_for(ct_cfg(kLinear8)), "model.layers.0.mlp.down_proj");
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_EQ(count_code(fs, "QZ011"), 0u) << "vLLM also takes a name match before a class match\n" << dump(fs);
  // and the same override over the 4-bit tensors is the error, naming the group
  fs = check(cfg, plan_for(ct_cfg(kLinear4)));
  EXPECT_HAS(fs, Severity::error, "QZ003", "model.layers.0.mlp.down_proj.weight_packed", "stored packed at 4 bits",
             "group_1", "an exact name outranks a class name");
}

TEST(CtOverride, IgnoreBeatsAnExactTarget) {
  const std::string down = "model.layers.0.mlp.down_proj";
  auto cfg = ct_cfg(kLinear4 + "," + grp("group_1", "[\"" + down + "\"]", 8), "[\"" + down + "\"]");
  auto float_down = plan_for(ct_cfg(kLinear4, "[\"" + down + "\"]"));
  ASSERT_NE(find_t(float_down, down + ".weight"), nullptr);
  EXPECT_CLEAN(check(cfg, float_down));
  // declared unquantized (ignored) over packed tensors
  auto ts = plan_for(ct_cfg(kLinear4));
  swap_module(ts, plan_for(ct_cfg(kLinear8)), down);
  auto fs = check(cfg, ts);
  EXPECT_HAS(fs, Severity::error, "QZ004", down + ".weight_packed", "ignore entry \"" + down + "\"");
}

TEST(CtOverride, ExactTargetOverFloatTensors) {
  const std::string down = "model.layers.1.mlp.down_proj";
  auto cfg = ct_cfg(kLinear4 + "," + grp("group_1", "[\"" + down + "\"]", 8));
  auto fs = check(cfg, plan_for(ct_cfg(kLinear4, "[\"" + down + "\"]")));
  EXPECT_HAS(fs, Severity::error, "QZ005", down + ".weight", "group_1");
}

// Two regexes name model.layers.0.mlp.down_proj. compressed-tensors sorts the targets and
// takes the alphabetically first regex ("re:.*layers..." < "re:.*mlp..."); vLLM takes the
// first in declaration order. The files can follow one of them: the other loader fails.
TEST(CtOverride, TwoRegexGroupsInDifferentOrderLoadersDisagree) {
  const std::string down0 = "model.layers.0.mlp.down_proj";
  auto groups = kLinear4 + "," + grp("g_down", R"(["re:.*mlp\\.down_proj$"])", 8) + "," +
                grp("g_layer0", R"(["re:.*layers\\.0\\.mlp\\..*"])", 4);
  auto cfg = ct_cfg(groups);
  auto ts = plan_for(cfg);  // compressed-tensors' view: layer 0's down_proj at 4, layer 1's at 8
  ASSERT_EQ(find_t(ts, down0 + ".weight_packed")->shape, (std::vector<uint64_t>{128, 32}));
  ASSERT_EQ(find_t(ts, "model.layers.1.mlp.down_proj.weight_packed")->shape, (std::vector<uint64_t>{128, 64}));
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", down0 + ".weight", "g_layer0", "g_down", "compressed-tensors gives",
             "vLLM gives", "the files follow compressed-tensors, so vLLM fails");
  EXPECT_EQ(count_code(fs, "QZ011"), 1u) << "only layer 0's down_proj is ambiguous\n" << dump(fs);

  // stored the way vLLM resolves it: compressed-tensors is the one that fails, still a warning
  swap_module(ts, plan_for(ct_cfg(kLinear8)), down0);
  fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", down0 + ".weight", "the files follow vLLM, so compressed-tensors fails",
             "QZ003");

  // declare g_layer0 first and both loaders pick it: no disagreement
  auto agreed = ct_cfg(kLinear4 + "," + grp("g_layer0", R"(["re:.*layers\\.0\\.mlp\\..*"])", 4) + "," +
                       grp("g_down", R"(["re:.*mlp\\.down_proj$"])", 8));
  fs = check(agreed, plan_for(agreed));
  EXPECT_CLEAN(fs);
  EXPECT_EQ(count_code(fs, "QZ011"), 0u) << dump(fs);
}

// vLLM looks the fused qkv_proj up by its own name, then by class, and only then per shard:
// a regex naming q/k/v loses to the class target there.
TEST(CtOverride, FusedShardOverrideShadowedByClassInVllm) {
  auto cfg = ct_cfg(kLinear4 + "," + grp("g_attn", R"(["re:.*self_attn\\.(q|k|v)_proj$"])", 8));
  auto fs = check(cfg, plan_for(cfg));
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", "model.layers.0.self_attn.q_proj.weight", "g_attn", "group_0",
             "qkv_proj", "vLLM matches the class QKVParallelLinear");
}

TEST(CtOverride, ResolutionRules) {
  // a target listed by two groups belongs to the later one (target_to_scheme[target] = scheme)
  auto twice = scheme_of(ct_cfg(grp("g_a", R"(["re:.*down_proj$"])", 8) + "," + grp("g_b", R"(["re:.*down_proj$"])", 4)));
  auto mq = twice.for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256);
  EXPECT_EQ(mq.bits, 4);
  EXPECT_NE(mq.reason.find("g_b"), std::string::npos) << mq.reason;
  // two exact spellings of one module: the checkpoint's prefix does not matter
  auto vlm = scheme_of(ct_cfg(kLinear4 + "," + grp("g_x", R"(["language_model.model.layers.0.mlp.down_proj"])", 8)));
  EXPECT_EQ(vlm.for_module("model.language_model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256).bits, 8);
  EXPECT_EQ(vlm.for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256).bits, 8);
  // a regex anchored on one spelling reaches the other spelling of the same module
  auto anchored = scheme_of(ct_cfg(kLinear4 + "," + grp("g_e", R"(["re:^model\\.layers\\.\\d+\\.mlp\\.experts.*"])", 8)));
  EXPECT_EQ(anchored.for_module("model.language_model.layers.3.mlp.experts.1.up_proj", arch::ModuleKind::Linear, 128).bits, 8);
  // ignore takes class names too (compressed-tensors is_match)
  const std::string both = grp("g", R"(["Linear", "Embedding"])", 4);
  EXPECT_TRUE(scheme_of(ct_cfg(both)).for_module("model.embed_tokens", arch::ModuleKind::Embedding, 128).quantized);
  EXPECT_FALSE(scheme_of(ct_cfg(both, R"(["Embedding"])")).for_module("model.embed_tokens", arch::ModuleKind::Embedding, 128).quantized);
  // "Linear" is a class name, not a substring: a QKVParallelLinear target never hits here
  auto odd = scheme_of(ct_cfg(grp("g", R"(["QKVParallelLinear"])", 4)));
  EXPECT_FALSE(odd.for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256).quantized);
}

TEST(CtOverride, UnparseablePatternIsAFindingNotACrash) {
  auto cfg = ct_cfg(kLinear4 + "," + grp("g_bad", R"(["re:.*lm_head($"])", 8), R"(["re:(?<=x)y"])");
  auto s = scheme_of(cfg);
  ASSERT_EQ(s.problems.size(), 1u) << ::testing::PrintToString(s.problems);
  EXPECT_NE(s.problems[0].find("re:.*lm_head($"), std::string::npos) << s.problems[0];
  EXPECT_NE(s.problems[0].find("missing ), unterminated subpattern"), std::string::npos) << s.problems[0];
  ASSERT_EQ(s.limits.size(), 1u) << ::testing::PrintToString(s.limits);
  EXPECT_NE(s.limits[0].find("lookbehind"), std::string::npos) << s.limits[0];
  auto fs = check(cfg, plan_for(ct_cfg(kLinear4)));
  EXPECT_FINDING(fs, "QZ001", "re:.*lm_head($");
  const Finding* bad = has(fs, "QZ001", "re:.*lm_head($");
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->severity, Severity::error);
  const Finding* lim = has(fs, "QZ001", "lookbehind");
  ASSERT_NE(lim, nullptr);
  EXPECT_EQ(lim->severity, Severity::warning);
}

// 92k tensors ask for every module: resolution compiles nothing, and the head regex's
// required literal keeps std::regex off every module that is not a head.
TEST(CtOverride, ResolvingModulesCompilesNoRegex) {
  auto s = scheme_of(ct_cfg(kLinear4 + "," + grp("group_head", R"(["re:.*lm_head$"])", 8), R"(["re:.*mlp.gate$"])"));
  size_t built = PyRegex::compilations(), runs = PyRegex::executions();
  for (int l = 0; l < 2000; ++l)
    for (const char* m : {"self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj"}) {
      auto r = s.resolve("model.layers." + std::to_string(l) + "." + m, arch::ModuleKind::Linear, 128);
      ASSERT_TRUE(r.quant.quantized);
      ASSERT_EQ(r.quant.bits, 4);
    }
  EXPECT_EQ(PyRegex::compilations(), built);
  EXPECT_EQ(PyRegex::executions(), runs)
      << "no name contains \"lm_head\", and none ends in \"gate\" (vLLM's gate_proj shard included)";
}

// ---- MLX per-module entries ----------------------------------------------------------------

std::string mlx(const std::string& q) { return qwen3("\"quantization\":" + q); }
const std::string kMlx4 = R"({"group_size":64,"bits":4})";
const std::string kMlx8 = R"({"group_size":64,"bits":8})";
const std::string kDown0 = "model.layers.0.mlp.down_proj";

TEST(MlxOverride, EntryDeclared8OverStored4) {
  auto cfg = mlx(R"({"group_size":64,"bits":4,"model.layers.0.mlp.down_proj":{"group_size":64,"bits":8}})");
  auto fs = check(cfg, plan_for(mlx(kMlx4)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".weight", "stored packed at 4 bits",
             "quantization[\"model.layers.0.mlp.down_proj\"]");
  // the same entry over 8-bit tensors for that module agrees
  auto ts = plan_for(mlx(kMlx4));
  swap_module(ts, plan_for(mlx(kMlx8)), kDown0);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(MlxOverride, EntryDeclared4OverStored8) {
  auto cfg = mlx(R"({"group_size":64,"bits":8,"model.layers.0.mlp.down_proj":{"group_size":64,"bits":4}})");
  auto fs = check(cfg, plan_for(mlx(kMlx8)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".weight", "stored packed at 8 bits",
             "quantization[\"model.layers.0.mlp.down_proj\"]");
}

// mlx-lm passes an entry to to_quantized(**entry): a key it lacks takes the mode's default
// (affine: 4 bits), not the model-wide 8.
TEST(MlxOverride, EntryWithoutBitsIsFourNotTheModelsEight) {
  auto cfg = mlx(R"({"group_size":64,"bits":8,"model.layers.0.mlp.down_proj":{"group_size":64}})");
  auto fs = check(cfg, plan_for(mlx(kMlx8)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".weight", "stored packed at 8 bits", "MLX affine 4-bit");
  auto ts = plan_for(mlx(kMlx8));
  swap_module(ts, plan_for(mlx(kMlx4)), kDown0);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(MlxOverride, FalseEntryOverPackedTensors) {
  auto cfg = mlx(R"({"group_size":64,"bits":4,"model.layers.0.mlp.down_proj":false})");
  auto fs = check(cfg, plan_for(mlx(kMlx4)));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".weight", "quantization[\"model.layers.0.mlp.down_proj\"] is false",
             "packed at 4 bits");
  auto ts = plan_for(mlx(kMlx4));
  swap_module(ts, plan_for(qwen3("")), kDown0);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(MlxOverride, ThePathBeatsItsLanguageModelTwin) {
  auto s = scheme_of(mlx(R"({"group_size":64,"bits":4,"language_model.model.layers.0.mlp.down_proj":{"group_size":64,"bits":8},
                             "model.layers.0.mlp.down_proj":false})"));
  EXPECT_FALSE(s.for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256).quantized);
  EXPECT_EQ(s.for_module("language_model.model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256).bits, 8);
  auto twin = scheme_of(mlx(R"({"group_size":64,"bits":4,"language_model.model.layers.0.mlp.down_proj":{"group_size":64,"bits":8}})"));
  auto mq = twin.for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 256);
  EXPECT_EQ(mq.bits, 8) << mq.reason;
}

// ---- GPTQ dynamic ------------------------------------------------------------------------

std::string gptq(int bits, const std::string& extra = "") {
  return qwen3(R"("quantization_config":{"quant_method":"gptq","bits":)" + std::to_string(bits) +
               R"(,"group_size":64,"desc_act":false,"sym":true)" + extra + "}");
}

TEST(GptqOverride, DynamicDeclared8OverStored4) {
  auto cfg = gptq(4, R"(,"dynamic":{"+:.*layers\\.0\\.mlp\\.down_proj$":{"bits":8}})");
  auto fs = check(cfg, plan_for(gptq(4)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".qweight", "stored packed at 4 bits",
             R"(dynamic rule "+:.*layers\.0\.mlp\.down_proj$")");
  auto ts = plan_for(gptq(4));
  swap_module(ts, plan_for(gptq(8)), kDown0);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(GptqOverride, DynamicDeclared4OverStored8) {
  auto cfg = gptq(8, R"(,"dynamic":{"+:.*layers\\.0\\.mlp\\.down_proj$":{"bits":4}})");
  auto fs = check(cfg, plan_for(gptq(8)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".qweight", "stored packed at 8 bits",
             R"(dynamic rule "+:.*layers\.0\.mlp\.down_proj$")");
}

// GPTQModel dynamic_get and vLLM get_dynamic_override walk the dict in order: the first
// matching rule decides, however specific a later one is.
TEST(GptqOverride, FirstMatchingRuleWins) {
  auto ts = plan_for(gptq(4));
  swap_module(ts, plan_for(gptq(8)), "model.layers.0.mlp.down_proj");
  swap_module(ts, plan_for(gptq(8)), "model.layers.1.mlp.down_proj");
  auto down_first = gptq(4, R"(,"dynamic":{"+:.*down_proj$":{"bits":8},"+:.*layers\\.0\\..*":{"bits":4}})");
  EXPECT_CLEAN(check(down_first, ts));
  auto layer_first = gptq(4, R"(,"dynamic":{"+:.*layers\\.0\\..*":{"bits":4},"+:.*down_proj$":{"bits":8}})");
  auto fs = check(layer_first, ts);
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".qweight", "stored packed at 8 bits",
             R"(dynamic rule "+:.*layers\.0\..*")");
  EXPECT_EQ(find(fs, "QZ003", "model.layers.1.mlp.down_proj.qweight"), nullptr) << dump(fs);
}

TEST(GptqOverride, NegativeRuleOverPackedTensors) {
  auto cfg = gptq(4, R"(,"dynamic":{"-:.*layers\\.0\\.mlp\\.down_proj$":{}})");
  auto fs = check(cfg, plan_for(gptq(4)));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".scales", R"(dynamic rule "-:.*layers\.0\.mlp\.down_proj$")",
             "and 3 more");
}

// lm_head: true makes the head quantizable; `dynamic` still applies to it (vLLM
// get_linear_quant_method runs the rules for ParallelLMHead too).
TEST(GptqOverride, DynamicRuleExcludesTheQuantizedHead) {
  auto with_head = gptq(4, R"(,"lm_head":true)");
  auto ts = plan_for(with_head);
  ASSERT_NE(find_t(ts, "lm_head.qweight"), nullptr);
  auto fs = check(gptq(4, R"(,"lm_head":true,"dynamic":{"-:lm_head":{}})"), ts);
  EXPECT_HAS(fs, Severity::error, "QZ004", "lm_head.scales", R"(dynamic rule "-:lm_head")");
}

// With modules_in_block_to_quantize vLLM builds every listed module quantized: a float one
// is an error (without the list vLLM derives the set from the headers).
TEST(GptqOverride, ListedModuleStoredFloat) {
  auto cfg = gptq(4, R"(,"modules_in_block_to_quantize":[["self_attn.q_proj","self_attn.k_proj","self_attn.v_proj"],
      ["self_attn.o_proj"],["mlp.up_proj","mlp.gate_proj"],["mlp.down_proj"]])");
  auto ts = plan_for(gptq(4));
  swap_module(ts, plan_for(qwen3("")), "model.layers.1.mlp.down_proj");
  auto fs = check(cfg, ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", "model.layers.1.mlp.down_proj.weight",
             "\"mlp.down_proj\" in modules_in_block_to_quantize");
  EXPECT_CLEAN(check(gptq(4), ts));  // no list: the headers decide
}

TEST(GptqOverride, FusedShardRuleLoadersDisagree) {
  auto cfg = gptq(4, R"(,"dynamic":{"+:.*self_attn\\.[qkv]_proj$":{"bits":8}})");
  auto fs = check(cfg, plan_for(cfg));
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", "model.layers.0.self_attn.k_proj.weight", "GPTQModel gives GPTQ 8-bit",
             "vLLM gives GPTQ 4-bit", "qkv_proj", "the files follow GPTQModel, so vLLM fails");
}

// ---- AWQ modules_to_not_convert ----------------------------------------------------------

std::string awq(const std::string& extra = "") {
  return qwen3(R"("quantization_config":{"quant_method":"awq","bits":4,"group_size":64,"zero_point":true,"version":"gemm")" +
               extra + "}");
}

TEST(AwqOverride, ExcludedModuleStoredPacked) {
  auto fs = check(awq(R"(,"modules_to_not_convert":["mlp.down_proj"])"), plan_for(awq()));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".scales", "modules_to_not_convert entry \"mlp.down_proj\" (substring)");
  EXPECT_HAS(fs, Severity::error, "QZ004", "model.layers.1.mlp.down_proj.scales", "\"mlp.down_proj\"");
}

TEST(AwqOverride, SubstringExclusionAgreesWithFloat) {
  auto ts = plan_for(awq());
  swap_module(ts, plan_for(qwen3("")), kDown0);
  EXPECT_CLEAN(check(awq(R"(,"modules_to_not_convert":["layers.0.mlp.down_proj"])"), ts));
  EXPECT_CLEAN(check(awq(), ts)) << "no list: vLLM derives it from the headers";
  // a list that does not name the float module: vLLM and AutoAWQ build it quantized
  auto fs = check(awq(R"(,"modules_to_not_convert":["lm_head"])"), ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", kDown0 + ".weight", "AWQ defaults (no modules_to_not_convert entry");
}

// ---- AutoRound extra_config --------------------------------------------------------------

std::string autoround(int bits, const std::string& extra = "") {
  return qwen3(R"("quantization_config":{"quant_method":"auto-round","bits":)" + std::to_string(bits) +
               R"(,"group_size":64,"sym":true,"packing_format":"auto_round:auto_gptq")" + extra + "}");
}

TEST(AutoRoundOverride, ExtraConfigDeclared8OverStored4) {
  auto cfg = autoround(4, R"(,"extra_config":{"model.layers.0.mlp.down_proj":{"bits":8}})");
  auto fs = check(cfg, plan_for(autoround(4)));
  EXPECT_HAS(fs, Severity::error, "QZ003", kDown0 + ".qweight", "stored packed at 4 bits",
             "extra_config[\"model.layers.0.mlp.down_proj\"]");
  auto ts = plan_for(autoround(4));
  swap_module(ts, plan_for(autoround(8)), kDown0);
  fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_EQ(count_code(fs, "QZ011"), 0u) << "vLLM reads exact names too\n" << dump(fs);
}

TEST(AutoRoundOverride, SixteenBitsOverPackedTensors) {
  auto cfg = autoround(4, R"(,"extra_config":{"model.layers.0.mlp.down_proj":{"bits":16}})");
  auto fs = check(cfg, plan_for(autoround(4)));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".scales", "extra_config[\"model.layers.0.mlp.down_proj\"] has bits >= 16");
}

TEST(AutoRoundOverride, QuantizedHeadEntryOverFloatHead) {
  auto cfg = autoround(4, R"(,"extra_config":{"lm_head":{"bits":8}})");
  auto ts = plan_for(autoround(4));
  ASSERT_NE(find_t(ts, "lm_head.weight"), nullptr);
  auto fs = check(cfg, ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", "lm_head.weight", "extra_config[\"lm_head\"]");
}

// AutoRound's loader expands regex keys (re.search); vLLM looks names up exactly.
TEST(AutoRoundOverride, RegexKeyOnlyAutoRoundReads) {
  auto cfg = autoround(4, R"(,"extra_config":{".*mlp\\.down_proj$":{"bits":8}})");
  auto ts = plan_for(cfg);
  ASSERT_EQ(find_t(ts, kDown0 + ".qweight")->shape, (std::vector<uint64_t>{64, 128}));
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", kDown0 + ".weight", "extra_config[\".*mlp\\.down_proj$\"] (regex key, re.search)",
             "vLLM reads no regex keys", "the files follow AutoRound, so vLLM fails");
  fs = check(cfg, plan_for(autoround(4)));
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", kDown0 + ".weight", "the files follow vLLM, so AutoRound fails");
}

// ---- bitsandbytes llm_int8_skip_modules --------------------------------------------------

std::string bnb(const std::string& skip) {
  return llama(R"("quantization_config":{"quant_method":"bitsandbytes","load_in_8bit":true,"llm_int8_skip_modules":)" +
               skip + "}");
}

TEST(BnbOverride, SkippedModuleStoredQuantized) {
  auto fs = check(bnb(R"(["lm_head","model.layers.0.mlp.down_proj"])"), plan_for(bnb("null"), true, true));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".weight",
             "llm_int8_skip_modules entry \"model.layers.0.mlp.down_proj\"");
}

TEST(BnbOverride, UnskippedModuleStoredFloat) {
  auto ts = plan_for(bnb("null"), true, true);
  swap_module(ts, plan_for(llama("")), kDown0);
  auto fs = check(bnb(R"(["lm_head"])"), ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", kDown0 + ".weight", "bitsandbytes defaults");
  fs = check(bnb(R"(["lm_head","model.layers.0.mlp.down_proj"])"), ts);
  EXPECT_CLEAN(fs);
  EXPECT_EQ(count_code(fs, "QZ011"), 0u) << dump(fs);
}

// Entries naming q/k/v: transformers skips them (suffix match); vLLM resolves the fused
// qkv_proj, which no entry names, and quantizes it.
TEST(BnbOverride, ShardEntriesLoadersDisagree) {
  auto cfg = bnb(R"(["lm_head","self_attn.q_proj","self_attn.k_proj","self_attn.v_proj"])");
  auto ts = plan_for(cfg, true, true);
  ASSERT_EQ(find_t(ts, "model.layers.0.self_attn.q_proj.weight")->dtype, st::DType::BF16);
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", "model.layers.1.self_attn.v_proj.weight",
             "llm_int8_skip_modules entry \"self_attn.v_proj\"", "qkv_proj", "the files follow transformers, so vLLM fails");
}

// ---- FP8 ignored_layers / modules_to_not_convert -----------------------------------------

std::string fp8(const std::string& extra = "") {
  return llama(R"("quantization_config":{"quant_method":"fp8","activation_scheme":"dynamic","fmt":"e4m3","weight_block_size":[128,128])" +
               extra + "}");
}

TEST(Fp8Override, IgnoredLayerStoredFp8) {
  auto fs = check(fp8(R"(,"ignored_layers":["model.layers.0.mlp.down_proj"])"), plan_for(fp8()));
  EXPECT_HAS(fs, Severity::error, "QZ004", kDown0 + ".weight", "entry \"model.layers.0.mlp.down_proj\"");
}

TEST(Fp8Override, ExclusionListAndFloatModules) {
  auto ts = plan_for(fp8());
  swap_module(ts, plan_for(llama("")), kDown0);
  auto fs = check(fp8(R"(,"ignored_layers":["model.layers.0.mlp.down_proj"])"), ts);
  EXPECT_CLEAN(fs);
  EXPECT_EQ(count_code(fs, "QZ011"), 0u) << dump(fs);
  // the list claims to name every float module: one it misses is declared FP8 over BF16
  fs = check(fp8(R"(,"modules_to_not_convert":["lm_head"])"), ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", kDown0 + ".weight", "not excluded by ignored_layers / modules_to_not_convert");
  EXPECT_CLEAN(check(fp8(), ts)) << "no list: the scales on disk say which modules are FP8";
}

// A prefix entry: transformers' re.match skips the whole subtree, vLLM compares exact names.
TEST(Fp8Override, PrefixEntryLoadersDisagree) {
  auto cfg = fp8(R"(,"modules_to_not_convert":["model.layers.0.self_attn"])");
  auto ts = plan_for(cfg);
  ASSERT_EQ(find_t(ts, "model.layers.0.self_attn.o_proj.weight")->dtype, st::DType::BF16);
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_HAS(fs, Severity::warning, "QZ011", "model.layers.0.self_attn.o_proj.weight",
             "entry \"model.layers.0.self_attn\" (transformers: re.match or suffix)", "the files follow transformers, so vLLM fails");
  EXPECT_HAS(fs, Severity::warning, "QZ011", "model.layers.0.self_attn.q_proj.weight", "qkv_proj");
}

// ---- the resolution memo -----------------------------------------------------------------
// The conformance pass resolves one module per name pattern (layer and expert indices aside)
// when no name rule holds a digit. These cases would fail if a pattern's resolution were
// reused where a rule tells the names apart.

// qwen3 with twelve layers (indices of one and of two digits) and compressed-tensors.
std::string ct12(const std::string& ignore) {
  return R"({"model_type":"qwen3","hidden_size":128,"num_hidden_layers":12,"intermediate_size":256,
 "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"tie_word_embeddings":false,
 "torch_dtype":"bfloat16","quantization_config":{"quant_method":"compressed-tensors","format":"pack-quantized",
 "config_groups":{)" + kLinear4 + R"(},"ignore":)" + ignore + "}}";
}

TEST(ResolutionMemo, DigitFreeRegexTellsOneDigitLayersFromTwoDigitOnes) {
  // \d is one digit: down_proj of layers 0-9 is ignored (float), of layers 10 and 11 quantized.
  const std::string cfg = ct12(R"(["re:.*layers\\.\\d\\.mlp\\.down_proj$"])");
  ASSERT_TRUE(scheme_of(cfg).name_rules_digit_free());
  auto ts = plan_for(cfg);
  ASSERT_NE(find_t(ts, "model.layers.3.mlp.down_proj.weight"), nullptr);
  ASSERT_NE(find_t(ts, "model.layers.10.mlp.down_proj.weight_packed"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
  const auto all_float = plan_for(ct12(R"(["re:.*down_proj$"])"));
  const auto all_packed = plan_for(ct12("[]"));
  auto float10 = ts;
  swap_module(float10, all_float, "model.layers.10.mlp.down_proj");
  auto fs = check(cfg, float10);
  EXPECT_HAS(fs, Severity::error, "QZ005", "model.layers.10.mlp.down_proj.weight", "group_0");
  EXPECT_EQ(count_code(fs, "QZ005"), 1u) << dump(fs);
  auto packed3 = ts;
  swap_module(packed3, all_packed, "model.layers.3.mlp.down_proj");
  fs = check(cfg, packed3);
  EXPECT_HAS(fs, Severity::error, "QZ004", "model.layers.3.mlp.down_proj.weight_packed", "ignore entry");
  EXPECT_EQ(count_code(fs, "QZ004"), 1u) << dump(fs);
}

TEST(ResolutionMemo, ARuleWithADigitResolvesEveryModuleOnItsOwn) {
  const std::string cfg = ct12(R"(["model.layers.11.mlp.down_proj"])");
  ASSERT_FALSE(scheme_of(cfg).name_rules_digit_free());
  auto ts = plan_for(cfg);
  ASSERT_NE(find_t(ts, "model.layers.11.mlp.down_proj.weight"), nullptr);
  ASSERT_NE(find_t(ts, "model.layers.1.mlp.down_proj.weight_packed"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
  swap_module(ts, plan_for(ct12(R"(["re:.*down_proj$"])")), "model.layers.1.mlp.down_proj");
  auto fs = check(cfg, ts);
  EXPECT_HAS(fs, Severity::error, "QZ005", "model.layers.1.mlp.down_proj.weight", "group_0");
  EXPECT_EQ(count_code(fs, "QZ005"), 1u) << dump(fs);
}

TEST(ResolutionMemo, DigitFreeRulesAreRecognised) {
  EXPECT_TRUE(scheme_of(ct12(R"(["lm_head", "re:.*mlp\\.gate$"])")).name_rules_digit_free());
  EXPECT_FALSE(scheme_of(ct12(R"(["re:.*layers\\.[0-3]\\..*"])")).name_rules_digit_free());
  EXPECT_FALSE(scheme_of(ct12(R"(["re:.*\\d{2}.*"])")).name_rules_digit_free());
  EXPECT_TRUE(quant::QuantScheme{}.name_rules_digit_free());
}

}  // namespace
}  // namespace ckpt::test
