#include <cstdio>
#include <map>
#include <set>

#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "ckpt/report.h"

namespace ckpt {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::info: return "info";
    case Severity::warning: return "warning";
    case Severity::error: return "error";
  }
  return "error";
}

Summary count_findings(const std::vector<Finding>& findings) {
  Summary s;
  for (const auto& f : findings) {
    if (f.severity == Severity::error) ++s.errors;
    else if (f.severity == Severity::warning) ++s.warnings;
    else ++s.infos;
  }
  return s;
}

Summary summary_for(const std::vector<Finding>& findings, const Checkpoint& ck) {
  Summary s = count_findings(findings);
  s.files = ck.files.size();
  s.tensors = ck.total_tensors();
  s.bytes = ck.total_bytes();
  for (const auto& f : ck.files) s.file_bytes += f.size;
  return s;
}

// " (mlx-lm, swiftlm)" for a finding that applies to some engines only; "" otherwise.
static std::string engines_suffix(const Finding& f) {
  if (f.engines.empty()) return "";
  std::string s = " (";
  for (size_t i = 0; i < f.engines.size(); ++i) s += (i ? ", " : "") + f.engines[i];
  return s + ")";
}

static std::string plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

static std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string render_text(const Report& r, bool color) {
  auto paint = [&](const char* code, const std::string& s) {
    return color ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  };
  std::string out;
  out += paint("1", "ckpt verify " + r.target);
  if (!r.root.empty() && r.root != r.target) out += "  (" + r.root + ")";
  out += "\n";
  // Group by file; findings without a file come first under "(checkpoint)".
  std::map<std::string, std::vector<const Finding*>> groups;
  for (const auto& f : r.findings) groups[f.file].push_back(&f);
  std::set<std::string_view> explained;  // the pointer to `ckpt explain` comes once per code
  for (const auto& [file, list] : groups) {
    out += "\n  " + paint("1", file.empty() ? "(checkpoint)" : file) + "\n";
    for (const Finding* f : list) {
      const char* col = f->severity == Severity::error ? "31" : f->severity == Severity::warning ? "33" : "36";
      char sev[16];
      std::snprintf(sev, sizeof sev, "%-7s", std::string(severity_name(f->severity)).c_str());
      out += "    " + paint(col, sev) + " " + paint("1", f->code) + "  " + f->message + engines_suffix(*f) + "\n";
      if (!f->tensor.empty()) out += "                   tensor: " + f->tensor + "\n";
      if (!f->hint.empty()) out += "                   " + paint("2", "hint: " + f->hint) + "\n";
      if (explained.insert(f->code).second) out += "                   " + paint("2", "run 'ckpt explain " + f->code + "'") + "\n";
    }
  }
  if (r.findings.empty()) out += "\n  " + paint("32", "no findings") + "\n";
  const Summary& s = r.summary;
  std::string verdict = s.errors ? paint("31;1", "FAIL") : paint("32;1", "OK");
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f ms", r.elapsed_ms);
  out += "\n" + verdict + ": " + plural(s.errors, "error") + ", " + plural(s.warnings, "warning") + ", " +
         plural(s.infos, "info") + " — " + plural(s.files, "file") +
         (s.file_bytes ? " (" + human_bytes(s.file_bytes) + ")" : "") + ", " + plural(s.tensors, "tensor") + " in " +
         human_bytes(s.bytes) + " of weights, checked in " + ms + "\n";
  return out;
}

// File names and ref contents are raw bytes from disk: JSON output must stay valid UTF-8,
// so each invalid byte becomes U+FFFD (as Python's errors="replace").
static std::string utf8_clean(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates and values above U+10FFFF.
    if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
               (cp >= 0xD800 && cp <= 0xDFFF)))
      ok = false;
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

static void quoted_utf8(std::string& out, std::string_view v) { json::append_quoted(out, utf8_clean(v)); }

static void field(std::string& out, const char* key, const std::string& v, bool null_if_empty = true) {
  out += '"';
  out += key;
  out += "\":";
  if (v.empty() && null_if_empty) out += "null";
  else quoted_utf8(out, v);
}

// One finding's members, without the braces (shared by json and jsonl).
static void finding_members(std::string& out, const Finding& f) {
  field(out, "code", f.code, false);
  out += ',';
  field(out, "severity", std::string(severity_name(f.severity)), false);
  out += ',';
  field(out, "message", f.message, false);
  out += ',';
  field(out, "file", f.file);
  out += ',';
  field(out, "tensor", f.tensor);
  out += ',';
  field(out, "hint", f.hint);
  if (!f.engines.empty()) {  // absent means every engine (keeps older output byte-identical)
    out += ",\"engines\":[";
    for (size_t i = 0; i < f.engines.size(); ++i) {
      if (i) out += ',';
      quoted_utf8(out, f.engines[i]);
    }
    out += ']';
  }
}

static void summary_object(std::string& out, const Summary& s) {
  out += "{\"errors\":" + std::to_string(s.errors) + ",\"warnings\":" + std::to_string(s.warnings) +
         ",\"infos\":" + std::to_string(s.infos) + ",\"files\":" + std::to_string(s.files) +
         ",\"tensors\":" + std::to_string(s.tensors) + ",\"bytes\":" + std::to_string(s.bytes) + "}";
}

// The report header every JSON output starts with: versions, then the target.
static void report_header(std::string& out, const Report& r) {
  field(out, "ckpt_version", CKPT_VERSION, false);
  out += ",\"schema_version\":" + std::to_string(kReportSchemaVersion) + ",";
  field(out, "target", r.target, false);
}

