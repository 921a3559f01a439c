// llama.cpp's per-architecture tensor requests (specs/gguf.md §4.2-4.12; glm4moe §4.12, read from
// src/models/<arch>.cpp at llama.cpp 3f545bec), as formulas over the GGUF hyperparameters.
#include <algorithm>
#include <array>

#include "ckpt/gguf_arch.h"

namespace ckpt::gguf_arch {

namespace {

constexpr std::array<std::string_view, 11> kModelled{"llama", "qwen2", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3",
                                                     "phi3", "deepseek2", "gpt-oss", "glm4moe"};

std::optional<uint64_t> u32_of(const gguf::File& g, const std::string& key) {
  const auto* kv = g.find(key);
  if (!kv || kv->value.type != gguf::ValueType::U32) return std::nullopt;
  return kv->value.bits;
}

// A scalar u32 spread over L layers, or an i32/u32 array of exactly L entries.
bool per_layer(const gguf::File& g, const std::string& key, uint64_t L, std::vector<uint64_t>& out, uint64_t fallback) {
  out.assign(L, fallback);
  const auto* kv = g.find(key);
  if (!kv) return true;
  if (kv->value.type == gguf::ValueType::U32) {
    out.assign(L, kv->value.bits);
    return true;
  }
  if (!kv->value.is_array() || kv->value.count != L) return false;
  for (uint64_t i = 0; i < L; ++i) {
    auto v = kv->value.uint_at(i);
    if (!v) return false;
    out[i] = *v;
  }
  return true;
}

}  // namespace

std::vector<std::string_view> modelled_architectures() { return {kModelled.begin(), kModelled.end()}; }
bool is_modelled(std::string_view arch) { return std::find(kModelled.begin(), kModelled.end(), arch) != kModelled.end(); }

std::optional<Hparams> read_hparams(const gguf::File& g, uint64_t n_tokens, std::string* why) {
  Hparams hp;
  const auto arch = g.get_string("general.architecture");
  if (!arch) {
    *why = "general.architecture is missing";
    return std::nullopt;
  }
  hp.arch = std::string(*arch);
  const std::string p = hp.arch + ".";
  auto need = [&](const char* k, uint64_t& out) {
    auto v = u32_of(g, p + k);
    if (!v) {
      *why = p + k + " is missing or not a u32";
      return false;
    }
    out = *v;
    return true;
  };
  if (!need("embedding_length", hp.E) || !need("block_count", hp.L)) return std::nullopt;
  if (hp.L == 0 || hp.L > 512) {
    *why = p + "block_count is out of range";
    return std::nullopt;
  }
  hp.V = n_tokens ? n_tokens : u32_of(g, p + "vocab_size").value_or(0);
  hp.nextn = std::min<uint64_t>(u32_of(g, p + "nextn_predict_layers").value_or(0), hp.L);
  if (!per_layer(g, p + "feed_forward_length", hp.L, hp.F, 0) || !per_layer(g, p + "attention.head_count", hp.L, hp.H, 0)) {
    *why = "a per-layer hyperparameter array does not have block_count entries";
    return std::nullopt;
  }
  if (!per_layer(g, p + "attention.head_count_kv", hp.L, hp.Hkv, 0)) {
    *why = p + "attention.head_count_kv does not have block_count entries";
    return std::nullopt;
  }
  for (uint64_t i = 0; i < hp.L; ++i)
    if (!g.find(p + "attention.head_count_kv")) hp.Hkv[i] = hp.H[i];
  const uint64_t h0 = hp.H.empty() ? 0 : hp.H[0];
  hp.Dk = u32_of(g, p + "attention.key_length").value_or(h0 ? hp.E / h0 : 0);
  hp.Dv = u32_of(g, p + "attention.value_length").value_or(h0 ? hp.E / h0 : 0);
  hp.R = u32_of(g, p + "rope.dimension_count").value_or(hp.Dk);
  hp.X = u32_of(g, p + "expert_count").value_or(0);
  hp.Xu = u32_of(g, p + "expert_used_count").value_or(0);
  hp.Fe = u32_of(g, p + "expert_feed_forward_length").value_or(0);
  if (hp.Fe == 0 && hp.Xu && !hp.F.empty()) hp.Fe = hp.F[0] / hp.Xu;  // qwen3moe's default
  hp.S = u32_of(g, p + "expert_shared_count").value_or(0);
  hp.Ld = u32_of(g, p + "leading_dense_block_count").value_or(0);
  hp.Rq = u32_of(g, p + "attention.q_lora_rank").value_or(0);
  hp.Rkv = u32_of(g, p + "attention.kv_lora_rank").value_or(0);
  const auto km = u32_of(g, p + "attention.key_length_mla"), vm = u32_of(g, p + "attention.value_length_mla");
  hp.mla = km && vm && *km && *vm;
  hp.Dkm = km.value_or(hp.Dk);
  hp.Dvm = vm.value_or(hp.Dv);
  if (auto s = g.get_string(p + "rope.scaling.type")) hp.rope_scaling = std::string(*s);
  if (hp.V == 0) {
    *why = "no token count (tokenizer.ggml.tokens or " + p + "vocab_size)";
    return std::nullopt;
  }
  return hp;
}

std::vector<ExpectedTensor> expected_tensors(const Hparams& hp) {
  std::vector<ExpectedTensor> out;
  const std::string& a = hp.arch;
  const uint64_t E = hp.E, V = hp.V;
  auto add = [&](std::string name, std::vector<uint64_t> ne, Need need = Need::required, std::string group = {}, uint8_t form = 0,
                 bool form_optional = false) {
    out.push_back({std::move(name), std::move(ne), need, std::move(group), form, form_optional});
  };
  const auto opt = Need::optional;
  add("token_embd.weight", {E, V});
  add("output_norm.weight", {E});
  if (a == "gpt-oss") add("output.weight", {E, V});
  else if (a != "gemma" && a != "gemma2") add("output.weight", {E, V}, opt);  // tied fallback to token_embd
  if (a == "qwen2") add("output.bias", {V}, opt);
  if (a == "llama" || a == "phi3") {
    if (hp.rope_scaling == "longrope" || a == "phi3") {
      add("rope_factors_long.weight", {hp.R / 2}, opt);
      add("rope_factors_short.weight", {hp.R / 2}, opt);
    }
    if (a == "llama" && hp.rope_scaling != "longrope") add("rope_freqs.weight", {hp.R / 2}, opt);
  }
  const uint64_t n_layer = hp.L - hp.nextn;
  for (uint64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const uint64_t H = hp.H[i], Hkv = hp.Hkv[i], F = hp.F[i];
    const uint64_t Dk = a == "gpt-oss" ? hp.R : hp.Dk, Dv = a == "gpt-oss" ? hp.R : hp.Dv;
    add(b + "attn_norm.weight", {E});
    // Attention projections: the fused attn_qkv is tried first, then q/k/v.
    if (a != "deepseek2") {
      uint64_t q = H * Dk, k = Hkv * Dk, v = Hkv * Dv;
      if (a == "qwen2" || a == "phi3") q = E, k = Hkv * Dv;
      if (a == "qwen3" || a == "qwen3moe") k = Hkv * Dv;
      const std::string g = b + "qkv";
      const bool split_optional = a == "phi3";
      add(b + "attn_qkv.weight", {E, q + k + v}, Need::required, g, 0);
      add(b + "attn_qkv.bias", {q + k + v}, opt, g, 0);
      add(b + "attn_q.weight", {E, q}, Need::required, g, 1, split_optional);
      add(b + "attn_k.weight", {E, k}, Need::required, g, 1, split_optional);
      add(b + "attn_v.weight", {E, v}, Need::required, g, 1, split_optional);
      add(b + "attn_q.bias", {q}, opt, g, 1);
      add(b + "attn_k.bias", {k}, opt, g, 1);
      add(b + "attn_v.bias", {v}, opt, g, 1);
      const uint64_t o_in = (a == "qwen2" || a == "phi3") ? E : H * Dk;
      add(b + "attn_output.weight", {o_in, E});
      add(b + "attn_output.bias", {E}, a == "gpt-oss" ? Need::required : opt);
    } else {
      const uint64_t R = hp.R, Nope = hp.Dkm > R ? hp.Dkm - R : 0;
      if (hp.Rq > 0) {
        add(b + "attn_q_a_norm.weight", {hp.Rq});
        add(b + "attn_q_a.weight", {E, hp.Rq});
        add(b + "attn_q_b.weight", {hp.Rq, H * hp.Dkm});
      } else {
        add(b + "attn_q.weight", {E, H * hp.Dkm});
      }
      add(b + "attn_kv_a_norm.weight", {hp.Rkv});
      add(b + "attn_kv_a_mqa.weight", {E, hp.Rkv + R});
      if (hp.mla) {
        add(b + "attn_k_b.weight", {Nope, hp.Rkv, H});
        add(b + "attn_v_b.weight", {hp.Rkv, hp.Dvm, H});
      } else {
        add(b + "attn_kv_b.weight", {hp.Rkv, H * (Nope + hp.Dvm)});
      }
      add(b + "attn_output.weight", {H * hp.Dvm, E});
    }
    if (a == "qwen3" || a == "qwen3moe" || a == "gemma3" || a == "glm4moe") {
      // glm4moe: "optional for GLM-4.5 355B variant"
      add(b + "attn_q_norm.weight", {Dk}, a == "glm4moe" ? opt : Need::required);
      add(b + "attn_k_norm.weight", {Dk}, a == "glm4moe" ? opt : Need::required);
    }
    if (a == "gemma2" || a == "gemma3" || a == "gpt-oss" || a == "glm4moe") add(b + "post_attention_norm.weight", {E});
    if (a == "gemma2" || a == "gemma3") add(b + "post_ffw_norm.weight", {E});
    if (a != "gpt-oss" && a != "glm4moe") add(b + "ffn_norm.weight", {E});  // their post-attention norm feeds the FFN
    if (a == "gpt-oss") {
      add(b + "attn_sinks.weight", {H});
      add(b + "ffn_gate_inp.weight", {E, hp.X});
      add(b + "ffn_gate_inp.bias", {hp.X});
      add(b + "ffn_gate_exps.weight", {E, hp.Fe, hp.X});
      add(b + "ffn_up_exps.weight", {E, hp.Fe, hp.X});
      add(b + "ffn_down_exps.weight", {hp.Fe, E, hp.X});
      add(b + "ffn_gate_exps.bias", {hp.Fe, hp.X});
      add(b + "ffn_up_exps.bias", {hp.Fe, hp.X});
      add(b + "ffn_down_exps.bias", {E, hp.X});
      continue;
    }
    if (a == "phi3") {
      add(b + "ffn_up.weight", {E, 2 * F});
      add(b + "ffn_down.weight", {F, E});
      continue;
    }
    const bool moe = a == "qwen3moe" || (a == "llama" && hp.X > 0) || ((a == "deepseek2" || a == "glm4moe") && i >= hp.Ld);
    if (!moe) {
      add(b + "ffn_gate.weight", {E, F});
      add(b + "ffn_up.weight", {E, F});
      add(b + "ffn_down.weight", {F, E});
      if (a == "llama") {
        add(b + "ffn_gate.bias", {F}, opt);
        add(b + "ffn_up.bias", {F}, opt);
        add(b + "ffn_down.bias", {E}, opt);
      }
      continue;
    }
    const uint64_t Fx = a == "llama" ? F : hp.Fe;
    add(b + "ffn_gate_inp.weight", {E, hp.X});
    // deepseek2 and glm4moe: hp.S shared experts, fused into one FFN of S x the expert width.
    auto add_shared_experts = [&](const std::string& blk_prefix) {
      if (hp.S == 0) return;
      add(blk_prefix + "ffn_gate_shexp.weight", {E, Fx * hp.S});
      add(blk_prefix + "ffn_up_shexp.weight", {E, Fx * hp.S});
      add(blk_prefix + "ffn_down_shexp.weight", {Fx * hp.S, E});
    };
    if (a == "deepseek2") {
      add(b + "exp_probs_b.bias", {hp.X}, opt);
      const std::string g = b + "gate_up";
      add(b + "ffn_gate_exps.weight", {E, Fx, hp.X}, Need::required, g, 0);
      add(b + "ffn_up_exps.weight", {E, Fx, hp.X}, Need::required, g, 0);
      add(b + "ffn_gate_up_exps.weight", {E, 2 * Fx, hp.X}, Need::required, g, 1);
      add(b + "ffn_down_exps.weight", {Fx, E, hp.X});
      add_shared_experts(b);
      continue;
    }
    if (a == "glm4moe") {
      add(b + "exp_probs_b.bias", {hp.X});  // required here, unlike deepseek2
      add(b + "ffn_gate_exps.weight", {E, Fx, hp.X});
      add(b + "ffn_up_exps.weight", {E, Fx, hp.X});
      add(b + "ffn_down_exps.weight", {Fx, E, hp.X});
      add_shared_experts(b);
      continue;
    }
    add(b + "ffn_gate_exps.weight", {E, Fx, hp.X}, a == "llama" ? opt : Need::required);
    add(b + "ffn_up_exps.weight", {E, Fx, hp.X});
    add(b + "ffn_down_exps.weight", {Fx, E, hp.X});
  }
  return out;
}

std::vector<std::pair<std::string, gguf::WriteValue>> hparam_kvs(const Hparams& hp) {
  using gguf::WriteValue;
  const std::string p = hp.arch + ".";
  std::vector<std::pair<std::string, WriteValue>> kv{
      {"general.architecture", WriteValue::string(hp.arch)},
      {p + "context_length", WriteValue::u32(4096)},
      {p + "embedding_length", WriteValue::u32(static_cast<uint32_t>(hp.E))},
      {p + "block_count", WriteValue::u32(static_cast<uint32_t>(hp.L))},
      {p + "feed_forward_length", WriteValue::u32(static_cast<uint32_t>(hp.F.empty() ? 0 : hp.F[0]))},
      {p + "attention.head_count", WriteValue::u32(static_cast<uint32_t>(hp.H.empty() ? 0 : hp.H[0]))},
      {p + "attention.head_count_kv", WriteValue::u32(static_cast<uint32_t>(hp.Hkv.empty() ? 0 : hp.Hkv[0]))},
      {p + "attention.key_length", WriteValue::u32(static_cast<uint32_t>(hp.Dk))},
      {p + "attention.value_length", WriteValue::u32(static_cast<uint32_t>(hp.Dv))},
      {p + "rope.dimension_count", WriteValue::u32(static_cast<uint32_t>(hp.R))},
      {p + "rope.freq_base", WriteValue::f32(10000.0f)},
      {p + "attention.layer_norm_rms_epsilon", WriteValue::f32(1e-6f)},
  };
  if (hp.X) {
    kv.push_back({p + "expert_count", WriteValue::u32(static_cast<uint32_t>(hp.X))});
    kv.push_back({p + "expert_used_count", WriteValue::u32(static_cast<uint32_t>(hp.Xu))});
    if (hp.Fe) kv.push_back({p + "expert_feed_forward_length", WriteValue::u32(static_cast<uint32_t>(hp.Fe))});
  }
  if (hp.arch == "deepseek2" || hp.arch == "glm4moe") {
    kv.push_back({p + "expert_shared_count", WriteValue::u32(static_cast<uint32_t>(hp.S))});
    kv.push_back({p + "leading_dense_block_count", WriteValue::u32(static_cast<uint32_t>(hp.Ld))});
  }
  if (hp.arch == "deepseek2") {
    kv.push_back({p + "attention.q_lora_rank", WriteValue::u32(static_cast<uint32_t>(hp.Rq))});
    kv.push_back({p + "attention.kv_lora_rank", WriteValue::u32(static_cast<uint32_t>(hp.Rkv))});
    if (hp.mla) {
      kv.push_back({p + "attention.key_length_mla", WriteValue::u32(static_cast<uint32_t>(hp.Dkm))});
      kv.push_back({p + "attention.value_length_mla", WriteValue::u32(static_cast<uint32_t>(hp.Dvm))});
    }
  }
  if (hp.arch == "gpt-oss") kv.push_back({p + "attention.sliding_window", WriteValue::u32(128)});
  return kv;
}

}  // namespace ckpt::gguf_arch
