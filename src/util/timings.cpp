#include "ckpt/timings.h"

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ckpt::timings {

namespace {

struct Mark {
  const char* phase;
  double wall_ms, cpu_ms;
  double heap_mb, rss_mb;  // malloc'd bytes in use; resident set (pages this process has touched)
};

double heap_mb() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1 << 20);
}

double rss_mb() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double now_ms(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Phases are marked from the main thread only; a fixed array keeps this allocation-free.
Mark g_marks[32];
int g_count = 0;
double g_wall0 = 0, g_cpu0 = 0;
// The thread that started the clock; marks from any other (batch verify's workers run the same
// pipeline) are ignored rather than racing on the array.
std::thread::id g_owner;

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("CKPT_TIMINGS");
    if (!v || !*v || *v == '0') return false;
    g_owner = std::this_thread::get_id();
    g_wall0 = now_ms(CLOCK_MONOTONIC);
    g_cpu0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    return true;
  }();
  return on;
}

void mark(const char* phase) {
  if (!enabled() || g_count >= 32 || std::this_thread::get_id() != g_owner) return;
  g_marks[g_count++] = {phase, now_ms(CLOCK_MONOTONIC), now_ms(CLOCK_PROCESS_CPUTIME_ID), heap_mb(), rss_mb()};
}

void report() {
  if (!enabled()) return;
  double w = g_wall0, c = g_cpu0;
  std::fprintf(stderr, "%-28s %9s %9s %9s %9s\n", "phase", "wall ms", "cpu ms", "heap MB", "rss MB");
  for (int i = 0; i < g_count; ++i) {
    std::fprintf(stderr, "%-28s %9.2f %9.2f %9.1f %9.1f\n", g_marks[i].phase, g_marks[i].wall_ms - w,
                 g_marks[i].cpu_ms - c, g_marks[i].heap_mb, g_marks[i].rss_mb);
    w = g_marks[i].wall_ms;
    c = g_marks[i].cpu_ms;
  }
  std::fprintf(stderr, "%-28s %9.2f %9.2f\n", "total (since first use)", w - g_wall0, c - g_cpu0);
}

}  // namespace ckpt::timings
