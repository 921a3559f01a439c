// The smoke forward pass: one causal pass over the text, layer by layer. Each decoder layer's
// weights are dequantized (in parallel, one reader per weight), applied to every stream, and
// dropped before the next layer is read, so memory is one layer's weights in float32 plus the
// activations. Matrix products go through OpenBLAS. The output head is read in tiles of rows
// and folded into an online log-sum-exp, so no [tokens x vocabulary] matrix is ever held.
//
// The arithmetic follows the HF reference implementations of each family in float32.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <thread>

#include "smoke/internal.h"

namespace ckpt::smoke {

namespace {

using diff::dequant::Weight;

// A dequantized weight: rows x cols floats, row-major (a Linear's [out, in]).
struct Mat {
  std::vector<float> v;
  uint64_t rows = 0, cols = 0;
  bool empty() const { return v.empty(); }
};

// Where one tensor's rows are: a weight of the plan, or a slice of a stacked one (MLX
// switch_mlp experts [E, O, I]).
struct Source {
  const Weight* w = nullptr;
  uint64_t first_row = 0, rows = 0;
};

class Loader {
 public:
  Loader(const Plan& plan, unsigned threads) : plan_(plan), threads_(std::max(1u, threads)) {}

  std::optional<Source> find(const std::string& name) const {
    auto it = plan_.weights.by_name.find(name);
    if (it == plan_.weights.by_name.end()) return std::nullopt;
    return Source{&it->second, 0, it->second.rows};
  }
  // Expert e of a stacked weight [E, O, I] named `stacked`.
  std::optional<Source> find_expert(const std::string& stacked, uint32_t e, uint32_t E) const {
    auto it = plan_.weights.by_name.find(stacked);
    if (it == plan_.weights.by_name.end() || E == 0 || it->second.rows % E) return std::nullopt;
    const uint64_t per = it->second.rows / E;
    return Source{&it->second, uint64_t(e) * per, per};
  }
  bool skipped(const std::string& name, std::string& why) const {
    auto it = plan_.weights.skipped.find(name);
    if (it == plan_.weights.skipped.end()) return false;
    why = it->second;
    return true;
  }

  // Reads every (source, destination) pair, `threads_` at a time. false: `error` names the first failure.
  bool read_all(std::vector<std::pair<Source, Mat*>>& jobs, std::string& error, std::string& tensor, uint64_t& bytes) {
    std::atomic<size_t> next{0};
    std::vector<std::string> errors(jobs.size());
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
        const auto& [src, dst] = jobs[i];
        auto reader = diff::dequant::open_reader(*src.w, errors[i]);
        if (!reader) {
          if (errors[i].empty()) errors[i] = "cannot be read";
          continue;
        }
        dst->rows = src.rows;
        dst->cols = src.w->cols;
        dst->v.assign(dst->rows * dst->cols, 0.0f);
        if (!reader->read(src.first_row, src.rows, dst->v.data(), errors[i]) && errors[i].empty()) errors[i] = "read failed";
      }
    };
    std::vector<std::thread> pool;
    for (unsigned k = 1; k < std::min<size_t>(threads_, jobs.size()); ++k) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!errors[i].empty()) {
        error = errors[i];
        tensor = jobs[i].first.w->name;
        return false;
      }
      for (const auto& p : jobs[i].first.w->parts) bytes += src_bytes(p, jobs[i].first);
    }
    return true;
  }

 private:
  static uint64_t src_bytes(const diff::dequant::Part& p, const Source& s) {
    const uint64_t total = s.w->rows ? s.w->rows : 1;
    return p.nbytes * s.rows / total;
  }
  const Plan& plan_;
  unsigned threads_;
};

// ---- arithmetic -------------------------------------------------------------------------

// Y[T x out] = X[T x in] * W[out x in]^T (+ bias)
void linear(const float* X, uint64_t T, const Mat& W, std::vector<float>& Y, const Mat* bias = nullptr) {
  Y.assign(T * W.rows, 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(W.rows), int(W.cols), 1.0f, X, int(W.cols), W.v.data(),
              int(W.cols), 0.0f, Y.data(), int(W.rows));
  if (bias && !bias->empty())
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t o = 0; o < W.rows; ++o) Y[t * W.rows + o] += bias->v[o];
}

