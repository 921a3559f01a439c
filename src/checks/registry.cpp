#include <algorithm>
#include <vector>

#include "checks/family.h"

namespace ckpt {

using checks::FamilyDef;

// The only list of check families. Order = order of execution and of the docs.
static const FamilyDef* const kFamilies[] = {
    &checks::kFilesFamily,
    &checks::kSafetensorsFamily,
    &checks::kIndexFamily,
    &checks::kConfigFamily,
    &checks::kArchitectureFamily,
    &checks::kQuantizationFamily,
    &checks::kTokenizerFamily,
    &checks::kChatTemplateFamily,
    &checks::kHashesFamily,
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
  FindingSink sink;
  for (const FamilyDef* f : kFamilies) f->run(ckpt, opts, sink);
  auto out = std::move(sink.findings());
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    if (a.file != b.file) return a.file < b.file;
    return a.code < b.code;
  });
  return out;
}

}  // namespace ckpt
