// KV-cache bytes per token and per context, computed here by hand with the formula written out,
// from the real configs of corpus/configs where present, else from the fields of the model's
// published config.json (named per test).
#include "standin.h"

namespace ckpt::test {
namespace {

struct Kv {
  inspect::KvLayout layout;
  inspect::KvCache cache;
};

Kv kv_of(const json::Value& cfg, uint64_t context, uint64_t batch = 1, inspect::KvOptions o = {}) {
  Kv k;
  // the view keeps pointers into the config: keep it alive for the call
  const arch::ConfigView view = arch::resolve_config(cfg);
  k.layout = inspect::kv_layout(view);
  k.cache = inspect::kv_cache(k.layout, o, view.model_dtype == st::DType::BF16 ? "bf16" : "f16", context, batch);
  return k;
}

json::Value corpus_config(const std::string& dir) {
  return parse_json_text(read_text(corpus_dir() / "configs" / dir / "config.json"));
}

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;

TEST(KvCache, Llama31_8b_gqa) {
  CKPT_REQUIRE_CORPUS();
  // the corpus copy of meta-llama/Llama-3.1-8B's config (a fine-tune's folder, same dims)
  const json::Value cfg = corpus_config("Llama-3.1-8B-Computer-Networks");
  inspect::KvOptions o;
  o.dtype = "f16";
  Kv k = kv_of(cfg, 131072, 1, o);
  ASSERT_TRUE(k.cache.known);
  EXPECT_EQ(k.cache.attention, "gqa");
  // 2 (K and V) x 32 layers x 8 kv heads x 128 head dim x 2 bytes
  EXPECT_EQ(k.cache.bytes_per_token, 2u * 32 * 8 * 128 * 2);
  EXPECT_EQ(k.cache.bytes_per_token, 131072u);
  EXPECT_EQ(k.cache.bytes_per_token_beyond_window, 131072u);
  EXPECT_EQ(k.cache.bytes, 131072ull * 131072u);  // 16 GiB for the full 128k context
  EXPECT_EQ(k.cache.bytes, 16 * GiB);
  // batch 4 at 8k: 4 x 8192 x 131072
  EXPECT_EQ(kv_of(cfg, 8192, 4, o).cache.bytes, 4ull * 8192 * 131072);
  // other cache dtypes: fp8 1 byte; q8_0 34 bytes and q4_0 18 bytes per block of 32 (ggml)
  o.dtype = "fp8";
  EXPECT_EQ(kv_of(cfg, 1, 1, o).cache.bytes_per_token, 2u * 32 * 1024 * 1);
  o.dtype = "q8_0";
  EXPECT_EQ(kv_of(cfg, 1, 1, o).cache.bytes_per_token, 2u * 32 * (1024 / 32) * 34);
  o.dtype = "q4_0";
  EXPECT_EQ(kv_of(cfg, 1, 1, o).cache.bytes_per_token, 2u * 32 * (1024 / 32) * 18);
  o.dtype = "bf16";
  EXPECT_EQ(kv_of(cfg, 1, 1, o).cache.bytes_per_token, 131072u);
}

TEST(KvCache, Mistral7b_v01_sliding_window_on_every_layer) {
  // mistralai/Mistral-7B-v0.1 config.json (the fields that size the cache)
  const json::Value cfg = parse_json_text(R"({"model_type": "mistral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
      "max_position_embeddings": 32768, "torch_dtype": "bfloat16"})");
  Kv k = kv_of(cfg, 32768);
  EXPECT_EQ(k.cache.sliding_layers, 32u);
  EXPECT_EQ(k.cache.full_layers, 0u);
  // 2 x 32 layers x 8 kv heads x (4096 / 32 = 128) x 2 bytes
  EXPECT_EQ(k.cache.bytes_per_token, 2u * 32 * 8 * 128 * 2);
  EXPECT_EQ(k.cache.bytes_per_token_beyond_window, 0u);  // every layer stops at the window
  EXPECT_EQ(k.cache.bytes, 4096u * 131072u);             // 512 MiB whatever the context
  EXPECT_EQ(k.cache.bytes, 512 * MiB);
  EXPECT_EQ(kv_of(cfg, 1000).cache.bytes, 1000u * 131072u);
  inspect::KvOptions full;
  full.swa_full = true;  // an engine that allocates the whole context for windowed layers
  EXPECT_EQ(kv_of(cfg, 32768, 1, full).cache.bytes, 32768ull * 131072u);
}

TEST(KvCache, Mistral7b_v03_has_no_window) {
  // mistralai/Mistral-7B-v0.3 config.json: "sliding_window": null
  const json::Value cfg = parse_json_text(R"({"model_type": "mistral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "vocab_size": 32768, "sliding_window": null,
      "max_position_embeddings": 32768, "torch_dtype": "bfloat16"})");
  Kv k = kv_of(cfg, 32768);
  EXPECT_EQ(k.cache.full_layers, 32u);
  EXPECT_EQ(k.cache.bytes, 32768ull * 131072u);
}

