// Which weights a checkpoint computes with, and how each is stored: the tensor table of every
// format (safetensors and GGUF; pickled tensors are skipped, their strides live in the pickle),
// read with the quantization declaration, so that a quantized module's packed tensors become
// one logical weight named as its float twin ("<module>.weight").
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "ckpt/pytorch.h"
#include "ckpt/quant.h"
#include "inspect/dequant.h"
#include "inspect/diff.h"
#include "io/file.h"

namespace ckpt::diff::dequant {

namespace {

uint64_t cdiv(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

struct Ref {
  const TensorEntry* entry;
  const Shard* shard;
};

class Discovery {
 public:
  explicit Discovery(const Checkpoint& ck) : ck_(ck) {
    static const json::Value kEmpty = json::Object{};
    const json::Value& cfg = ck.config.ok() && ck.config.value.is_object() ? ck.config.value : kEmpty;
    scheme_ = quant::parse_scheme(cfg);
    if (scheme_) gptq_v1_ = gptq_stores_zero_minus_one(cfg);
    // pickled tensors by (file, name)
    std::map<std::pair<std::string_view, std::string_view>, std::pair<const pt::FileScan*, const pt::Tensor*>> pickled;
    for (const auto& sc : ck.pickle_scans)
      for (const auto& t : sc.tensors) pickled.emplace(std::pair{std::string_view(sc.file), std::string_view(t.name)}, std::pair{&sc, &t});
    for (const auto& [name, w] : ck.weights()) {
      if (w.shard->format == Format::pytorch) {
        auto it = pickled.find({std::string_view(w.shard->file), name});
        std::string why = it == pickled.end() ? "not found in the pickle" : pickled_unreadable(*it->second.first, *it->second.second);
        if (!why.empty()) {
          pickled_[why]++;
          continue;
        }
      }
      table_.emplace(name, Ref{w.entry, w.shard});
    }
    for (const auto& s : ck.gguf_shards)
      for (const auto& e : s.header.tensors) table_.emplace(e.name, Ref{&e, &s});
  }

  Weights run() {
    for (const auto& [why, n] : pickled_)
      out_.notes.push_back(std::to_string(n) + " pickled tensor(s) not compared by value: " + why);
    std::vector<std::string_view> names;
    names.reserve(table_.size());
    for (const auto& [n, r] : table_) names.push_back(n);
    std::sort(names.begin(), names.end());
    for (auto n : names) quantized(n);
    for (auto n : names)
      if (!consumed_.count(n)) plain(n);
    return std::move(out_);
  }

 private:
  // GPTQ v1 (AutoGPTQ's `gptq` and AutoRound's auto_gptq packing) stores z-1; gptq_v2 and
  // plain auto_round store z.
  static bool gptq_stores_zero_minus_one(const json::Value& cfg) {
    const json::Value* q = cfg.find("quantization_config");
    if (!q || !q->is_object()) return true;
    const std::string fmt = q->get_string("checkpoint_format").value_or(q->get_string("format").value_or("gptq"));
    if (fmt == "gptq_v2") return false;
    const std::string method = q->get_string("quant_method").value_or("");
    const std::string packing = q->get_string("packing_format").value_or("");
    if (method == "auto-round" && packing == "auto_round") return false;
    return true;
  }

  // "" when the pickled tensor is a plain little-endian row-major run of an uncompressed
  // storage (what the row readers can read in place), else why not.
  static std::string pickled_unreadable(const pt::FileScan& sc, const pt::Tensor& tensor) {
    if (sc.byteorder == "big") return "big-endian storages";
    const pt::Tensor* t = &tensor;
    if (t->storage < 0 || size_t(t->storage) >= sc.storages.size()) return "no storage";
    const pt::Storage& st = sc.storages[size_t(t->storage)];
    if (st.compressed) return "deflated storage records";
    if (t->shape.size() != t->stride.size()) return "no strides";
    int64_t expect = 1;
    for (size_t i = t->shape.size(); i-- > 0;) {
      if (t->shape[i] != 1 && t->stride[i] != expect) return "non-contiguous views (strides not row-major)";
      expect *= std::max<int64_t>(t->shape[i], 1);
    }
    return "";
  }

  const Ref* find(std::string_view n) const {
    auto it = table_.find(n);
    return it == table_.end() ? nullptr : &it->second;
  }
  std::optional<Part> part(std::string_view n) const {
    const Ref* r = find(n);
    if (!r) return std::nullopt;
    const FileEntry* fe = ck_.file(r->shard->file);
    if (!fe || fe->abs.empty() || !fe->readable()) return std::nullopt;
    Part p;
    p.name = std::string(n);
    p.dtype = r->entry->dtype;
    p.shape.assign(r->entry->shape.begin(), r->entry->shape.end());
    p.file = fe->abs;
    p.offset = r->shard->header.data_start() + r->entry->begin;
    p.nbytes = r->entry->end - r->entry->begin;
    if (auto need = tensor_nbytes(p.dtype, p.shape); !need || *need != p.nbytes) return std::nullopt;
    return p;
  }

  quant::ModuleQuant module_quant(const std::string& module, quant::Evidence ev = quant::Evidence::Unknown) const {
    quant::ModuleQuant mq;
    if (!scheme_) return mq;
    mq = scheme_->for_module(module, arch::ModuleKind::Linear, 0, ev);
    if (!mq.quantized) {
      // the files hold the module quantized although the predicate says not: read it with the
      // declaration's defaults (verify's QZ family reports the disagreement)
      mq = scheme_->base;
    }
    return mq;
  }

  void skip(const std::string& weight_name, std::string why) { out_.skipped[weight_name] = std::move(why); }
  void consume(std::initializer_list<std::string> names) {
    for (const auto& n : names) {
      auto it = table_.find(n);
      if (it != table_.end()) consumed_.insert(it->first);
    }
  }
  void add(Weight w) {
    w.rows = 1;
    for (size_t i = 0; i + 1 < w.shape.size(); ++i) w.rows *= w.shape[i];
    w.cols = w.shape.empty() ? 1 : w.shape.back();
    if (w.shape.size() < 2) w.rows = 1;
    out_.by_name[w.name] = std::move(w);
  }

  // The quantized module whose primary tensor is `n`, if it is one.
  void quantized(std::string_view n) {
    const std::string name(n);
    if (ends_with(n, ".qweight")) return gptq_or_awq(name.substr(0, name.size() - 8));
    if (ends_with(n, ".weight_packed")) return ct_packed(name.substr(0, name.size() - 14));
    if (!ends_with(n, ".weight")) return;
    const std::string m = name.substr(0, name.size() - 7);
    const Ref* r = find(n);
    if (r->shard->format == Format::gguf) return;
    const DType d = r->entry->dtype;
    if (d == DType::U32 && find(m + ".scales")) return mlx(m);
    if (d == DType::I8 && find(m + ".SCB")) return bnb_int8(m);
    if (d == DType::I8 && find(m + ".weight_scale")) return int_scaled(m);
    if ((d == DType::F8_E4M3 || d == DType::F8_E5M2) && (find(m + ".weight_scale_inv") || find(m + ".weight_scale")))
      return float_scaled(m);
  }

  void mlx(const std::string& m) {
    const std::string wn = m + ".weight";
    consume({wn, m + ".scales", m + ".biases"});
    auto w = part(wn), s = part(m + ".scales"), b = part(m + ".biases");
    if (!w || !s) return skip(wn, "a tensor of the module is unreadable");
    if (!b) return skip(wn, "MLX " + std::string(s->dtype == DType::U8 ? "microscaled float (mxfp4/nvfp4/mxfp8)" : "quantized") +
                                " weights without biases are not dequantized");
    const quant::ModuleQuant mq = module_quant(m, quant::Evidence::HasScales);
    const int bits = mq.bits > 0 ? mq.bits : 4;
    const uint64_t g = mq.group_size > 0 ? uint64_t(mq.group_size) : 64;
    if (w->shape.size() < 2 || s->shape.size() != w->shape.size() || b->shape != s->shape)
      return skip(wn, "weight " + shape_text(w->shape) + ", scales " + shape_text(s->shape) + " and biases do not form an MLX module");
    const uint64_t I = w->shape.back() * 32 / uint64_t(bits);
    if (w->shape.back() * 32 % uint64_t(bits) || s->shape.back() * g != I ||
        !std::equal(w->shape.begin(), w->shape.end() - 1, s->shape.begin()))
      return skip(wn, "weight " + shape_text(w->shape) + " and scales " + shape_text(s->shape) + " do not match " +
                          std::to_string(bits) + "-bit group " + std::to_string(g) + " as declared");
    Weight x;
    x.name = wn;
    x.shape.assign(w->shape.begin(), w->shape.end() - 1);
    x.shape.push_back(I);
    x.layout = Layout::MlxAffine;
    x.bits = bits;
    x.group = g;
    x.encoding = "MLX affine " + std::to_string(bits) + "-bit g" + std::to_string(g);
    x.parts = {*w, *s, *b};
    add(std::move(x));
  }

  // Reads a small integer tensor (weight_shape).
  std::optional<std::vector<int64_t>> read_i64(const Part& p) const {
    if (p.dtype != DType::I64 || p.nbytes > 64) return std::nullopt;
    io::ReadOnlyFile f;
    if (!f.open(p.file, true).empty()) return std::nullopt;
    std::vector<int64_t> v(p.nbytes / 8);
    if (f.read_at(p.offset, v.data(), p.nbytes) != int64_t(p.nbytes)) return std::nullopt;
    return v;
  }

  // Scale grid columns -> group size along I (per-channel when one column).
  static std::optional<uint64_t> group_from(const Part& scale, uint64_t I, int declared) {
    uint64_t n = 1;
    for (auto d : scale.shape) n *= d;
    if (n == 1 || scale.shape.back() == 1) return I;
    const uint64_t G = scale.shape.back();
    const uint64_t g = declared > 0 ? uint64_t(declared) : cdiv(I, G);
    if (cdiv(I, g) != G) return std::nullopt;
    return g;
  }

  void ct_packed(const std::string& m) {
    const std::string wn = m + ".weight";
    const std::string pn = m + ".weight_packed";
    consume({pn, m + ".weight_scale", m + ".weight_shape", m + ".weight_zero_point", m + ".weight_g_idx",
             m + ".weight_global_scale"});
    auto w = part(pn), s = part(m + ".weight_scale");
    if (!w || !s) return skip(wn, "a tensor of the module is unreadable");
    if (w->dtype != DType::I32)
      return skip(wn, "compressed-tensors " + std::string(dtype_name(w->dtype)) + " packed weights (nvfp4/mxfp4) are not dequantized");
    const quant::ModuleQuant mq = module_quant(m);
    const int bits = mq.bits > 0 ? mq.bits : 4;
    if (w->shape.size() < 2) return skip(wn, "weight_packed " + shape_text(w->shape) + " is not a matrix");
    uint64_t I = 0;
    if (auto sp = part(m + ".weight_shape"))
      if (auto v = read_i64(*sp); v && !v->empty() && v->back() > 0) I = uint64_t(v->back());
    const uint64_t W = w->shape.back();
    if (!I) I = W * 32 / uint64_t(bits);
    Weight x;
    x.name = wn;
    if (W == cdiv(I * uint64_t(bits), 32)) x.dense_bits = true;
    else if (W == cdiv(I, 32 / uint64_t(bits))) x.dense_bits = false;
    else return skip(wn, "weight_packed " + shape_text(w->shape) + " does not hold " + std::to_string(I) + " " +
                             std::to_string(bits) + "-bit values per row");
    auto g = group_from(*s, I, mq.group_size);
    if (!g) return skip(wn, "weight_scale " + shape_text(s->shape) + " does not match group size " + std::to_string(mq.group_size));
    x.shape.assign(w->shape.begin(), w->shape.end() - 1);
    x.shape.push_back(I);
    x.layout = Layout::CtPacked;
    x.bits = bits;
    x.group = *g;
    x.parts = {*w, *s};
    if (auto z = part(m + ".weight_zero_point")) x.parts.push_back(*z), x.has_zero = true;
    if (auto gi = part(m + ".weight_g_idx"); gi && gi->dtype == DType::I32) x.parts.push_back(*gi), x.has_gidx = true;
    x.encoding = "compressed-tensors int" + std::to_string(bits) + (*g == I ? " per-channel" : " g" + std::to_string(*g)) +
                 (x.has_zero ? " asymmetric" : "");
    add(std::move(x));
  }

  void int_scaled(const std::string& m) {
    const std::string wn = m + ".weight";
    consume({wn, m + ".weight_scale", m + ".weight_zero_point", m + ".weight_g_idx"});
    auto w = part(wn), s = part(m + ".weight_scale");
    if (!w || !s || w->shape.size() < 2) return skip(wn, "a tensor of the module is unreadable");
    const quant::ModuleQuant mq = module_quant(m);
    auto g = group_from(*s, w->shape.back(), mq.group_size);
    if (!g) return skip(wn, "weight_scale " + shape_text(s->shape) + " does not match the weight's groups");
    Weight x;
    x.name = wn;
    x.shape = w->shape;
    x.layout = Layout::IntScaled;
    x.bits = 8;
    x.group = *g;
    x.parts = {*w, *s};
    if (auto z = part(m + ".weight_zero_point")) x.parts.push_back(*z), x.has_zero = true;
    if (auto gi = part(m + ".weight_g_idx"); gi && gi->dtype == DType::I32) x.parts.push_back(*gi), x.has_gidx = true;
    x.encoding = std::string("int8") + (*g == w->shape.back() ? " per-channel" : " g" + std::to_string(*g));
    add(std::move(x));
  }

  void bnb_int8(const std::string& m) {
    const std::string wn = m + ".weight";
    consume({wn, m + ".SCB", m + ".weight_format"});
    auto w = part(wn), s = part(m + ".SCB");
    if (!w || !s || w->shape.size() != 2 || s->shape.size() != 1 || s->shape[0] != w->shape[0])
      return skip(wn, "weight and SCB do not form an LLM.int8 module");
    Weight x;
    x.name = wn;
    x.shape = w->shape;
    x.layout = Layout::BnbInt8;
    x.bits = 8;
    x.parts = {*w, *s};
    x.encoding = "bitsandbytes int8";
    add(std::move(x));
  }

  void float_scaled(const std::string& m) {
    const std::string wn = m + ".weight";
    const bool inv = find(m + ".weight_scale_inv") != nullptr;
    const std::string sn = m + (inv ? ".weight_scale_inv" : ".weight_scale");
    consume({wn, sn});
    auto w = part(wn), s = part(sn);
    if (!w || !s || w->shape.size() < 2) return skip(wn, "a tensor of the module is unreadable");
    const uint64_t O = w->shape[w->shape.size() - 2], I = w->shape.back();
    uint64_t rows = 1;
    for (size_t i = 0; i + 1 < w->shape.size(); ++i) rows *= w->shape[i];
    uint64_t n = 1;
    for (auto d : s->shape) n *= d;
    Weight x;
    x.name = wn;
    x.shape = w->shape;
    x.layout = Layout::FloatScaled;
    x.parts = {*w, *s};
    const std::string fp8 = std::string(dtype_name(w->dtype)) + " ";
    if (n == 1) {
      x.encoding = fp8 + "per-tensor";
    } else if (n == rows && s->shape.back() == 1) {
      x.encoding = fp8 + "per-channel";
    } else {
      const quant::ModuleQuant mq = module_quant(m);
      const uint64_t br = mq.block_rows > 0 ? uint64_t(mq.block_rows) : 128, bc = mq.block_cols > 0 ? uint64_t(mq.block_cols) : 128;
      std::vector<uint64_t> grid(w->shape.begin(), w->shape.end() - 2);
      grid.push_back(cdiv(O, br));
      grid.push_back(cdiv(I, bc));
      if (s->shape != grid)
        return skip(wn, sn.substr(m.size() + 1) + " " + shape_text(s->shape) + " is not the " + std::to_string(br) + "x" +
                            std::to_string(bc) + " block grid " + shape_text(grid) + " of weight " + shape_text(w->shape));
      x.block_rows = br;
      x.block_cols = bc;
      x.encoding = fp8 + "block " + std::to_string(br) + "x" + std::to_string(bc);
    }
    if (!float_decodable(s->dtype) && s->dtype != DType::F8_E8M0)
      return skip(wn, "scale dtype " + std::string(dtype_name(s->dtype)) + " is not read");
    add(std::move(x));
  }

  void gptq_or_awq(const std::string& m) {
    const std::string wn = m + ".weight";
    consume({m + ".qweight", m + ".qzeros", m + ".scales", m + ".g_idx"});
    auto q = part(m + ".qweight"), z = part(m + ".qzeros"), s = part(m + ".scales");
    if (!q || !z || !s) return skip(wn, "a tensor of the module is unreadable or missing (qweight, qzeros, scales)");
    if (q->dtype != DType::I32 || z->dtype != DType::I32 || q->shape.size() != 2 || z->shape.size() != 2 || s->shape.size() != 2)
      return skip(wn, "only I32 [rows, cols] qweight/qzeros are dequantized");
    const quant::ModuleQuant mq = module_quant(m);
    const bool awq = scheme_ && (scheme_->method == quant::Method::AWQ || mq.format == quant::Format::AwqGemm ||
                                 mq.format == quant::Format::AwqGemv);
    Weight x;
    x.name = wn;
    x.bits = mq.bits > 0 ? mq.bits : 4;
    if (awq) {
      if (mq.format == quant::Format::AwqGemv) return skip(wn, "AWQ gemv layout is not dequantized");
      if (x.bits != 4) return skip(wn, "AWQ stores 4-bit values only");
      const uint64_t I = q->shape[0], O = q->shape[1] * 8, G = s->shape[0];
      if (s->shape[1] != O || z->shape != std::vector<uint64_t>{G, O / 8})
        return skip(wn, "qweight " + shape_text(q->shape) + ", qzeros " + shape_text(z->shape) + ", scales " +
                            shape_text(s->shape) + " are not an AWQ gemm module");
      const uint64_t g = mq.group_size > 0 ? uint64_t(mq.group_size) : cdiv(I, G);
      if (cdiv(I, g) != G) return skip(wn, "scales " + shape_text(s->shape) + " do not match group size " + std::to_string(g));
      x.shape = {O, I};
      x.layout = Layout::AwqGemm;
      x.group = g;
      x.parts = {*q, *z, *s};
      x.encoding = "AWQ 4-bit g" + std::to_string(g);
      return add(std::move(x));
    }
    const uint64_t O = q->shape[1], G = s->shape[0];
    auto gi = part(m + ".g_idx");
    uint64_t I = gi && gi->dtype == DType::I32 && gi->shape.size() == 1 ? gi->shape[0] : q->shape[0] * 32 / uint64_t(x.bits);
    if (q->shape[0] != cdiv(I * uint64_t(x.bits), 32) || s->shape[1] != O || z->shape[0] != G ||
        z->shape[1] != cdiv(O * uint64_t(x.bits), 32))
      return skip(wn, "qweight " + shape_text(q->shape) + ", qzeros " + shape_text(z->shape) + ", scales " +
                          shape_text(s->shape) + " are not a " + std::to_string(x.bits) + "-bit GPTQ module");
    const uint64_t g = mq.group_size > 0 ? uint64_t(mq.group_size) : cdiv(I, G);
    if (!gi && cdiv(I, g) != G) return skip(wn, "scales " + shape_text(s->shape) + " do not match group size " + std::to_string(g));
    x.shape = {O, I};
    x.layout = Layout::GPTQ;
    x.group = g;
    x.zeros_minus_one = gptq_v1_;
    x.parts = {*q, *z, *s};
    if (gi && gi->dtype == DType::I32) x.parts.push_back(*gi), x.has_gidx = true;
    x.encoding = "GPTQ " + std::to_string(x.bits) + "-bit g" + std::to_string(g) + (x.zeros_minus_one ? "" : " (v2 zeros)");
    add(std::move(x));
  }

  void plain(std::string_view n) {
    const Ref* r = find(n);
    const DType d = r->entry->dtype;
    const std::string name(n);
    if (r->shard->format == Format::gguf && is_block_type(d)) {
      if (!gguf_block_decodable(d)) return skip(name, "GGUF " + std::string(dtype_name(d)) + " blocks are not dequantized");
      auto p = part(n);
      if (!p || p->shape.empty()) return skip(name, "the tensor is unreadable");
      Weight x;
      x.name = name;
      x.shape = p->shape;
      x.layout = Layout::GgufBlocks;
      x.encoding = "GGUF " + std::string(dtype_name(d));
      x.parts = {*p};
      return add(std::move(x));
    }
    if (!float_decodable(d)) return;  // integer tensors (ids, masks) are compared by bytes only
    auto p = part(n);
    if (!p) return skip(name, "the tensor is unreadable");
    Weight x;
    x.name = name;
    x.shape = p->shape;
    x.layout = Layout::Float;
    x.encoding = std::string(dtype_name(d));
    x.parts = {*p};
    add(std::move(x));
  }

  const Checkpoint& ck_;
  std::optional<quant::QuantScheme> scheme_;
  bool gptq_v1_ = true;
  std::unordered_map<std::string_view, Ref> table_;
  std::set<std::string_view> consumed_;
  std::map<std::string, uint64_t> pickled_;  // why -> pickled tensors left out
  Weights out_;
};

}  // namespace

Weights weights_of(const Checkpoint& ck) { return Discovery(ck).run(); }

}  // namespace ckpt::diff::dequant
