// Parameter counts against reality: every real index of corpus/configs as a stand-in (see
// standin.h), its parameters summed independently here from the shapes the stand-in holds, its
// bytes against the real index's metadata.total_size (written by the real saver, so the
// registry's shapes are the real ones), and published parameter counts where they exist.
#include <cmath>

#include "standin.h"

namespace ckpt::test {
namespace {

using inspect::Component;

// The logical parameters of one stored tensor, by the layout rules of
// specs/quantization-layouts.md, written out per layout: packed weights unpacked, quantization
// companions counted as bytes only, and the one buffer loaders drop (rotary inv_freq) excluded.
uint64_t logical_params(const Planned& p) {
  auto ends = [&](std::string_view s) { return p.name.size() >= s.size() && p.name.ends_with(s); };
  if (ends("rotary_emb.inv_freq")) return 0;                                // non-persistent buffer
  if (ends(".scales") || ends(".biases")) return 0;                          // MLX affine companions (§1a)
  if (ends(".SCB") || ends(".weight_format")) return 0;                      // bitsandbytes int8 (§6)
  if (ends("_scales") && p.dtype == st::DType::U8) return 0;                 // gpt-oss MXFP4 scales (§8)
  if (ends(".weight_scale_inv")) return 0;                                   // FP8 block scales (§7)
  if (ends("_blocks") && p.dtype == st::DType::U8) return numel(p.shape) * 2;  // two E2M1 codes per byte
  if (p.dtype == st::DType::U32) return numel(p.shape) * 32 / 4;             // MLX 4-bit: 8 codes per word
  return numel(p.shape);                                                     // float, and bnb int8 I8 [O, I]
}

// Every corpus folder with an index.
const char* const kLayouts[] = {
    "3PRYMMAL-PHI3-3B-SLERP", "Devstral-Small-2507", "Llama-2-7b-hf", "Llama-3.1-8B-Computer-Networks",
    "Llama-3.2-3B", "Qwen3-1.7B-MLX-bf16", "Qwen3-14B-MLX-4bit", "Qwen3.5-25B-REAP-A3B-Coding",
    "Qwen3.5-9B-multimodal", "Reflection-Llama-3.1-70B", "WizardLM-2-8x22B", "cogito-v1-preview-qwen-14B",
    "gemma-2b-finetune", "gpt-oss-20b", "medgemma-27b-it", "mimo_kor", "phi-3-mini-keyformer",
    "sakura-14b-qwen2.5-v1.0"};

class CorpusIndex : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusIndex, ParametersAreTheSumOverTheRealIndex) {
  CKPT_REQUIRE_CORPUS();
  const char* dir = GetParam();
  auto s = corpus_standin(dir);
  ASSERT_TRUE(s->index_total) << dir;
  uint64_t want_params = 0, want_bytes = 0, not_loaded = 0;
  for (const auto& p : s->tensors) {
    want_params += logical_params(p);
    want_bytes += stored_bytes(p);
    if (p.name.ends_with("rotary_emb.inv_freq")) not_loaded += stored_bytes(p);
  }
  // the stand-in holds the real shapes: its bytes are what the real saver recorded
  EXPECT_EQ(want_bytes, *s->index_total) << dir;

