// ckpt fetch org/name[@revision] [PATH...] [more repos...]: download into the Hugging Face
// cache layout (or --local-dir) with stall detection, retries, resume and hash verification,
// then run the header-only verify on the snapshot.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>

#include "ckpt/checks.h"
#include "ckpt/checkpoint.h"
#include "ckpt/hub.h"
#include "ckpt/report.h"
#include "cli_parse.h"
#include "progress.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

std::atomic<bool> g_cancel{false};

void on_signal(int) {
  if (g_cancel.exchange(true)) std::_Exit(130);  // second Ctrl-C: leave now
}

// A file name is anything whose last component has a usual checkpoint-file extension;
// everything else shaped like org/name[@rev] starts a new repo.
bool looks_like_file(const std::string& s) {
  if (s.find('@') != std::string::npos) return false;
  auto slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) return true;
  auto last = s.substr(slash + 1);
  static const char* exts[] = {".json", ".safetensors", ".bin", ".txt", ".model", ".jinja", ".py", ".md",
                               ".gguf", ".onnx", ".pt", ".pth", ".msgpack", ".h5", ".tiktoken", ".vocab",
                               ".yaml", ".yml", ".npz", ".npy", ".ckpt", ".zip", ".tar", ".gz", ".csv", ".parquet"};
  for (const char* e : exts) {
    std::string ext = e;
    if (last.size() > ext.size() && last.compare(last.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  return false;
}

class Progress {
 public:
  Progress(bool tty, bool quiet, double interval, std::string label)
      : tty_(tty), quiet_(quiet), interval_(interval), label_(std::move(label)) {
    start_ = last_print_ = std::chrono::steady_clock::now();
    if (!quiet_) thread_ = std::thread([this] { loop(); });
  }
  ~Progress() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    if (thread_.joinable()) thread_.join();
    if (tty_ && !quiet_) clear();
  }
  void plan(size_t files, uint64_t bytes) {
    std::lock_guard<std::mutex> g(mu_);
    planned_files_ = files;
    planned_bytes_ = bytes;
  }
  void update(const hub::FileProgress& p) {
    std::lock_guard<std::mutex> g(mu_);
    files_[p.path] = p;
  }
  void log(const std::string& s) {
    std::lock_guard<std::mutex> g(mu_);
    if (tty_ && !quiet_) clear_locked();
    std::fprintf(stderr, "ckpt fetch: %s: %s\n", label_.c_str(), s.c_str());
  }

 private:
  void totals(uint64_t& got, uint64_t& total, int& retries, int& active, int& done) {
    got = 0;
    total = 0;
    retries = 0;
    active = 0;
    done = 0;
    for (const auto& [k, f] : files_) {
      got += f.received;
      total += f.total;
      retries += f.retries;
      if (f.done) ++done;
      else if (!f.failed) ++active;
    }
    total = std::max(total, planned_bytes_);
  }
  std::string total_line() {
    uint64_t got, total;
    int retries, active, done;
    totals(got, total, retries, active, done);
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double rate = el > 0 ? got / el : 0;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %s / %s (%.0f%%) %s/s ETA %s, %d/%zu files done, %d active, %d retries",
                  label_.c_str(), progress_bytes(got).c_str(), progress_bytes(total).c_str(), total ? 100.0 * got / total : 0.0,
                  progress_bytes(rate).c_str(), progress_eta(rate > 0 ? (total - std::min(got, total)) / rate : NAN).c_str(), done,
                  std::max(planned_files_, files_.size()), active, retries);
    return buf;
  }
  static std::string bar(double frac, int width) {
    int n = static_cast<int>(std::clamp(frac, 0.0, 1.0) * width);
    return "[" + std::string(n, '#') + std::string(width - n, '.') + "]";
  }
  void clear_locked() {
    for (int i = 0; i < drawn_; ++i) std::fprintf(stderr, "\x1b[1A\x1b[2K");
    std::fprintf(stderr, "\r");
    drawn_ = 0;
  }
  void clear() {
    std::lock_guard<std::mutex> g(mu_);
    clear_locked();
  }
  void draw_tty() {
    clear_locked();
    int lines = 0;
    for (const auto& [path, f] : files_) {
      if (f.done || f.failed || lines >= 8) continue;
      double frac = f.total ? double(f.received) / f.total : 0;
      std::string name = path.size() > 40 ? "…" + path.substr(path.size() - 39) : path;
      std::fprintf(stderr, "  %-40s %s %5.1f%% %s%s\n", name.c_str(), bar(frac, 20).c_str(), frac * 100,
                   progress_bytes(f.total).c_str(), f.retries ? (" retries " + std::to_string(f.retries)).c_str() : "");
      ++lines;
    }
    uint64_t got, total;
    int r, a, d;
    totals(got, total, r, a, d);
    std::fprintf(stderr, "%s %s\n", bar(total ? double(got) / total : 0, 30).c_str(), total_line().c_str());
    drawn_ = lines + 1;
    std::fflush(stderr);
  }
  void loop() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(tty_ ? 200 : 100));
      std::lock_guard<std::mutex> g(mu_);
      if (stopped_) return;
      auto now = std::chrono::steady_clock::now();
      if (tty_) {
        draw_tty();
      } else if (std::chrono::duration<double>(now - last_print_).count() >= interval_) {
        last_print_ = now;
        std::fprintf(stderr, "progress: %s\n", total_line().c_str());
        std::fflush(stderr);
      }
    }
  }

  bool tty_, quiet_;
  double interval_;
  std::string label_;
  std::mutex mu_;
  bool stopped_ = false;
  int drawn_ = 0;
  size_t planned_files_ = 0;
  uint64_t planned_bytes_ = 0;
  std::map<std::string, hub::FileProgress> files_;
  std::chrono::steady_clock::time_point start_, last_print_;
  std::thread thread_;
};

