// PK: what a pickle would import and run when loaded, judged statically (no import, no call).
#pragma once
#include <string>
#include <string_view>

#include "ckpt/finding.h"
#include "ckpt/pytorch.h"

namespace ckpt::checks::pk {

enum class Verdict : uint8_t { Allowed, Dangerous, Unknown };

struct Judgement {
  Verdict verdict = Verdict::Unknown;
  std::string reason;  // why it is dangerous (the rule that matched), or empty
};

// Judges one import by its module and name (dotted parts of both are all checked).
Judgement judge_import(std::string_view module, std::string_view name);

// The PK safety findings for one scanned file (what the family emits for it).
void safety_findings(const pt::FileScan& scan, FindingSink& out);

}  // namespace ckpt::checks::pk