  const inspect::Inspection in = inspect_dir(s->root);
  EXPECT_EQ(in.params.total, want_params) << dir;
  EXPECT_EQ(in.bytes.tensor_data, want_bytes) << dir;
  EXPECT_EQ(in.bytes.not_loaded, not_loaded) << dir;
  EXPECT_EQ(in.bytes.in_memory + in.bytes.mtp + in.bytes.not_loaded, want_bytes) << dir;
  uint64_t sum = 0, tensors = 0;
  for (const auto& t : in.params.by_component) sum += t.params, tensors += t.tensors;
  EXPECT_EQ(sum, in.params.total) << dir;
  EXPECT_EQ(tensors + in.params.not_loaded.tensors, s->tensors.size()) << dir;
  uint64_t by_dtype = 0;
  for (const auto& [d, t] : in.params.by_dtype) by_dtype += t.params;
  EXPECT_EQ(by_dtype, in.params.total) << dir;
  EXPECT_LE(in.params.active, in.params.total) << dir;
  EXPECT_TRUE(in.model.architecture_known) << dir;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusIndex, ::testing::ValuesIn(kLayouts), [](const auto& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// ---- published parameter counts ------------------------------------------------------------

uint64_t comp(const inspect::Inspection& in, Component c) { return in.params.by_component[static_cast<size_t>(c)].params; }

// within half a unit of the published figure's last digit
void expect_rounds_to(uint64_t value, double published, double unit, const char* what) {
  EXPECT_LE(std::fabs(static_cast<double>(value) - published), unit / 2) << what << ": " << value;
}

TEST(PublishedCounts, Llama2_7b) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Llama-2-7b-hf");
  auto in = inspect_dir(s->root);
  // meta-llama/Llama-2-7b-hf on the Hugging Face Hub: 6,738,415,616 parameters (safetensors
  // metadata); the 32 saved rotary inv_freq buffers are not parameters.
  EXPECT_EQ(in.params.total, 6738415616u);
  EXPECT_EQ(in.params.not_loaded.tensors, 32u);
}

TEST(PublishedCounts, Llama32_3b) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Llama-3.2-3B");
  auto in = inspect_dir(s->root);
  // meta-llama/Llama-3.2-3B model card, "Model Information" table: 3.21B parameters (tied)
  expect_rounds_to(in.params.total, 3.21e9, 0.01e9, "Llama-3.2-3B");
  EXPECT_TRUE(in.model.tied);
  EXPECT_EQ(comp(in, Component::OutputHead), 0u);
}

TEST(PublishedCounts, Llama31_8b_bnb_int8_counts_logical_parameters) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Llama-3.1-8B-Computer-Networks");
  auto in = inspect_dir(s->root);
  // meta-llama/Llama-3.1-8B: 8,030,261,248 parameters (Hub safetensors metadata, "8.03B");
  // the int8 weights, SCB and weight_format companions change bytes, not the count
  EXPECT_EQ(in.params.total, 8030261248u);
  EXPECT_TRUE(in.quant.quantized);
  EXPECT_EQ(in.quant.method, "bitsandbytes");
  // 7 Linear projections x 32 layers are int8; embed_tokens and lm_head stay float
  EXPECT_EQ(in.quant.quantized_modules, 224u);
  EXPECT_EQ(in.quant.params_by_bits.at(8), in.params.total - comp(in, Component::Embedding) -
                                               comp(in, Component::OutputHead) - comp(in, Component::Norms));
}

TEST(PublishedCounts, Qwen25_14b) {
  CKPT_REQUIRE_CORPUS();
  for (const char* dir : {"sakura-14b-qwen2.5-v1.0", "cogito-v1-preview-qwen-14B"}) {
    auto s = corpus_standin(dir);
    auto in = inspect_dir(s->root);
    // Qwen/Qwen2.5-14B model card: "Number of Parameters: 14.7B", the count truncated to 0.1B
    // (sakura keeps Qwen2.5's 152,064-row vocabulary: 14.77B; cogito's is smaller). The card's
    // "Non-Embedding: 13.1B" matches neither rounding nor truncation of the 13.21B these
    // shapes give, so it is not compared.
    EXPECT_GE(in.params.total, 14.7e9) << dir;
    EXPECT_LT(in.params.total, 14.8e9) << dir;
  }
}

TEST(PublishedCounts, Qwen3_14b_mlx_4bit_unpacks_to_the_float_count) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Qwen3-14B-MLX-4bit");
  auto in = inspect_dir(s->root);
  // Qwen/Qwen3-14B model card: "Number of Parameters: 14.8B; Non-Embedding: 13.2B"
  expect_rounds_to(in.params.total, 14.8e9, 0.1e9, "Qwen3-14B");
  expect_rounds_to(in.params.total - comp(in, Component::Embedding) - comp(in, Component::OutputHead), 13.2e9, 0.1e9,
                   "Qwen3-14B non-embedding");
  // MLX affine 4-bit, group 64, bf16 scales and biases: 4 + 2 x 16 / 64 = 4.5 bits per weight
  EXPECT_EQ(in.quant.method, "mlx");
  EXPECT_EQ(in.quant.bits, 4);
  EXPECT_EQ(in.quant.group_size, 64);
  EXPECT_DOUBLE_EQ(in.quant.effective_bits, 4.5);
  EXPECT_TRUE(in.quant.float_modules.empty());  // embed_tokens and lm_head are quantized too
}

TEST(PublishedCounts, Gemma_2b_non_embedding) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("gemma-2b-finetune");
  auto in = inspect_dir(s->root);
  // Gemma Team, "Gemma: Open Models Based on Gemini Research and Technology" (2024), Table 2:
  // 2B model, 1,981,884,416 non-embedding parameters (its embedding row counts 256,128 tokens
  // where the released config has 256,000, so only the non-embedding figure compares exactly)
  EXPECT_EQ(in.params.total - comp(in, Component::Embedding), 1981884416u);
  EXPECT_EQ(comp(in, Component::Embedding), 256000u * 2048u);
}

TEST(PublishedCounts, Gemma2_2b_non_embedding_from_the_config) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("gemma-2-2b-poem");  // config only: the registry's plan
  auto in = inspect_dir(s->root);
  // Gemma Team, "Gemma 2: Improving Open Language Models at a Practical Size" (2024), Table 2:
  // 2B model, 2,024,517,888 non-embedding parameters
  EXPECT_EQ(in.params.total - comp(in, Component::Embedding), 2024517888u);
}