TEST(KvCache, Qwen25_7b_window_off) {
  // Qwen/Qwen2.5-7B config.json: sliding_window 131072 but use_sliding_window false
  const json::Value cfg = parse_json_text(R"({"model_type": "qwen2", "hidden_size": 3584,
      "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
      "num_key_value_heads": 4, "vocab_size": 152064, "sliding_window": 131072,
      "use_sliding_window": false, "max_window_layers": 28, "max_position_embeddings": 131072,
      "torch_dtype": "bfloat16"})");
  Kv k = kv_of(cfg, 32768);
  EXPECT_EQ(k.cache.sliding_layers, 0u);
  // 2 x 28 layers x 4 kv heads x (3584 / 28 = 128) x 2 bytes
  EXPECT_EQ(k.cache.bytes_per_token, 2u * 28 * 4 * 128 * 2);
  EXPECT_EQ(k.cache.bytes_per_token, 57344u);
  EXPECT_EQ(k.cache.bytes, 32768u * 57344u);
}

TEST(KvCache, Qwen25_14b_corpus) {
  CKPT_REQUIRE_CORPUS();
  Kv k = kv_of(corpus_config("sakura-14b-qwen2.5-v1.0"), 1);
  // 2 x 48 layers x 8 kv heads x (5120 / 40 = 128) x 2 bytes (float16)
  EXPECT_EQ(k.cache.bytes_per_token, 2u * 48 * 8 * 128 * 2);
  EXPECT_EQ(k.cache.dtype, "f16");
}

TEST(KvCache, Gemma2_9b_alternating_sliding_layers) {
  // google/gemma-2-9b config.json: 42 layers, even ones slide over 4096 tokens (Gemma2Config)
  const json::Value cfg = parse_json_text(R"({"model_type": "gemma2", "hidden_size": 3584,
      "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16,
      "num_key_value_heads": 8, "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096,
      "max_position_embeddings": 8192, "torch_dtype": "float32"})");
  Kv k = kv_of(cfg, 8192);
  EXPECT_EQ(k.cache.sliding_layers, 21u);
  EXPECT_EQ(k.cache.full_layers, 21u);
  EXPECT_EQ(k.cache.sliding_window, 4096u);
  const uint64_t layer = 2u * 8 * 256 * 2;  // K and V, 8 kv heads x 256, f16: 8192 B per layer per token
  EXPECT_EQ(k.cache.bytes_per_token, 42 * layer);
  EXPECT_EQ(k.cache.bytes_per_token, 344064u);
  EXPECT_EQ(k.cache.bytes_per_token_beyond_window, 21 * layer);
  // 21 full layers x 8192 tokens + 21 sliding layers x 4096 tokens
  EXPECT_EQ(k.cache.bytes, 21 * layer * 8192 + 21 * layer * 4096);
  EXPECT_EQ(k.cache.bytes, 2113929216u);
  // within the window every layer grows
  EXPECT_EQ(kv_of(cfg, 4096).cache.bytes, 42 * layer * 4096);
}

TEST(KvCache, Gemma2_2b_corpus) {
  CKPT_REQUIRE_CORPUS();
  Kv k = kv_of(corpus_config("gemma-2-2b-poem"), 8192);
  // 26 layers (13 sliding over 4096), 4 kv heads x 256, bf16
  const uint64_t layer = 2u * 4 * 256 * 2;
  EXPECT_EQ(k.cache.bytes_per_token, 26 * layer);
  EXPECT_EQ(k.cache.bytes, 13 * layer * 8192 + 13 * layer * 4096);
}

