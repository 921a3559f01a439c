// inspect(): the Checkpoint model read for its serving costs (see inspect.h).
#include "inspect/inspect.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inspect/internal.h"

namespace ckpt::inspect {

namespace {

std::optional<int64_t> get_int(const json::Value* o, std::string_view key) {
  if (!o || !o->is_object()) return std::nullopt;
  const json::Value* v = o->find(key);
  if (!v) return std::nullopt;
  if (v->is_int()) return v->as_int();
  if (v->is_number() && std::floor(v->as_double()) == v->as_double() && std::fabs(v->as_double()) < 1e15)
    return static_cast<int64_t>(v->as_double());
  return std::nullopt;
}

}  // namespace

Inspection inspect(const Checkpoint& ck, const Options& opts) {
  static const json::Value kEmpty = json::Object{};
  Inspection in;
  in.target = ck.target;
  in.engine = opts.engine;
  if (const EngineKv* e = opts.engine.empty() ? nullptr : engine_kv(opts.engine))
    in.notes.push_back("engine " + std::string(e->engine) + ": " + std::string(e->note) + " (" + std::string(e->source) + ")");
  if (inspect_gguf(ck, opts, in)) return in;
  Context cx;
  const json::Value& cfg = ck.config.ok() && ck.config.value.is_object() ? ck.config.value : kEmpty;
  if (!ck.config.ok())
    in.notes.push_back(ck.config.present ? "config.json does not parse: only tensor totals are reported"
                                         : "no config.json: only tensor totals are reported");
  // the probe reads the tensor table the loader built (ck.weight() would build a second index)
  cx.view = arch::resolve_config(cfg, [&](std::string_view n) { return ck.tensors_by_name.count(n) > 0; });
  cx.scheme = quant::parse_scheme(cfg);
  const arch::ConfigView& v = cx.view;

  ModelInfo& m = in.model;
  m.model_type = v.model_type;
  m.text_model_type = v.text_model_type;
  m.architecture_known = v.arch != nullptr;
  m.dtype = std::string(st::dtype_name(v.model_dtype));
  auto dim = [&](std::string_view var, std::string_view key) -> int64_t {
    if (auto d = v.dim(var)) return *d;
    return get_int(v.text, key).value_or(0);
  };
  m.layers = dim("L", "num_hidden_layers");
  m.hidden = dim("H", "hidden_size");
  m.heads = dim("nh", "num_attention_heads");
  m.kv_heads = dim("nkv", "num_key_value_heads");
  if (!m.kv_heads) m.kv_heads = m.heads;
  m.head_dim = dim("hd", "head_dim");
  if (!m.head_dim && m.heads) m.head_dim = m.hidden / m.heads;
  if (v.dim("kv_lora")) m.head_dim = v.dim_or("nope", 0) + v.dim_or("rope", 0);  // MLA: the query/key head
  m.vocab = dim("V", "vocab_size");
  m.intermediate = dim("I", "intermediate_size");
  for (auto x : v.layer_intermediate) m.intermediate = std::max(m.intermediate, x);
  m.experts = v.dim("E") ? v.dim_or("E", 0) : v.experts.count;
  if (v.experts.explicit_dense) m.experts = 0;
  m.experts_per_token = m.experts > 0 ? v.experts.active : 0;
  m.max_position_embeddings = get_int(v.text, "max_position_embeddings").value_or(0);
  m.tied = v.tied;

  account(ck, cx, opts, in);

  const KvLayout layout = kv_layout(v);
  for (const auto& n : layout.notes) in.notes.push_back(n);
  uint64_t context = opts.context;
  if (!context) {
    context = m.max_position_embeddings > 0 ? static_cast<uint64_t>(m.max_position_embeddings) : 4096;
    if (m.max_position_embeddings <= 0)
      in.notes.push_back("the config gives no max_position_embeddings: the KV cache is sized for 4096 tokens");
  } else if (m.max_position_embeddings > 0 && context > static_cast<uint64_t>(m.max_position_embeddings)) {
    in.notes.push_back("--context " + std::to_string(context) + " is beyond max_position_embeddings (" +
                       std::to_string(m.max_position_embeddings) + ")");
  }
  const std::string model_dtype = serving_dtype(v.model_dtype);
  in.kv = kv_cache(layout, opts.kv, model_dtype, context, std::max<uint64_t>(1, opts.batch));
  if (in.kv.mla_layers && !opts.kv.mla_full)
    in.notes.push_back("MLA: the latent (kv_lora_rank + qk_rope_head_dim) is cached, as vLLM, SGLang and "
                       "llama.cpp do; --mla full sizes engines that cache per-head K and V");
  if (in.bytes.mtp)
    in.notes.push_back("MTP layers are counted in the parameters but not in memory: loaders drop them "
                       "unless they serve speculative decoding");
  if (v.model_dtype == st::DType::F32 && opts.kv.dtype == "auto")
    in.notes.push_back("float32 checkpoint: the KV cache is sized at f16 (vLLM's dtype auto); weights "
                       "in memory are counted as stored");
  if (opts.gpu_memory) {
    Options o = opts;
    o.batch = std::max<uint64_t>(1, opts.batch);
    in.fit = fit(in, layout, o, cx);
  }
  return in;
}

std::optional<uint64_t> parse_size(std::string_view t) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  size_t i = 0;
  bool dot = false, digit = false;
  for (; i < t.size(); ++i) {
    if (t[i] >= '0' && t[i] <= '9') digit = true;
    else if (t[i] == '.' && !dot) dot = true;
    else break;
  }
  if (!digit) return std::nullopt;
  const double num = std::strtod(std::string(t.substr(0, i)).c_str(), nullptr);
  std::string unit(t.substr(i));
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 0;
  struct U {
    const char* name;
    double mult;
  };
  static const U units[] = {{"", 1},       {"B", 1},        {"K", 1024.0},    {"KB", 1e3},   {"KIB", 1024.0},
                            {"M", 1048576.0}, {"MB", 1e6},   {"MIB", 1048576.0}, {"G", 1073741824.0},
                            {"GB", 1e9},   {"GIB", 1073741824.0}, {"T", 1099511627776.0}, {"TB", 1e12},
                            {"TIB", 1099511627776.0}};
  for (const auto& u : units)
    if (unit == u.name) mult = u.mult;
  if (mult == 0) return std::nullopt;
  const double bytes = num * mult;
  if (!(bytes >= 0) || bytes > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string human_bytes(uint64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double x = static_cast<double>(b);
  int u = 0;
  while (x >= 1024.0 && u < 5) {
    x /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else std::snprintf(buf, sizeof buf, "%.2f %s", x, units[u]);
  return buf;
}

}  // namespace ckpt::inspect
