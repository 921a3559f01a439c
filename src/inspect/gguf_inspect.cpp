// ckpt inspect for a GGUF target (a .gguf file, a directory of them, a split set, an Ollama model):
// the model's dimensions from the GGUF metadata ({arch}.block_count, .attention.head_count_kv,
// ...), parameters and bytes from the tensor infos (block types at their element counts), the
// quantization mix by ggml type, and the KV cache llama.cpp allocates (f16 K and V per layer by
// default; MLA's latent for deepseek2; sliding-window layers by the architecture's pattern).
// Facts: specs/gguf.md sections 2 (types), 3 (metadata keys), 5 (tensor names).
#include <algorithm>
#include <cmath>
#include <map>

#include "ckpt/gguf.h"
#include "inspect/internal.h"

namespace ckpt::inspect {

namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

// The layer index of "blk.N.*" (or -1).
int64_t block_of(std::string_view n) {
  if (!starts_with(n, "blk.")) return -1;
  int64_t v = 0;
  size_t i = 4;
  for (; i < n.size() && n[i] >= '0' && n[i] <= '9'; ++i) v = v * 10 + (n[i] - '0');
  return i > 4 ? v : -1;
}

Component component_of(std::string_view n, int64_t layers) {
  if (starts_with(n, "v.") || starts_with(n, "a.") || starts_with(n, "mm.") || starts_with(n, "mm_"))
    return Component::Towers;
  if (contains(n, "norm")) return Component::Norms;
  if (starts_with(n, "token_embd") || starts_with(n, "per_layer_token_embd")) return Component::Embedding;
  if (starts_with(n, "output.")) return Component::OutputHead;
  const int64_t b = block_of(n);
  if (b >= 0 && layers > 0 && b >= layers) return Component::Mtp;  // DeepSeek's nextn blocks follow the decoder
  if (contains(n, "nextn")) return Component::Mtp;
  if (contains(n, "_shexp")) return Component::SharedExperts;
  if (contains(n, "_exps")) return Component::RoutedExperts;
  if (contains(n, ".attn_") || contains(n, ".ssm_") || contains(n, ".time_mix")) return Component::Attention;
  if (contains(n, ".ffn_") || contains(n, ".exp_probs")) return Component::Mlp;
  return Component::Other;
}

// Nominal bits of a ggml type ("Q4_K" -> 4), for the per-width split.
int nominal_bits(DType t) {
  const std::string_view n = dtype_name(t);
  for (char c : n)
    if (c >= '1' && c <= '8') return c - '0';
  return 0;
}

std::string_view ftype_name(uint64_t ft) {
  static const std::map<uint64_t, std::string_view> names = {
      {0, "ALL_F32"}, {1, "MOSTLY_F16"}, {2, "MOSTLY_Q4_0"}, {3, "MOSTLY_Q4_1"}, {7, "MOSTLY_Q8_0"},
      {8, "MOSTLY_Q5_0"}, {9, "MOSTLY_Q5_1"}, {10, "MOSTLY_Q2_K"}, {11, "MOSTLY_Q3_K_S"}, {12, "MOSTLY_Q3_K_M"},
      {13, "MOSTLY_Q3_K_L"}, {14, "MOSTLY_Q4_K_S"}, {15, "MOSTLY_Q4_K_M"}, {16, "MOSTLY_Q5_K_S"},
      {17, "MOSTLY_Q5_K_M"}, {18, "MOSTLY_Q6_K"}, {32, "MOSTLY_BF16"}, {38, "MOSTLY_MXFP4_MOE"}};
  auto it = names.find(ft & ~uint64_t(1024));
  return it == names.end() ? std::string_view{} : it->second;
}

// An unsigned metadata value, or the first element of a per-layer array of them.
std::optional<uint64_t> meta_uint(const gguf::File& f, const std::string& key, size_t layer = 0) {
  if (auto v = f.get_uint(key)) return v;
  const gguf::KeyValue* kv = f.find(key);
  if (!kv || !kv->value.is_array() || layer >= kv->value.count) return std::nullopt;
  return kv->value.uint_at(layer);
}

}  // namespace

