// ckpt diff A B: exactly what changed between two checkpoints, from the Checkpoint model of each:
// files (by the cache's blob names when both are cache snapshots, else by size, and with --deep
// by SHA-256), config keys (JSON-pointer paths), chat templates (unified, line-numbered hunks),
// tokenizer (tokens added / removed / renumbered, special tokens), tensors (added, removed,
// reshaped, re-typed, moved between shards; with --deep, content).
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"

namespace ckpt::diff {

// ---- line diff ----------------------------------------------------------------------------

struct HunkLine {
  char op = ' ';        // ' ' context, '-' only in A, '+' only in B
  size_t a_line = 0;    // 1-based line in A (0 for '+')
  size_t b_line = 0;    // 1-based line in B (0 for '-')
  std::string text;
};
struct Hunk {
  size_t a_start = 0, a_count = 0, b_start = 0, b_count = 0;
  std::vector<HunkLine> lines;
};
// Myers' diff of the lines of two texts, grouped into hunks with `context` lines around changes.
std::vector<Hunk> line_diff(std::string_view a, std::string_view b, size_t context = 3);
// "--- a\n+++ b\n@@ -l,n +l,n @@\n" then one line per HunkLine: both line numbers, op, text.
std::string render_hunks(const std::vector<Hunk>& hunks, std::string_view name_a, std::string_view name_b);

// ---- the diff model -----------------------------------------------------------------------

enum class Change : uint8_t { Added, Removed, Changed };
std::string_view change_name(Change c);

struct FileDiff {
  std::string path;
  Change change = Change::Changed;
  uint64_t size_a = 0, size_b = 0;
  std::string blob_a, blob_b;      // cache blob names (etags) when the entry is a cache symlink
  std::string sha_a, sha_b;        // with --deep (or for small side files compared by content)
  std::string basis;               // how the change was seen: "blob", "size", "sha256", "content"
};

struct ValueDiff {
  std::string file;                // "config.json"
  std::string path;                // JSON-pointer-like: "/text_config/num_hidden_layers"
  Change change = Change::Changed;
  std::string a, b;                // compact JSON of each side ("" when absent)
};

struct TemplateDiff {
  std::string name;                // "default", "tool_use", ...
  Change change = Change::Changed;
  std::string origin_a, origin_b;  // where each side's template came from
  std::vector<Hunk> hunks;
};

struct TokenChange {
  std::string token;
  int64_t id_a = -1, id_b = -1;
};
struct SpecialChange {
  std::string name;                // "eos_token", "generation_config.eos_token_id", "<|im_end|>.special"
  std::string a, b;
};
struct TokenizerDiff {
  bool compared = false;           // both sides have a tokenizer.json that parsed
  std::string model_a, model_b;    // BPE, Unigram, ...
  uint64_t vocab_a = 0, vocab_b = 0;  // distinct tokens (vocabulary + added tokens)
  uint64_t merges_a = 0, merges_b = 0;
  std::vector<TokenChange> added, removed, renumbered;  // complete lists (renderers cap them)
  std::vector<SpecialChange> special;
};

struct TensorInfo {
  std::string dtype, file;
  std::vector<uint64_t> shape;
};
struct TensorDiff {
  std::string name;
  enum Kind : uint8_t { Added, Removed, Reshaped, Retyped, Moved, ContentChanged } kind = Added;
  TensorInfo a, b;
};
std::string_view tensor_change_name(TensorDiff::Kind k);

// With --deep: the values of one weight on both sides, each as the model computes with it (a
// quantized module dequantized), compared element by element.
struct NumericDiff {
  std::string name;                   // "<module>.weight" (the float twin's name) or as stored
  std::string encoding_a, encoding_b; // "BF16", "MLX affine 4-bit g64", "GGUF Q4_K", ...
  std::vector<uint64_t> shape;        // logical shape
  uint64_t elements = 0;              // compared (finite on both sides)
  uint64_t nonfinite = 0;             // NaN or Inf on either side: left out of the sums
  double max_abs = 0;                 // max |b - a|
  uint64_t max_abs_at = 0;            // its flat element index
  double rel_l2 = 0;                  // ||b - a|| / ||a|| (0 when both are all zero)
  std::optional<double> cosine;       // a.b / (|a| |b|); unset when a side is all zero
  double a_rms = 0, b_rms = 0;        // sqrt(mean(x^2)) of each side
  std::string error;                  // set when the values could not be compared
};

struct Side {
  std::string target, root, repo, commit;  // repo and commit when a cache snapshot
  uint64_t files = 0, tensors = 0;
};

struct Diff {
  Side a, b;
  std::vector<FileDiff> files;
  uint64_t files_unchanged = 0;
  std::vector<std::string> files_not_compared;  // equal size, content not read (weights without --deep)
  // The weights: shard files identical by blob name, by SHA-256, or (without --deep) by size
  // and header.
  bool weights_identical = true;
  std::string weights_basis;        // "blobs", "sha256", "size and header", "" (no shards)
  uint64_t weight_files = 0;
  std::vector<ValueDiff> values;
  std::vector<TemplateDiff> templates;
  TokenizerDiff tokenizer;
  std::vector<TensorDiff> tensors;
  uint64_t tensors_unchanged = 0;
  std::vector<std::string> notes;
  // --deep: weights compared by value (worst relative L2 error first), and those that were not
  // (name, why: a layout ckpt does not dequantize, shapes that differ, ...).
  bool numeric_compared = false;
  std::vector<NumericDiff> numeric;
  std::vector<std::pair<std::string, std::string>> numeric_skipped;
  uint64_t numeric_identical = 0;     // compared weights whose values are equal

  bool identical() const;
};

struct Options {
  bool deep = false;     // SHA-256 of weight files of equal size, and of tensors inside changed ones
  size_t context = 3;    // template diff context lines
  unsigned threads = 0;  // hashing threads (0: hardware concurrency)
  // For a progress display (--deep): bytes to hash, raised as work is planned, and hashed.
  std::atomic<uint64_t>* progress_total = nullptr;
  std::atomic<uint64_t>* progress_done = nullptr;
};

Diff diff(const Checkpoint& a, const Checkpoint& b, const Options& opts = {});

// The --deep value comparison (numeric.cpp): every weight both sides hold whose stored form
// differs (another encoding, or tensors named in `changed`) is decoded and compared.
void compare_values(const Checkpoint& a, const Checkpoint& b, const std::set<std::string>& changed,
                    const Options& opts, Diff& d);

std::string render_text(const Diff& d);
// "[4096, 11008]": how every part of diff writes a shape.
std::string shape_text(const std::vector<uint64_t>& shape);
std::string render_json(const Diff& d);

}  // namespace ckpt::diff
