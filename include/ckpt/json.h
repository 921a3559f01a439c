// An owned, order-preserving JSON value for small documents (config.json,
// tokenizer_config.json, index files, template contexts), read exactly as Python's
// json.loads(data.decode("utf-8")) reads them: a document is accepted exactly when Python
// accepts it, with the same value (integers of any size up to Python's 4300-digit limit,
// NaN/Infinity/-Infinity, overflowing floats as inf/0.0, lone surrogate escapes, the last of
// duplicate keys). simdjson reads the common documents; the ones it declines go to an exact
// reader of our own. Errors carry a byte offset and line:column; duplicate keys are recorded
// (the last one wins at the first one's position, as in Python) so callers can flag them.
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ckpt::json {

class Value;
using Array = std::vector<Value>;
using Member = std::pair<std::string, Value>;
using Object = std::vector<Member>;  // insertion order kept; keys unique after parse

// integer: fits int64_t. big_int: a Python int beyond int64_t (kept exactly, as decimal text).
// number: a float (double), including NaN and +-inf.
enum class Type { null, boolean, integer, number, string, array, object, big_int };

// The exact value of an integer outside int64_t's range: its canonical decimal text
// (an optional '-', then digits without leading zeros), as Python's str(int) writes it.
// Values are made by integer_from_decimal() or the parser, never with an int64-range text.
struct BigInt {
  std::string decimal;
  bool operator==(const BigInt&) const = default;
};

class Value;
// The integer written in `decimal` ('-'? digits, no leading zeros unless the number is 0):
// an integer Value when it fits int64_t, else a big_int. nullopt when `decimal` is not such a text.
std::optional<Value> integer_from_decimal(std::string_view decimal);

class Value {
 public:
  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  // Copies share containers (copy-on-write); destruction is iterative, so a Value nested as
  // deep as any document may be is destroyed without recursion.
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;
  ~Value();

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  // An integer that fits int64_t (as_int() never throws after is_int()).
  bool is_int() const { return type() == Type::integer; }
  // An integer beyond int64_t (big_int_text() holds it exactly).
  bool is_big_int() const { return type() == Type::big_int; }
  // Any integer, as Python's int: is_int() || is_big_int().
  bool is_integer() const { return is_int() || is_big_int(); }
  // int, big int or float.
  bool is_number() const {
    return type() == Type::number || type() == Type::integer || type() == Type::big_int;
  }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  // A float's value; an integer's nearest double (a big int beyond the double range: +-inf).
  double as_double() const;
  // The canonical decimal text of a big int.
  const std::string& big_int_text() const { return std::get<BigInt>(v_).decimal; }
  // The decimal text of any integer (is_integer()), as Python's str() writes it.
  std::string integer_text() const;
  // Compares any integer (is_integer()) with `u` exactly: a big int is below every uint64 when
  // negative and above every uint64 when positive beyond UINT64_MAX. For range checks such as
  // "token id < vocab size": `id.compare_integer(rows) >= 0` means out of range, and a
  // negative id compares less than 0. Throws std::bad_variant_access when not an integer.
  std::strong_ordering compare_integer(uint64_t u) const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  const Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  Array& mutable_array();    // copy-on-write
  Object& mutable_object();  // copy-on-write

  // Object lookup; nullptr when not an object or key absent.
  const Value* find(std::string_view key) const;
  // Convenience typed getters for object members.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;

  // Compact serialisation, as json.dumps(v, separators=(",", ":"), ensure_ascii=...,
  // allow_nan=True) writes it: floats in Python's repr, NaN/Infinity/-Infinity, big ints in
  // full. A lone surrogate (kept as its 3-byte WTF-8 form, e.g. ED A0 80 for \ud800) is
  // written as a \uXXXX escape in both modes, so the output is valid UTF-8 and re-reads to
  // the same value (Python's ensure_ascii=False would put the bare surrogate in a str, which
  // no UTF-8 file can hold). Iterative: any depth.
  std::string dump(bool ensure_ascii = false) const;

  // Numbers compare by exact value across int, big int and float, as Python's == does (so
  // 10**30 != 1e30 and NaN != NaN); everything else by type and content (true != 1, unlike
  // Python). Iterative: any depth.
  bool operator==(const Value& other) const;

 private:
  friend std::optional<Value> integer_from_decimal(std::string_view decimal);
  explicit Value(BigInt b) : v_(std::move(b)) {}
  void release_nested() noexcept;

  // The alternatives are in Type's order (type() is the index).
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>, BigInt>
      v_;
};

struct ParseError {
  std::string message;
  uint64_t offset = 0;  // byte offset of the problem
  uint32_t line = 0;    // 1-based
  uint32_t column = 0;  // 1-based, in bytes
};

struct DuplicateKey {
  std::string path;  // JSON-pointer-like path of the object holding it ("/weight_map")
  std::string key;
};

struct ParseResult {
  Value value;
  std::optional<ParseError> error;
  std::vector<DuplicateKey> duplicates;
  bool ok() const { return !error.has_value(); }
};

// Nesting bound: the deepest document Python's json reliably reads (limits::kMaxJsonDepth, which
// explains the number). A deeper document is an error naming the bound.
inline constexpr uint32_t kDefaultMaxDepth = 990;

// Reads `text` as json.loads(text.decode("utf-8")) does (see the top of this file): simdjson
// first, the exact reader (parse_exact) for what simdjson declines. Rejections are located
// (a UTF-8 BOM, invalid UTF-8 anywhere, an integer of more than 4300 digits, nesting deeper
// than max_depth, trailing data, ...).
ParseResult parse(std::string_view text, uint32_t max_depth = kDefaultMaxDepth);

// The exact reader alone: iterative, memory O(text.size()). parse() yields the same result for
// every document (tests force this path to check that).
ParseResult parse_exact(std::string_view text, uint32_t max_depth = kDefaultMaxDepth);

// Where Python's json (and parse()) rejects `text`: the first problem, located. When the
// document is valid, message is "the document could not be parsed" at offset 0: callers whose
// fast parser or consumer is stricter than Python (simdjson on its own: big integers, NaN, lone
// surrogates, 1e400) then say why their parser refused it.
ParseError locate_error(std::string_view text, uint32_t max_depth = kDefaultMaxDepth);

// Append `s` as a JSON string literal (with quotes), as json.dumps writes it. ensure_ascii=false
// keeps UTF-8 (and DEL); ensure_ascii=true escapes everything outside ' '..'~' as \uXXXX
// (surrogate pairs beyond the BMP). WTF-8 lone surrogates are escaped in both modes.
void append_quoted(std::string& out, std::string_view s, bool ensure_ascii = false);
std::string quoted(std::string_view s, bool ensure_ascii = false);

// line:column (1-based) of a byte offset.
std::pair<uint32_t, uint32_t> line_column(std::string_view text, uint64_t offset);

}  // namespace ckpt::json
