// HS: hashes and data scans — the only family that reads tensor data, and only with --deep.
// One read-only pass per file (src/checks/deep_scan.cpp) hashes the content where there is a
// recorded digest to compare with (a Hugging Face cache blob's name, a --local-dir download's
// metadata) and scans every float tensor's bit patterns for NaN, Inf and all-zero data.
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "checks/deep_scan.h"
#include "checks/hashes_plan.h"
#include "checks/family.h"
#include "checks/util.h"
#include "io/checked.h"
#include "io/file.h"

namespace ckpt::checks {

namespace {

using hub::detail::EtagKind;

constexpr std::array<CheckInfo, 5> kCodes{{
    {"HS001", Severity::error, "file content does not match its recorded hash (cache blob name or download metadata)"},
    {"HS002", Severity::error, "NaN values in a float tensor"},
    {"HS003", Severity::error, "Inf values in a float tensor"},
    {"HS004", Severity::warning, "float weight tensor is entirely zero"},
    {"HS005", Severity::error, "tensor data cannot be read"},
}};

constexpr size_t kMaxPerCode = 8;       // per file; the rest are summed up in one finding
constexpr uint64_t kMinZeroElements = 16;  // smaller all-zero tensors are often legitimate (gates, offsets)

using namespace hs;  // Plan, TensorRef, Expected (hashes_plan.h)

std::optional<uint64_t> element_count(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    auto m = io::checked_mul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

// The float tensors of a shard whose byte span is consistent with their shape (the rest are
// ST findings already), as absolute file ranges.
void plan_shard(const Checkpoint& ck, const Shard& sh, Plan& plan) {
  if (sh.format == Format::pytorch) return;  // planned from the pickle (plan_pickles): strides, byte order
  const st::Header& h = sh.header;
  if (!h.framing_ok || !h.parsed) return;
  const FileEntry* f = ck.file(sh.file);
  if (!f || !f->readable() || f->abs.empty()) return;
  std::optional<size_t> job;
  for (const auto& t : h.tensors) {
    if (!deep::scannable(t.dtype) || t.end < t.begin) continue;
    auto numel = element_count(t.shape);
    if (!numel || *numel == 0) continue;
    auto nbytes = io::checked_mul(*numel, st::dtype_bits(t.dtype) / 8);
    if (!nbytes || *nbytes != t.end - t.begin) continue;
    auto offset = io::checked_add(h.data_start(), t.begin);
    if (!offset || !io::checked_add(*offset, *nbytes)) continue;
    if (!job) job = plan.job_for(*f);
    TensorRef ref;
    ref.file = sh.file;
    ref.name = std::string(t.name);
    ref.dtype = t.dtype;
    ref.shape = t.shape;
    ref.numel = *numel;
    ref.spans = {static_cast<uint32_t>(plan.jobs[*job].tensors.size())};
    ref.span_first = {0};
    plan.jobs[*job].tensors.push_back({t.dtype, *offset, *nbytes});
    plan.tensors[*job].push_back(std::move(ref));
  }
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// huggingface_hub's --local-dir bookkeeping: .cache/huggingface/download/<path>.metadata holds
// "<commit>\n<etag>\n<unix time>\n". It describes the file only while the file is not newer
// than the timestamp (the same rule huggingface_hub applies); a newer file was edited or
// replaced on purpose, and there is nothing to compare it with.
std::optional<Expected> local_dir_expectation(const Checkpoint& ck, const FileEntry& f) {
  std::string meta_rel = ".cache/huggingface/download/" + f.rel + ".metadata";
  const FileEntry* m = ck.file(meta_rel);
  if (!m || !m->readable()) return std::nullopt;
  std::string text;
  if (!io::read_file(m->abs, 4096, text).empty()) return std::nullopt;
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size() && lines.size() < 3) {
    size_t nl = text.find('\n', start);
    lines.push_back(trim(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start)));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  if (lines.size() < 3) return std::nullopt;
  char* endp = nullptr;
  double timestamp = std::strtod(lines[2].c_str(), &endp);
  if (endp == lines[2].c_str()) return std::nullopt;
  struct stat st{};
  if (::stat(f.abs.c_str(), &st) != 0) return std::nullopt;
  double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
  if (mtime - 1 > timestamp) return std::nullopt;
  Expected e;
  e.kind = hub::detail::etag_kind(lines[1]);
  if (e.kind == EtagKind::opaque) return std::nullopt;
  e.digest = lines[1];
  e.recorded = meta_rel + " records";
  e.fix = "delete it and download it again (huggingface_hub then rewrites the metadata)";
  return e;
}

void plan_hashes(const Checkpoint& ck, Plan& plan) {
  for (const auto& f : ck.files) {
    if (!f.readable() || f.abs.empty() || starts_with(f.rel, ".cache/")) continue;
    Expected e;
    if (ck.cache && f.is_symlink) {
      // A snapshot entry links to blobs/<etag>: the sha256 of the content for LFS files,
      // the git blob sha1 for the others.
      std::string etag = f.abs.filename().string();
      e.kind = hub::detail::etag_kind(etag);
      if (e.kind == EtagKind::opaque) continue;
      e.digest = etag;
      e.recorded = "its cache blob is named";
      e.fix = "delete " + f.abs.string() + " and download the file again (`ckpt fetch " + ck.cache->repo_id + "@" +
              ck.cache->commit + " " + f.rel + "`)";
    } else if (auto le = local_dir_expectation(ck, f)) {
      e = std::move(*le);
    } else {
      continue;
    }
    size_t j = plan.job_for(f);
    if (plan.jobs[j].hash != EtagKind::opaque) continue;  // another entry links the same blob
    plan.jobs[j].hash = e.kind;
    plan.expected[j] = std::move(e);
  }
}

// "[3, 17]" for a flat index into `shape` (row-major).
std::string index_str(uint64_t flat, const std::vector<uint64_t>& shape) {
  if (shape.empty()) return "the only value";
  std::vector<uint64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return "index " + shape_str(idx);
}

bool zero_is_plausible(std::string_view name) {
  // Biases, zero points and offsets are legitimately all zero in many trained models.
  for (std::string_view w : {"bias", "zero", "offset"})
    if (name.find(w) != std::string_view::npos) return true;
  return false;
}

const char* algo_name(EtagKind k) { return k == EtagKind::sha256 ? "sha256" : "git blob sha1"; }

// Caps one code's per-tensor findings in one file and sums up the rest.
class Capped {
 public:
  explicit Capped(FindingSink& out) : out_(out) {}
  void add(const std::string& code, const std::string& file, const std::string& tensor, std::string msg,
           std::string hint) {
    auto& st = state_[{file, code}];
    if (++st.count <= kMaxPerCode) {
      out_.add(code, find_check(code)->severity, std::move(msg), file, tensor, std::move(hint));
    } else {
      st.more.push_back(tensor);
      st.hint = std::move(hint);
    }
  }
  void flush(const std::map<std::string, std::string>& what) {
    for (auto& [key, st] : state_) {
      if (st.more.empty()) continue;
      const auto& [file, code] = key;
      out_.add(code, find_check(code)->severity,
               std::to_string(st.more.size()) + " more tensors in this file " + what.at(code) + ": " +
                   list_names(st.more),
               file, "", st.hint);
    }
  }

 private:
  struct State {
    size_t count = 0;
    std::vector<std::string> more;
    std::string hint;
  };
  FindingSink& out_;
  std::map<std::pair<std::string, std::string>, State> state_;
};

void report(const Plan& plan, const std::vector<deep::FileResult>& results, FindingSink& out) {
  Capped capped(out);
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const auto& job = plan.jobs[j];
    const auto& res = results[j];
    const std::string& rel = plan.rels[j].front();
    std::string also;
    if (plan.rels[j].size() > 1) {
      std::vector<std::string> others(plan.rels[j].begin() + 1, plan.rels[j].end());
      also = " (the same file is also " + list_names(others) + ")";
    }

    if (!res.error.empty()) {
      std::string what = res.opened ? res.error + " at byte " + std::to_string(res.error_offset) + "; " +
                                          std::to_string(res.bytes_read) + " of " + std::to_string(res.size) +
                                          " bytes were read"
                                    : res.error;
      out.add("HS005", Severity::error,
              what + (job.hash != EtagKind::opaque ? "; its hash could not be checked" : "") + also,
              rel, "",
              "an I/O error while reading tensor data is a failing disk, a network filesystem dropping out, or a "
              "file being replaced during the check; no loader can trust these bytes. Re-run, then re-download "
              "or restore the file");
    }

    const Expected& e = plan.expected[j];
    if (job.hash != EtagKind::opaque && res.error.empty() && res.digest != e.digest) {
      out.add("HS001", Severity::error,
              "the content (" + bytes_str(res.size) + ") has " + algo_name(e.kind) + " " + res.digest + " but " +
                  e.recorded + " " + e.digest + ": the bytes do not match the " + algo_name(e.kind) +
                  " they were stored under" + also,
              rel, "",
              "what is known is only that these bytes are not the ones that hash was taken of. Either they were "
              "never checked (the client that stored them did not verify what it received, or a proxy or mirror "
              "served other bytes) or they changed afterwards (a disk error, a tool writing through the snapshot "
              "symlink, an interrupted copy or restore); " + e.fix);
    }

    for (const TensorRef& t : plan.tensors[j]) {
      // A pickled view may be several spans: counts add up, the first index is the smallest
      // logical index any span's first hit maps to.
      deep::ScanResult r;
      for (size_t k = 0; k < t.spans.size(); ++k) {
        const deep::ScanResult& p = res.tensors[t.spans[k]];
        r.elements += p.elements;
        r.nan += p.nan;
        r.inf += p.inf;
        r.nonzero = r.nonzero || p.nonzero;
        if (p.first_nan != deep::kNone) r.first_nan = std::min(r.first_nan, t.map(t.span_first[k] + p.first_nan));
        if (p.first_inf != deep::kNone) r.first_inf = std::min(r.first_inf, t.map(t.span_first[k] + p.first_inf));
      }
      const std::string& file = t.file;
      const std::string& name = t.name;
      std::string dt(st::dtype_name(t.dtype));
      bool partial = r.elements < t.numel;
      std::string of = partial ? " of the " + std::to_string(r.elements) + " " + dt + " values that could be read (of " +
                                     std::to_string(t.numel) + ")"
                               : " of " + std::to_string(t.numel) + (t.distinct_only ? " distinct stored " : " ") + dt + " values";
      if (r.nan) {
        capped.add("HS002", file, name,
                   std::to_string(r.nan) + of + " are NaN, the first at " + index_str(r.first_nan, t.shape),
                   "a NaN weight turns every activation it touches into NaN and the model generates garbage: a "
                   "diverged training run, a broken conversion or corrupted bytes. Compare with the source checkpoint");
      }
      if (r.inf) {
        std::string hint = "an Inf weight makes activations Inf, and NaN within a layer or two (Inf - Inf, Inf x 0)";
        if (t.dtype == st::DType::F16)
          hint += "; F16 holds at most 65504, so an F32/BF16 checkpoint with larger values converted to F16 "
                  "overflows: convert to BF16 instead, or clamp before converting";
        else
          hint += ": a diverged training run, a broken conversion or corrupted bytes. Compare with the source checkpoint";
        capped.add("HS003", file, name,
                   std::to_string(r.inf) + of + " are +/-Inf, the first at " + index_str(r.first_inf, t.shape),
                   hint);
      }
      if (!r.nonzero && !partial && res.error.empty() && t.numel >= kMinZeroElements && deep::has_zero_value(t.dtype) &&
          !zero_is_plausible(name)) {
        const deep::TensorSpan& span0 = job.tensors[t.spans.front()];
        bool hole = t.spans.size() == 1 && deep::is_hole(job.path, span0.offset, span0.nbytes);
        capped.add("HS004", file, name,
                   "all " + std::to_string(t.numel) + " " + dt + " values of shape " + shape_str(t.shape) +
                       " are zero" +
                       (hole ? "; its bytes are a hole in a sparse file (never written)" : std::string()),
                   hole ? "the file was preallocated or extended and the data never arrived (an interrupted or "
                          "failed download or copy); re-download the file"
                        : "a zero-filled download, a failed conversion or a never-trained (freshly initialised) "
                          "layer; the layer computes nothing. Compare with the source checkpoint");
      }
    }
  }
  capped.flush({{"HS002", "hold NaN values"},
                {"HS003", "hold Inf values"},
                {"HS004", "are entirely zero"}});
}

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  if (!opts.deep || ck.snapshot_missing) return;
  Plan plan;
  for (const auto& sh : ck.shards) plan_shard(ck, sh, plan);
  plan_pickles(ck, plan);
  plan_hashes(ck, plan);
  if (plan.jobs.empty()) return;
  deep::Options deep_opts;
  if (opts.progress) {
    deep_opts.planned = &opts.progress->total;
    deep_opts.done = &opts.progress->done;
  }
  auto results = deep::run(plan.jobs, deep_opts);
  report(plan, results, out);
}

}  // namespace

const FamilyDef kHashesFamily{"HS", kCodes, run};

}  // namespace ckpt::checks
