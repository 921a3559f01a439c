// locate -> discover -> parse: builds the Checkpoint. Opens files read-only, never
// follows a link out of the model root (or the cache it lives in), never opens a
// path because a file named it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cstring>
#include <deque>
#include <functional>
#include <set>
#include <thread>

#include "ckpt/timings.h"

#include <simdjson.h>
#include <unordered_map>

#include "ckpt/checkpoint.h"
#include "model/gguf_load.h"
#include "model/ollama.h"
#include "model/pytorch_shards.h"
#include "io/file.h"
#include "io/json_scan.h"
#include "io/limits.h"
#include "io/simdjson_spelling.h"
#include "io/string_arena.h"
#include "io/utf8.h"
#include "util/parallel.h"

namespace ckpt {

namespace fs = std::filesystem;

namespace {

bool is_within(const fs::path& p, const fs::path& dir) {
  auto pi = p.begin();
  for (auto di = dir.begin(); di != dir.end(); ++di, ++pi) {
    if (di->empty()) continue;  // trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

void parse_json_file(const fs::path& abs, const std::string& rel, JsonFile& out) {
  out.file = rel;
  out.present = true;
  std::string text;
  if (auto e = io::read_file(abs, limits::kMaxSideJsonBytes, text); !e.empty()) {
    out.error = json::ParseError{"cannot read: " + e, 0, 0, 0};
    return;
  }
  auto r = json::parse(text, limits::kMaxJsonDepth);
  out.error = r.error;
  out.duplicates = std::move(r.duplicates);
  out.value = std::move(r.value);
}


// What a ShardIndex's names and shard names view. The index can hold ~100k entries: they are
// read without building a json::Value (only the small metadata object is kept as a value).
struct IndexStorage {
  // The general path: the file's bytes, left uninitialised before the read (zero-filling a
  // 9 MB index first costs a full extra pass over memory the read overwrites anyway).
  std::unique_ptr<char[]> bytes;
  std::string_view text;
  std::deque<std::string> owned;  // deque: elements never move, so views into them stay valid
  std::string_view keep(std::string_view s) { return owned.emplace_back(s); }

  // The fast path: names no shard holds, and shard file names, copied out of the read buffer
  // (one arena per reading thread).
  io::StringArena packed{512u << 10};
  io::StringArena packed_tail{512u << 10};
};

// Appends weight_map entries: each name as given, each shard file name interned into
// idx.files / idx.file_of. Entries come grouped by shard, so comparing with the previous
// entry's file settles almost every one without hashing. `keep` makes a file name the index
// owns from the caller's view (the first time each is seen).
class EntryInterner {
 public:
  explicit EntryInterner(ShardIndex& idx) : idx_(idx) {}
  template <class Keep>
  void add(std::string_view name, std::string_view file, const Keep& keep) {
    idx_.names.push_back(name);
    add_file(file, keep);
  }
  // The shard file of the next entry, whose name the caller appends itself.
  template <class Keep>
  void add_file(std::string_view file, const Keep& keep) {
    if (idx_.file_of.empty() || file != prev_) {
      auto it = ids_.find(file);
      if (it == ids_.end()) {
        const std::string_view kept = keep(file);
        it = ids_.emplace(kept, static_cast<uint32_t>(idx_.files.size())).first;
        idx_.files.push_back(kept);
      }
      prev_id_ = it->second;
      prev_ = idx_.files[prev_id_];
    }
    idx_.file_of.push_back(prev_id_);
  }

 private:
  ShardIndex& idx_;
  std::unordered_map<std::string_view, uint32_t> ids_;  // views into what idx_.files holds
  std::string_view prev_;
  uint32_t prev_id_ = 0;
};

// One pass over a regular index, read through a small buffer reused chunk by chunk: strings in
// weight_map without escapes (shard file names interned as they come), other values skipped
// with full JSON validation. Nothing of the file's bytes stays in memory but the names no
// shard holds and the shard file names: memory touched for the first time is the largest
// cost of verifying a 160-shard checkpoint on a VM (bench/README.md, "Verify").
// Returns false on anything it does not handle (escapes in weight_map, a repeated top-level
// key, invalid JSON or UTF-8, nesting deeper than 64, one entry or top-level value longer than
// the buffer); the caller then reads the whole file and takes the general simdjson path, which
// also locates errors.
//
// Names are resolved against the table of the shards' tensors as they are read: a name a shard
// holds views that shard's copy, so only names no shard holds are copied.
//
// A large index is read by two scanners at once: the second starts at `start`, a line start
// inside weight_map chosen by guess (JSON strings hold no raw newline), and reads the entries
// from there to the end; the first reads from the beginning and hands over when it reaches
// that offset at the start of a weight_map entry (`handover_at`), which proves the guess.
// Otherwise the first reads the whole file and the second's work is dropped.
class FastIndexScanner : io::JsonCursor {
 public:
  FastIndexScanner(const io::ReadOnlyFile& file, ShardIndex& idx, io::StringArena& arena, size_t buffer_bytes,
                   const TensorTable& table, uint64_t start = 0, uint64_t handover_at = 0)
      : JsonCursor(nullptr, nullptr),
        buffer_size_(std::max<size_t>(64, buffer_bytes)),
        margin_(buffer_size_ / 4),
        file_(file),
        idx_(idx),
        arena_(arena),
        table_(table),
        start_(start),
        handover_at_(handover_at),
        buf_(new char[buffer_size_]) {
    p_ = end_ = pending_end_ = buf_.get();
    read_to_ = start;
  }
  const std::string& read_error() const { return read_error_; }
  bool handed_over() const { return handed_over_; }
  bool saw_metadata() const { return saw_meta_; }

  bool run() {
    if (!refill()) return false;
    bool saw_wm = false;
    int next;  // after a member: 0 invalid, 1 another member follows, 2 the object ended
    if (start_ > 0) {  // the second scanner: inside weight_map, at an entry
      if (!entries()) return false;
      saw_wm = true;
      next = after_member();
    } else {
      ws();
      if (!eat('{')) return false;
      ws();
      next = eat('}') ? 2 : 1;
    }
    while (next == 1) {
      if (!refill()) return false;
      std::string_view key;
      if (!plain_string(key)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (key == "weight_map") {
        if (saw_wm || !weight_map()) return false;
        saw_wm = true;
        if (handed_over_) return true;
      } else {
        const bool is_metadata = key == "metadata";  // `key` views the buffer refill() moves
        // A top-level value other than weight_map is scanned whole from the buffer.
        if (!refill()) return false;
        const char* begin = p_;
        if (!skip_value(0)) return false;
        if (is_metadata) {
          if (saw_meta_) return false;
          saw_meta_ = true;
          metadata_.assign(begin, p_);
        }
      }
      next = after_member();
    }
    if (next != 2) return false;
    for (;;) {  // only whitespace may follow, however much of it
      ws();
      if (p_ != end_) return false;
      if (drained()) break;
      if (!refill()) return false;
    }
    if (!saw_wm) {
      idx_.clear_entries();
      idx_.schema_error = "the index has no \"weight_map\"";
    }
    return true;
  }
  const std::string& metadata() const { return metadata_; }

 private:
  int after_member() {
    if (!refill()) return 0;
    ws();
    if (eat(',')) {
      ws();
      return 1;
    }
    return eat('}') ? 2 : 0;
  }
  static bool hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
  bool any_string() {
    if (!eat('"')) return false;
    while (p_ < end_) {
      unsigned char c = static_cast<unsigned char>(*p_++);
      if (c == '"') return true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (p_ >= end_) return false;
        char e = *p_++;
        if (e == 'u') {
          if (end_ - p_ < 4 || !hex(p_[0]) || !hex(p_[1]) || !hex(p_[2]) || !hex(p_[3])) return false;
          p_ += 4;
        } else if (!std::strchr("\"\\/bfnrt", e) || e == '\0') {
          return false;
        }
      }
    }
    return false;
  }
  bool digits() {
    const char* s = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ > s;
  }
  bool number() {
    eat('-');
    if (eat('0')) {
      if (p_ < end_ && *p_ >= '0' && *p_ <= '9') return false;
    } else if (!digits()) {
      return false;
    }
    if (eat('.') && !digits()) return false;
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (!eat('+')) eat('-');
      if (!digits()) return false;
    }
    return true;
  }
  bool literal(std::string_view w) {
    if (static_cast<size_t>(end_ - p_) < w.size() || std::string_view(p_, w.size()) != w) return false;
    p_ += w.size();
    return true;
  }
  bool skip_value(int depth) {
    if (p_ >= end_ || depth > 64) return false;
    switch (*p_) {
      case '"': return any_string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      case '[': {
        ++p_;
        ws();
        if (eat(']')) return true;
        for (;;) {
          if (!skip_value(depth + 1)) return false;
          ws();
          if (eat(',')) {
            ws();
            continue;
          }
          return eat(']');
        }
      }
      case '{': {
        ++p_;
        ws();
        if (eat('}')) return true;
        for (;;) {
          if (!any_string()) return false;
          ws();
          if (!eat(':')) return false;
          ws();
          if (!skip_value(depth + 1)) return false;
          ws();
          if (eat(',')) {
            ws();
            continue;
          }
          return eat('}');
        }
      }
      default: return number();
    }
  }
  bool weight_map() {
    if (p_ >= end_ || *p_ != '{') {  // not an object: the general path reports what it is
      return false;
    }
    ++p_;
    ws();
    if (eat('}')) return true;
    return entries();
  }
  // weight_map's entries, from the cursor (at an entry) through the closing brace; or up to
  // handover_at_, where the second scanner took over.
  bool entries() {
    map_begin_ = file_offset(p_);
    idx_.names.reserve(kSampleEntries);
    idx_.positions.reserve(kSampleEntries);
    idx_.file_of.reserve(kSampleEntries);
    EntryInterner interner(idx_);
    auto pack = [this](std::string_view s) { return arena_.copy(s); };
    for (;;) {
      if (end_ - p_ < static_cast<ptrdiff_t>(margin_) && !refill()) return false;
      if (handover_at_ && file_offset(p_) == handover_at_) {
        flush();
        handed_over_ = true;
        return true;
      }
      std::string_view k, v;
      if (!plain_string(k)) return false;
      ws();
      if (!eat(':')) return false;
      ws();
      if (!plain_string(v)) return false;
      pending_.push_back(Pending{k, hash_name(k), NameIndex::npos, nullptr});  // hashed while the name is in cache
      interner.add_file(v, pack);
      if (idx_.file_of.size() == kSampleEntries) reserve_from_density();
      ws();
      if (eat(',')) {
        ws();
        continue;
      }
      if (!eat('}')) return false;
      flush();
      return true;
    }
  }
  // Resolves the names read since the last flush (views into the buffer, so before every
  // refill): a batch of lookups can prefetch ahead, where one at a time each would wait on
  // its misses.
  void flush() {
    const size_t n = pending_.size();
    for (size_t i = 0; i < n; ++i) {
      if (i + 3 * kLookAhead < n) table_.prefetch_bucket(pending_[i + 3 * kLookAhead].hash);
      if (i + 2 * kLookAhead < n) {
        Pending& later = pending_[i + 2 * kLookAhead];
        later.candidate = table_.candidate(later.hash);
        if (later.candidate != NameIndex::npos) {
          later.entry = &table_.entry_at(later.candidate);
          __builtin_prefetch(later.entry);
        }
      }
      if (i + kLookAhead < n && pending_[i + kLookAhead].entry) __builtin_prefetch(pending_[i + kLookAhead].entry->name.data());
      const Pending& e = pending_[i];
      uint32_t pos;
      std::string_view kept;
      if (e.entry && e.entry->name == e.name) {  // the first slot with this tag: almost always
        pos = e.candidate;
        kept = e.entry->name;
      } else {
        pos = table_.position(e.name, e.hash);
        kept = pos == NameIndex::npos ? arena_.copy(e.name) : table_.entry_at(pos).name;
      }
      idx_.names.push_back(kept);
      idx_.positions.push_back(pos);
    }
    pending_.clear();
  }

  // The entry vectors are sized once kSampleEntries entries have shown the bytes per entry,
  // 1/16 over: an estimate from the file size alone left a fifth of them unused. Sized to the
  // file's end even when a second scanner reads the rest: its entries are appended here.
  uint64_t file_offset(const char* p) const { return read_to_ - static_cast<uint64_t>(pending_end_ - p); }
  void reserve_from_density() {
    const uint64_t used = file_offset(p_) - map_begin_;
    if (used == 0) return;
    const uint64_t per = std::max<uint64_t>(1, used / kSampleEntries);
    const uint64_t n = (file_.size() - map_begin_) / per;
    const size_t want = static_cast<size_t>(n + n / 16 + 16);
    idx_.names.reserve(want);
    idx_.positions.reserve(want);
    idx_.file_of.reserve(want);
  }
  bool drained() const { return eof_ && end_ == pending_end_; }
  // Moves the unread bytes to the front of the buffer and reads more after them. Until the
  // file's end, end_ stops after the last byte below 0x80, so the scanner never sees a UTF-8
  // sequence the read cut in two; every byte before end_ has been validated.
  bool refill() {
    flush();
    if (drained()) return true;
    const size_t carried = static_cast<size_t>(pending_end_ - p_);
    const size_t checked = static_cast<size_t>(end_ - p_);
    std::memmove(buf_.get(), p_, carried);
    p_ = buf_.get();
    const uint64_t want = std::min<uint64_t>(buffer_size_ - carried, file_.size() - read_to_);
    if (want == 0 && !eof_ && read_to_ < file_.size()) return false;  // an entry longer than the buffer
    const int64_t got = want ? file_.read_at(read_to_, buf_.get() + carried, want, &read_error_) : 0;
    if (got < 0) return false;
    read_to_ += static_cast<uint64_t>(got);
    eof_ = read_to_ >= file_.size() || static_cast<uint64_t>(got) < want;  // short: the file shrank
    pending_end_ = buf_.get() + carried + got;
    const char* valid_end = pending_end_;
    if (!eof_)
      while (valid_end > p_ + checked && static_cast<unsigned char>(valid_end[-1]) >= 0x80) --valid_end;
    const char* from = p_ + checked;
    if (!simdjson::validate_utf8(from, static_cast<size_t>(valid_end - from))) return false;
    end_ = valid_end;
    return true;
  }

  const size_t buffer_size_;
  const size_t margin_;  // an entry longer than this may send the index to the general path
  static constexpr size_t kSampleEntries = 256;
  uint64_t map_begin_ = 0;  // file offset of weight_map's first entry
  const io::ReadOnlyFile& file_;
  ShardIndex& idx_;
  io::StringArena& arena_;
  const TensorTable& table_;
  const uint64_t start_, handover_at_;
  bool handed_over_ = false, saw_meta_ = false;
  static constexpr size_t kLookAhead = NameIndex::kPrefetchAhead;
  struct Pending {
    std::string_view name;  // views the buffer until the next refill
    uint64_t hash;
    uint32_t candidate = NameIndex::npos;     // set by flush() a few entries ahead
    const st::TensorEntry* entry = nullptr;   // the candidate's entry
  };
  std::vector<Pending> pending_;
  std::unique_ptr<char[]> buf_;
  const char* pending_end_ = nullptr;  // the end of the bytes read (end_ may stop short of it)
  uint64_t read_to_ = 0;               // file offset of the byte after those read
  bool eof_ = false;
  std::string read_error_;
  std::string metadata_;
};

// total_size as the general path reads it: a non-negative integer, or an integral double.
void read_total_size(simdjson::dom::element meta, ShardIndex& idx) {
  simdjson::dom::element ts;
  if (!meta.is_object() || meta["total_size"].get(ts) != simdjson::SUCCESS) return;
  uint64_t u;
  int64_t i;
  double d;
  if (ts.get_uint64().get(u) == simdjson::SUCCESS) idx.total_size = u;
  else if (ts.get_int64().get(i) == simdjson::SUCCESS && i >= 0) idx.total_size = static_cast<uint64_t>(i);
  else if (ts.get_double().get(d) == simdjson::SUCCESS && d >= 0 && d < 1.8e19 &&
           d == static_cast<double>(static_cast<uint64_t>(d)))
    idx.total_size = static_cast<uint64_t>(d);
  else if (ts.get_double().get(d) == simdjson::SUCCESS && d >= 1.8e19)
    idx.total_size = UINT64_MAX;  // a Python int beyond 64 bits: no checkpoint is that large (IX006 says so)
}

// Where a second scanner may start reading a large index: the first line start after the
// middle, at its first non-blank byte, if that is a quote (an entry's key, if the guess that the
// middle falls inside weight_map holds; the first scanner checks it). 0: no such place.
uint64_t split_point(const io::ReadOnlyFile& f) {
  constexpr size_t kWindow = 64u << 10;
  std::unique_ptr<char[]> buf(new char[kWindow]);
  const uint64_t at = f.size() / 2;
  const int64_t got = f.read_at(at, buf.get(), kWindow);
  if (got <= 0) return 0;
  const std::string_view w(buf.get(), static_cast<size_t>(got));
  size_t i = w.find('\n');
  if (i == std::string_view::npos) return 0;
  i = w.find_first_not_of(" \t\r\n", i);
  return i != std::string_view::npos && w[i] == '"' ? at + i : 0;
}

// Appends the second scanner's entries; its shard file ids are renumbered into the first's, so
// ids stay in first-mention order over the whole file.
void append_entries(ShardIndex& idx, const ShardIndex& tail) {
  std::unordered_map<std::string_view, uint32_t> id;
  for (uint32_t i = 0; i < idx.files.size(); ++i) id.emplace(idx.files[i], i);
  std::vector<uint32_t> renumber(tail.files.size());
  for (uint32_t j = 0; j < tail.files.size(); ++j) {
    auto [it, fresh] = id.emplace(tail.files[j], static_cast<uint32_t>(idx.files.size()));
    if (fresh) idx.files.push_back(tail.files[j]);
    renumber[j] = it->second;
  }
  idx.names.insert(idx.names.end(), tail.names.begin(), tail.names.end());
  idx.positions.insert(idx.positions.end(), tail.positions.begin(), tail.positions.end());
  for (uint32_t f : tail.file_of) idx.file_of.push_back(renumber[f]);
}

// Reads the index after the shards: `table` holds their tensors. An index of at least
// `split_min_bytes` (0: never) is read by two threads (see FastIndexScanner).
void parse_index(const fs::path& abs, const std::string& rel, ShardIndex& idx, size_t buffer_bytes,
                 const TensorTable& table, uint64_t split_min_bytes) {
  idx.json.file = rel;
  idx.json.present = true;
  io::ReadOnlyFile f;
  std::string e = f.open(abs);
  if (e.empty()) e = io::size_limit_error(f.size(), limits::kMaxSideJsonBytes);
  if (!e.empty()) {
    idx.json.error = json::ParseError{"cannot read: " + e, 0, 0, 0};
    return;
  }
  {
    auto packed = std::make_shared<IndexStorage>();
    const uint64_t split = split_min_bytes && f.size() >= split_min_bytes ? split_point(f) : 0;
    FastIndexScanner fast(f, idx, packed->packed, buffer_bytes, table, 0, split);
    ShardIndex tail_idx;
    std::optional<FastIndexScanner> tail;
    bool ok = false, tail_ok = false;
    if (split) tail.emplace(f, tail_idx, packed->packed_tail, buffer_bytes, table, split, 0);
    parallel::run(split ? 2 : 1, 2, [&](size_t part) {
      if (part == 0) ok = fast.run();
      else tail_ok = tail->run();
    });
    const FastIndexScanner* with_metadata = &fast;
    if (ok && fast.handed_over()) {
      // The second scanner read the rest; a "metadata" key on both sides of weight_map is a
      // repeat (the general path reports it).
      ok = tail_ok && !(fast.saw_metadata() && tail->saw_metadata());
      if (ok) {
        append_entries(idx, tail_idx);
        idx.read_in_two = true;
        if (tail->saw_metadata()) with_metadata = &*tail;
      } else if (!tail->read_error().empty()) {
        idx.json.error = json::ParseError{"cannot read: " + tail->read_error(), 0, 0, 0};
        return;
      }
    }
    if (ok) {
      if (!with_metadata->metadata().empty()) {
        auto r = json::parse(with_metadata->metadata(), limits::kMaxJsonDepth);
        if (r.ok()) idx.json.value = json::Value(json::Object{{"metadata", r.value}});
        simdjson::dom::parser small;
        simdjson::dom::element meta;
        if (small.parse(simdjson::padded_string(with_metadata->metadata())).get(meta) == simdjson::SUCCESS)
          read_total_size(meta, idx);
      }
      idx.storage = std::move(packed);
      return;
    }
    if (!fast.read_error().empty()) {
      idx.json.error = json::ParseError{"cannot read: " + fast.read_error(), 0, 0, 0};
      return;
    }
    idx.clear_entries();
    idx.schema_error.clear();
  }
  // The general path: the whole file, parsed by simdjson (which also locates errors).
  idx.general_path = true;
  auto storage = std::make_shared<IndexStorage>();
  storage->bytes.reset(new char[f.size() + 1]);
  int64_t got = f.read_at(0, storage->bytes.get(), f.size(), &e);
  if (got < 0) {
    idx.json.error = json::ParseError{"cannot read: " + e, 0, 0, 0};
    return;
  }
  storage->text = std::string_view(storage->bytes.get(), static_cast<size_t>(got));
  const std::string_view text = storage->text;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (parser.allocate(text.size() + 64, limits::kMaxJsonDepth) != simdjson::SUCCESS ||
      parser.parse(padded).get(root) != simdjson::SUCCESS) {
    // Python's json is the judge (transformers reads the index with it): a document it accepts
    // and simdjson declines (NaN, integers beyond 64 bits) is respelled for simdjson's DOM.
    auto exact = json::parse(text, limits::kMaxJsonDepth);
    if (!exact.ok()) {
      idx.json.error = exact.error;
      return;
    }
    padded = simdjson::padded_string(io::simdjson_spelling(text));
    if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
      idx.json.error = json::locate_error(text, limits::kMaxJsonDepth);
      return;
    }
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    idx.schema_error = "the index is not a JSON object";
    return;
  }
  simdjson::dom::element meta;
  if (obj["metadata"].get(meta) == simdjson::SUCCESS) {
    auto r = json::parse(simdjson::minify(meta), limits::kMaxJsonDepth);
    if (r.ok()) idx.json.value = json::Value(json::Object{{"metadata", r.value}});
    read_total_size(meta, idx);
  }
  simdjson::dom::element wm_el;
  if (obj["weight_map"].get(wm_el) != simdjson::SUCCESS) {
    idx.schema_error = "the index has no \"weight_map\"";
    return;
  }
  simdjson::dom::object wm;
  if (wm_el.get_object().get(wm) != simdjson::SUCCESS) {
    idx.schema_error = "\"weight_map\" is not an object of tensor name -> shard file";
    return;
  }
  idx.names.reserve(wm.size());
  idx.file_of.reserve(wm.size());
  EntryInterner interner(idx);
  // Duplicate names are found by Checkpoint::finalize() (it looks every name up anyway).
  for (auto field : wm) {
    std::string_view file;
    if (field.value.get_string().get(file) != simdjson::SUCCESS) {
      idx.schema_error = "weight_map[\"" + std::string(field.key) + "\"] is not a string";
      idx.clear_entries();
      return;
    }
    interner.add(storage->keep(field.key), file, [&](std::string_view f) { return storage->keep(f); });
  }
  idx.storage = std::move(storage);
}

std::string rel_of(const std::string& prefix, const fs::directory_entry& de) {
  const std::string name = de.path().filename().string();
  return prefix.empty() ? name : prefix + "/" + name;
}

struct Walker {
  Checkpoint& ck;
  const LoadOptions& opts;
  std::vector<fs::path> allowed;  // canonical roots a link may lead into
  uint32_t entries = 0;
  // A single-file target (a .gguf): only that file and its split siblings are walked.
  std::function<bool(const std::string&)> keep;

