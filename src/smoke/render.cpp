// Renders a smoke result: a table of per-stage statistics and the verdict for people, one JSON
// object for programs (docs/smoke.md describes its fields).
#include <cmath>
#include <cstdio>

#include "ckpt/json.h"
#include "ckpt/smoke.h"

namespace ckpt::smoke {

namespace {

std::string num(double v, int digits) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string sci(double v) {
  if (!std::isfinite(v)) return num(v, 0);
  char b[64];
  std::snprintf(b, sizeof b, std::fabs(v) >= 1e5 ? "%.3g" : "%.3f", v);
  return b;
}

// JSON has no NaN or Infinity: a non-finite number is null (with the stage's `finite` false).
json::Value number(double v) { return std::isfinite(v) ? json::Value(v) : json::Value(nullptr); }

}  // namespace

std::string render_text(const Result& r, const std::string& target) {
  std::string out = "ckpt smoke " + target + "\n";
  if (!r.family.empty()) out += "  family     " + r.family + "\n";
  if (!r.tokenizer.empty()) out += "  tokenizer  " + r.tokenizer + "\n";
  out += "  tokens     " + std::to_string(r.tokens.size()) + "\n";
  if (!r.layers.empty()) {
    const bool compared = !r.stage_deviation.empty();
    out += std::string("\n  stage          rms          max |x|") + (compared ? "    vs baseline" : "") + "\n";
    for (size_t i = 0; i < r.layers.size(); ++i) {
      const auto& s = r.layers[i];
      std::string dev;
      if (compared && i < r.stage_deviation.size()) dev = num(100 * r.stage_deviation[i], 3) + "%";
      char line[192];
      std::snprintf(line, sizeof line, "  %-12s %12s %12s %14s%s\n", s.name.c_str(), sci(s.rms).c_str(), sci(s.max_abs).c_str(),
                    dev.c_str(), s.finite ? "" : "  not finite");
      out += line;
    }
    if (!r.baseline_file.empty())
      out += "\n  baseline   " + r.baseline_file + ": perplexity " + num(r.baseline_perplexity, 2) + "\n";
    out += "\n  perplexity " + num(r.perplexity, 2) + " (uniform " + num(r.uniform_perplexity, 0) + ")\n";
    out += "  top-1      " + num(100 * r.top1_accuracy, 1) + "% of next tokens\n";
    out += std::string("  logits     ") + (r.logits_finite ? "finite" : "NOT finite") + "\n";
    if (!r.skips.empty()) {
      out += "  skip-one-layer perplexity:";
      for (const auto& s : r.skips) out += " " + std::to_string(s.layer) + ":" + num(s.perplexity, 1);
      out += "\n";
    }
    char t[96];
    std::snprintf(t, sizeof t, "  time       %.2f s, %.1f MB of weights read\n", r.seconds, double(r.weight_bytes_read) / 1e6);
    out += t;
  }
  out += "\n";
  for (const auto& f : r.findings) {
    out += "  " + f.code + " " + std::string(severity_name(f.severity)) + ": " + f.message;
    if (!f.file.empty() || !f.tensor.empty()) out += " [" + f.file + (f.file.empty() || f.tensor.empty() ? "" : " ") + f.tensor + "]";
    out += "\n";
    if (!f.hint.empty()) out += "      hint: " + f.hint + "\n";
  }
  out += "\nverdict: " + std::string(verdict_name(r.verdict));
  if (!r.reason.empty()) out += " (" + r.reason + ")";
  if (!r.first_broken.empty()) out += "; first broken: " + r.first_broken;
  out += "\n";
  return out;
}

std::string render_json(const Result& r, const std::string& target) {
  json::Object o;
  o.emplace_back("target", target);
  o.emplace_back("verdict", std::string(verdict_name(r.verdict)));
  o.emplace_back("reason", r.reason);
  o.emplace_back("family", r.family.empty() ? json::Value(nullptr) : json::Value(r.family));
  o.emplace_back("tokenizer", r.tokenizer.empty() ? json::Value(nullptr) : json::Value(r.tokenizer));
  o.emplace_back("token_count", int64_t(r.tokens.size()));
  const bool ran = !r.layers.empty();
  o.emplace_back("perplexity", ran ? number(r.perplexity) : json::Value(nullptr));
  o.emplace_back("uniform_perplexity", ran ? number(r.uniform_perplexity) : json::Value(nullptr));
  o.emplace_back("top1_accuracy", ran ? number(r.top1_accuracy) : json::Value(nullptr));
  o.emplace_back("logits_finite", ran ? json::Value(r.logits_finite) : json::Value(nullptr));
  if (r.baseline_file.empty()) {
    o.emplace_back("baseline", nullptr);
  } else {
    o.emplace_back("baseline", json::Object{{"file", r.baseline_file}, {"perplexity", number(r.baseline_perplexity)}});
  }
  json::Array stages;
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& s = r.layers[i];
    json::Object stage{{"stage", s.name}, {"rms", number(s.rms)}, {"max_abs", number(s.max_abs)}, {"finite", s.finite}};
    // The largest per-position RMS departure from the baseline (a fraction), when compared.
    stage.emplace_back("baseline_deviation", i < r.stage_deviation.size() ? number(r.stage_deviation[i]) : json::Value(nullptr));
    stages.push_back(std::move(stage));
  }
  o.emplace_back("stages", std::move(stages));
  o.emplace_back("first_broken_layer", r.first_broken_layer >= 0 ? json::Value(int64_t(r.first_broken_layer)) : json::Value(nullptr));
  o.emplace_back("first_broken", r.first_broken.empty() ? json::Value(nullptr) : json::Value(r.first_broken));
  json::Array skips;
  for (const auto& s : r.skips) skips.push_back(json::Object{{"layer", int64_t(s.layer)}, {"perplexity", number(s.perplexity)}});
  o.emplace_back("skip_one_layer", std::move(skips));
  o.emplace_back("located_layer", r.located_layer >= 0 ? json::Value(int64_t(r.located_layer)) : json::Value(nullptr));
  o.emplace_back("seconds", r.seconds);
  o.emplace_back("weight_bytes_read", int64_t(r.weight_bytes_read));
  json::Array findings;
  for (const auto& f : r.findings) {
    auto opt = [](const std::string& s) { return s.empty() ? json::Value(nullptr) : json::Value(s); };
    findings.push_back(json::Object{{"code", f.code}, {"severity", std::string(severity_name(f.severity))}, {"message", f.message},
                                    {"file", opt(f.file)}, {"tensor", opt(f.tensor)}, {"hint", opt(f.hint)}});
  }
  o.emplace_back("findings", std::move(findings));
  return json::Value(std::move(o)).dump() + "\n";
}

}  // namespace ckpt::smoke
