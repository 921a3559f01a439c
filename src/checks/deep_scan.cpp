#include "checks/deep_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace ckpt::checks::deep {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; the scan reads it raw (big-endian torch storages are swapped first)");

void ScanResult::merge(const ScanResult& o) {
  elements += o.elements;
  nan += o.nan;
  inf += o.inf;
  first_nan = std::min(first_nan, o.first_nan);
  first_inf = std::min(first_inf, o.first_inf);
  nonzero = nonzero || o.nonzero;
}

// ---- kernels ---------------------------------------------------------------------------
//
// Each dtype is described by bit patterns: after masking with kMask (the sign bit cleared,
// or nothing cleared for the FNUZ / E8M0 formats whose special value involves the sign bit),
// a value is NaN when it lies in [kNanLo, kNanHi] and Inf when it equals kInf (formats
// without Inf set kHasInf = false). The inner loop has a fixed trip count and no branches
// so GCC vectorises it at -O2; a block that holds a NaN/Inf is re-walked only until the
// first index is known.

namespace {

template <class U, U kMask, U kNanLo, U kNanHi, bool kHasInf, U kInf>
struct Kernel {
  static bool is_nan(U a) { return a >= kNanLo && a <= kNanHi; }
  static bool is_inf(U a) { return kHasInf && a == kInf; }

  static void scalar(const std::byte* p, uint64_t n, uint64_t base, ScanResult& r, U& nz) {
    for (uint64_t i = 0; i < n; ++i) {
      U x;
      std::memcpy(&x, p + i * sizeof(U), sizeof(U));
      U a = static_cast<U>(x & kMask);
      nz = static_cast<U>(nz | a);
      if (is_nan(a)) {
        ++r.nan;
        if (r.first_nan == kNone) r.first_nan = base + i;
      } else if (is_inf(a)) {
        ++r.inf;
        if (r.first_inf == kNone) r.first_inf = base + i;
      }
    }
  }

  static void scan(const std::byte* p, uint64_t n, uint64_t base, ScanResult& r) {
    constexpr uint64_t B = 256;  // elements per vectorised block
    U nz = 0;
    uint64_t i = 0;
    for (; i + B <= n; i += B) {
      const std::byte* q = p + i * sizeof(U);
      uint32_t nan = 0, inf = 0;
      U bnz = 0;
      for (uint64_t j = 0; j < B; ++j) {
        U x;
        std::memcpy(&x, q + j * sizeof(U), sizeof(U));
        U a = static_cast<U>(x & kMask);
        nan += static_cast<uint32_t>((a >= kNanLo) & (a <= kNanHi));
        if constexpr (kHasInf) inf += static_cast<uint32_t>(a == kInf);
        bnz = static_cast<U>(bnz | a);
      }
      nz = static_cast<U>(nz | bnz);
      if (nan | inf) [[unlikely]] {
        bool need_first = (nan && r.first_nan == kNone) || (inf && r.first_inf == kNone);
        if (need_first) {
          ScanResult tmp;
          U dummy = 0;
          scalar(q, B, base + i, tmp, dummy);
          r.first_nan = std::min(r.first_nan, tmp.first_nan);
          r.first_inf = std::min(r.first_inf, tmp.first_inf);
        }
        r.nan += nan;
        r.inf += inf;
      }
    }
    scalar(p + i * sizeof(U), n - i, base + i, r, nz);
    r.elements += n;
    if (nz) r.nonzero = true;
  }
};

using F16 = Kernel<uint16_t, 0x7FFF, 0x7C01, 0x7FFF, true, 0x7C00>;
using BF16 = Kernel<uint16_t, 0x7FFF, 0x7F81, 0x7FFF, true, 0x7F80>;
using F32 = Kernel<uint32_t, 0x7FFFFFFFu, 0x7F800001u, 0x7FFFFFFFu, true, 0x7F800000u>;
using F64 = Kernel<uint64_t, 0x7FFFFFFFFFFFFFFFull, 0x7FF0000000000001ull, 0x7FFFFFFFFFFFFFFFull, true,
                   0x7FF0000000000000ull>;
// float8_e4m3fn: no Inf; S.1111.111 is NaN.
using F8E4M3 = Kernel<uint8_t, 0x7F, 0x7F, 0x7F, false, 0>;
// float8_e5m2: IEEE-like; S.11111.00 is Inf, S.11111.{01,10,11} NaN.
using F8E5M2 = Kernel<uint8_t, 0x7F, 0x7D, 0x7F, true, 0x7C>;
// float8_e4m3fnuz / e5m2fnuz: no Inf, no -0; the single NaN is 0x80.
using F8FNUZ = Kernel<uint8_t, 0xFF, 0x80, 0x80, false, 0>;
// float8_e8m0fnu (MX scales): exponent only; 0xFF is NaN.
using F8E8M0 = Kernel<uint8_t, 0xFF, 0xFF, 0xFF, false, 0>;

uint32_t elem_bytes(st::DType d) { return st::dtype_bits(d) / 8; }

}  // namespace

