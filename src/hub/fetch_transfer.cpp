// The fetch pipeline, transfer stage: one blob into a temp file, with stall detection,
// retries, resume, parallel ranges, a per-thread write buffer and the content hash.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <optional>

#include "hub/fetch_internal.h"

namespace ckpt::hub::pipeline {

// ---------------------------------------------------------------------------------------
// Transfer of one blob into a temp file, with resume, ranges, retries and verification.

// (Declared in fetch_internal.h: TransferState points to it.)
// Hashes the written, contiguous prefix of the temp file on a helper thread while parallel
// ranges (or a resumed stream) land, so the hash is nearly done when the last byte is.
class PrefixHasher {
 public:
  PrefixHasher(HashState& hs, const fs::path& p) : hs_(hs), path_(p) {
    if (hs_.active()) thread_ = std::thread([this] { run(); });
  }
  ~PrefixHasher() { stop(); }
  PrefixHasher(const PrefixHasher&) = delete;
  PrefixHasher& operator=(const PrefixHasher&) = delete;
  void advance(uint64_t contiguous) {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (contiguous <= target_) return;
      target_ = contiguous;
    }
    cv_.notify_one();
  }
  // Stops promptly; whatever is left is hashed by HashState::catch_up afterwards.
  void stop() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      hs_.broken = true;
      return;
    }
    constexpr size_t kChunk = 4u << 20;
    std::unique_ptr<char[]> buf(new char[kChunk]);
    while (true) {
      uint64_t target;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || target_ > hs_.hashed; });
        if (stop_) break;
        target = std::min(target_, hs_.size);
      }
      size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, target - hs_.hashed));
      ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(hs_.hashed));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        hs_.broken = true;
        break;
      }
      hs_.update(buf.get(), static_cast<size_t>(n));
    }
    ::close(fd);
  }
  HashState& hs_;
  fs::path path_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t target_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

namespace {

struct AttemptResult {
  bool complete = false;      // the temp file holds `size` bytes
  bool restart = false;       // throw the temp file away and start from 0
  bool no_ranges = false;     // server ignored a Range (parallel mode falls back)
  bool fatal = false;
  Outcome outcome;
  uint64_t progressed = 0;
};

// libcurl (7.88) hands the write callback at most 16 KiB at a time; the bytes go through a
// per-thread buffer so the file sees a quarter of the pwrite calls.
// 64 KiB measured best on the 2-core bench machine: 16 KiB costs more system calls, and from
// 128 KiB on the kernel's copy into the page cache got markedly slower (cache misses with
// eight transfers sharing two cores); bench/README.md, Fetch.
constexpr size_t kWriteBuffer = 64u << 10;
char* write_buffer() {
  thread_local std::unique_ptr<char[]> b(new char[kWriteBuffer]);
  return b.get();
}

}  // namespace

