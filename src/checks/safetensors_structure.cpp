// ST: safetensors structure, exactly per the format and the reference reader's rules:
// framing, header JSON, entries, dtype sizes, and the exact tiling of the data section.
#include <algorithm>
#include <array>
#include <map>

#include "checks/family.h"
#include "checks/util.h"
#include "io/checked.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 20> kCodes{{
    {"ST001", Severity::error, "file shorter than the 8-byte header length"},
    {"ST002", Severity::error, "header length above the 100,000,000-byte limit"},
    {"ST003", Severity::error, "header extends past the end of the file"},
    {"ST004", Severity::error, "header is not valid UTF-8"},
    {"ST005", Severity::error, "header is not valid JSON"},
    {"ST006", Severity::error, "header entry malformed (not an object, missing or mistyped fields)"},
    {"ST007", Severity::error, "duplicate key in the header"},
    {"ST008", Severity::error, "unknown dtype"},
    {"ST009", Severity::error, "tensor size overflows 64-bit arithmetic"},
    {"ST010", Severity::error, "data_offsets span differs from shape x dtype size"},
    {"ST011", Severity::error, "sub-byte dtype tensor does not fill whole bytes"},
    {"ST012", Severity::error, "gap in the data section (tensors not contiguous)"},
    {"ST013", Severity::error, "overlapping or reversed data_offsets"},
    {"ST014", Severity::error, "file truncated: tensors extend past the end of the file"},
    {"ST015", Severity::error, "trailing bytes after the last tensor"},
    {"ST016", Severity::error, "__metadata__ is not a map of strings to strings"},
    {"ST017", Severity::warning, "whitespace before the header's opening brace"},
    {"ST018", Severity::error, "file could not be read"},
    {"ST019", Severity::info, "header length not a multiple of 8 (tensor data unaligned)"},
    {"ST020", Severity::warning, "__metadata__ lacks a format transformers accepts"},
}};

const char* code_for(st::Rule r) {
  switch (r) {
    case st::Rule::HeaderTooSmall: return "ST001";
    case st::Rule::HeaderTooLarge: return "ST002";
    case st::Rule::HeaderPastEof: return "ST003";
    case st::Rule::HeaderNotUtf8: return "ST004";
    case st::Rule::HeaderNotJson: return "ST005";
    case st::Rule::HeaderSchema: return "ST006";
    case st::Rule::DuplicateKey: return "ST007";
    case st::Rule::UnknownDType: return "ST008";
    case st::Rule::MetadataNotStrings: return "ST016";
    case st::Rule::LeadingWhitespace: return "ST017";
    case st::Rule::ReadFailed: return "ST018";
    case st::Rule::Count_: break;
  }
  return "ST018";
}
static_assert(static_cast<int>(st::Rule::Count_) == 11, "map every reader rule to a code");

const char* hint_for(st::Rule r) {
  switch (r) {
    case st::Rule::HeaderTooSmall: return "the file is empty or cut off at the start; re-download it";
    case st::Rule::HeaderTooLarge: return "not a safetensors file, or its first 8 bytes are corrupt";
    case st::Rule::HeaderPastEof: return "the file is truncated inside its header (interrupted download), or not safetensors";
    case st::Rule::HeaderNotUtf8:
    case st::Rule::HeaderNotJson: return "the header bytes are corrupt; re-download or re-export the file";
    case st::Rule::HeaderSchema: return "the writer produced an invalid entry; re-export with a safetensors library";
    case st::Rule::DuplicateKey: return "parsers disagree on duplicate keys (Python keeps the last, others the first or reject); re-export";
    case st::Rule::UnknownDType: return "written by a newer or non-standard writer; loaders will refuse the file";
    case st::Rule::MetadataNotStrings: return "the reference reader rejects non-string metadata values; re-export with string values";
    case st::Rule::LeadingWhitespace: return "accepted by the safetensors crate since #686 (2026-04); older readers require '{' first";
    default: return "";
  }
}

constexpr size_t kMaxPerCode = 10;  // per file; the rest are counted in one line

