// Renderers: one Report, five formats (text, json, jsonl, github, sarif).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/finding.h"

namespace ckpt {

struct Summary {
  uint64_t errors = 0, warnings = 0, infos = 0;
  uint64_t files = 0, tensors = 0, bytes = 0;  // bytes: of the safetensors files
  // Every file's size (text output only, so `ckpt fetch` and `ckpt verify` print the same
  // total for a snapshot); 0 = not counted. summary_for() fills it.
  uint64_t file_bytes = 0;
};

struct Report {
  std::string target;        // as given by the user
  std::string root;          // resolved model root (for text output)
  std::string file_prefix;   // prepended to finding files in github/sarif output ("" or "<dir>/")
  std::vector<Finding> findings;
  Summary summary;
  double elapsed_ms = 0;
};

Summary count_findings(const std::vector<Finding>& findings);
struct Checkpoint;
// count_findings() plus the checkpoint's file, tensor and byte totals.
Summary summary_for(const std::vector<Finding>& findings, const Checkpoint& ck);

// The version of the JSON report contract (docs/report.schema.json), in every json/jsonl output
// as "schema_version". Fields are only ever added; this changes only if one changed meaning.
inline constexpr int kReportSchemaVersion = 1;

std::string render_text(const Report& r, bool color);
std::string render_json(const Report& r);
// One finding object per line ({"record":"finding",...}), then one summary line.
std::string render_jsonl(const Report& r);
std::string render_github(const Report& r);

// Batch runs (`ckpt verify --cache` / `--targets`): one report per target, then the totals.
struct BatchSummary {
  std::string label;        // "--cache DIR" or "--targets FILE", the summary record's "target"
  uint64_t listed = 0;      // targets found before --shard
  uint64_t targets = 0;     // targets verified (this shard)
  uint64_t clean = 0, with_warnings = 0, with_errors = 0, unreadable = 0;
  std::string shard;        // "I/N", or empty
  Summary totals;           // summed over the targets
};
// One target as a one-line JSON object ({"record":"target", the report's members, "root"}).
std::string render_target_record(const Report& r);
// The closing jsonl line: {"record":"summary", ..., "summary": totals, "batch": {...}}.
std::string render_batch_summary_record(const BatchSummary& b);
// --format json of a batch: the totals, the batch counts and every target record in "targets".
std::string render_batch_json(const std::vector<std::string>& target_records, const BatchSummary& b);
std::string render_sarif(const Report& r);

}  // namespace ckpt
