// The architecture tables: one per model_type, data only. Shapes are [out, in] for Linear
// weights. Facts: specs/architectures.md (section per architecture) and, for gemma4,
// specs/incidents.md §1.3. Variables: H hidden, L layers, nh heads, nkv kv heads, hd head
// dim, I intermediate, V vocab, E routed experts, moe_I expert intermediate; per layer:
// i, moe, linear, full, kvshared, Ii (this layer's intermediate), hdi (this layer's head dim).
#include "arch/tables.h"

#include <algorithm>

namespace ckpt::arch::detail {
namespace {

using K = ModuleKind;
using D = DTypeRole;

Rule G(const char* n, const char* s, K k, const char* when = nullptr, D d = D::Model) {
  return Rule{Scope::Global, n, s, when, k, d};
}
Rule Ly(const char* n, const char* s, K k, const char* when = nullptr, D d = D::Model) {
  return Rule{Scope::Layer, n, s, when, k, d};
}
Rule KV(const char* n, const char* s, K k, const char* when = nullptr) {
  Rule r{Scope::Layer, n, s, when, k, D::Model};
  r.kv_group = true;
  return r;
}
Rule Ex(const char* n, const char* s, const char* when = "moe") {
  return Rule{Scope::Expert, n, s, when, K::Linear, D::Model};
}
Rule Ix(const char* n, const char* s, const char* count, K k) {
  Rule r{Scope::Index, n, s, nullptr, k, D::Model};
  r.count = count;
  return r;
}
Rule Head() { return Rule{Scope::Head, "", "V,H", nullptr, K::Linear}; }
Rule MG(const char* n, const char* s, K k) { return Rule{Scope::MtpGlobal, n, s, nullptr, k}; }
Rule ML(const char* n, const char* s, K k, const char* when = nullptr) {
  return Rule{Scope::MtpLayer, n, s, when, k};
}

std::vector<Rule> cat(std::initializer_list<std::vector<Rule>> parts) {
  std::vector<Rule> out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ---- shared blocks -----------------------------------------------------------------
const std::vector<Rule> kEmbedNorm = {G("embed_tokens.weight", "V,H", K::Embedding),
                                      G("norm.weight", "H", K::Norm), Head()};
const std::vector<Rule> kTwoNorms = {Ly("input_layernorm.weight", "H", K::Norm),
                                     Ly("post_attention_layernorm.weight", "H", K::Norm)};
// llama attention: biases follow attention_bias (o_proj too, M:llama).
const std::vector<Rule> kAttnLlama = {
    Ly("self_attn.q_proj.weight", "nh*hd,H", K::Linear),
    Ly("self_attn.q_proj.bias", "nh*hd", K::Bias, "attention_bias"),
    Ly("self_attn.k_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.k_proj.bias", "nkv*hd", K::Bias, "attention_bias"),
    Ly("self_attn.v_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.v_proj.bias", "nkv*hd", K::Bias, "attention_bias"),
    Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
    Ly("self_attn.o_proj.bias", "H", K::Bias, "attention_bias"),
};
// qwen2 / mimo: q,k,v biases always, o never.
const std::vector<Rule> kAttnQwen2 = {
    Ly("self_attn.q_proj.weight", "nh*hd,H", K::Linear),
    Ly("self_attn.q_proj.bias", "nh*hd", K::Bias),
    Ly("self_attn.k_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.k_proj.bias", "nkv*hd", K::Bias),
    Ly("self_attn.v_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.v_proj.bias", "nkv*hd", K::Bias),
    Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
};
// glm4_moe: q,k,v bias iff attention_bias; o never; qk norm iff use_qk_norm.
const std::vector<Rule> kAttnGlm = {
    Ly("self_attn.q_proj.weight", "nh*hd,H", K::Linear),
    Ly("self_attn.q_proj.bias", "nh*hd", K::Bias, "attention_bias"),
    Ly("self_attn.k_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.k_proj.bias", "nkv*hd", K::Bias, "attention_bias"),
    Ly("self_attn.v_proj.weight", "nkv*hd,H", K::Linear),
    Ly("self_attn.v_proj.bias", "nkv*hd", K::Bias, "attention_bias"),
    Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
    Ly("self_attn.q_norm.weight", "hd", K::Norm, "use_qk_norm"),
    Ly("self_attn.k_norm.weight", "hd", K::Norm, "use_qk_norm"),
};
const std::vector<Rule> kQkNorm = {Ly("self_attn.q_norm.weight", "hd", K::Norm),
                                   Ly("self_attn.k_norm.weight", "hd", K::Norm)};
const std::vector<Rule> kMlp = {
    Ly("mlp.gate_proj.weight", "Ii,H", K::Linear, "!moe"),
    Ly("mlp.up_proj.weight", "Ii,H", K::Linear, "!moe"),
    Ly("mlp.down_proj.weight", "H,Ii", K::Linear, "!moe"),
};
const std::vector<Rule> kMlpBias = {
    Ly("mlp.gate_proj.bias", "Ii", K::Bias, "!moe && mlp_bias"),
    Ly("mlp.up_proj.bias", "Ii", K::Bias, "!moe && mlp_bias"),
    Ly("mlp.down_proj.bias", "H", K::Bias, "!moe && mlp_bias"),
};
const std::vector<Rule> kQwenMoe = {
    Ly("mlp.gate.weight", "E,H", K::Linear, "moe"),
    Ex("mlp.experts.{e}.gate_proj.weight", "moe_I,H"),
    Ex("mlp.experts.{e}.up_proj.weight", "moe_I,H"),
    Ex("mlp.experts.{e}.down_proj.weight", "H,moe_I"),
};
const std::vector<Rule> kDeepseekMoe = {
    Ly("mlp.gate.weight", "E,H", K::Linear, "moe"),
    Ly("mlp.gate.e_score_correction_bias", "E", K::Buffer, "moe && has_score_bias", D::F32),
    Ex("mlp.experts.{e}.gate_proj.weight", "moe_I,H"),
    Ex("mlp.experts.{e}.up_proj.weight", "moe_I,H"),
    Ex("mlp.experts.{e}.down_proj.weight", "H,moe_I"),
    Ly("mlp.shared_experts.gate_proj.weight", "moe_I*n_shared,H", K::Linear, "moe && n_shared > 0"),
    Ly("mlp.shared_experts.up_proj.weight", "moe_I*n_shared,H", K::Linear, "moe && n_shared > 0"),
    Ly("mlp.shared_experts.down_proj.weight", "H,moe_I*n_shared", K::Linear, "moe && n_shared > 0"),
};

const char* kLlamaFields[] = {
    "H=hidden_size", "L=num_hidden_layers", "nh=num_attention_heads",
    "nkv=num_key_value_heads?nh~", "hd=head_dim?H/nh~", "I=intermediate_size", "V=vocab_size",
    "attention_bias=attention_bias?0~!"};

std::vector<Field> llama_fields(std::initializer_list<const char*> extra = {}) {
  std::vector<Field> f;
  for (auto s : kLlamaFields) f.push_back({s});
  for (auto s : extra) {
    // an extra spec overrides a base one with the same variable
    std::string_view var(s, std::string_view(s).find('='));
    std::erase_if(f, [&](const Field& x) {
      return std::string_view(x.spec).substr(0, std::string_view(x.spec).find('=')) == var;
    });
    f.push_back({s});
  }
  return f;
}

std::vector<Table> build() {
  std::vector<Table> v;
  auto add = [&](Table t) { v.push_back(std::move(t)); };

  // llama / mistral ✔ (§3 llama)
  {
    Table t;
    t.model_type = "llama";
    t.aliases = {"mistral"};
    t.summary = "Llama / Mistral dense decoder (biases follow attention_bias / mlp_bias)";
    t.fields = llama_fields({"mlp_bias=mlp_bias?0~!"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kMlp, kMlpBias});
    t.tie_default_t = false;
    t.tie_default_m = 1;
    t.mlx_drops_inv_freq = true;
    t.prefixes = {"model."};
    add(t);
  }
  // qwen2 ✔
  {
    Table t;
    t.model_type = "qwen2";
    t.summary = "Qwen2 / Qwen2.5 dense decoder (q/k/v biases always)";
    t.fields = llama_fields({"V=vocab_size?151936~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnQwen2, kMlp});
    t.tie_default_t = false;
    t.tie_default_m = 1;
    t.mlx_drops_inv_freq = true;
    t.prefixes = {"model."};
    add(t);
  }
  // mimo (qwen2 block + model.mtp_layers.{k})
  {
    Table t;
    t.model_type = "mimo";
    t.summary = "MiMo: qwen2 block plus model.mtp_layers.{k} MTP layers";
    t.fields = llama_fields({"n_mtp=num_nextn_predict_layers?0~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnQwen2, kMlp,
                   {ML("input_layernorm.weight", "H", K::Norm),
                    ML("post_attention_layernorm.weight", "H", K::Norm),
                    ML("self_attn.q_proj.weight", "nh*hd,H", K::Linear),
                    ML("self_attn.q_proj.bias", "nh*hd", K::Bias),
                    ML("self_attn.k_proj.weight", "nkv*hd,H", K::Linear),
                    ML("self_attn.k_proj.bias", "nkv*hd", K::Bias),
                    ML("self_attn.v_proj.weight", "nkv*hd,H", K::Linear),
                    ML("self_attn.v_proj.bias", "nkv*hd", K::Bias),
                    ML("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
                    ML("mlp.gate_proj.weight", "I,H", K::Linear),
                    ML("mlp.up_proj.weight", "I,H", K::Linear),
                    ML("mlp.down_proj.weight", "H,I", K::Linear),
                    ML("token_layernorm.weight", "H", K::Norm),
                    ML("hidden_layernorm.weight", "H", K::Norm),
                    ML("input_proj.weight", "H,2*H", K::Linear),
                    ML("final_layernorm.weight", "H", K::Norm)}});
    t.mtp = MtpKind::MimoLayers;
    t.mtp_count = "n_mtp";
    t.tie_default_t = false;
    t.tie_default_m = 1;
    t.prefixes = {"model."};
    add(t);
  }
  // qwen3 ✔
  {
    Table t;
    t.model_type = "qwen3";
    t.summary = "Qwen3 dense decoder (q_norm/k_norm [hd])";
    t.fields = llama_fields({"hd=head_dim?128~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kQkNorm, kMlp});
    t.tie_default_t = false;
    t.tie_default_m = 1;
    t.prefixes = {"model."};
    add(t);
  }
  // qwen3_moe
  {
    Table t;
    t.model_type = "qwen3_moe";
    t.summary = "Qwen3-MoE (per-expert mlp.experts.{e}.*, MoE iff (i+1)%decoder_sparse_step==0)";
    t.fields = llama_fields({"hd=head_dim?128~", "E=@experts?128~", "moe_I=moe_intermediate_size?768~",
                             "sparse_step=decoder_sparse_step?1~", "I=intermediate_size?6144~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kQkNorm, kMlp, kQwenMoe});
    t.moe = MoeRule::SparseStep;
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.prefixes = {"model."};
    add(t);
  }
  // mixtral ✔
  {
    Table t;
    t.model_type = "mixtral";
    t.summary = "Mixtral sparse MoE (block_sparse_moe.experts.{e}.w1/w2/w3)";
    t.fields = llama_fields({"E=@experts?8~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama,
                   {Ly("block_sparse_moe.gate.weight", "E,H", K::Linear),
                    Ex("block_sparse_moe.experts.{e}.w1.weight", "I,H", nullptr),
                    Ex("block_sparse_moe.experts.{e}.w2.weight", "H,I", nullptr),
                    Ex("block_sparse_moe.experts.{e}.w3.weight", "I,H", nullptr)}});
    t.moe = MoeRule::All;
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.prefixes = {"model."};
    add(t);
  }
  // phi3 ✔
  {
    Table t;
    t.model_type = "phi3";
    t.summary = "Phi-3 (fused qkv_proj and gate_up_proj)";
    t.fields = llama_fields({"hd=?H/nh"});
    t.rules = cat({kEmbedNorm, kTwoNorms,
                   {Ly("self_attn.qkv_proj.weight", "nh*hd+2*nkv*hd,H", K::Linear),
                    Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
                    Ly("mlp.gate_up_proj.weight", "2*I,H", K::Linear),
                    Ly("mlp.down_proj.weight", "H,I", K::Linear)}});
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.mlx_pops_tied_head = false;
    t.prefixes = {"model."};
    add(t);
  }
  // gemma ✔ / gemma2
  {
    Table t;
    t.model_type = "gemma";
    t.summary = "Gemma (tied, no lm_head; head_dim default 256)";
    t.fields = llama_fields({"hd=head_dim?256~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kMlp});
    t.tie_forced = true;
    t.tie_default_t = true;
    t.mlx_pops_tied_head = false;
    t.prefixes = {"model."};
    add(t);
    t.model_type = "gemma2";
    t.summary = "Gemma 2 (pre/post feed-forward norms; tied)";
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kMlp,
                   {Ly("pre_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("post_feedforward_layernorm.weight", "H", K::Norm)}});
    add(t);
  }
  // gemma3_text ✔ and the gemma3 multimodal wrapper ✔
  {
    Table t;
    t.model_type = "gemma3_text";
    t.summary = "Gemma 3 text (gemma2 block + q_norm/k_norm); tied iff lm_head absent";
    t.fields = llama_fields({"hd=head_dim?256~", "V=vocab_size?262208~", "H=hidden_size?2304~",
                             "I=intermediate_size?9216~", "L=num_hidden_layers?26~",
                             "nh=num_attention_heads?8~", "nkv=num_key_value_heads?4~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama, kQkNorm, kMlp,
                   {Ly("pre_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("post_feedforward_layernorm.weight", "H", K::Norm)}});
    t.tie_default_t = true;
    t.tie_default_m = -1;
    t.mlx_pops_tied_head = true;
    t.prefixes = {"model."};
    add(t);
    t.model_type = "gemma3";
    t.summary = "Gemma 3 multimodal wrapper (text_config; legacy language_model.model.* or model.language_model.*; SigLIP tower)";
    t.nested_text = true;
    t.text_model_type = "gemma3_text";
    t.siglip_tower = true;
    t.prefixes = {"language_model.model.", "model.language_model."};
    t.tower_prefixes = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                        "model.multi_modal_projector."};
    add(t);
  }
  // gemma3n (text: gemma3n_text)
  {
    Table t;
    t.model_type = "gemma3n_text";
    t.summary = "Gemma 3n text (AltUp, LAuReL, per-layer inputs, kv-shared layers)";
    t.fields = llama_fields({"hd=head_dim?256~", "V=vocab_size?262400~", "H=hidden_size?2048~",
                             "I=intermediate_size?16384~", "L=num_hidden_layers?35~",
                             "nh=num_attention_heads?8~", "nkv=num_key_value_heads?2~",
                             "Vpl=vocab_size_per_layer_input?262144~",
                             "hpl=hidden_size_per_layer_input?256~", "A=altup_num_inputs?4~",
                             "n_shared_kv=num_kv_shared_layers?15~", "r=laurel_rank?64~"});
    t.rules = cat({{G("embed_tokens.weight", "V,H", K::Embedding), G("norm.weight", "H", K::Norm),
                    Head(),
                    G("embed_tokens_per_layer.weight", "Vpl,L*hpl", K::Embedding),
                    G("per_layer_model_projection.weight", "L*hpl,H", K::ScaledLinear),
                    G("per_layer_projection_norm.weight", "hpl", K::Norm),
                    Ix("altup_projections.{j}.weight", "H,H", "A-1", K::Linear),
                    Ix("altup_unembed_projections.{j}.weight", "H,H", "A-1", K::Linear)},
                   kTwoNorms,
                   {Ly("self_attn.q_proj.weight", "nh*hd,H", K::Linear),
                    KV("self_attn.k_proj.weight", "nkv*hd,H", K::Linear),
                    KV("self_attn.v_proj.weight", "nkv*hd,H", K::Linear),
                    Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear),
                    Ly("self_attn.q_norm.weight", "hd", K::Norm),
                    KV("self_attn.k_norm.weight", "hd", K::Norm)},
                   kMlp,
                   {Ly("pre_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("post_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("altup.correct_output_scale", "H", K::Param),
                    Ly("altup.correction_coefs.weight", "A,A", K::Param),
                    Ly("altup.prediction_coefs.weight", "A*A,A", K::Param),
                    Ly("altup.modality_router.weight", "A,H", K::Linear),
                    Ly("altup.router_norm.weight", "H", K::Norm),
                    Ly("laurel.linear_left.weight", "r,H", K::Linear),
                    Ly("laurel.linear_right.weight", "H,r", K::Linear),
                    Ly("laurel.post_laurel_norm.weight", "H", K::Norm),
                    Ly("per_layer_input_gate.weight", "hpl,H", K::Linear),
                    Ly("per_layer_projection.weight", "H,hpl", K::Linear),
                    Ly("post_per_layer_input_norm.weight", "H", K::Norm)}});
    t.kv_shared = true;
    t.tie_forced = true;
    t.tie_default_t = true;
    t.mlx_pops_tied_head = false;
    t.prefixes = {"model.language_model.", "model."};
    add(t);
    t.model_type = "gemma3n";
    t.summary = "Gemma 3n multimodal wrapper (text_config; towers left unchecked)";
    t.nested_text = true;
    t.text_model_type = "gemma3n_text";
    t.prefixes = {"model.language_model."};
    t.tower_prefixes = {"model.vision_tower.", "model.audio_tower.", "model.embed_vision.",
                        "model.embed_audio."};
    add(t);
  }
  // gemma4 (SwiftLM fixtures, incidents.md §1.3)
  {
    Table t;
    t.model_type = "gemma4_text";
    t.summary = "Gemma 4 text (per-layer inputs, kv-shared layers, optional MoE block)";
    t.fields = llama_fields({"hd=head_dim?256~", "ghd=global_head_dim?hd~",
                             "Vpl=vocab_size_per_layer_input", "hpl=hidden_size_per_layer_input",
                             "n_shared_kv=num_kv_shared_layers?0~",
                             "swp=sliding_window_pattern?5~",
                             "double_wide=use_double_wide_mlp?0~!",
                             "k_eq_v=attention_k_eq_v?0~!", "moe_block=enable_moe_block?0~!",
                             "E=@experts?0~", "moe_I=moe_intermediate_size?0~"});
    t.rules = cat({{G("embed_tokens.weight", "V,H", K::Embedding), G("norm.weight", "H", K::Norm),
                    Head(),
                    G("embed_tokens_per_layer.weight", "Vpl,L*hpl", K::Embedding),
                    G("per_layer_model_projection.weight", "L*hpl,H", K::ScaledLinear),
                    G("per_layer_projection_norm.weight", "hpl", K::Norm)},
                   kTwoNorms,
                   {Ly("self_attn.q_proj.weight", "nh*hdi,H", K::Linear),
                    KV("self_attn.k_proj.weight", "nkv*hdi,H", K::Linear),
                    KV("self_attn.v_proj.weight", "nkv*hdi,H", K::Linear, "!(k_eq_v && full)"),
                    Ly("self_attn.o_proj.weight", "H,nh*hdi", K::Linear),
                    Ly("self_attn.q_norm.weight", "hdi", K::Norm),
                    KV("self_attn.k_norm.weight", "hdi", K::Norm),
                    Ly("layer_scalar", "1", K::Param),
                    Ly("mlp.gate_proj.weight", "Ii,H", K::Linear),
                    Ly("mlp.up_proj.weight", "Ii,H", K::Linear),
                    Ly("mlp.down_proj.weight", "H,Ii", K::Linear),
                    Ly("pre_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("post_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("per_layer_input_gate.weight", "hpl,H", K::Linear),
                    Ly("per_layer_projection.weight", "H,hpl", K::Linear),
                    Ly("post_per_layer_input_norm.weight", "H", K::Norm),
                    Ly("pre_feedforward_layernorm_2.weight", "H", K::Norm, "moe"),
                    Ly("post_feedforward_layernorm_1.weight", "H", K::Norm, "moe"),
                    Ly("post_feedforward_layernorm_2.weight", "H", K::Norm, "moe"),
                    Ly("router.proj.weight", "E,H", K::Linear, "moe"),
                    Ly("router.scale", "H", K::Param, "moe"),
                    Ly("router.per_expert_scale", "E", K::Param, "moe"),
                    Ly("experts.gate_up_proj", "E,2*moe_I,H", K::Linear, "moe"),
                    Ly("experts.down_proj", "E,H,moe_I", K::Linear, "moe")}});
    t.kv_shared = true;
    t.moe = MoeRule::EnableBlock;
    t.tie_default_t = true;
    t.mlx_pops_tied_head = false;
    t.prefixes = {"model.", "language_model.model.", "model.language_model."};
    add(t);
    t.model_type = "gemma4";
    t.summary = "Gemma 4 wrapper (text_config; towers left unchecked)";
    t.nested_text = true;
    t.text_model_type = "gemma4_text";
    t.prefixes = {"language_model.model.", "model.language_model."};
    t.tower_prefixes = {"vision_tower.", "audio_tower.", "multi_modal_projector.",
                        "embed_vision.", "embed_audio.", "model.vision_tower.",
                        "model.audio_tower.", "model.embed_vision.", "model.embed_audio."};
    add(t);
  }
  // olmo2
  {
    Table t;
    t.model_type = "olmo2";
    t.summary = "OLMo 2 (post-norms only; full-width q_norm/k_norm)";
    t.fields = llama_fields({"V=vocab_size?50304~"});
    t.rules = cat({kEmbedNorm,
                   {Ly("post_attention_layernorm.weight", "H", K::Norm),
                    Ly("post_feedforward_layernorm.weight", "H", K::Norm),
                    Ly("self_attn.q_norm.weight", "nh*hd", K::Norm),
                    Ly("self_attn.k_norm.weight", "nkv*hd", K::Norm)},
                   kAttnLlama, kMlp});
    t.tie_default_t = false;
    t.tie_default_m = 1;
    t.mlx_drops_inv_freq = true;
    t.mlx_pops_tied_head = false;
    t.prefixes = {"model."};
    add(t);
  }
  // gpt_oss ✔ (float form of the experts; mxfp4 turns them into _blocks/_scales)
  {
    Table t;
    t.model_type = "gpt_oss";
    t.summary = "gpt-oss (attention sinks, router with bias, fused expert tensors)";
    t.fields = llama_fields({"hd=head_dim?64~", "E=@experts?128~", "attention_bias=attention_bias?1~!"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnLlama,
                   {Ly("self_attn.sinks", "nh", K::Param),
                    Ly("mlp.router.weight", "E,H", K::Linear),
                    Ly("mlp.router.bias", "E", K::Bias),
                    Ly("mlp.experts.gate_up_proj", "E,2*I,H", K::Linear),
                    Ly("mlp.experts.gate_up_proj_bias", "E,2*I", K::Bias),
                    Ly("mlp.experts.down_proj", "E,H,I", K::Linear),
                    Ly("mlp.experts.down_proj_bias", "E,H", K::Bias)}});
    t.moe = MoeRule::All;
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.prefixes = {"model."};
    add(t);
  }
  // qwen3_next / qwen3_5 / qwen3_5_moe (hybrid linear attention)
  {
    const std::vector<Rule> full_attn = {
        Ly("self_attn.q_proj.weight", "2*nh*hd,H", K::Linear, "full"),
        Ly("self_attn.q_proj.bias", "2*nh*hd", K::Bias, "full && attention_bias"),
        Ly("self_attn.k_proj.weight", "nkv*hd,H", K::Linear, "full"),
        Ly("self_attn.k_proj.bias", "nkv*hd", K::Bias, "full && attention_bias"),
        Ly("self_attn.v_proj.weight", "nkv*hd,H", K::Linear, "full"),
        Ly("self_attn.v_proj.bias", "nkv*hd", K::Bias, "full && attention_bias"),
        Ly("self_attn.o_proj.weight", "H,nh*hd", K::Linear, "full"),
        Ly("self_attn.q_norm.weight", "hd", K::Norm, "full"),
        Ly("self_attn.k_norm.weight", "hd", K::Norm, "full")};
    const std::vector<Rule> linear_common = {
        Ly("linear_attn.conv1d.weight", "2*nk*dk+nv*dv,1,K", K::Param, "linear"),
        Ly("linear_attn.dt_bias", "nv", K::Param, "linear"),
        Ly("linear_attn.A_log", "nv", K::Param, "linear"),
        Ly("linear_attn.norm.weight", "dv", K::Norm, "linear"),
        Ly("linear_attn.out_proj.weight", "H,nv*dv", K::Linear, "linear")};
    const std::vector<Rule> moe = {
        Ly("mlp.gate.weight", "E,H", K::Linear, "moe"),
        Ex("mlp.experts.{e}.gate_proj.weight", "moe_I,H"),
        Ex("mlp.experts.{e}.up_proj.weight", "moe_I,H"),
        Ex("mlp.experts.{e}.down_proj.weight", "H,moe_I"),
        Ly("mlp.shared_expert.gate_proj.weight", "sI,H", K::Linear, "moe"),
        Ly("mlp.shared_expert.up_proj.weight", "sI,H", K::Linear, "moe"),
        Ly("mlp.shared_expert.down_proj.weight", "H,sI", K::Linear, "moe"),
        Ly("mlp.shared_expert_gate.weight", "1,H", K::Linear, "moe")};
    const std::vector<Rule> mtp = {
        MG("fc.weight", "H,2*H", K::Linear), MG("norm.weight", "H", K::Norm),
        MG("pre_fc_norm_embedding.weight", "H", K::Norm),
        MG("pre_fc_norm_hidden.weight", "H", K::Norm)};
    auto base_fields = [](std::initializer_list<const char*> extra) {
      auto f = llama_fields({"hd=head_dim?256~", "K=linear_conv_kernel_dim?4~",
                             "dk=linear_key_head_dim?128~", "dv=linear_value_head_dim?128~",
                             "nk=linear_num_key_heads?16~", "nv=linear_num_value_heads?32~",
                             "fai=full_attention_interval?4~", "n_mtp=mtp_num_hidden_layers?0~"});
      for (auto s : extra) {
        std::string_view var(s, std::string_view(s).find('='));
        std::erase_if(f, [&](const Field& x) {
          return std::string_view(x.spec).substr(0, std::string_view(x.spec).find('=')) == var;
        });
        f.push_back({s});
      }
      return f;
    };
    Table t;
    t.model_type = "qwen3_next";
    t.summary = "Qwen3-Next (Gated DeltaNet + gated attention, MoE with shared expert)";
    t.fields = base_fields({"E=@experts?512~", "moe_I=moe_intermediate_size?512~",
                            "I=intermediate_size?5632~",
                            "sI=shared_expert_intermediate_size?512~",
                            "sparse_step=decoder_sparse_step?1~"});
    t.rules = cat({kEmbedNorm, kTwoNorms, full_attn, linear_common,
                   {Ly("linear_attn.in_proj_qkvz.weight", "2*nk*dk+2*nv*dv,H", K::Linear, "linear"),
                    Ly("linear_attn.in_proj_ba.weight", "2*nv,H", K::Linear, "linear")},
                   kMlp, moe});
    t.moe = MoeRule::SparseStep;
    t.linear_attention = true;
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.prefixes = {"model."};
    add(t);

    const std::vector<Rule> split = {
        Ly("linear_attn.in_proj_qkv.weight", "2*nk*dk+nv*dv,H", K::Linear, "linear"),
        Ly("linear_attn.in_proj_z.weight", "nv*dv,H", K::Linear, "linear"),
        Ly("linear_attn.in_proj_a.weight", "nv,H", K::Linear, "linear"),
        Ly("linear_attn.in_proj_b.weight", "nv,H", K::Linear, "linear")};
    t.model_type = "qwen3_5_moe_text";
    t.aliases = {"qwen3_5_moe"};
    t.summary = "Qwen3.5 MoE (split linear-attention projections, prefix model.language_model.)";
    t.rules = cat({kEmbedNorm, kTwoNorms, full_attn, linear_common, split, kMlp, moe, mtp});
    t.mtp = MtpKind::RootMtp;
    t.mtp_count = "n_mtp";
    t.prefixes = {"model.language_model.", "model."};
    t.tower_prefixes = {"model.visual."};
    t.qwen_vision_tower = true;
    add(t);

    Table d;
    d.model_type = "qwen3_5_text";
    d.aliases = {"qwen3_5"};
    d.summary = "Qwen3.5 dense (split linear-attention projections, prefix model.language_model.)";
    d.fields = base_fields({});
    d.rules = cat({kEmbedNorm, kTwoNorms, full_attn, linear_common, split, kMlp, mtp});
    d.linear_attention = true;
    d.mtp = MtpKind::RootMtp;
    d.mtp_count = "n_mtp";
    d.tie_default_t = false;
    d.tie_default_m = 0;
    d.prefixes = {"model.language_model.", "model."};
    d.tower_prefixes = {"model.visual."};
    d.qwen_vision_tower = true;
    add(d);
  }
  // deepseek_v3 (MLA + MoE + MTP at layer index L)
  {
    Table t;
    t.model_type = "deepseek_v3";
    t.aliases = {"kimi_k2"};
    t.summary = "DeepSeek-V3 (MLA, first_k_dense_replace, shared experts, MTP at layer L)";
    t.fields = llama_fields({"E=@experts?256~", "moe_I=moe_intermediate_size?2048~",
                             "n_shared=n_shared_experts?1~", "kv_lora=kv_lora_rank?512~",
                             "q_lora=q_lora_rank?1536~^", "rope=qk_rope_head_dim?64~",
                             "nope=qk_nope_head_dim?128~", "vhd=v_head_dim?128~",
                             "first_k=first_k_dense_replace?3~", "freq=moe_layer_freq?1~",
                             "n_mtp=num_nextn_predict_layers?0~", "has_score_bias=?1"});
    t.rules = cat({kEmbedNorm, kTwoNorms,
                   {Ly("self_attn.q_a_proj.weight", "q_lora,H", K::Linear, "q_lora > 0"),
                    Ly("self_attn.q_a_proj.bias", "q_lora", K::Bias, "q_lora > 0 && attention_bias"),
                    Ly("self_attn.q_a_layernorm.weight", "q_lora", K::Norm, "q_lora > 0"),
                    Ly("self_attn.q_b_proj.weight", "nh*(nope+rope),q_lora", K::Linear, "q_lora > 0"),
                    Ly("self_attn.q_proj.weight", "nh*(nope+rope),H", K::Linear, "q_lora == 0"),
                    Ly("self_attn.kv_a_proj_with_mqa.weight", "kv_lora+rope,H", K::Linear),
                    Ly("self_attn.kv_a_proj_with_mqa.bias", "kv_lora+rope", K::Bias, "attention_bias"),
                    Ly("self_attn.kv_a_layernorm.weight", "kv_lora", K::Norm),
                    Ly("self_attn.kv_b_proj.weight", "nh*(nope+vhd),kv_lora", K::Linear),
                    Ly("self_attn.o_proj.weight", "H,nh*vhd", K::Linear),
                    Ly("self_attn.o_proj.bias", "H", K::Bias, "attention_bias")},
                   kMlp, kDeepseekMoe,
                   {ML("enorm.weight", "H", K::Norm), ML("hnorm.weight", "H", K::Norm),
                    ML("eh_proj.weight", "H,2*H", K::Linear),
                    ML("shared_head.norm.weight", "H", K::Norm),
                    ML("shared_head.head.weight", "V,H", K::Linear),
                    ML("embed_tokens.weight", "V,H", K::Embedding)}});
    t.moe = MoeRule::FirstKDense;
    t.mtp = MtpKind::DecoderLayers;
    t.mtp_count = "n_mtp";
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.mlx_drops_inv_freq = true;
    t.prefixes = {"model."};
    add(t);
  }
  // glm4_moe
  {
    Table t;
    t.model_type = "glm4_moe";
    t.summary = "GLM-4.5 MoE (deepseek-style experts, q/k/v bias iff attention_bias, MTP at L)";
    t.fields = llama_fields({"E=@experts?128~", "moe_I=moe_intermediate_size?1408~",
                             "n_shared=n_shared_experts?1~", "first_k=first_k_dense_replace?1~",
                             "freq=?1", "use_qk_norm=use_qk_norm?0~!",
                             "n_mtp=num_nextn_predict_layers?0~", "has_score_bias=?1"});
    t.rules = cat({kEmbedNorm, kTwoNorms, kAttnGlm, kMlp, kDeepseekMoe,
                   {ML("enorm.weight", "H", K::Norm), ML("hnorm.weight", "H", K::Norm),
                    ML("eh_proj.weight", "H,2*H", K::Linear),
                    ML("shared_head.norm.weight", "H", K::Norm),
                    ML("shared_head.head.weight", "V,H", K::Linear),
                    ML("embed_tokens.weight", "V,H", K::Embedding)}});
    t.moe = MoeRule::FirstKDense;
    t.mtp = MtpKind::DecoderLayers;
    t.mtp_count = "n_mtp";
    t.tie_default_t = false;
    t.tie_default_m = 0;
    t.prefixes = {"model."};
    add(t);
  }
  return v;
}

}  // namespace

const std::vector<const Table*>& tables() {
  static const std::vector<Table> data = build();
  static const std::vector<const Table*> ptrs = [] {
    std::vector<const Table*> p;
    for (const auto& t : data) p.push_back(&t);
    return p;
  }();
  return ptrs;
}

const Table* find_table(std::string_view model_type) {
  for (const Table* t : tables()) {
    if (t->model_type == model_type) return t;
    for (auto a : t->aliases)
      if (a == model_type) return t;
  }
  return nullptr;
}

}  // namespace ckpt::arch::detail
