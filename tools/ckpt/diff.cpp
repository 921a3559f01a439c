// ckpt diff A B: exactly what changed between two checkpoints. Exit 0 identical, 1 different,
// 2 usage or unreadable target, like diff(1).
#include <atomic>
#include <cstdio>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/timings.h"
#include "inspect/diff.h"
#include "cli_parse.h"
#include "progress.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_diff(int argc, char** argv) {
  CLI::App app{"Show exactly what changed between two checkpoints: files (by the cache's blob names when both "
               "are cache snapshots, else by size; --deep adds SHA-256), config keys, the chat template as a "
               "unified line-numbered diff, tokenizer tokens and special tokens, and tensors (added, removed, "
               "reshaped, re-typed, moved between shards). Exit 0: identical; 1: different; 2: usage or "
               "unreadable target."};
  app.name(argv[0]);
  std::string a, b, format = "text";
  diff::Options o;
  app.add_option("A", a, "model directory, HF cache snapshot directory, or org/name[@revision]")->required();
  app.add_option("B", b, "the other one")->required();
  app.add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  app.add_flag("--deep", o.deep,
               "read the weights: SHA-256 of weight files of equal size, and of each tensor inside files that differ");
  app.add_option("--context", o.context, "context lines around template changes (default 3)");
  bool quiet = false;
  double progress_interval = 5;
  app.add_flag("--quiet,-q", quiet, "no progress output");
  app.add_option("--progress-interval", progress_interval,
                 "seconds between plain progress lines of --deep when stderr is not a terminal (or CI is set)");
  if (auto code = parse_args(app, argc, argv)) return *code;
  timings::mark("cli: parse arguments");
  // both sides load concurrently; deliberately never freed (the process exits after rendering)
  LoadResult *la = nullptr, *lb = nullptr;
  {
    std::thread t([&] { lb = new LoadResult(load_checkpoint(b)); });
    la = new LoadResult(load_checkpoint(a));
    t.join();
  }
  for (auto [name, r] : {std::pair{&a, la}, std::pair{&b, lb}})
    if (r->error) {
      std::fprintf(stderr, "ckpt diff: %s\n", r->error->message.c_str());
      return 2;
    }
  timings::mark("diff: load both");
  std::atomic<uint64_t> total{0}, done{0};
  o.progress_total = &total;
  o.progress_done = &done;
  std::optional<ByteProgress> bar;
  if (o.deep) bar.emplace("diff --deep", done, total, quiet, progress_interval);
  diff::Diff d = diff::diff(*la->checkpoint, *lb->checkpoint, o);
  if (bar) bar->stop();
  timings::mark("diff: compare");
  std::string text = format == "json" ? diff::render_json(d) : diff::render_text(d);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  timings::mark("render + write");
  timings::report();
  return d.identical() ? 0 : 1;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("diff", "what changed between two checkpoints: files, config, template, tokenizer, tensors",
                         run_diff);

}  // namespace ckpt::cli