bool scannable(st::DType d) {
  switch (d) {
    case st::DType::F16: case st::DType::BF16: case st::DType::F32: case st::DType::F64:
    case st::DType::F8_E4M3: case st::DType::F8_E5M2: case st::DType::F8_E4M3FNUZ:
    case st::DType::F8_E5M2FNUZ: case st::DType::F8_E8M0:
      return true;
    default:
      return false;
  }
}

bool has_zero_value(st::DType d) { return scannable(d) && d != st::DType::F8_E8M0; }

void scan_elements(st::DType d, const std::byte* p, uint64_t count, uint64_t first_index, ScanResult& r) {
  switch (d) {
    case st::DType::F16: return F16::scan(p, count, first_index, r);
    case st::DType::BF16: return BF16::scan(p, count, first_index, r);
    case st::DType::F32: return F32::scan(p, count, first_index, r);
    case st::DType::F64: return F64::scan(p, count, first_index, r);
    case st::DType::F8_E4M3: return F8E4M3::scan(p, count, first_index, r);
    case st::DType::F8_E5M2: return F8E5M2::scan(p, count, first_index, r);
    case st::DType::F8_E4M3FNUZ:
    case st::DType::F8_E5M2FNUZ: return F8FNUZ::scan(p, count, first_index, r);
    case st::DType::F8_E8M0: return F8E8M0::scan(p, count, first_index, r);
    default: return;
  }
}

void byteswap_elements(std::byte* p, uint64_t count, uint32_t size) {
  if (size < 2) return;
  for (uint64_t i = 0; i < count; ++i) std::reverse(p + i * size, p + (i + 1) * size);
}

// ---- the pass ------------------------------------------------------------------------

