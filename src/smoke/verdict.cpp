// The smoke verdict: from the forward pass's statistics to ok / suspect / garbage, the layer
// that breaks, and the SM findings (docs/checks.md).
//
// Thresholds, and why:
// - garbage: a non-finite hidden state or logit, activations past kExplodeRms / kExplodeMax
//   (no trained model's residual stream reaches them: float16 engines overflow far below), or
//   a perplexity within a factor V^(1 - kNearUniform) of the uniform distribution's (a model
//   that knows next to nothing about the text).
// - suspect: a perplexity above kSuspectPpl (trained language models of every family in the
//   registry, down to a few hundred million parameters, stay well below it on plain English
//   and short code), or, for small vocabularies, above sqrt(V).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <thread>

#include "smoke/internal.h"

namespace ckpt::smoke {

namespace {

constexpr double kExplodeRms = 1e4, kExplodeMax = 1e6;
constexpr double kNearUniform = 0.75;  // log(ppl) >= 0.75 log(V)
constexpr double kSuspectPpl = 100;
constexpr double kLocateGain = 2;      // skipping the layer must at least halve the perplexity
// A stage departs from its baseline when some position's hidden-state RMS differs by more than
// this: the same weights computed in float32 by another implementation differ by ~1e-5.

std::string fixed(double v, int digits = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

double ppl_of(const StreamOut& s) { return s.predicted ? std::exp(s.nll_sum / s.predicted) : 0; }

int32_t layer_of_stage(size_t stage, uint32_t L) { return stage >= 1 && stage <= L ? int32_t(stage - 1) : -1; }

// Max over positions of |rms / baseline rms - 1| (relative to the stage's overall RMS where a
// position's baseline RMS is near zero); infinity for a non-finite stage.
double deviation(const LayerStats& now, const LayerStats& base) {
  if (!now.finite) return std::numeric_limits<double>::infinity();
  double worst = 0;
  const double floor = std::max(base.rms * 1e-3, 1e-30);
  for (size_t i = 0; i < now.position_rms.size() && i < base.position_rms.size(); ++i)
    worst = std::max(worst, std::fabs(now.position_rms[i] - base.position_rms[i]) / std::max(base.position_rms[i], floor));
  return worst;
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::suspect: return "suspect";
    case Verdict::garbage: return "garbage";
    case Verdict::not_run: return "not run";
  }
  return "not run";
}

Result run_tokens(const Checkpoint& ck, const std::vector<uint32_t>& all_tokens, const Options& opts, std::vector<float>* logits) {
  Result r;
  FindingSink sink;
  auto done = [&]() -> Result {
    r.findings = std::move(sink.findings());
    return std::move(r);
  };
  // The model directory's own baseline (a trained fixture carries the run it was saved from).
  std::optional<Baseline> own;
  Options o = opts;
  if (!o.baseline && o.model_baseline) {
    std::error_code ec;
    const auto path = ck.root / kBaselineFile;
    if (std::filesystem::is_regular_file(path, ec)) {
      std::string text, error;
      if (std::ifstream in(path, std::ios::binary); in) {
        const auto size = std::filesystem::file_size(path, ec);
        if (!ec && size <= (64u << 20)) {
          text.assign(size_t(size), '\0');
          in.read(text.data(), std::streamsize(size));
        }
      }
      own = read_baseline(text, kBaselineFile, error);
      if (own) o.baseline = &*own;
      else sink.add("SM008", Severity::warning, "baseline not used: " + error, kBaselineFile, "",
                    "rewrite it with `ckpt smoke --record-baseline` on the known-good model");
    }
  }
  const Options& opts_used = o;
  r.tokens = all_tokens;
  // A baseline fixes how many tokens run: the text's first tokens, when they are its tokens.
  const Baseline* given = opts_used.baseline;
  if (given && given->tokens.size() <= all_tokens.size() &&
      std::equal(given->tokens.begin(), given->tokens.end(), all_tokens.begin()))
    r.tokens.resize(given->tokens.size());
  else if (opts_used.max_tokens && r.tokens.size() > opts_used.max_tokens)
    r.tokens.resize(opts_used.max_tokens);
  const std::vector<uint32_t>& tokens = r.tokens;
  if (tokens.size() < 2) {
    sink.add("SM013", Severity::warning, "smoke pass not run: the text encodes to " + std::to_string(tokens.size()) +
                                             " token(s); at least 2 are needed for one prediction",
             "", "", "pass a longer --text");
    return done();
  }
  Plan plan;
  if (!make_plan(ck, plan, sink)) return done();
  r.family = plan.hp.family;
  for (const auto& n : plan.hp.notes) sink.add("SM014", Severity::info, "smoke pass approximation: " + n, ck.config.file);
  const unsigned threads = opts_used.threads ? opts_used.threads : std::max(1u, std::thread::hardware_concurrency());
  const auto t0 = std::chrono::steady_clock::now();
  ForwardOptions fo{threads, false, logits != nullptr};
  ForwardOut f = forward(plan, tokens, fo);
  auto failed = [&](const ForwardOut& x) {
    if (x.error.empty()) return false;
    std::string file;
    if (auto it = plan.weights.by_name.find(x.error_tensor); it != plan.weights.by_name.end() && !it->second.parts.empty())
      file = std::filesystem::relative(it->second.parts.front().file, ck.root).generic_string();
    sink.add("SM015", Severity::error, "smoke pass stopped: " + x.error_tensor + ": " + x.error, file, x.error_tensor,
             "the ST/AR/QZ findings name the cause when the header shows it");
    return true;
  };
  if (failed(f) || f.streams.empty()) return done();
  r.weight_bytes_read = f.weight_bytes;
  r.layers = f.stats;
  const StreamOut& main = f.streams[0];
  if (logits) *logits = main.logits;
  const uint32_t L = plan.hp.L;
  r.perplexity = ppl_of(main);
  r.top1_accuracy = main.predicted ? double(main.correct) / main.predicted : 0;
  r.logits_finite = main.logits_finite;
  // The head's rows are the vocabulary the model predicts over.
  r.uniform_perplexity = double(plan.hp.V);
  if (auto it = plan.weights.by_name.find(plan.hp.head_weight());
      it != plan.weights.by_name.end())
    r.uniform_perplexity = double(it->second.rows);

  // Statistics: the first stage that is non-finite, then the first that explodes.
  int nonfinite = -1, exploded = -1;
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& s = r.layers[i];
    if (nonfinite < 0 && !s.finite) nonfinite = int(i);
    if (exploded < 0 && (s.rms > kExplodeRms || s.max_abs > kExplodeMax)) exploded = int(i);
  }
  const double lnV = std::log(std::max(2.0, r.uniform_perplexity));
  const double lnP = std::log(std::max(1.0, r.perplexity));
  const double suspect_ppl = std::min(kSuspectPpl, std::sqrt(r.uniform_perplexity));
  const bool near_uniform = !std::isfinite(r.perplexity) || lnP >= kNearUniform * lnV;
  if (nonfinite >= 0 || exploded >= 0 || !r.logits_finite || near_uniform) r.verdict = Verdict::garbage;
  else if (r.perplexity > suspect_ppl) r.verdict = Verdict::suspect;
  else r.verdict = Verdict::ok;

