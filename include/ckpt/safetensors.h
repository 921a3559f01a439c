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

#include "ckpt/tensor.h"

namespace ckpt::st {

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference's MAX_HEADER_SIZE

// safetensors' dtypes are the first rows of ckpt::DType (include/ckpt/tensor.h); the names
// below accept and list only those (a header spelling "Q4_K" is an unknown dtype).
using ckpt::DType;
using ckpt::DTypeInfo;
using ckpt::Shape;
using ckpt::TensorEntry;

// Every dtype the safetensors format defines, with its size in bits.
std::span<const DTypeInfo> dtype_table();
std::optional<DType> dtype_from_name(std::string_view name);
using ckpt::dtype_name;
using ckpt::dtype_bits;

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

  // Where a tensor's [begin, end) counts from in the file. safetensors: right after the
  // header (8 + N). A reader of another container that fills a Header sets `data_base` (a
  // GGUF's aligned data section; 0 for a zip whose ranges are absolute).
  std::optional<uint64_t> data_base;
  uint64_t data_start() const { return data_base ? *data_base : 8 + header_len; }
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

using ckpt::tensor_nbytes;

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
