// Smoke baselines: what a known-good run scored, read and written as one JSON document
// (docs/smoke.md). Reading is strict and bounded: a baseline is small (stages x tokens numbers),
// so anything past kMaxBaselineBytes, or a field of the wrong type, is an error naming it.
#include <cmath>

#include "ckpt/json.h"
#include "ckpt/smoke.h"

namespace ckpt::smoke {

namespace {

constexpr const char* kFormat = "ckpt-smoke-baseline/1";
constexpr size_t kMaxBaselineBytes = 64u << 20;
constexpr size_t kMaxTokens = 1u << 20, kMaxStages = 4096;

bool fail(std::string& error, const std::string& file, const std::string& what) {
  error = file + ": " + what;
  return false;
}

bool number_of(const json::Value* v, double& out) {
  if (!v || !v->is_number()) return false;
  out = v->as_double();
  return std::isfinite(out);
}

}  // namespace

std::optional<Baseline> read_baseline(std::string_view text, const std::string& file, std::string& error) {
  if (text.size() > kMaxBaselineBytes) {
    fail(error, file, "larger than 64 MiB; a baseline holds a few numbers per stage and token");
    return std::nullopt;
  }
  auto parsed = json::parse(text);
  if (!parsed.ok()) {
    fail(error, file + ":" + std::to_string(parsed.error->line) + ":" + std::to_string(parsed.error->column), parsed.error->message);
    return std::nullopt;
  }
  const json::Value& v = parsed.value;
  if (!v.is_object() || v.get_string("format") != std::optional<std::string>(kFormat)) {
    fail(error, file, std::string("expected an object with \"format\": \"") + kFormat + "\"");
    return std::nullopt;
  }
  Baseline b;
  b.file = file;
  b.recorded_by = v.get_string("recorded_by").value_or("");
  const json::Value* ids = v.find("token_ids");
  if (!ids || !ids->is_array() || ids->as_array().size() > kMaxTokens) {
    fail(error, file, "\"token_ids\": expected a list of at most 1048576 token ids");
    return std::nullopt;
  }
  for (size_t i = 0; i < ids->as_array().size(); ++i) {
    const auto& id = ids->as_array()[i];
    if (!id.is_int() || id.as_int() < 0 || id.as_int() > int64_t(UINT32_MAX)) {
      fail(error, file, "\"token_ids\"[" + std::to_string(i) + "]: expected a token id");
      return std::nullopt;
    }
    b.tokens.push_back(uint32_t(id.as_int()));
  }
  if (!number_of(v.find("nll_mean"), b.nll_mean) || b.nll_mean < 0) {
    fail(error, file, "\"nll_mean\": expected a finite non-negative number (nats)");
    return std::nullopt;
  }
  number_of(v.find("top1_accuracy"), b.top1_accuracy);
  const json::Value* stages = v.find("stages");
  if (!stages || !stages->is_array() || stages->as_array().size() > kMaxStages) {
    fail(error, file, "\"stages\": expected a list of at most 4096 stages");
    return std::nullopt;
  }
  for (size_t i = 0; i < stages->as_array().size(); ++i) {
    const auto& st = stages->as_array()[i];
    const std::string where = "\"stages\"[" + std::to_string(i) + "]";
    LayerStats s;
    auto name = st.get_string("stage");
    if (!name || !number_of(st.find("rms"), s.rms) || !number_of(st.find("max_abs"), s.max_abs)) {
      fail(error, file, where + ": expected {\"stage\": name, \"rms\": number, \"max_abs\": number, \"position_rms\": [...]}");
      return std::nullopt;
    }
    s.name = *name;
    const json::Value* pos = st.find("position_rms");
    if (!pos || !pos->is_array() || pos->as_array().size() != b.tokens.size()) {
      fail(error, file, where + ".position_rms: expected one number per token (" + std::to_string(b.tokens.size()) + ")");
      return std::nullopt;
    }
    for (const auto& p : pos->as_array()) {
      double x;
      if (!number_of(&p, x) || x < 0) {
        fail(error, file, where + ".position_rms: expected finite non-negative numbers");
        return std::nullopt;
      }
      s.position_rms.push_back(x);
    }
    b.stages.push_back(std::move(s));
  }
  return b;
}

std::string render_baseline(const Result& r) {
  json::Object o;
  o.emplace_back("format", kFormat);
  o.emplace_back("recorded_by", "ckpt smoke");
  o.emplace_back("family", r.family);
  json::Array ids;
  for (uint32_t t : r.tokens) ids.push_back(int64_t(t));
  o.emplace_back("token_ids", std::move(ids));
  o.emplace_back("nll_mean", std::log(r.perplexity));
  o.emplace_back("perplexity", r.perplexity);
  o.emplace_back("top1_accuracy", r.top1_accuracy);
  json::Array stages;
  for (const auto& s : r.layers) {
    json::Array pos;
    for (double p : s.position_rms) pos.push_back(p);
    stages.push_back(json::Object{{"stage", s.name}, {"rms", s.rms}, {"max_abs", s.max_abs}, {"position_rms", std::move(pos)}});
  }
  o.emplace_back("stages", std::move(stages));
  return json::Value(std::move(o)).dump() + "\n";
}

}  // namespace ckpt::smoke
