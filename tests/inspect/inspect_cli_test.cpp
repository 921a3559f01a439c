// `ckpt inspect` end to end on fixtures: the JSON keys scripts rely on, exit codes, and the
// quantized fixtures' effective bits against the bytes read here from the shard headers.
#include "standin.h"

namespace ckpt::test {
namespace {

std::filesystem::path make_fixture(const TempDir& tmp, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"fixture"};
  a.insert(a.end(), args.begin(), args.end());
  auto r = run_ckpt(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return tmp.path() / args.at(1);
}

json::Value inspect_json(const std::filesystem::path& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"inspect", dir.string(), "--format", "json"};
  a.insert(a.end(), extra.begin(), extra.end());
  auto r = run_ckpt(a);
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.err;
  return parse_json_text(r.out);
}

TEST(InspectCli, JsonKeysAreStable) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"llama", (tmp / "m").string()});
  json::Value j = inspect_json(dir, {"--gpu-memory", "2GiB", "--context", "100"});
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"ckpt_version", "target", "model", "parameters", "bytes", "quantization", "kv_cache", "fit", "notes"})
    EXPECT_NE(j.find(k), nullptr) << k;
  for (const char* k : {"model_type", "text_model_type", "architecture_known", "dtype", "layers", "hidden_size",
                        "attention_heads", "kv_heads", "head_dim", "vocab_size", "intermediate_size", "experts",
                        "experts_per_token", "max_position_embeddings", "tied_embeddings"})
    EXPECT_NE(j.find("model")->find(k), nullptr) << k;
  const json::Value& p = *j.find("parameters");
  for (const char* k : {"total", "active", "active_excluding_embedding", "by_component", "by_dtype", "not_loaded"})
    EXPECT_NE(p.find(k), nullptr) << k;
  for (const char* k : {"embedding", "output_head", "attention", "mlp", "routed_experts", "shared_experts", "mtp",
                        "towers", "norms", "other"}) {
    const json::Value* c = p.find("by_component")->find(k);
    ASSERT_NE(c, nullptr) << k;
    for (const char* f : {"params", "bytes", "tensors"}) EXPECT_NE(c->find(f), nullptr) << k << "." << f;
  }
  for (const char* k : {"files", "shards", "tensor_data", "in_memory", "mtp", "towers", "not_loaded"})
    EXPECT_NE(j.find("bytes")->find(k), nullptr) << k;
  for (const char* k : {"quantized", "method", "format", "bits", "group_size", "declared_exclusions", "float_modules",
                        "quantized_modules", "quantized_params", "quantized_bytes", "effective_bits_per_weight",
                        "params_by_bits"})
    EXPECT_NE(j.find("quantization")->find(k), nullptr) << k;
  const json::Value& kv = *j.find("kv_cache");
  for (const char* k : {"known", "attention", "dtype", "mla_mode", "swa_mode", "layers", "sliding_window",
                        "bytes_per_token", "bytes_per_token_beyond_window", "context", "batch", "bytes", "state",
                        "total_bytes"})
    EXPECT_NE(kv.find(k), nullptr) << k;
  for (const char* k : {"conv_bytes_per_sequence", "recurrent_bytes_per_sequence", "bytes_per_sequence", "bytes",
                        "conv_dtype", "recurrent_dtype"})
    EXPECT_NE(kv.find("state")->find(k), nullptr) << k;
  const json::Value& fit = *j.find("fit");
  for (const char* k : {"gpu_memory", "weights", "kv_cache", "state", "allowance", "required", "fits", "headroom",
                        "max_context", "max_context_limited_by"})
    EXPECT_NE(fit.find(k), nullptr) << k;
  // the fixture: 2 layers x 2 kv heads x 16 (K and V, f16) = 256 bytes per token
  EXPECT_EQ(kv.get_int("bytes_per_token"), 256);
  EXPECT_EQ(kv.get_int("bytes"), 256 * 100);
  EXPECT_EQ(fit.get_bool("fits"), true);
  EXPECT_EQ(j.find("quantization")->get_bool("quantized"), false);
  EXPECT_TRUE(j.find("quantization")->find("effective_bits_per_weight")->is_null());
}

TEST(InspectCli, ExitCodes) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"qwen3", (tmp / "m").string()});
  auto ok = run_ckpt({"inspect", dir.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("parameters"), std::string::npos);
  EXPECT_NE(ok.out.find("kv cache"), std::string::npos);
  auto tight = run_ckpt({"inspect", dir.string(), "--gpu-memory", "1MiB"});
  EXPECT_EQ(tight.exit_code, 1);  // does not fit
  EXPECT_NE(tight.out.find("does NOT fit"), std::string::npos);
  EXPECT_EQ(run_ckpt({"inspect", (tmp / "absent").string()}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"inspect", dir.string(), "--gpu-memory", "lots"}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"inspect", dir.string(), "--kv-dtype", "int3"}).exit_code, 2);
  auto empty = tmp / "empty";
  std::filesystem::create_directories(empty);
  EXPECT_EQ(run_ckpt({"inspect", empty.string()}).exit_code, 2);
}