// (Declared in fetch_internal.h: TransferState points to it.)
// A lone in-order stream with a core to spare: the write buffers go to a helper thread that
// hashes them from memory, so hashing overlaps receiving and no byte is read back from the
// page cache (PrefixHasher's pread costed a copy of every byte).
// A ring of slots: the receiver fills one while the helper hashes the others. Hand-offs go in
// batches (the helper is woken once kBatch buffers wait and hashes all that wait, outside the
// lock; the receiver waits only when every slot is queued): one wake-up per buffer cost
// 18,865 futex calls per 512 MiB, and under load each one a context switch.
// Direct mode (a file opened with O_DIRECT): the slots are 1 MiB, page-aligned, and a second
// helper writes them to the file, bypassing the page cache, so the receiver only receives and
// copies; a slot is reused once it is both hashed and written. A slot whose offset or length
// is not a multiple of the page size (the file's tail, a response that ended mid-slot) is
// written through the buffered descriptor instead.
class MemoryHasher {
 public:
  static constexpr size_t kSlots = 16, kBatch = 8;  // direct mode: 16 MiB of slots per transfer
  static constexpr size_t kDirectSlot = 1u << 20, kDirectAlign = 4096;
  // direct_fd >= 0: direct mode (takes ownership of it); buffered_fd is then the file's
  // ordinary descriptor, for the slots direct I/O cannot take.
  MemoryHasher(HashState& hs, int direct_fd = -1, int buffered_fd = -1)
      : hs_(hs), direct_fd_(direct_fd), buffered_fd_(buffered_fd) {
    slot_size_ = direct_fd_ >= 0 ? kDirectSlot : kWriteBuffer;
    for (auto& b : slots_) {
      void* m = nullptr;
      if (::posix_memalign(&m, kDirectAlign, slot_size_) != 0) throw std::bad_alloc();
      b.reset(static_cast<char*>(m));
    }
    thread_ = std::thread([this] { run_hash(); });
    if (direct_fd_ >= 0) writer_ = std::thread([this] { run_write(); });
  }
  ~MemoryHasher() {
    finish();
    if (direct_fd_ >= 0) ::close(direct_fd_);
  }
  MemoryHasher(const MemoryHasher&) = delete;
  MemoryHasher& operator=(const MemoryHasher&) = delete;
  // True when this object writes the submitted buffers itself (direct mode).
  bool writes() const { return direct_fd_ >= 0; }
  size_t slot_size() const { return slot_size_; }
  // The buffer the receiver fills now.
  char* buffer() {
    std::lock_guard<std::mutex> g(mu_);
    return slots_[head_ % kSlots].get();
  }
  // The receiver's current buffer holds `n` bytes for file offset `offset` (already written
  // to the file unless writes()): hash (and write) them next. Returns the buffer to fill
  // next, waiting while every other one is still queued.
  char* submit(size_t n, uint64_t offset) {
    std::unique_lock<std::mutex> l(mu_);
    lens_[head_ % kSlots] = n;
    offsets_[head_ % kSlots] = offset;
    ++head_;
    const bool wake = head_ - hash_tail_ >= kBatch;
    if (head_ - oldest() == kSlots) {
      work_.notify_one();
      space_.wait(l, [&] { return head_ - oldest() < kSlots; });
    }
    char* next = slots_[head_ % kSlots].get();
    l.unlock();
    if (wake) work_.notify_one();  // outside the lock, so the helper does not wake into it
    if (writes()) write_work_.notify_one();
    return next;
  }
  // Hashes (and writes) what was submitted, then stops the helpers: hs.hashed is exact
  // afterwards. Returns false, with the error, when a write failed: the file then holds the
  // submitted bytes only up to written_upto().
  bool finish(std::string* err = nullptr) {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    work_.notify_one();
    write_work_.notify_one();
    if (thread_.joinable()) thread_.join();
    if (writer_.joinable()) writer_.join();
    if (!write_error_.empty() && err) *err = write_error_;
    return write_error_.empty();
  }
  uint64_t written_upto() const { return written_upto_; }
  // A write failed (direct mode): the receiver stops instead of downloading the rest for nothing.
  bool failed() const { return failed_.load(std::memory_order_relaxed); }

