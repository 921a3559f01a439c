// Phase timings for `ckpt verify` (CKPT_TIMINGS=1 prints them to stderr): where a run's
// wall and CPU time go, without a profiler. Costs one getenv when disabled.
#pragma once

namespace ckpt::timings {

bool enabled();
// Record the end of a phase (wall and process CPU time since the previous mark).
void mark(const char* phase);
// Print the recorded phases to stderr (no-op when disabled).
void report();

}  // namespace ckpt::timings