// Sum of stored bytes and of logical parameters of the quantized modules, read here from the
// fixture's shard header: GPTQ `qweight` I32 [I*b/32, O] holds I x O weights, its module's
// qzeros, scales and g_idx are the overhead (specs/quantization-layouts.md §3).
TEST(InspectCli, GptqEffectiveBitsFromTheHeaders) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"llama", (tmp / "m").string(), "--quant", "gptq4"});
  st::Header h = st::read_header(dir / "model.safetensors");
  ASSERT_TRUE(h.parsed);
  uint64_t params = 0, bytes = 0, modules = 0;
  for (const auto& t : h.tensors) {
    const std::string n(t.name);
    for (const char* suf : {".qweight", ".qzeros", ".scales", ".g_idx"})
      if (n.ends_with(suf)) bytes += t.end - t.begin;
    if (n.ends_with(".qweight")) {
      params += t.shape[0] * 32 / 4 * t.shape[1];
      ++modules;
    }
  }
  ASSERT_GT(params, 0u);
  json::Value q = *inspect_json(dir).find("quantization");
  EXPECT_EQ(q.get_string("method"), "gptq");
  EXPECT_EQ(q.get_int("bits"), 4);
  EXPECT_EQ(q.get_int("group_size"), 32);
  EXPECT_EQ(q.get_int("quantized_modules"), static_cast<int64_t>(modules));
  EXPECT_EQ(q.get_int("quantized_params"), static_cast<int64_t>(params));
  EXPECT_EQ(q.get_int("quantized_bytes"), static_cast<int64_t>(bytes));
  EXPECT_NEAR(*q.get_number("effective_bits_per_weight"), bytes * 8.0 / params, 1e-4);
  // 4 bits + zero points 4/32 + fp16 scales 16/32 per group of 32, + the int32 g_idx per input row
  EXPECT_GT(*q.get_number("effective_bits_per_weight"), 4.0 + 0.125 + 0.5);
}

TEST(InspectCli, MlxMixedBitsRoutersAtEight) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"qwen3_moe", (tmp / "m").string(), "--quant", "mlx4"});
  json::Value j = inspect_json(dir);
  const json::Value& q = *j.find("quantization");
  const json::Value& byb = *q.find("params_by_bits");
  // the fixture's routers (mlp.gate [E=4, H=64] in 2 layers) carry per-module 8-bit entries
  EXPECT_EQ(byb.get_int("8"), 2 * 4 * 64);
  const int64_t p4 = *byb.get_int("4"), p8 = *byb.get_int("8");
  // MLX affine, fp16 scales and biases per group of 64: b + 2 x 16 / 64 bits per weight
  EXPECT_NEAR(*q.get_number("effective_bits_per_weight"), (p4 * 4.5 + p8 * 8.5) / (p4 + p8), 1e-4);
  // expert down_proj [64, 32] has in_features 32, not a multiple of the group: MLX keeps it float
  bool down_float = false;
  for (const auto& f : q.find("float_modules")->as_array())
    down_float |= f.get_string("pattern") == "model.layers.*.mlp.experts.*.down_proj";
  EXPECT_TRUE(down_float);
  // 4 experts, 2 per token: active = total - routed + routed * 2 / 4
  const json::Value& p = *j.find("parameters");
  const int64_t routed = *p.find("by_component")->find("routed_experts")->get_int("params");
  EXPECT_EQ(p.get_int("active"), *p.get_int("total") - routed + routed * 2 / 4);
}

TEST(InspectCli, Fp8DeepSeekFixture) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"deepseek_v3", (tmp / "m").string(), "--quant", "fp8"});
  json::Value j = inspect_json(dir);
  const json::Value& kv = *j.find("kv_cache");
  const json::Value& cfg = parse_json_text(read_text(dir / "config.json"));
  const int64_t L = *cfg.get_int("num_hidden_layers"), r = *cfg.get_int("kv_lora_rank"),
                rope = *cfg.get_int("qk_rope_head_dim");
  EXPECT_EQ(kv.get_string("attention"), "mla");
  EXPECT_EQ(kv.get_int("bytes_per_token"), L * (r + rope) * 2);  // f16 fixture
  EXPECT_EQ(j.find("quantization")->get_string("method"), "fp8");
  EXPECT_GT(*j.find("quantization")->get_number("effective_bits_per_weight"), 8.0);
}

