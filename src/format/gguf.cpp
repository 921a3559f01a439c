// The GGUF reader: the rules of ggml's gguf.cpp (specs/gguf.md §1, bad-inputs.md §3), each
// check done on raw integers with checked arithmetic before anything is allocated, so a
// crafted count or length costs at most the bytes the file really holds.
#include "ckpt/gguf.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_set>

#include "io/checked.h"
#include "io/file.h"

namespace ckpt::gguf {

// ---- type table ---------------------------------------------------------------

namespace {

// specs/gguf.md §2.1 (ggml.h enum, ggml.c type_traits, ggml-common.h static_asserts).
constexpr std::array<GgmlTypeInfo, kTypeCount> kTypes{{
    {0, "f32", 1, 4},        {1, "f16", 1, 2},         {2, "q4_0", 32, 18},      {3, "q4_1", 32, 20},
    {4, "q4_2", 0, 0},       {5, "q4_3", 0, 0},        {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},     {9, "q8_1", 32, 36},      {10, "q2_k", 256, 84},    {11, "q3_k", 256, 110},
    {12, "q4_k", 256, 144},  {13, "q5_k", 256, 176},   {14, "q6_k", 256, 210},   {15, "q8_k", 256, 292},
    {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74}, {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},  {21, "iq3_s", 256, 110},  {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136},
    {24, "i8", 1, 1},        {25, "i16", 1, 2},        {26, "i32", 1, 4},        {27, "i64", 1, 8},
    {28, "f64", 1, 8},       {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},       {31, "q4_0_4_4", 0, 0},
    {32, "q4_0_4_8", 0, 0},  {33, "q4_0_8_8", 0, 0},   {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},
    {36, "iq4_nl_4_4", 0, 0}, {37, "iq4_nl_4_8", 0, 0}, {38, "iq4_nl_8_8", 0, 0}, {39, "mxfp4", 32, 17},
    {40, "nvfp4", 64, 36},   {41, "q1_0", 128, 18},    {42, "q2_0", 64, 18},
}};

}  // namespace

const GgmlTypeInfo* ggml_type(int64_t id) {
  if (id < 0 || id >= kTypeCount) return nullptr;
  return &kTypes[static_cast<size_t>(id)];
}

std::optional<int32_t> ggml_type_from_name(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (const auto& t : kTypes)
    if (t.name == lower && t.block != 0) return t.id;
  return std::nullopt;
}

DType dtype_of(int32_t ggml_type) {
  static constexpr std::array<DType, kTypeCount> map{
      DType::F32,     DType::F16,    DType::Q4_0,    DType::Q4_1,    DType::Unknown, DType::Unknown, DType::Q5_0,
      DType::Q5_1,    DType::Q8_0,   DType::Q8_1,    DType::Q2_K,    DType::Q3_K,    DType::Q4_K,    DType::Q5_K,
      DType::Q6_K,    DType::Q8_K,   DType::IQ2_XXS, DType::IQ2_XS,  DType::IQ3_XXS, DType::IQ1_S,   DType::IQ4_NL,
      DType::IQ3_S,   DType::IQ2_S,  DType::IQ4_XS,  DType::I8,      DType::I16,     DType::I32,     DType::I64,
      DType::F64,     DType::IQ1_M,  DType::BF16,    DType::Unknown, DType::Unknown, DType::Unknown, DType::TQ1_0,
      DType::TQ2_0,   DType::Unknown, DType::Unknown, DType::Unknown, DType::MXFP4,  DType::NVFP4,   DType::Q1_0,
      DType::Q2_0};
  return ggml_type >= 0 && ggml_type < kTypeCount ? map[static_cast<size_t>(ggml_type)] : DType::Unknown;
}

std::optional<uint64_t> row_bytes(int32_t type, uint64_t ne0) {
  const GgmlTypeInfo* t = ggml_type(type);
  if (!t || t->block == 0 || ne0 % t->block != 0) return std::nullopt;
  return io::checked_mul(ne0 / t->block, t->block_bytes);
}

// ---- values -------------------------------------------------------------------

std::string_view value_type_name(ValueType t) {
  static constexpr std::array<std::string_view, kValueTypeCount> names{
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<int32_t>(t);
  return i >= 0 && i < kValueTypeCount ? names[static_cast<size_t>(i)] : "invalid";
}

uint32_t value_type_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::BOOL: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    default: return 0;
  }
}

namespace {

bool is_int_type(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::U16: case ValueType::I16: case ValueType::U32:
    case ValueType::I32: case ValueType::U64: case ValueType::I64: return true;
    default: return false;
  }
}
bool is_signed(ValueType t) { return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64; }

int64_t sign_extend(uint64_t bits, ValueType t) {
  switch (t) {
    case ValueType::I8: return static_cast<int8_t>(bits);
    case ValueType::I16: return static_cast<int16_t>(bits);
    case ValueType::I32: return static_cast<int32_t>(bits);
    default: return static_cast<int64_t>(bits);
  }
}

