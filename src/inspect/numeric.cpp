// `ckpt diff --deep`, by value: each weight both sides hold, decoded as the model computes with
// it (dequant.h), compared tile by tile: max |b-a|, relative L2 error ||b-a||/||a|| and cosine
// similarity, in double precision. Memory is two tiles per running job; jobs run in parallel.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <thread>

#include "inspect/dequant.h"
#include "inspect/diff.h"
#include "util/parallel.h"

namespace ckpt::diff {

namespace {

constexpr uint64_t kTileElements = uint64_t(1) << 20;  // per side: 4 MiB of floats

bool needs_compare(const dequant::Weight& x, const dequant::Weight& y, const std::set<std::string>& changed) {
  if (x.encoding != y.encoding) return true;
  for (const auto* w : {&x, &y})
    for (const auto& p : w->parts)
      if (changed.count(p.name)) return true;
  return false;
}

uint64_t stored_bytes(const dequant::Weight& x, const dequant::Weight& y) {
  uint64_t n = 0;
  for (const auto* w : {&x, &y})
    for (const auto& p : w->parts) n += p.nbytes;
  return n;
}

// `done` advances by the stored bytes (of both sides) the decoded rows stand for.
NumericDiff compare_one(const dequant::Weight& x, const dequant::Weight& y, std::atomic<uint64_t>* done) {
  NumericDiff r;
  r.name = x.name;
  r.encoding_a = x.encoding;
  r.encoding_b = y.encoding;
  r.shape = x.shape;
  std::string err;
  auto ra = dequant::open_reader(x, err);
  if (!ra) {
    r.error = "A: " + err;
    return r;
  }
  auto rb = dequant::open_reader(y, err);
  if (!rb) {
    r.error = "B: " + err;
    return r;
  }
  const uint64_t cols = std::max<uint64_t>(x.cols, 1);
  const uint64_t tile_rows = std::max<uint64_t>(1, kTileElements / cols);
  std::vector<float> a(tile_rows * cols), b(tile_rows * cols);
  double saa = 0, sbb = 0, sab = 0, sdd = 0;
  uint64_t reported = 0;
  for (uint64_t r0 = 0; r0 < x.rows; r0 += tile_rows) {
    const uint64_t n = std::min(tile_rows, x.rows - r0);
    if (!ra->read(x.first_row + r0, n, a.data(), err)) {
      r.error = "A: " + err;
      return r;
    }
    if (!rb->read(y.first_row + r0, n, b.data(), err)) {
      r.error = "B: " + err;
      return r;
    }
    const uint64_t m = n * cols;
    // Four independent partial sums (the loop is bound by their latency), then the tile's
    // largest difference; its index is looked up only when it beats the running maximum.
    double pa[4] = {0, 0, 0, 0}, pb[4] = {0, 0, 0, 0}, pab[4] = {0, 0, 0, 0}, pd[4] = {0, 0, 0, 0};
    double tile_max = 0;
    auto finite = [](float x) { return (std::bit_cast<uint32_t>(x) & 0x7F800000u) != 0x7F800000u; };
    auto add = [&](unsigned k, float fa, float fb) {
      const double va = fa, vb = fb, dlt = vb - va;
      pa[k] += va * va;
      pb[k] += vb * vb;
      pab[k] += va * vb;
      pd[k] += dlt * dlt;
      tile_max = std::max(tile_max, std::fabs(dlt));
    };
    uint64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      const float* x = a.data() + i;
      const float* y = b.data() + i;
      if (finite(x[0]) && finite(x[1]) && finite(x[2]) && finite(x[3]) && finite(y[0]) && finite(y[1]) &&
          finite(y[2]) && finite(y[3])) {
        for (unsigned k = 0; k < 4; ++k) add(k, x[k], y[k]);
        continue;
      }
      for (unsigned k = 0; k < 4; ++k) {
        if (finite(x[k]) && finite(y[k])) add(k, x[k], y[k]);
        else ++r.nonfinite;
      }
    }
    for (; i < m; ++i) {
      if (finite(a[i]) && finite(b[i])) add(unsigned(i & 3), a[i], b[i]);
      else ++r.nonfinite;
    }
    if (tile_max > r.max_abs)
      for (uint64_t i = 0; i < m; ++i) {
        const float fa = a[i], fb = b[i];
        if (std::isfinite(fa) && std::isfinite(fb) && std::fabs(double(fb) - double(fa)) > r.max_abs) {
          r.max_abs = std::fabs(double(fb) - double(fa));
          r.max_abs_at = r0 * cols + i;
        }
      }
    const double taa = pa[0] + pa[1] + pa[2] + pa[3], tbb = pb[0] + pb[1] + pb[2] + pb[3];
    const double tab = pab[0] + pab[1] + pab[2] + pab[3], tdd = pd[0] + pd[1] + pd[2] + pd[3];
    saa += taa;
    sbb += tbb;
    sab += tab;
    sdd += tdd;
    if (done) {
      const uint64_t total = stored_bytes(x, y), upto = total * (r0 + n) / x.rows;
      done->fetch_add(upto - reported);
      reported = upto;
    }
  }
  r.elements = x.rows * cols - r.nonfinite;
  r.rel_l2 = saa > 0 ? std::sqrt(sdd / saa) : (sdd > 0 ? INFINITY : 0.0);
  if (saa > 0 && sbb > 0) r.cosine = std::clamp(sab / std::sqrt(saa * sbb), -1.0, 1.0);
  if (r.elements) {
    r.a_rms = std::sqrt(saa / double(r.elements));
    r.b_rms = std::sqrt(sbb / double(r.elements));
  }
  return r;
}

// "P.experts.7.X.weight" -> ("P.switch_mlp.X.weight", 7): the name mlx-lm's sanitize() stacks a
// per-expert weight into (models/switch_layers.py).
std::optional<std::pair<std::string, uint64_t>> stacked_name(const std::string& n) {
  static const std::string kExperts = ".experts.", kWeight = ".weight";
  const size_t at = n.find(kExperts);
  if (at == std::string::npos || n.size() < kWeight.size() || n.compare(n.size() - kWeight.size(), kWeight.size(), kWeight))
    return std::nullopt;
  size_t i = at + kExperts.size(), j = i;
  while (j < n.size() && n[j] >= '0' && n[j] <= '9') ++j;
  if (j == i || j >= n.size() || n[j] != '.' || j - i > 6) return std::nullopt;
  return std::pair{n.substr(0, at) + ".switch_mlp." + n.substr(j + 1), std::stoull(n.substr(i, j - i))};
}

// Expert `e` of a stacked [E, O, I] weight, as the per-expert [O, I] weight `name`.
std::optional<dequant::Weight> expert_view(const dequant::Weight& stacked, uint64_t e, const std::string& name) {
  if (stacked.shape.size() != 3 || e >= stacked.shape[0]) return std::nullopt;
  dequant::Weight v = stacked;
  v.name = name;
  v.shape = {stacked.shape[1], stacked.shape[2]};
  v.rows = stacked.shape[1];
  v.first_row = stacked.first_row + e * stacked.shape[1];
  v.encoding += " (expert " + std::to_string(e) + " of " + v.parts[0].name + ")";
  return v;
}

}  // namespace

