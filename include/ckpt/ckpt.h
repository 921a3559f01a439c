// libckpt's public API in one include (docs/api.md): load a checkpoint, run the checks with
// options and an engine selection, render the findings, render a chat template, make a fixture.
#pragma once

#include "ckpt/checkpoint.h"  // load_checkpoint(), Checkpoint
#include "ckpt/checks.h"      // run_checks(), VerifyOptions, all_checks()
#include "ckpt/engines.h"     // engines::parse_selection()
#include "ckpt/finding.h"     // Finding, Severity
#include "ckpt/fixture.h"     // fixture::make_fixture()
#include "ckpt/jinja.h"       // jinja::render_string()
#include "ckpt/report.h"      // Report, render_text/json/github/sarif()
#include "ckpt/version.h"     // CKPT_VERSION_STRING
