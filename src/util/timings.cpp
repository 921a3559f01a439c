#include "ckpt/timings.h"

#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace ckpt::timings {

namespace {

struct Mark {
  const char* phase;
  double wall_ms, cpu_ms;
};

double now_ms(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Phases are marked from the main thread only; a fixed array keeps this allocation-free.
Mark g_marks[32];
int g_count = 0;
double g_wall0 = 0, g_cpu0 = 0;

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("CKPT_TIMINGS");
    if (!v || !*v || *v == '0') return false;
    g_wall0 = now_ms(CLOCK_MONOTONIC);
    g_cpu0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
    return true;
  }();
  return on;
}

void mark(const char* phase) {
  if (!enabled() || g_count >= 32) return;
  g_marks[g_count++] = {phase, now_ms(CLOCK_MONOTONIC), now_ms(CLOCK_PROCESS_CPUTIME_ID)};
}

void report() {
  if (!enabled()) return;
  double w = g_wall0, c = g_cpu0;
  std::fprintf(stderr, "%-28s %9s %9s\n", "phase", "wall ms", "cpu ms");
  for (int i = 0; i < g_count; ++i) {
    std::fprintf(stderr, "%-28s %9.2f %9.2f\n", g_marks[i].phase, g_marks[i].wall_ms - w, g_marks[i].cpu_ms - c);
    w = g_marks[i].wall_ms;
    c = g_marks[i].cpu_ms;
  }
  std::fprintf(stderr, "%-28s %9.2f %9.2f\n", "total (since first use)", w - g_wall0, c - g_cpu0);
}

}  // namespace ckpt::timings