  void classify_symlink(const fs::path& p, FileEntry& fe) {
    fe.is_symlink = true;
    std::error_code ec;
    fe.link_text = fs::read_symlink(p, ec).string();
    fs::path target = fs::canonical(p, ec);
    if (ec) {
      fe.dangling = true;
      // Where would it point? Judge containment lexically so a dangling escape is named.
      fs::path lexical = (p.parent_path() / fe.link_text).lexically_normal();
      if (fs::path(fe.link_text).is_absolute()) lexical = fs::path(fe.link_text).lexically_normal();
      bool inside = false;
      for (const auto& a : allowed) inside = inside || is_within(lexical, a);
      if (!inside) fe.escapes = true;
      return;
    }
    bool inside = false;
    for (const auto& a : allowed) inside = inside || is_within(target, a);
    if (!inside) {
      fe.escapes = true;
      return;
    }
    struct stat st{};
    if (::stat(target.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      fe.unreadable = true;
      fe.error = S_ISDIR(st.st_mode) ? "link to a directory" : "not a regular file";
      return;
    }
    fe.abs = target;
    fe.size = static_cast<uint64_t>(st.st_size);
  }

  void walk(const fs::path& dir, const std::string& prefix, uint32_t depth) {
    std::error_code ec;
    fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) return;
    std::vector<fs::directory_entry> children;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      children.push_back(*it);
    }
    std::sort(children.begin(), children.end(), [](const auto& a, const auto& b) { return a.path() < b.path(); });
    for (const auto& de : children) {
      if (++entries > opts.max_walk_entries) {
        if (ck.walk_stopped.empty())
          ck.walk_stopped = "more than " + std::to_string(opts.max_walk_entries) +
                            " files and directories below the root; the walk stopped at " + rel_of(prefix, de);
        return;
      }
      std::string name = de.path().filename().string();
      std::string rel = prefix.empty() ? name : prefix + "/" + name;
      if (depth == 0 && name == ".git") continue;  // git's own objects are not the checkpoint
      // One lstat gives both the kind and the size (a 160-shard checkpoint: 160 stats fewer).
      struct stat lst{};
      if (::lstat(de.path().c_str(), &lst) != 0) continue;
      if (S_ISDIR(lst.st_mode)) {
        if (keep) continue;  // a single-file target: its directory only
        if (depth + 1 < opts.max_walk_depth) walk(de.path(), rel, depth + 1);
        else if (ck.walk_stopped.empty())
          ck.walk_stopped = rel + "/ was not walked: directories more than " + std::to_string(opts.max_walk_depth) +
                            " levels below the root are not";
        continue;
      }
      if (keep && !keep(rel)) continue;
      FileEntry fe;
      fe.rel = rel;
      if (S_ISLNK(lst.st_mode)) {
        classify_symlink(de.path(), fe);
        if (!fe.dangling && !fe.escapes && fe.unreadable && fe.error == "link to a directory") continue;
      } else if (S_ISREG(lst.st_mode)) {
        fe.abs = de.path();
        fe.size = static_cast<uint64_t>(lst.st_size);
      } else {
        // Sockets, FIFOs, devices: never opened, but recorded so a FIFO named
        // model.safetensors is reported (FS010) instead of silently skipped.
        fe.unreadable = true;
        fe.error = S_ISFIFO(lst.st_mode)   ? "a FIFO, not a regular file"
                   : S_ISSOCK(lst.st_mode) ? "a socket, not a regular file"
                                           : "a device or special file, not a regular file";
      }
      if (fe.readable() && fe.size <= limits::kLfsPointerMaxBytes && fe.size > 0) {
        std::string head;
        if (auto e = io::read_prefix(fe.abs, 64, head); !e.empty()) {
          fe.unreadable = true;
          fe.error = e;
        } else if (head.rfind("version https://git-lfs.github.com/spec/", 0) == 0) {
          fe.lfs_pointer = true;
        }
      }
      ck.files.push_back(std::move(fe));
    }
  }
};

void scan_cache_state(Checkpoint& ck) {
  const CacheInfo& ci = *ck.cache;
  std::error_code ec;
  // refs/ (nested names such as refs/pr/1 live in subdirectories)
  fs::path refs = ci.repo_dir / "refs";
  if (fs::is_directory(refs, ec)) {
    for (auto it = fs::recursive_directory_iterator(refs, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file()) continue;
      RefInfo r;
      r.name = it->path().lexically_relative(refs).generic_string();
      io::read_file(it->path(), 4096, r.content);
      r.well_formed = is_commit_hash(r.content);
      std::string commit = r.content;
      while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
      r.snapshot_exists = is_commit_hash(commit) && fs::is_directory(ci.repo_dir / "snapshots" / commit);
      ck.cache_state.refs.push_back(std::move(r));
    }
  }
  // blobs/*.incomplete: interrupted downloads (<etag>.incomplete or <etag>.<uuid>.incomplete)
  fs::path blobs = ci.repo_dir / "blobs";
  if (fs::is_directory(blobs, ec)) {
    for (auto it = fs::directory_iterator(blobs, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!ends_with(name, ".incomplete")) continue;
      IncompleteBlob b;
      b.path = "blobs/" + name;
      std::error_code sec;
      b.size = it->is_regular_file(sec) ? it->file_size(sec) : 0;
      std::string etag = name.substr(0, name.find('.'));
      for (const auto& f : ck.files) {
        if (!f.is_symlink) continue;
        std::string target = fs::path(f.link_text).filename().string();
        if (target == etag) b.used_by.push_back(f.rel);
      }
      ck.cache_state.incomplete.push_back(std::move(b));
    }
  }
}

}  // namespace