uint64_t load_le(const char* p, uint32_t n) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::optional<uint64_t> to_uint(uint64_t bits, ValueType t) {
  if (!is_int_type(t)) return std::nullopt;
  if (is_signed(t)) {
    const int64_t v = sign_extend(bits, t);
    if (v < 0) return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  return bits;
}
std::optional<int64_t> to_int(uint64_t bits, ValueType t) {
  if (!is_int_type(t)) return std::nullopt;
  if (is_signed(t)) return sign_extend(bits, t);
  if (bits > uint64_t(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(bits);
}
std::optional<double> to_float(uint64_t bits, ValueType t) {
  if (t == ValueType::F32) {
    float f;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (t == ValueType::F64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return std::nullopt;
}

}  // namespace

bool Value::is_integer() const { return is_int_type(type); }
std::optional<uint64_t> Value::as_uint() const { return to_uint(bits, type); }
std::optional<int64_t> Value::as_int() const { return to_int(bits, type); }
std::optional<double> Value::as_float() const { return to_float(bits, type); }

std::optional<uint64_t> Value::uint_at(uint64_t i) const {
  const uint32_t w = value_type_bytes(elem);
  if (!is_array() || w == 0 || i >= count) return std::nullopt;
  return to_uint(load_le(raw.data() + i * w, w), elem);
}
std::optional<int64_t> Value::int_at(uint64_t i) const {
  const uint32_t w = value_type_bytes(elem);
  if (!is_array() || w == 0 || i >= count) return std::nullopt;
  return to_int(load_le(raw.data() + i * w, w), elem);
}
std::optional<double> Value::float_at(uint64_t i) const {
  const uint32_t w = value_type_bytes(elem);
  if (!is_array() || w == 0 || i >= count) return std::nullopt;
  return to_float(load_le(raw.data() + i * w, w), elem);
}

std::string Value::type_text() const {
  if (is_array()) return "array[" + std::string(value_type_name(elem)) + "]";
  return std::string(value_type_name(type));
}

// ---- File ---------------------------------------------------------------------

const KeyValue* File::find(std::string_view key) const {
  for (const auto& kv : kvs)
    if (kv.key == key) return &kv;
  return nullptr;
}

std::optional<std::string_view> File::get_string(std::string_view key) const {
  const KeyValue* kv = find(key);
  if (!kv || kv->value.type != ValueType::STRING) return std::nullopt;
  return kv->value.str;
}

std::optional<uint64_t> File::get_uint(std::string_view key) const {
  const KeyValue* kv = find(key);
  if (!kv) return std::nullopt;
  return kv->value.as_uint();
}

bool File::has_problem(Rule r) const {
  return std::any_of(problems.begin(), problems.end(), [r](const Problem& p) { return p.rule == r; });
}

bool is_error(Rule r) { return r != Rule::TrailingBytes && r != Rule::PaddingMissing && r != Rule::BoolNotZeroOne; }

bool File::loadable() const {
  return parsed && std::none_of(problems.begin(), problems.end(), [](const Problem& p) { return is_error(p.rule); });
}

std::string_view rule_name(Rule r) {
  static constexpr std::array<std::string_view, static_cast<size_t>(Rule::Count_)> names{
      "ReadFailed",        "TruncatedHeader",   "BadMagic",          "ByteSwapped",        "UnsupportedVersion",
      "CountOutOfRange",   "Truncated",         "EmptyKey",          "DuplicateKey",       "InvalidValueType",
      "ArrayTooLong",      "AlignmentType",     "AlignmentInvalid",  "NameTooLong",        "DuplicateTensor",
      "TooManyDims",       "NegativeDim",       "ElementsOverflow",  "InvalidTensorType",  "RemovedTensorType",
      "RowNotBlockMultiple", "SizeOverflow",    "OffsetMismatch",    "DataPastEof",        "TensorDataTruncated",
      "PaddingMissing",    "TrailingBytes",     "BoolNotZeroOne",    "HeaderTooLarge"};
  const auto i = static_cast<size_t>(r);
  return i < names.size() ? names[i] : "?";
}

bool has_magic(std::span<const std::byte> first4) {
  return first4.size() >= 4 && std::memcmp(first4.data(), "GGUF", 4) == 0;
}

// ---- reader -------------------------------------------------------------------

namespace {

// Bytes of the file read so far, grown on demand from the file (or fixed, for parse()).
// Positions are file offsets; views are taken only after the last read (the buffer moves).
class Source {
 public:
  Source(std::string& buf, uint64_t file_size, const io::ReadOnlyFile* file) : buf_(buf), size_(file_size), file_(file) {}
  uint64_t size() const { return size_; }
  uint64_t left(uint64_t pos) const { return pos >= size_ ? 0 : size_ - pos; }
  // Makes [pos, pos + n) readable. False when past the end, the cap, or a read error.
  bool ensure(uint64_t pos, uint64_t n) {
    auto end = io::checked_add(pos, n);
    if (!end || *end > size_) return false;
    if (*end <= buf_.size()) return true;
    if (!file_ || *end > kMaxHeaderBytes) {
      if (file_) over_cap_ = true;
      return false;
    }
    uint64_t want = std::max<uint64_t>({*end, buf_.size() * 2, 64u << 10});
    want = std::min<uint64_t>({want, size_, kMaxHeaderBytes});
    const uint64_t have = buf_.size();
    buf_.resize(want);
    std::string err;
    const int64_t got = file_->read_at(have, buf_.data() + have, want - have, &err);
    if (got < 0 || static_cast<uint64_t>(got) != want - have) {
      buf_.resize(got > 0 ? have + static_cast<uint64_t>(got) : have);
      read_error_ = err.empty() ? "short read" : err;
      return *end <= buf_.size();
    }
    return true;
  }
  uint64_t u(uint64_t pos, uint32_t n) const { return load_le(buf_.data() + pos, n); }
  // Valid until the next ensure().
  std::string_view peek(uint64_t pos, uint64_t n) const { return {buf_.data() + pos, n}; }
  bool over_cap() const { return over_cap_; }
  const std::string& read_error() const { return read_error_; }

 private:
  std::string& buf_;
  uint64_t size_;
  const io::ReadOnlyFile* file_;
  bool over_cap_ = false;
  std::string read_error_;
};

struct Span {
  uint64_t pos = 0, len = 0;
};

std::string fmt_hex(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

class Parser {
 public:
  Parser(Source& src, File& f) : src_(src), f_(f) {}

  void run();

  // Views to make once reading is done.
  std::vector<Span> key_spans, str_spans, raw_spans, name_spans;
  std::vector<std::vector<Span>> strings_spans;

 private:
  void problem(Rule r, uint64_t offset, std::string detail, std::string key = {}, std::string tensor = {}) {
    f_.problems.push_back(Problem{r, std::move(key), std::move(tensor), std::move(detail), offset});
  }
  // A read past the end (or past ckpt's cap, or an I/O error), reported once.
  void truncated(uint64_t pos, uint64_t n, const std::string& what, const std::string& key = {}, const std::string& tensor = {}) {
    if (!src_.read_error().empty()) {
      problem(Rule::ReadFailed, pos, "read failed at byte " + std::to_string(pos) + ": " + src_.read_error(), key, tensor);
    } else if (src_.over_cap()) {
      problem(Rule::HeaderTooLarge, pos,
              what + " reaches past byte " + std::to_string(kMaxHeaderBytes) + ", the most metadata ckpt reads", key, tensor);
    } else {
      problem(Rule::Truncated, pos,
              what + " at byte " + std::to_string(pos) + " needs " + std::to_string(n) + " bytes but the file has " +
                  std::to_string(src_.left(pos)) + " left",
              key, tensor);
    }
  }
  // `what` names the field for a message; a callable, so the text is built only on failure
  // (a 256k-token vocabulary reads 256k strings).
  template <class What>
  bool read_uint(uint64_t& pos, uint32_t n, uint64_t& out, const What& what, const std::string& key = {},
                 const std::string& tensor = {}) {
    if (!src_.ensure(pos, n)) {
      truncated(pos, n, what(), key, tensor);
      return false;
    }
    out = src_.u(pos, n);
    pos += n;
    return true;
  }
  // A GGUF string: u64 length then bytes.
  template <class What>
  bool read_string(uint64_t& pos, Span& out, const What& what, const std::string& key = {}, const std::string& tensor = {}) {
    const uint64_t at = pos;
    uint64_t len;
    if (!read_uint(pos, 8, len, [&] { return what() + " length"; }, key, tensor)) return false;
    if (len > kMaxStringBytes) {
      problem(Rule::Truncated, at,
              what() + " at byte " + std::to_string(at) + " declares " + std::to_string(len) +
                  " bytes, above gguf.cpp's 1 GiB string limit (the file has " + std::to_string(src_.left(pos)) + " left)",
              key, tensor);
      return false;
    }
    if (!src_.ensure(pos, len)) {
      truncated(at, 8 + len, what(), key, tensor);
      return false;
    }
    out = {pos, len};
    pos += len;
    return true;
  }
  bool read_value(uint64_t& pos, Value& v, size_t kv_index, const std::string& key);
  bool read_kvs(uint64_t& pos);
  bool read_tensor_infos(uint64_t& pos);
  void check_layout();

  Source& src_;
  File& f_;
};

bool Parser::read_value(uint64_t& pos, Value& v, size_t kv_index, const std::string& key) {
  const uint64_t type_at = pos;
  uint64_t raw_type;
  if (!read_uint(pos, 4, raw_type, [&] { return "value type of key '" + key + "'"; }, key)) return false;
  const int32_t t = static_cast<int32_t>(static_cast<uint32_t>(raw_type));
  if (t < 0 || t >= kValueTypeCount) {
    problem(Rule::InvalidValueType, type_at,
            "key '" + key + "' has value type " + std::to_string(t) + ", expected 0..12", key);
    return false;
  }
  v.type = static_cast<ValueType>(t);
  if (v.type == ValueType::STRING) {
    Span s;
    if (!read_string(pos, s, [&] { return "string value of key '" + key + "'"; }, key)) return false;
    str_spans[kv_index] = s;
    return true;
  }
  if (v.type != ValueType::ARRAY) {
    const uint32_t w = value_type_bytes(v.type);
    const uint64_t at = pos;
    if (!read_uint(pos, w, v.bits, [&] { return std::string(value_type_name(v.type)) + " value of key '" + key + "'"; }, key)) return false;
    if (v.type == ValueType::BOOL && v.bits > 1)
      problem(Rule::BoolNotZeroOne, at,
              "key '" + key + "' is a bool stored as " + std::to_string(v.bits) + "; the spec allows 0 or 1, gguf.cpp reads any non-zero as true",
              key);
    return true;
  }
  uint64_t raw_elem;
  const uint64_t elem_at = pos;
  if (!read_uint(pos, 4, raw_elem, [&] { return "array element type of key '" + key + "'"; }, key)) return false;
  const int32_t e = static_cast<int32_t>(static_cast<uint32_t>(raw_elem));
  if (e < 0 || e >= kValueTypeCount || e == static_cast<int32_t>(ValueType::ARRAY)) {
    problem(Rule::InvalidValueType, elem_at,
            "key '" + key + "' is an array of element type " + std::to_string(e) +
                (e == 9 ? " (nested array: gguf.cpp does not read arrays of arrays)" : ", expected 0..12 other than 9"),
            key);
    return false;
  }
  v.elem = static_cast<ValueType>(e);
  const uint64_t count_at = pos;
  if (!read_uint(pos, 8, v.count, [&] { return "array length of key '" + key + "'"; }, key)) return false;
  const uint64_t left = src_.left(pos);
  const uint64_t min_elem = v.elem == ValueType::STRING ? 8 : value_type_bytes(v.elem);
  if (v.count > kMaxArrayElements || v.count > left / min_elem) {
    problem(Rule::ArrayTooLong, count_at,
            "key '" + key + "' is an array of " + std::to_string(v.count) + " " + std::string(value_type_name(v.elem)) +
                (v.count > kMaxArrayElements ? ", above gguf.cpp's limit of 2^30 elements"
                                             : ", needing at least " + std::to_string(min_elem) + " bytes each, but the file has " +
                                                   std::to_string(left) + " bytes left"),
            key);
    return false;
  }
  if (v.elem != ValueType::STRING) {
    const uint64_t n = v.count * min_elem;  // bounded by `left` above
    if (!src_.ensure(pos, n)) {
      truncated(pos, n, "array data of key '" + key + "'", key);
      return false;
    }
    raw_spans[kv_index] = {pos, n};
    if (v.elem == ValueType::BOOL)
      for (uint64_t i = 0; i < v.count; ++i)
        if (src_.u(pos + i, 1) > 1) {
          problem(Rule::BoolNotZeroOne, pos + i,
                  "key '" + key + "' element " + std::to_string(i) + " is a bool stored as " + std::to_string(src_.u(pos + i, 1)), key);
          break;
        }
    pos += n;
    return true;
  }
  auto& spans = strings_spans[kv_index];
  // The count is bounded by the bytes the file declares, not by those read: a sparse 16 GB
  // file may declare 2^30 strings. Grow with what is really read (each string costs >= 8 bytes
  // of header) instead of reserving 16 bytes per declared element up front.
  spans.reserve(static_cast<size_t>(std::min<uint64_t>(v.count, uint64_t{1} << 16)));
  for (uint64_t i = 0; i < v.count; ++i) {
    Span s;
    if (!read_string(pos, s, [&] { return "string " + std::to_string(i) + " of key '" + key + "'"; }, key)) return false;
    spans.push_back(s);
  }
  return true;
}

bool Parser::read_kvs(uint64_t& pos) {
  // Vectors grow with what is really read, so memory follows the file's bytes, not its counts.
  const uint64_t n = static_cast<uint64_t>(f_.n_kv);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < n; ++i) {
    f_.kvs.emplace_back();
    key_spans.emplace_back();
    str_spans.emplace_back();
    raw_spans.emplace_back();
    strings_spans.emplace_back();
    KeyValue& kv = f_.kvs[i];
    kv.offset = pos;
    Span ks;
    if (!read_string(pos, ks, [&] { return "key " + std::to_string(i); })) {
      f_.kvs.resize(i);
      return false;
    }
    key_spans[i] = ks;
    const std::string key(src_.peek(ks.pos, ks.len));
    if (key.empty()) {
      problem(Rule::EmptyKey, kv.offset, "key " + std::to_string(i) + " at byte " + std::to_string(kv.offset) + " is empty");
    } else if (!seen.insert(key).second) {
      problem(Rule::DuplicateKey, kv.offset, "key '" + key + "' appears again at byte " + std::to_string(kv.offset), key);
    }
    if (!read_value(pos, kv.value, i, key)) {
      f_.kvs.resize(i);
      return false;
    }
  }
  return true;
}

bool Parser::read_tensor_infos(uint64_t& pos) {
  const uint64_t n = static_cast<uint64_t>(f_.n_tensors);
  std::unordered_set<std::string> seen;
  for (uint64_t i = 0; i < n; ++i) {
    f_.tensors.emplace_back();
    name_spans.emplace_back();
    TensorInfo& t = f_.tensors[i];
    t.info_offset = pos;
    Span ns;
    if (!read_string(pos, ns, [&] { return "name of tensor " + std::to_string(i); })) {
      f_.tensors.resize(i);
      return false;
    }
    name_spans[i] = ns;
    const std::string name(src_.peek(ns.pos, ns.len));
    if (ns.len > kMaxNameBytes)
      problem(Rule::NameTooLong, t.info_offset,
              "tensor " + std::to_string(i) + " has a name of " + std::to_string(ns.len) +
                  " bytes; gguf.cpp accepts at most 63 (GGML_MAX_NAME 64 with its NUL)",
              {}, name);
    if (!seen.insert(name).second)
      problem(Rule::DuplicateTensor, t.info_offset, "tensor '" + name + "' appears again at byte " + std::to_string(t.info_offset), {},
              name);
    uint64_t v;
    const uint64_t dims_at = pos;
    if (!read_uint(pos, 4, v, [&] { return "n_dims of tensor '" + name + "'"; }, {}, name)) {
      f_.tensors.resize(i);
      return false;
    }
    if (v > kMaxDims) {
      problem(Rule::TooManyDims, dims_at, "tensor '" + name + "' has " + std::to_string(v) + " dimensions, at most 4 allowed", {}, name);
      f_.tensors.resize(i + 1);
      return false;  // the rest of the infos cannot be located
    }
    t.n_dims = static_cast<uint32_t>(v);
    bool dims_ok = true;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      const uint64_t at = pos;
      if (!read_uint(pos, 8, v, [&] { return "dimension " + std::to_string(d) + " of tensor '" + name + "'"; }, {}, name)) {
        f_.tensors.resize(i + 1);
        return false;
      }
      t.ne[d] = static_cast<int64_t>(v);
      if (t.ne[d] < 0) {
        problem(Rule::NegativeDim, at,
                "tensor '" + name + "' dimension " + std::to_string(d) + " is " + std::to_string(t.ne[d]) + ", expected >= 0", {},
                name);
        dims_ok = false;
      }
    }
    const uint64_t type_at = pos;
    if (!read_uint(pos, 4, v, [&] { return "type of tensor '" + name + "'"; }, {}, name) ||
        !read_uint(pos, 8, t.offset, [&] { return "offset of tensor '" + name + "'"; }, {}, name)) {
      f_.tensors.resize(i + 1);
      return false;
    }
    t.type = static_cast<int32_t>(static_cast<uint32_t>(v));
    if (!dims_ok) continue;
    // Element count: checked over every dimension (0 is a valid, empty tensor).
    uint64_t elements = 1;
    bool fits = true;
    for (uint32_t d = 0; d < kMaxDims && fits; ++d) {
      auto m = io::checked_mul(elements, static_cast<uint64_t>(t.ne[d]));
      if (!m || *m > uint64_t(INT64_MAX)) fits = false;
      else elements = *m;
    }
    if (!fits) {
      std::string dims;
      for (uint32_t d = 0; d < t.n_dims; ++d) dims += (d ? ", " : "") + std::to_string(t.ne[d]);
      problem(Rule::ElementsOverflow, t.info_offset,
              "tensor '" + name + "' has dimensions [" + dims + "], whose element count does not fit in int64 (gguf.cpp's product wraps)",
              {}, name);
      continue;
    }
    t.elements = elements;
    const GgmlTypeInfo* ti = ggml_type(t.type);
    if (!ti) {
      problem(Rule::InvalidTensorType, type_at,
              "tensor '" + name + "' has type " + std::to_string(t.type) + ", expected 0.." + std::to_string(kTypeCount - 1) + " (" +
                  std::string(kTypeTableRevision) + ")",
              {}, name);
      continue;
    }
    if (ti->block == 0) {
      problem(Rule::RemovedTensorType, type_at,
              "tensor '" + name + "' has type " + std::to_string(t.type) + " (" + std::string(ti->name) +
                  "), which was removed from GGUF files (block size 0)",
              {}, name);
      continue;
    }
    const uint64_t ne0 = static_cast<uint64_t>(t.ne[0]);
    if (ne0 % ti->block != 0) {
      problem(Rule::RowNotBlockMultiple, t.info_offset,
              "tensor '" + name + "' of type " + std::string(ti->name) + " has " + std::to_string(ne0) +
                  " elements per row, not a multiple of its block size " + std::to_string(ti->block),
              {}, name);
      continue;
    }
    std::optional<uint64_t> bytes = io::checked_mul(ne0 / ti->block, ti->block_bytes);
    for (uint32_t d = 1; d < kMaxDims && bytes; ++d) bytes = io::checked_mul(*bytes, static_cast<uint64_t>(t.ne[d]));
    if (!bytes) {
      problem(Rule::SizeOverflow, t.info_offset, "tensor '" + name + "': its byte size overflows 64 bits", {}, name);
      continue;
    }
    t.nbytes = *bytes;
    t.size_ok = true;
  }
  return true;
}

void Parser::check_layout() {
  // Data section start: aligned after the infos, only when there are tensors (gguf.cpp).
  if (f_.n_tensors > 0) {
    auto start = io::checked_align_up(f_.infos_end, f_.alignment);
    if (!start) {
      problem(Rule::SizeOverflow, f_.infos_end, "the data section start overflows 64 bits");
      return;
    }
    f_.data_start = *start;
  } else {
    f_.data_start = f_.infos_end;
  }
  if (f_.data_start > f_.file_size) {
    problem(Rule::DataPastEof, f_.infos_end,
            "the data section starts at byte " + std::to_string(f_.data_start) + " (tensor infos end at " +
                std::to_string(f_.infos_end) + ", aligned to " + std::to_string(f_.alignment) + "), past the end of the " +
                std::to_string(f_.file_size) + "-byte file");
    return;
  }
  uint64_t expected = 0;
  bool all_known = true;
  const uint64_t data_avail = f_.file_size - f_.data_start;
  for (size_t i = 0; i < f_.tensors.size(); ++i) {
    const TensorInfo& t = f_.tensors[i];
    if (!t.size_ok) {
      all_known = false;
      break;  // later offsets cannot be predicted
    }
    const std::string name(src_.peek(name_spans[i].pos, name_spans[i].len));
    if (t.offset != expected) {
      problem(Rule::OffsetMismatch, t.info_offset,
              "tensor '" + name + "' has offset " + std::to_string(t.offset) + ", expected " + std::to_string(expected) +
                  (t.offset > expected ? " (a gap after the previous tensor)" : " (it overlaps the previous tensor)"),
              {}, name);
      expected = t.offset;  // follow the file's own layout: one finding per break
    }
    auto padded = io::checked_align_up(t.nbytes, f_.alignment);
    auto end = padded ? io::checked_add(expected, *padded) : std::nullopt;
    if (!padded || !end) {
      problem(Rule::SizeOverflow, t.info_offset,
              "tensor '" + name + "': " + std::to_string(t.nbytes) + " bytes padded to " + std::to_string(f_.alignment) +
                  " at offset " + std::to_string(expected) + " overflows 64 bits (gguf.cpp's GGML_PAD wraps to 0)",
              {}, name);
      all_known = false;
      break;
    }
    auto data_end = io::checked_add(t.offset, t.nbytes);
    if (!data_end || *data_end > data_avail)
      problem(Rule::TensorDataTruncated, t.info_offset,
              "tensor '" + name + "' needs bytes " + std::to_string(f_.data_start + t.offset) + ".." +
                  std::to_string(f_.data_start + t.offset + t.nbytes) + " (" + std::to_string(t.nbytes) + " bytes), but the file ends at " +
                  std::to_string(f_.file_size),
              {}, name);
    expected = *end;
  }
  if (!all_known) return;
  f_.sizes_ok = true;
  f_.data_size = expected;
  if (f_.has_problem(Rule::TensorDataTruncated)) return;
  if (expected > data_avail) {
    problem(Rule::PaddingMissing, f_.file_size,
            "every tensor is inside the file, but the data section padded to " + std::to_string(f_.alignment) + " needs " +
                std::to_string(expected) + " bytes and " + std::to_string(data_avail) + " are present");
  } else if (expected < data_avail && f_.n_tensors > 0) {
    problem(Rule::TrailingBytes, f_.data_start + expected,
            std::to_string(data_avail - expected) + " bytes follow the data section (which ends at byte " +
                std::to_string(f_.data_start + expected) + ")");
  }
}

void Parser::run() {
  uint64_t pos = 0;
  if (!src_.ensure(0, 4)) {
    if (!src_.read_error().empty()) problem(Rule::ReadFailed, 0, "read failed: " + src_.read_error());
    else problem(Rule::TruncatedHeader, 0, "the file has " + std::to_string(f_.file_size) + " bytes, fewer than the 4-byte magic");
    return;
  }
  if (src_.peek(0, 4) != "GGUF") {
    std::string m;
    for (char c : src_.peek(0, 4)) m += (c >= 0x20 && c < 0x7f) ? c : '?';
    problem(Rule::BadMagic, 0, "magic is '" + m + "', expected 'GGUF'");
    return;
  }
  pos = 4;
  if (!src_.ensure(pos, 4)) {
    problem(Rule::TruncatedHeader, pos, "the file ends at byte " + std::to_string(f_.file_size) + ", inside the 24-byte header (version)");
    return;
  }
  f_.version = static_cast<uint32_t>(src_.u(pos, 4));
  if (f_.version != 0 && (f_.version & 0xFFFF) == 0) {
    const uint32_t swapped = __builtin_bswap32(f_.version);
    problem(Rule::ByteSwapped, pos,
            "version reads as " + std::to_string(f_.version) + " (0x" + fmt_hex(f_.version) + "): a big-endian GGUF (version " +
                std::to_string(swapped) + " in the other byte order); llama.cpp reads GGUF in host order and refuses it");
    return;
  }
  if (f_.version == 0 || f_.version == 1 || f_.version > kMaxVersion) {
    problem(Rule::UnsupportedVersion, pos,
            "version " + std::to_string(f_.version) +
                (f_.version == 1 ? " (GGUFv1 is no longer supported)" : f_.version == 0 ? "" : " is newer than ckpt and llama.cpp know") +
                "; versions 2 and 3 load");
    return;
  }
  pos = 8;
  if (!src_.ensure(pos, 16)) {
    problem(Rule::TruncatedHeader, pos,
            "the file ends at byte " + std::to_string(f_.file_size) + ", inside the 24-byte header (tensor and key/value counts)");
    return;
  }
  f_.n_tensors = static_cast<int64_t>(src_.u(8, 8));
  f_.n_kv = static_cast<int64_t>(src_.u(16, 8));
  pos = 24;
  // Each KV pair and each tensor info starts with an 8-byte length: counts the rest of the
  // file cannot hold are rejected before reading on (gguf.cpp checks only against SIZE_MAX).
  const uint64_t left = src_.left(pos);
  bool counts_ok = true;
  if (f_.n_tensors < 0 || static_cast<uint64_t>(f_.n_tensors) > left / 8) {
    problem(Rule::CountOutOfRange, 8,
            "tensor count is " + std::to_string(f_.n_tensors) + (f_.n_tensors < 0 ? ", negative" : ", more than the " + std::to_string(left) + " bytes left can hold"));
    counts_ok = false;
  }
  if (f_.n_kv < 0 || static_cast<uint64_t>(f_.n_kv) > left / 8) {
    problem(Rule::CountOutOfRange, 16,
            "key/value count is " + std::to_string(f_.n_kv) + (f_.n_kv < 0 ? ", negative" : ", more than the " + std::to_string(left) + " bytes left can hold"));
    counts_ok = false;
  }
  if (!counts_ok) return;
  f_.header_ok = true;
  if (!read_kvs(pos)) return;
  f_.metadata_ok = true;
  // general.alignment: u32, non-zero power of two.
  bool alignment_ok = true;
  for (const auto& kv : f_.kvs) {
    if (&kv - f_.kvs.data() >= static_cast<ptrdiff_t>(key_spans.size())) break;
    const Span& ks = key_spans[static_cast<size_t>(&kv - f_.kvs.data())];
    if (src_.peek(ks.pos, ks.len) != "general.alignment") continue;
    if (kv.value.type != ValueType::U32) {
      problem(Rule::AlignmentType, kv.offset, "general.alignment is stored as " + kv.value.type_text() + ", expected u32",
              "general.alignment");
      alignment_ok = false;
    } else if (kv.value.bits == 0 || (kv.value.bits & (kv.value.bits - 1)) != 0) {
      problem(Rule::AlignmentInvalid, kv.offset,
              "general.alignment is " + std::to_string(kv.value.bits) + ", expected a non-zero power of two", "general.alignment");
      alignment_ok = false;
    } else {
      f_.alignment = static_cast<uint32_t>(kv.value.bits);
    }
    break;  // a duplicate is its own problem; gguf.cpp stops at the first
  }
  if (!read_tensor_infos(pos)) return;
  f_.parsed = true;
  f_.infos_end = pos;
  if (!alignment_ok) return;  // offsets cannot be judged without a valid alignment
  check_layout();
}

}  // namespace

namespace {

File parse_with(Source& src, std::string& buf, uint64_t file_size) {
  File f;
  f.file_size = file_size;
  Parser p(src, f);
  p.run();
  // Reading is done: the buffer no longer moves, so the views can be taken.
  auto storage = std::make_shared<std::string>(std::move(buf));
  const char* base = storage->data();
  auto view = [&](const Span& s) { return std::string_view(base + s.pos, s.len); };
  for (size_t i = 0; i < f.kvs.size(); ++i) {
    KeyValue& kv = f.kvs[i];
    kv.key = view(p.key_spans[i]);
    if (kv.value.type == ValueType::STRING) kv.value.str = view(p.str_spans[i]);
    if (kv.value.is_array()) {
      if (kv.value.elem == ValueType::STRING) {
        kv.value.strings.reserve(p.strings_spans[i].size());
        for (const auto& s : p.strings_spans[i]) kv.value.strings.push_back(view(s));
      } else {
        kv.value.raw = view(p.raw_spans[i]);
      }
    }
  }
  for (size_t i = 0; i < f.tensors.size() && i < p.name_spans.size(); ++i) f.tensors[i].name = view(p.name_spans[i]);
  f.storage = std::move(storage);
  return f;
}

}  // namespace

File parse(std::span<const std::byte> bytes, uint64_t file_size) {
  std::string buf(reinterpret_cast<const char*>(bytes.data()), std::min<uint64_t>(bytes.size(), file_size));
  Source src(buf, file_size, nullptr);
  return parse_with(src, buf, file_size);
}

File read_file(const std::filesystem::path& path) {
  io::ReadOnlyFile file;
  std::string err = file.open(path);
  std::string buf;
  if (!err.empty()) {
    File f;
    f.problems.push_back(Problem{Rule::ReadFailed, {}, {}, "cannot open: " + err, 0});
    return f;
  }
  Source src(buf, file.size(), &file);
  return parse_with(src, buf, file.size());
}

// ---- writer -------------------------------------------------------------------

namespace {

uint64_t f32_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

void put(std::string& out, uint64_t v, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_string(std::string& out, std::string_view s) {
  put(out, s.size(), 8);
  out.append(s);
}
void pad_to(std::string& out, uint64_t align) {
  while (out.size() % align) out.push_back('\0');
}

}  // namespace

WriteValue WriteValue::u32(uint32_t v) { return {ValueType::U32, ValueType::U32, v, {}, {}, {}, 0}; }
WriteValue WriteValue::i32(int32_t v) { return {ValueType::I32, ValueType::U32, static_cast<uint32_t>(v), {}, {}, {}, 0}; }
WriteValue WriteValue::u16(uint16_t v) { return {ValueType::U16, ValueType::U32, v, {}, {}, {}, 0}; }
WriteValue WriteValue::u64(uint64_t v) { return {ValueType::U64, ValueType::U32, v, {}, {}, {}, 0}; }
WriteValue WriteValue::f32(float v) { return {ValueType::F32, ValueType::U32, f32_bits(v), {}, {}, {}, 0}; }
WriteValue WriteValue::boolean(bool v) { return {ValueType::BOOL, ValueType::U32, v ? 1u : 0u, {}, {}, {}, 0}; }
WriteValue WriteValue::string(std::string s) { return {ValueType::STRING, ValueType::U32, 0, std::move(s), {}, {}, 0}; }
WriteValue WriteValue::string_array(std::vector<std::string> v) {
  WriteValue w{ValueType::ARRAY, ValueType::STRING, 0, {}, std::move(v), {}, 0};
  w.count = w.strings.size();
  return w;
}
WriteValue WriteValue::f32_array(const std::vector<float>& v) {
  WriteValue w{ValueType::ARRAY, ValueType::F32, 0, {}, {}, {}, v.size()};
  for (float x : v) put(w.raw, f32_bits(x), 4);
  return w;
}
WriteValue WriteValue::i32_array(const std::vector<int32_t>& v) {
  WriteValue w{ValueType::ARRAY, ValueType::I32, 0, {}, {}, {}, v.size()};
  for (int32_t x : v) put(w.raw, static_cast<uint32_t>(x), 4);
  return w;
}
WriteValue WriteValue::u32_array(const std::vector<uint32_t>& v) {
  WriteValue w{ValueType::ARRAY, ValueType::U32, 0, {}, {}, {}, v.size()};
  for (uint32_t x : v) put(w.raw, x, 4);
  return w;
}

std::string build(const std::vector<std::pair<std::string, WriteValue>>& kvs, const std::vector<WriteTensor>& tensors,
                  const WriteOptions& opts, std::string* error) {
  std::string out = "GGUF";
  put(out, opts.version, 4);
  put(out, tensors.size(), 8);
  const bool write_alignment = opts.alignment != kDefaultAlignment;
  put(out, kvs.size() + (write_alignment ? 1 : 0), 8);
  auto put_value = [&](const WriteValue& v) {
    put(out, static_cast<uint32_t>(v.type), 4);
    switch (v.type) {
      case ValueType::STRING: put_string(out, v.str); break;
      case ValueType::ARRAY:
        put(out, static_cast<uint32_t>(v.elem), 4);
        put(out, v.elem == ValueType::STRING ? v.strings.size() : v.count, 8);
        if (v.elem == ValueType::STRING)
          for (const auto& s : v.strings) put_string(out, s);
        else
          out.append(v.raw);
        break;
      default: put(out, v.bits, value_type_bytes(v.type));
    }
  };
  if (write_alignment) {
    put_string(out, "general.alignment");
    put_value(WriteValue::u32(opts.alignment));
  }
  for (const auto& [k, v] : kvs) {
    put_string(out, k);
    put_value(v);
  }
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
    auto row = row_bytes(t.type, ne0);
    uint64_t bytes = row ? *row : 0;
    for (size_t d = 1; d < t.ne.size(); ++d) bytes *= t.ne[d];
    if (!row && error) *error = "tensor '" + t.name + "': " + std::to_string(ne0) + " is not a row length its type can store";
    sizes.push_back(bytes);
    put_string(out, t.name);
    put(out, t.ne.size(), 4);
    for (uint64_t d : t.ne) put(out, d, 8);
    put(out, static_cast<uint32_t>(t.type), 4);
    put(out, offset, 8);
    offset += (bytes + opts.alignment - 1) / opts.alignment * opts.alignment;
  }
  if (!tensors.empty()) pad_to(out, opts.alignment);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.data.size() == sizes[i]) out.append(t.data);
    else out.append(sizes[i], '\0');
    pad_to(out, opts.alignment);
  }
  return out;
}

std::string write_file(const std::filesystem::path& path, const std::vector<std::pair<std::string, WriteValue>>& kvs,
                       const std::vector<WriteTensor>& tensors, const WriteOptions& opts) {
  std::string error;
  const std::string bytes = build(kvs, tensors, opts, &error);
  if (!error.empty()) return error;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return "cannot create " + path.string();
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok ? "" : "cannot write " + path.string();
}

}  // namespace ckpt::gguf