bool inspect_gguf(const Checkpoint& ck, const Options& opts, Inspection& in) {
  if (ck.shards.size() || ck.gguf_models.empty()) return false;
  const GgufModel& model = ck.gguf_models.front();
  const Shard* first = model.first(ck.gguf_shards);
  if (!first || !first->gguf) return false;
  const gguf::File& f = *first->gguf;
  if (ck.gguf_models.size() > 1)
    in.notes.push_back(std::to_string(ck.gguf_models.size()) + " GGUF models here: " + model.name + " is inspected");
  const std::string arch(f.get_string("general.architecture").value_or(""));
  auto key = [&](std::string_view k) { return arch + "." + std::string(k); };

  ModelInfo& m = in.model;
  m.model_type = arch;
  m.architecture_known = !arch.empty();
  m.layers = int64_t(f.get_uint(key("block_count")).value_or(0));
  m.hidden = int64_t(f.get_uint(key("embedding_length")).value_or(0));
  m.heads = int64_t(meta_uint(f, key("attention.head_count")).value_or(0));
  m.kv_heads = int64_t(meta_uint(f, key("attention.head_count_kv")).value_or(uint64_t(m.heads)));
  m.head_dim = int64_t(f.get_uint(key("attention.key_length")).value_or(m.heads ? uint64_t(m.hidden / m.heads) : 0));
  m.intermediate = int64_t(meta_uint(f, key("feed_forward_length")).value_or(0));
  m.experts = int64_t(f.get_uint(key("expert_count")).value_or(0));
  m.experts_per_token = int64_t(f.get_uint(key("expert_used_count")).value_or(0));
  m.max_position_embeddings = int64_t(f.get_uint(key("context_length")).value_or(0));
  if (const gguf::KeyValue* toks = f.find("tokenizer.ggml.tokens"); toks && toks->value.is_array())
    m.vocab = int64_t(toks->value.count);

  // ---- parameters, bytes, quantization mix
  std::map<DType, Tally> by_type;
  bool has_output = false;
  for (uint32_t si : model.shards) {
    const Shard& s = ck.gguf_shards[si];
    in.bytes.shards += s.header.file_size;
    for (const auto& e : s.header.tensors) {
      uint64_t n = 1;
      for (auto d : e.shape) n *= d;
      const uint64_t bytes = e.end - e.begin;
      const Component c = component_of(e.name, m.layers);
      if (c == Component::OutputHead) has_output = true;
      auto& t = in.params.by_component[size_t(c)];
      t.params += n;
      t.bytes += bytes;
      t.tensors++;
      auto& d = in.params.by_dtype[std::string(dtype_name(e.dtype))];
      d.params += n;
      d.bytes += bytes;
      d.tensors++;
      by_type[e.dtype].params += n;
      by_type[e.dtype].bytes += bytes;
      by_type[e.dtype].tensors++;
      in.params.total += n;
      in.bytes.tensor_data += bytes;
      if (c == Component::Mtp) in.bytes.mtp += bytes;
      else in.bytes.in_memory += bytes;
      if (c == Component::Towers) in.bytes.towers += bytes;
      if (is_block_type(e.dtype)) {
        in.quant.quantized_modules++;
        in.quant.quantized_params += n;
        in.quant.quantized_bytes += bytes;
        in.quant.params_by_bits[nominal_bits(e.dtype)] += n;
      } else if (e.shape.size() >= 2) {
        FloatModule fm;
        fm.pattern = std::string(e.name);
        if (block_of(e.name) >= 0) {
          const size_t dot = fm.pattern.find('.', 4);
          fm.pattern = "blk.*" + fm.pattern.substr(dot);
        }
        auto it = std::find_if(in.quant.float_modules.begin(), in.quant.float_modules.end(),
                               [&](const FloatModule& x) { return x.pattern == fm.pattern; });
        if (it == in.quant.float_modules.end()) it = in.quant.float_modules.insert(in.quant.float_modules.end(), fm);
        it->count++;
        it->params += n;
      }
    }
  }
  for (const auto& fe : ck.files)
    if (fe.readable()) in.bytes.files += fe.size;
  m.tied = !has_output;
  if (!m.vocab)
    for (const auto& s : ck.gguf_shards)
      for (const auto& e : s.header.tensors)
        if (e.name == "token_embd.weight" && e.shape.size() == 2) m.vocab = int64_t(e.shape[0]);
  // the float type most weights are in names the model dtype
  DType main_float = DType::F16;
  uint64_t best = 0;
  for (const auto& [t, tally] : by_type)
    if (!is_block_type(t) && tally.params > best) best = tally.params, main_float = t;
  m.dtype = std::string(dtype_name(main_float));

  if (in.quant.quantized_params) {
    in.quant.quantized = true;
    in.quant.method = "gguf";
    in.quant.effective_bits = double(in.quant.quantized_bytes) * 8.0 / double(in.quant.quantized_params);
    DType majority = DType::Unknown;
    uint64_t most = 0;
    std::string mix;
    for (const auto& [t, tally] : by_type) {
      if (!is_block_type(t)) continue;
      if (tally.params > most) most = tally.params, majority = t;
      mix += (mix.empty() ? "" : ", ") + std::string(dtype_name(t)) + " x" + std::to_string(tally.tensors);
    }
    const auto ft = f.get_uint("general.file_type");
    const std::string_view ftn = ft ? ftype_name(*ft) : std::string_view{};
    in.quant.format = "ggml " + std::string(dtype_name(majority)) + " (" + mix + ")";
    if (!ftn.empty()) in.quant.format += ", general.file_type " + std::string(ftn);
    in.quant.bits = nominal_bits(majority);
    in.quant.group_size = int(dtype_info(majority).block_elems);
  }

  // active parameters: routed experts at k / E
  const auto& C = in.params.by_component;
  uint64_t dense = 0;
  for (size_t i = 0; i < kComponents; ++i) {
    const auto c = static_cast<Component>(i);
    if (c != Component::RoutedExperts && c != Component::Mtp && c != Component::Towers) dense += C[i].params;
  }
  const uint64_t routed = C[size_t(Component::RoutedExperts)].params;
  in.params.active = dense + (m.experts > 0 && m.experts_per_token > 0 && m.experts_per_token <= m.experts
                                  ? uint64_t((unsigned __int128)routed * uint64_t(m.experts_per_token) / uint64_t(m.experts))
                                  : routed);
  uint64_t lookup = C[size_t(Component::Embedding)].params;
  if (m.tied) lookup = 0;  // the embedding is also the output matmul
  in.params.active_excluding_embedding = in.params.active - std::min(in.params.active, lookup);

  // ---- KV cache as llama.cpp allocates it (specs/gguf.md 8.2, 3.3)
  KvLayout layout;
  const uint64_t kd_mla = f.get_uint(key("attention.key_length_mla")).value_or(0);
  const uint64_t vd_mla = f.get_uint(key("attention.value_length_mla")).value_or(0);
  const bool mla = kd_mla && vd_mla;  // is_mla(): both present and non-zero; V is read from the latent
  // sliding window: gemma2 defaults to 4096, gpt-oss requires it, phi3 reads it and turns SWA off
  uint64_t window = f.get_uint(key("attention.sliding_window")).value_or(arch == "gemma2" ? 4096 : 0);
  if (arch == "phi3") window = 0;
  const gguf::KeyValue* pattern = f.find(key("attention.sliding_window_pattern"));
  const uint64_t default_period = arch == "gemma2" || arch == "gpt-oss" ? 2 : arch == "gemma3" ? 6 : 1;
  auto is_swa = [&](uint64_t il) {
    if (!window) return false;
    if (pattern && pattern->value.is_array()) {
      if (il >= pattern->value.count) return false;
      if (auto v = pattern->value.uint_at(il)) return *v != 0;
      return false;
    }
    const uint64_t n = pattern ? pattern->value.as_uint().value_or(default_period) : default_period;
    if (n == 0) return true;
    return il % n < n - 1;  // the last layer of each group is dense
  };
  // llama-server's SWA cache (swa_full off): min(kv_size, n_swa + n_ubatch 512), padded to 256
  const uint64_t swa_cells = (window + 512 + 255) / 256 * 256;
  if (m.layers > 0 && m.heads > 0) {
    layout.known = true;
    layout.sliding_window = window;
    const uint64_t kd = f.get_uint(key("attention.key_length")).value_or(uint64_t(m.hidden / m.heads));
    const uint64_t vd = f.get_uint(key("attention.value_length")).value_or(kd);
    const uint64_t kd_swa = f.get_uint(key("attention.key_length_swa")).value_or(kd);
    const uint64_t vd_swa = f.get_uint(key("attention.value_length_swa")).value_or(vd);
    for (int64_t l = 0; l < m.layers; ++l) {
      AttnLayer a;
      const uint64_t nkv = meta_uint(f, key("attention.head_count_kv"), size_t(l)).value_or(uint64_t(m.kv_heads));
      const bool swa = is_swa(uint64_t(l));
      if (nkv == 0) {
        a.kind = LayerKind::Linear;  // recurrent layers of hybrid models carry no KV heads
      } else if (mla) {
        a.kind = LayerKind::Mla;
        a.k_elems = kd * nkv;  // kv_lora_rank + rope dims, one "head"
      } else {
        a.k_elems = nkv * (swa ? kd_swa : kd);
        a.v_elems = nkv * (swa ? vd_swa : vd);
        if (swa) {
          a.kind = LayerKind::Sliding;
          a.window = swa_cells;
        }
      }
      layout.layers.push_back(a);
    }
    layout.attention = mla ? "mla" : m.kv_heads == 1 ? "mqa" : m.kv_heads < m.heads ? "gqa" : "mha";
    if (window)
      layout.notes.push_back("sliding-window layers hold min(context, " + std::to_string(window) +
                             " + n_ubatch 512) cells padded to 256, as llama-server allocates them (swa_full off; "
                             "the C API's default swa_full on gives them the whole context: --swa full)");
  } else {
    in.notes.push_back("the GGUF metadata gives no " + key("block_count") + " / " + key("attention.head_count") +
                       ": the KV cache is not sized");
  }
  for (const auto& n : layout.notes) in.notes.push_back(n);
  uint64_t context = opts.context ? opts.context : m.max_position_embeddings > 0 ? uint64_t(m.max_position_embeddings) : 4096;
  if (context % 256) {
    in.notes.push_back("llama.cpp pads the context to a multiple of 256: " + std::to_string(context) + " -> " +
                       std::to_string((context + 255) / 256 * 256) + " cells");
    context = (context + 255) / 256 * 256;
  }
  KvOptions kvo = opts.kv;
  if (kvo.dtype == "auto") kvo.dtype = "f16";  // llama.cpp's default cache type (-ctk/-ctv f16)
  in.kv = kv_cache(layout, kvo, "f16", context, std::max<uint64_t>(1, opts.batch));
  in.notes.push_back("GGUF: dimensions from the " + arch + ".* metadata; the KV cache as llama.cpp allocates it (f16 unless --kv-dtype)");
  if (opts.gpu_memory) {
    Options o = opts;
    o.batch = std::max<uint64_t>(1, opts.batch);
    Context cx;
    in.fit = fit(in, layout, o, cx);
  }
  return true;
}

}  // namespace ckpt::inspect
