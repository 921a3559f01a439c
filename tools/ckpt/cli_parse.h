// The one way every subcommand parses its arguments: --help prints and exits 0, a usage
// error prints CLI11's message and exits 2 (the CLI contract's usage code).
#pragma once
#include <optional>

#include <CLI/CLI.hpp>

namespace ckpt::cli {

// nullopt: parsed, go on; otherwise the exit code to return.
inline std::optional<int> parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return std::nullopt;
}

}  // namespace ckpt::cli