TEST(KvCache, Gemma3_1b_pattern_of_six) {
  CKPT_REQUIRE_CORPUS();
  Kv k = kv_of(corpus_config("gemma-3-1b-it"), 32768);
  // sliding_window_pattern 6: layers 5, 11, 17, 23 are global, the other 22 slide over 512
  EXPECT_EQ(k.cache.full_layers, 4u);
  EXPECT_EQ(k.cache.sliding_layers, 22u);
  const uint64_t layer = 2u * 1 * 256 * 2;  // MQA: one kv head of 256
  EXPECT_EQ(k.cache.attention, "mqa + sliding window");
  EXPECT_EQ(k.cache.bytes_per_token, 26 * layer);
  EXPECT_EQ(k.cache.bytes, 4 * layer * 32768 + 22 * layer * 512);
}

TEST(KvCache, GptOss_20b) {
  CKPT_REQUIRE_CORPUS();
  Kv k = kv_of(corpus_config("gpt-oss-20b"), 131072);
  // layer_types alternate sliding (window 128) / full over 24 layers; 8 kv heads x 64, bf16
  EXPECT_EQ(k.cache.sliding_layers, 12u);
  EXPECT_EQ(k.cache.full_layers, 12u);
  const uint64_t layer = 2u * 8 * 64 * 2;  // 2048 B
  EXPECT_EQ(k.cache.bytes_per_token, 24 * layer);
  EXPECT_EQ(k.cache.bytes_per_token, 49152u);
  EXPECT_EQ(k.cache.bytes_per_token_beyond_window, 24576u);
  EXPECT_EQ(k.cache.bytes, 12 * layer * 131072 + 12 * layer * 128);
  EXPECT_EQ(k.cache.bytes, 3224371200u);
}

TEST(KvCache, DeepSeekV3_mla_latent_and_full) {
  CKPT_REQUIRE_CORPUS();
  const json::Value cfg = corpus_config("DeepSeek-V3-config");
  Kv k = kv_of(cfg, 163840);
  EXPECT_EQ(k.cache.attention, "mla");
  EXPECT_EQ(k.cache.mla_layers, 61u);  // the MTP layer caches nothing without speculative decoding
  EXPECT_EQ(k.cache.mla_mode, "latent");
  // 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 bytes (bf16)
  EXPECT_EQ(k.cache.bytes_per_token, 61u * (512 + 64) * 2);
  EXPECT_EQ(k.cache.bytes_per_token, 70272u);
  EXPECT_EQ(k.cache.bytes, 70272ull * 163840);
  inspect::KvOptions full;
  full.mla_full = true;
  // 61 x (K: 128 heads x (128 nope + 64 rope) + V: 128 heads x 128) x 2 bytes
  EXPECT_EQ(kv_of(cfg, 1, 1, full).cache.bytes_per_token, 61u * (128 * (128 + 64) + 128 * 128) * 2);
  EXPECT_EQ(kv_of(cfg, 1, 1, full).cache.bytes_per_token, 4997120u);
}

TEST(KvCache, Qwen35_9b_hybrid_state) {
  CKPT_REQUIRE_CORPUS();
  Kv k = kv_of(corpus_config("Qwen3.5-9B-multimodal"), 262144, 2);
  // layer_types: every 4th of 32 layers is full attention (8), the rest Gated DeltaNet (24)
  EXPECT_EQ(k.cache.full_layers, 8u);
  EXPECT_EQ(k.cache.linear_layers, 24u);
  // 2 x 8 layers x 4 kv heads x 256 x 2 bytes
  EXPECT_EQ(k.cache.bytes_per_token, 2u * 8 * 4 * 256 * 2);
  EXPECT_EQ(k.cache.bytes_per_token, 32768u);
  EXPECT_EQ(k.cache.bytes, 2ull * 262144 * 32768);
  // per linear layer and sequence: conv state (kernel 4 - 1) x (2 x 16 key heads x 128 + 32 value
  // heads x 128) channels in bf16, and the recurrent state 32 value heads x 128 x 128 in float32
  // (the config's mamba_ssm_dtype)
  EXPECT_EQ(k.cache.state_conv_bytes, 24u * 3 * (2 * 16 * 128 + 32 * 128) * 2);
  EXPECT_EQ(k.cache.state_recurrent_bytes, 24u * 32 * 128 * 128 * 4);
  EXPECT_EQ(k.cache.state_recurrent_dtype, "f32");
  EXPECT_EQ(k.cache.state_bytes_per_sequence, 51511296u);
  EXPECT_EQ(k.cache.state_bytes, 2u * 51511296u);
  EXPECT_EQ(k.cache.total_bytes, k.cache.bytes + k.cache.state_bytes);
  inspect::KvOptions o;
  o.state_dtype = "bf16";
  EXPECT_EQ(kv_of(corpus_config("Qwen3.5-9B-multimodal"), 1, 1, o).cache.state_recurrent_bytes,
            24u * 32 * 128 * 128 * 2);
}