LoadResult load_checkpoint(const std::string& target, const LoadOptions& opts) {
  if (opts.threads != 1) parallel::warm_up();  // helpers start while the target is located
  LoadResult result;
  Checkpoint ck;
  ck.target = target;
  std::string single_gguf;  // set when the target is one .gguf file
  std::error_code ec;
  fs::path p(target);
  fs::file_status st = fs::status(p, ec);

  // One GGUF file: its directory is the root (a cache snapshot is recognised as for a
  // directory target), and only the file and its split siblings are read.
  if (!ec && fs::is_regular_file(st) && ends_with(target, ".gguf")) {
    single_gguf = p.filename().string();
    p = p.has_parent_path() ? p.parent_path() : fs::path(".");
    st = fs::status(p, ec);
  }
  std::string ollama_manifest;  // set for ollama:NAME[:TAG]
  bool ollama_store = false;    // an Ollama models directory (or ollama:NAME)
  if (target.rfind("ollama:", 0) == 0) {
    const std::string name = target.substr(7);
    ollama_manifest = ollama::manifest_path(name);
    const fs::path root = ollama::models_root();
    if (ollama_manifest.empty()) {
      result.error = LoadError{target + ": not an Ollama model name (NAME, NAMESPACE/NAME or HOST/NAMESPACE/NAME, with an optional :TAG)"};
      return result;
    }
    if (!fs::exists(root / ollama_manifest, ec)) {
      result.error = LoadError{target + ": no manifest " + (root / ollama_manifest).string() + " (set OLLAMA_MODELS, or `ollama pull " + name + "`)"};
      return result;
    }
    ck.root = fs::canonical(root, ec);
    ollama_store = true;
  } else if (!ec && fs::is_directory(st) && ollama::is_models_dir(p)) {
    ck.root = fs::canonical(p, ec);
    ollama_store = true;
  } else if (!ec && fs::is_directory(st)) {
    ck.root = fs::canonical(p, ec);
    if (ec) {
      result.error = LoadError{target + ": " + ec.message()};
      return result;
    }
    // A repo folder of the cache itself: resolve refs/main.
    fs::path maybe_repo = ck.root;
    if (maybe_repo.filename().string().rfind("models--", 0) == 0 && fs::is_directory(maybe_repo / "snapshots")) {
      std::string commit;
      if (io::read_file(maybe_repo / "refs" / "main", 4096, commit).empty() && is_commit_hash(commit) &&
          fs::is_directory(maybe_repo / "snapshots" / commit)) {
        ck.root = maybe_repo / "snapshots" / commit;
      } else {
        result.error = LoadError{target + ": a cache repo folder whose refs/main does not name a snapshot; pass a snapshot directory"};
        return result;
      }
    }
    fs::path parent = ck.root.parent_path();
    if (parent.filename() == "snapshots" && parent.parent_path().filename().string().rfind("models--", 0) == 0) {
      CacheInfo ci;
      ci.repo_dir = parent.parent_path();
      ci.cache_root = ci.repo_dir.parent_path();
      ci.commit = ck.root.filename().string();
      std::string folder = ci.repo_dir.filename().string().substr(8);
      size_t sep = folder.find("--");
      ci.repo_id = sep == std::string::npos ? folder : folder.substr(0, sep) + "/" + folder.substr(sep + 2);
      ck.cache = ci;
    }
  } else if (!ec && fs::exists(st)) {
    result.error = LoadError{target + ": not a directory (pass the model directory, a cache snapshot directory, or org/name[@revision])"};
    return result;
  } else if (looks_like_repo_id(target)) {
    size_t at = target.rfind('@');
    std::string repo_id = at == std::string::npos ? target : target.substr(0, at);
    std::string revision = at == std::string::npos ? "main" : target.substr(at + 1);
    if (revision.empty()) revision = "main";
    CacheInfo ci;
    ci.cache_root = hf_cache_root();
    ci.repo_dir = ci.cache_root / repo_folder_name(repo_id);
    ci.repo_id = repo_id;
    ci.revision = revision;
    if (!fs::is_directory(ci.repo_dir, ec)) {
      result.error = LoadError{repo_id + " is not in the local Hugging Face cache (looked in " + ci.repo_dir.string() +
                               "; set HF_HUB_CACHE or HF_HOME, or run `ckpt fetch " + target + "`)"};
      return result;
    }
    if (is_commit_hash(revision)) {
      ci.commit = revision;
    } else {
      if (revision.find("..") != std::string::npos || revision[0] == '/') {
        result.error = LoadError{"revision '" + revision + "' is not a valid ref name"};
        return result;
      }
      std::string content;
      if (auto e = io::read_file(ci.repo_dir / "refs" / revision, 4096, content); !e.empty()) {
        std::string known;
        for (auto it = fs::directory_iterator(ci.repo_dir / "refs", ec); !ec && it != fs::directory_iterator(); it.increment(ec))
          known += (known.empty() ? "" : ", ") + it->path().filename().string();
        result.error = LoadError{repo_id + ": no ref '" + revision + "' in the cache (refs/" + revision + ": " + e +
                                 "); known refs: " + (known.empty() ? "none" : known)};
        return result;
      }
      std::string commit = content;
      while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
      if (!is_commit_hash(commit)) {
        result.error = LoadError{repo_id + ": refs/" + revision + " does not hold a 40-hex commit hash"};
        return result;
      }
      ci.commit = commit;
    }
    ck.root = ci.repo_dir / "snapshots" / ci.commit;
    ck.cache = ci;
    if (!fs::is_directory(ck.root, ec) && is_commit_hash(revision)) {
      // A commit asked for directly whose snapshot is absent: no ref is dangling, the target is
      // simply not in the cache (exit 2), rather than an empty checkpoint that verifies clean.
      result.error = LoadError{repo_id + ": commit " + revision + " is not in the local cache (no " +
                               (ci.repo_dir / "snapshots" / revision).string() + "); run `ckpt fetch " + target + "`"};
      return result;
    }
    if (!fs::is_directory(ck.root, ec)) {
      // The ref names a snapshot that is not there: a finding (FS), not an unreadable target.
      ck.snapshot_missing = true;
      ck.cache->repo_dir = fs::canonical(ci.repo_dir, ec);
      ck.cache->cache_root = ck.cache->repo_dir.parent_path();
      scan_cache_state(ck);
      ck.finalize();
      result.checkpoint = std::move(ck);
      return result;
    }
    ck.root = fs::canonical(ck.root, ec);
    ck.cache->repo_dir = ck.root.parent_path().parent_path();
    ck.cache->cache_root = ck.cache->repo_dir.parent_path();
  } else {
    result.error = LoadError{target + ": no such directory, and not a repo id of the form org/name[@revision]"};
    return result;
  }

  if (ollama_store) {  // manifests and the blobs they name; nothing else of the store is read
    ollama::load(ck, ollama_manifest, opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency()));
    ck.finalize();
    result.checkpoint = std::move(ck);
    return result;
  }
  // ---- discover ----
  Walker w{ck, opts, {ck.root}};
  if (!single_gguf.empty()) {
    const auto split = gguf_load::parse_split_name(single_gguf);
    w.keep = [single_gguf, split](const std::string& rel) {
      if (rel == single_gguf) return true;
      const auto other = gguf_load::parse_split_name(rel);
      return split && other && other->prefix == split->prefix && other->count == split->count;
    };
  }
  if (ck.cache) w.allowed.push_back(fs::canonical(ck.cache->cache_root, ec));
  w.walk(ck.root, "", 0);
  if (ck.cache) scan_cache_state(ck);

  timings::mark("load: discover");
  // Index: model.safetensors.index.json first, else any top-level *.safetensors.index.json.
  const FileEntry* index_entry = nullptr;
  for (const auto& f : ck.files) {
    if (f.rel.find('/') != std::string::npos || !ends_with(f.rel, ".safetensors.index.json")) continue;
    if (!index_entry || f.rel == "model.safetensors.index.json") index_entry = &f;
  }
  // Without safetensors weights, transformers loads pytorch_model.bin.index.json (same schema).
  const bool any_safetensors = std::any_of(ck.files.begin(), ck.files.end(), [](const FileEntry& f) {
    return f.rel.find('/') == std::string::npos && ends_with(f.rel, ".safetensors");
  });
  if (!index_entry && !any_safetensors)
    for (const auto& f : ck.files) {
      if (f.rel.find('/') != std::string::npos || !ends_with(f.rel, ".bin.index.json")) continue;
      if (!index_entry || f.rel == "pytorch_model.bin.index.json") index_entry = &f;
    }

  // Work items run in parallel: one per shard header and one per side JSON file.
  std::vector<std::function<void()>> tasks;
  std::vector<const FileEntry*> shard_files;
  for (const auto& f : ck.files) {
    if (!ends_with(f.rel, ".safetensors") || !f.readable()) continue;
    if (f.rel.find('/') != std::string::npos) continue;  // subdirectory shards join only through the index
    shard_files.push_back(&f);
  }
  if (index_entry && index_entry->readable()) {
    ck.index.emplace();  // read below, once the shards' tensors are known
  } else if (index_entry) {
    ck.index.emplace();
    ck.index->json.file = index_entry->rel;
    ck.index->json.present = true;
    ck.index->json.error = json::ParseError{"cannot read the index file", 0, 0, 0};
  }
  // tokenizer.json (9-17 MB for large vocabularies) is the longest single read: its first part
  // is queued first, and its other 4 MiB parts after the shard headers, so that neither core
  // waits at the end of the phase for one copy out of the page cache.
  std::optional<io::PartedRead> tokenizer_read;
  std::vector<std::function<void()>> late_tasks;
  if (const FileEntry* f = ck.file("tokenizer.json")) {  // kept as bytes: the TK family parses it
    ck.tokenizer.file = f->rel;
    ck.tokenizer.present = true;
    if (!f->readable()) {
      ck.tokenizer.error = json::ParseError{f->lfs_pointer ? "a Git LFS pointer, not the file" : "cannot be opened", 0, 0, 0};
    } else {
      constexpr uint64_t kPart = 4u << 20;
      // (Parts for at most the size limit: a larger file is refused by the open, and its size,
      // which the listing took from the file system, must not decide how many tasks there are.)
      io::PartedRead& r = tokenizer_read.emplace(
          io::PartedRead::parts_for(std::min<uint64_t>(f->size, limits::kMaxSideJsonBytes), kPart), kPart);
      tasks.emplace_back([&r, &t = ck.tokenizer, f] {
        r.open_and_size(f->abs, limits::kMaxSideJsonBytes, t.text, simdjson::SIMDJSON_PADDING);  // parsed in place
        r.read_part(0);
      });
      for (size_t k = 1; k < r.parts(); ++k) late_tasks.emplace_back([&r, k] { r.read_part(k); });
    }
  }
  ck.shards.resize(shard_files.size());
  for (size_t i = 0; i < shard_files.size(); ++i) {
    tasks.emplace_back([&, i] {
      ck.shards[i].file = shard_files[i]->rel;
      ck.shards[i].header = st::read_header(shard_files[i]->abs);
    });
  }
  auto side = [&](const char* name, JsonFile& out) {
    const FileEntry* f = ck.file(name);
    if (!f) return;
    if (!f->readable()) {
      out.file = f->rel;
      out.present = true;
      out.error = json::ParseError{f->lfs_pointer ? "a Git LFS pointer, not the file" : "cannot be opened", 0, 0, 0};
      return;
    }
    tasks.emplace_back([&out, f] { parse_json_file(f->abs, f->rel, out); });
  };
  side("config.json", ck.config);
  side("generation_config.json", ck.generation_config);
  side("tokenizer_config.json", ck.tokenizer_config);
  side("chat_template.json", ck.chat_template_json);
  // Other JSON files transformers, vLLM or Meta's loaders open with Python's json.
  static constexpr const char* kOtherJson[] = {
      "special_tokens_map.json", "added_tokens.json",     "preprocessor_config.json",
      "processor_config.json",   "video_preprocessor_config.json", "params.json",
      "quantize_config.json",    "quant_config.json",     "adapter_config.json"};
  size_t other = 0;
  for (const char* name : kOtherJson) other += ck.file(name) != nullptr;
  ck.other_json.resize(other);  // sized first: the tasks below hold references into it
  other = 0;
  for (const char* name : kOtherJson)
    if (ck.file(name)) side(name, ck.other_json[other++]);
  for (const auto& f : ck.files) {
    bool is_template = f.rel == "chat_template.jinja" ||
                       (f.rel.rfind("additional_chat_templates/", 0) == 0 && ends_with(f.rel, ".jinja"));
    if (!is_template) continue;
    TextFile t;
    t.file = f.rel;
    if (!f.readable()) {
      t.error = f.lfs_pointer ? "a Git LFS pointer, not the template" : "cannot be opened";
    } else if (auto e = io::read_file(f.abs, limits::kMaxTemplateBytes, t.text); !e.empty()) {
      t.error = "cannot read: " + e;
      t.text.clear();
    } else if (auto bad = io::first_invalid_utf8(t.text)) {
      // transformers reads templates with encoding="utf-8": a stray byte fails the tokenizer load
      auto [l, c] = json::line_column(t.text, *bad);
      t.error = "invalid UTF-8 at byte " + std::to_string(*bad) + " (" + std::to_string(l) + ":" + std::to_string(c) +
                "); transformers reads templates as UTF-8";
      t.text.clear();
    }
    ck.templates.push_back(std::move(t));
  }

  // Pickle scan: every readable file that is not a safetensors shard, by content (a sniff of
  // its first bytes; only pickles and archives are read further, and never their storages).
  std::vector<const FileEntry*> pickle_files;
  for (const auto& f : ck.files)
    if (f.readable() && f.size > 0 && !ends_with(f.rel, ".safetensors")) pickle_files.push_back(&f);
  std::vector<pt::FileScan> scans(pickle_files.size());
  for (size_t i = 0; i < pickle_files.size(); ++i)
    tasks.emplace_back([&, i] { scans[i] = pt::scan_file(pickle_files[i]->abs, pickle_files[i]->rel); });

  for (auto& t : late_tasks) tasks.push_back(std::move(t));
  unsigned threads = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, static_cast<unsigned>(tasks.size()));
  parallel::run(tasks.size(), threads, [&](size_t i) { tasks[i](); });
  if (tokenizer_read)
    if (auto e = tokenizer_read->finish(); !e.empty()) ck.tokenizer.error = json::ParseError{"cannot read: " + e, 0, 0, 0};
  timings::mark("load: parse (parallel)");
  gguf_load::load(ck, opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency()));
  for (auto& s : scans)
    if (s.container != pt::Container::NotPickle || pt::is_weights_name(s.file)) ck.pickle_scans.push_back(std::move(s));
  // PyTorch weights join the tensor table when they are what loaders read: no safetensors beside them.
  if (!any_safetensors) {
    std::vector<std::string_view> indexed;  // a .bin index's shard names (read before the index itself)
    if (index_entry && index_entry->readable() && ends_with(index_entry->rel, ".bin.index.json"))
      for (const auto& f : ck.files)
        if (f.rel.find('/') == std::string::npos && ends_with(f.rel, ".bin")) indexed.push_back(f.rel);
    add_pytorch_shards(ck, indexed);
  }

  // The index is read last, against a table of every shard's tensors: a name a shard holds is
  // then not stored twice (on a VM, memory touched for the first time is the largest cost).
  if (ck.index && index_entry->readable()) {
    ck.tensors_by_name.build(ck.shards);
    timings::mark("load: tensor table");
    const unsigned cores = opts.threads ? opts.threads : std::thread::hardware_concurrency();
    parse_index(index_entry->abs, index_entry->rel, *ck.index, opts.index_buffer_bytes, ck.tensors_by_name,
                cores > 1 ? opts.index_split_min_bytes : 0);
    timings::mark("load: index");
  }

  // Shards in subdirectories join only because the index names them (rare: parsed after).
  if (ck.index) {
    std::set<std::string> parsed;
    for (const auto& sh : ck.shards) parsed.insert(sh.file);
    for (std::string_view file : ck.index->files) {  // distinct shard names, first-mention order
      if (file.find('/') == std::string::npos || !is_safe_relative_path(file)) continue;
      const FileEntry* f = ck.file(file);
      if (!f || !f->readable() || !parsed.emplace(file).second) continue;
      Shard sh;
      sh.file = f->rel;
      sh.header = st::read_header(f->abs);
      ck.shards.push_back(std::move(sh));
    }
  }

  ck.finalize();
  timings::mark("load: finalize");
  result.checkpoint = std::move(ck);
  return result;
}

}  // namespace ckpt
