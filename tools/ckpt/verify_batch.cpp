// Batch verify: enumerate the targets (every snapshot of a hub cache, or a list), keep this
// shard's share, verify them on a bounded pool, and stream one report per target in list order
// (so the output does not depend on --jobs), then the totals.
//
// Memory stays bounded per target: each Checkpoint is freed once its report is rendered, and
// a worker does not start a target more than kWindowPerJob × jobs ahead of the next one to be
// written, so a slow target cannot make the finished reports behind it pile up.
#include "verify_batch.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

namespace ckpt::cli {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxTargets = 1u << 20;       // a list longer than this is refused, not truncated
constexpr size_t kMaxTargetLine = 64u << 10;   // bytes per --targets line
constexpr unsigned kWindowPerJob = 4;

struct Target {
  std::string label;  // what the reports call it: org/name@commit for a cache snapshot, else the line
  std::string path;   // what is loaded
  std::string unreadable;  // set at enumeration: why there is nothing to load
};

// FNV-1a 64: a stable hash, so a target lands in the same shard on every machine and run,
// whatever else the list holds.
uint64_t stable_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool parse_shard(const std::string& s, uint64_t& index, uint64_t& count) {
  size_t slash = s.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == s.size()) return false;
  auto num = [](std::string_view t, uint64_t& v) {
    if (t.empty() || t.size() > 9) return false;
    v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + uint64_t(c - '0');
    }
    return true;
  };
  return num(std::string_view(s).substr(0, slash), index) && num(std::string_view(s).substr(slash + 1), count) &&
         count >= 1 && index < count;
}

// models--org--name -> org/name (the cache never holds "--" inside a name: the hub forbids it).
std::string repo_id_of(std::string folder) {
  folder.erase(0, 8);
  std::string out;
  for (size_t i = 0; i < folder.size(); ++i) {
    if (folder.compare(i, 2, "--") == 0) {
      out += '/';
      ++i;
    } else {
      out += folder[i];
    }
  }
  return out;
}

std::vector<std::string> sorted_dir_names(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every snapshot of every model repo; a repo folder without any snapshot is listed itself, so
// the loader names what is wrong with it (an FS013 finding) instead of it being skipped.
std::optional<std::string> enumerate_cache(const fs::path& root, std::vector<Target>& out) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return "no Hugging Face cache directory at " + root.string();
  for (const auto& name : sorted_dir_names(root)) {
    if (name.rfind("models--", 0) != 0) continue;  // datasets--, spaces--, .locks, version.txt
    fs::path repo = root / name;
    if (!fs::is_directory(repo, ec)) continue;
    std::string id = repo_id_of(name);
    size_t before = out.size();
    fs::path snaps = repo / "snapshots";
    if (fs::is_directory(snaps, ec))
      for (const auto& rev : sorted_dir_names(snaps))
        if (fs::is_directory(snaps / rev, ec)) out.push_back({id + "@" + rev, (snaps / rev).string()});
    if (out.size() == before) {
      // Blobs but no snapshot: a download that never finished its first file, or a cleaned-up
      // repo. The loader would take the folder for a plain model directory; say what it is.
      size_t blobs = 0, incomplete = 0;
      for (auto it = fs::directory_iterator(repo / "blobs", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        ++blobs;
        if (it->path().extension() == ".incomplete") ++incomplete;
      }
      out.push_back({id, repo.string(),
                     "cache repo folder " + name + " holds no snapshot (blobs/: " + std::to_string(blobs) + " file" +
                         (blobs == 1 ? "" : "s") + ", " + std::to_string(incomplete) +
                         " .incomplete): nothing of this repo was ever completely downloaded"});
    }
    if (out.size() > kMaxTargets) return "more than " + std::to_string(kMaxTargets) + " snapshots in " + root.string();
  }
  return std::nullopt;
}

std::optional<std::string> read_targets(const std::string& file, std::vector<Target>& out) {
  std::ifstream f;
  std::istream* in = &std::cin;
  if (file != "-") {
    f.open(file);
    if (!f) return "cannot read the target list " + file;
    in = &f;
  }
  std::string line;
  size_t lineno = 0;
  while (std::getline(*in, line)) {
    ++lineno;
    if (line.size() > kMaxTargetLine)
      return file + ":" + std::to_string(lineno) + ": line longer than " + std::to_string(kMaxTargetLine) + " bytes";
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    size_t lead = line.find_first_not_of(" \t");
    if (lead == std::string::npos || line[lead] == '#') continue;
    line.erase(0, lead);
    out.push_back({line, line});
    if (out.size() > kMaxTargets) return file + ": more than " + std::to_string(kMaxTargets) + " targets";
  }
  return std::nullopt;
}

// A target the loader could not locate or read is a finding of that target, not the end of the run.
Report unreadable_report(const Target& t, const std::string& why) {
  Report r;
  r.target = t.label;
  r.root = t.path;
  r.findings.push_back({"FS013", Severity::error, why, "", "",
                        "the target is listed but cannot be verified: fix the path or revision, or run "
                        "`ckpt fetch` for it",
                        {}});
  r.summary = count_findings(r.findings);
  return r;
}

}  // namespace

