// AR: does every tensor a loader will ask for exist, with the shape config.json implies?
// The expected set comes from the architecture registry (src/arch/tables.cpp), the same
// tables `ckpt fixture` generates from. Header-only: tensor data is never read.
#include <array>

#include "arch/conformance.h"
#include "checks/family.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 13> kCodes{{
    {"AR001", Severity::error, "tensor the config implies is missing"},
    {"AR002", Severity::error, "unexpected tensor"},
    {"AR003", Severity::info, "tensor that loaders drop (rotary buffers)"},
    {"AR004", Severity::error, "tensor shape differs from the shape the config implies"},
    {"AR005", Severity::error, "tensor stored transposed"},
    {"AR006", Severity::error, "embedding/head rows differ from vocab_size"},
    {"AR007", Severity::warning, "architecture not in the registry: structural checks only"},
    {"AR008", Severity::info, "vision/audio tower or MTP tensors recognised and left unchecked"},
    {"AR009", Severity::error, "expert count differs from the stored experts"},
    {"AR010", Severity::warning, "tensor dtype differs from the expected one"},
    {"AR011", Severity::error, "kv-shared layer ships only part of its k/v tensors"},
    {"AR012", Severity::warning, "tied embeddings but the output head is also stored"},
    {"AR013", Severity::warning, "MTP layers partly present"},
}};

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  if (!ck.config.ok()) return;  // CF reports it
  if (ck.weights().empty()) return;  // FS/ST report an empty checkpoint
  arch::run_family(ck, arch::kAR, out);
}

}  // namespace

const FamilyDef kArchitectureFamily{"AR", kCodes, run};

}  // namespace ckpt::checks
