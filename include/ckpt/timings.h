// Phase timings for `ckpt verify` (CKPT_TIMINGS=1 prints them to stderr): where a run's
// wall and CPU time go, without a profiler. Costs one getenv when disabled.
#pragma once

#include <string_view>

namespace ckpt::timings {

bool enabled();
// Record the end of a phase (wall and process CPU time since the previous mark).
void mark(const char* phase);
// Record one task of a parallel phase (e.g. a check family) run on any thread: its wall time
// and the CPU time of the thread that ran it. Printed under the phase that follows.
void task(std::string_view name, double wall_ms, double thread_cpu_ms);
// Wall and thread-CPU clocks, in ms, for task() callers.
double wall_now_ms();
double thread_cpu_now_ms();
// Print the recorded phases to stderr (no-op when disabled).
void report();

}  // namespace ckpt::timings
