// ckpt smoke: judge a checkpoint's numbers with one causal forward pass on the CPU.
//
// Header checks prove shapes and dtypes; they cannot see a square projection stored
// transposed, BF16 bytes labelled F16, gate and up swapped, or scales shifted by a group. One
// forward pass over a known text can: a model that computes garbage predicts the text badly.
// The pass reads weights through the same dequantization layer `ckpt diff --deep` uses (every
// scheme it decodes), one decoder layer at a time, so memory stays at one layer's weights plus
// the activations of the text.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/finding.h"

namespace ckpt::smoke {

// The built-in reference text: plain English prose and a little code.
const std::string& reference_text();

struct LayerStats {
  std::string name;       // "embed", "layer 3", "final norm"
  double rms = 0;         // of the hidden state after this stage, over every position and dim
  double max_abs = 0;
  bool finite = true;
  std::vector<double> position_rms;  // RMS of each position's hidden vector (baselines compare them)
};

// What a known-good run of this model scored on the same tokens (docs/smoke.md: format
// "ckpt-smoke-baseline/1"). A model that memorised a text, or a conversion compared with its
// source, is judged against it: the perplexity may not rise by more than the tolerance, and the
// first stage whose per-position hidden-state RMS departs from it names the broken layer.
struct Baseline {
  std::string file;                // where it was read from
  std::string recorded_by;         // "ckpt smoke", "tools/smoke/train_tiny.py (torch)", ...
  std::vector<uint32_t> tokens;
  double nll_mean = 0;             // mean NLL of tokens[1..] (nats)
  double top1_accuracy = 0;
  std::vector<LayerStats> stages;  // by name: "embed", "layer N", "final norm"
};

struct Options {
  unsigned threads = 0;     // 0 = hardware concurrency (BLAS and dequantization)
  uint32_t max_tokens = 256;  // the text is cut to this many tokens (after specials)
  // When the first pass is not ok, re-run it with each decoder layer skipped in turn (all in
  // one further pass over the weights) to name the layer whose removal helps most.
  bool locate = true;
  const Baseline* baseline = nullptr;  // judge against this known-good run when its tokens match
  bool model_baseline = true;          // else read the model directory's own kBaselineFile, if any
  double baseline_tolerance = 0.02;    // allowed rise of the mean NLL over the baseline's (nats)
  double stage_tolerance = 1e-3;      // allowed departure of a stage's per-position RMS from the baseline's (fraction)
};

enum class Verdict : uint8_t { ok, suspect, garbage, not_run };
std::string_view verdict_name(Verdict v);

// What skipping one decoder layer does to the text's perplexity (the located pass).
struct SkipResult {
  int32_t layer = -1;
  double perplexity = 0;
};

struct Result {
  Verdict verdict = Verdict::not_run;
  std::string family;            // the forward-pass family ("llama", "gemma2", "qwen3_moe", ...)
  std::string tokenizer;         // file and kind the text was encoded with
  std::vector<uint32_t> tokens;  // the encoded text
  std::vector<LayerStats> layers;  // embed, each decoder layer, final norm
  double perplexity = 0;         // exp(mean NLL of tokens[1..] given their prefix)
  double uniform_perplexity = 0; // the vocabulary size: what a model that knows nothing scores
  double top1_accuracy = 0;      // fraction of next tokens predicted as the argmax
  bool logits_finite = true;
  int32_t first_broken_layer = -1;   // first decoder layer whose statistics break (-1: none)
  std::string first_broken;          // its stage name ("embed", "layer 3", "lm_head")
  std::vector<SkipResult> skips;     // the located pass, when run
  int32_t located_layer = -1;        // the layer whose removal restores the most (-1: none)
  std::string reason;            // one line: why this verdict
  double seconds = 0;            // wall time of the forward pass(es)
  uint64_t weight_bytes_read = 0;
  std::vector<Finding> findings; // SM family
  // Against a baseline (when one was given and its tokens match):
  std::string baseline_file;
  double baseline_perplexity = 0;
  std::vector<double> stage_deviation;  // per stage: max over positions of |rms / baseline rms - 1|
};

// Reads a baseline document; nullopt with `error` (file:line:column, what was expected) when
// it is not one.
std::optional<Baseline> read_baseline(std::string_view text, const std::string& file, std::string& error);
// The baseline document of a run (what `ckpt smoke --record-baseline` writes).
std::string render_baseline(const Result& r);
// The file a model directory's own baseline is read from when present.
inline constexpr const char* kBaselineFile = "ckpt-smoke-baseline.json";

// Runs the smoke pass over `text` (the reference text when empty). Never throws on bad input:
// what stops the pass is a finding (the verdict is then not_run).
Result run(const Checkpoint& ck, const std::string& text, const Options& opts);

// The same pass over token ids given directly (tests, or a text encoded elsewhere).
Result run_tokens(const Checkpoint& ck, const std::vector<uint32_t>& tokens, const Options& opts,
                  std::vector<float>* logits = nullptr);

// Renderers: a table for people, one JSON object for programs (schema: docs/smoke.md).
std::string render_text(const Result& r, const std::string& target);
std::string render_json(const Result& r, const std::string& target);

}  // namespace ckpt::smoke
