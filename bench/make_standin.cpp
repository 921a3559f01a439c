// Writes sparse, header-only stand-ins of large checkpoints: every shard has its real
// header and its full size, but the tensor bytes are holes, so a 688 GB checkpoint
// costs a few MB of disk. Used by bench/verify_bench.py.
//
//   make_standin deepseek-v3 OUT_DIR [--defect truncate|stray|duplicate]
//   make_standin from-index INDEX_JSON OUT_DIR [--config CONFIG_JSON] [--defect ...]
//                                        (with --config: the registry's shapes for that config and its quantization)
//   make_standin moe TENSORS OUT_DIR     a Qwen3-MoE-style FP8 checkpoint of about TENSORS
//                                        tensors (256 per-expert experts per layer; layers
//                                        added until the count is reached), with config.json
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "ckpt/safetensors.h"

namespace fs = std::filesystem;
using ckpt::st::DType;

struct Planned {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
};

static void add_fp8_linear(std::vector<Planned>& v, const std::string& name, uint64_t out, uint64_t in) {
  v.push_back({name + ".weight", DType::F8_E4M3, {out, in}});
  v.push_back({name + ".weight_scale_inv", DType::F32, {(out + 127) / 128, (in + 127) / 128}});
}

// DeepSeek-V3's tensor set (61 layers, 3 dense, 256 routed experts, MLA, FP8 block 128x128, one MTP layer).
static std::vector<Planned> deepseek_v3() {
  const uint64_t H = 7168, V = 129280, I = 18432, MI = 2048, E = 256;
  std::vector<Planned> v;
  v.push_back({"model.embed_tokens.weight", DType::BF16, {V, H}});
  v.push_back({"model.norm.weight", DType::BF16, {H}});
  v.push_back({"lm_head.weight", DType::BF16, {V, H}});
  for (int l = 0; l <= 61; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    v.push_back({p + "input_layernorm.weight", DType::BF16, {H}});
    v.push_back({p + "post_attention_layernorm.weight", DType::BF16, {H}});
    add_fp8_linear(v, p + "self_attn.q_a_proj", 1536, H);
    v.push_back({p + "self_attn.q_a_layernorm.weight", DType::BF16, {1536}});
    add_fp8_linear(v, p + "self_attn.q_b_proj", 128 * 192, 1536);
    add_fp8_linear(v, p + "self_attn.kv_a_proj_with_mqa", 576, H);
    v.push_back({p + "self_attn.kv_a_layernorm.weight", DType::BF16, {512}});
    add_fp8_linear(v, p + "self_attn.kv_b_proj", 128 * 256, 512);
    add_fp8_linear(v, p + "self_attn.o_proj", H, 128 * 128);
    if (l < 3) {
      add_fp8_linear(v, p + "mlp.gate_proj", I, H);
      add_fp8_linear(v, p + "mlp.up_proj", I, H);
      add_fp8_linear(v, p + "mlp.down_proj", H, I);
    } else {
      v.push_back({p + "mlp.gate.weight", DType::BF16, {E, H}});
      v.push_back({p + "mlp.gate.e_score_correction_bias", DType::F32, {E}});
      for (uint64_t e = 0; e < E; ++e) {
        std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
        add_fp8_linear(v, ep + "gate_proj", MI, H);
        add_fp8_linear(v, ep + "up_proj", MI, H);
        add_fp8_linear(v, ep + "down_proj", H, MI);
      }
      add_fp8_linear(v, p + "mlp.shared_experts.gate_proj", MI, H);
      add_fp8_linear(v, p + "mlp.shared_experts.up_proj", MI, H);
      add_fp8_linear(v, p + "mlp.shared_experts.down_proj", H, MI);
    }
    if (l == 61) {  // the multi-token-prediction layer
      v.push_back({p + "embed_tokens.weight", DType::BF16, {V, H}});
      v.push_back({p + "enorm.weight", DType::BF16, {H}});
      v.push_back({p + "hnorm.weight", DType::BF16, {H}});
      v.push_back({p + "eh_proj.weight", DType::BF16, {H, 2 * H}});
      v.push_back({p + "shared_head.norm.weight", DType::BF16, {H}});
      v.push_back({p + "shared_head.head.weight", DType::BF16, {V, H}});
    }
  }
  return v;
}