void compare_values(const Checkpoint& a, const Checkpoint& b, const std::set<std::string>& changed,
                    const Options& opts, Diff& d) {
  d.numeric_compared = true;
  dequant::Weights wa, wb;
  parallel::run(2, 2, [&](size_t i) { (i ? wb : wa) = dequant::weights_of(i ? b : a); });
  for (const auto& n : wa.notes) d.notes.push_back("A: " + n);
  for (const auto& n : wb.notes) d.notes.push_back("B: " + n);

  struct Job {
    const dequant::Weight* x;
    const dequant::Weight* y;
  };
  std::vector<Job> jobs;
  // Per-expert weights on one side, experts stacked into one tensor on the other (an MLX
  // export): compared expert by expert, through views of the stacked weight.
  std::vector<dequant::Weight> views;
  views.reserve(wa.by_name.size() + wb.by_name.size());  // never reallocated: the maps point into it
  std::map<std::string, const dequant::Weight*> view_a, view_b;  // by per-expert name, on the stacked side
  for (int side = 0; side < 2; ++side) {
    const dequant::Weights& mine = side ? wb : wa;
    const dequant::Weights& other = side ? wa : wb;
    for (const auto& [name, w] : mine.by_name) {
      if (other.by_name.count(name)) continue;
      auto st = stacked_name(name);
      if (!st) continue;
      auto it = other.by_name.find(st->first);
      if (it == other.by_name.end()) continue;
      if (auto v = expert_view(it->second, st->second, name)) {
        views.push_back(std::move(*v));
        (side ? view_a : view_b)[name] = &views.back();
      }
    }
  }
  for (const auto& [name, x] : wa.by_name) {
    auto it = wb.by_name.find(name);
    if (it == wb.by_name.end()) {
      if (auto v = view_b.find(name); v != view_b.end()) {
        if (x.shape == v->second->shape) jobs.push_back({&x, v->second});
        else d.numeric_skipped.push_back({name, "shapes differ: A " + shape_text(x.shape) + ", B " + shape_text(v->second->shape) + " (" + v->second->encoding + ")"});
        continue;
      }
      if (auto s = wb.skipped.find(name); s != wb.skipped.end()) d.numeric_skipped.push_back({name, "B: " + s->second});
      continue;
    }
    const dequant::Weight& y = it->second;
    if (!needs_compare(x, y, changed)) continue;
    if (x.shape != y.shape) {
      d.numeric_skipped.push_back({name, "shapes differ as computed with: A " + shape_text(x.shape) + " (" + x.encoding +
                                             "), B " + shape_text(y.shape) + " (" + y.encoding + ")"});
      continue;
    }
    jobs.push_back({&x, &y});
  }
  for (const auto& [name, y] : wb.by_name) {
    if (wa.by_name.count(name)) continue;
    if (auto v = view_a.find(name); v != view_a.end()) {
      if (v->second->shape == y.shape) jobs.push_back({v->second, &y});
      else d.numeric_skipped.push_back({name, "shapes differ: A " + shape_text(v->second->shape) + " (" + v->second->encoding + "), B " + shape_text(y.shape)});
    }
  }
  for (const auto& [name, why] : wa.skipped)
    if (wb.by_name.count(name) || wb.skipped.count(name)) d.numeric_skipped.push_back({name, "A: " + why});

  // Largest first, so the last job to start is a short one.
  std::sort(jobs.begin(), jobs.end(), [](const Job& p, const Job& q) {
    return p.x->rows * p.x->cols != q.x->rows * q.x->cols ? p.x->rows * p.x->cols > q.x->rows * q.x->cols
                                                          : p.x->name < q.x->name;
  });
  if (opts.progress_total)
    for (const auto& j : jobs) opts.progress_total->fetch_add(stored_bytes(*j.x, *j.y));
  std::vector<NumericDiff> results(jobs.size());
  const unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  parallel::run(jobs.size(), threads, [&](size_t i) {
    results[i] = compare_one(*jobs[i].x, *jobs[i].y, opts.progress_done);
  });
  for (auto& r : results) {
    if (r.error.empty() && r.nonfinite == 0 && r.max_abs == 0) {
      ++d.numeric_identical;
      continue;
    }
    d.numeric.push_back(std::move(r));
  }
  // Worst first: errors, then by relative L2 error, then by name.
  std::sort(d.numeric.begin(), d.numeric.end(), [](const NumericDiff& p, const NumericDiff& q) {
    if (p.error.empty() != q.error.empty()) return !p.error.empty();
    if (p.rel_l2 != q.rel_l2) return p.rel_l2 > q.rel_l2;
    return p.name < q.name;
  });
  std::sort(d.numeric_skipped.begin(), d.numeric_skipped.end());
}

}  // namespace ckpt::diff
