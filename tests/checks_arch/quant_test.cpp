// QZ family end to end: each scheme's clean layout passes; every defect shape of
// incidents.md §5 (packed vs float, declared width both ways, missing scales, zero points vs
// symmetry, fused shards) and the per_layer_model_projection incident fail, naming the tensor.
#include "helpers.h"

namespace ckpt::test {
namespace {

// A small qwen3: H 128, I 256, heads 4 x 32, kv 2, V 256.
std::string qwen3(const std::string& quant) {
  return R"({"model_type":"qwen3","hidden_size":128,"num_hidden_layers":2,"intermediate_size":256,
 "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"tie_word_embeddings":false,
 "torch_dtype":"bfloat16")" + (quant.empty() ? std::string() : "," + quant) + "}";
}

const std::string kMlx4 = R"("quantization":{"group_size":64,"bits":4},"quantization_config":{"group_size":64,"bits":4})";

TEST(Mlx, AffineCleanIncludingEmbeddingAndHead) {
  auto cfg = qwen3(kMlx4);
  auto ts = plan_for(cfg);
  auto* e = find_t(ts, "model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, st::DType::U32);
  EXPECT_EQ(e->shape, (std::vector<uint64_t>{256, 16}));
  EXPECT_NE(find_t(ts, "lm_head.scales"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(Mlx, Declared8OverPacked4) {
  auto ts = plan_for(qwen3(kMlx4));
  auto cfg = qwen3(R"("quantization":{"group_size":64,"bits":8})");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ003", "stored packed at 4 bits");
}

TEST(Mlx, Declared4OverPacked8) {
  auto ts = plan_for(qwen3(R"("quantization":{"group_size":64,"bits":8})"));
  auto fs = check(qwen3(kMlx4), ts);
  EXPECT_FINDING(fs, "QZ003", "stored packed at 8 bits");
}

TEST(Mlx, MissingBiases) {
  auto cfg = qwen3(kMlx4);
  auto ts = plan_for(cfg);
  erase_t(ts, "model.layers.1.mlp.up_proj.biases");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ002", "model.layers.1.mlp.up_proj.biases");
}

TEST(Mlx, PackedWeightWithoutScalesIsPackedVsFloat) {
  auto cfg = qwen3(kMlx4);
  auto ts = plan_for(cfg);
  erase_t(ts, "model.layers.0.mlp.down_proj.scales");
  erase_t(ts, "model.layers.0.mlp.down_proj.biases");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "AR004", "stored packed at 4 bits");
}

TEST(Mlx, WrongGroupCount) {
  auto cfg = qwen3(kMlx4);
  auto ts = plan_for(cfg);
  find_t(ts, "model.layers.0.mlp.down_proj.scales")->shape = {128, 2};
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ003", "model.layers.0.mlp.down_proj.scales");
}

TEST(Mlx, EightBitRouterOverrideAndUnquantizedNonDivisible) {
  const std::string cfg = R"({"model_type":"qwen3_moe","hidden_size":128,"num_hidden_layers":1,"intermediate_size":256,
   "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"num_experts":4,
   "moe_intermediate_size":96,"decoder_sparse_step":1,"mlp_only_layers":[],"tie_word_embeddings":false,
   "quantization":{"group_size":64,"bits":4,"model.layers.0.mlp.gate":{"group_size":64,"bits":8}}})";
  auto ts = plan_for(cfg);
  auto* g = find_t(ts, "model.layers.0.mlp.gate.weight");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->shape, (std::vector<uint64_t>{4, 32}));  // 128 * 8 / 32
  // down_proj has in = 96, not divisible by 64: mlx-lm leaves it float
  auto* d = find_t(ts, "model.layers.0.mlp.experts.0.down_proj.weight");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->dtype, st::DType::BF16);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(Mlx, SwitchMlpStackedExperts) {
  const std::string cfg = R"({"model_type":"qwen3_moe","hidden_size":128,"num_hidden_layers":1,"intermediate_size":256,
   "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"num_experts":4,
   "moe_intermediate_size":128,"tie_word_embeddings":false,"quantization":{"group_size":64,"bits":4}})";
  auto ts = plan_for(cfg);
  std::vector<T> out;
  for (auto& t : ts) {
    auto p = t.name.find(".experts.");
    if (p == std::string::npos) {
      out.push_back(t);
      continue;
    }
    if (t.name.find(".experts.0.") == std::string::npos) continue;
    t.name = t.name.substr(0, p) + ".switch_mlp." + t.name.substr(p + 11);
    t.shape.insert(t.shape.begin(), 4);
    out.push_back(t);
  }
  EXPECT_CLEAN(check(cfg, out));
}