// A Qwen3-MoE-style checkpoint (transformers' per-expert layout) with FP8 128x128 block
// weights, as Qwen3 FP8 releases ship them: 256 experts per layer, layers added until about
// `target` tensors. Returns the layer count through `layers`.
static std::vector<Planned> scaled_moe(uint64_t target, uint64_t& layers) {
  const uint64_t H = 2048, V = 151936, MI = 768, E = 256, NH = 32, KV = 4, HD = 128;
  const uint64_t per_layer = 2 * 4 + 2 + 2 + 1 + E * 3 * 2;  // attn q/k/v/o (+scales), norms, q/k norm, router, experts
  layers = std::max<uint64_t>(1, (target > 3 ? target - 3 : 0) / per_layer);
  std::vector<Planned> v;
  v.reserve(layers * per_layer + 3);
  v.push_back({"model.embed_tokens.weight", DType::BF16, {V, H}});
  v.push_back({"model.norm.weight", DType::BF16, {H}});
  v.push_back({"lm_head.weight", DType::BF16, {V, H}});
  for (uint64_t l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    v.push_back({p + "input_layernorm.weight", DType::BF16, {H}});
    v.push_back({p + "post_attention_layernorm.weight", DType::BF16, {H}});
    add_fp8_linear(v, p + "self_attn.q_proj", NH * HD, H);
    add_fp8_linear(v, p + "self_attn.k_proj", KV * HD, H);
    add_fp8_linear(v, p + "self_attn.v_proj", KV * HD, H);
    add_fp8_linear(v, p + "self_attn.o_proj", H, NH * HD);
    v.push_back({p + "self_attn.q_norm.weight", DType::BF16, {HD}});
    v.push_back({p + "self_attn.k_norm.weight", DType::BF16, {HD}});
    v.push_back({p + "mlp.gate.weight", DType::BF16, {E, H}});
    for (uint64_t e = 0; e < E; ++e) {
      std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      add_fp8_linear(v, ep + "gate_proj", MI, H);
      add_fp8_linear(v, ep + "up_proj", MI, H);
      add_fp8_linear(v, ep + "down_proj", H, MI);
    }
  }
  return v;
}

static void write_scaled_moe_config(const fs::path& out, uint64_t layers) {
  std::ofstream(out / "config.json") << R"({
  "architectures": ["Qwen3MoeForCausalLM"],
  "model_type": "qwen3_moe",
  "hidden_size": 2048,
  "intermediate_size": 6144,
  "moe_intermediate_size": 768,
  "num_hidden_layers": )" << layers << R"(,
  "num_attention_heads": 32,
  "num_key_value_heads": 4,
  "head_dim": 128,
  "num_experts": 256,
  "num_experts_per_tok": 8,
  "decoder_sparse_step": 1,
  "mlp_only_layers": [],
  "norm_topk_prob": true,
  "vocab_size": 151936,
  "max_position_embeddings": 40960,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]},
  "transformers_version": "4.51.0"
}
)";
}

// Shapes for names taken from a real index, when only the names are known: plausible and
// consistent, which is all a structural benchmark needs.
static Planned guess(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("norm") || has("bias") || has("A_log") || has("dt_bias")) return {name, DType::BF16, {2048}};
  if (has("embed_tokens") || has("lm_head")) return {name, DType::BF16, {151936, 2048}};
  if (has("experts.")) return {name, DType::BF16, {512, 2048}};
  return {name, DType::BF16, {2048, 2048}};
}

static std::string write_index(const fs::path& out, const std::vector<std::pair<std::string, std::string>>& map,
                               uint64_t total) {
  std::string j = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) + "},\n  \"weight_map\": {\n";
  for (size_t i = 0; i < map.size(); ++i) {
    j += "    " + ckpt::json::quoted(map[i].first) + ": " + ckpt::json::quoted(map[i].second);
    j += i + 1 < map.size() ? ",\n" : "\n";
  }
  j += "  }\n}\n";
  std::ofstream(out / "model.safetensors.index.json") << j;
  return {};
}

