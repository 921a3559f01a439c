// The format-neutral tensor table's row: a tensor of any container (safetensors, GGUF,
// PyTorch pickle) as the checks above the container see it. Format-specific facts stay
// with the container's parse (the shard's header or extras), never here.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace ckpt {

// The container a weight file is in.
enum class Format : uint8_t { safetensors, gguf, pytorch };
std::string_view format_name(Format f);

// Element types of every format. The first rows are safetensors' (in its spec's order, ending
// before Unknown); then ggml's block-quantized types, stored as blocks of `block_elems`
// elements in `block_bytes` bytes (names as llama.cpp spells them). ggml's scalar types
// (F32, F16, BF16, F64, I8, I16, I32, I64) and torch's storage types map onto the first rows.
enum class DType : uint8_t {
  BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ, F4, F6_E2M3, F6_E3M2,
  I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64, C64, Unknown,
  // ggml block types (ggml.h enum ggml_type; geometry from ggml-common.h's block structs)
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
  IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, TQ1_0, TQ2_0,
  MXFP4, NVFP4, Q1_0, Q2_0,
  Count_
};
inline constexpr size_t kDTypeCount = static_cast<size_t>(DType::Count_);
// Rows of safetensors' own dtypes (they come first).
inline constexpr size_t kSafetensorsDTypeCount = static_cast<size_t>(DType::Unknown);

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  uint32_t bits;               // bits per element; 0 for block types (see below) and Unknown
  uint32_t block_elems = 1;    // elements per block (1 for element types)
  uint32_t block_bytes = 0;    // bytes per block (0 for element types: bits/8 per element)
};

const DTypeInfo& dtype_info(DType d);  // Unknown's row for a value out of range
std::string_view dtype_name(DType d);
uint32_t dtype_bits(DType d);          // 0 for block types and Unknown
inline bool is_block_type(DType d) { return dtype_info(d).block_elems > 1; }
// Bytes a tensor of `shape` (outermost dimension first) occupies: for a block type the
// innermost dimension must be a multiple of the block. nullopt on overflow, sub-byte
// misalignment, a partial block or an unknown dtype.
std::optional<uint64_t> tensor_nbytes(DType dtype, std::span<const uint64_t> shape);

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
  Shape& operator=(std::initializer_list<uint64_t> dims) {
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
  // Shape is outermost dimension first, in every format (a GGUF's ne[] is reversed into it),
  // counted in elements, never in packed blocks.
  // [begin, end): the bytes in the container's data region (safetensors: data_offsets,
  // relative to the data section; other formats say what they are relative to).
  uint64_t begin = 0, end = 0;
  uint64_t name_hash = 0;        // hash_name(name), computed on the parsing thread
  DType dtype = DType::Unknown;
};

}  // namespace ckpt