TEST(Mlx, FusedShardsDisagree) {
  auto cfg = qwen3(kMlx4);
  auto ts = plan_for(cfg);
  erase_t(ts, "model.layers.0.self_attn.k_proj.scales");
  erase_t(ts, "model.layers.0.self_attn.k_proj.biases");
  find_t(ts, "model.layers.0.self_attn.k_proj.weight")->dtype = st::DType::BF16;
  find_t(ts, "model.layers.0.self_attn.k_proj.weight")->shape = {64, 128};
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ009", "k_proj");
}

// The per_layer_model_projection incident (incidents.md §1.7): packed weights + scales for a
// module the loader's predicate will not quantize.
TEST(Mlx, PerLayerModelProjectionIncident) {
  const std::string cfg = R"({"model_type":"gemma4_text","hidden_size":128,"num_hidden_layers":2,"intermediate_size":256,
   "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"vocab_size":256,"hidden_size_per_layer_input":64,
   "vocab_size_per_layer_input":64,"num_kv_shared_layers":0,"tie_word_embeddings":true,
   "quantization":{"group_size":64,"bits":4}})";
  auto ts = plan_for(cfg);
  auto* p = find_t(ts, "model.per_layer_model_projection.weight");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->dtype, st::DType::BF16) << "the registry never quantizes it";
  EXPECT_CLEAN(check(cfg, ts));
  // ship it packed at 4 bits with scales and biases, like the broken converter did
  p->dtype = st::DType::U32;
  p->shape = {128, 16};  // [L*hpl, H*4/32]
  ts.push_back({"model.per_layer_model_projection.scales", st::DType::BF16, {128, 2}});
  ts.push_back({"model.per_layer_model_projection.biases", st::DType::BF16, {128, 2}});
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ004", "packed at 4 bits");
  EXPECT_FINDING(fs, "QZ004", "model.per_layer_model_projection");
}

// ---- compressed-tensors -------------------------------------------------------------------

