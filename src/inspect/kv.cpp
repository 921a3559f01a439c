// The KV cache an engine allocates, per architecture, from the resolved config:
//   GQA/MQA/MHA  2 x nkv x hd elements per layer per token (K and V)
//   sliding      the same, for at most `sliding_window` tokens per sequence
//   MLA          kv_lora_rank + qk_rope_head_dim per layer per token (the latent and the rope
//                key, as vLLM and llama.cpp cache it); --mla full: nh x (nope + rope) for K and
//                nh x v_head_dim for V
//   kv-shared    nothing (gemma3n / gemma4 layers that read an earlier layer's cache)
//   linear       nothing per token; a fixed state per sequence: (conv kernel - 1) x conv channels
//                plus value heads x key dim x value dim (Gated DeltaNet: qwen3_next, qwen3.5)
// Sources: specs/architectures.md (layer rules per model_type), specs/gguf.md §8.2 (llama.cpp's
// cache: SWA, MLA, recurrent state), docs/inspect.md (every formula, with examples).
#include <algorithm>

#include "inspect/internal.h"

namespace ckpt::inspect {

namespace {

uint64_t sat_mul(uint64_t a, uint64_t b) {
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(p);
}
uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::optional<int64_t> cfg_int(const json::Value& o, std::string_view key) {
  const json::Value* v = o.find(key);
  if (!v) return std::nullopt;
  if (v->is_int()) return v->as_int();
  if (v->is_number() && v->as_double() == static_cast<double>(static_cast<int64_t>(v->as_double())))
    return static_cast<int64_t>(v->as_double());
  return std::nullopt;
}

std::string dtype_key(std::string_view torch_name) {
  if (torch_name == "float32" || torch_name == "float") return "f32";
  if (torch_name == "bfloat16") return "bf16";
  if (torch_name == "float16" || torch_name == "half") return "f16";
  return "";
}

}  // namespace

std::string serving_dtype(st::DType d) {
  // vLLM's --dtype auto serves float32 checkpoints in float16 and keeps 16-bit ones as they are;
  // the KV cache follows the serving dtype (--kv-cache-dtype auto).
  return d == st::DType::BF16 ? "bf16" : "f16";
}

uint64_t row_bytes(std::string_view dtype, uint64_t n) {
  if (dtype == "f32") return sat_mul(n, 4);
  if (dtype == "f16" || dtype == "bf16") return sat_mul(n, 2);
  if (dtype == "fp8") return n;
  // ggml blocks of 32 elements: q8_0 = fp16 scale + 32 int8 (34 B), q4_0 = fp16 scale + 16 B
  // (specs/gguf.md §2.1); llama.cpp needs rows that are whole blocks, a partial block is counted whole
  if (dtype == "q8_0") return sat_mul((n + 31) / 32, 34);
  if (dtype == "q4_0") return sat_mul((n + 31) / 32, 18);
  return 0;
}

KvLayout kv_layout(const arch::ConfigView& view) {
  KvLayout k;
  if (!view.text || !view.text->is_object()) return k;
  const json::Value& cfg = *view.text;
  const std::string canon = view.arch ? std::string(view.arch->model_type) : std::string();
  // the spelling the config uses (mistral shares llama's tensor table, not its cache rules)
  const std::string mt = !view.text_model_type.empty() ? view.text_model_type : view.model_type;

  auto dim = [&](std::string_view var, std::initializer_list<std::string_view> keys) -> int64_t {
    if (auto d = view.dim(var)) return *d;
    for (auto key : keys)
      if (auto v = cfg_int(cfg, key)) return *v;
    return 0;
  };
  const int64_t L = dim("L", {"num_hidden_layers", "n_layer", "num_layers"});
  const int64_t nh = dim("nh", {"num_attention_heads", "n_head"});
  int64_t nkv = dim("nkv", {"num_key_value_heads"});
  if (nkv <= 0) nkv = nh;
  int64_t hd = dim("hd", {"head_dim"});
  const int64_t H = dim("H", {"hidden_size", "n_embd"});
  if (hd <= 0 && nh > 0) hd = H / nh;
  // every dimension the formulas multiply is bounded, so no product below can overflow
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  bool implausible = false;
  for (const char* var : {"kv_lora", "rope", "nope", "vhd", "nk", "nv", "dk", "dv", "K", "ghd"})
    if (view.dim_or(var, 0) > kMaxDim) implausible = true;
  if (L <= 0 || L > 100000 || nh <= 0 || nkv <= 0 || hd <= 0 || nh > kMaxDim || nkv > kMaxDim || hd > kMaxDim ||
      implausible) {
    k.notes.push_back("the config gives no usable num_hidden_layers / num_attention_heads / head_dim: "
                      "no KV-cache estimate");
    return k;
  }
  if (!view.arch) k.notes.push_back("model_type '" + mt + "' is not in the registry: KV estimated as plain "
                                    "attention from num_key_value_heads and head_dim");
  k.known = true;

  // sliding-window layers
  int64_t window = cfg_int(cfg, "sliding_window").value_or(0);
  const json::Value* sw = cfg.find("sliding_window");
  std::vector<bool> sliding(static_cast<size_t>(L), false);
  const bool have_types = static_cast<int64_t>(view.layer_types.size()) == L;
  if (have_types) {
    for (int64_t i = 0; i < L; ++i)
      sliding[i] = view.layer_types[i] == "sliding_attention" || view.layer_types[i] == "chunked_attention";
    if (window <= 0) {
      if (mt == "gpt_oss") window = 128;
      else if (mt.starts_with("gemma3n")) window = 512;
      else if (mt.starts_with("gemma")) window = 4096;
    }
  } else if (mt == "gemma2" || mt == "gpt_oss") {
    // transformers Gemma2Config / GptOssConfig: sliding on even layers, full on odd ones
    for (int64_t i = 0; i < L; ++i) sliding[i] = i % 2 == 0;
    if (window <= 0) window = mt == "gpt_oss" ? 128 : 4096;
  } else if (mt == "gemma3_text" || mt == "gemma3") {
    const int64_t p = std::max<int64_t>(1, cfg_int(cfg, "sliding_window_pattern").value_or(6));
    for (int64_t i = 0; i < L; ++i) sliding[i] = (i + 1) % p != 0;
    if (window <= 0) window = 4096;
  } else if (mt == "gemma3n_text" || mt == "gemma3n") {
    for (int64_t i = 0; i < L; ++i) sliding[i] = (i + 1) % 5 != 0;
    if (window <= 0) window = 512;
  } else if (mt == "gemma4_text" || mt == "gemma4") {
    const int64_t p = std::max<int64_t>(1, view.dim_or("swp", 5));
    for (int64_t i = 0; i < L; ++i) sliding[i] = (i + 1) % p != 0;
  } else if (mt == "qwen2" || mt == "qwen3" || mt == "qwen3_moe" || mt == "qwen2_moe" || mt == "mimo") {
    // Qwen2Config: the window applies only with use_sliding_window, to layers >= max_window_layers
    if (cfg.get_bool("use_sliding_window").value_or(false) && window > 0) {
      const int64_t from = cfg_int(cfg, "max_window_layers").value_or(28);
      for (int64_t i = 0; i < L; ++i) sliding[i] = i >= from;
    }
  } else if (mt == "mistral" || mt == "mixtral" || mt == "phi3" || !view.arch) {
    // every layer attends within the window (MistralConfig's default window is 4096)
    if (mt == "mistral" && !sw) window = 4096;
    if (window > 0)
      for (int64_t i = 0; i < L; ++i) sliding[i] = true;
  }
  if (window <= 0) std::fill(sliding.begin(), sliding.end(), false);

  // linear-attention (Gated DeltaNet) layers: the registry's rule (arch/registry.cpp set_layer)
  const bool linear_arch = view.dim("dk") && view.dim("nv") && view.dim("nk");
  const int64_t fai = std::max<int64_t>(1, view.dim_or("fai", 4));
  // MLA
  const bool mla = view.dim("kv_lora").has_value();
  // kv-shared layers (gemma3n, gemma4): the last num_kv_shared_layers store nothing
  const int64_t n_shared = (mt.starts_with("gemma3n") || mt.starts_with("gemma4")) ? view.dim_or("n_shared_kv", 0) : 0;

  uint64_t n_full = 0, n_sliding = 0, n_linear = 0, n_mla = 0, n_shared_layers = 0;
  for (int64_t i = 0; i < L; ++i) {
    AttnLayer a;
    bool linear = false;
    if (linear_arch) {
      if (have_types) linear = view.layer_types[i] == "linear_attention";
      else linear = (i + 1) % fai != 0;
    }
    if (linear) {
      a.kind = LayerKind::Linear;
      ++n_linear;
    } else if (n_shared > 0 && i >= L - n_shared) {
      a.kind = LayerKind::KvShared;
      ++n_shared_layers;
    } else if (mla) {
      a.kind = LayerKind::Mla;
      a.k_elems = static_cast<uint64_t>(view.dim_or("kv_lora", 0) + view.dim_or("rope", 0));
      ++n_mla;
    } else {
      int64_t hdi = hd;
      if (view.dim("ghd") && !sliding[i]) hdi = view.dim_or("ghd", hd);  // gemma4 global layers
      a.k_elems = a.v_elems = static_cast<uint64_t>(nkv * hdi);
      if (sliding[i]) {
        a.kind = LayerKind::Sliding;
        a.window = static_cast<uint64_t>(window);
        ++n_sliding;
      } else {
        a.kind = LayerKind::Full;
        ++n_full;
      }
    }
    k.layers.push_back(a);
  }
  k.sliding_window = n_sliding ? static_cast<uint64_t>(window) : 0;
  if (mla) {
    k.attention = "mla";
    k.mla_full_k = static_cast<uint64_t>(nh * (view.dim_or("nope", 0) + view.dim_or("rope", 0)));
    k.mla_full_v = static_cast<uint64_t>(nh * view.dim_or("vhd", 0));
  } else {
    k.attention = nkv == 1 ? "mqa" : nkv == nh ? "mha" : "gqa";
  }
  if (n_linear) {
    k.attention = "hybrid linear-attention/" + k.attention;
    const int64_t nk = view.dim_or("nk", 0), nv = view.dim_or("nv", 0), dk = view.dim_or("dk", 0),
                  dv = view.dim_or("dv", 0), K = view.dim_or("K", 4);
    k.conv_elems = static_cast<uint64_t>(std::max<int64_t>(0, K - 1) * (2 * nk * dk + nv * dv));
    k.recurrent_elems = static_cast<uint64_t>(nv * dk * dv);
    if (auto s = cfg.get_string("mamba_ssm_dtype")) k.recurrent_dtype = dtype_key(*s);
  }
  if (n_sliding) k.attention += " + sliding window";
  if (n_shared_layers) k.attention += " + kv-shared layers";
  return k;
}

KvCache kv_cache(const KvLayout& layout, const KvOptions& opts, std::string_view model_dtype,
                 uint64_t context, uint64_t batch) {
  KvCache c;
  c.known = layout.known;
  c.attention = layout.attention;
  c.dtype = opts.dtype == "auto" ? std::string(model_dtype) : opts.dtype;
  c.swa_mode = opts.swa_full ? "full" : "window";
  c.context = context;
  c.batch = batch;
  c.sliding_window = layout.sliding_window;
  bool any_mla = false;
  uint64_t per_seq = 0;
  for (const auto& a : layout.layers) {
    uint64_t per_token = 0, tokens = context;
    switch (a.kind) {
      case LayerKind::Full:
        ++c.full_layers;
        per_token = row_bytes(c.dtype, a.k_elems) + row_bytes(c.dtype, a.v_elems);
        c.bytes_per_token_beyond_window += per_token;
        break;
      case LayerKind::Sliding:
        ++c.sliding_layers;
        per_token = row_bytes(c.dtype, a.k_elems) + row_bytes(c.dtype, a.v_elems);
        if (opts.swa_full) c.bytes_per_token_beyond_window += per_token;
        else tokens = std::min(context, a.window);
        break;
      case LayerKind::Mla:
        ++c.mla_layers;
        any_mla = true;
        per_token = opts.mla_full ? row_bytes(c.dtype, layout.mla_full_k) + row_bytes(c.dtype, layout.mla_full_v)
                                  : row_bytes(c.dtype, a.k_elems);
        c.bytes_per_token_beyond_window += per_token;
        break;
      case LayerKind::Linear: ++c.linear_layers; break;
      case LayerKind::KvShared: ++c.kv_shared_layers; break;
    }
    c.bytes_per_token += per_token;
    per_seq = sat_add(per_seq, sat_mul(per_token, tokens));
  }
  if (any_mla) c.mla_mode = opts.mla_full ? "full" : "latent";
  c.bytes = sat_mul(per_seq, batch);
  if (c.linear_layers) {
    c.state_conv_dtype = opts.state_dtype != "auto" ? opts.state_dtype
                         : !layout.conv_dtype.empty() ? layout.conv_dtype : std::string(model_dtype);
    c.state_recurrent_dtype = opts.state_dtype != "auto" ? opts.state_dtype
                              : !layout.recurrent_dtype.empty() ? layout.recurrent_dtype : std::string(model_dtype);
    c.state_conv_bytes = sat_mul(c.linear_layers, row_bytes(c.state_conv_dtype, layout.conv_elems));
    c.state_recurrent_bytes = sat_mul(c.linear_layers, row_bytes(c.state_recurrent_dtype, layout.recurrent_elems));
    c.state_bytes_per_sequence = sat_add(c.state_conv_bytes, c.state_recurrent_bytes);
    c.state_bytes = sat_mul(c.state_bytes_per_sequence, batch);
  }
  c.total_bytes = sat_add(c.bytes, c.state_bytes);
  return c;
}

}  // namespace ckpt::inspect
