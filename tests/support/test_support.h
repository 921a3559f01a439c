// Shared helpers for the test executables: temporary directories, the real corpus,
// and running the built `ckpt` binary.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/json.h"

namespace ckpt::test {

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

// ../shared/corpus beside the source tree, or empty when this clone has none.
std::filesystem::path corpus_dir();
// GTEST_SKIP() helper: call as `CKPT_REQUIRE_CORPUS();` at the top of a corpus test.
#define CKPT_REQUIRE_CORPUS()                                                            \
  do {                                                                                   \
    if (::ckpt::test::corpus_dir().empty()) GTEST_SKIP() << "../shared/corpus not found"; \
  } while (0)

void write_text(const std::filesystem::path& p, const std::string& text);
// The finding codes of a JSON report (or of one jsonl target record), in report order.
std::vector<std::string> codes_of(const json::Value& report);
std::string read_text(const std::filesystem::path& p);

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Run the built ckpt CLI with arguments (no shell); stdin is /dev/null.
CommandResult run_ckpt(const std::vector<std::string>& args,
                       const std::vector<std::string>& extra_env = {});
// Run any program (argv[0] looked up in PATH).
CommandResult run_program(const std::vector<std::string>& argv,
                          const std::vector<std::string>& extra_env = {},
                          const std::string& stdin_text = {});

}  // namespace ckpt::test