int run_verify_batch(const BatchArgs& args, VerifySettings settings) {
  if (args.format == "sarif") {
    std::fprintf(stderr, "ckpt verify: --format sarif is one target's log; a batch writes text, json, jsonl or github\n");
    return 2;
  }
  uint64_t shard_index = 0, shard_count = 1;
  if (!args.shard.empty() && !parse_shard(args.shard, shard_index, shard_count)) {
    std::fprintf(stderr, "ckpt verify: --shard '%s': expected I/N with 0 <= I < N\n", args.shard.c_str());
    return 2;
  }

  std::vector<Target> listed;
  BatchSummary summary;
  if (args.cache_given) {
    fs::path root = args.cache_root.empty() ? hf_cache_root() : fs::path(args.cache_root);
    summary.label = "--cache " + root.string();
    if (auto err = enumerate_cache(root, listed)) {
      std::fprintf(stderr, "ckpt verify: --cache: %s\n", err->c_str());
      return 2;
    }
  } else {
    summary.label = "--targets " + args.targets_file;
    if (auto err = read_targets(args.targets_file, listed)) {
      std::fprintf(stderr, "ckpt verify: --targets: %s\n", err->c_str());
      return 2;
    }
  }
  summary.listed = listed.size();
  std::vector<Target> targets;
  for (auto& t : listed)
    if (stable_hash(t.label) % shard_count == shard_index) targets.push_back(std::move(t));
  if (!args.shard.empty()) summary.shard = args.shard;
  summary.targets = targets.size();

  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  unsigned jobs = args.jobs ? args.jobs : hw;
  jobs = unsigned(std::min<size_t>(jobs, std::max<size_t>(1, targets.size())));
  // Each target's loader gets its share of the CPUs; main.cpp's single malloc arena suits one
  // model, not `jobs` of them built at once.
  settings.load.threads = std::max(1u, hw / jobs);
  if (jobs > 1) mallopt(M_ARENA_MAX, int(std::min(jobs, 64u)));

  const bool color = args.format == "text" && isatty(STDOUT_FILENO) && !(std::getenv("NO_COLOR") && *std::getenv("NO_COLOR"));
  std::vector<std::optional<std::string>> rendered(targets.size());
  std::vector<Summary> sums(targets.size());
  std::vector<uint8_t> state(targets.size());  // 0 clean, 1 warnings, 2 errors, 3 unreadable
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0, written = 0;
  const size_t window = size_t(jobs) * kWindowPerJob;

  auto render = [&](const Report& r) {
    if (args.format == "jsonl" || args.format == "json") return render_target_record(r) + (args.format == "jsonl" ? "\n" : "");
    if (args.format == "github") return render_github(r);
    return render_text(r, color) + "\n";
  };
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return next >= targets.size() || next < written + window; });
        if (next >= targets.size()) return;
        i = next++;
      }
      const Target& t = targets[i];
      std::string out;
      Summary s;
      uint8_t st;
      try {
        TargetResult res;
        if (t.unreadable.empty()) res = verify_target(t.path, settings, nullptr, /*keep_model=*/false);
        else res.load_error = t.unreadable;
        Report r = res.load_error.empty() ? std::move(res.report) : unreadable_report(t, res.load_error);
        r.target = t.label;
        out = render(r);
        s = r.summary;
        st = !res.load_error.empty() ? 3 : s.errors ? 2 : s.warnings ? 1 : 0;
      } catch (const std::bad_alloc&) {
        Report r = unreadable_report(t, "out of memory while verifying this target");
        out = render(r);
        s = r.summary;
        st = 3;
      }
      std::lock_guard lock(mu);
      rendered[i] = std::move(out);
      sums[i] = s;
      state[i] = st;
      cv.notify_all();
    }
  };

  std::vector<std::thread> pool;
  for (unsigned j = 0; j < jobs && !targets.empty(); ++j) pool.emplace_back(worker);
  std::vector<std::string> json_records;  // --format json only: the document is written at the end
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string out;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return rendered[i].has_value(); });
      out = std::move(*rendered[i]);
      rendered[i].reset();
      ++written;
      cv.notify_all();
    }
    if (args.format == "json") json_records.push_back(std::move(out));
    else std::fwrite(out.data(), 1, out.size(), stdout);
    if (!args.quiet && args.format == "text" && !isatty(STDOUT_FILENO) && isatty(STDERR_FILENO))
      std::fprintf(stderr, "\r%zu/%zu targets", i + 1, targets.size());
  }
  for (auto& th : pool) th.join();
  if (!args.quiet && args.format == "text" && !isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && !targets.empty())
    std::fprintf(stderr, "\n");

  bool fail = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    Summary& t = summary.totals;
    t.errors += sums[i].errors;
    t.warnings += sums[i].warnings;
    t.infos += sums[i].infos;
    t.files += sums[i].files;
    t.tensors += sums[i].tensors;
    t.bytes += sums[i].bytes;
    switch (state[i]) {
      case 0: ++summary.clean; break;
      case 1: ++summary.with_warnings; break;
      case 2: ++summary.with_errors; break;
      default: ++summary.unreadable; break;
    }
    fail |= state[i] >= 2 || (settings.strict && state[i] == 1);
  }

  std::string tail;
  if (args.format == "json") {
    tail = render_batch_json(json_records, summary);
  } else if (args.format == "jsonl") {
    tail = render_batch_summary_record(summary);
  } else if (args.format == "text") {
    tail = (fail ? "FAIL" : "OK") + std::string(": ") + std::to_string(summary.targets) + " target" +
           (summary.targets == 1 ? "" : "s") + " (" + summary.label +
           (summary.shard.empty() ? "" : ", shard " + summary.shard + " of " + std::to_string(summary.listed) + " listed") +
           "): " + std::to_string(summary.clean) + " clean, " + std::to_string(summary.with_warnings) +
           " with warnings, " + std::to_string(summary.with_errors) + " with errors, " +
           std::to_string(summary.unreadable) + " unreadable\n";
  }
  std::fwrite(tail.data(), 1, tail.size(), stdout);
  std::fflush(stdout);
  return fail ? 1 : 0;
}

}  // namespace ckpt::cli
