// Waiting for another process's per-blob lock (.locks/<folder>/<etag>.lock): bounded like a
// stalled download. A holder that makes progress (bytes added to its .incomplete, or a ckpt
// holder's heartbeat on the lock file while it retries) is waited for; a holder that does
// neither for the stall window makes the waiter give up loudly, naming the holder, with
// nothing published and the holder's temp file untouched.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <fstream>

#include "hub_fixture.h"

using namespace hubtest;

namespace {

struct HeldLock {
  int fd = -1;
  explicit HeldLock(const fs::path& p) {
    fs::create_directories(p.parent_path());
    fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
    // A second open file description: flock excludes it even within this process.
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) throw std::runtime_error("cannot take the test lock");
  }
  ~HeldLock() { release(); }
  void release() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

void append(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::app);
  f << bytes;
}

}  // namespace

TEST_F(HubTest, LockHeldByAHungProcessFailsAfterTheStallWindow) {
  const MockFile& m = file("model.safetensors");
  const std::string etag = MockHub::etag_of(m);
  HeldLock held(cache() / ".locks" / "models--org--model" / (etag + ".lock"));
  fs::path incomplete = repo_dir() / "blobs" / (etag + ".incomplete");
  fs::create_directories(incomplete.parent_path());
  append(incomplete, m.content.substr(0, 1000));  // the holder got 1000 bytes, then froze

  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());  // stall_timeout 1 s: the lock wait gives up after max(1, 2) s
  double took = since(t0);
  EXPECT_GE(took, 2.0);
  EXPECT_LT(took, 15.0);
  EXPECT_FALSE(r.ok);
  auto* fr = result_for(r, "model.safetensors");
  ASSERT_NE(fr, nullptr);
  EXPECT_EQ(fr->kind, hub::ErrorKind::network);
  EXPECT_NE(fr->error.find("no progress"), std::string::npos) << fr->error;
  EXPECT_NE(fr->error.find("pid " + std::to_string(::getpid())), std::string::npos) << fr->error;
  EXPECT_NE(fr->error.find(etag + ".lock"), std::string::npos) << fr->error;
  expect_not_published(kC1, m);
  EXPECT_EQ(fs::file_size(incomplete), 1000u);  // the holder's temp file is left alone
  expect_published(kC1, file("config.json"));
  expect_published(kC1, file("sub/dir/tokenizer.json"));
  EXPECT_FALSE(fs::exists(repo_dir() / "refs" / "main"));
  EXPECT_EQ(hub.count("hub", "GET", "/org/model/resolve/" + kC1 + "/model.safetensors"), 0);
}

TEST_F(HubTest, LockWaitLastsWhileTheHolderWritesItsIncomplete) {
  const MockFile& m = file("model.safetensors");
  const std::string etag = MockHub::etag_of(m);
  auto held = std::make_unique<HeldLock>(cache() / ".locks" / "models--org--model" / (etag + ".lock"));
  fs::path incomplete = repo_dir() / "blobs" / (etag + ".incomplete");
  fs::create_directories(incomplete.parent_path());
  // A huggingface_hub <= 1.17 holder (no heartbeat): 3.6 s of steady writes, longer than the
  // 2 s window, then the last bytes and the lock released without publishing.
  std::thread holder([&] {
    const size_t step = m.content.size() / 16;
    for (size_t i = 0; i < 12; ++i) {
      append(incomplete, m.content.substr(i * step, step));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    append(incomplete, m.content.substr(12 * step));
    held->release();
  });
  auto t0 = std::chrono::steady_clock::now();
  auto r = fetch(opts());
  double took = since(t0);
  holder.join();
  for (const auto& f : r.files) EXPECT_TRUE(f.ok) << f.error;
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_GE(took, 3.0);
  for (const auto& f : standard_files()) expect_published(kC1, f);
  // The holder's complete .incomplete was verified and published: no download of it here.
  EXPECT_EQ(hub.count("hub", "GET", "/org/model/resolve/" + kC1 + "/model.safetensors"), 0);
}

TEST_F(HubTest, LockWaitLastsWhileAnotherFetchWaitsOutARetryAfter) {
  // Fetch A holds the blob's lock through a 3 s Retry-After (no bytes move, only its heartbeat);
  // fetch B, waiting for that lock with a 2 s window, must not give up, and finds the blob published.
  Fault f{FaultKind::rate_limit, 0, 3, 429, 1};
  hub.set_fault(kRepo, "model.safetensors", f);
  const std::string get_prefix = "/org/model/resolve/" + kC1 + "/model.safetensors";
  hub::FetchResult ra;
  std::thread a([&] { ra = fetch(opts()); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (hub.count("hub", "GET", get_prefix) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto t0 = std::chrono::steady_clock::now();
  auto rb = fetch(opts());
  double took = since(t0);
  a.join();
  ASSERT_TRUE(ra.ok) << ra.error;
  ASSERT_TRUE(rb.ok) << rb.error;
  EXPECT_GE(took, 2.0);  // B really waited past its window
  auto* fb = result_for(rb, "model.safetensors");
  ASSERT_NE(fb, nullptr);
  EXPECT_TRUE(fb->cached);
  EXPECT_EQ(hub.count("hub", "GET", get_prefix), 2);  // A's 429 and A's download; none from B
  for (const auto& fl : standard_files()) expect_published(kC1, fl);
}
