// GGUF (llama.cpp's format): the ggml type table, a bounded reader with checked arithmetic,
// and a writer for fixtures. The reader reads the header, the key/value pairs and the tensor
// infos, never tensor data; it records every rule of ggml's gguf.cpp that the bytes break
// (plus the overflow and truncation gaps gguf.cpp misses), each located by byte offset, key
// or tensor, and the GG check family turns them into findings.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/tensor.h"

namespace ckpt::gguf {

inline constexpr uint32_t kMaxVersion = 3;              // GGUF_VERSION
inline constexpr uint32_t kDefaultAlignment = 32;       // GGUF_DEFAULT_ALIGNMENT
inline constexpr uint32_t kMaxDims = 4;                 // GGML_MAX_DIMS
inline constexpr uint64_t kMaxNameBytes = 63;           // GGML_MAX_NAME - 1
inline constexpr uint64_t kMaxStringBytes = 1ull << 30; // GGUF_MAX_STRING_LENGTH
inline constexpr uint64_t kMaxArrayElements = 1ull << 30;  // GGUF_MAX_ARRAY_ELEMENTS
// ckpt's own bound on what it holds in memory: header, KV pairs and tensor infos together.
// Real headers are tens of MB (a 256k-token vocabulary with merges); gguf.cpp has no such cap.
inline constexpr uint64_t kMaxHeaderBytes = 1ull << 30;

// ---- ggml tensor types ------------------------------------------------------

inline constexpr int32_t kTypeCount = 43;  // GGML_TYPE_COUNT at the upstream revision below
// The upstream revision whose type table this is (ids are reused across forks, specs/gguf.md §2.1).
inline constexpr std::string_view kTypeTableRevision = "ggml-org/llama.cpp 3f545bec";

struct GgmlTypeInfo {
  int32_t id;
  std::string_view name;  // lower-case as ggml prints it; "removed" ids carry their old name
  uint32_t block;         // elements per block; 0 = removed from GGUF files
  uint32_t block_bytes;   // bytes per block (from the C structs)
  bool is_float() const { return id == 0 || id == 1 || id == 30 || id == 28; }  // F32 F16 BF16 F64
};
// The entry for a raw type id, or nullptr when it is outside [0, kTypeCount).
const GgmlTypeInfo* ggml_type(int64_t id);
std::optional<int32_t> ggml_type_from_name(std::string_view name);  // "q4_k", "F16", ...
// The format-neutral dtype of a ggml type id (DType::Unknown for removed or invalid ids).
DType dtype_of(int32_t ggml_type);
// Bytes of one row of ne0 elements (nullopt when the type is removed, ne0 is not a multiple
// of its block, or on overflow).
std::optional<uint64_t> row_bytes(int32_t type, uint64_t ne0);

// ---- metadata values --------------------------------------------------------

enum class ValueType : int32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
inline constexpr int32_t kValueTypeCount = 13;
std::string_view value_type_name(ValueType t);  // "u32", "string", "array", ...
uint32_t value_type_bytes(ValueType t);          // fixed-size types; 0 for string and array

// A value as stored. Strings and the bytes of numeric arrays are views into the File's
// storage, valid while the File (or a copy of it) lives.
struct Value {
  ValueType type = ValueType::U8;
  ValueType elem = ValueType::U8;       // arrays: the element type
  uint64_t count = 0;                   // arrays: number of elements
  uint64_t bits = 0;                    // scalars: the raw little-endian bits, zero-extended
  std::string_view str;                 // STRING
  std::string_view raw;                 // numeric arrays: count * value_type_bytes(elem) bytes
  std::vector<std::string_view> strings;  // string arrays

  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_integer() const;              // a scalar of an integer type
  // Scalars of integer type (any width) as signed/unsigned 64-bit; nullopt otherwise or when
  // the value does not fit (a negative value as unsigned).
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;  // F32/F64
  // Element i of a numeric array as for the scalar accessors.
  std::optional<uint64_t> uint_at(uint64_t i) const;
  std::optional<int64_t> int_at(uint64_t i) const;
  std::optional<double> float_at(uint64_t i) const;
  // "u32", "string", "array[u32]", ...
  std::string type_text() const;
};

struct KeyValue {
  std::string_view key;
  Value value;
  uint64_t offset = 0;  // file offset of the key's length prefix
};

struct TensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // innermost first; missing trailing dims are 1
  int32_t type = 0;                     // raw ggml type id as stored
  uint64_t offset = 0;                  // relative to the data section
  uint64_t info_offset = 0;             // file offset of the tensor info
  // Valid only when size_ok: the element count and bytes computed with checked arithmetic.
  bool size_ok = false;
  uint64_t elements = 0;
  uint64_t nbytes = 0;
};