TEST(PublishedCounts, Phi3_mini) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("phi-3-mini-keyformer");
  auto in = inspect_dir(s->root);
  // Abdin et al., "Phi-3 Technical Report" (2024): "phi-3-mini, a 3.8 billion parameter language model"
  expect_rounds_to(in.params.total, 3.8e9, 0.1e9, "phi-3-mini");
}

TEST(PublishedCounts, Mixtral_8x22b_total_and_active) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("WizardLM-2-8x22B");
  auto in = inspect_dir(s->root);
  // Mistral AI, "Cheaper, Better, Faster, Stronger" (2024-04-17): Mixtral 8x22B "uses only 39B
  // active parameters out of 141B"
  expect_rounds_to(in.params.total, 141e9, 1e9, "Mixtral-8x22B total");
  expect_rounds_to(in.params.active, 39e9, 1e9, "Mixtral-8x22B active");
  EXPECT_EQ(in.model.experts, 8);
  EXPECT_EQ(in.model.experts_per_token, 2);
  // active = everything but the routed experts, plus 2/8 of them
  EXPECT_EQ(in.params.active, in.params.total - comp(in, Component::RoutedExperts) +
                                  comp(in, Component::RoutedExperts) * 2 / 8);
}

TEST(PublishedCounts, Mixtral_8x7b_total_and_active) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("dolphin-2.5-mixtral-8x7b");  // config only: the registry's plan
  auto in = inspect_dir(s->root);
  // Mistral AI, "Mixtral of experts" (2023-12-11): "46.7B total parameters but only uses 12.9B
  // parameters per token" (their per-token figure includes the embedding table)
  expect_rounds_to(in.params.total, 46.7e9, 0.1e9, "Mixtral-8x7B total");
  expect_rounds_to(in.params.active, 12.9e9, 0.1e9, "Mixtral-8x7B active");
}

TEST(PublishedCounts, GptOss_20b_total_and_active) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("gpt-oss-20b");
  auto in = inspect_dir(s->root);
  // OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card" (2025-08), Table 1: gpt-oss-20b has 20.91B
  // total and 3.61B active parameters per token (active counts the unembedding, not the
  // embedding lookup)
  expect_rounds_to(in.params.total, 20.91e9, 0.01e9, "gpt-oss-20b total");
  expect_rounds_to(in.params.active_excluding_embedding, 3.61e9, 0.01e9, "gpt-oss-20b active");
  // ... Table 1's split: MLP 19.12B, attention 0.64B, embed + unembed 1.16B
  expect_rounds_to(comp(in, Component::RoutedExperts) + comp(in, Component::Mlp), 19.12e9, 0.01e9, "MLP");
  expect_rounds_to(comp(in, Component::Attention), 0.64e9, 0.01e9, "attention");
  expect_rounds_to(comp(in, Component::Embedding) + comp(in, Component::OutputHead), 1.16e9, 0.01e9, "embeddings");
  // MXFP4: 4-bit E2M1 codes plus one E8M0 byte per 32: 4 + 8/32 = 4.25 bits per weight
  EXPECT_EQ(in.quant.method, "mxfp4");
  EXPECT_DOUBLE_EQ(in.quant.effective_bits, 4.25);
}

TEST(PublishedCounts, DeepSeekV3_total_mtp_and_active) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("DeepSeek-V3-config");  // config only: 91,991 planned tensors with MTP
  auto in = inspect_dir(s->root);
  // deepseek-ai/DeepSeek-V3 model card: "685B, which includes 671B of the Main Model weights
  // and 14B of the Multi-Token Prediction (MTP) Module weights"; technical report: "671B total
  // parameters with 37B activated for each token". 685B is the Hub's count of every stored
  // element, the FP8 blocks' fp32 scales included; 14B is the difference of the two rounded
  // figures, so the MTP module is compared with the sum of its own tensors instead.
  expect_rounds_to(in.params.total - comp(in, Component::Mtp), 671e9, 1e9, "main model");
  uint64_t scale_elems = 0, mtp = 0;
  for (const auto& p : s->tensors) {
    if (p.name.ends_with(".weight_scale_inv")) scale_elems += numel(p.shape);
    if (p.name.starts_with("model.layers.61.")) mtp += logical_params(p);
  }
  expect_rounds_to(in.params.total + scale_elems, 685e9, 1e9, "all stored elements");
  EXPECT_EQ(comp(in, Component::Mtp), mtp);
  expect_rounds_to(in.params.active_excluding_embedding, 37e9, 1e9, "active");
  EXPECT_EQ(in.model.experts, 256);
  EXPECT_EQ(in.model.experts_per_token, 8);
  // FP8 block 128x128 with an fp32 scale per block: the MTP layer's experts and the FP8
  // projections make up quantized_params; bits per weight = 8 + 32 * blocks / weights
  EXPECT_EQ(in.quant.method, "fp8");
  uint64_t weights = 0, scale_bytes = 0;
  for (const auto& p : s->tensors) {
    if (p.name.ends_with(".weight_scale_inv")) scale_bytes += stored_bytes(p);
    if (p.dtype == st::DType::F8_E4M3) weights += numel(p.shape);
  }
  EXPECT_EQ(in.quant.quantized_params, weights);
  EXPECT_NEAR(in.quant.effective_bits, 8.0 + scale_bytes * 8.0 / static_cast<double>(weights), 1e-9);
}

