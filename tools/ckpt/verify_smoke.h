// `ckpt verify --smoke`: after the header checks pass, the forward pass of `ckpt smoke` over the
// same model, its findings (family SM) added to the verify report. It runs the sibling
// executable ckpt-smoke, so `ckpt verify` itself never loads BLAS.
#pragma once
#include "ckpt/report.h"
#include "verify_target.h"

namespace ckpt::cli {

// Appends the smoke pass's findings to `report` (SM009 when the header checks found errors and
// the pass was skipped, SM016 when the sibling could not run or answered with something that is
// not its report) and recounts the summary. --ignore / --select apply to them as to the rest.
void add_smoke_findings(Report& report, const VerifySettings& settings);

}  // namespace ckpt::cli
