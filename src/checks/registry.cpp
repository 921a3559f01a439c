#include <algorithm>
#include <array>
#include <exception>
#include <thread>
#include <vector>

#include "checks/family.h"
#include "util/parallel.h"
#include "ckpt/engines.h"
#include "ckpt/timings.h"

namespace ckpt {

using checks::FamilyDef;

// The only list of check families. Order = order of execution and of the docs.
static const FamilyDef* const kFamilies[] = {
    &checks::kFilesFamily,
    &checks::kSafetensorsFamily,
    &checks::kGgufFamily,
    &checks::kOllamaFamily,
    &checks::kIndexFamily,
    &checks::kConfigFamily,
    &checks::kArchitectureFamily,
    &checks::kQuantizationFamily,
    &checks::kGgufConformanceFamily,
    &checks::kTokenizerFamily,
    &checks::kChatTemplateFamily,
    &checks::kGgufTokenizerFamily,
    &checks::kPickleSafetyFamily,
    &checks::kPyTorchStructureFamily,
    &checks::kMetaLayoutFamily,
    &checks::kHashesFamily,
    &checks::kGgufDeepFamily,
    &checks::kEnginesFamily,
};

static const std::vector<CheckInfo>& code_table() {
  static const std::vector<CheckInfo> table = [] {
    std::vector<CheckInfo> t;
    for (const FamilyDef* f : kFamilies) t.insert(t.end(), f->codes.begin(), f->codes.end());
    return t;
  }();
  return table;
}

std::span<const CheckInfo> all_checks() { return code_table(); }

const CheckInfo* find_check(std::string_view code) {
  for (const auto& c : code_table())
    if (c.code == code) return &c;
  return nullptr;
}

std::span<const CheckFamily> check_families() {
  static const std::vector<CheckFamily> fams = [] {
    std::vector<CheckFamily> v;
    for (const FamilyDef* f : kFamilies) v.push_back({f->name, f->run});
    return v;
  }();
  return fams;
}

std::vector<Finding> run_checks(const Checkpoint& ckpt, const VerifyOptions& opts) {
  // Families are independent readers of one immutable Checkpoint, so they run concurrently,
  // each into its own sink; the sinks are joined in registry order, so the result is the same
  // as a serial run. CF, AR and QZ share one conformance pass (cached per thread), so they
  // form one task; the heaviest families on a 100k-tensor model (IX, ST) are taken first.
  constexpr size_t n = std::size(kFamilies);
  auto conformance = [](const FamilyDef* f) {
    return f == &checks::kConfigFamily || f == &checks::kArchitectureFamily || f == &checks::kQuantizationFamily;
  };
  std::vector<std::vector<size_t>> tasks;  // adjacent conformance families share a task
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && conformance(kFamilies[i]) && conformance(kFamilies[i - 1])) tasks.back().push_back(i);
    else tasks.push_back({i});
  }
  std::stable_partition(tasks.begin(), tasks.end(), [](const std::vector<size_t>& t) {
    return kFamilies[t.front()] == &checks::kIndexFamily || kFamilies[t.front()] == &checks::kSafetensorsFamily;
  });
  std::array<FindingSink, n> sinks;
  std::array<std::exception_ptr, n> failures;
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  parallel::run(tasks.size(), threads, [&](size_t k) {
    for (size_t i : tasks[k]) {
      const bool timed = timings::enabled();
      const double w0 = timed ? timings::wall_now_ms() : 0, c0 = timed ? timings::thread_cpu_now_ms() : 0;
      try {
        kFamilies[i]->run(ckpt, opts, sinks[i]);
      } catch (...) {
        failures[i] = std::current_exception();
      }
      if (timed) timings::task(kFamilies[i]->name, timings::wall_now_ms() - w0, timings::thread_cpu_now_ms() - c0);
    }
  });
  for (const auto& e : failures)
    if (e) std::rethrow_exception(e);
  timings::mark("checks (all families)");
  std::vector<Finding> out;
  size_t total = 0;
  for (const auto& s : sinks) total += s.findings().size();
  out.reserve(total);
  for (auto& s : sinks)
    for (auto& f : s.findings()) out.push_back(std::move(f));
  static const engines::Selection portable;
  engines::apply_verdicts(out, opts.engines ? *opts.engines : portable);
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    if (a.file != b.file) return a.file < b.file;
    return a.code < b.code;
  });
  return out;
}

}  // namespace ckpt