TEST(PublishedCounts, Gemma3_1b_and_medgemma_27b) {
  CKPT_REQUIRE_CORPUS();
  // Gemma Team, "Gemma 3 Technical Report" (2025), Table 1 (vision encoder / embedding /
  // non-embedding parameters): 1B: 0 / 302M / 698M; 27B: 417M / 1,416M / 25,600M
  auto s1 = corpus_standin("gemma-3-1b-it");  // config only: the registry's plan
  auto g1 = inspect_dir(s1->root);
  expect_rounds_to(comp(g1, Component::Embedding), 302e6, 1e6, "gemma-3-1b embedding");
  expect_rounds_to(g1.params.total - comp(g1, Component::Embedding), 698e6, 1e6, "gemma-3-1b non-embedding");
  EXPECT_EQ(comp(g1, Component::Towers), 0u);
  auto s27 = corpus_standin("medgemma-27b-it");
  auto g27 = inspect_dir(s27->root);
  expect_rounds_to(g27.params.total - comp(g27, Component::Embedding) - comp(g27, Component::Towers), 25600e6, 1e6,
                   "27B non-embedding");
  // the towers component holds the SigLIP encoder and the projector: the encoder alone is 417M
  uint64_t projector = 0;
  for (const auto& p : s27->tensors)
    if (p.name.starts_with("multi_modal_projector.")) projector += numel(p.shape);
  expect_rounds_to(comp(g27, Component::Towers) - projector, 417e6, 1e6, "27B vision encoder");
  // (the report's 1,416M embedding counts more rows than the released 262,208-token vocabulary)
  EXPECT_EQ(comp(g27, Component::Embedding), 262208u * 5376u);
}

TEST(PublishedCounts, Qwen3_1_7b_tied) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Qwen3-1.7B-MLX-bf16");
  auto in = inspect_dir(s->root);
  // Qwen/Qwen3-1.7B model card: "Number of Parameters: 1.7B; Number of Parameters (Non-Embedding): 1.4B"
  expect_rounds_to(in.params.total, 1.7e9, 0.1e9, "Qwen3-1.7B");
  expect_rounds_to(in.params.total - comp(in, Component::Embedding), 1.4e9, 0.1e9, "Qwen3-1.7B non-embedding");
  EXPECT_TRUE(in.model.tied);
}

TEST(PublishedCounts, Llama31_70b_with_six_more_tokens) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Reflection-Llama-3.1-70B");
  auto in = inspect_dir(s->root);
  // meta-llama/Llama-3.1-70B: 70,553,706,496 parameters (Hub safetensors metadata, "70.6B");
  // Reflection's vocabulary has 128,262 rows instead of 128,256: 6 more in the embedding and
  // the head, 8,192 wide each
  EXPECT_EQ(in.params.total, 70553706496u + 2u * 6 * 8192);
}

TEST(PublishedCounts, Devstral_small) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Devstral-Small-2507");
  auto in = inspect_dir(s->root);
  // mistralai/Devstral-Small-2507 model card: "24 billion parameters"
  expect_rounds_to(in.params.total, 24e9, 1e9, "Devstral-Small");
}

TEST(PublishedCounts, Qwen35_reap_by_its_name) {
  CKPT_REQUIRE_CORPUS();
  auto s = corpus_standin("Qwen3.5-25B-REAP-A3B-Coding");
  auto in = inspect_dir(s->root);
  // the repo's name is the only published figure: 25B total, about 3B active (A3B); 180 of the
  // base model's experts kept, 8 per token
  expect_rounds_to(in.params.total, 25e9, 1e9, "REAP total");
  expect_rounds_to(in.params.active_excluding_embedding, 3e9, 1e9, "REAP active");
  EXPECT_EQ(in.model.experts, 180);
  EXPECT_EQ(in.model.experts_per_token, 8);
  EXPECT_GT(comp(in, Component::SharedExperts), 0u);
  EXPECT_EQ(in.params.active, in.params.total - comp(in, Component::RoutedExperts) +
                                  comp(in, Component::RoutedExperts) * 8 / 180);
}

}  // namespace
}  // namespace ckpt::test