void check_shard(const Shard& sh, FindingSink& out) {
  const st::Header& h = sh.header;
  for (const auto& p : h.problems) {
    Severity sev = p.rule == st::Rule::LeadingWhitespace ? Severity::warning : Severity::error;
    out.add(code_for(p.rule), sev, p.detail, sh.file, p.tensor, hint_for(p.rule));
  }
  if (!h.parsed) return;

  if (h.header_len % 8 != 0) {
    out.add("ST019", Severity::info,
            "header length " + std::to_string(h.header_len) + " is not a multiple of 8, so tensor data starts unaligned", sh.file,
            "", "the reference writer pads the header with spaces to 8 bytes; zero-copy loaders may have to copy");
  }
  bool has_metadata_problem = false;
  for (const auto& p : h.problems) has_metadata_problem |= p.rule == st::Rule::MetadataNotStrings;
  if (!h.metadata.empty() && !has_metadata_problem) {
    std::string format;
    for (const auto& [k, v] : h.metadata)
      if (k == "format") format = v;
    if (format != "pt" && format != "tf" && format != "flax" && format != "mlx") {
      out.add("ST020", Severity::warning,
              format.empty() ? "__metadata__ has no \"format\" key" : "__metadata__ format is \"" + format + "\"",
              sh.file, "",
              "transformers refuses safetensors files whose metadata lacks format pt/tf/flax/mlx "
              "(\"does not contain the valid metadata\"); vLLM and mlx do not check. Add {\"format\": \"pt\"}.");
    }
  }

  // The reference sorts entries by offsets, then demands exact tiling from 0.
  std::vector<const st::TensorEntry*> order;
  order.reserve(h.tensors.size());
  for (const auto& t : h.tensors) order.push_back(&t);
  auto by_offsets = [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  };
  // Writers usually list entries in data order already; checking that is one linear pass.
  if (!std::is_sorted(order.begin(), order.end(), by_offsets)) std::sort(order.begin(), order.end(), by_offsets);
  std::map<std::string, size_t> emitted;
  auto add = [&](const char* code, std::string msg, std::string_view tensor, std::string hint) {
    if (++emitted[code] > kMaxPerCode) return;
    out.add(code, Severity::error, std::move(msg), sh.file, tensor, std::move(hint));
  };
  uint64_t expected = 0;
  const st::TensorEntry* prev = nullptr;
  for (const auto* t : order) {
    if (t->end < t->begin) {
      add("ST013", "data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) + "] end before they begin",
          t->name, "corrupt header");
    } else if (t->begin < expected) {
      add("ST013",
          "data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) + "] overlap " +
              (prev ? std::string(prev->name) + " [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) + "]"
                    : std::string("the previous tensor")),
          t->name, "two tensors share bytes: a hand-built or malicious header; one of them reads the other's data");
    } else if (t->begin > expected) {
      add("ST012",
          "data starts at " + std::to_string(t->begin) + " but the previous tensor" +
              (prev ? " (" + std::string(prev->name) + ")" : std::string()) + " ends at " + std::to_string(expected) + ": " +
              std::to_string(t->begin - expected) + " unaccounted bytes",
          t->name, "the format forbids holes in the data section (they can hide a second payload)");
    }
    if (t->dtype != st::DType::Unknown) {
      uint32_t bits = st::dtype_bits(t->dtype);
      uint64_t numel = 1;
      bool overflow = false;
      for (uint64_t d : t->shape) {
        auto m = io::checked_mul(numel, d);
        if (!m) {
          overflow = true;
          break;
        }
        numel = *m;
      }
      auto total_bits = overflow ? std::nullopt : io::checked_mul(numel, bits);
      if (!total_bits) {
        add("ST009", "shape " + shape_str(t->shape) + " x " + std::string(st::dtype_name(t->dtype)) +
                         " overflows 64-bit size arithmetic",
            t->name, "a corrupt or hostile shape; readers without checked arithmetic overflow their buffers here");
      } else if (*total_bits % 8 != 0) {
        add("ST011", "shape " + shape_str(t->shape) + " x " + std::to_string(bits) + "-bit " +
                         std::string(st::dtype_name(t->dtype)) + " is " + std::to_string(*total_bits) +
                         " bits, not a whole number of bytes",
            t->name, "sub-byte dtypes must fill whole bytes (MisalignedSlice in the reference)");
      } else if (t->end >= t->begin && t->end - t->begin != *total_bits / 8) {
        add("ST010", "data_offsets [" + std::to_string(t->begin) + ", " + std::to_string(t->end) + "] hold " +
                         std::to_string(t->end - t->begin) + " bytes; shape " + shape_str(t->shape) + " x " +
                         std::string(st::dtype_name(t->dtype)) + " needs " + std::to_string(*total_bits / 8),
            t->name, "header and data disagree: readers that trust the shape read out of bounds");
      }
    }
    expected = std::max(expected, t->end);
    prev = t;
  }
  for (const auto& [code, n] : emitted)
    if (n > kMaxPerCode)
      out.add(code, Severity::error, std::to_string(n - kMaxPerCode) + " more " + code + " problems in this file not listed",
              sh.file, "", "");

  // Coverage: the data section must end exactly where the last tensor ends.
  uint64_t data_len = h.file_size - h.data_start();
  if (expected > data_len) {
    std::vector<std::string> cut;
    for (const auto* t : order)
      if (t->end > data_len) cut.emplace_back(t->name);
    out.add("ST014", Severity::error,
            "file is " + std::to_string(h.file_size) + " bytes but its header needs " +
                std::to_string(h.data_start() + expected) + ": " + bytes_str(expected - data_len) + " missing; " +
                std::to_string(cut.size()) + " of " + std::to_string(h.tensors.size()) +
                " tensors cut: " + list_names(cut),
            sh.file, cut.size() == 1 ? cut[0] : std::string(),
            "an interrupted or truncated download; loaders read garbage or crash. Re-download the file.");
  } else if (expected < data_len) {
    out.add("ST015", Severity::error,
            std::to_string(data_len - expected) + " bytes follow the last tensor (data ends at " +
                std::to_string(h.data_start() + expected) + ", file is " + std::to_string(h.file_size) + " bytes)",
            sh.file, "",
            "the format forbids trailing data (it could be a polyglot payload); the reference reader rejects the file");
  }
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  for (const auto& sh : ck.shards)
    if (sh.format == Format::safetensors) check_shard(sh, out);  // other containers have their own family
}

}  // namespace

const FamilyDef kSafetensorsFamily{"ST", kCodes, run};

}  // namespace ckpt::checks