  // Against the baseline: the perplexity may not rise past the tolerance, and the first stage
  // that departs from it is where the numbers went wrong.
  const Baseline* base = opts_used.baseline;
  int departed = -1;
  double rise = 0;
  if (base && base->tokens != tokens) {
    size_t first = 0;
    while (first < tokens.size() && first < base->tokens.size() && tokens[first] == base->tokens[first]) ++first;
    sink.add("SM008", Severity::warning, "baseline " + base->file + " was recorded on other tokens (" +
                                             std::to_string(base->tokens.size()) + " ids, this run " + std::to_string(tokens.size()) +
                                             "; first difference at position " + std::to_string(first) + "): not compared",
             base->file, "", "record the baseline with the same text, tokenizer and --tokens");
    base = nullptr;
  }
  if (base) {
    r.baseline_file = base->file;
    r.baseline_perplexity = std::exp(base->nll_mean);
    rise = std::log(std::max(1e-300, r.perplexity)) - base->nll_mean;
    if (!std::isfinite(r.perplexity)) rise = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < r.layers.size(); ++i) {
      double d = 0;
      for (const auto& b : base->stages)
        if (b.name == r.layers[i].name) d = deviation(r.layers[i], b);
      r.stage_deviation.push_back(d);
      if (departed < 0 && d > opts_used.stage_tolerance) departed = int(i);
    }
    // A clean copy reproduces its baseline to float rounding (~1e-6 of a stage's RMS); a stage
    // that departs by more carries other numbers than the known-good model, even when the text
    // is predicted as well (a tiny model that memorised it shrugs off a swapped gate/up).
    if (r.verdict == Verdict::ok && (rise > opts_used.baseline_tolerance || departed >= 0)) r.verdict = Verdict::suspect;
  }

