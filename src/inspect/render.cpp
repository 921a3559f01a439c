// Renderers for an Inspection: a short table for people, JSON with stable keys for scripts.
#include <cstdio>

#include "inspect/inspect.h"
#include "inspect/json_out.h"

namespace ckpt::inspect {

namespace {

std::string grouped(uint64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0) out += ',';
    out += *it;
    ++n;
  }
  return {out.rbegin(), out.rend()};
}

std::string human_count(uint64_t v) {
  char buf[32];
  if (v >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f B", v / 1e9);
  else if (v >= 1000000ull) std::snprintf(buf, sizeof buf, "%.1f M", v / 1e6);
  else if (v >= 1000ull) std::snprintf(buf, sizeof buf, "%.1f K", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
  return buf;
}

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

std::string str_or(const std::string& s, const char* fallback) { return s.empty() ? fallback : s; }

}  // namespace

std::string render_text(const Inspection& in) {
  const ModelInfo& m = in.model;
  std::string o;
  o += in.target + "\n";
  o += fmt("  %s%s: %lld layers, hidden %lld, %lld heads / %lld kv heads x %lld, vocab %lld, %s%s\n",
           str_or(m.model_type, "?").c_str(), m.architecture_known ? "" : " (not in the registry)",
           (long long)m.layers, (long long)m.hidden, (long long)m.heads, (long long)m.kv_heads,
           (long long)m.head_dim, (long long)m.vocab, m.dtype.c_str(), m.tied ? ", tied embeddings" : "");
  if (m.experts > 0)
    o += fmt("  MoE: %lld routed experts, %lld per token\n", (long long)m.experts, (long long)m.experts_per_token);

  const Parameters& p = in.params;
  o += "\nparameters  " + human_count(p.total) + " (" + grouped(p.total) + ")";
  if (p.active != p.total)
    o += ", active " + human_count(p.active) + " (" + human_count(p.active_excluding_embedding) + " without embeddings)";
  o += "\n";
  o += fmt("  %-16s %17s %12s %8s\n", "component", "parameters", "stored", "tensors");
  for (size_t i = 0; i < kComponents; ++i) {
    const Tally& t = p.by_component[i];
    if (!t.tensors) continue;
    o += fmt("  %-16s %17s %12s %8llu\n", std::string(component_key(static_cast<Component>(i))).c_str(),
             grouped(t.params).c_str(), human_bytes(t.bytes).c_str(), (unsigned long long)t.tensors);
  }
  if (p.not_loaded.tensors)
    o += fmt("  %-16s %17s %12s %8llu\n", "(not loaded)", grouped(p.not_loaded.params).c_str(),
             human_bytes(p.not_loaded.bytes).c_str(), (unsigned long long)p.not_loaded.tensors);
  std::string dt;
  for (const auto& [name, t] : p.by_dtype)
    dt += (dt.empty() ? "" : ", ") + name + " " + human_count(t.params) + " (" + human_bytes(t.bytes) + ")";
  o += "  by dtype: " + dt + "\n";

  const Bytes& b = in.bytes;
  o += "\nbytes       on disk " + human_bytes(b.files) + " (shards " + human_bytes(b.shards) + "), in memory " +
       human_bytes(b.in_memory);
  if (b.mtp) o += ", MTP " + human_bytes(b.mtp) + " not loaded";
  o += "\n";

  const Quantization& q = in.quant;
  if (!q.quantized) {
    o += "quant       none\n";
  } else {
    o += "quant       " + str_or(q.method, "undeclared") + ", " + str_or(q.format, "?");
    if (q.bits) o += fmt(", %d-bit", q.bits);
    if (q.group_size > 0) o += fmt(", group %d", q.group_size);
    if (q.group_size < 0) o += ", per channel";
    o += "\n";
    o += fmt("  %llu modules, %s parameters in %s: %.3f bits per weight\n", (unsigned long long)q.quantized_modules,
             human_count(q.quantized_params).c_str(), human_bytes(q.quantized_bytes).c_str(), q.effective_bits);
    if (q.params_by_bits.size() > 1) {
      std::string s;
      for (const auto& [bits, n] : q.params_by_bits) s += (s.empty() ? "" : ", ") + fmt("%d-bit ", bits) + human_count(n);
      o += "  mixed: " + s + "\n";
    }
    if (!q.float_modules.empty()) {
      std::string s;
      size_t shown = 0;
      for (const auto& f : q.float_modules) {
        if (shown++ == 6) {
          s += fmt(", ... (%zu patterns)", q.float_modules.size());
          break;
        }
        s += (s.empty() ? "" : ", ") + f.pattern + (f.count > 1 ? fmt(" x%llu", (unsigned long long)f.count) : "");
      }
      o += "  kept float: " + s + "\n";
    }
    if (!q.declared_exclusions.empty()) {
      std::string s;
      for (const auto& e : q.declared_exclusions) s += (s.empty() ? "" : ", ") + e;
      o += "  declared exclusions: " + s + "\n";
    }
  }

  const KvCache& k = in.kv;
  if (!k.known) {
    o += "\nkv cache    unknown (the config does not give the attention dimensions)\n";
  } else {
    o += "\nkv cache    " + k.attention + ", " + k.dtype;
    if (!k.mla_mode.empty()) o += ", MLA " + k.mla_mode;
    o += "\n";
    std::string layers;
    auto add = [&](uint64_t n, const char* what) {
      if (n) layers += (layers.empty() ? "" : ", ") + std::to_string(n) + " " + what;
    };
    add(k.full_layers, "full");
    add(k.sliding_layers, ("sliding (window " + std::to_string(k.sliding_window) + ")").c_str());
    add(k.mla_layers, "MLA");
    add(k.linear_layers, "linear-attention");
    add(k.kv_shared_layers, "kv-shared");
    o += "  layers: " + layers + "\n";
    o += "  per token: " + grouped(k.bytes_per_token) + " B";
    if (k.bytes_per_token_beyond_window != k.bytes_per_token)
      o += " (" + grouped(k.bytes_per_token_beyond_window) + " B beyond the window)";
    o += "\n";
    o += "  context " + grouped(k.context) + " x batch " + grouped(k.batch) + ": " + human_bytes(k.bytes) + "\n";
    if (k.linear_layers)
      o += "  linear-attention state: " + human_bytes(k.state_bytes_per_sequence) + " per sequence (conv " +
           human_bytes(k.state_conv_bytes) + " " + k.state_conv_dtype + ", recurrent " +
           human_bytes(k.state_recurrent_bytes) + " " + k.state_recurrent_dtype + "), " + human_bytes(k.state_bytes) +
           " for the batch\n";
  }

  if (in.fit) {
    const Fit& f = *in.fit;
    o += "\nfit         " + human_bytes(f.gpu_memory) + ": weights " + human_bytes(f.weights) + " + kv " +
         human_bytes(f.kv);
    if (f.state) o += " + state " + human_bytes(f.state);
    o += " + allowance " + human_bytes(f.allowance.total()) + " = " + human_bytes(f.required) + "\n";
    o += std::string("  ") + (f.fits ? "fits, " + human_bytes(static_cast<uint64_t>(f.headroom)) + " to spare"
                                     : "does NOT fit, short by " + human_bytes(static_cast<uint64_t>(-f.headroom)));
    o += "; largest context that fits: " + grouped(f.max_context);
    if (f.max_context_limit == "max_position_embeddings") o += " (the model's max_position_embeddings)";
    o += "\n";
  }
  if (!in.notes.empty()) {
    o += "\nnotes\n";
    for (const auto& n : in.notes) o += "  - " + n + "\n";
  }
  return o;
}

std::string render_json(const Inspection& in) {
  JsonOut j;
  j.begin_object();
  j.value("ckpt_version", CKPT_VERSION);
  j.value("target", in.target);
  if (in.engine.empty()) j.null("engine");
  else j.value("engine", in.engine);
  const ModelInfo& m = in.model;
  j.begin_object("model")
      .value("model_type", m.model_type)
      .value("text_model_type", m.text_model_type)
      .value("architecture_known", m.architecture_known)
      .value("dtype", m.dtype)
      .value("layers", m.layers)
      .value("hidden_size", m.hidden)
      .value("attention_heads", m.heads)
      .value("kv_heads", m.kv_heads)
      .value("head_dim", m.head_dim)
      .value("vocab_size", m.vocab)
      .value("intermediate_size", m.intermediate)
      .value("experts", m.experts)
      .value("experts_per_token", m.experts_per_token)
      .value("max_position_embeddings", m.max_position_embeddings)
      .value("tied_embeddings", m.tied)
      .end_object();
  auto tally = [&](std::string_view key, const Tally& t) {
    j.begin_object(key).value("params", t.params).value("bytes", t.bytes).value("tensors", t.tensors).end_object();
  };
  const Parameters& p = in.params;
  j.begin_object("parameters");
  j.value("total", p.total).value("active", p.active).value("active_excluding_embedding", p.active_excluding_embedding);
  j.begin_object("by_component");
  for (size_t i = 0; i < kComponents; ++i) tally(component_key(static_cast<Component>(i)), p.by_component[i]);
  j.end_object();
  j.begin_object("by_dtype");
  for (const auto& [name, t] : p.by_dtype) tally(name, t);
  j.end_object();
  tally("not_loaded", p.not_loaded);
  j.end_object();
  const Bytes& b = in.bytes;
  j.begin_object("bytes")
      .value("files", b.files)
      .value("shards", b.shards)
      .value("tensor_data", b.tensor_data)
      .value("in_memory", b.in_memory)
      .value("mtp", b.mtp)
      .value("towers", b.towers)
      .value("not_loaded", b.not_loaded)
      .end_object();
  const Quantization& q = in.quant;
  j.begin_object("quantization");
  j.value("quantized", q.quantized);
  if (q.method.empty()) j.null("method");
  else j.value("method", q.method);
  if (q.format.empty()) j.null("format");
  else j.value("format", q.format);
  j.value("bits", q.bits).value("group_size", q.group_size);
  j.begin_array("declared_exclusions");
  for (const auto& e : q.declared_exclusions) j.value("", e);
  j.end_array();
  j.begin_array("float_modules");
  for (const auto& f : q.float_modules)
    j.begin_object().value("pattern", f.pattern).value("count", f.count).value("params", f.params).end_object();
  j.end_array();
  j.value("quantized_modules", q.quantized_modules)
      .value("quantized_params", q.quantized_params)
      .value("quantized_bytes", q.quantized_bytes);
  if (q.quantized_params) j.number("effective_bits_per_weight", q.effective_bits, 4);
  else j.null("effective_bits_per_weight");
  j.begin_object("params_by_bits");
  for (const auto& [bits, n] : q.params_by_bits) j.value(std::to_string(bits), n);
  j.end_object();
  j.end_object();
  const KvCache& k = in.kv;
  j.begin_object("kv_cache");
  j.value("known", k.known).value("attention", k.attention).value("dtype", k.dtype);
  if (k.mla_mode.empty()) j.null("mla_mode");
  else j.value("mla_mode", k.mla_mode);
  j.value("swa_mode", k.swa_mode);
  j.begin_object("layers")
      .value("full", k.full_layers)
      .value("sliding", k.sliding_layers)
      .value("mla", k.mla_layers)
      .value("linear", k.linear_layers)
      .value("kv_shared", k.kv_shared_layers)
      .end_object();
  if (k.sliding_window) j.value("sliding_window", k.sliding_window);
  else j.null("sliding_window");
  j.value("bytes_per_token", k.bytes_per_token)
      .value("bytes_per_token_beyond_window", k.bytes_per_token_beyond_window)
      .value("context", k.context)
      .value("batch", k.batch)
      .value("bytes", k.bytes);
  j.begin_object("state")
      .value("conv_bytes_per_sequence", k.state_conv_bytes)
      .value("recurrent_bytes_per_sequence", k.state_recurrent_bytes)
      .value("bytes_per_sequence", k.state_bytes_per_sequence)
      .value("bytes", k.state_bytes);
  if (k.state_conv_dtype.empty()) j.null("conv_dtype").null("recurrent_dtype");
  else j.value("conv_dtype", k.state_conv_dtype).value("recurrent_dtype", k.state_recurrent_dtype);
  j.end_object();
  j.value("total_bytes", k.total_bytes);
  j.end_object();
  if (in.fit) {
    const Fit& f = *in.fit;
    j.begin_object("fit")
        .value("gpu_memory", f.gpu_memory)
        .value("weights", f.weights)
        .value("kv_cache", f.kv)
        .value("state", f.state);
    j.begin_object("allowance")
        .value("fixed", f.allowance.fixed)
        .value("activations", f.allowance.activations)
        .value("logits", f.allowance.logits)
        .value("chunk_tokens", f.allowance.chunk_tokens)
        .value("activation_bytes_per_token", f.allowance.per_token)
        .value("overridden", f.allowance.overridden)
        .value("total", f.allowance.total())
        .end_object();
    j.value("required", f.required)
        .value("fits", f.fits)
        .value("headroom", f.headroom)
        .value("max_context", f.max_context)
        .value("max_context_limited_by", f.max_context_limit)
        .end_object();
  } else {
    j.null("fit");
  }
  j.begin_array("notes");
  for (const auto& n : in.notes) j.value("", n);
  j.end_array();
  j.end_object();
  return j.str();
}

}  // namespace ckpt::inspect
