#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <unordered_set>

#include <simdjson.h>

#include "ckpt/json.h"
#include "ckpt/name_index.h"
#include "io/checked.h"
#include "io/file.h"
#include "io/json_scan.h"
#include "io/limits.h"

namespace ckpt::st {

static_assert(kMaxHeaderBytes == limits::kMaxHeaderBytes);

std::span<const DTypeInfo> dtype_table() { return {&dtype_info(DType::BOOL), kSafetensorsDTypeCount}; }

std::optional<DType> dtype_from_name(std::string_view name) {
  // Called once per tensor: lengths first, then an inline byte compare (no libc call).
  for (const auto& d : dtype_table())
    if (io::short_equal(d.name, name)) return d.dtype;
  return std::nullopt;
}

namespace {


bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads a non-negative integer; false when the element is negative, fractional or not a number.
bool get_u64(simdjson::dom::element e, uint64_t& out) {
  using T = simdjson::dom::element_type;
  if (e.type() == T::UINT64) {
    out = e.get_uint64().value_unsafe();
    return true;
  }
  if (e.type() == T::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (v < 0) return false;
    out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

std::string type_name(simdjson::dom::element e) {
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64: return e.get_int64().value_unsafe() < 0 ? "a negative integer" : "an integer";
    case T::UINT64: return "an integer";
    case T::DOUBLE: return "a non-integer number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "a value";
}

}  // namespace

// What a Header's entries view: the header bytes, and unescaped copies of escaped strings.
static_assert(sizeof(TensorEntry) <= 72, "one per tensor: keep it small");

struct HeaderStorage {
  std::unique_ptr<std::byte[]> bytes;
  std::deque<std::string> owned;  // deque: elements never move, so views into them stay valid
  std::string_view keep(std::string_view s) { return owned.emplace_back(s); }
};

namespace {

// The common case, scanned in one pass with no tree and no allocation per tensor: a header whose
// strings carry no escapes, whose entries hold exactly dtype, shape and data_offsets with plain
// non-negative integers and a known dtype, and whose __metadata__ maps strings to strings.
// Anything else returns false and the caller takes the general (simdjson DOM) path, which
// reports every irregularity; on what both accept they produce the same entries.
class FastHeaderScanner : io::JsonCursor {
 public:
  FastHeaderScanner(std::string_view text, Header& h) : JsonCursor(text.data(), text.data() + text.size()), h_(h) {}

  bool run() {
    ws();
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return tail();
    const char* body = p_;
    h_.tensors.reserve(estimate_entries());
    for (;;) {
      std::string_view key;
      if (!plain_string(key)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (io::equals_literal(key, "__metadata__")) {
        if (saw_metadata_ || !metadata()) return false;
        saw_metadata_ = true;
      } else if (!compact_entry(key) && !entry(key)) {
        return false;
      }
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat('}')) return false;
      remember_density(static_cast<size_t>(p_ - body));
      return tail() && unique_names();
    }
  }

 private:
  // Sized from the bytes per entry of the last header this thread read (the shards of one
  // checkpoint are alike), 1/16 over; the first uses a conservative 96. Unused capacity
  // between allocations is still memory the process touches, and counting entries exactly
  // (a search for "data_offsets") cost more than the slack.
  size_t estimate_entries() const {
    const size_t per = recent_bytes_per_entry ? recent_bytes_per_entry : 96;
    const size_t n = static_cast<size_t>(end_ - p_) / per;
    return n + n / 16 + 4;
  }
  void remember_density(size_t bytes) {
    if (!h_.tensors.empty()) recent_bytes_per_entry = std::max<size_t>(16, bytes / h_.tensors.size());
  }
  static thread_local size_t recent_bytes_per_entry;
  bool tail() {
    ws();
    return p_ == end_;
  }
  [[gnu::always_inline]] bool number(uint64_t& out) {
    const char* p = p_;  // locals: the compiler need not reload the members after each step
    const char* const e = end_;
    if (p >= e || static_cast<unsigned char>(*p - '0') > 9) return false;
    if (*p == '0' && p + 1 < e && static_cast<unsigned char>(p[1] - '0') <= 9) return false;  // leading zero
    // A header holds several hundred thousand numbers, shape dimensions and offsets of up to 11
    // digits: the first 8 digits are taken in one step where 8 bytes remain, the rest one by one.
    // 19 digits always fit in 64 bits; a 20th (beyond u64 or not) sends the header to the
    // general path.
    const char* const b = p;
    uint64_t v = 0;
    if (e - p >= 8) {
      const io::LeadingDigits first = io::leading_digits8(p);  // count >= 1 here
      v = first.value;
      p += first.count;
      if (first.count < 8) goto digits_done;  // the number ended inside the word
    }
    while (p < e && p - b <= 19 && static_cast<unsigned char>(*p - '0') <= 9) v = v * 10 + static_cast<uint64_t>(*p++ - '0');
    if (p - b > 19) return false;
  digits_done:
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E')) return false;
    p_ = p;
    out = v;
    return true;
  }
  bool metadata() {
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return true;
    for (;;) {
      std::string_view k, v;
      if (!plain_string(k)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!plain_string(v)) return false;
      for (const auto& [seen, _] : h_.metadata)
        if (seen == k) return false;  // duplicate metadata key: the general path reports it
      h_.metadata.emplace_back(std::string(k), std::string(v));
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      return eat('}');
    }
  }
  // A header repeats a few dtypes (weights and their scales alternate): two remembered.
  bool dtype_of(std::string_view written, DType& out) {
    if (!recent_dtype_name_[0].empty() && io::short_equal(written, recent_dtype_name_[0])) {
      out = recent_dtype_[0];
    } else if (!recent_dtype_name_[1].empty() && io::short_equal(written, recent_dtype_name_[1])) {
      out = recent_dtype_[1];
    } else {
      auto d = dtype_from_name(written);
      if (!d) return false;
      out = *d;
      recent_dtype_name_[1] = recent_dtype_name_[0];
      recent_dtype_[1] = recent_dtype_[0];
      recent_dtype_name_[0] = written;
      recent_dtype_[0] = *d;
    }
    return true;
  }
  // The spelling nearly every writer produces, {"dtype":"..","shape":[..],"data_offsets":[a,b]}
  // with no whitespace, matched piece by piece without the per-character whitespace and field
  // dispatch of entry(); anything else leaves the cursor where it was, and entry() reads it.
  bool compact_entry(std::string_view name) {
    const char* const start = p_;
    auto decline = [&] {
      p_ = start;
      return false;
    };
    TensorEntry t;
    std::string_view written;
    if (!literal_here("{\"dtype\":") || !plain_string(written) || !dtype_of(written, t.dtype) ||
        !literal_here(",\"shape\":["))
      return decline();
    if (!eat(']')) {
      for (;;) {
        uint64_t v;
        if (!number(v) || t.shape.size() >= limits::kMaxTensorRank) return decline();
        t.shape.push_back(v);
        if (eat(',')) continue;
        if (!eat(']')) return decline();
        break;
      }
    }
    if (!literal_here(",\"data_offsets\":[") || !number(t.begin) || !eat(',') || !number(t.end) || !literal_here("]}"))
      return decline();
    t.name = name;
    t.name_hash = hash_name(name);
    h_.tensors.push_back(std::move(t));
    return true;
  }
  bool entry(std::string_view name) {
    if (!eat('{')) return false;
    TensorEntry t;
    t.name = name;
    t.name_hash = hash_name(name);
    bool have_dt = false, have_shape = false, have_offs = false;
    ws();
    for (;;) {
      // The three field names, spelled exactly, are recognised in place (the common case);
      // anything else is read as a string and judged below.
      enum { kDtype, kShape, kOffsets, kOther } kind = kOther;
      if (quoted_literal("dtype")) kind = kDtype;
      else if (quoted_literal("shape")) kind = kShape;
      else if (quoted_literal("data_offsets")) kind = kOffsets;
      else {
        std::string_view field;
        if (!plain_string(field)) return false;
        kind = io::equals_literal(field, "dtype") ? kDtype
               : io::equals_literal(field, "shape") ? kShape
               : io::equals_literal(field, "data_offsets") ? kOffsets
                                                            : kOther;
      }
      ws();
      if (!eat(':')) return false;
      ws();
      if (kind == kDtype && !have_dt) {
        std::string_view written;
        if (!plain_string(written) || !dtype_of(written, t.dtype)) return false;
        have_dt = true;
      } else if (kind == kShape && !have_shape) {
        if (!eat('[')) return false;
        ws();
        if (!eat(']')) {
          for (;;) {  // Shape holds two dimensions inline: no allocation for most tensors
            uint64_t v;
            if (!number(v) || t.shape.size() >= limits::kMaxTensorRank) return false;
            t.shape.push_back(v);
            ws();
            if (eat(',')) {
              ws();
              continue;
            }
            if (!eat(']')) return false;
            break;
          }
        }
        have_shape = true;
      } else if (kind == kOffsets && !have_offs) {
        if (!eat('[')) return false;
        ws();
        if (!number(t.begin)) return false;
        ws();
        if (!eat(',')) return false;
        ws();
        if (!number(t.end)) return false;
        ws();
        if (!eat(']')) return false;
        have_offs = true;
      } else {
        return false;  // an unknown or repeated field
      }
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat('}')) return false;
      break;
    }
    if (!have_dt || !have_shape || !have_offs) return false;
    h_.tensors.push_back(std::move(t));
    return true;
  }
  bool unique_names() {
    NameIndex seen;
    seen.reset(h_.tensors.size());
    auto name_at = [this](uint32_t i) { return h_.tensors[i].name; };
    for (uint32_t i = 0; i < h_.tensors.size(); ++i) {
      const TensorEntry& t = h_.tensors[i];  // name_hash was set by entry()
      if (seen.insert(t.name, t.name_hash, i, name_at) != i) return false;
    }
    return true;
  }

  Header& h_;
  bool saw_metadata_ = false;
  std::string_view recent_dtype_name_[2];
  DType recent_dtype_[2] = {DType::Unknown, DType::Unknown};
};

thread_local size_t FastHeaderScanner::recent_bytes_per_entry = 0;

}  // namespace

// `padded`: the bytes after prefix.end() are readable padding (SIMDJSON_PADDING of them),
// so simdjson can parse in place without a copy.
static Header parse_header_padded(std::span<const std::byte> prefix, uint64_t file_size,
                                  std::shared_ptr<HeaderStorage> storage) {
  Header h;
  h.file_size = file_size;
  auto problem = [&](Rule r, std::string detail, uint64_t offset = 0, std::string_view tensor = {}) {
    h.problems.push_back(Problem{r, std::string(tensor), std::move(detail), offset});
  };
  if (file_size < 8 || prefix.size() < 8) {
    problem(Rule::HeaderTooSmall,
            "file is " + std::to_string(file_size) + " bytes; at least 8 are needed for the header length");
    return h;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(prefix[static_cast<size_t>(i)]);
  h.header_len = n;
  if (n > kMaxHeaderBytes) {
    problem(Rule::HeaderTooLarge, "header length is " + std::to_string(n) + " bytes; the format allows at most " +
                                      std::to_string(kMaxHeaderBytes));
    return h;
  }
  auto end = io::checked_add(8, n);
  if (!end || *end > file_size) {
    problem(Rule::HeaderPastEof, "header length " + std::to_string(n) + " needs " + std::to_string(8 + n) +
                                     " bytes but the file has " + std::to_string(file_size) + " (" +
                                     std::to_string(8 + n - file_size) + " missing)");
    return h;
  }
  if (prefix.size() < 8 + n) {
    problem(Rule::ReadFailed, "could read only " + std::to_string(prefix.size()) + " of the " +
                                  std::to_string(8 + n) + " header bytes");
    return h;
  }
  h.framing_ok = true;
  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + 8, n);

  size_t first = 0;
  while (first < text.size() && is_json_ws(text[first])) ++first;
  if (first > 0 && first < text.size() && text[first] == '{')
    problem(Rule::LeadingWhitespace,
            std::to_string(first) + " whitespace byte(s) before the opening '{' of the header", 8);

  if (simdjson::validate_utf8(text.data(), text.size())) {
    FastHeaderScanner fast(text, h);
    if (fast.run()) {
      h.parsed = true;
      h.storage = std::move(storage);
      return h;
    }
    h.tensors.clear();
    h.metadata.clear();
  }
  h.general_path = true;

  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  auto code = parser.parse(reinterpret_cast<const uint8_t*>(text.data()), text.size(), false).get(root);
  if (code != simdjson::SUCCESS) {
    json::ParseError where = json::locate_error(text, limits::kMaxJsonDepth);
    Rule r = where.message.rfind("invalid UTF-8", 0) == 0 ? Rule::HeaderNotUtf8 : Rule::HeaderNotJson;
    if (r == Rule::HeaderNotJson && where.message == "the document could not be parsed")
      where.message = simdjson::error_message(code);
    problem(r, where.message + " (header byte " + std::to_string(where.offset) + ", file offset " +
                   std::to_string(8 + where.offset) + ")",
            8 + where.offset);
    return h;
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    problem(Rule::HeaderSchema, "header is " + type_name(root) + "; a JSON object was expected", 8);
    return h;
  }
  h.parsed = true;
  h.tensors.reserve(obj.size());
  std::unordered_set<std::string_view> seen;
  seen.reserve(obj.size() * 2);
  for (auto field : obj) {
    std::string_view key = field.key;
    if (!seen.insert(key).second) {  // the first entry is kept; later ones are reported
      problem(Rule::DuplicateKey, "key \"" + std::string(key) + "\" appears more than once in the header", 8,
              std::string(key));
      continue;
    }
    if (key == "__metadata__") {
      simdjson::dom::object meta;
      if (field.value.get_object().get(meta) != simdjson::SUCCESS) {
        problem(Rule::MetadataNotStrings, "__metadata__ is " + type_name(field.value) + "; an object of strings was expected", 8);
        continue;
      }
      for (auto m : meta) {
        std::string_view sv;
        if (m.value.get_string().get(sv) != simdjson::SUCCESS) {
          problem(Rule::MetadataNotStrings, "__metadata__[\"" + std::string(m.key) + "\"] is " + type_name(m.value) +
                                                "; every metadata value must be a string", 8);
          continue;
        }
        h.metadata.emplace_back(std::string(m.key), std::string(sv));
      }
      continue;
    }
    std::string_view name = storage->keep(key);
    simdjson::dom::object entry;
    if (field.value.get_object().get(entry) != simdjson::SUCCESS) {
      problem(Rule::HeaderSchema, "entry is " + type_name(field.value) + "; an object with dtype, shape and data_offsets was expected", 8, name);
      continue;
    }
    TensorEntry t;
    t.name = name;
    t.name_hash = hash_name(name);
    simdjson::dom::element dt, shape, offs;
    bool have_dt = false, have_shape = false, have_offs = false;
    for (auto f : entry) {  // one pass; later duplicates win, as in Python
      if (f.key == "dtype") dt = f.value, have_dt = true;
      else if (f.key == "shape") shape = f.value, have_shape = true;
      else if (f.key == "data_offsets") offs = f.value, have_offs = true;
    }
    std::string missing;
    if (!have_dt) missing += " dtype";
    if (!have_shape) missing += " shape";
    if (!have_offs) missing += " data_offsets";
    if (!missing.empty()) {
      problem(Rule::HeaderSchema, "entry lacks required field(s):" + missing, 8, t.name);
      continue;
    }
    std::string_view dts;
    if (dt.get_string().get(dts) != simdjson::SUCCESS) {
      problem(Rule::HeaderSchema, "dtype is " + type_name(dt) + "; a string such as \"BF16\" was expected", 8, t.name);
      continue;
    }
    simdjson::dom::array sarr, oarr;
    if (shape.get_array().get(sarr) != simdjson::SUCCESS) {
      problem(Rule::HeaderSchema, "shape is " + type_name(shape) + "; an array of non-negative integers was expected", 8, t.name);
      continue;
    }
    if (sarr.size() > limits::kMaxTensorRank) {
      problem(Rule::HeaderSchema, "shape has " + std::to_string(sarr.size()) + " dimensions; ckpt accepts at most " +
                                      std::to_string(limits::kMaxTensorRank), 8, t.name);
      continue;
    }
    bool shape_ok = true;
    t.shape.reserve(sarr.size());
    for (auto d : sarr) {
      uint64_t v;
      if (!get_u64(d, v)) {
        problem(Rule::HeaderSchema, "shape holds " + type_name(d) + "; dimensions must be non-negative integers", 8, t.name);
        shape_ok = false;
        break;
      }
      t.shape.push_back(v);
    }
    if (!shape_ok) continue;
    if (offs.get_array().get(oarr) != simdjson::SUCCESS || oarr.size() != 2) {
      problem(Rule::HeaderSchema, "data_offsets is " + type_name(offs) + (offs.is_array() ? " of " + std::to_string(oarr.size()) + " items" : std::string()) +
                                      "; [begin, end] was expected", 8, t.name);
      continue;
    }
    if (!get_u64(oarr.at(0).value_unsafe(), t.begin) || !get_u64(oarr.at(1).value_unsafe(), t.end)) {
      problem(Rule::HeaderSchema, "data_offsets must be two non-negative integers", 8, t.name);
      continue;
    }
    if (auto d = dtype_from_name(dts)) {
      t.dtype = *d;
    } else {
      problem(Rule::UnknownDType, "dtype \"" + std::string(dts) + "\" is not defined by the safetensors format", 8,
              std::string(t.name));
      t.dtype = DType::Unknown;
    }
    h.tensors.push_back(std::move(t));
  }
  h.storage = std::move(storage);
  return h;
}

// The fast path's names view the header bytes in [bytes, bytes + len); this moves every such
// view into one exactly-sized block owned by `storage`, so those bytes can be reused.
static void keep_names_only(Header& h, HeaderStorage& storage, const std::byte* bytes, size_t len) {
  const char* lo = reinterpret_cast<const char*>(bytes);
  const char* hi = lo + len;
  auto inside = [&](std::string_view v) { return !v.empty() && v.data() >= lo && v.data() < hi; };
  size_t total = 0;
  for (const TensorEntry& t : h.tensors)
    if (inside(t.name)) total += t.name.size();
  if (total) storage.bytes.reset(new std::byte[total]);
  char* out = reinterpret_cast<char*>(storage.bytes.get());
  for (TensorEntry& t : h.tensors) {
    if (!inside(t.name)) continue;
    std::memcpy(out, t.name.data(), t.name.size());
    t.name = std::string_view(out, t.name.size());
    out += t.name.size();
  }
}

Header parse_header(std::span<const std::byte> prefix, uint64_t file_size) {
  auto storage = std::make_shared<HeaderStorage>();
  storage->bytes.reset(new std::byte[prefix.size() + simdjson::SIMDJSON_PADDING]);
  std::memset(storage->bytes.get() + prefix.size(), 0, simdjson::SIMDJSON_PADDING);
  if (!prefix.empty()) std::memcpy(storage->bytes.get(), prefix.data(), prefix.size());
  std::span<const std::byte> copy(storage->bytes.get(), prefix.size());
  return parse_header_padded(copy, file_size, std::move(storage));
}

Header read_header(const std::filesystem::path& path) {
  io::ReadOnlyFile f;
  Header h;
  if (auto e = f.open(path); !e.empty()) {
    h.problems.push_back(Problem{Rule::ReadFailed, {}, "cannot open: " + e, 0});
    return h;
  }
  uint64_t size = f.size();
  std::array<std::byte, 8> len_bytes{};
  std::string err;
  int64_t got = f.read_at(0, len_bytes.data(), std::min<uint64_t>(8, size), &err);
  if (got < 0) {
    h.file_size = size;
    h.problems.push_back(Problem{Rule::ReadFailed, {}, "read failed: " + err, 0});
    return h;
  }
  if (got < 8) return parse_header(std::span<const std::byte>(len_bytes.data(), static_cast<size_t>(got)), size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(len_bytes[static_cast<size_t>(i)]);
  if (n > kMaxHeaderBytes || n + 8 > size) return parse_header(len_bytes, size);  // framing finding, no allocation
  // Read straight into a padded buffer (no zero-fill, no copy) so simdjson parses in place.
  // Headers up to kScratchBytes go to a buffer this thread reuses, and only the tensor names
  // are kept, copied into one block sized to fit: the names are about 40 % of a header's
  // bytes, and memory a process touches for the first time is the largest cost of verifying
  // a 160-shard checkpoint on a VM (bench/README.md, "Verify"). Larger headers keep their bytes.
  constexpr size_t kScratchBytes = 4u << 20;
  const size_t len = static_cast<size_t>(8 + n);
  auto storage = std::make_shared<HeaderStorage>();
  thread_local std::unique_ptr<std::byte[]> scratch;
  thread_local size_t scratch_size = 0;
  std::byte* buf;
  const bool use_scratch = len + simdjson::SIMDJSON_PADDING <= kScratchBytes;
  if (use_scratch) {
    if (scratch_size < len + simdjson::SIMDJSON_PADDING) {
      // Grown in powers of two from 256 KiB: a few sizes serve a whole checkpoint.
      size_t want = std::max<size_t>(scratch_size, 256u << 10);
      while (want < len + simdjson::SIMDJSON_PADDING) want *= 2;
      scratch.reset(new std::byte[want]);
      scratch_size = want;
    }
    buf = scratch.get();
  } else {
    storage->bytes.reset(new std::byte[len + simdjson::SIMDJSON_PADDING]);
    buf = storage->bytes.get();
  }
  std::memset(buf + len, 0, simdjson::SIMDJSON_PADDING);
  got = f.read_at(0, buf, len, &err);
  if (got < 0) {
    h.file_size = size;
    h.problems.push_back(Problem{Rule::ReadFailed, {}, "read failed: " + err, 8});
    return h;
  }
  if (static_cast<size_t>(got) < len) std::memset(buf + got, 0, len - static_cast<size_t>(got));
  h = parse_header_padded(std::span<const std::byte>(buf, static_cast<size_t>(got)), size, storage);
  if (use_scratch) keep_names_only(h, *storage, buf, len);
  return h;
}

// ---- writer ------------------------------------------------------------------

std::string build_header(const std::vector<TensorToWrite>& tensors, const WriteOptions& opts, uint64_t* data_size) {
  std::string json = "{";
  bool first = true;
  if (!opts.metadata.empty()) {
    json += "\"__metadata__\":{";
    bool f2 = true;
    for (const auto& [k, v] : opts.metadata) {
      if (!f2) json += ',';
      f2 = false;
      json::append_quoted(json, k);
      json += ':';
      json::append_quoted(json, v);
    }
    json += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t nbytes = tensor_nbytes(t.dtype, t.shape).value_or(0);
    if (!first) json += ',';
    first = false;
    json::append_quoted(json, t.name);
    json += ":{\"dtype\":\"";
    json += dtype_name(t.dtype);
    json += "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ',';
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
  }
  json += '}';
  while (json.size() % 8 != 0) json += ' ';
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += json;
  if (data_size) *data_size = offset;
  return out;
}

std::string write_file(const std::filesystem::path& path, std::vector<TensorToWrite> tensors, const WriteOptions& opts) {
  if (opts.sort_by_name)
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& t : tensors) {
    auto nbytes = tensor_nbytes(t.dtype, t.shape);
    if (!nbytes) return "tensor " + t.name + ": size overflows or is not a whole number of bytes";
    if (!t.data.empty() && t.data.size() != *nbytes)
      return "tensor " + t.name + ": " + std::to_string(t.data.size()) + " data bytes given, " +
             std::to_string(*nbytes) + " needed";
  }
  uint64_t data_size = 0;
  std::string header = build_header(tensors, opts, &data_size);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return path.string() + ": " + std::strerror(errno);
  auto write_all = [&](const void* p, size_t n, uint64_t at) -> bool {
    const char* c = static_cast<const char*>(p);
    while (n) {
      ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(at));
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      c += w;
      n -= static_cast<size_t>(w);
      at += static_cast<uint64_t>(w);
    }
    return true;
  };
  bool ok = write_all(header.data(), header.size(), 0);
  uint64_t at = header.size();
  for (const auto& t : tensors) {
    if (!ok) break;
    if (!t.data.empty()) ok = write_all(t.data.data(), t.data.size(), at);
    at += tensor_nbytes(t.dtype, t.shape).value_or(0);
  }
  // Holes for tensors without data: the file gets its full size without using disk.
  if (ok && ::ftruncate(fd, static_cast<off_t>(at)) != 0) ok = false;
  std::string err = ok ? std::string() : path.string() + ": " + std::strerror(errno);
  ::close(fd);
  return err;
}

}  // namespace ckpt::st
