// ckpt smoke TARGET: one causal forward pass on the CPU over a known text, to judge the numbers
// no header check can see (a transposed square projection, BF16 bytes labelled F16, gate and up
// swapped). Built into the sibling executable ckpt-smoke (BLAS stays out of `ckpt verify`).
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "ckpt/smoke.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

constexpr uint64_t kMaxTextBytes = 16u << 20;  // a smoke text is a few KB; refuse to slurp a model file by mistake

bool read_small_file(const std::string& path, std::string& out, std::string& err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = path + ": cannot be opened";
    return false;
  }
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0 || uint64_t(size) > kMaxTextBytes) {
    err = path + ": " + (size < 0 ? std::string("cannot be read") : "larger than 16 MiB; a smoke text is a few KB");
    return false;
  }
  in.seekg(0);
  out.assign(size_t(size), '\0');
  if (!in.read(out.data(), size)) {
    err = path + ": read failed";
    return false;
  }
  return true;
}

// A JSON list of ids, or an object whose "ids" member is one (what tools/smoke/train_tiny.py writes).
bool read_token_ids(const std::string& path, std::vector<uint32_t>& ids, std::string& err) {
  std::string text;
  if (!read_small_file(path, text, err)) return false;
  auto parsed = json::parse(text);
  if (!parsed.ok()) {
    err = path + ":" + std::to_string(parsed.error->line) + ":" + std::to_string(parsed.error->column) + ": " + parsed.error->message;
    return false;
  }
  const json::Value* list = &parsed.value;
  if (parsed.value.is_object()) list = parsed.value.find("ids");
  if (!list || !list->is_array()) {
    err = path + ": expected a JSON list of token ids, or an object with an \"ids\" list";
    return false;
  }
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    const auto& v = list->as_array()[i];
    if (!v.is_int() || v.as_int() < 0 || v.as_int() > int64_t(UINT32_MAX)) {
      err = path + ": ids[" + std::to_string(i) + "] is not a token id (an integer from 0 to 4294967295)";
      return false;
    }
    ids.push_back(uint32_t(v.as_int()));
  }
  return true;
}

int run_smoke(int argc, char** argv) {
  CLI::App app{"Run one causal forward pass on the CPU over a reference text (built in, or --text) straight from the "
               "checkpoint's files, one layer's weights at a time, and judge the numbers: per-layer hidden-state RMS "
               "and max, the text's perplexity and top-1 next-token accuracy, and a verdict (ok, suspect, garbage) "
               "naming the first layer that breaks. Exit 0: ok; 1: suspect or garbage; 2: usage, unreadable target, "
               "or the pass could not run (an unsupported family or scheme)."};
  app.name(argv[0]);
  std::string target, text_file, ids_file, format = "text";
  smoke::Options o;
  app.add_option("TARGET", target, "model directory, HF cache snapshot directory, or org/name[@revision] in the local HF cache")
      ->required();
  app.add_option("--text", text_file, "a UTF-8 text file to run instead of the built-in reference text");
  app.add_option("--token-ids", ids_file, "token ids to run instead of encoding a text (a JSON list, or an object with an \"ids\" list)")
      ->excludes("--text");
  app.add_option("--tokens", o.max_tokens, "run at most this many tokens of the text (default 256; 0 = all)");
  app.add_option("--threads", o.threads, "threads for BLAS and dequantization (default: all cores)");
  std::string baseline_file, record_file;
  app.add_option("--baseline", baseline_file, "judge against this known-good run (a file --record-baseline wrote): the perplexity may "
                 "not rise past --tolerance, and the first stage that departs from it names the broken layer "
                 "(default: the model directory's own ckpt-smoke-baseline.json, if any)");
  app.add_option("--stage-tolerance", o.stage_tolerance,
                 "allowed departure of a stage's per-position hidden-state RMS from the baseline's, as a fraction (default "
                 "0.001; a clean copy reproduces it to ~1e-6; a large value such as 1e9 judges by perplexity alone, e.g. a "
                 "re-quantized copy against the float model's baseline)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tolerance", o.baseline_tolerance, "allowed rise of the mean NLL over the baseline's, in nats per token (default 0.02)")
      ->check(CLI::NonNegativeNumber);
  bool no_baseline = false;
  app.add_flag("--no-baseline", no_baseline, "ignore the model directory's own baseline")->excludes("--baseline");
  app.add_option("--record-baseline", record_file, "write this run as a baseline to FILE (run it on the known-good model)");
  bool no_locate = false;
  app.add_flag("--no-locate", no_locate, "when the verdict is not ok, do not re-run with each layer left out to name the broken one");
  app.add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  if (auto code = parse_args(app, argc, argv)) return *code;
  o.locate = !no_locate;
  o.model_baseline = !no_baseline;

  std::string text, err;
  std::vector<uint32_t> ids;
  if (!text_file.empty() && !read_small_file(text_file, text, err)) {
    std::fprintf(stderr, "ckpt smoke: --text %s\n", err.c_str());
    return 2;
  }
  if (!ids_file.empty() && !read_token_ids(ids_file, ids, err)) {
    std::fprintf(stderr, "ckpt smoke: --token-ids %s\n", err.c_str());
    return 2;
  }
  std::optional<smoke::Baseline> baseline;
  if (!baseline_file.empty()) {
    std::string bytes;
    if (!read_small_file(baseline_file, bytes, err) || !(baseline = smoke::read_baseline(bytes, baseline_file, err))) {
      std::fprintf(stderr, "ckpt smoke: --baseline %s\n", err.c_str());
      return 2;
    }
    o.baseline = &*baseline;
  }
  // Deliberately never freed (as in verify): the process exits right after rendering.
  auto* loaded = new LoadResult(load_checkpoint(target));
  if (loaded->error) {
    std::fprintf(stderr, "ckpt smoke: %s\n", loaded->error->message.c_str());
    return 2;
  }
  const Checkpoint& ck = *loaded->checkpoint;
  smoke::Result r = ids_file.empty() ? smoke::run(ck, text, o) : smoke::run_tokens(ck, ids, o);
  std::string out = format == "json" ? smoke::render_json(r, target) : smoke::render_text(r, target);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!record_file.empty()) {
    if (r.layers.empty()) {
      std::fprintf(stderr, "ckpt smoke: --record-baseline: the pass did not run; nothing recorded\n");
      return 2;
    }
    std::ofstream f(record_file, std::ios::binary | std::ios::trunc);
    const std::string doc = smoke::render_baseline(r);
    if (!f.write(doc.data(), std::streamsize(doc.size())) || !f.flush()) {
      std::fprintf(stderr, "ckpt smoke: --record-baseline %s: write failed\n", record_file.c_str());
      return 2;
    }
    std::fprintf(stderr, "ckpt smoke: baseline of %zu tokens written to %s\n", r.tokens.size(), record_file.c_str());
  }
  switch (r.verdict) {
    case smoke::Verdict::ok: return 0;
    case smoke::Verdict::suspect:
    case smoke::Verdict::garbage: return 1;
    case smoke::Verdict::not_run: return 2;
  }
  return 2;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("smoke", "judge a checkpoint's numbers with one CPU forward pass over a reference text",
                         run_smoke);

}  // namespace ckpt::cli