 private:
  uint64_t oldest() const { return writes() ? std::min(hash_tail_, write_tail_) : hash_tail_; }
  void run_hash() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      work_.wait(l, [&] { return stop_ || head_ - hash_tail_ >= kBatch; });
      if (hash_tail_ == head_) break;  // stopped and drained
      // Everything queued now, outside the lock; the receiver only touches slots past head_.
      uint64_t from = hash_tail_, to = head_;
      l.unlock();
      for (uint64_t k = from; k < to; ++k) hs_.update(slots_[k % kSlots].get(), lens_[k % kSlots]);
      l.lock();
      hash_tail_ = to;
      space_.notify_one();
    }
  }
  void run_write() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      write_work_.wait(l, [&] { return stop_ || head_ > write_tail_; });
      if (write_tail_ == head_) break;
      uint64_t from = write_tail_, to = head_;
      l.unlock();
      for (uint64_t k = from; k < to; ++k) {
        const char* d = slots_[k % kSlots].get();
        const size_t n = lens_[k % kSlots];
        const uint64_t off = offsets_[k % kSlots];
        if (!write_error_.empty()) continue;  // drain without writing past the failure
        const bool direct = !direct_refused_ && off % kDirectAlign == 0 && n % kDirectAlign == 0;
        if (!write_all(direct ? direct_fd_ : buffered_fd_, d, n, off)) {
          // A filesystem that opens with O_DIRECT but refuses the write: buffered from here on.
          if (direct && errno == EINVAL) {
            direct_refused_ = true;
            if (write_all(buffered_fd_, d, n, off)) {
              written_upto_ = off + n;
              continue;
            }
          }
          write_error_ = std::string("write failed: ") + std::strerror(errno);
          failed_ = true;
          continue;
        }
        written_upto_ = off + n;
      }
      l.lock();
      write_tail_ = to;
      space_.notify_one();
    }
  }
  static bool write_all(int fd, const char* d, size_t n, uint64_t off) {
    for (size_t done = 0; done < n;) {
      ssize_t w = ::pwrite(fd, d + done, n - done, static_cast<off_t>(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        if (w == 0) errno = EIO;
        return false;
      }
      done += static_cast<size_t>(w);
    }
    return true;
  }
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };
  HashState& hs_;
  int direct_fd_, buffered_fd_;
  size_t slot_size_;
  std::unique_ptr<char, FreeDeleter> slots_[kSlots];
  size_t lens_[kSlots] = {};
  uint64_t offsets_[kSlots] = {};
  uint64_t head_ = 0, hash_tail_ = 0, write_tail_ = 0;  // submitted, hashed, written
  std::mutex mu_;
  // The hasher waits for work, the writer for work, the receiver for space.
  std::condition_variable work_, write_work_, space_;
  bool stop_ = false;
  std::string write_error_;  // set by the writer only; read after it is joined
  uint64_t written_upto_ = 0;
  bool direct_refused_ = false;  // the writer's own
  std::atomic<bool> failed_{false};
  std::thread thread_, writer_;
};

namespace {

bool pwrite_all(int fd, const char* d, size_t n, uint64_t off, std::string* err) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::pwrite(fd, d + done, n - done, static_cast<off_t>(off + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = std::string("write failed: ") + (w < 0 ? std::strerror(errno) : "no progress");
      return false;
    }
    done += static_cast<size_t>(w);
  }
  return true;
}

std::string content_encoding(const HeaderList& hl) {
  for (const auto& [k, v] : hl)
    if (k == "content-encoding") {
      std::string e;
      for (char c : v) e += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (e != "identity" && !e.empty()) return e;
    }
  return {};
}

