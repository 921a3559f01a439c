// QZ: the declared quantization scheme against the packed tensors on disk: per module, the
// loader's "is it quantized" predicate, the companion tensors (scales, biases, zero points,
// g_idx) and the packed geometry implied by bits and group size over the true [out, in].
#include <array>

#include "arch/conformance.h"
#include "checks/family.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 11> kCodes{{
    {"QZ001", Severity::warning, "quantization declaration unusable or not modelled"},
    {"QZ002", Severity::error, "quantization companion tensor missing"},
    {"QZ003", Severity::error, "packed geometry differs from the declared bits/group size"},
    {"QZ004", Severity::error, "quantized tensors for a module the loader will not quantize"},
    {"QZ005", Severity::error, "module declared quantized but stored as float"},
    {"QZ006", Severity::error, "zero points do not match the declared symmetry"},
    {"QZ007", Severity::error, "quantized tensor has the wrong dtype"},
    {"QZ008", Severity::error, "integer or FP8 weight where a float weight is expected"},
    {"QZ009", Severity::error, "fused shards (q/k/v, gate/up) quantized differently"},
    {"QZ010", Severity::info, "scheme some loaders refuse"},
    {"QZ011", Severity::warning, "loaders resolve a module's quantization differently"},
}};

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  if (!ck.config.ok()) return;
  if (ck.weights().empty()) return;
  arch::run_family(ck, arch::kQZ, out);
}

}  // namespace

const FamilyDef kQuantizationFamily{"QZ", kCodes, run};

}  // namespace ckpt::checks