static std::string read_text(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_standin deepseek-v3 OUT_DIR [--defect D] | from-index INDEX OUT_DIR [--config C] [--defect D] | "
                         "moe TENSORS OUT_DIR [--defect D]\n");
    return 2;
  }
  std::string mode = argv[1];
  std::vector<Planned> tensors;
  std::vector<std::string> shard_of;  // parallel to tensors
  uint64_t scaled_layers = 0;         // mode moe: the layer count written to config.json
  fs::path out;
  int argi;
  if (mode == "deepseek-v3") {
    out = argv[2];
    argi = 3;
    tensors = deepseek_v3();
    const size_t shards = 163;
    size_t per = (tensors.size() + shards - 1) / shards;
    for (size_t i = 0; i < tensors.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i / per + 1, shards);
      shard_of.push_back(buf);
    }
  } else if (mode == "from-index" && argc >= 4) {
    out = argv[3];
    argi = 4;
    auto r = ckpt::json::parse(read_text(argv[2]));
    const ckpt::json::Value* wm = r.ok() ? r.value.find("weight_map") : nullptr;
    if (!wm || !wm->is_object()) {
      std::fprintf(stderr, "make_standin: %s has no weight_map\n", argv[2]);
      return 2;
    }
    // With --config, each name the registry plans for that config gets the planned shape and
    // dtype (a clean checkpoint of that model, as a download is); other names are guessed.
    std::map<std::string, Planned, std::less<>> planned;
    for (int i = 4; i + 1 < argc; ++i)
      if (!std::strcmp(argv[i], "--config")) {
        auto cfg = ckpt::json::parse(read_text(argv[i + 1]));
        if (!cfg.ok()) {
          std::fprintf(stderr, "make_standin: %s is not JSON\n", argv[i + 1]);
          return 2;
        }
        auto view = ckpt::arch::resolve_config(cfg.value, [&](std::string_view n) { return wm->find(n) != nullptr; });
        const auto scheme = ckpt::quant::parse_scheme(cfg.value);
        for (const auto& x : ckpt::arch::expected_tensors(view, scheme ? &*scheme : nullptr))
          planned[std::string(x.name)] = {std::string(x.name), ckpt::arch::resolve_dtype(x.dtype, view.model_dtype), x.shape};
      }
    for (const auto& [name, file] : wm->as_object()) {
      auto it = planned.find(name);
      tensors.push_back(it != planned.end() ? it->second : guess(name));
      shard_of.push_back(file.as_string());
    }
  } else if (mode == "moe" && argc >= 4) {
    out = argv[3];
    argi = 4;
    tensors = scaled_moe(std::strtoull(argv[2], nullptr, 10), scaled_layers);
    const size_t per = 2000;  // tensors per shard: headers of ~250 KB, as real shards have
    const size_t shards = (tensors.size() + per - 1) / per;
    for (size_t i = 0; i < tensors.size(); ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i / per + 1, shards);
      shard_of.push_back(buf);
    }
  } else {
    std::fprintf(stderr, "make_standin: unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (out.empty() || out.string()[0] == '-') {  // an option where OUT_DIR belongs: never write there
    std::fprintf(stderr, "make_standin: OUT_DIR must come before the options (got %s)\n", out.c_str());
    return 2;
  }
  std::string defect;
  for (int i = argi; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--defect")) defect = argv[i + 1];

  fs::create_directories(out);
  std::map<std::string, std::vector<ckpt::st::TensorToWrite>> by_shard;
  std::vector<std::pair<std::string, std::string>> map;
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    by_shard[shard_of[i]].push_back({tensors[i].name, tensors[i].dtype, tensors[i].shape, {}});
    map.emplace_back(tensors[i].name, shard_of[i]);
    total += *ckpt::st::tensor_nbytes(tensors[i].dtype, tensors[i].shape);
  }
  if (defect == "duplicate") {  // a superseded copy of one tensor left in the last shard
    auto& last = by_shard.rbegin()->second;
    last.push_back(by_shard.begin()->second.front());
  }
  for (auto& [file, ts] : by_shard) {
    if (auto e = ckpt::st::write_file(out / file, ts); !e.empty()) {
      std::fprintf(stderr, "make_standin: %s\n", e.c_str());
      return 1;
    }
  }
  write_index(out, map, total);
  if (mode == "moe") write_scaled_moe_config(out, scaled_layers);
  if (defect == "truncate") {  // the middle shard loses its last 300 MB
    fs::path victim = out / std::next(by_shard.begin(), static_cast<long>(by_shard.size() / 2))->first;
    auto size = fs::file_size(victim);
    fs::resize_file(victim, size > (300u << 20) ? size - (300u << 20) : size / 2);
  } else if (defect == "stray") {
    ckpt::st::write_file(out / "extra-not-in-index.safetensors", {{"not_a_real_module.weight", DType::F16, {8, 8}, {}}});
  }
  std::printf("%s: %zu tensors in %zu shards, %llu bytes declared\n", out.c_str(), tensors.size(), by_shard.size(),
              static_cast<unsigned long long>(total));
  return 0;
}