// GET `url` (following redirects, auth only on the endpoint's origin) for bytes [from, to),
// writing them at their offsets in fd. `pos` advances as bytes reach the file. A 206 that
// covers only the start of the asked range is accepted and the rest asked for again.
AttemptResult get_range(TransferState& ts, const std::string& url0, int fd, uint64_t from, uint64_t to,
                        uint64_t size, bool whole_file_mode, std::atomic<uint64_t>& pos,
                        const std::atomic<bool>* abort_flag) {
  Ctx& ctx = ts.ctx;
  AttemptResult ar;
  std::string url = url0;
  uint64_t cur = from;  // next byte to ask for
  // A lone stream's hash runs on a helper thread from the write buffers (whole-file mode only).
  MemoryHasher* mh = whole_file_mode ? ts.memory_hasher : nullptr;
  char* buf = mh ? mh->buffer() : write_buffer();
  int hops = 0;
  for (int requests = 0; requests < 100000; ++requests) {
    if (hops > 10) break;
    HttpRequest req = ctx.base_request("GET", url);
    if (cur > 0 || to < size || !whole_file_mode)
      req.headers.push_back("Range: bytes=" + std::to_string(cur) + "-" + std::to_string(to - 1));
    bool bad = false;
    std::string bad_msg;
    bool redirect = false;
    long seen_status = 0;
    std::string err_body;
    uint64_t write_pos = cur;  // next byte expected from the body
    uint64_t range_end = to;   // end of what this response carries
    // Buffered writes: buf holds [buf_start, buf_start + used).
    uint64_t buf_start = cur;
    size_t used = 0;
    std::string write_err;
    uint64_t kicked = cur;  // durable mode: writeback already started for [.., kicked)
    auto flush = [&]() {
      if (used == 0) return true;
      if (mh && mh->writes()) {
        buf = mh->submit(used, buf_start);  // written by the helper, straight to the file
        if (mh->failed()) {
          write_err = "write failed";
          return false;
        }
      } else {
        if (!pwrite_all(fd, buf, used, buf_start, &write_err)) return false;
        if (mh) buf = mh->submit(used, buf_start);
      }
      buf_start += used;
      used = 0;
      pos = buf_start;
      if (ctx.opts.durable && buf_start - kicked >= (8u << 20)) {
        // Start writeback as the bytes arrive, so the fdatasync before publishing has little left.
        ::sync_file_range(fd, static_cast<off_t>(kicked), static_cast<off_t>(buf_start - kicked), SYNC_FILE_RANGE_WRITE);
        kicked = buf_start;
      }
      if (ts.prefix_hasher) ts.prefix_hasher->advance(buf_start);
      return true;
    };
    req.on_headers = [&](long status, const HeaderList& hl) {
      seen_status = status;
      HttpResponse tmp;
      tmp.headers = hl;
      if (status >= 300 && status < 400) {
        redirect = !tmp.header("location").empty();
        return true;  // a body, if any, is discarded; no Location is reported below
      }
      if (status >= 400) return true;  // error body collected for the message
      std::string enc = content_encoding(hl);
      if (status == 206) {
        // Content-Range: bytes a-b/total must start where we asked and stay inside it.
        auto cr = tmp.header("content-range");
        auto range = parse_content_range(cr);
        if (!enc.empty()) {
          if (!whole_file_mode) {  // ranges come back content-encoded: useless for parts
            ar.no_ranges = true;
            return false;
          }
          bad = true;
          bad_msg = "a ranged response came back with Content-Encoding: " + enc;
          return false;
        }
        if (!range || range->unsatisfied || range->first != cur || range->last >= to ||
            (range->total && *range->total != size)) {
          bad = true;
          bad_msg = "Content-Range '" + cr + "' does not match the requested bytes " + std::to_string(cur) + "-" +
                    std::to_string(to - 1) + "/" + std::to_string(size);
          return false;
        }
        range_end = range->last + 1;
        return true;
      }
      if (status == 200) {
        if (!whole_file_mode) {  // parallel part: the server ignores ranges
          ar.no_ranges = true;
          return false;
        }
        auto cl = tmp.header("content-length");
        if (enc.empty() && !cl.empty() && parse_u64(cl) != size) {
          bad = true;
          bad_msg = "Content-Length " + cl + " differs from the expected size " + std::to_string(size);
          return false;
        }
        if (cur > 0) {
          ctx.log(ts.repo_path + ": server ignored Range (200); restarting from byte 0");
          // A helper thread hashing the file must be gone before the file and the hash are
          // reset; the rest of this stream is then hashed by verify_blob's catch-up.
          if (ts.prefix_hasher) ts.prefix_hasher->stop();
          if (mh) {  // likewise: what it hashed is thrown away; the rest is hashed inline
            mh->finish();
            mh = nullptr;
            buf = write_buffer();
          }
          if (::ftruncate(fd, 0) != 0) {
            write_err = std::string("ftruncate: ") + std::strerror(errno);
            ar.fatal = true;
            return false;
          }
          cur = write_pos = buf_start = kicked = 0;
          pos = 0;
          if (ts.hs) ts.hs->reset();
        }
        range_end = to;
        return true;
      }
      bad = true;
      bad_msg = "unexpected HTTP " + std::to_string(status) + " for a download";
      return false;
    };
    req.on_body = [&](const char* data, size_t n) {
      if (seen_status >= 300 || redirect) {
        if (err_body.size() < 4096) err_body.append(data, std::min<size_t>(n, 4096 - err_body.size()));
        return true;
      }
      if (abort_flag && abort_flag->load(std::memory_order_relaxed)) return false;
      if (write_pos + n > range_end) {
        bad = true;
        bad_msg = "server sent more bytes than expected (" + std::to_string(write_pos + n - cur) + " > " +
                  std::to_string(range_end - cur) + ")";
        return false;
      }
      if (mh) {  // through the ring of write buffers, each hashed once it is written
        const size_t cap = mh->slot_size();
        for (size_t done = 0; done < n;) {
          size_t k = std::min(n - done, cap - used);
          std::memcpy(buf + used, data + done, k);
          used += k;
          done += k;
          if (used == cap && !flush()) {
            ar.fatal = true;
            return false;
          }
        }
        write_pos += n;
        ts.report(write_pos);
        return true;
      }
      if (ts.hs && whole_file_mode && !ts.prefix_hasher && ts.hs->active() && ts.hs->hashed == write_pos)
        ts.hs->update(data, n);
      if (used + n > kWriteBuffer && !flush()) {
        ar.fatal = true;
        return false;
      }
      if (n > kWriteBuffer) {
        if (!pwrite_all(fd, data, n, write_pos, &write_err)) {
          ar.fatal = true;
          return false;
        }
        buf_start = write_pos + n;
        pos = buf_start;
      } else {
        std::memcpy(buf + used, data, n);
        used += n;
      }
      write_pos += n;
      if (whole_file_mode) ts.report(write_pos);
      return true;
    };
    HttpResponse r = perform(req);
    if (!ar.fatal && !flush()) ar.fatal = true;
    ts.last_status = r.status;
    ar.progressed += write_pos > cur ? write_pos - cur : 0;
    if (ar.fatal) {
      ar.outcome.kind = ErrorKind::io;
      ar.outcome.message = ts.repo_path + ": " + write_err;
      return ar;
    }
    if (ar.no_ranges) return ar;
    if (bad) {
      ar.outcome.kind = ErrorKind::protocol;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": " + bad_msg;
      ar.restart = whole_file_mode;
      return ar;
    }
    if (r.status >= 300 && r.status < 400 && r.transport_ok()) {
      if (!redirect) {
        ar.outcome.kind = ErrorKind::protocol;
        ar.outcome.message = ts.repo_path + ": HTTP " + std::to_string(r.status) + " without a Location to follow";
        return ar;
      }
      std::string next = resolve_location(url, r.header("location"));
      if (!http_scheme(next)) {
        ar.outcome.kind = ErrorKind::protocol;
        ar.outcome.message = ts.repo_path + ": redirect to a non-HTTP location refused (" + next.substr(0, 100) + ")";
        return ar;
      }
      if (url_origin(next) != url_origin(url)) ctx.log(ts.repo_path + ": following redirect to " + url_origin(next));
      url = next;
      ++hops;
      continue;
    }
    r.body = err_body;
    ar.outcome = classify(r, ts.repo_path, !ctx.opts.token.empty());
    if (r.status == 416) {
      if (!whole_file_mode) {  // parts beyond what the server holds: let one stream sort it out
        ar.no_ranges = true;
        return ar;
      }
      // Asked beyond the end: the temp file is complete or wrong; restart when unsure.
      ar.restart = true;
      ar.outcome.kind = ErrorKind::protocol;
      ar.outcome.retryable = true;
      ar.outcome.message = ts.repo_path + ": HTTP 416 for Range bytes=" + std::to_string(cur) + "- (Content-Range " +
                           r.header("content-range") + ")";
      return ar;
    }
    if (ar.outcome.kind != ErrorKind::none) return ar;
    if (write_pos == to) {
      ar.complete = true;
      return ar;
    }
    if (write_pos == range_end && range_end > cur) {
      // The server answered a smaller range than asked (allowed): ask for the rest.
      cur = write_pos;
      hops = 0;
      continue;
    }
    ar.outcome.kind = ErrorKind::network;
    ar.outcome.retryable = true;
    ar.outcome.message = ts.repo_path + ": body ended early: received " + std::to_string(write_pos) + " of " +
                         std::to_string(to) + " bytes" + (seen_status ? "" : " (no response)");
    return ar;
  }
  ar.outcome.kind = ErrorKind::protocol;
  ar.outcome.message = ts.repo_path + (hops > 10 ? ": too many redirects (a redirect loop?)"
                                                 : ": the server kept answering with tiny partial ranges; gave up");
  return ar;
}

}  // namespace

