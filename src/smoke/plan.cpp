// The smoke pass's model plan: which forward-pass family a config names, its hyperparameters
// as the HF reference implementations read them, and the dequantized view of every weight.
// Names and prefixes come from the architecture registry's config view (one source of truth);
// the few numbers the registry has no use for (eps, rope, soft-capping) are read here.
#include <cmath>
#include <set>

#include "ckpt/arch.h"
#include "smoke/internal.h"

namespace ckpt::smoke {

namespace {

const std::set<std::string, std::less<>> kFamilies = {"llama", "mistral", "qwen2", "qwen3", "phi3",  "gemma",
                                                      "gemma2", "gemma3_text", "gemma3", "mixtral", "qwen3_moe"};

std::optional<double> number(const json::Value* obj, std::string_view key) {
  if (!obj || !obj->is_object()) return std::nullopt;
  const json::Value* v = obj->find(key);
  if (!v || !v->is_number()) return std::nullopt;
  return v->as_double();
}

// A config value as Python's loaders read it, with `rope_parameters` (transformers >= 4.56)
// consulted when the top-level key is absent.
std::optional<double> rope_number(const json::Value* text, std::string_view key) {
  if (auto v = number(text, key)) return v;
  if (text && text->is_object())
    if (const json::Value* rp = text->find("rope_parameters"); rp && rp->is_object()) return number(rp, key);
  return std::nullopt;
}

bool read_rope(const json::Value* text, const json::Value* scaling, double theta, uint32_t rot, Rope& r,
               std::vector<std::string>& notes) {
  r.theta = theta;
  r.rot_dim = rot;
  if (!scaling || !scaling->is_object()) return true;
  std::string type;
  if (auto t = scaling->get_string("rope_type")) type = *t;
  else if (auto t2 = scaling->get_string("type")) type = *t2;
  if (type.empty() || type == "default") return true;
  if (type == "linear") {
    r.scaling = "linear";
    r.factor = number(scaling, "factor").value_or(1);
    return true;
  }
  if (type == "llama3") {
    r.scaling = "llama3";
    r.factor = number(scaling, "factor").value_or(8);
    r.low_freq_factor = number(scaling, "low_freq_factor").value_or(1);
    r.high_freq_factor = number(scaling, "high_freq_factor").value_or(4);
    r.original_max = number(scaling, "original_max_position_embeddings").value_or(8192);
    return true;
  }
  if (type == "longrope" || type == "su") {
    // Phi-3 long-context models: for a text shorter than original_max_position_embeddings the
    // short factors apply, and cos/sin are scaled by sqrt(1 + ln(s) / ln(original)).
    r.scaling = "longrope";
    if (const json::Value* sf = scaling->find("short_factor"); sf && sf->is_array())
      for (const auto& x : sf->as_array())
        if (x.is_number()) r.short_factor.push_back(x.as_double());
    const double orig = number(text, "original_max_position_embeddings").value_or(4096);
    const double maxpos = number(text, "max_position_embeddings").value_or(orig);
    const double s = maxpos / orig;
    r.attention_factor = number(scaling, "attention_factor").value_or(s <= 1 ? 1.0 : std::sqrt(1 + std::log(s) / std::log(orig)));
    if (r.short_factor.size() != rot / 2) {
      notes.push_back("rope_scaling longrope short_factor has " + std::to_string(r.short_factor.size()) +
                      " entries, not " + std::to_string(rot / 2) + ": default frequencies used");
      r.short_factor.clear();
    }
    return true;
  }
  notes.push_back("rope_scaling type \"" + type + "\" is not modelled by the smoke pass: default frequencies used (a text of a few hundred tokens is within every scaled model's original context)");
  return true;
}

}  // namespace

bool make_plan(const Checkpoint& ck, Plan& plan, FindingSink& out) {
  if (is_gguf_target(ck)) return make_gguf_plan(ck, plan, out);
  Hyper& hp = plan.hp;
  if (!ck.config.ok() || !ck.config.value.is_object()) {
    out.add("SM010", Severity::warning, "smoke pass not run: config.json is absent or unreadable", ck.config.file, "",
            "the CF findings say why");
    return false;
  }
  const arch::ConfigView view = arch::resolve_config(ck.config.value, [&](std::string_view n) { return ck.weight(n) != nullptr; });
  const std::string type = view.text_model_type.empty() ? view.model_type : view.text_model_type;
  if (!kFamilies.count(type)) {
    std::string known;
    for (const auto& f : kFamilies) known += (known.empty() ? "" : ", ") + f;
    out.add("SM010", Severity::warning, "smoke pass not run: model_type \"" + type + "\" has no forward pass in ckpt",
            ck.config.file, "", "ckpt smoke runs " + known);
    return false;
  }
  const json::Value* t = view.text ? view.text : &ck.config.value;
  auto dim = [&](std::string_view key, std::string_view var) -> int64_t {
    if (auto v = view.dim(var)) return *v;
    if (auto n = number(t, key)) return int64_t(*n);
    return 0;
  };
  hp.family = type == "gemma3" ? "gemma3_text" : type;
  hp.H = uint32_t(dim("hidden_size", "H"));
  hp.L = uint32_t(dim("num_hidden_layers", "L"));
  hp.nh = uint32_t(dim("num_attention_heads", "nh"));
  hp.nkv = uint32_t(dim("num_key_value_heads", "nkv"));
  if (!hp.nkv) hp.nkv = hp.nh;
  hp.hd = uint32_t(dim("head_dim", "hd"));
  if (!hp.hd && hp.nh) hp.hd = hp.H / hp.nh;
  hp.I = uint32_t(dim("intermediate_size", "I"));
  hp.V = uint32_t(dim("vocab_size", "V"));
  hp.prefix = view.prefix;
  hp.head = view.head;
  hp.tied = view.tied;
  hp.model_dtype = view.model_dtype;
  if (!hp.H || !hp.L || !hp.nh || !hp.hd || !hp.V || hp.nh % hp.nkv != 0 || hp.L > 4096 || hp.H > (1u << 20)) {
    out.add("SM010", Severity::warning, "smoke pass not run: the config's dimensions are unusable (hidden_size " +
                                            std::to_string(hp.H) + ", layers " + std::to_string(hp.L) + ", heads " +
                                            std::to_string(hp.nh) + "/" + std::to_string(hp.nkv) + ", head_dim " +
                                            std::to_string(hp.hd) + ")",
            ck.config.file, "", "the CF/AR findings say which field is wrong");
    return false;
  }

  const bool gemma = hp.family.rfind("gemma", 0) == 0;
  hp.eps = number(t, "rms_norm_eps").value_or(1e-6);
  hp.norm_plus_one = gemma;
  hp.embed_scale = gemma;
  hp.sandwich_norms = hp.family == "gemma2" || hp.family == "gemma3_text";
  hp.qk_norm = hp.family == "qwen3" || hp.family == "qwen3_moe" || hp.family == "gemma3_text";
  hp.fused_qkv = hp.family == "phi3";
  hp.fused_gate_up = hp.family == "phi3";
  std::string act = "silu";
  if (auto a = t->get_string("hidden_activation")) act = *a;
  else if (auto b = t->get_string("hidden_act")) act = *b;
  if (gemma && act == "gelu") act = "gelu_pytorch_tanh";  // transformers forces the tanh approximation for gemma
  hp.act = act.rfind("gelu", 0) == 0 ? Act::gelu_tanh : Act::silu;
  if (act != "silu" && act != "swish" && act.rfind("gelu", 0) != 0)
    hp.notes.push_back("activation \"" + act + "\" is not modelled: silu used");
  hp.attn_scale = 1.0 / std::sqrt(double(hp.hd));
  if (auto q = number(t, "query_pre_attn_scalar"); q && (hp.family == "gemma2" || hp.family == "gemma3_text") && *q > 0)
    hp.attn_scale = 1.0 / std::sqrt(*q);
  hp.attn_softcap = number(t, "attn_logit_softcapping").value_or(0);
  hp.final_softcap = number(t, "final_logit_softcapping").value_or(0);

  // Sliding-window layers: the config's layer_types when given, else the family's pattern.
  hp.sliding.assign(hp.L, false);
  if (auto w = number(t, "sliding_window"); w && *w > 0) hp.sliding_window = uint32_t(std::min(*w, 1e9));
  if (!view.layer_types.empty() && view.layer_types.size() == hp.L) {
    for (uint32_t i = 0; i < hp.L; ++i) hp.sliding[i] = view.layer_types[i] == "sliding_attention";
  } else if (hp.family == "gemma2") {
    for (uint32_t i = 0; i < hp.L; ++i) hp.sliding[i] = i % 2 == 0;
  } else if (hp.family == "gemma3_text") {
    const int64_t pattern = int64_t(number(t, "sliding_window_pattern").value_or(6));
    for (uint32_t i = 0; i < hp.L; ++i) hp.sliding[i] = pattern > 0 && (int64_t(i) + 1) % pattern != 0;
  } else if (hp.sliding_window && (hp.family == "mistral" || hp.family == "mixtral" || hp.family == "phi3")) {
    for (uint32_t i = 0; i < hp.L; ++i) hp.sliding[i] = true;
  } else if (hp.family == "qwen2" || hp.family == "qwen3" || hp.family == "qwen3_moe") {
    // Qwen applies the window only with use_sliding_window, above max_window_layers.
    auto use = t->get_bool("use_sliding_window");
    const int64_t maxw = int64_t(number(t, "max_window_layers").value_or(hp.L));
    for (uint32_t i = 0; i < hp.L; ++i) hp.sliding[i] = use.value_or(false) && hp.sliding_window && int64_t(i) >= maxw;
  }
  if (!hp.sliding_window) hp.sliding.assign(hp.L, false);

  // RoPE.
  const double prf = number(t, "partial_rotary_factor").value_or(1.0);
  uint32_t rot = uint32_t(double(hp.hd) * prf);
  rot -= rot % 2;
  const double theta = rope_number(t, "rope_theta").value_or(10000);
  const json::Value* scaling = t->find("rope_scaling");
  read_rope(t, scaling, theta, rot, hp.rope, hp.notes);
  if (hp.family == "gemma3_text") read_rope(t, nullptr, number(t, "rope_local_base_freq").value_or(10000), rot, hp.rope_local, hp.notes);
  else hp.rope_local = hp.rope;

  // Experts.
  if (hp.family == "mixtral" || hp.family == "qwen3_moe") {
    hp.n_experts = uint32_t(view.experts.count);
    hp.top_k = uint32_t(view.experts.active ? view.experts.active : 2);
    hp.moe_I = uint32_t(number(t, "moe_intermediate_size").value_or(hp.I));
    hp.norm_topk = hp.family == "mixtral" ? true : t->get_bool("norm_topk_prob").value_or(false);
    hp.expert_prefix = hp.family == "mixtral" ? "block_sparse_moe" : "mlp";
    hp.mixtral_names = hp.family == "mixtral";
    hp.moe_layer.assign(hp.L, hp.n_experts > 0);
    if (hp.family == "qwen3_moe") {
      const int64_t step = int64_t(number(t, "decoder_sparse_step").value_or(1));
      for (uint32_t i = 0; i < hp.L; ++i) hp.moe_layer[i] = hp.n_experts > 0 && step > 0 && (int64_t(i) + 1) % step == 0;
      for (int64_t i : view.mlp_only_layers)
        if (i >= 0 && i < int64_t(hp.L)) hp.moe_layer[size_t(i)] = false;
    }
    if (!hp.n_experts || hp.top_k == 0 || hp.top_k > hp.n_experts) {
      out.add("SM010", Severity::warning, "smoke pass not run: the expert count (" + std::to_string(hp.n_experts) +
                                              ") or experts per token (" + std::to_string(hp.top_k) + ") is unusable",
              ck.config.file, "", "the CF findings say which field is wrong");
      return false;
    }
  } else {
    hp.moe_layer.assign(hp.L, false);
  }

  plan.weights = diff::dequant::weights_of(ck);
  if (plan.weights.by_name.empty()) {
    out.add("SM011", Severity::warning, "smoke pass not run: no weight of the checkpoint could be read as numbers", "", "",
            plan.weights.notes.empty() ? std::string("the ST/QZ findings say why") : plan.weights.notes.front());
    return false;
  }
  return true;
}

}  // namespace ckpt::smoke
