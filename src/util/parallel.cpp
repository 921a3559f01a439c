#include "util/parallel.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace ckpt::parallel {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// One job at a time. The claim word packs the job's task count and the next unclaimed index,
// so a claim is one compare-and-swap and a helper can never take an index of one job while
// reading the count of another; the task pointer is read only after a successful claim, and
// the job cannot end (nor the next begin) before that claimed task has finished.
class Pool {
 public:
  explicit Pool(unsigned helpers) {
    for (unsigned id = 0; id < helpers; ++id) std::thread([this, id] { serve(id); }).detach();
  }

  void run(size_t n, unsigned threads, const std::function<void(size_t)>& task) {
    std::unique_lock<std::mutex> one_job(job_mutex_, std::try_to_lock);
    if (!one_job.owns_lock() || threads <= 1 || n <= 1 || n >= kMaxTasks) {
      for (size_t i = 0; i < n; ++i) task(i);
      return;
    }
    helpers_allowed_.store(threads - 1, std::memory_order_relaxed);
    task_.store(&task, std::memory_order_relaxed);
    pending_.store(n, std::memory_order_relaxed);
    claims_.store(static_cast<uint64_t>(n) << 32, std::memory_order_release);  // publishes the three above
    {
      std::lock_guard<std::mutex> lk(sleep_mutex_);  // a helper about to sleep sees the work or the notify
    }
    wake_.notify_all();
    size_t i;
    while (claim(i)) {
      run_one(task, i);
      finish_one();
    }
    // Every index is claimed; wait for the helpers' last tasks. A short spin covers the common
    // near-simultaneous finish; after it the caller sleeps (futex), because one long task (the
    // conformance pass of a 100k-tensor model: hundreds of ms) must not be matched by as much
    // CPU burnt spinning here.
    for (int k = 0; k < 512 && pending_.load(std::memory_order_acquire) != 0; ++k) cpu_relax();
    for (size_t left; (left = pending_.load(std::memory_order_acquire)) != 0;)
      pending_.wait(left, std::memory_order_acquire);
    // Every task has finished (nothing still reads the caller's frame): now a failure may leave.
    std::exception_ptr failure;
    {
      std::lock_guard<std::mutex> lk(failure_mutex_);
      failure = std::exchange(failure_, nullptr);
    }
    if (failure) std::rethrow_exception(failure);
  }

 private:
  static constexpr size_t kMaxTasks = size_t{1} << 31;
  // How long an idle helper spins before it sleeps. Long enough to catch the next job of a
  // pipeline stage (a futex wake costs tens of microseconds); short, because on two cores a
  // spinning helper takes the core from the threads still working (the tokenizer's merge
  // checker, a long family): 5 ms cost ~4% of a DeepSeek-V3-sized verify's CPU.
  static constexpr auto kSpin = std::chrono::microseconds(200);

  // A task that throws must not unwind past the others still running: the first exception is
  // kept and rethrown by run() once all have finished.
  void run_one(const std::function<void(size_t)>& task, size_t i) {
    try {
      task(i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(failure_mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
  }
  void finish_one() {
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
  }
  bool work_available() const {
    const uint64_t c = claims_.load(std::memory_order_acquire);
    return (c & 0xffffffffu) < (c >> 32);
  }
  bool claim(size_t& i) {
    uint64_t c = claims_.load(std::memory_order_acquire);
    while ((c & 0xffffffffu) < (c >> 32))
      if (claims_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        i = static_cast<size_t>(c & 0xffffffffu);
        return true;
      }
    return false;
  }
  void serve(unsigned id) {
    auto idle_since = std::chrono::steady_clock::now();
    for (;;) {
      size_t i;
      if (id < helpers_allowed_.load(std::memory_order_relaxed) && claim(i)) {
        run_one(*task_.load(std::memory_order_acquire), i);
        finish_one();
        idle_since = std::chrono::steady_clock::now();
        continue;
      }
      if (std::chrono::steady_clock::now() - idle_since < kSpin) {
        for (int k = 0; k < 64; ++k) cpu_relax();
        continue;
      }
      std::unique_lock<std::mutex> lk(sleep_mutex_);
      wake_.wait(lk, [this] { return work_available(); });
      idle_since = std::chrono::steady_clock::now();
    }
  }

  std::mutex job_mutex_;
  std::atomic<uint64_t> claims_{0};  // task count << 32 | next index
  std::atomic<const std::function<void(size_t)>*> task_{nullptr};
  std::atomic<size_t> pending_{0};
  std::atomic<unsigned> helpers_allowed_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::mutex failure_mutex_;
  std::exception_ptr failure_;
};

Pool& pool() {
  // Never destroyed: helpers are detached and may still be spinning while the process exits.
  static Pool* p = new Pool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return *p;
}

}  // namespace

void run(size_t n, unsigned threads, const std::function<void(size_t)>& task) { pool().run(n, threads, task); }

void warm_up() { pool(); }

}  // namespace ckpt::parallel
