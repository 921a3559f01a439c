#pragma once
// Work split across threads for the short, bursty parallel phases of a verify run (shard
// headers, the two halves of a large index, the check families).
//
// Why a resident pool rather than threads per phase: on the 2-core VMs this project is
// measured on, a new thread first ran 1.7-2.6 ms after pthread_create, and often shared the
// creating thread's core (a 6 ms loop took 10-12 ms); a helper already spinning picked work
// up within 1-3 us and ran on the other core (bench/README.md, "Fifth session").
#include <cstddef>
#include <functional>

namespace ckpt::parallel {

// Runs task(0) .. task(n - 1), each exactly once, on the calling thread and up to
// `threads - 1` helper threads; returns when all have finished. threads <= 1 runs them in
// order on the caller. If tasks throw, the first exception is rethrown once every task has
// finished. A call made while another is running (from a task, or from another thread) runs
// its tasks on its own caller.
void run(size_t n, unsigned threads, const std::function<void(size_t)>& task);

// Starts the helpers now, so that the first run() finds them awake. Helpers wait for work
// spinning for a few milliseconds, then sleep until the next run().
void warm_up();

}  // namespace ckpt::parallel
