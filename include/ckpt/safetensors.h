// safetensors: dtype table, a bounded header reader and a writer.
// The reader never reads tensor data; it records what the header says and
// what the file framing looks like, and the ST check family judges it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ckpt::st {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE

enum class DType : uint8_t {
  BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4, F6_E2M3, F6_E3M2,
  I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64, C64, Unknown
};

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  uint32_t bits;
};

// Every dtype the format defines, with its size in bits.
std::span<const DTypeInfo> dtype_table();
std::optional<DType> dtype_from_name(std::string_view name);
std::string_view dtype_name(DType d);
uint32_t dtype_bits(DType d);

// What went wrong while reading a file's framing or header; the ST check family
// turns these into findings (codes are assigned there, one per rule).
enum class Rule : uint8_t {
  HeaderTooSmall,      // file shorter than the 8-byte length prefix
  HeaderTooLarge,      // N > kMaxHeaderBytes
  HeaderPastEof,       // 8 + N > file size
  HeaderNotUtf8,
  HeaderNotJson,
  HeaderSchema,        // not an object, entry missing/mistyped fields
  DuplicateKey,
  UnknownDType,
  MetadataNotStrings,
  LeadingWhitespace,   // accepted since safetensors #686; older readers reject
  ReadFailed,          // I/O error
  Count_
};

struct Problem {
  Rule rule;
  std::string tensor;  // empty when not about one tensor
  std::string detail;  // human text: what was found, what was expected
  uint64_t offset = 0; // byte offset in the file, when meaningful
};

// A tensor's dimensions. Up to two are stored inline (the weights, scales, norms and biases
// that make up nearly every tensor of an LLM checkpoint; fused experts and conv kernels
// spill), so reading a 100k-tensor header allocates nothing per tensor; more spill to the
// heap, whose pointer shares the inline storage: 24 bytes in all.
// Reads like a std::vector<uint64_t> (and converts to one, or to a span) so call sites need
// not care.
class Shape {
 public:
  using value_type = uint64_t;
  using size_type = size_t;
  using iterator = uint64_t*;
  using const_iterator = const uint64_t*;

  Shape() = default;
  Shape(std::initializer_list<uint64_t> dims) { assign(dims.begin(), dims.end()); }
  template <class It>
  Shape(It first, It last) { assign(first, last); }
  Shape(const std::vector<uint64_t>& dims) { assign(dims.begin(), dims.end()); }  // NOLINT: implicit by design
  Shape(const Shape& o) { assign(o.begin(), o.end()); }
  Shape(Shape&& o) noexcept { take(o); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  Shape& operator=(const std::vector<uint64_t>& dims) {
    assign(dims.begin(), dims.end());
    return *this;
  }
  ~Shape() { release(); }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint64_t* data() { return spilled() ? heap_ : inline_; }
  const uint64_t* data() const { return spilled() ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + n_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + n_; }
  uint64_t& operator[](size_t i) { return data()[i]; }
  uint64_t operator[](size_t i) const { return data()[i]; }
  uint64_t front() const { return data()[0]; }
  uint64_t back() const { return data()[n_ - 1]; }
  uint64_t& back() { return data()[n_ - 1]; }

  void clear() { n_ = 0; }
  void reserve(size_t n) {
    if (n <= cap_) return;
    auto* fresh = new uint64_t[n];
    for (uint32_t i = 0; i < n_; ++i) fresh[i] = data()[i];
    if (spilled()) delete[] heap_;
    heap_ = fresh;
    cap_ = static_cast<uint32_t>(n);
  }
  void push_back(uint64_t v) {
    if (n_ == cap_) reserve(2 * size_t(cap_));
    data()[n_++] = v;
  }
  template <class It>
  void assign(It first, It last) {
    n_ = 0;
    reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) data()[n_++] = static_cast<uint64_t>(*first);
  }
  iterator insert(const_iterator pos, uint64_t v) { return insert(pos, &v, &v + 1); }
  template <class It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = static_cast<size_t>(pos - begin());
    const size_t count = static_cast<size_t>(std::distance(first, last));
    if (n_ + count > cap_) reserve(std::max<size_t>(n_ + count, 2 * size_t(cap_)));
    uint64_t* d = data();
    for (size_t i = n_; i > at; --i) d[i - 1 + count] = d[i - 1];  // open the gap
    for (size_t i = 0; i < count; ++i, ++first) d[at + i] = static_cast<uint64_t>(*first);
    n_ += static_cast<uint32_t>(count);
    return d + at;
  }
  void pop_back() { --n_; }

  operator std::span<const uint64_t>() const { return {data(), n_}; }  // NOLINT: implicit by design
  operator std::vector<uint64_t>() const { return {begin(), end()}; }  // NOLINT: implicit by design

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const Shape& a, const std::vector<uint64_t>& b) {
    return a.n_ == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  static constexpr uint32_t kInline = 2;
  bool spilled() const { return cap_ > kInline; }
  void release() {
    if (spilled()) delete[] heap_;
    cap_ = kInline;
    n_ = 0;
  }
  void take(Shape& o) {
    n_ = o.n_;
    cap_ = o.cap_;
    if (o.spilled()) heap_ = o.heap_;
    else
      for (uint32_t i = 0; i < n_; ++i) inline_[i] = o.inline_[i];
    o.cap_ = kInline;
    o.n_ = 0;
  }
  union {
    uint64_t inline_[kInline] = {};
    uint64_t* heap_;  // when spilled(): cap_ dimensions allocated
  };
  uint32_t n_ = 0, cap_ = kInline;
};

