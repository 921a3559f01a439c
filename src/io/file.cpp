#include "io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ckpt::io {

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

std::string ReadOnlyFile::open(const std::filesystem::path& p, bool no_follow) {
  int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;  // NONBLOCK: never hang on a FIFO
  if (no_follow) flags |= O_NOFOLLOW;
  int fd = ::open(p.c_str(), flags);
  if (fd < 0) return std::strerror(errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    std::string e = std::strerror(errno);
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  return {};
}

int64_t ReadOnlyFile::read_at(uint64_t offset, void* buf, uint64_t n, std::string* error) const {
  uint64_t done = 0;
  auto* out = static_cast<char*>(buf);
  while (done < n) {
    ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      if (error) *error = std::strerror(errno);
      return -1;
    }
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
  }
  return static_cast<int64_t>(done);
}

std::string size_limit_error(uint64_t size, uint64_t max_bytes) {
  if (size <= max_bytes) return {};
  return "file is " + std::to_string(size) + " bytes, above the " + std::to_string(max_bytes) +
         "-byte limit for this kind of file";
}

std::string read_file(const std::filesystem::path& p, uint64_t max_bytes, std::string& out) {
  ReadOnlyFile f;
  if (auto e = f.open(p); !e.empty()) return e;
  if (auto e = size_limit_error(f.size(), max_bytes); !e.empty()) return e;
  out.resize(f.size());
  std::string err;
  int64_t got = f.read_at(0, out.data(), f.size(), &err);
  if (got < 0) return err;
  out.resize(static_cast<size_t>(got));
  return {};
}

void PartedRead::open_and_size(const std::filesystem::path& p, uint64_t max_bytes, std::string& out,
                               size_t spare_capacity) {
  out_ = &out;
  if (auto e = file_.open(p); !e.empty()) {
    open_error_ = e;
  } else if (auto e2 = size_limit_error(file_.size(), max_bytes); !e2.empty()) {
    open_error_ = e2;
  } else {
    try {
      out.reserve(file_.size() + spare_capacity);
      out.resize(file_.size());
      size_ = file_.size();
    } catch (const std::exception&) {  // the parts must not wait on a task that threw
      open_error_ = "cannot allocate " + std::to_string(file_.size()) + " bytes";
    }
  }
  sized_.store(true, std::memory_order_release);
  sized_.notify_all();
}

void PartedRead::read_part(size_t k) {
  wait_sized();
  if (!open_error_.empty() || begin_of(k) >= end_of(k)) return;
  got_[k] = file_.read_at(begin_of(k), out_->data() + begin_of(k), end_of(k) - begin_of(k), &errors_[k]);
}

std::string PartedRead::finish() {
  if (!open_error_.empty()) return open_error_;
  for (size_t k = 0; k < got_.size(); ++k)
    if (got_[k] < 0) return errors_[k];
  for (size_t k = 0; k < got_.size(); ++k) {
    const uint64_t want = begin_of(k) < end_of(k) ? end_of(k) - begin_of(k) : 0;
    if (static_cast<uint64_t>(got_[k]) < want) {  // the file ended early: the bytes stop here
      out_->resize(begin_of(k) + static_cast<uint64_t>(got_[k]));
      break;
    }
  }
  return {};
}

std::string read_prefix(const std::filesystem::path& p, uint64_t n, std::string& out) {
  ReadOnlyFile f;
  if (auto e = f.open(p); !e.empty()) return e;
  uint64_t want = std::min<uint64_t>(n, f.size());
  out.resize(want);
  std::string err;
  int64_t got = f.read_at(0, out.data(), want, &err);
  if (got < 0) return err;
  out.resize(static_cast<size_t>(got));
  return {};
}

}  // namespace ckpt::io
