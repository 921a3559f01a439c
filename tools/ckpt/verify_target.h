// One verify run over one target, shared by `ckpt verify TARGET` and the batch modes
// (--cache / --targets): load, run every family, apply --engine/--ignore/--select, summarize.
#pragma once
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/engines.h"
#include "ckpt/report.h"

namespace ckpt::cli {

struct VerifySettings {
  bool deep = false;
  bool strict = false;
  const engines::Selection* selection = nullptr;  // parsed --engine
  bool engines_given = false;                     // --engine was on the command line
  const engines::Selection* gguf_default = nullptr;  // llama.cpp: a GGUF-only target's default engine
  std::vector<std::string> ignore_codes, select_codes;
  LoadOptions load;
  // --ignore / --select: whether a finding of this code is reported (exact codes or prefixes).
  bool keeps(const std::string& code) const;
};

struct TargetResult {
  Report report;           // filled when loaded
  std::string load_error;  // non-empty: the target could not be located or read
  bool failed() const;     // errors, or warnings under --strict
  bool strict = false;
};

// keep_model: leave the Checkpoint allocated (a single-target run exits right after, and
// tearing down a 100k-tensor model costs more than verifying it); a batch frees each one.
TargetResult verify_target(const std::string& target, const VerifySettings& settings, DeepProgress* progress,
                           bool keep_model);

// Directory targets print finding files relative to the directory they named.
std::string file_prefix_for(const std::string& target);

}  // namespace ckpt::cli
