// The smoke pass's model plan for a GGUF file: hyperparameters from the `{arch}.*` keys and the
// weights by llama.cpp's tensor names (specs/gguf.md §3.3, §4), renamed to the Hugging Face
// names the one forward pass (forward.cpp) reads. Dimensions need no transposing: the weight
// table lists GGUF shapes outermost first (ne reversed), so `blk.0.attn_q.weight` ne [E, H*Dk]
// is the [H*Dk, E] Linear weight the forward pass expects.
//
// q/k rows and RoPE. llama.cpp's converter reorders the rows of attn_q and attn_k for
// architecture `llama` only: within each head the HF rotate-half layout (dimension j paired
// with j + Dk/2) is interleaved into adjacent pairs (2j, 2j+1), and llama.cpp then applies its
// "normal" RoPE, which rotates adjacent pairs with frequency j. qwen2, qwen3, qwen3moe and
// gemma keep HF's row order and llama.cpp rotates them NeoX-style (rotate-half). So rather
// than undo the permutation on load, the plan marks `llama` RoPE as adjacent-pair: the forward
// pass then computes exactly what llama.cpp computes from the file as stored, and the same
// attention scores as HF does on the unpermuted weights (q.k is a sum over the pairs, which a
// permutation applied to q and k alike leaves unchanged). A `llama` GGUF whose rows were not
// permuted (a converter bug) is then judged as llama.cpp would run it: broken.
#include <cmath>

#include "smoke/internal.h"

