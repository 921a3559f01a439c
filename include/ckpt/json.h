// An owned, order-preserving JSON value for small documents (config.json,
// tokenizer_config.json, index files, template contexts). Parsing goes through
// simdjson; errors carry a byte offset and line:column; duplicate keys are
// recorded (the last one wins, as Python's json does) so callers can flag them.
#pragma once
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

enum class Type { null, boolean, integer, number, string, array, object };

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

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_int() const { return type() == Type::integer; }
  bool is_number() const { return type() == Type::number || type() == Type::integer; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_double() const { return is_int() ? double(as_int()) : std::get<double>(v_); }
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

  // Compact serialisation (json.dumps(separators=(",", ":"), ensure_ascii=False)).
  std::string dump() const;

  bool operator==(const Value& other) const;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
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

inline constexpr uint32_t kDefaultMaxDepth = 512;

ParseResult parse(std::string_view text, uint32_t max_depth = kDefaultMaxDepth);

// Locate the first syntax error in `text` (used when the fast parser rejects it).
ParseError locate_error(std::string_view text, uint32_t max_depth = kDefaultMaxDepth);

// Append `s` as a JSON string literal (with quotes). ensure_ascii=false keeps UTF-8.
void append_quoted(std::string& out, std::string_view s, bool ensure_ascii = false);
std::string quoted(std::string_view s, bool ensure_ascii = false);

// line:column (1-based) of a byte offset.
std::pair<uint32_t, uint32_t> line_column(std::string_view text, uint64_t offset);

}  // namespace ckpt::json
