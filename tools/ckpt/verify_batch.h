// `ckpt verify --cache [DIR]` and `ckpt verify --targets FILE`: many targets in one process.
#pragma once
#include <string>

#include "verify_target.h"

namespace ckpt::cli {

struct BatchArgs {
  std::string cache_root;    // --cache DIR ("" = the resolved hub cache)
  bool cache_given = false;  // --cache was on the command line
  std::string targets_file;  // --targets FILE ("-" = stdin)
  unsigned jobs = 0;         // 0 = the CPU count
  std::string shard;         // "I/N" or empty
  std::string format = "text";
  bool quiet = false;
};

int run_verify_batch(const BatchArgs& args, VerifySettings settings);

}  // namespace ckpt::cli