// header, "findings":[...], "summary":{...} — the members every report object has.
static void report_members(std::string& out, const Report& r) {
  report_header(out, r);
  out += ",\"findings\":[";
  bool first = true;
  for (const auto& f : r.findings) {
    out += first ? "{" : ",{";
    first = false;
    finding_members(out, f);
    out += '}';
  }
  out += "],\"summary\":";
  summary_object(out, r.summary);
}

std::string render_json(const Report& r) {
  std::string out = "{";
  report_members(out, r);
  out += "}\n";
  return out;
}

// One target of a batch run as one JSON object on one line (no newline): the single-target
// report's members, preceded by "record":"target" and followed by the resolved root.
std::string render_target_record(const Report& r) {
  std::string out = "{\"record\":\"target\",";
  report_members(out, r);
  out += ',';
  field(out, "root", r.root);
  out += '}';
  return out;
}

static void batch_members(std::string& out, const BatchSummary& b) {
  out += "\"batch\":{\"targets\":" + std::to_string(b.targets) + ",\"clean\":" + std::to_string(b.clean) +
         ",\"with_warnings\":" + std::to_string(b.with_warnings) + ",\"with_errors\":" +
         std::to_string(b.with_errors) + ",\"unreadable\":" + std::to_string(b.unreadable) + ",";
  field(out, "shard", b.shard);
  out += ",\"listed\":" + std::to_string(b.listed) + '}';
}

// A batch's closing object: the record tag (jsonl) or, after the versions, the empty findings
// and every target record (json); then the totals and the batch counts.
static std::string batch_object(const BatchSummary& b, std::string_view record, const std::vector<std::string>* targets) {
  std::string out = "{";
  if (!record.empty()) {
    out += "\"record\":\"";
    out += record;
    out += "\",";
  }
  Report r;
  r.target = b.label;
  report_header(out, r);
  if (targets) {
    out += ",\"findings\":[],\"targets\":[";
    for (size_t i = 0; i < targets->size(); ++i) {
      if (i) out += ',';
      out += (*targets)[i];
    }
    out += ']';
  }
  out += ",\"summary\":";
  summary_object(out, b.totals);
  out += ',';
  batch_members(out, b);
  out += "}\n";
  return out;
}

std::string render_batch_summary_record(const BatchSummary& b) { return batch_object(b, "summary", nullptr); }

std::string render_batch_json(const std::vector<std::string>& target_records, const BatchSummary& b) {
  return batch_object(b, "", &target_records);
}

std::string render_jsonl(const Report& r) {
  std::string out;
  for (const auto& f : r.findings) {
    out += "{\"record\":\"finding\",";
    finding_members(out, f);
    out += "}\n";
  }
  out += "{\"record\":\"summary\",";
  report_header(out, r);
  out += ",\"summary\":";
  summary_object(out, r.summary);
  out += "}\n";
  return out;
}

// GitHub workflow commands: data escapes %, CR, LF; properties also ':' and ','.
static std::string gh_escape(const std::string& s, bool property) {
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ':') out += "%3A";
    else if (property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

std::string render_github(const Report& r) {
  std::string out;
  for (const auto& f : r.findings) {
    const char* cmd = f.severity == Severity::error ? "error" : f.severity == Severity::warning ? "warning" : "notice";
    out += "::";
    out += cmd;
    std::string props;
    if (!f.file.empty()) props += "file=" + gh_escape(r.file_prefix + f.file, true);
    props += std::string(props.empty() ? "" : ",") + "title=" + gh_escape(f.code, true);
    out += " " + props;
    std::string msg = f.code + " " + f.message + engines_suffix(f);
    if (!f.tensor.empty()) msg += " [tensor " + f.tensor + "]";
    if (!f.hint.empty()) msg += " — " + f.hint;
    out += "::" + gh_escape(msg, false) + "\n";
  }
  const Summary& s = r.summary;
  out += "ckpt verify " + r.target + ": " + plural(s.errors, "error") + ", " + plural(s.warnings, "warning") + ", " +
         plural(s.infos, "info") + "\n";
  return out;
}

std::string render_sarif(const Report& r) {
  std::string out =
      "{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{"
      "\"name\":\"ckpt\",\"version\":\"" CKPT_VERSION "\",\"informationUri\":\"docs/checks.md\",\"rules\":[";
  bool first = true;
  for (const auto& c : all_checks()) {
    out += first ? "{" : ",{";
    first = false;
    out += "\"id\":";
    json::append_quoted(out, c.code);
    out += ",\"shortDescription\":{\"text\":";
    json::append_quoted(out, c.title);
    out += "}}";
  }
  out += "]}},\"results\":[";
  first = true;
  for (const auto& f : r.findings) {
    out += first ? "{" : ",{";
    first = false;
    out += "\"ruleId\":";
    quoted_utf8(out, f.code);
    out += ",\"level\":\"";
    out += f.severity == Severity::error ? "error" : f.severity == Severity::warning ? "warning" : "note";
    out += "\",\"message\":{\"text\":";
    std::string msg = f.message + engines_suffix(f);
    if (!f.tensor.empty()) msg += " [tensor " + f.tensor + "]";
    if (!f.hint.empty()) msg += " — " + f.hint;
    quoted_utf8(out, msg);
    out += "}";
    if (!f.file.empty()) {
      out += ",\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":";
      quoted_utf8(out, r.file_prefix + f.file);
      out += "}}}]";
    }
    out += "}";
  }
  out += "]}]}\n";
  return out;
}

}  // namespace ckpt