// "NET008 network": the stable code and the kind's name, closing every ::error:: line.
std::string code(hub::ErrorKind k) {
  if (k == hub::ErrorKind::none) k = hub::ErrorKind::network;
  return std::string(hub::error_code(k)) + " " + std::string(hub::error_kind_name(k));
}

struct Job {
  hub::RepoSpec spec;
  std::vector<std::string> paths;
};

int run_fetch(int argc, char** argv) {
  CLI::App app{"Download repos from a Hugging Face-compatible hub into the huggingface_hub cache layout (or a "
               "--local-dir), never publishing a partial or unverified file, then verify the snapshot. "
               "Exit 0: everything fetched and verified; 1: a failure; 2: usage error."};
  app.name(argv[0]);
  std::vector<std::string> positional;
  hub::FetchOptions o;
  std::string cache_dir, local_dir;
  double stall = -1, connect = 10, backoff = 1.0, backoff_max = 30, progress_interval = 10;
  uint64_t stall_bytes = 64 * 1024, range_threshold_mib = 64;
  bool quiet = false, no_verify = false, fail_on_verify = false;
  app.add_option("REPO_OR_PATH", positional,
                 "org/name[@revision], optionally followed by repo file paths; several repos allowed")
      ->required();
  app.add_option("--include", o.include, "only files matching this glob (repeatable)");
  app.add_option("--exclude", o.exclude, "skip files matching this glob (repeatable)");
  app.add_option("--cache-dir", cache_dir, "hub cache directory (default: HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub)");
  app.add_option("--local-dir", local_dir, "download into this directory instead of the cache (huggingface_hub local_dir layout)");
  app.add_option("--endpoint", o.endpoint, "hub URL (default: HF_ENDPOINT or https://huggingface.co)");
  app.add_option("--token", o.token, "access token (default: HF_TOKEN, then $HF_HOME/token)");
  app.add_option("--jobs", o.jobs, "files downloaded in parallel")->check(CLI::Range(1, 64));
  app.add_option("--retries", o.retries, "retries per request after the first attempt")->check(CLI::Range(0, 100));
  app.add_option("--stall-timeout", stall,
                 "seconds: an attempt moving fewer than --stall-bytes in this window is aborted and retried "
                 "(default: HF_HUB_DOWNLOAD_TIMEOUT or 30)");
  app.add_option("--stall-bytes", stall_bytes, "bytes that must arrive per stall window (default 65536)");
  app.add_option("--connect-timeout", connect, "seconds to establish a connection");
  app.add_option("--backoff", backoff, "base retry delay in seconds (exponential, jittered)");
  app.add_option("--backoff-max", backoff_max, "maximum retry delay in seconds");
  app.add_option("--range-parts", o.range_parts, "parallel ranges per large file (1 disables)")->check(CLI::Range(1, 32));
  app.add_option("--range-threshold", range_threshold_mib, "MiB from which a file is fetched in parallel ranges");
  app.add_option("--progress-interval", progress_interval, "seconds between plain progress lines when not on a TTY");
  bool direct_io = false;
  app.add_flag("--direct", direct_io,
               "write each file with O_DIRECT, around the page cache: one stream per file, hashed and "
               "written by helper threads; leaves a serving process's cached weights in memory");
  bool fsync_blobs = false;
  app.add_flag("--fsync", fsync_blobs,
               "fdatasync each blob before publishing it, so a power loss cannot leave a published blob short "
               "(costs the time to write every byte to disk; without it a short blob is re-fetched by the next run)");
  app.add_flag("--offline", o.offline, "use only the local cache; never touch the network (also HF_HUB_OFFLINE=1)");
  app.add_flag("--quiet,-q", quiet, "no progress output");
  app.add_flag("--no-verify", no_verify, "skip the header-only verify of the fetched snapshot");
  app.add_flag("--fail-on-verify", fail_on_verify,
               "exit 1 when the fetched snapshot has error findings (default: report them, exit on the fetch alone)");
  if (auto code = parse_args(app, argc, argv)) return *code;
  if (!cache_dir.empty() && !local_dir.empty()) {
    std::fprintf(stderr, "ckpt fetch: --cache-dir and --local-dir are exclusive\n");
    return 2;
  }
  std::vector<Job> jobs;
  for (const auto& a : positional) {
    if (jobs.empty() || !looks_like_file(a)) {
      std::string err;
      auto spec = hub::parse_repo_spec(a, &err);
      if (!spec) {
        std::fprintf(stderr, "ckpt fetch: %s\n", err.c_str());
        return 2;
      }
      jobs.push_back({*spec, {}});
    } else {
      if (!hub::safe_repo_path(a)) {
        std::fprintf(stderr, "ckpt fetch: unsafe file path '%s' (absolute or with '..'): refused\n", a.c_str());
        return 2;
      }
      jobs.back().paths.push_back(a);
    }
  }
  if (!local_dir.empty() && jobs.size() > 1) {
    std::fprintf(stderr, "ckpt fetch: --local-dir takes a single repo\n");
    return 2;
  }
  if (stall < 0) {
    const char* t = std::getenv("HF_HUB_DOWNLOAD_TIMEOUT");
    stall = t && std::atof(t) > 0 ? std::atof(t) : 30;
  }
  o.stall_timeout = stall;
  o.stall_bytes = std::max<uint64_t>(1, stall_bytes);
  o.connect_timeout = connect;
  o.backoff_base = backoff;
  o.backoff_max = backoff_max;
  o.range_threshold = range_threshold_mib << 20;
  o.cache_dir = cache_dir;
  o.local_dir = local_dir;
  o.durable = fsync_blobs;
  o.direct_io = direct_io;
  o.cancel = &g_cancel;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  bool tty = isatty(STDERR_FILENO) && !std::getenv("CI");
  int status = 0;
  for (const auto& job : jobs) {
    hub::FetchOptions jo = o;
    jo.paths = job.paths;
    std::string label = job.spec.repo_id + (job.spec.revision_given ? "@" + job.spec.revision : "");
    Progress progress(tty, quiet, progress_interval, label);
    jo.on_progress = [&](const hub::FileProgress& p) { progress.update(p); };
    jo.on_plan = [&](size_t n, uint64_t b) { progress.plan(n, b); };
    jo.on_log = [&](const std::string& s) {
      if (!quiet) progress.log(s);
    };
    hub::FetchResult r = hub::fetch(job.spec, jo);
    progress.stop();
    size_t cached = 0, fetched = 0, failed = 0;
    uint64_t bytes = 0;
    for (const auto& f : r.files) {
      if (!f.ok) {
        ++failed;
        std::string msg = f.error.rfind(f.path + ":", 0) == 0 ? f.error : f.path + ": " + f.error;
        // What came over the network in this run (a file fetched twice after a hash mismatch
        // counts twice), not what is left on disk (a corrupt download is discarded).
        std::string got = f.downloaded <= f.expected
                              ? "received " + std::to_string(f.downloaded) + " of " + std::to_string(f.expected) + " bytes"
                              : "received " + std::to_string(f.downloaded) + " bytes over the network for its " +
                                    std::to_string(f.expected) + " in " + std::to_string(f.retries + 1) + " attempts";
        if (f.received && f.received != f.downloaded) got += ", " + std::to_string(f.received) + " kept for a resume";
        std::fprintf(stderr, "::error::ckpt fetch %s: %s (%s; nothing published for it) [%s]\n", label.c_str(),
                     msg.c_str(), got.c_str(), code(f.kind).c_str());
      } else if (f.cached && f.downloaded == 0) {
        ++cached;
      } else {
        ++fetched;
      }
      bytes += f.expected;
    }
    if (!r.ok && r.files.empty()) {
      std::fprintf(stderr, "::error::ckpt fetch %s: %s [%s]\n", label.c_str(), r.error.c_str(), code(r.kind).c_str());
      status = 1;
      continue;
    }
    double rate = r.seconds > 0 ? r.bytes_downloaded / r.seconds : 0;
    std::printf("%s %s -> %s: %zu files (%zu downloaded, %zu cached, %zu failed), %s, %s over the network in %.2f s (%s/s)\n",
                r.ok ? "fetched" : "FAILED", label.c_str(), r.commit.empty() ? "?" : r.commit.c_str(), r.files.size(),
                fetched, cached, failed, progress_bytes(bytes).c_str(), progress_bytes(r.bytes_downloaded).c_str(), r.seconds,
                progress_bytes(rate).c_str());
    if (!r.ok) {
      std::fprintf(stderr, "::error::ckpt fetch %s: %s [%s]\n", label.c_str(), r.error.c_str(), code(r.kind).c_str());
      status = 1;
      continue;
    }
    std::printf("snapshot: %s\n", r.snapshot_dir.string().c_str());
    std::fflush(stdout);
    bool partial = !job.paths.empty() || !o.include.empty() || !o.exclude.empty();
    if (no_verify) continue;
    if (partial) {
      if (!quiet) std::printf("verify: skipped (only part of the repo was requested)\n");
      continue;
    }
    auto verify_start = std::chrono::steady_clock::now();
    LoadResult loaded = load_checkpoint(r.snapshot_dir.string());
    if (loaded.error) {
      std::fprintf(stderr, "::error::ckpt fetch %s: verify could not load the snapshot: %s\n", label.c_str(),
                   loaded.error->message.c_str());
      status = 1;
      continue;
    }
    auto findings = run_checks(*loaded.checkpoint);
    Report rep;
    rep.target = r.snapshot_dir.string();
    rep.root = loaded.checkpoint->root.string();
    rep.findings = findings;
    rep.summary = summary_for(rep.findings, *loaded.checkpoint);
    rep.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - verify_start).count();
    std::string text = render_text(rep, false);
    std::printf("verify:\n%s", text.c_str());
    std::fflush(stdout);
    if (rep.summary.errors > 0) {
      std::fprintf(stderr, "::%s::ckpt fetch %s: every file was fetched and hash-verified, but the snapshot fails ckpt verify (%llu errors)%s\n",
                   fail_on_verify ? "error" : "warning", label.c_str(),
                   static_cast<unsigned long long>(rep.summary.errors),
                   fail_on_verify ? "" : "; --fail-on-verify makes this fail the fetch");
      if (fail_on_verify) status = 1;
    }
  }
  return status;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("fetch", "download a repo into the HF cache with stall detection, retries, resume and hash checks", run_fetch);

}  // namespace ckpt::cli