// --engine: the MLA cache as each engine lays it out. transformers caches per-head K
// (nope + rope) and V after kv_b_proj; vLLM, SGLang, mlx-lm and llama.cpp cache the latent.
// An explicit --mla still wins; an engine without KV facts is a usage error.
TEST(InspectCli, EngineChoosesTheMlaLayout) {
  TempDir tmp;
  auto dir = make_fixture(tmp, {"deepseek_v3", (tmp / "m").string()});
  const json::Value cfg = parse_json_text(read_text(dir / "config.json"));
  const int64_t L = *cfg.get_int("num_hidden_layers"), r = *cfg.get_int("kv_lora_rank"),
                rope = *cfg.get_int("qk_rope_head_dim"), nope = *cfg.get_int("qk_nope_head_dim"),
                v = *cfg.get_int("v_head_dim"), nh = *cfg.get_int("num_attention_heads");
  const int64_t latent = L * (r + rope) * 2, full = L * nh * (nope + rope + v) * 2;  // f16 fixture
  for (const char* e : {"vllm", "sglang", "mlx-lm", "llama.cpp"}) {
    json::Value j = inspect_json(dir, {"--engine", e});
    EXPECT_EQ(j.find("kv_cache")->get_int("bytes_per_token"), latent) << e;
    EXPECT_EQ(j.get_string("engine").value_or(""), std::string(e));
  }
  json::Value t = inspect_json(dir, {"--engine", "hf"});  // an alias of transformers
  EXPECT_EQ(t.find("kv_cache")->get_int("bytes_per_token"), full);
  EXPECT_EQ(t.get_string("engine").value_or(""), "transformers");
  EXPECT_EQ(inspect_json(dir, {"--engine", "transformers", "--mla", "latent"}).find("kv_cache")->get_int("bytes_per_token"),
            latent);
  EXPECT_TRUE(inspect_json(dir).find("engine")->is_null());
  auto bad = run_ckpt({"inspect", dir.string(), "--engine", "tgi"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no KV-cache facts"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ckpt::test

namespace ckpt::test {
namespace {

// Logical parameters do not depend on how the weights are stored: every scheme the fixture
// generator really packs unpacks to the float checkpoint's count, component by component.
TEST(InspectCli, EverySchemeUnpacksToTheFloatCount) {
  for (const char* arch : {"llama", "qwen3_moe"}) {
    TempDir tmp;
    json::Value base = inspect_json(make_fixture(tmp, {arch, (tmp / "float").string()}));
    const json::Value& want = *base.find("parameters");
    for (const char* scheme : {"mlx4", "mlx8", "ct-int4", "gptq4", "fp8"}) {
      const std::string out = (tmp / scheme).string();
      json::Value j = inspect_json(make_fixture(tmp, {arch, out, "--quant", scheme}));
      const json::Value& got = *j.find("parameters");
      EXPECT_EQ(got.get_int("total"), want.get_int("total")) << arch << " " << scheme;
      EXPECT_EQ(got.get_int("active"), want.get_int("active")) << arch << " " << scheme;
      for (const auto& [comp, t] : want.find("by_component")->as_object())
        EXPECT_EQ(got.find("by_component")->find(comp)->get_int("params"), t.get_int("params"))
            << arch << " " << scheme << " " << comp;
      EXPECT_EQ(j.find("quantization")->get_bool("quantized"), true) << scheme;
      EXPECT_GT(*j.find("quantization")->get_int("quantized_modules"), 0) << scheme;
    }
  }
}

}  // namespace
}  // namespace ckpt::test

namespace ckpt::test {
namespace {

TEST(InspectCli, TensorsWithoutAConfig) {
  TempDir tmp;
  write_shards(tmp.path(), {{"a.weight", "model.safetensors", st::DType::BF16, {4, 8}},
                            {"b.weight", "model.safetensors", st::DType::F32, {3}}});
  auto r = run_ckpt({"inspect", tmp.path().string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json::Value j = parse_json_text(r.out);
  EXPECT_EQ(j.find("parameters")->get_int("total"), 4 * 8 + 3);
  EXPECT_EQ(j.find("kv_cache")->get_bool("known"), false);
  EXPECT_EQ(j.find("model")->get_bool("architecture_known"), false);
  EXPECT_FALSE(j.find("notes")->as_array().empty());  // "no config.json"
}

TEST(InspectCli, ImplausibleDimsGiveNoEstimateInsteadOfOverflowing) {
  // a config whose head sizes would overflow 64 bits when multiplied: no KV estimate, no crash
  const json::Value cfg = parse_json_text(R"({"model_type": "somethingnew", "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 4000000000000, "head_dim": 4000000000000})");
  const arch::ConfigView view = arch::resolve_config(cfg);
  EXPECT_FALSE(inspect::kv_layout(view).known);
}

}  // namespace
}  // namespace ckpt::test
