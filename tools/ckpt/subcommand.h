// Each tools/ckpt/<name>.cpp registers one subcommand; main.cpp dispatches.
// Static registration is safe here because these files are compiled straight
// into the executable, not into a library the linker could prune.
#pragma once
#include <string>

namespace ckpt::cli {

// argv[0] is "ckpt <name>"; the rest are the subcommand's own arguments.
// Return the process exit code: 0 ok, 1 findings/failure, 2 usage or unreadable input.
using RunFn = int (*)(int argc, char** argv);

struct Subcommand {
  const char* name;
  const char* summary;
  RunFn run;
};

bool register_subcommand(const Subcommand& sub);

// The path of a sibling executable (ckpt-fetch, ckpt-smoke): beside this one.
std::string sibling_executable(const char* name);

}  // namespace ckpt::cli

#define CKPT_CONCAT_INNER(a, b) a##b
#define CKPT_CONCAT(a, b) CKPT_CONCAT_INNER(a, b)
#define CKPT_REGISTER_SUBCOMMAND(name, summary, fn) \
  static const bool CKPT_CONCAT(ckpt_subcommand_registered_, __LINE__) = \
      ::ckpt::cli::register_subcommand({name, summary, fn})