TEST(KvCache, Qwen35_moe_interval_rule) {
  CKPT_REQUIRE_CORPUS();
  json::Value cfg = corpus_config("Qwen3.5-25B-REAP-A3B-Coding");
  // without layer_types the registry's rule decides: full iff (i + 1) % full_attention_interval == 0
  json::Object o = cfg.as_object();
  std::erase_if(o, [](const json::Member& m) { return m.first == "layer_types"; });
  for (const json::Value& c : {cfg, json::Value(o)}) {
    Kv k = kv_of(c, 4096);
    EXPECT_EQ(k.cache.full_layers, 10u);  // 40 layers, interval 4
    EXPECT_EQ(k.cache.linear_layers, 30u);
    EXPECT_EQ(k.cache.bytes_per_token, 2u * 10 * 2 * 256 * 2);  // 2 kv heads x 256, f16
    EXPECT_EQ(k.cache.state_bytes_per_sequence, 30u * 3 * 8192 * 2 + 30u * 32 * 128 * 128 * 4);
  }
}

TEST(KvCache, KvSharedLayersStoreNothing) {
  // a gemma3n text config (fields of Gemma3nTextConfig): the last num_kv_shared_layers read the
  // cache of an earlier layer of their type and allocate none of their own
  const json::Value cfg = parse_json_text(R"({"model_type": "gemma3n_text", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 6, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 300, "vocab_size_per_layer_input": 300,
      "hidden_size_per_layer_input": 8, "num_kv_shared_layers": 2, "sliding_window": 32,
      "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "sliding_attention", "full_attention"],
      "torch_dtype": "bfloat16"})");
  Kv k = kv_of(cfg, 100);
  EXPECT_EQ(k.cache.kv_shared_layers, 2u);  // layers 4 and 5
  EXPECT_EQ(k.cache.sliding_layers, 3u);    // 0, 1, 3
  EXPECT_EQ(k.cache.full_layers, 1u);       // 2
  const uint64_t layer = 2u * 2 * 16 * 2;
  EXPECT_EQ(k.cache.bytes_per_token, 4 * layer);
  EXPECT_EQ(k.cache.bytes, 1 * layer * 100 + 3 * layer * 32);
}

TEST(KvCache, Phi3_window_beyond_the_context) {
  CKPT_REQUIRE_CORPUS();
  // phi-3-mini-128k: sliding_window 262144 on every layer, more than max_position_embeddings
  Kv k = kv_of(corpus_config("phi-3-mini-keyformer"), 131072);
  EXPECT_EQ(k.cache.attention, "mha + sliding window");
  EXPECT_EQ(k.cache.bytes, 131072ull * 2 * 32 * 32 * 96 * 2);
}

TEST(KvCache, RowBytes) {
  EXPECT_EQ(inspect::row_bytes("f32", 10), 40u);
  EXPECT_EQ(inspect::row_bytes("bf16", 10), 20u);
  EXPECT_EQ(inspect::row_bytes("fp8", 10), 10u);
  EXPECT_EQ(inspect::row_bytes("q8_0", 64), 68u);
  EXPECT_EQ(inspect::row_bytes("q4_0", 64), 36u);
  EXPECT_EQ(inspect::row_bytes("q4_0", 65), 54u);  // a partial block occupies a whole block
}

TEST(KvCache, UnknownArchitectureUsesTheGenericFields) {
  const json::Value cfg = parse_json_text(R"({"model_type": "somethingnew", "hidden_size": 512,
      "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2})");
  Kv k = kv_of(cfg, 10);
  ASSERT_TRUE(k.cache.known);
  EXPECT_EQ(k.cache.bytes_per_token, 3u * 2 * 2 * 64 * 2);
  EXPECT_FALSE(k.layout.notes.empty());
  Kv none = kv_of(parse_json_text(R"({"model_type": "x"})"), 10);
  EXPECT_FALSE(none.cache.known);
  EXPECT_EQ(none.cache.bytes, 0u);
}

}  // namespace
}  // namespace ckpt::test
