// ckpt verify TARGET: header-only proof that a checkpoint is whole and consistent; --deep adds the
// data pass (HS family: hashes against recorded etags, NaN/Inf/zero scans).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>

#include "ckpt/checks.h"
#include "ckpt/checkpoint.h"
#include "ckpt/engines.h"
#include "ckpt/report.h"
#include "ckpt/timings.h"
#include "cli_parse.h"
#include "progress.h"
#include "subcommand.h"
#include "verify_batch.h"
#include "verify_smoke.h"
#include "verify_target.h"

namespace ckpt::cli {

namespace {

std::vector<std::string> split_codes(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    size_t start = 0;
    while (start <= a.size()) {
      size_t comma = a.find(',', start);
      std::string item = a.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      while (!item.empty() && item.back() == ' ') item.pop_back();
      while (!item.empty() && item.front() == ' ') item.erase(0, 1);
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

int run_verify(int argc, char** argv) {
  CLI::App app{"Verify a checkpoint from its headers: files and cache state, safetensors structure, shard index, "
               "and every check family ckpt has (--deep also reads the tensor data). "
               "Exit 0: no error; 1: findings; 2: usage or unreadable target."};
  app.name(argv[0]);
  std::string target, format = "text", cache_dir;
  bool deep = false, strict = false, quiet = false, smoke = false;
  double progress_interval = 5;
  std::vector<std::string> ignore, select, engine_args;
  app.add_option("TARGET", target, "model directory, HF cache snapshot directory, or org/name[@revision] in the local HF cache");
  BatchArgs batch;
  app.add_option("--cache", batch.cache_root,
                 "verify every snapshot of every model repo in a Hugging Face cache, one report per target "
                 "(DIR default: --cache-dir, else the cache an org/name TARGET resolves in)")
      ->expected(0, 1);
  app.add_option("--targets", batch.targets_file,
                 "verify the targets listed in FILE, one per line (directory, snapshot, org/name[@rev]; '#' "
                 "comments; - reads stdin)");
  app.add_option("--jobs,-j", batch.jobs, "batch: targets verified at once (default: the CPU count)")
      ->check(CLI::Range(1u, 256u));
  app.add_option("--shard", batch.shard, "batch: verify only shard I of N (0 <= I < N) of the targets, chosen by "
                                         "a hash of each target's name, so N machines split the work");
  app.add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json", "jsonl", "github", "sarif"}));
  app.add_flag("--deep", deep,
               "also read every byte of tensor data (HS family): content hashes against the cache's etags, "
               "NaN/Inf/all-zero scans of float tensors; read-only, parallel, one pass per file");
  app.add_flag("--strict", strict, "warnings also fail (exit 1)");
  app.add_flag("--smoke", smoke, "when the header checks find no error, also run `ckpt smoke` (one CPU forward pass over "
               "the built-in reference text) and add its findings (family SM) to the report");
  // One value per occurrence (repeatable, comma-separated): TARGET is optional since the batch
  // modes, so a multi-value option would swallow the target in `--select HS DIR`.
  app.add_option("--ignore", ignore, "codes or prefixes to drop, comma-separated (e.g. ST017,IX012)")->allow_extra_args(false);
  app.add_option("--select", select, "only report these codes or prefixes, comma-separated (e.g. ST,IX)")->allow_extra_args(false);
  app.add_option("--engine", engine_args,
                 "judge for these engines (repeatable, comma-separated; NAME or NAME@VERSION, see `ckpt engines`): "
                 "what breaks them is an error, findings for other engines only are dropped. Without it: the "
                 "portable verdict")
      ->allow_extra_args(false);
  app.add_option("--cache-dir", cache_dir,
                 "hub cache an org/name TARGET is looked up in (default: HF_HUB_CACHE, $HF_HOME/hub, "
                 "~/.cache/huggingface/hub)");
  app.add_flag("--quiet,-q", quiet, "no progress output");
  app.add_option("--progress-interval", progress_interval,
                 "seconds between plain progress lines of --deep when stderr is not a terminal (or CI is set)");
  if (auto code = parse_args(app, argc, argv)) return *code;
  batch.cache_given = app.count("--cache") > 0;
  const bool batch_mode = batch.cache_given || !batch.targets_file.empty();
  if (batch_mode && !target.empty()) {
    std::fprintf(stderr, "ckpt verify: TARGET and --cache/--targets exclude each other\n");
    return 2;
  }
  if (batch.cache_given && !batch.targets_file.empty()) {
    std::fprintf(stderr, "ckpt verify: --cache and --targets exclude each other\n");
    return 2;
  }
  if (!batch_mode && target.empty()) {
    std::fprintf(stderr, "ckpt verify: a TARGET is required (or --cache / --targets FILE); see --help\n");
    return 2;
  }
  if (batch_mode && smoke) {
    std::fprintf(stderr, "ckpt verify: --smoke applies to a single TARGET (run ckpt smoke per target)\n");
    return 2;
  }
  if (!batch_mode && (app.count("--jobs") || !batch.shard.empty())) {
    std::fprintf(stderr, "ckpt verify: --jobs and --shard apply to --cache and --targets only\n");
    return 2;
  }
  // The loader finds the cache as every hub client does, through HF_HUB_CACHE.
  if (!cache_dir.empty()) setenv("HF_HUB_CACHE", cache_dir.c_str(), 1);
  VerifySettings settings;
  settings.deep = deep;
  settings.strict = strict;
  settings.ignore_codes = split_codes(ignore);
  settings.select_codes = split_codes(select);
  for (const auto& c : settings.ignore_codes)
    if (c.size() < 2) {
      std::fprintf(stderr, "ckpt verify: --ignore: '%s' is not a code or family prefix\n", c.c_str());
      return 2;
    }

  std::string engine_error;
  auto selection = engines::parse_selection(engine_args, &engine_error);
  if (!selection) {
    std::fprintf(stderr, "ckpt verify: --engine: %s\n", engine_error.c_str());
    return 2;
  }
  auto gguf_default = engines::parse_selection({"llama.cpp"}, &engine_error);
  settings.selection = &*selection;
  settings.engines_given = !engine_args.empty();
  settings.gguf_default = gguf_default ? &*gguf_default : nullptr;
  timings::mark("cli: parse arguments");

  if (batch_mode) {
    batch.format = format;
    batch.quiet = quiet;
    return run_verify_batch(batch, settings);
  }

  DeepProgress deep_progress;
  TargetResult result;
  {
    std::optional<ByteProgress> bar;
    if (deep) bar.emplace("verify --deep " + target, deep_progress.done, deep_progress.total, quiet, progress_interval);
    result = verify_target(target, settings, &deep_progress, /*keep_model=*/true);
  }
  if (!result.load_error.empty()) {
    std::fprintf(stderr, "ckpt verify: %s%s\n", result.load_error.c_str(),
                 cache_dir.empty() && looks_like_repo_id(target) && !std::filesystem::exists(target)
                     ? "; --cache-dir DIR names the cache directly"
                     : "");
    return 2;
  }
  if (smoke) {
    add_smoke_findings(result.report, settings);
    timings::mark("smoke pass (ckpt-smoke)");
  }
  timings::mark("checks: sort findings");
  const Report& report = result.report;

  std::string text;
  if (format == "json") text = render_json(report);
  else if (format == "jsonl") text = render_jsonl(report);
  else if (format == "github") text = render_github(report);
  else if (format == "sarif") text = render_sarif(report);
  else {
    const char* no_color = std::getenv("NO_COLOR");
    bool color = isatty(STDOUT_FILENO) && !(no_color && *no_color);
    text = render_text(report, color);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  timings::mark("render + write");
  timings::report();
  return result.failed() ? 1 : 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("verify", "prove a checkpoint is whole, consistent and loadable (header-only; --deep reads the data)", run_verify);

}  // namespace ckpt::cli
