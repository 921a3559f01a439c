// Writes a sparse, header-only stand-in of a sharded PyTorch checkpoint: Llama-2-7B's tensor
// set (F16, 291 tensors, 13.5 GB declared) as torch.save zip shards of at most ~2 GB with real
// pickles and zip directories but holes for the storages, plus pytorch_model.bin.index.json and
// config.json. Used by bench/pickle_bench.py.
//
//   make_pickle_standin OUT_DIR [--layers N]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/pytorch_writer.h"

namespace fs = std::filesystem;
using ckpt::DType;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_pickle_standin OUT_DIR [--layers N]\n");
    return 2;
  }
  const fs::path out = argv[1];
  uint64_t layers = 32;
  for (int i = 2; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--layers")) layers = std::stoull(argv[i + 1]);
  const uint64_t H = 4096, V = 32000, I = 11008;
  std::vector<ckpt::pt::TensorToSave> all;
  auto add = [&](std::string n, std::vector<uint64_t> shape) { all.push_back({std::move(n), DType::F16, std::move(shape), {}}); };
  add("model.embed_tokens.weight", {V, H});
  for (uint64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) add(p + "self_attn." + m + ".weight", {H, H});
    add(p + "mlp.gate_proj.weight", {I, H});
    add(p + "mlp.up_proj.weight", {I, H});
    add(p + "mlp.down_proj.weight", {H, I});
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
  }
  add("model.norm.weight", {H});
  add("lm_head.weight", {V, H});
  // Shards of at most ~2 GB, in order (as huggingface_hub splits by size).
  const uint64_t kShard = 2'000'000'000;
  std::vector<std::vector<ckpt::pt::TensorToSave>> shards(1);
  uint64_t acc = 0, total = 0;
  for (auto& t : all) {
    uint64_t nb = 2;
    for (auto d : t.shape) nb *= d;
    if (acc + nb > kShard && !shards.back().empty()) {
      shards.emplace_back();
      acc = 0;
    }
    acc += nb;
    total += nb;
    shards.back().push_back(std::move(t));
  }
  fs::create_directories(out);
  std::string wm;
  size_t n_tensors = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "pytorch_model-%05zu-of-%05zu.bin", k + 1, shards.size());
    for (const auto& t : shards[k]) wm += std::string(wm.empty() ? "" : ",\n") + "    \"" + t.name + "\": \"" + name + "\"";
    n_tensors += shards[k].size();
    if (auto e = ckpt::pt::write_torch_zip_sparse(out / name, shards[k]); !e.empty()) {
      std::fprintf(stderr, "%s\n", e.c_str());
      return 1;
    }
  }
  std::ofstream(out / "pytorch_model.bin.index.json") << "{\n  \"metadata\": {\"total_size\": " << total << "},\n  \"weight_map\": {\n" << wm << "\n  }\n}\n";
  std::ofstream(out / "config.json") << "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": " << H
                                     << ", \"intermediate_size\": " << I << ", \"num_hidden_layers\": " << layers
                                     << ", \"num_attention_heads\": 32, \"num_key_value_heads\": 32, \"vocab_size\": " << V
                                     << ", \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, "
                                        "\"torch_dtype\": \"float16\", \"hidden_act\": \"silu\"}\n";
  std::printf("%zu shards, %zu tensors, %llu bytes declared\n", shards.size(), n_tensors, (unsigned long long)total);
  return 0;
}