std::string ct(int bits, bool sym, const std::string& fmt = "pack-quantized", const std::string& ignore = R"(["lm_head"])",
               const std::string& extra_groups = "", bool act = false) {
  return qwen3(R"("quantization_config":{"quant_method":"compressed-tensors","format":")" + fmt +
               R"(","config_groups":{)" + extra_groups + R"("group_0":{"targets":["Linear"],"weights":{"num_bits":)" +
               std::to_string(bits) + R"(,"type":"int","symmetric":)" + (sym ? "true" : "false") +
               R"(,"strategy":"group","group_size":64},"input_activations":)" +
               (act ? R"({"num_bits":8,"type":"int","dynamic":true})" : "null") + R"(}},"ignore":)" + ignore + "}");
}

TEST(CompressedTensors, W4A16Clean) {
  auto cfg = ct(4, true);
  auto ts = plan_for(cfg);
  auto* w = find_t(ts, "model.layers.0.mlp.down_proj.weight_packed");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, st::DType::I32);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{128, 32}));  // 256 * 4 / 32
  EXPECT_NE(find_t(ts, "lm_head.weight"), nullptr) << "ignored lm_head stays float";
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.weight_zero_point"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(CompressedTensors, W8A16AsI32IsLegitimate) {
  auto cfg = ct(8, true);
  auto ts = plan_for(cfg);
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.weight_packed")->shape, (std::vector<uint64_t>{128, 64}));
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(CompressedTensors, IntQuantizedI8ForFourBitsIsLegitimate) {
  auto cfg = ct(4, true, "int-quantized", R"(["lm_head"])", "", true);
  auto ts = plan_for(cfg);
  auto* w = find_t(ts, "model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, st::DType::I8);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{128, 256}));
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(CompressedTensors, DeclaredWidthMismatchBothWays) {
  auto fs = check(ct(8, true), plan_for(ct(4, true)));
  EXPECT_FINDING(fs, "QZ003", "stored packed at 4 bits");
  fs = check(ct(4, true), plan_for(ct(8, true)));
  EXPECT_FINDING(fs, "QZ003", "stored packed at 8 bits");
}

TEST(CompressedTensors, AsymmetricNeedsZeroPoints) {
  auto cfg = ct(4, false);
  auto ts = plan_for(cfg);
  ASSERT_NE(find_t(ts, "model.layers.0.mlp.down_proj.weight_zero_point"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
  erase_t(ts, "model.layers.0.mlp.down_proj.weight_zero_point");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ006", "model.layers.0.mlp.down_proj.weight_zero_point");
}

TEST(CompressedTensors, SymmetricWithZeroPointsFails) {
  auto ts = plan_for(ct(4, false));
  auto fs = check(ct(4, true), ts);
  EXPECT_FINDING(fs, "QZ006", "symmetric");
}

TEST(CompressedTensors, MissingScale) {
  auto cfg = ct(4, true);
  auto ts = plan_for(cfg);
  erase_t(ts, "model.layers.1.self_attn.o_proj.weight_scale");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ002", "model.layers.1.self_attn.o_proj.weight_scale");
}

TEST(CompressedTensors, IgnoredModuleMustStayFloat) {
  auto ts = plan_for(ct(4, true, "pack-quantized", "[]"));  // lm_head packed
  auto fs = check(ct(4, true), ts);                         // but config ignores lm_head
  EXPECT_FINDING(fs, "QZ004", "lm_head");
}

TEST(CompressedTensors, TargetedModuleStoredFloat) {
  auto ts = plan_for(ct(4, true));                          // lm_head float
  auto fs = check(ct(4, true, "pack-quantized", "[]"), ts);  // config targets it
  EXPECT_FINDING(fs, "QZ005", "lm_head.weight");
}

TEST(CompressedTensors, RegexIgnoreAndQuantizedHeadGroup) {
  // head group: int8 lm_head via an anchored regex target; routers ignored by regex
  std::string head = R"("group_head":{"targets":["re:.*lm_head$"],"weights":{"num_bits":8,"type":"int","symmetric":true,"strategy":"group","group_size":64}},)";
  auto cfg = ct(4, true, "pack-quantized", R"(["re:.*mlp.gate$"])", head);
  auto ts = plan_for(cfg);
  auto* h = find_t(ts, "lm_head.weight_packed");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{256, 32}));  // 128 * 8 / 32
  EXPECT_CLEAN(check(cfg, ts));
  // the head declared int8 but stored int4 (the HyperQwen G3 case)
  find_t(ts, "lm_head.weight_packed")->shape = {256, 16};
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ003", "stored packed at 4 bits");
}

// ---- GPTQ / AWQ / AutoRound -----------------------------------------------------------

std::string gptq(int bits, bool lm_head = false, bool desc = false) {
  return qwen3(R"("quantization_config":{"quant_method":"gptq","bits":)" + std::to_string(bits) +
               R"(,"group_size":64,"desc_act":)" + (desc ? "true" : "false") + R"(,"sym":true,"lm_head":)" +
               (lm_head ? "true" : "false") + "}");
}

TEST(Gptq, CleanAndLmHead) {
  auto ts = plan_for(gptq(4));
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.qweight")->shape, (std::vector<uint64_t>{32, 128}));
  EXPECT_EQ(find_t(ts, "lm_head.qweight"), nullptr);
  EXPECT_CLEAN(check(gptq(4), ts));
  auto th = plan_for(gptq(4, true));
  EXPECT_NE(find_t(th, "lm_head.qweight"), nullptr);
  EXPECT_CLEAN(check(gptq(4, true), th));
}

TEST(Gptq, DeclaredWidthMismatch) {
  auto fs = check(gptq(8), plan_for(gptq(4)));
  EXPECT_FINDING(fs, "QZ003", "stored packed at 4 bits");
  fs = check(gptq(4), plan_for(gptq(8)));
  EXPECT_FINDING(fs, "QZ003", "stored packed at 8 bits");
}

TEST(Gptq, DescActNeedsGIdx) {
  auto cfg = gptq(4, false, true);
  auto ts = plan_for(cfg);
  EXPECT_CLEAN(check(cfg, ts));
  erase_t(ts, "model.layers.0.mlp.up_proj.g_idx");
  EXPECT_FINDING(check(cfg, ts), "QZ002", "model.layers.0.mlp.up_proj.g_idx");
}

TEST(Gptq, ThreeBitPerChannel) {
  auto cfg = qwen3(R"("quantization_config":{"quant_method":"gptq","bits":3,"group_size":-1,"desc_act":true,"sym":true})");
  auto ts = plan_for(cfg);
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.qweight")->shape, (std::vector<uint64_t>{24, 128}));
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.scales")->shape, (std::vector<uint64_t>{1, 128}));
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(Gptq, DynamicExclusion) {
  auto cfg = qwen3(R"("quantization_config":{"quant_method":"gptq","bits":4,"group_size":64,"sym":true,
     "dynamic":{"-:.*layers\\.1\\.mlp\\.down_proj":{}}})");
  auto ts = plan_for(cfg);
  EXPECT_NE(find_t(ts, "model.layers.1.mlp.down_proj.weight"), nullptr);
  EXPECT_NE(find_t(ts, "model.layers.0.mlp.down_proj.qweight"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(Awq, GemmClean) {
  auto cfg = qwen3(R"("quantization_config":{"quant_method":"awq","bits":4,"group_size":64,"zero_point":true,"version":"gemm"})");
  auto ts = plan_for(cfg);
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.qweight")->shape, (std::vector<uint64_t>{256, 16}));
  EXPECT_CLEAN(check(cfg, ts));
  erase_t(ts, "model.layers.0.mlp.down_proj.qzeros");
  EXPECT_FINDING(check(cfg, ts), "QZ006", "qzeros");
}

TEST(AutoRound, ExtraConfigInt8LmHead) {
  auto cfg = qwen3(R"("quantization_config":{"quant_method":"auto-round","bits":4,"group_size":64,"sym":true,
     "packing_format":"auto_round:auto_gptq","extra_config":{"lm_head":{"bits":8,"group_size":64}}})");
  auto ts = plan_for(cfg);
  EXPECT_EQ(find_t(ts, "lm_head.qweight")->shape, (std::vector<uint64_t>{32, 256}));  // 128 * 8 / 32
  EXPECT_CLEAN(check(cfg, ts));
}

// ---- FP8 / bitsandbytes / gpt-oss ---------------------------------------------------------

TEST(Fp8, BlockScalesAreCeilShaped) {
  // I = 200 is not a multiple of 128: scale_inv is [ceil(out/128), ceil(in/128)]
  const std::string cfg = R"({"model_type":"llama","hidden_size":128,"num_hidden_layers":1,"intermediate_size":200,
   "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":256,"tie_word_embeddings":false,
   "quantization_config":{"quant_method":"fp8","activation_scheme":"dynamic","fmt":"e4m3","weight_block_size":[128,128]}})";
  auto ts = plan_for(cfg);
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.down_proj.weight_scale_inv")->shape, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(find_t(ts, "model.layers.0.mlp.up_proj.weight_scale_inv")->shape, (std::vector<uint64_t>{2, 1}));
  EXPECT_EQ(find_t(ts, "model.embed_tokens.weight")->dtype, st::DType::BF16);
  EXPECT_CLEAN(check(cfg, ts));
  erase_t(ts, "model.layers.0.mlp.down_proj.weight_scale_inv");
  auto fs = check(cfg, ts);
  EXPECT_FINDING(fs, "QZ008", "model.layers.0.mlp.down_proj.weight");
}

TEST(Bnb, Int8Clean) {
  const std::string cfg = R"({"model_type":"llama","hidden_size":128,"num_hidden_layers":1,"intermediate_size":256,
   "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":256,"tie_word_embeddings":false,
   "quantization_config":{"quant_method":"bitsandbytes","load_in_8bit":true,"llm_int8_skip_modules":null}})";
  auto ts = plan_for(cfg, true, true);
  EXPECT_NE(find_t(ts, "model.layers.0.mlp.down_proj.SCB"), nullptr);
  EXPECT_CLEAN(check(cfg, ts));
}