// What went wrong; the GG family assigns one code per rule.
enum class Rule : uint8_t {
  ReadFailed,          // I/O error
  TruncatedHeader,     // file ends inside magic/version/counts
  BadMagic,
  ByteSwapped,         // version reads (v & 0xFFFF) == 0: written in the other byte order
  UnsupportedVersion,  // 0, 1 or > 3
  CountOutOfRange,     // n_tensors / n_kv negative or more than the bytes left can hold
  Truncated,           // a string, value, array or tensor info runs past the end of the file
  EmptyKey,
  DuplicateKey,
  InvalidValueType,    // value or array element type outside 0..12, or a nested array
  ArrayTooLong,        // count above 2^30 or above what the bytes left can hold
  AlignmentType,       // general.alignment not u32
  AlignmentInvalid,    // 0 or not a power of two
  NameTooLong,         // tensor name of 64 bytes or more
  DuplicateTensor,
  TooManyDims,         // n_dims > 4
  NegativeDim,
  ElementsOverflow,    // element count not representable in int64
  InvalidTensorType,   // type id outside [0, 43)
  RemovedTensorType,   // a type id removed from GGUF (block size 0)
  RowNotBlockMultiple, // ne[0] not a multiple of the type's block size
  SizeOverflow,        // nbytes, padded size or running offset overflows 64 bits
  OffsetMismatch,      // offset differs from the running padded sum
  DataPastEof,         // the aligned data section starts past the end of the file
  TensorDataTruncated, // offset + nbytes past the end of the file
  PaddingMissing,      // tensors fit, but the padded data section (as gguf.cpp reads it) does not
  TrailingBytes,       // bytes after the padded data section
  BoolNotZeroOne,      // a BOOL byte other than 0 or 1 (gguf.cpp reads it as true)
  HeaderTooLarge,      // past kMaxHeaderBytes
  Count_
};

struct Problem {
  Rule rule;
  std::string key;     // metadata key, when about one
  std::string tensor;  // tensor name, when about one
  std::string detail;  // what was found, what was expected
  uint64_t offset = 0; // file offset
};

struct File {
  uint64_t file_size = 0;
  uint32_t version = 0;
  int64_t n_tensors = 0, n_kv = 0;  // as declared
  bool header_ok = false;   // magic, version and counts readable and valid
  bool metadata_ok = false; // every KV pair read
  bool parsed = false;      // tensor infos read too (problems may remain, e.g. offsets)
  uint32_t alignment = kDefaultAlignment;
  uint64_t infos_end = 0;   // file offset just past the tensor infos (or the KV pairs)
  uint64_t data_start = 0;  // file offset of the data section
  uint64_t data_size = 0;   // sum of padded tensor sizes (valid when sizes_ok)
  bool sizes_ok = false;    // every tensor's size and offset computed
  std::vector<KeyValue> kvs;        // file order
  std::vector<TensorInfo> tensors;  // file order
  std::vector<Problem> problems;
  std::shared_ptr<const std::string> storage;  // the bytes every view points into

  const KeyValue* find(std::string_view key) const;
  // Convenience: a scalar string / unsigned value of `key`, nullopt when absent or mistyped.
  std::optional<std::string_view> get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint(std::string_view key) const;
  bool has_problem(Rule r) const;
  // True when nothing in the file stops llama.cpp from reading it (no error-rule problem).
  bool loadable() const;
};

bool is_error(Rule r);  // every rule but TrailingBytes, PaddingMissing and BoolNotZeroOne
std::string_view rule_name(Rule r);

// Parse bytes already in memory (`bytes` is the whole file, or its first part when
// `file_size` is larger: then a read past the part is reported as truncation).
File parse(std::span<const std::byte> bytes, uint64_t file_size);
// Read the GGUF at `path` read-only: only the header, KV pairs and tensor infos are read.
File read_file(const std::filesystem::path& path);
// Whether the first bytes of a file say GGUF.
bool has_magic(std::span<const std::byte> first4);

// ---- writer (fixtures) -------------------------------------------------------

struct WriteValue {
  ValueType type = ValueType::U32;
  ValueType elem = ValueType::U32;  // arrays
  uint64_t bits = 0;                // scalars, raw little-endian bits
  std::string str;
  std::vector<std::string> strings;  // string arrays
  std::string raw;                   // numeric arrays: little-endian element bytes
  uint64_t count = 0;                // numeric arrays
  static WriteValue u32(uint32_t v);
  static WriteValue i32(int32_t v);
  static WriteValue u16(uint16_t v);
  static WriteValue u64(uint64_t v);
  static WriteValue f32(float v);
  static WriteValue boolean(bool v);
  static WriteValue string(std::string s);
  static WriteValue string_array(std::vector<std::string> v);
  static WriteValue f32_array(const std::vector<float>& v);
  static WriteValue i32_array(const std::vector<int32_t>& v);
  static WriteValue u32_array(const std::vector<uint32_t>& v);
};

struct WriteTensor {
  std::string name;
  int32_t type = 0;
  std::vector<uint64_t> ne;    // innermost first
  std::string data;            // exactly nbytes, or empty for zeros
};

struct WriteOptions {
  uint32_t version = 3;
  uint32_t alignment = kDefaultAlignment;  // general.alignment is written only when it is not 32
};

// The bytes of a GGUF file laid out as gguf.cpp writes it (running padded offsets, zero
// padding after the infos and after every tensor). Errors (a bad row size) in `error`.
std::string build(const std::vector<std::pair<std::string, WriteValue>>& kvs, const std::vector<WriteTensor>& tensors,
                  const WriteOptions& opts, std::string* error);
std::string write_file(const std::filesystem::path& path, const std::vector<std::pair<std::string, WriteValue>>& kvs,
                       const std::vector<WriteTensor>& tensors, const WriteOptions& opts = {});

}  // namespace ckpt::gguf