// Download the whole blob to `tmp` (resuming from its current size). Returns true when
// tmp holds exactly `size` bytes (not yet hash-verified).
bool transfer(TransferState& ts, const std::string& url, const fs::path& tmp, uint64_t size) {
  Ctx& ctx = ts.ctx;
  struct Count {
    std::atomic<int>& n;
    explicit Count(std::atomic<int>& c) : n(c) { ++n; }
    ~Count() { --n; }
  } counting(ctx.transfers);
  FileResult& fr = ts.fr;
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fr.kind = ErrorKind::io;
    fr.error = "cannot open " + tmp.string() + ": " + std::strerror(errno);
    return false;
  }
  uint64_t have = file_size_or_zero(tmp);
  if (have > size) {
    if (::ftruncate(fd, 0) != 0) {}
    have = 0;
  }
  if (have > 0) ctx.log(ts.repo_path + ": resuming from byte " + std::to_string(have) + " of " + std::to_string(size));
  int failures = 0;        // attempts that failed without real progress
  int total_attempts = 0;  // hard cap
  bool ranges_ok = true;
  const uint64_t progress_unit = std::max<uint64_t>(1u << 20, size / 20);
  Outcome last;
  auto hash_ready = [&](uint64_t upto) {  // hs->hashed must not exceed what the file keeps
    if (ts.hs && ts.hs->hashed > upto) ts.hs->reset();
  };
  while (have < size) {
    if (ctx.cancelled()) {
      fr.kind = ErrorKind::cancelled;
      fr.error = "cancelled";
      break;
    }
    ++total_attempts;
    uint64_t before = have;
    AttemptResult ar;
    // Direct mode takes one stream: the hash is made from the write buffers, in order.
    if (ranges_ok && !ctx.opts.direct_io && ctx.opts.range_parts > 1 && size - have >= ctx.opts.range_threshold) {
      // Parallel ranges over [have, size); each part writes contiguously from its start.
      unsigned parts = ctx.opts.range_parts;
      uint64_t span = size - have;
      std::vector<uint64_t> starts(parts + 1);
      for (unsigned i = 0; i <= parts; ++i)  // 128-bit: span * i overflows for absurd sizes
        starts[i] = have + static_cast<uint64_t>(static_cast<unsigned __int128>(span) * i / parts);
      std::vector<std::atomic<uint64_t>> pos(parts);
      for (unsigned i = 0; i < parts; ++i) pos[i] = starts[i];
      std::vector<AttemptResult> res(parts);
      std::atomic<bool> abort_all{false};
      hash_ready(have);
      std::optional<PrefixHasher> ph;
      if (ts.hs) ph.emplace(*ts.hs, tmp);
      std::vector<std::thread> threads;
      for (unsigned i = 0; i < parts; ++i) {
        threads.emplace_back([&, i] {
          int part_fail = 0;
          while (pos[i] < starts[i + 1] && !abort_all && !ctx.cancelled()) {
            res[i] = get_range(ts, url, fd, pos[i], starts[i + 1], size, false, pos[i], &abort_all);
            if (res[i].complete) break;
            if (res[i].no_ranges || res[i].fatal || !res[i].outcome.retryable) {
              abort_all = true;
              break;
            }
            if (res[i].progressed < progress_unit / 4 && ++part_fail > ctx.opts.retries) {
              abort_all = true;
              break;
            }
            {
              std::lock_guard<std::mutex> g(ts.mu);
              ++fr.retries;
            }
            double d = ctx.jitter_delay(part_fail, res[i].outcome.retry_after);
            ctx.log(res[i].outcome.message + " (range part " + std::to_string(i + 1) + "/" + std::to_string(parts) +
                    "); retrying in " + std::to_string(static_cast<int>(d * 1000)) + " ms");
            ctx.sleep_for(d);
          }
        });
      }
      // Progress for the whole file, and the contiguous prefix for the hasher, while parts run.
      while (true) {
        bool all_done = true;
        uint64_t got = 0;
        for (unsigned i = 0; i < parts; ++i) got += pos[i] - starts[i];
        ts.report(have + got);
        if (ph) {
          uint64_t contiguous = have;
          for (unsigned i = 0; i < parts; ++i) {
            contiguous = pos[i];
            if (pos[i] < starts[i + 1]) break;
          }
          ph->advance(contiguous);
        }
        for (unsigned i = 0; i < parts; ++i)
          if (pos[i] < starts[i + 1] && !abort_all) all_done = false;
        if (all_done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (ctx.cancelled()) abort_all = true;
      }
      for (auto& t : threads) t.join();
      if (ph) ph->stop();
      // The contiguous prefix is what a later run can resume from.
      uint64_t prefix = have;
      bool all_complete = true;
      for (unsigned i = 0; i < parts; ++i) {
        if (pos[i] == starts[i + 1]) {
          prefix = starts[i + 1];
          continue;
        }
        prefix = pos[i];
        all_complete = false;
        break;
      }
      if (all_complete) {
        have = size;
        break;
      }
      if (::ftruncate(fd, static_cast<off_t>(prefix)) != 0) {}
      have = prefix;
      hash_ready(have);
      bool no_ranges = false;
      for (auto& r : res) {
        if (r.no_ranges) no_ranges = true;
        if (r.outcome.kind != ErrorKind::none) last = r.outcome;
        if (r.fatal) ar.fatal = true;
      }
      if (ar.fatal) break;
      if (no_ranges) {
        ctx.log(ts.repo_path + ": server does not honour Range requests; downloading in one stream");
        ranges_ok = false;
        continue;
      }
      if (ctx.cancelled()) continue;
      break;  // parts exhausted their retries
    }
    // One stream from `have`: hashed inline when the hash is at `have`, else a helper
    // thread catches up from the file and follows it.
    hash_ready(have);
    std::optional<PrefixHasher> ph;
    std::optional<MemoryHasher> mh;
    // The only transfer running, with a core to spare: the hash runs on a helper thread, from
    // the write buffers once they are written (MemoryHasher), so hashing overlaps receiving.
    // With several transfers the cores are busy anyway: inline is cheaper. Direct mode always
    // offloads (its writes wait on the device, not on a core) past one slot's worth.
    bool offload = ctx.opts.direct_io ? size - have >= MemoryHasher::kDirectSlot
                                      : ctx.transfers.load() == 1 && size - have >= (16u << 20) &&
                                            std::thread::hardware_concurrency() > 1;
    if (ts.hs && ts.hs->active() && ts.hs->hashed < have) {
      ph.emplace(*ts.hs, tmp);
      ph->advance(have);
      ts.prefix_hasher = &*ph;
    } else if (ts.hs && ts.hs->active() && offload) {
      int direct_fd = -1;
      if (ctx.opts.direct_io && have % MemoryHasher::kDirectAlign == 0)
        direct_fd = ::open(tmp.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);  // -1: buffered after all
      mh.emplace(*ts.hs, direct_fd, fd);
      ts.memory_hasher = &*mh;
    }
    std::atomic<uint64_t> pos{have};
    ar = get_range(ts, url, fd, have, size, size, true, pos, nullptr);
    if (ph) {
      ph->stop();
      ts.prefix_hasher = nullptr;
    }
    std::string direct_err;
    const bool written = !mh || mh->finish(&direct_err);  // hashes what reached the file: hs->hashed == pos
    if (mh) ts.memory_hasher = nullptr;
    if (!written) {  // the helper's write failed: the file holds the stream only up to there
      have = mh->written_upto();
      if (::ftruncate(fd, static_cast<off_t>(have)) != 0) {}
      hash_ready(0);
      fr.kind = ErrorKind::io;
      fr.error = ts.repo_path + ": " + direct_err;
      break;
    }
    have = pos;
    if (ar.restart) {
      if (::ftruncate(fd, 0) != 0) {}
      have = 0;
      hash_ready(0);
    }
    if (ar.complete) {
      have = size;
      break;
    }
    last = ar.outcome;
    if (ar.fatal || !ar.outcome.retryable) break;
    bool progressed = have >= before + progress_unit;
    if (!progressed) ++failures;
    if (failures > ctx.opts.retries || total_attempts > 4 * (ctx.opts.retries + 1) + 20) break;
    ++fr.retries;
    double d = ctx.jitter_delay(failures, ar.outcome.retry_after);
    ctx.log(ar.outcome.message + "; retry " + std::to_string(failures) + "/" + std::to_string(ctx.opts.retries) +
            " in " + std::to_string(static_cast<int>(d * 1000)) + " ms (have " + std::to_string(have) + "/" +
            std::to_string(size) + " bytes)");
    ctx.sleep_for(d);
  }
  ::close(fd);
  fr.received = have;
  if (have == size) return true;
  if (fr.kind == ErrorKind::none) {
    fr.kind = last.kind == ErrorKind::none ? ErrorKind::network : last.kind;
    fr.error = last.message.empty() ? "download failed" : last.message;
  }
  return false;
}

}  // namespace ckpt::hub::pipeline
