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

struct Options {
  unsigned threads = 0;     // 0 = hardware concurrency (BLAS and dequantization)
  uint32_t max_tokens = 256;  // the text is cut to this many tokens (after specials)
  // When the first pass is not ok, re-run it with each decoder layer skipped in turn (all in
  // one further pass over the weights) to name the layer whose removal helps most.
  bool locate = true;
};

enum class Verdict : uint8_t { ok, suspect, garbage, not_run };
std::string_view verdict_name(Verdict v);

struct LayerStats {
  std::string name;       // "embed", "layer 3", "final norm"
  double rms = 0;         // of the hidden state after this stage, over every position and dim
  double max_abs = 0;
  bool finite = true;
};

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
};

// Runs the smoke pass over `text` (the reference text when empty). Never throws on bad input:
// what stops the pass is a finding (the verdict is then not_run).
Result run(const Checkpoint& ck, const std::string& text, const Options& opts);

}  // namespace ckpt::smoke
