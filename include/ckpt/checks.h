// The check registry: every finding code, its default severity and title, and the
// check families that produce them. src/checks/registry.cpp is the only list of codes.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/finding.h"

namespace ckpt {

namespace engines {
struct Selection;
}

struct CheckInfo {
  std::string_view code;
  Severity severity;      // the usual severity (a family may lower or raise it with a reason)
  std::string_view title; // one line
};

std::span<const CheckInfo> all_checks();
const CheckInfo* find_check(std::string_view code);

// Bytes the --deep data pass will read and has read, for a progress display (any thread may
// read them while run_checks runs).
struct DeepProgress {
  std::atomic<uint64_t> total{0}, done{0};
};

struct VerifyOptions {
  bool deep = false;
  // The engines to judge for (--engine); nullptr = the portable verdict (ckpt/engines.h).
  const engines::Selection* engines = nullptr;
  DeepProgress* progress = nullptr;  // optional
};

struct CheckFamily {
  std::string_view name;  // "FS", "ST", ...
  void (*run)(const Checkpoint&, const VerifyOptions&, FindingSink&);
};

std::span<const CheckFamily> check_families();

// Run every family over the checkpoint, then the engine post-pass (engines::apply_verdicts);
// findings come back sorted by file, then code.
std::vector<Finding> run_checks(const Checkpoint& ckpt, const VerifyOptions& opts = {});

}  // namespace ckpt