namespace ckpt::smoke {

namespace {

struct ArchInfo {
  std::string_view arch, family;
};
constexpr ArchInfo kArchs[] = {
    {"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}, {"qwen3moe", "qwen3_moe"}, {"gemma", "gemma"}};

bool ends_with(std::string_view s, std::string_view x) { return s.size() >= x.size() && s.substr(s.size() - x.size()) == x; }

// llama.cpp tensor name -> the HF name forward.cpp reads ("" when the pass has no use for it).
std::string hf_name(std::string_view g, const Hyper& hp) {
  std::string_view suffix;
  if (ends_with(g, ".weight")) suffix = ".weight";
  else if (ends_with(g, ".bias")) suffix = ".bias";
  else return "";
  const std::string_view stem = g.substr(0, g.size() - suffix.size());
  if (stem == "token_embd") return hp.prefix + "embed_tokens" + std::string(suffix);
  if (stem == "output_norm") return hp.prefix + "norm" + std::string(suffix);
  if (stem == "output") return hp.head;  // lm_head.weight
  if (stem.substr(0, 4) != "blk.") return "";
  const size_t dot = stem.find('.', 4);
  if (dot == std::string_view::npos) return "";
  const std::string_view layer = stem.substr(4, dot - 4), part = stem.substr(dot + 1);
  const std::string p = hp.prefix + "layers." + std::string(layer) + ".";
  const std::string moe = p + hp.expert_prefix + ".";
  static const std::pair<std::string_view, std::string_view> kParts[] = {
      {"attn_norm", "input_layernorm"},   {"attn_q", "self_attn.q_proj"},        {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},     {"attn_output", "self_attn.o_proj"},   {"attn_q_norm", "self_attn.q_norm"},
      {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate", "mlp.gate_proj"},
      {"ffn_up", "mlp.up_proj"},          {"ffn_down", "mlp.down_proj"},
  };
  for (const auto& [from, to] : kParts)
    if (part == from) return p + std::string(to) + std::string(suffix);
  // Experts: ffn_*_exps ne [E, Fe, X] is [X, Fe, E] outermost first, the stacked layout forward.cpp
  // reads as MLX's switch_mlp (one expert = Fe consecutive rows).
  if (part == "ffn_gate_inp") return moe + "gate" + std::string(suffix);
  if (part == "ffn_gate_exps") return moe + "switch_mlp.gate_proj" + std::string(suffix);
  if (part == "ffn_up_exps") return moe + "switch_mlp.up_proj" + std::string(suffix);
  if (part == "ffn_down_exps") return moe + "switch_mlp.down_proj" + std::string(suffix);
  return "";
}

}  // namespace

bool is_gguf_target(const Checkpoint& ck) { return ck.weights().empty() && !ck.gguf_models.empty(); }

bool make_gguf_plan(const Checkpoint& ck, Plan& plan, FindingSink& out) {
  Hyper& hp = plan.hp;
  auto refuse = [&](const std::string& file, const std::string& why, const std::string& hint) {
    out.add("SM010", Severity::warning, "smoke pass not run: " + why, file, "", hint);
    return false;
  };
  if (ck.gguf_models.size() > 1)
    return refuse("", "the directory holds " + std::to_string(ck.gguf_models.size()) + " GGUF models",
                  "name one .gguf file as the target");
  const Shard* shard = ck.gguf_models.front().first(ck.gguf_shards);
  if (!shard || !shard->gguf || !shard->gguf->parsed)
    return refuse(shard ? shard->file : "", "the GGUF header could not be read", "the GG findings say why");
  const gguf::File& g = *shard->gguf;
  const std::string& file = shard->file;
  const std::string arch(g.get_string("general.architecture").value_or(""));
  for (const auto& a : kArchs)
    if (arch == a.arch) hp.family = a.family;
  if (hp.family.empty()) {
    std::string known;
    for (const auto& a : kArchs) known += std::string(known.empty() ? "" : ", ") + std::string(a.arch);
    return refuse(file, "GGUF architecture \"" + arch + "\" has no forward pass in ckpt smoke", "ckpt smoke runs GGUF " + known);
  }
  const std::string k = arch + ".";
  std::string bad;  // the first per-layer array whose layers differ
  auto u32 = [&](const std::string& key) -> std::optional<uint64_t> {
    const gguf::KeyValue* kv = g.find(k + key);
    if (!kv) return std::nullopt;
    if (!kv->value.is_array()) return kv->value.as_uint();
    // get_key_or_arr: one value per layer. The forward pass has one width for all layers.
    std::optional<uint64_t> first = kv->value.count ? kv->value.uint_at(0) : std::nullopt;
    for (uint64_t i = 1; i < kv->value.count; ++i)
      if (kv->value.uint_at(i) != first && bad.empty()) bad = k + key;
    return first;
  };
  auto f32 = [&](const std::string& key) -> std::optional<double> {
    const gguf::KeyValue* kv = g.find(k + key);
    return kv ? kv->value.as_float() : std::nullopt;
  };
  hp.H = uint32_t(u32("embedding_length").value_or(0));
  hp.L = uint32_t(u32("block_count").value_or(0));
  hp.nh = uint32_t(u32("attention.head_count").value_or(0));
  hp.nkv = uint32_t(u32("attention.head_count_kv").value_or(hp.nh));
  hp.hd = uint32_t(u32("attention.key_length").value_or(hp.nh ? hp.H / hp.nh : 0));
  const uint32_t vd = uint32_t(u32("attention.value_length").value_or(hp.hd));
  hp.I = uint32_t(u32("feed_forward_length").value_or(0));
  if (!bad.empty()) return refuse(file, bad + " differs between layers, which the smoke pass does not model", "");
  if (vd != hp.hd) return refuse(file, k + "attention.value_length " + std::to_string(vd) + " differs from key_length " + std::to_string(hp.hd), "");
  if (!hp.H || !hp.L || !hp.nh || !hp.nkv || !hp.hd || hp.nh % hp.nkv != 0 || hp.L > 512 || hp.H > (1u << 20))
    return refuse(file, "the GGUF's dimensions are unusable (embedding_length " + std::to_string(hp.H) + ", block_count " +
                            std::to_string(hp.L) + ", heads " + std::to_string(hp.nh) + "/" + std::to_string(hp.nkv) +
                            ", key_length " + std::to_string(hp.hd) + ")",
                  "the GG findings say which key is wrong");
  auto eps = f32("attention.layer_norm_rms_epsilon");
  if (!eps) return refuse(file, "the GGUF has no f32 " + k + "attention.layer_norm_rms_epsilon (llama.cpp requires it)", "");
  hp.eps = *eps;
  hp.prefix = "model.";
  hp.head = "lm_head.weight";
  hp.model_dtype = st::DType::F32;
  hp.act = Act::silu;
  if (hp.family == "gemma") {
    // llama.cpp's gemma: GELU (tanh approximation), embeddings times sqrt(E) in float32, and
    // RMSNorm by the stored weight, which the converter wrote as 1 + w (HF's zero-centred w).
    hp.act = Act::gelu_tanh;
    hp.embed_scale = true;
    hp.norm_plus_one = false;
  }
  hp.qk_norm = hp.family == "qwen3" || hp.family == "qwen3_moe";
  hp.attn_scale = 1.0 / std::sqrt(double(hp.hd));
  hp.sliding.assign(hp.L, false);

  // Experts: qwen3moe, and `llama` with expert_count (Mixtral converts to llama).
  const uint32_t X = uint32_t(u32("expert_count").value_or(0));
  hp.moe_layer.assign(hp.L, X > 0);
  if (X) {
    if (hp.family == "llama") hp.family = "mixtral";
    hp.n_experts = X;
    hp.top_k = uint32_t(u32("expert_used_count").value_or(0));
    if (!hp.top_k || hp.top_k > X)
      return refuse(file, "the expert count (" + std::to_string(X) + ") or experts per token (" + std::to_string(hp.top_k) + ") is unusable", "");
    hp.moe_I = uint32_t(u32("expert_feed_forward_length").value_or(hp.I / hp.top_k));
    if (hp.family == "mixtral") hp.moe_I = hp.I;  // llama's experts are feed_forward_length wide
    hp.expert_prefix = hp.family == "mixtral" ? "block_sparse_moe" : "mlp";
    // llama.cpp normalises the top-k weights for both (its qwen3moe graph always does).
    hp.norm_topk = true;
  } else if (hp.family == "qwen3_moe") {
    return refuse(file, "qwen3moe without " + k + "expert_count", "");
  }

  // RoPE (see the head comment for the layout).
  hp.rope.theta = f32("rope.freq_base").value_or(10000);
  uint32_t rot = uint32_t(u32("rope.dimension_count").value_or(hp.hd));
  hp.rope.rot_dim = std::min(rot - rot % 2, hp.hd);
  hp.rope.adjacent = arch == "llama";
  const std::string scaling(g.get_string(k + "rope.scaling.type").value_or("none"));
  const double factor = f32("rope.scaling.factor").value_or(0);
  if (scaling == "linear" && factor > 0 && factor != 1) {
    hp.rope.scaling = "linear";
    hp.rope.factor = factor;
  } else if (scaling != "none" && scaling != "linear") {
    hp.notes.push_back("rope.scaling.type \"" + scaling + "\" is not modelled by the smoke pass: default frequencies used");
  }

  plan.weights = {};
  diff::dequant::Weights all = diff::dequant::weights_of(ck);
  for (auto& [name, w] : all.by_name) {
    const std::string to = hf_name(name, hp);
    if (!to.empty()) plan.weights.by_name.emplace(to, w);
  }
  for (auto& [name, why] : all.skipped) {
    const std::string to = hf_name(name, hp);
    if (!to.empty()) plan.weights.skipped.emplace(to, why);
  }
  plan.weights.notes = all.notes;
  if (plan.weights.by_name.empty())
    return refuse(file, "no weight of the GGUF could be read as numbers", all.notes.empty() ? std::string("the GG findings say why") : all.notes.front());
  // llama.cpp's frequency factors (`rope_freqs.weight`, written for HF rope_type llama3): each
  // frequency divided by its factor.
  if (auto it = all.by_name.find("rope_freqs.weight"); it != all.by_name.end()) {
    std::string e;
    auto reader = diff::dequant::open_reader(it->second, e);
    std::vector<float> f(it->second.rows * it->second.cols);
    if (!reader || f.size() != hp.rope.rot_dim / 2 || !reader->read(0, it->second.rows, f.data(), e))
      return refuse(file, "rope_freqs.weight holds " + std::to_string(f.size()) + " values where rope.dimension_count / 2 is " +
                              std::to_string(hp.rope.rot_dim / 2) + (e.empty() ? "" : " (" + e + ")"), "");
    hp.rope.scaling = "factors";
    hp.rope.freq_factors.assign(f.begin(), f.end());
  }
  hp.rope_local = hp.rope;
  hp.tied = !plan.weights.by_name.count(hp.head);
  auto embed = plan.weights.by_name.find(hp.prefix + "embed_tokens.weight");
  if (embed == plan.weights.by_name.end())
    return refuse(file, "the GGUF has no readable token_embd.weight", "the GG findings say why");
  hp.V = uint32_t(embed->second.rows);
  if (auto toks = g.find("tokenizer.ggml.tokens"); toks && toks->value.is_array() && toks->value.count != hp.V)
    hp.notes.push_back("token_embd.weight has " + std::to_string(hp.V) + " rows but tokenizer.ggml.tokens " +
                       std::to_string(toks->value.count) + " entries");
  return true;
}

}  // namespace ckpt::smoke
