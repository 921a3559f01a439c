// CF: config.json itself — present, parseable, typed, and complete for its architecture
// (nested text configs, aliases and the defaults loaders really apply: src/arch/registry.cpp).
#include <array>

#include "arch/conformance.h"
#include "checks/family.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 11> kCodes{{
    {"CF001", Severity::error, "config.json is missing"},
    {"CF002", Severity::error, "config.json is not valid JSON"},
    {"CF003", Severity::error, "required config field is missing"},
    {"CF004", Severity::error, "config field has the wrong type or an impossible value"},
    {"CF005", Severity::info, "config field absent; loaders fill in a default"},
    {"CF006", Severity::warning, "config field absent and loaders disagree on its default"},
    {"CF007", Severity::error, "config fields contradict each other"},
    {"CF008", Severity::info, "note on how the config was resolved"},
    {"CF009", Severity::warning, "expert count and model type disagree"},
    {"CF010", Severity::warning, "duplicate key in config.json"},
    {"CF011", Severity::error, "config field absent; the default loaders apply contradicts the tensors"},
}};

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  const JsonFile& cf = ck.config;
  if (!cf.present) {
    if (!ck.weights().empty())
      out.add("CF001", Severity::error,
              "config.json is missing: loaders cannot tell the architecture, shapes or quantization of " +
                  std::to_string(ck.weights().size()) + " tensors",
              "config.json", "", "copy config.json from the source model");
    return;
  }
  if (cf.error) {
    out.add("CF002", Severity::error,
            cf.file + ":" + std::to_string(cf.error->line) + ":" + std::to_string(cf.error->column) + ": " +
                cf.error->message,
            cf.file, "", "fix the JSON syntax at that position");
    return;
  }
  for (const auto& d : cf.duplicates)
    out.add("CF010", Severity::warning,
            "key \"" + d.key + "\" appears more than once in " + (d.path.empty() ? std::string("/") : d.path) +
                "; Python's json keeps the last value, other parsers may keep the first",
            cf.file, "", "remove the duplicate");
  arch::run_family(ck, arch::kCF, out);
}

}  // namespace

const FamilyDef kConfigFamily{"CF", kCodes, run};

}  // namespace ckpt::checks