TEST(Bnb, Nf4SkipModules) {
  const std::string cfg = R"({"model_type":"llama","hidden_size":128,"num_hidden_layers":2,"intermediate_size":256,
   "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":256,"tie_word_embeddings":true,
   "quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true,"bnb_4bit_use_double_quant":true,
   "llm_int8_skip_modules":["lm_head","model.layers.0.self_attn"]}})";
  auto ts = plan_for(cfg);
  EXPECT_NE(find_t(ts, "model.layers.0.self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(find_t(ts, "model.layers.0.self_attn.q_proj.weight.absmax"), nullptr);
  EXPECT_NE(find_t(ts, "model.layers.1.self_attn.q_proj.weight.absmax"), nullptr);
  EXPECT_EQ(find_t(ts, "model.layers.1.self_attn.q_proj.weight")->shape, (std::vector<uint64_t>{8192, 1}));
}

TEST(GptOss, Mxfp4Clean) {
  const std::string cfg = R"({"model_type":"gpt_oss","hidden_size":64,"num_hidden_layers":2,"intermediate_size":64,
   "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"num_local_experts":4,"vocab_size":256,
   "tie_word_embeddings":false,"quantization_config":{"quant_method":"mxfp4","modules_to_not_convert":
   ["model.layers.*.self_attn","model.layers.*.mlp.router","model.embed_tokens","lm_head"]}})";
  auto ts = plan_for(cfg);
  auto* b = find_t(ts, "model.layers.0.mlp.experts.gate_up_proj_blocks");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<uint64_t>{4, 128, 2, 16}));
  EXPECT_CLEAN(check(cfg, ts));
  find_t(ts, "model.layers.1.mlp.experts.down_proj_scales")->shape = {4, 64, 3};
  EXPECT_FINDING(check(cfg, ts), "QZ003", "down_proj_scales");
}