// Names in a parsed header are views: into the header bytes themselves (which the Header keeps
// alive), or into unescaped copies it owns. A 100k-tensor checkpoint then costs no allocation
// per tensor name. The views stay valid as long as any copy of the Header lives.
// 72 bytes: a 100k-tensor checkpoint holds one per tensor. An unknown dtype's spelling is in
// its UnknownDType problem.
struct TensorEntry {
  std::string_view name;
  Shape shape;
  uint64_t begin = 0, end = 0;   // data_offsets, relative to the data section
  uint64_t name_hash = 0;        // hash_name(name), computed on the parsing thread
  DType dtype = DType::Unknown;
};

struct Header {
  uint64_t file_size = 0;
  uint64_t header_len = 0;   // N (0 when the prefix could not be read)
  bool framing_ok = false;   // length prefix and header bytes are readable
  bool parsed = false;       // header JSON parsed into entries
  bool general_path = false; // read by simdjson: the one-pass scanner declined the spelling
  std::vector<TensorEntry> tensors;  // in header order
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<Problem> problems;
  std::shared_ptr<const void> storage;  // owns what the entries' names view

  uint64_t data_start() const { return 8 + header_len; }
};

// Parse a header from bytes already in memory (`prefix` holds at least the first
// 8 + N bytes when available; `file_size` is the true size of the file).
Header parse_header(std::span<const std::byte> prefix, uint64_t file_size);

// Read the header of the file at `path` (read-only; at most 8 + N bytes are read).
Header read_header(const std::filesystem::path& path);

// ---- writer ----------------------------------------------------------------

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> data;  // empty => the span is left as a hole (sparse)
};

struct WriteOptions {
  std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}};
  bool sort_by_name = true;  // the reference writer orders tensors by name
};

// Bytes a tensor occupies (nullopt on overflow or sub-byte misalignment).
std::optional<uint64_t> tensor_nbytes(DType dtype, std::span<const uint64_t> shape);

// The serialised header (length prefix + JSON padded with spaces to a multiple of 8)
// for tensors laid out in order; returns the data-section size through `data_size`.
std::string build_header(const std::vector<TensorToWrite>& tensors, const WriteOptions& opts,
                         uint64_t* data_size);

// Write a safetensors file. Tensors without data become holes: the file has its full
// size but occupies almost no disk (header-only stand-ins of huge checkpoints).
// Returns an error message, or empty on success.
std::string write_file(const std::filesystem::path& path, std::vector<TensorToWrite> tensors,
                       const WriteOptions& opts = {});

}  // namespace ckpt::st