  const int stage = nonfinite >= 0 ? nonfinite : exploded >= 0 ? exploded : r.verdict != Verdict::ok ? departed : -1;
  if (stage >= 0) {
    r.first_broken = r.layers[size_t(stage)].name;
    r.first_broken_layer = layer_of_stage(size_t(stage), L);
  }
  // Locate: one more pass, every decoder layer left out in turn; the layer whose removal
  // restores the perplexity most is the one computing garbage.
  if (r.verdict != Verdict::ok && opts_used.locate && L > 1 && stage < 0) {
    ForwardOptions lo{threads, true, false};
    ForwardOut g = forward(plan, tokens, lo);
    if (!failed(g)) {
      double best = r.perplexity;
      for (size_t i = 1; i < g.streams.size(); ++i) {
        const double p = ppl_of(g.streams[i]);
        r.skips.push_back({g.streams[i].skipped_layer, p});
        if (g.streams[i].logits_finite && std::isfinite(p) && p * kLocateGain <= best) {
          best = p;
          r.located_layer = g.streams[i].skipped_layer;
        }
      }
      if (!std::isfinite(r.perplexity) && r.located_layer < 0) {  // any finite skip beats a non-finite pass
        for (const auto& s : r.skips)
          if (std::isfinite(s.perplexity) && (r.located_layer < 0 || s.perplexity < best)) best = s.perplexity, r.located_layer = s.layer;
      }
    }
  }
  if (r.first_broken.empty() && r.located_layer >= 0) {
    r.first_broken_layer = r.located_layer;
    r.first_broken = "layer " + std::to_string(r.located_layer);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::string summary = "perplexity " + fixed(r.perplexity) + " on " + std::to_string(tokens.size()) +
                              " tokens (uniform: " + fixed(r.uniform_perplexity, 0) + "), top-1 next-token accuracy " +
                              fixed(100 * r.top1_accuracy, 1) + "%";
  if (nonfinite >= 0)
    sink.add("SM003", Severity::error, "hidden state is not finite after " + r.layers[size_t(nonfinite)].name +
                                           " (the stages before it are finite)",
             "", "", "a NaN/Inf weight, or a dtype whose bytes are another dtype's; `ckpt verify --deep` scans values");
  else if (exploded >= 0)
    sink.add("SM004", Severity::error, "activations explode after " + r.layers[size_t(exploded)].name + ": RMS " +
                                           fixed(r.layers[size_t(exploded)].rms) + ", max |x| " + fixed(r.layers[size_t(exploded)].max_abs),
             "", "", "weights read with the wrong scale or dtype, or a norm weight of the wrong convention");
  if (!r.logits_finite && nonfinite < 0)
    sink.add("SM003", Severity::error, "logits are not finite (every hidden state is)", "", plan.hp.head_weight(),
             "the output head holds NaN/Inf or bytes of another dtype");
  if (r.located_layer >= 0) {
    double p = 0;
    for (const auto& s : r.skips)
      if (s.layer == r.located_layer) p = s.perplexity;
    sink.add("SM005", Severity::info, "leaving out layer " + std::to_string(r.located_layer) + " lowers the perplexity from " +
                                          fixed(r.perplexity) + " to " + fixed(p) + ": that layer computes garbage",
             "", plan.hp.prefix + "layers." + std::to_string(r.located_layer) + ".",
             "look for a transposed square projection, swapped gate/up halves, shifted scales or a norm of the wrong convention in it");
  }
  if (base && departed >= 0 && r.verdict != Verdict::ok)
    sink.add("SM007", Severity::info, "the first stage that departs from the baseline is " + r.layers[size_t(departed)].name +
                                          ": a position's hidden-state RMS differs by " + fixed(100 * r.stage_deviation[size_t(departed)], 1) +
                                          "% (the stages before it agree within " + fixed(100 * opts_used.stage_tolerance, 2) + "%)",
             base->file, departed >= 1 && departed <= int(L) ? plan.hp.prefix + "layers." + std::to_string(departed - 1) + "." : "",
             "the weights of that stage were read or converted differently from the baseline's model");
  const std::string where = r.first_broken.empty() ? std::string() : "; first broken: " + r.first_broken;
  const std::string against = base ? "; the baseline (" + base->file + ") scored " + fixed(r.baseline_perplexity) +
                                         (rise > opts_used.baseline_tolerance ? ", this run is " + fixed(rise, 3) + " nats per token worse (tolerance " +
                                                                                fixed(opts_used.baseline_tolerance, 3) + ")"
                                                                          : "")
                                   : std::string();
  if (r.verdict == Verdict::garbage) {
    r.reason = near_uniform && stage < 0 && r.logits_finite ? "perplexity is near the uniform distribution's" : "non-finite or exploding values";
    sink.add("SM001", Severity::error, "the model computes garbage: " + summary + against + where, "", "",
             "every shape and dtype can check out while the numbers are wrong: see the findings above for where");
  } else if (r.verdict == Verdict::suspect) {
    const bool above_baseline = base && rise > opts_used.baseline_tolerance && r.perplexity <= suspect_ppl;
    const bool departs = base && departed >= 0 && !above_baseline && r.perplexity <= suspect_ppl;
    r.reason = above_baseline ? "perplexity above the baseline's by more than the tolerance"
               : departs      ? "hidden states depart from the baseline's"
                              : "perplexity above " + fixed(suspect_ppl, 0) + ", far above what trained models reach on the text";
    const std::string departure =
        departs ? "; " + r.layers[size_t(departed)].name + "'s hidden state departs from the baseline's by " +
                      fixed(100 * r.stage_deviation[size_t(departed)], 2) + "% (tolerance " + fixed(100 * opts_used.stage_tolerance, 2) + "%)"
                : std::string();
    sink.add("SM002", Severity::warning, "the model's predictions are suspect: " + summary + against + departure + where, "", "",
             base ? "the known-good model computed other numbers on the same ids: a subtle numeric defect, or a conversion "
                    "(re-quantization) the baseline was not recorded on"
                  : "a trained model of any family predicts this text far better; a subtle numeric defect or an undertrained export");
  } else {
    r.reason = "perplexity within what trained models reach";
    sink.add("SM006", Severity::info, "smoke pass ok: " + summary + against, "", "", "");
  }
  return done();
}

}  // namespace ckpt::smoke