namespace {

constexpr uint64_t kOverread = 8;  // an element starting in a read may end up to 7 bytes past it

int open_read_only(const std::filesystem::path& p) {
  // The loader hands over paths that were regular files (cache links already resolved and
  // confined), so a final symlink now means the tree changed: refuse it (O_NOFOLLOW).
  // O_NOATIME keeps the pass invisible in the file's times; only the owner may ask for it.
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(p.c_str(), kFlags | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(p.c_str(), kFlags);
  return fd;
}

// Reads up to n bytes at off, stopping early only at end of file. -1 on error (errno kept).
int64_t read_full(int fd, std::byte* buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<int64_t>(got);
}

// A file's tensors sorted by offset, with the running maximum of their ends so the tensors
// touching a byte range are found by binary search even when spans nest or overlap.
struct Layout {
  std::vector<uint32_t> order;
  std::vector<uint64_t> max_end;
};

Layout make_layout(const std::vector<TensorSpan>& ts) {
  Layout l;
  for (uint32_t i = 0; i < ts.size(); ++i)
    if (ts[i].nbytes && scannable(ts[i].dtype)) l.order.push_back(i);
  std::sort(l.order.begin(), l.order.end(), [&](uint32_t a, uint32_t b) { return ts[a].offset < ts[b].offset; });
  uint64_t m = 0;
  for (uint32_t i : l.order) {
    m = std::max(m, ts[i].offset + ts[i].nbytes);
    l.max_end.push_back(m);
  }
  return l;
}

struct FileState {
  const FileJob* job = nullptr;
  Layout layout;
  uint64_t planned_size = 0;
  std::mutex m;
  FileResult result;
};

struct Item {
  size_t file;
  uint64_t begin, end;  // file offsets; a hashed item covers the whole file (end = kNone)
  bool hash;
};

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

class Worker {
 public:
  explicit Worker(const Options& o) : opts_(o) {
    size_t n = (o.read_bytes + kOverread + 4095) / 4096 * 4096;
    buf_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, n)));
  }

  void process(const Item& it, FileState& fs) {
    const FileJob& job = *fs.job;
    int fd = open_read_only(job.path);
    if (fd < 0) {
      std::lock_guard lk(fs.m);
      if (fs.result.error.empty()) fs.result.error = "cannot open: " + std::string(std::strerror(errno));
      return;
    }
    struct stat st{};
    uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    uint64_t begin = it.begin, end = it.hash ? size : std::min(it.end, size);
    ::posix_fadvise(fd, static_cast<off_t>(begin), static_cast<off_t>(end - std::min(begin, end)), POSIX_FADV_SEQUENTIAL);

    std::unique_ptr<hub::detail::Hasher> hasher;
    if (it.hash) {
      try {
        hasher = std::make_unique<hub::detail::Hasher>(job.hash, size);
      } catch (const std::exception& e) {  // OpenSSL could not be loaded: say so, do not crash a worker
        ::close(fd);
        std::lock_guard lk(fs.m);
        if (fs.result.error.empty()) fs.result.error = std::string("cannot hash: ") + e.what();
        return;
      }
    }
    partial_.clear();
    std::string error;
    uint64_t error_at = 0, read_total = 0;
    constexpr uint64_t kAhead = 32u << 20;
    uint64_t prefetched = begin;

    uint64_t off = begin;
    while (off < end) {
      if (off + (kAhead / 2) >= prefetched && prefetched < end) {
        uint64_t len = std::min(kAhead, end - prefetched);
        ::posix_fadvise(fd, static_cast<off_t>(prefetched), static_cast<off_t>(len), POSIX_FADV_WILLNEED);
        prefetched += len;
      }
      uint64_t n = std::min<uint64_t>(opts_.read_bytes, end - off);
      uint64_t want = std::min<uint64_t>(n + kOverread, size - off);
      int64_t got = read_full(fd, buf_.get(), static_cast<size_t>(want), off);
      if (got < 0) {
        error = "read failed: " + std::string(std::strerror(errno));
        error_at = off;
        break;
      }
      uint64_t main = std::min<uint64_t>(static_cast<uint64_t>(got), n);
      if (main == 0) {
        error = "the file ended early: it shrank while it was being read";
        error_at = off;
        break;
      }
      if (hasher) hasher->update(buf_.get(), main);
      scan_range(fs, off, off + main, off + static_cast<uint64_t>(got));
      read_total += main;
      if (opts_.done) opts_.done->fetch_add(main, std::memory_order_relaxed);
      off += main;
      if (main < n) {
        error = "the file ended early: it shrank while it was being read";
        error_at = off;
        break;
      }
    }
    ::close(fd);

    std::lock_guard lk(fs.m);
    fs.result.opened = true;
    fs.result.size = size;
    fs.result.bytes_read += read_total;
    bytes_read_ += read_total;
    if (!error.empty() && fs.result.error.empty()) {
      fs.result.error = error;
      fs.result.error_offset = error_at;
    }
    if (hasher && error.empty()) fs.result.digest = hasher->hex_digest();
    for (const auto& [idx, r] : partial_) fs.result.tensors[idx].merge(r);
  }

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  // Scans the elements that *start* in [s, e); the buffer holds file bytes [s, avail).
  void scan_range(FileState& fs, uint64_t s, uint64_t e, uint64_t avail) {
    const auto& ts = fs.job->tensors;
    const Layout& l = fs.layout;
    size_t i = static_cast<size_t>(std::upper_bound(l.max_end.begin(), l.max_end.end(), s) - l.max_end.begin());
    for (; i < l.order.size(); ++i) {
      const TensorSpan& t = ts[l.order[i]];
      if (t.offset >= e) break;
      uint64_t t_end = t.offset + t.nbytes;
      if (t_end <= s) continue;
      uint64_t es = elem_bytes(t.dtype);
      uint64_t i0 = s <= t.offset ? 0 : (s - t.offset + es - 1) / es;
      uint64_t i1 = (std::min(e, t_end) - t.offset + es - 1) / es;
      uint64_t complete = (std::min(t_end, avail) - t.offset) / es;  // elements wholly in the buffer
      i1 = std::min(i1, complete);
      if (i1 <= i0) continue;
      const std::byte* p = buf_.get() + (t.offset + i0 * es - s);
      if (t.byteswap && es > 1) {  // big-endian storage: swap a copy, the read buffer is shared by overlapping spans
        swapped_.assign(p, p + (i1 - i0) * es);
        byteswap_elements(swapped_.data(), i1 - i0, static_cast<uint32_t>(es));
        p = swapped_.data();
      }
      scan_elements(t.dtype, p, i1 - i0, i0, partial_[l.order[i]]);
    }
  }

  const Options& opts_;
  std::unique_ptr<std::byte, AlignedFree> buf_;
  std::unordered_map<uint32_t, ScanResult> partial_;
  std::vector<std::byte> swapped_;  // at most one read's worth
  uint64_t bytes_read_ = 0;
};

}  // namespace

