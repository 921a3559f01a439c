// Private: config <-> tensors conformance (the engine behind the CF, AR and QZ families).
// Header-only input: names, dtypes and shapes; tensor data is never read.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/finding.h"
#include "ckpt/json.h"
#include "ckpt/safetensors.h"

namespace ckpt::arch {

struct ActualTensor {
  std::string_view name;
  st::DType dtype;
  std::span<const uint64_t> shape;
  std::string_view file;  // relative path of the shard holding it
  uint64_t hash = 0;      // hash_name(name) when the reader computed it (0: not known)
};

enum Families : unsigned { kCF = 1, kAR = 2, kQZ = 4 };

struct ConformanceInput {
  const json::Value* config = nullptr;     // parsed config.json (must be set)
  std::string config_file = "config.json";
  std::string index_file;                  // used as the file of "missing tensor" findings
  std::vector<ActualTensor> tensors;       // the effective tensor set (what a loader sees)
};

// Emit the findings of the selected families (bitmask of Families).
void check_conformance(const ConformanceInput& in, unsigned families, FindingSink& sink);

// Layer replay (arch/layer_replay.h) is on unless turned off; tests turn it off to prove that
// it changes no finding.
void set_layer_replay(bool on);
// Decoder layers judged by replay so far in this process (for tests and CKPT_TIMINGS readers).
uint64_t layer_replays();
// Lookups of replayed layers settled by the tensor at the representative's position, shifted
// (for tests: the fast path is taken).
uint64_t layer_replay_position_hits();

}  // namespace ckpt::arch

namespace ckpt {
class Checkpoint;
}
namespace ckpt::arch {
// The effective tensor set of a checkpoint (what a loader sees), its config and index file.
ConformanceInput conformance_input(const Checkpoint& ck);

// The families' entry point: the engine runs once per checkpoint for CF, AR and QZ together
// (the first family to ask computes all three; the others take their share), so the cost is
// one pass. The share is handed out once, and only to the same checkpoint (address, root,
// tensor count), so a result can never leak to another checkpoint.
void run_family(const Checkpoint& ck, unsigned family, FindingSink& sink);
}  // namespace ckpt::arch
