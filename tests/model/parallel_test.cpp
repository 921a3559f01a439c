// util/parallel: every task runs exactly once whatever the thread count, calls made from a task
// or from several threads at once complete, and a throwing task is reported only after the
// others have finished.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/parallel.h"

namespace ckpt::ftest {
namespace {

TEST(parallel_run, every_task_once_for_any_thread_count) {
  for (unsigned threads : {0u, 1u, 2u, 3u, 8u})
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
      std::vector<std::atomic<int>> ran(n);
      parallel::run(n, threads, [&](size_t i) { ran[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(ran[i].load(), 1) << "task " << i << " of " << n << ", threads " << threads;
    }
}

TEST(parallel_run, back_to_back_jobs_never_mix) {
  // Many short jobs in a row: a helper finishing one job must not take an index of the next
  // with the previous job's task.
  for (int round = 0; round < 2000; ++round) {
    const size_t n = 1 + round % 5;
    std::vector<std::atomic<int>> ran(n);
    parallel::run(n, 2, [&](size_t i) { ran[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(ran[i].load(), 1) << "round " << round;
  }
}

TEST(parallel_run, nested_and_concurrent_calls_complete) {
  std::atomic<int> inner{0};
  parallel::run(4, 2, [&](size_t) { parallel::run(3, 2, [&](size_t) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 12);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) parallel::run(10, 2, [&](size_t) { total.fetch_add(1); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 10);
}

TEST(parallel_run, a_throwing_task_is_reported_after_all_have_run) {
  std::atomic<int> finished{0};
  EXPECT_THROW(parallel::run(50, 2,
                             [&](size_t i) {
                               if (i == 3) throw std::runtime_error("task 3");
                               std::this_thread::sleep_for(std::chrono::microseconds(200));
                               finished.fetch_add(1);
                             }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 49) << "run() returned before the other tasks had finished";
  // The pool is usable afterwards, and the failure does not leak into the next job.
  std::atomic<int> ran{0};
  EXPECT_NO_THROW(parallel::run(5, 2, [&](size_t) { ran.fetch_add(1); }));
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace ckpt::ftest
