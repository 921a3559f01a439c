#include "ckpt/timings.h"

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <atomic>
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

struct Task {
  std::string_view name;  // a family's static name
  double wall_ms, cpu_ms;
  int after_mark;  // printed after this many phase marks
};
Task g_tasks[32];
std::atomic<int> g_task_count{0};

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

double wall_now_ms() { return now_ms(CLOCK_MONOTONIC); }
double thread_cpu_now_ms() { return now_ms(CLOCK_THREAD_CPUTIME_ID); }

void task(std::string_view name, double wall_ms, double thread_cpu_ms) {
  if (!enabled()) return;
  const int i = g_task_count.fetch_add(1, std::memory_order_relaxed);
  if (i >= 32) return;
  // g_count is read racily by a worker; it only decides where the line is printed.
  g_tasks[i] = {name, wall_ms, thread_cpu_ms, g_count + 1};
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
    const int tasks = std::min(g_task_count.load(), 32);
    for (int t = 0; t < tasks; ++t)
      if (g_tasks[t].after_mark == i + 1)
        std::fprintf(stderr, "  task %-21.*s %9.2f %9.2f\n", static_cast<int>(g_tasks[t].name.size()), g_tasks[t].name.data(), g_tasks[t].wall_ms, g_tasks[t].cpu_ms);
  }
  std::fprintf(stderr, "%-28s %9.2f %9.2f\n", "total (since first use)", w - g_wall0, c - g_cpu0);
}

}  // namespace ckpt::timings
