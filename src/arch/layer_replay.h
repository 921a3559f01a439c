// Private to the conformance engine: replaying one decoder layer's verdict on the layers that
// repeat it.
//
// A deep checkpoint repeats a few layer layouts dozens of times (DeepSeek-V3: 3 dense and 58
// MoE layers of 1,536 tensors each), and the conformance pass spends most of its work
// resolving, building and checking the same module parts once per layer. A layer's checks are
// a function of its plan entries, of the scheme (whose resolution of a name pattern is
// layer-independent whenever the resolution memo keeps it) and of what each of its name
// lookups finds. So the engine checks a layer in full once, recording every lookup it made
// (by the part of the name after "<prefix>layers.<i>."), and when that layer emitted nothing
// it becomes the representative of its layout. A later layer whose plan entries are the
// representative's with its own index, and whose every recorded lookup finds a tensor of the
// same dtype and shape (or nothing, where the representative found nothing), is judged the
// same: clean, with the same tensors consumed. Any difference, a finding anywhere in the
// representative, or a resolution the memo could not keep sends the layer through the full
// checks, so a defect is always reported by the code that reports it today.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ckpt/arch.h"

namespace ckpt::arch::replay {

// One name lookup of a recorded layer: by_name (a tensor) or companions (a module with
// quantization companions on disk).
struct Lookup {
  bool companion = false;
  std::string rest;                 // the name after the layer's base
  uint32_t tensor = UINT32_MAX;     // the tensor found (UINT32_MAX: none); companions: one
                                    // companion tensor of the module, when found
  bool found = false;               // companions: the answer
  bool newly_consumed = false;      // by_name: the layer's checks consumed the tensor
};

struct Representative {
  size_t begin = 0, end = 0;  // its entries in the plan
  size_t base_size = 0;       // size of "<prefix>layers.<i>."
  std::vector<Lookup> lookups;
};

// A run of consecutive plan entries of one decoder layer.
struct Run {
  size_t begin = 0, end = 0;
  int32_t layer = -1;
  bool eligible = false;  // see runs_of
};

inline std::string layer_base(std::string_view prefix, int32_t layer) {
  std::string b(prefix);
  b += "layers.";
  b += std::to_string(layer);
  b += '.';
  return b;
}

// The plan's decoder-layer runs. A run can be replayed or represent others only when its layer
// has no other run, and none of its entries is a tower, MTP or presence-group entry (whose
// verdicts depend on other layers), and every entry's name starts with the layer's base.
inline std::vector<Run> runs_of(const Plan& plan, std::string_view prefix) {
  std::vector<Run> runs;
  for (size_t k = 0; k < plan.size();) {
    const int32_t layer = plan[k].layer;
    size_t e = k + 1;
    while (e < plan.size() && plan[e].layer == layer) ++e;
    if (layer >= 0) runs.push_back({k, e, layer, true});
    k = e;
  }
  std::unordered_set<int32_t> seen, twice;
  for (const auto& r : runs)
    if (!seen.insert(r.layer).second) twice.insert(r.layer);
  std::string base;
  for (auto& r : runs) {
    if (twice.count(r.layer)) {
      r.eligible = false;
      continue;
    }
    base = layer_base(prefix, r.layer);
    for (size_t k = r.begin; k < r.end && r.eligible; ++k) {
      const ExpectedTensor& x = plan[k];
      r.eligible = !x.tower && !x.mtp && x.presence != Presence::Group && x.name.starts_with(base);
    }
  }
  return runs;
}

// Whether the run's entries are the representative's, layer index (of the same length) aside.
inline bool same_layout(const Plan& plan, const Representative& rep, const Run& run,
                        size_t base_size) {
  // Layer indices of one length only: the scheme's resolution memo (and a digit-free regex's
  // `\d`) tells a one-digit layer from a two-digit one, never two of the same length.
  if (base_size != rep.base_size || run.end - run.begin != rep.end - rep.begin) return false;
  for (size_t k = 0; k < run.end - run.begin; ++k) {
    const ExpectedTensor& a = plan[rep.begin + k];
    const ExpectedTensor& b = plan[run.begin + k];
    if (a.kind != b.kind || a.dtype != b.dtype || a.presence != b.presence || a.expert != b.expert ||
        a.group != b.group || a.shape.size() != b.shape.size() || a.why != b.why)
      return false;
    for (size_t d = 0; d < a.shape.size(); ++d)
      if (a.shape[d] != b.shape[d]) return false;
    if (std::string_view(a.name).substr(rep.base_size) != std::string_view(b.name).substr(base_size)) return false;
  }
  return true;
}

}  // namespace ckpt::arch::replay