// RMSNorm over rows of `n` values: x * rsqrt(mean(x^2) + eps) * w (gemma: * (1 + w)).
void rms_norm(const float* x, float* y, uint64_t rows, uint64_t n, const Mat& w, double eps, bool plus_one) {
  for (uint64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double ss = 0;
    for (uint64_t i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
    const float inv = float(1.0 / std::sqrt(ss / double(n) + eps));
    for (uint64_t i = 0; i < n; ++i) yr[i] = xr[i] * inv * (plus_one ? 1.0f + w.v[i] : w.v[i]);
  }
}

float act(float x, Act a) {
  if (a == Act::silu) return x / (1.0f + std::exp(-x));
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

// Per-position inverse frequencies of a RoPE setup.
std::vector<double> inv_freq(const Rope& r) {
  std::vector<double> f(r.rot_dim / 2);
  for (uint32_t i = 0; i < f.size(); ++i) f[i] = 1.0 / std::pow(r.theta, double(2 * i) / double(r.rot_dim));
  if (r.scaling == "linear") {
    for (auto& x : f) x /= r.factor;
  } else if (r.scaling == "llama3") {
    const double low_wl = r.original_max / r.low_freq_factor, high_wl = r.original_max / r.high_freq_factor;
    for (auto& x : f) {
      const double wl = 2 * M_PI / x;
      if (wl < high_wl) continue;
      if (wl > low_wl) {
        x /= r.factor;
        continue;
      }
      const double smooth = (r.original_max / wl - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      x = (1 - smooth) * x / r.factor + smooth * x;
    }
  } else if (r.scaling == "longrope" && r.short_factor.size() == f.size()) {
    for (size_t i = 0; i < f.size(); ++i) f[i] /= r.short_factor[i];
  } else if (r.scaling == "factors" && r.freq_factors.size() == f.size()) {
    for (size_t i = 0; i < f.size(); ++i) f[i] /= r.freq_factors[i];
  }
  return f;
}

// Rotates the first rot_dim dims of every head in place (rotate_half layout, or adjacent pairs).
void apply_rope(std::vector<float>& x, uint64_t T, uint32_t heads, uint32_t hd, const Rope& r, const std::vector<double>& f) {
  const uint32_t half = r.rot_dim / 2;
  std::vector<float> c(half), s(half);
  for (uint64_t t = 0; t < T; ++t) {
    for (uint32_t i = 0; i < half; ++i) {
      const double a = double(t) * f[i];
      c[i] = float(std::cos(a) * r.attention_factor);
      s[i] = float(std::sin(a) * r.attention_factor);
    }
    for (uint32_t h = 0; h < heads; ++h) {
      float* v = x.data() + (t * heads + h) * hd;
      for (uint32_t i = 0; i < half; ++i) {
        const uint32_t a = r.adjacent ? 2 * i : i, b = r.adjacent ? 2 * i + 1 : i + half;
        const float x1 = v[a], x2 = v[b];
        v[a] = x1 * c[i] - x2 * s[i];
        v[b] = x2 * c[i] + x1 * s[i];
      }
    }
  }
}

struct LayerWeights {
  Mat in_norm, post_attn_norm, pre_ff_norm, post_ff_norm, q_norm, k_norm;
  Mat q, k, v, o, qkv, qb, kb, vb, ob;
  Mat gate, up, down, gate_up;
  Mat router;
  struct Expert {
    Mat gate, up, down;
  };
  std::vector<Expert> experts;
};

struct Stream {
  int32_t skip = -1;
  std::vector<float> x;  // [T x H]
};

class Forward {
 public:
  Forward(const Plan& plan, const std::vector<uint32_t>& tokens, const ForwardOptions& o)
      : hp_(plan.hp), tokens_(tokens), T_(tokens.size()), o_(o), loader_(plan, o.threads) {}

  ForwardOut run() {
    openblas_set_num_threads(int(std::max(1u, o_.threads)));
    std::vector<Stream> streams(1);
    if (!embed(streams[0].x)) return std::move(out_);
    stat("embed", streams[0].x);
    freq_ = inv_freq(hp_.rope);
    freq_local_ = inv_freq(hp_.rope_local);
    for (uint32_t l = 0; l < hp_.L; ++l) {
      LayerWeights w;
      if (!load_layer(l, w)) return std::move(out_);
      if (o_.locate) streams.push_back(Stream{int32_t(l), streams[0].x});
      for (auto& s : streams)
        if (s.skip != int32_t(l)) layer(l, w, s.x);
      stat("layer " + std::to_string(l), streams[0].x);
    }
    Mat norm;
    if (!load_one(hp_.prefix + "norm.weight", norm, hp_.H)) return std::move(out_);
    for (auto& s : streams) rms_norm(s.x.data(), s.x.data(), T_, hp_.H, norm, hp_.eps, hp_.norm_plus_one);
    stat("final norm", streams[0].x);
    head(streams);
    return std::move(out_);
  }

 private:
  bool fail(std::string tensor, std::string error) {
    out_.error = std::move(error);
    out_.error_tensor = std::move(tensor);
    return false;
  }

  std::optional<Source> need(const std::string& name) {
    if (auto s = loader_.find(name)) return s;
    std::string why;
    if (loader_.skipped(name, why)) fail(name, "its values cannot be decoded: " + why);
    else fail(name, "the tensor is not in the checkpoint (or not a float or decodable quantized weight)");
    return std::nullopt;
  }

  bool check_shape(const std::string& name, const Mat& m, uint64_t rows, uint64_t cols) {
    if (m.rows * m.cols == rows * cols && (m.cols == cols || rows == 1)) return true;
    return fail(name, "shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "] where the config implies [" +
                          std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }

  bool load_one(const std::string& name, Mat& m, uint64_t n) {
    auto s = need(name);
    if (!s) return false;
    std::vector<std::pair<Source, Mat*>> jobs{{*s, &m}};
    if (!loader_.read_all(jobs, out_.error, out_.error_tensor, out_.weight_bytes)) return false;
    return check_shape(name, m, 1, n);
  }

  bool embed(std::vector<float>& x) {
    const std::string name = hp_.prefix + "embed_tokens.weight";
    auto s = need(name);
    if (!s) return false;
    if (s->w->cols != hp_.H) return fail(name, "rows of " + std::to_string(s->w->cols) + " values where hidden_size is " + std::to_string(hp_.H));
    std::string e;
    auto reader = diff::dequant::open_reader(*s->w, e);
    if (!reader) return fail(name, e);
    x.assign(T_ * hp_.H, 0.0f);
    std::map<uint32_t, std::vector<float>> rows;
    for (uint64_t t = 0; t < T_; ++t) {
      const uint32_t id = tokens_[t];
      if (id >= s->rows) return fail(name, "token id " + std::to_string(id) + " is past its " + std::to_string(s->rows) + " rows");
      auto [it, fresh] = rows.try_emplace(id);
      if (fresh) {
        it->second.resize(hp_.H);
        if (!reader->read(id, 1, it->second.data(), e)) return fail(name, e);
      }
      std::copy(it->second.begin(), it->second.end(), x.begin() + long(t * hp_.H));
    }
    if (hp_.embed_scale) {
      // HF multiplies by sqrt(hidden_size) as a tensor of the model dtype: the rounded value.
      float scale = float(std::sqrt(double(hp_.H)));
      if (hp_.model_dtype == st::DType::BF16) {
        uint32_t b;
        std::memcpy(&b, &scale, 4);
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000u;
        std::memcpy(&scale, &b, 4);
      } else if (hp_.model_dtype == st::DType::F16) {
        scale = float(_Float16(scale));
      }
      for (auto& v : x) v *= scale;
    }
    out_.weight_bytes += uint64_t(rows.size()) * s->w->parts.front().nbytes / std::max<uint64_t>(1, s->w->rows);
    return true;
  }

  bool load_layer(uint32_t l, LayerWeights& w) {
    const std::string p = hp_.prefix + "layers." + std::to_string(l) + ".";
    std::vector<std::pair<Source, Mat*>> jobs;
    std::vector<std::tuple<std::string, Mat*, uint64_t, uint64_t>> shapes;
    auto add = [&](const std::string& name, Mat& m, uint64_t rows, uint64_t cols) {
      auto s = need(name);
      if (!s) return false;
      jobs.emplace_back(*s, &m);
      shapes.emplace_back(name, &m, rows, cols);
      return true;
    };
    auto optional = [&](const std::string& name, Mat& m, uint64_t rows, uint64_t cols) {
      if (auto s = loader_.find(name)) {
        jobs.emplace_back(*s, &m);
        shapes.emplace_back(name, &m, rows, cols);
      }
    };
    const uint64_t H = hp_.H, qd = uint64_t(hp_.nh) * hp_.hd, kd = uint64_t(hp_.nkv) * hp_.hd;
    bool ok = add(p + "input_layernorm.weight", w.in_norm, 1, H) && add(p + "post_attention_layernorm.weight", w.post_attn_norm, 1, H);
    if (ok && hp_.sandwich_norms)
      ok = add(p + "pre_feedforward_layernorm.weight", w.pre_ff_norm, 1, H) &&
           add(p + "post_feedforward_layernorm.weight", w.post_ff_norm, 1, H);
    if (ok && hp_.fused_qkv) ok = add(p + "self_attn.qkv_proj.weight", w.qkv, qd + 2 * kd, H);
    if (ok && !hp_.fused_qkv)
      ok = add(p + "self_attn.q_proj.weight", w.q, qd, H) && add(p + "self_attn.k_proj.weight", w.k, kd, H) &&
           add(p + "self_attn.v_proj.weight", w.v, kd, H);
    if (ok) ok = add(p + "self_attn.o_proj.weight", w.o, H, qd);
    if (ok && hp_.qk_norm) ok = add(p + "self_attn.q_norm.weight", w.q_norm, 1, hp_.hd) && add(p + "self_attn.k_norm.weight", w.k_norm, 1, hp_.hd);
    if (!ok) return false;
    optional(p + "self_attn.q_proj.bias", w.qb, 1, qd);
    optional(p + "self_attn.k_proj.bias", w.kb, 1, kd);
    optional(p + "self_attn.v_proj.bias", w.vb, 1, kd);
    optional(p + "self_attn.o_proj.bias", w.ob, 1, H);
    if (hp_.moe_layer[l]) {
      const std::string mp = p + hp_.expert_prefix + ".";
      if (!add(mp + "gate.weight", w.router, hp_.n_experts, H)) return false;
      w.experts.resize(hp_.n_experts);
      const uint64_t I = hp_.moe_I;
      for (uint32_t e = 0; e < hp_.n_experts; ++e) {
        const std::string ep = mp + "experts." + std::to_string(e) + ".";
        auto& x = w.experts[e];
        const char* g = hp_.mixtral_names ? "w1" : "gate_proj";
        const char* u = hp_.mixtral_names ? "w3" : "up_proj";
        const char* d = hp_.mixtral_names ? "w2" : "down_proj";
        auto per = [&](const char* part, Mat& m, uint64_t rows, uint64_t cols) {
          const std::string name = ep + part + ".weight";
          if (loader_.find(name)) return add(name, m, rows, cols);
          // MLX stores each projection of every expert stacked: switch_mlp.<proj>.weight [E, O, I].
          const std::string mlx = mp + "switch_mlp." + (part == g ? "gate_proj" : part == u ? "up_proj" : "down_proj") + ".weight";
          if (auto s = loader_.find_expert(mlx, e, hp_.n_experts)) {
            jobs.emplace_back(*s, &m);
            shapes.emplace_back(mlx, &m, rows, cols);
            return true;
          }
          return add(name, m, rows, cols);  // reports it missing
        };
        if (!per(g, x.gate, I, H) || !per(u, x.up, I, H) || !per(d, x.down, H, I)) return false;
      }
    } else if (hp_.fused_gate_up) {
      if (!add(p + "mlp.gate_up_proj.weight", w.gate_up, 2 * uint64_t(hp_.I), H) || !add(p + "mlp.down_proj.weight", w.down, H, hp_.I)) return false;
    } else {
      if (!add(p + "mlp.gate_proj.weight", w.gate, hp_.I, H) || !add(p + "mlp.up_proj.weight", w.up, hp_.I, H) ||
          !add(p + "mlp.down_proj.weight", w.down, H, hp_.I))
        return false;
    }
    if (!loader_.read_all(jobs, out_.error, out_.error_tensor, out_.weight_bytes)) return false;
    for (auto& [name, m, rows, cols] : shapes)
      if (!check_shape(name, *m, rows, cols)) return false;
    if (hp_.fused_qkv) {  // split rows: q, k, v
      auto slice = [&](Mat& dst, uint64_t r0, uint64_t n) {
        dst.rows = n;
        dst.cols = H;
        dst.v.assign(w.qkv.v.begin() + long(r0 * H), w.qkv.v.begin() + long((r0 + n) * H));
      };
      slice(w.q, 0, qd);
      slice(w.k, qd, kd);
      slice(w.v, qd + kd, kd);
      w.qkv = {};
    }
    return true;
  }

  void attention(uint32_t l, const LayerWeights& w, const std::vector<float>& a, std::vector<float>& out) {
    const uint32_t nh = hp_.nh, nkv = hp_.nkv, hd = hp_.hd;
    std::vector<float> q, k, v;
    linear(a.data(), T_, w.q, q, &w.qb);
    linear(a.data(), T_, w.k, k, &w.kb);
    linear(a.data(), T_, w.v, v, &w.vb);
    if (hp_.qk_norm) {
      rms_norm(q.data(), q.data(), T_ * nh, hd, w.q_norm, hp_.eps, hp_.norm_plus_one);
      rms_norm(k.data(), k.data(), T_ * nkv, hd, w.k_norm, hp_.eps, hp_.norm_plus_one);
    }
    const bool sliding = hp_.sliding[l];
    const bool local = hp_.family == "gemma3_text" && sliding;
    const Rope& r = local ? hp_.rope_local : hp_.rope;
    apply_rope(q, T_, nh, hd, r, local ? freq_local_ : freq_);
    apply_rope(k, T_, nkv, hd, r, local ? freq_local_ : freq_);
    std::vector<float> ctx(T_ * nh * hd, 0.0f), S(T_ * T_);
    const uint32_t group = nh / nkv;
    for (uint32_t h = 0; h < nh; ++h) {
      const uint32_t kh = h / group;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T_), int(T_), int(hd), float(hp_.attn_scale), q.data() + h * hd,
                  int(nh * hd), k.data() + kh * hd, int(nkv * hd), 0.0f, S.data(), int(T_));
      for (uint64_t i = 0; i < T_; ++i) {
        float* row = S.data() + i * T_;
        uint64_t j0 = 0;
        if (sliding && hp_.sliding_window && i >= hp_.sliding_window) j0 = i - hp_.sliding_window + 1;
        float m = -std::numeric_limits<float>::infinity();
        for (uint64_t j = j0; j <= i; ++j) {
          if (hp_.attn_softcap > 0) row[j] = float(std::tanh(row[j] / hp_.attn_softcap) * hp_.attn_softcap);
          m = std::max(m, row[j]);
        }
        double sum = 0;
        for (uint64_t j = 0; j < T_; ++j) {
          if (j < j0 || j > i) {
            row[j] = 0;
            continue;
          }
          row[j] = std::exp(row[j] - m);
          sum += row[j];
        }
        const float inv = float(1.0 / sum);
        for (uint64_t j = j0; j <= i; ++j) row[j] *= inv;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T_), int(hd), int(T_), 1.0f, S.data(), int(T_),
                  v.data() + kh * hd, int(nkv * hd), 0.0f, ctx.data() + h * hd, int(nh * hd));
    }
    linear(ctx.data(), T_, w.o, out, &w.ob);
  }

  // down(act(gate x) * up x) over `rows` positions of X.
  void mlp(const float* X, uint64_t rows, const Mat& gate, const Mat& up, const Mat& down, std::vector<float>& out) {
    std::vector<float> g, u;
    linear(X, rows, gate, g);
    linear(X, rows, up, u);
    for (size_t i = 0; i < g.size(); ++i) g[i] = act(g[i], hp_.act) * u[i];
    linear(g.data(), rows, down, out);
  }

  void dense_mlp(const LayerWeights& w, const std::vector<float>& a, std::vector<float>& out) {
    if (!hp_.fused_gate_up) return mlp(a.data(), T_, w.gate, w.up, w.down, out);
    // phi3: gate_up_proj's output is [gate | up] (chunked in two along the last dimension).
    std::vector<float> gu;
    linear(a.data(), T_, w.gate_up, gu);
    const uint64_t I = hp_.I;
    std::vector<float> h(T_ * I);
    for (uint64_t t = 0; t < T_; ++t)
      for (uint64_t i = 0; i < I; ++i) h[t * I + i] = act(gu[t * 2 * I + i], hp_.act) * gu[t * 2 * I + I + i];
    linear(h.data(), T_, w.down, out);
  }

  void moe(const LayerWeights& w, const std::vector<float>& a, std::vector<float>& out) {
    const uint32_t E = hp_.n_experts, K = hp_.top_k;
    const uint64_t H = hp_.H;
    std::vector<float> logits;
    linear(a.data(), T_, w.router, logits);
    std::vector<std::vector<std::pair<uint64_t, float>>> routed(E);  // expert -> (position, weight)
    std::vector<uint32_t> order(E);
    for (uint64_t t = 0; t < T_; ++t) {
      const float* z = logits.data() + t * E;
      const float m = *std::max_element(z, z + E);
      std::vector<double> p(E);
      double sum = 0;
      for (uint32_t e = 0; e < E; ++e) sum += p[e] = std::exp(double(z[e] - m));
      for (auto& x : p) x /= sum;
      for (uint32_t e = 0; e < E; ++e) order[e] = e;
      std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](uint32_t x, uint32_t y) { return p[x] > p[y] || (p[x] == p[y] && x < y); });
      double top = 0;
      for (uint32_t k = 0; k < K; ++k) top += p[order[k]];
      for (uint32_t k = 0; k < K; ++k) routed[order[k]].emplace_back(t, float(hp_.norm_topk ? p[order[k]] / top : p[order[k]]));
    }
    out.assign(T_ * H, 0.0f);
    std::vector<float> X, Y;
    for (uint32_t e = 0; e < E; ++e) {
      if (routed[e].empty()) continue;
      X.resize(routed[e].size() * H);
      for (size_t i = 0; i < routed[e].size(); ++i)
        std::copy_n(a.data() + routed[e][i].first * H, H, X.data() + i * H);
      mlp(X.data(), routed[e].size(), w.experts[e].gate, w.experts[e].up, w.experts[e].down, Y);
      for (size_t i = 0; i < routed[e].size(); ++i)
        for (uint64_t d = 0; d < H; ++d) out[routed[e][i].first * H + d] += routed[e][i].second * Y[i * H + d];
    }
  }

  void layer(uint32_t l, const LayerWeights& w, std::vector<float>& x) {
    const uint64_t n = T_ * hp_.H;
    std::vector<float> a(n), b;
    rms_norm(x.data(), a.data(), T_, hp_.H, w.in_norm, hp_.eps, hp_.norm_plus_one);
    attention(l, w, a, b);
    if (hp_.sandwich_norms) rms_norm(b.data(), b.data(), T_, hp_.H, w.post_attn_norm, hp_.eps, hp_.norm_plus_one);
    for (uint64_t i = 0; i < n; ++i) x[i] += b[i];
    rms_norm(x.data(), a.data(), T_, hp_.H, hp_.sandwich_norms ? w.pre_ff_norm : w.post_attn_norm, hp_.eps, hp_.norm_plus_one);
    if (hp_.moe_layer[l]) moe(w, a, b);
    else dense_mlp(w, a, b);
    if (hp_.sandwich_norms) rms_norm(b.data(), b.data(), T_, hp_.H, w.post_ff_norm, hp_.eps, hp_.norm_plus_one);
    for (uint64_t i = 0; i < n; ++i) x[i] += b[i];
  }

  void stat(std::string name, const std::vector<float>& x) {
    LayerStats s;
    s.name = std::move(name);
    double ss = 0;
    const size_t H = hp_.H;
    s.position_rms.reserve(T_);
    for (size_t t = 0; t < T_; ++t) {
      double row = 0;
      for (size_t j = 0; j < H; ++j) {
        const float v = x[t * H + j];
        if (!std::isfinite(v)) {
          s.finite = false;
          continue;
        }
        row += double(v) * v;
        s.max_abs = std::max(s.max_abs, double(std::fabs(v)));
      }
      ss += row;
      s.position_rms.push_back(H ? std::sqrt(row / double(H)) : 0.0);
    }
    s.rms = x.empty() ? 0 : std::sqrt(ss / double(x.size()));
    out_.stats.push_back(std::move(s));
  }

  // The output head, a tile of rows at a time, into each stream's online log-sum-exp.
  void head(std::vector<Stream>& streams) {
    std::string name = hp_.head_weight();
    auto src = loader_.find(name);
    if (!src && !hp_.tied) {  // a checkpoint that ties without saying so has no lm_head
      if (auto e = loader_.find(hp_.prefix + "embed_tokens.weight"); e && !loader_.find(hp_.head)) {
        name = hp_.prefix + "embed_tokens.weight";
        src = e;
      }
    }
    if (!src) {
      need(name);
      return;
    }
    if (src->w->cols != hp_.H) {
      fail(name, "rows of " + std::to_string(src->w->cols) + " values where hidden_size is " + std::to_string(hp_.H));
      return;
    }
    std::string e;
    auto reader = diff::dequant::open_reader(*src->w, e);
    if (!reader) {
      fail(name, e);
      return;
    }
    const uint64_t V = src->rows, H = hp_.H;
    struct Acc {
      std::vector<double> m, s, target, best;
      std::vector<uint32_t> arg;
    };
    std::vector<Acc> acc(streams.size());
    for (auto& a : acc) {
      a.m.assign(T_, -std::numeric_limits<double>::infinity());
      a.s.assign(T_, 0);
      a.target.assign(T_, std::numeric_limits<double>::quiet_NaN());
      a.best.assign(T_, -std::numeric_limits<double>::infinity());
      a.arg.assign(T_, 0);
    }
    out_.streams.resize(streams.size());
    if (o_.keep_logits) out_.streams[0].logits.assign(T_ * V, 0.0f);
    const uint64_t tile = std::max<uint64_t>(1, std::min<uint64_t>(V, (64u << 20) / (4 * H)));  // <= 64 MiB of rows
    std::vector<float> W(tile * H), Z;
    for (uint64_t r0 = 0; r0 < V; r0 += tile) {
      const uint64_t n = std::min(tile, V - r0);
      if (!reader->read(r0, n, W.data(), e)) {
        fail(name, e);
        return;
      }
      for (size_t si = 0; si < streams.size(); ++si) {
        Z.assign(T_ * n, 0.0f);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T_), int(n), int(H), 1.0f, streams[si].x.data(), int(H), W.data(),
                    int(H), 0.0f, Z.data(), int(n));
        auto& a = acc[si];
        auto& so = out_.streams[si];
        for (uint64_t t = 0; t < T_; ++t) {
          const uint32_t next = t + 1 < T_ ? tokens_[t + 1] : UINT32_MAX;
          for (uint64_t j = 0; j < n; ++j) {
            double z = Z[t * n + j];
            if (hp_.final_softcap > 0) z = std::tanh(z / hp_.final_softcap) * hp_.final_softcap;
            if (!std::isfinite(z)) {
              so.logits_finite = false;
              continue;
            }
            if (si == 0 && o_.keep_logits) so.logits[t * V + r0 + j] = float(z);
            if (z > a.best[t]) a.best[t] = z, a.arg[t] = uint32_t(r0 + j);
            if (z > a.m[t]) {
              a.s[t] = a.s[t] * std::exp(a.m[t] - z) + 1.0;
              a.m[t] = z;
            } else {
              a.s[t] += std::exp(z - a.m[t]);
            }
            if (r0 + j == next) a.target[t] = z;
          }
        }
      }
    }
    out_.weight_bytes += src->w->parts.front().nbytes;
    for (size_t si = 0; si < streams.size(); ++si) {
      auto& so = out_.streams[si];
      so.skipped_layer = streams[si].skip;
      const auto& a = acc[si];
      for (uint64_t t = 0; t + 1 < T_; ++t) {
        const double lse = a.m[t] + std::log(a.s[t]);
        double nll = lse - a.target[t];
        if (!std::isfinite(nll)) {
          so.logits_finite = false;
          nll = std::log(double(V));  // an unpredictable token costs what a uniform guess does
        }
        so.nll_sum += nll;
        ++so.predicted;
        so.correct += a.arg[t] == tokens_[t + 1];
      }
    }
  }

  const Hyper& hp_;
  const std::vector<uint32_t>& tokens_;
  const uint64_t T_;
  ForwardOptions o_;
  Loader loader_;
  std::vector<double> freq_, freq_local_;
  ForwardOut out_;
};

}  // namespace

ForwardOut forward(const Plan& plan, const std::vector<uint32_t>& tokens, const ForwardOptions& o) {
  return Forward(plan, tokens, o).run();
}

}  // namespace ckpt::smoke
