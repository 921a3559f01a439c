// ckpt engines [NAME[@VERSION]...] [--format text|json]: the engine profiles `ckpt verify
// --engine` judges with — template dialect, loading strictness, quantization schemes, config
// keys, tokenizer models — each fact with its source.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "ckpt/engines.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_engines(int argc, char** argv) {
  CLI::App app{"Print the engine profiles --engine selects (all of them by default). Exit 2 on an unknown engine."};
  app.name(argv[0]);
  std::vector<std::string> names;
  std::string format = "text";
  app.add_option("ENGINE", names, "engines to show: NAME or NAME@VERSION (comma-separated or repeated)");
  app.add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  if (auto code = parse_args(app, argc, argv)) return *code;
  std::string error;
  auto sel = engines::parse_selection(names, &error);
  if (!sel) {
    std::fprintf(stderr, "ckpt engines: %s\n", error.c_str());
    return 2;
  }
  const auto& profiles = sel->portable() ? engines::all_profiles() : sel->engines;
  std::string out = format == "json" ? engines::render_profiles_json(profiles) : engines::render_profiles_text(profiles);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("engines", "print the engine profiles --engine judges with (dialect, loading, schemes, config)",
                         run_engines);

}  // namespace ckpt::cli
