#include "hub/hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <algorithm>
#include <memory>
#include <vector>

namespace ckpt::hub::detail {

static bool all_lower_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

EtagKind etag_kind(std::string_view etag) {
  if (etag.size() == 64 && all_lower_hex(etag)) return EtagKind::sha256;
  if (etag.size() == 40 && all_lower_hex(etag)) return EtagKind::git_sha1;
  return EtagKind::opaque;
}

struct Hasher::Impl {
  EVP_MD_CTX* ctx = nullptr;
  EtagKind kind;
};

Hasher::Hasher(EtagKind kind, uint64_t size) : impl_(std::make_unique<Impl>()) {
  impl_->kind = kind;
  if (kind == EtagKind::opaque) return;
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx) throw std::runtime_error("EVP_MD_CTX_new failed");
  EVP_DigestInit_ex(impl_->ctx, kind == EtagKind::sha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  if (kind == EtagKind::git_sha1) {
    std::string prefix = "blob " + std::to_string(size);
    EVP_DigestUpdate(impl_->ctx, prefix.data(), prefix.size() + 1);  // includes the '\0'
  }
}

Hasher::~Hasher() {
  if (impl_ && impl_->ctx) EVP_MD_CTX_free(impl_->ctx);
}

void Hasher::update(const void* data, size_t n) {
  if (impl_->ctx && n) EVP_DigestUpdate(impl_->ctx, data, n);
}

std::string Hasher::hex_digest() {
  if (!impl_->ctx) return {};
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 15]);
  }
  return out;
}

bool hash_file_range(const std::filesystem::path& p, Hasher& h, uint64_t from, uint64_t to, std::string* error) {
  if (from >= to) return true;
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (error) *error = "cannot open " + p.string() + ": " + std::strerror(errno);
    return false;
  }
  ::posix_fadvise(fd, static_cast<off_t>(from), static_cast<off_t>(to - from), POSIX_FADV_SEQUENTIAL);
  // Not zero-initialised: every byte hashed was read into it first.
  constexpr size_t kBuf = 4u << 20;
  std::unique_ptr<char[]> buf(new char[kBuf]);
  uint64_t off = from;
  while (off < to) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kBuf, to - off));
    ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (error) *error = "short read of " + p.string() + " at byte " + std::to_string(off);
      ::close(fd);
      return false;
    }
    h.update(buf.get(), static_cast<size_t>(n));
    off += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return true;
}

std::string hash_file(const std::filesystem::path& p, EtagKind kind, uint64_t size, std::string* error,
                      uint64_t start_offset, Hasher* continue_from) {
  Hasher local(continue_from ? EtagKind::opaque : kind, size);
  Hasher& h = continue_from ? *continue_from : local;
  if (!hash_file_range(p, h, start_offset, size, error)) return {};
  return h.hex_digest();
}

std::string sha1_bytes(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha1(), nullptr);
  return std::string(reinterpret_cast<char*>(md), len);
}

}  // namespace ckpt::hub::detail