std::vector<FileResult> run(const std::vector<FileJob>& jobs, const Options& opts_in, Stats* stats) {
  Options opts = opts_in;
  opts.read_bytes = std::max<size_t>(opts.read_bytes, 64);
  opts.split_bytes = std::max<uint64_t>(opts.split_bytes, opts.read_bytes);

  std::vector<std::unique_ptr<FileState>> files;
  std::vector<Item> items;
  for (size_t f = 0; f < jobs.size(); ++f) {
    auto fs = std::make_unique<FileState>();
    fs->job = &jobs[f];
    fs->layout = make_layout(jobs[f].tensors);
    fs->result.tensors.resize(jobs[f].tensors.size());
    struct stat st{};
    if (::stat(jobs[f].path.c_str(), &st) == 0) fs->planned_size = static_cast<uint64_t>(st.st_size);
    bool hash = jobs[f].hash != hub::detail::EtagKind::opaque;
    if (hash) {
      items.push_back({f, 0, kNone, true});
    } else if (!fs->layout.order.empty()) {
      // The union of the tensor spans, cut into pieces of about split_bytes; pieces are
      // independent because every element is scanned by the piece its first byte is in.
      const auto& ts = jobs[f].tensors;
      uint64_t cur_b = 0, cur_e = 0;
      bool open = false;
      auto flush = [&] {
        for (uint64_t b = cur_b; b < cur_e; b += opts.split_bytes)
          items.push_back({f, b, std::min(cur_e, b + opts.split_bytes), false});
      };
      for (uint32_t i : fs->layout.order) {
        uint64_t b = ts[i].offset, e = ts[i].offset + ts[i].nbytes;
        if (open && b <= cur_e + (1u << 20)) {  // small gaps are read through, keeping reads sequential
          cur_e = std::max(cur_e, e);
          continue;
        }
        if (open) flush();
        cur_b = b, cur_e = e, open = true;
      }
      if (open) flush();
    }
    files.push_back(std::move(fs));
  }
  auto item_size = [&](const Item& it) {
    return it.hash ? files[it.file]->planned_size : it.end - it.begin;
  };
  // Largest first, so one big file does not start last and finish alone.
  std::stable_sort(items.begin(), items.end(), [&](const Item& a, const Item& b) { return item_size(a) > item_size(b); });
  if (opts.planned)
    for (const auto& it : items) opts.planned->fetch_add(item_size(it), std::memory_order_relaxed);

  unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(items.size(), 1)));
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> total{0};
  auto work = [&] {
    Worker w(opts);
    for (size_t i; (i = next.fetch_add(1)) < items.size();) w.process(items[i], *files[items[i].file]);
    total += w.bytes_read();
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  std::vector<FileResult> out;
  out.reserve(files.size());
  for (auto& fs : files) out.push_back(std::move(fs->result));
  if (stats) *stats = Stats{total.load(), threads, items.size()};
  return out;
}

bool is_hole(const std::filesystem::path& p, uint64_t offset, uint64_t len) {
  int fd = open_read_only(p);
  if (fd < 0) return false;
  // Holes are whole filesystem blocks; the blocks at the ends of the range may hold a
  // neighbour's bytes (or the header), so only the whole blocks inside the range are asked.
  struct stat st{};
  uint64_t blk = ::fstat(fd, &st) == 0 && st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : 4096;
  uint64_t b = (offset + blk - 1) / blk * blk, e = (offset + len) / blk * blk;
  bool hole = false;
  if (b < e) {
    off_t data = ::lseek(fd, static_cast<off_t>(b), SEEK_DATA);
    hole = data < 0 ? errno == ENXIO : static_cast<uint64_t>(data) >= e;  // ENXIO: only holes up to EOF
  }
  ::close(fd);
  return hole;
}

}  // namespace ckpt::checks::deep