TEST(Scheme, DetectionAndPredicates) {
  auto s = quant::parse_scheme(parse_json(qwen3(kMlx4)));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->method, quant::Method::MLX);
  auto off = quant::parse_scheme(parse_json(R"({"quantization":{"bits":4,"group_size":64,"model.layers.0.mlp.gate":false}})"));
  EXPECT_FALSE(off->for_module("model.layers.0.mlp.gate", arch::ModuleKind::Linear, 128).quantized);
  EXPECT_TRUE(off->for_module("model.layers.0.mlp.up_proj", arch::ModuleKind::Linear, 128).quantized);
  auto c = quant::parse_scheme(parse_json(ct(4, true, "pack-quantized", R"(["re:.*mlp.gate$"])")));
  EXPECT_FALSE(c->for_module("model.layers.0.mlp.gate", arch::ModuleKind::Linear, 128).quantized);
  // re.match is anchored at the start only: "mlp.gate_proj" does not match ".*mlp.gate$"
  EXPECT_TRUE(c->for_module("model.layers.0.mlp.gate_proj", arch::ModuleKind::Linear, 128).quantized);
  EXPECT_FALSE(c->for_module("model.embed_tokens", arch::ModuleKind::Embedding, 128).quantized);
  EXPECT_FALSE(quant::parse_scheme(parse_json(R"({"model_type":"llama"})")).has_value());
  auto u = quant::parse_scheme(parse_json(R"({"quantization_config":{"quant_method":"hqq"}})"));
  EXPECT_EQ(u->method, quant::Method::Unknown);
  EXPECT_EQ(quant::packed_bits_for(320, 2560), 4);
  EXPECT_EQ(quant::packed_bits_for(640, 2560), 8);
  EXPECT_EQ(quant::packed_bits_for(192, 1536), 4);
  // hostile declarations never crash
  for (const char* bad : {R"({"quantization":{"bits":"x","group_size":[1]}})",
                          R"({"quantization_config":{"quant_method":"compressed-tensors","config_groups":7}})",
                          R"({"quantization_config":{"quant_method":"gptq","dynamic":{"-:([":{}}}})",
                          R"({"quantization_config":{"quant_method":"fp8","weight_block_size":[0,-1]}})"}) {
    auto q = quant::parse_scheme(parse_json(bad));
    ASSERT_TRUE(q) << bad;
    (void)q->for_module("model.layers.0.mlp.down_proj", arch::ModuleKind::Linear, 128);
  }
}

TEST(Scheme, UnknownMethodWarnsOnly) {
  auto cfg = qwen3(R"("quantization_config":{"quant_method":"hqq"})");
  auto ts = plan_for(qwen3(""));
  auto fs = check(cfg, ts);
  EXPECT_CLEAN(fs);
  EXPECT_FINDING(fs, "QZ001", "hqq");
}

}  // namespace
}  // namespace ckpt::test
