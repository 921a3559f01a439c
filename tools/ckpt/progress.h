// A progress display for long byte-counting work (verify --deep): on a terminal a bar with
// bytes, rate and ETA redrawn in place on stderr; when stderr is not a terminal or CI is set,
// one plain line every `interval` seconds and a last one at the end; nothing when quiet.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace ckpt::cli {

inline std::string progress_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

inline std::string progress_eta(double secs) {
  if (!std::isfinite(secs) || secs < 0 || secs > 360000) return "--";
  char buf[32];
  int s = static_cast<int>(secs);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

class ByteProgress {
 public:
  // `done` and `total` are read by the display thread while the work runs.
  ByteProgress(std::string label, const std::atomic<uint64_t>& done, const std::atomic<uint64_t>& total, bool quiet,
               double interval)
      : label_(std::move(label)), done_(done), total_(total), interval_(interval) {
    tty_ = isatty(STDERR_FILENO) && !std::getenv("CI");
    start_ = std::chrono::steady_clock::now();
    if (!quiet) thread_ = std::thread([this] { loop(); });
  }
  ~ByteProgress() { stop(); }
  ByteProgress(const ByteProgress&) = delete;
  ByteProgress& operator=(const ByteProgress&) = delete;

  void stop() {
    {
      std::lock_guard lk(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (!thread_.joinable()) return;
    thread_.join();
    if (tty_ && drawn_) std::fprintf(stderr, "\r\x1b[2K");
    if (!tty_ && elapsed() >= interval_) std::fprintf(stderr, "progress: %s\n", line().c_str());
    std::fflush(stderr);
  }

  std::string line() const {
    uint64_t done = done_.load(std::memory_order_relaxed), total = std::max(total_.load(), done);
    double el = elapsed(), rate = el > 0 ? done / el : 0;
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %s / %s (%.0f%%) %s/s ETA %s", label_.c_str(), progress_bytes(done).c_str(),
                  progress_bytes(total).c_str(), total ? 100.0 * done / total : 100.0, progress_bytes(rate).c_str(),
                  progress_eta(rate > 0 ? (total - done) / rate : NAN).c_str());
    return buf;
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void loop() {
    auto last = start_;
    std::unique_lock lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::milliseconds(tty_ ? 200 : 100), [this] { return stopped_; })) {
      auto now = std::chrono::steady_clock::now();
      if (tty_) {
        uint64_t done = done_.load(), total = std::max(total_.load(), done);
        int n = total ? static_cast<int>(30.0 * done / total) : 0;
        std::fprintf(stderr, "\r\x1b[2K[%s%s] %s", std::string(n, '#').c_str(), std::string(30 - n, '.').c_str(),
                     line().c_str());
        drawn_ = true;
        std::fflush(stderr);
      } else if (std::chrono::duration<double>(now - last).count() >= interval_) {
        last = now;
        std::fprintf(stderr, "progress: %s\n", line().c_str());
        std::fflush(stderr);
      }
    }
  }

  std::string label_;
  const std::atomic<uint64_t>& done_;
  const std::atomic<uint64_t>& total_;
  double interval_;
  bool tty_ = false, drawn_ = false, stopped_ = false;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace ckpt::cli
