// The TK checks: tokenizer.json against itself (model type, ids, merges, added tokens),
// against tokenizer_config.json / generation_config.json / config.json (named special
// tokens and ids), against the embedding rows, and against the chat template's literals.
//
// tokenizer.json is read from its bytes (no json::Value tree): model.vocab and model.merges by
// the strict scanners of json_sections.h, the rest of the file by simdjson's DOM; files those
// scanners do not read (or invalid ones) go through the DOM whole. The vocabulary goes into a
// flat TokenTable of views into the file, the DOM and an arena, and the merges are checked
// while they are read (tokenizer/merge_check.h). Where json::Value and this reader could differ, this one follows
// json::parse: the last of duplicate keys wins (at the position of the first), integers above
// int64 are numbers but not ids, and the same parser decides what is valid JSON.
#include <cstring>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <simdjson.h>

#include "ckpt/jinja.h"
#include "ckpt/tokenizer.h"
#include "io/file.h"
#include "io/limits.h"
#include "io/simdjson_spelling.h"
#include "tokenizer/json_sections.h"
#include "tokenizer/merge_check.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/token_table.h"
#include "tokenizer/utf8.h"

namespace ckpt::tok {

std::string_view model_type_name(ModelType t) {
  switch (t) {
    case ModelType::BPE: return "BPE";
    case ModelType::Unigram: return "Unigram";
    case ModelType::WordPiece: return "WordPiece";
    case ModelType::WordLevel: return "WordLevel";
    default: return "unknown";
  }
}

uint64_t token_hash_seed() {
  static const uint64_t seed = [] {
    uint64_t s = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    try {
      std::random_device rd;
      s ^= (uint64_t(rd()) << 32) ^ rd();
    } catch (...) {  // no entropy source: the clock alone
    }
    return s;
  }();
  return seed;
}

namespace {

namespace dom = simdjson::dom;
using dom::element;
using ElementType = dom::element_type;
using detail::kMaxExamples;
using detail::MergeChecker;
using detail::MergePipeline;
using detail::q;
using detail::Tally;
using detail::Tokens;

// ---- json::Value's view of a DOM element ------------------------------------------------

// The member `key` of an object; the last one when the key is written twice (json::parse keeps
// the last, as Python does). False when `obj` is not an object or has no such member.
bool member(element obj, std::string_view key, element& out) {
  dom::object o;
  if (obj.get_object().get(o) != simdjson::SUCCESS) return false;
  bool found = false;
  for (auto field : o)
    if (field.key == key) {
      out = field.value;
      found = true;
    }
  return found;
}

bool is_int(element e) { return e.type() == ElementType::INT64; }  // json::Value::is_int
bool is_number(element e) {
  auto t = e.type();
  return t == ElementType::INT64 || t == ElementType::UINT64 || t == ElementType::DOUBLE;
}
int64_t as_int(element e) { return e.get_int64().value_unsafe(); }

std::optional<std::string_view> member_string(element obj, std::string_view key) {
  element v;
  std::string_view s;
  if (member(obj, key, v) && v.get_string().get(s) == simdjson::SUCCESS) return s;
  return std::nullopt;
}
std::optional<int64_t> member_int(element obj, std::string_view key) {
  element v;
  if (member(obj, key, v) && is_int(v)) return as_int(v);
  return std::nullopt;
}
std::optional<bool> member_bool(element obj, std::string_view key) {
  element v;
  bool b;
  if (member(obj, key, v) && v.get_bool().get(b) == simdjson::SUCCESS) return b;
  return std::nullopt;
}

// json::Value::dump() of an element (for messages: a handful per file).
std::string dump(element e) {
  std::string text = simdjson::to_string(e);
  auto r = json::parse(text);
  return r.ok() ? r.value.dump() : text;
}

// Exactly two elements.
bool pair_of(element e, element& a, element& b) {
  dom::array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return false;
  auto it = arr.begin(), end = arr.end();
  if (!(it != end)) return false;
  a = *it;
  ++it;
  if (!(it != end)) return false;
  b = *it;
  ++it;
  return !(it != end);
}

// Parses tokenizer.json in place when the loader left simdjson's padding after the bytes, else
// from a padded copy. Errors are located as json::parse locates them.
std::optional<json::ParseError> parse_document(const std::string& text, dom::parser& parser,
                                               simdjson::padded_string& copy, element& root) {
  if (auto e = io::size_limit_error(text.size(), limits::kMaxSideJsonBytes); !e.empty())  // the loader never reads more
    return json::ParseError{"cannot read: " + e, 0, 0, 0};
  if (parser.allocate(std::max<size_t>(text.size(), 64), limits::kMaxJsonDepth) != simdjson::SUCCESS)
    return json::ParseError{"cannot allocate a parser for " + std::to_string(text.size()) + " bytes", 0, 1, 1};
  simdjson::error_code code;
  if (text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING) {
    code = parser.parse(text.data(), text.size(), false).get(root);
  } else {
    copy = simdjson::padded_string(text);
    code = parser.parse(copy).get(root);
  }
  if (code == simdjson::SUCCESS) return std::nullopt;
  // What Python's json reads is valid here too (json::parse is the judge): respell the
  // numbers simdjson declines and read that.
  if (json::parse(text, limits::kMaxJsonDepth).ok()) {
    copy = simdjson::padded_string(io::simdjson_spelling(text));
    if (parser.parse(copy).get(root) == simdjson::SUCCESS) return std::nullopt;
  }
  json::ParseError located = json::locate_error(text, limits::kMaxJsonDepth);
  if (located.message == "the document could not be parsed")  // valid grammar, refused by simdjson
    located.message = std::string("unsupported JSON: ") + simdjson::error_message(code);
  return located;
}

// ---- tokenizer.json ----------------------------------------------------------------------

bool is_byte_level_component(element v) {
  auto t = member_string(v, "type");  // nullopt unless v is an object with a string type
  if (!t) return false;
  if (*t == "ByteLevel") return true;
  if (*t == "Sequence") {
    element list;
    dom::array arr;
    if (member(v, "pretokenizers", list) && list.get_array().get(arr) == simdjson::SUCCESS)
      for (element e : arr)
        if (is_byte_level_component(e)) return true;
  }
  return false;
}

// Keys written more than once in one object, in file order.
void duplicate_keys(element v, std::vector<std::string_view>& out) {
  dom::object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) return;
  std::unordered_set<std::string_view> seen;
  for (auto field : o)
    if (!seen.insert(field.key).second) out.push_back(field.key);
}

// The keys written twice in every object json::parse would have recorded at the path
// "/model/vocab": each "model" member's "vocab" members, and a root member named "model/vocab".
// `winner` holds those of the vocabulary in use (already found while reading it), if read.
std::vector<std::string_view> vocab_duplicates(element root, const std::vector<std::string_view>* winner) {
  std::vector<std::string_view> out;
  dom::object ro;
  if (root.get_object().get(ro) != simdjson::SUCCESS) return out;
  size_t models = 0;
  for (auto field : ro) models += field.key == "model";
  size_t m = 0;
  for (auto field : ro) {
    if (field.key == "model/vocab") {
      duplicate_keys(field.value, out);
    } else if (field.key == "model") {
      ++m;
      dom::object mo;
      if (field.value.get_object().get(mo) != simdjson::SUCCESS) continue;
      size_t vocabs = 0, v = 0;
      for (auto mf : mo) vocabs += mf.key == "vocab";
      for (auto mf : mo) {
        if (mf.key != "vocab") continue;
        if (++v == vocabs && m == models && winner) out.insert(out.end(), winner->begin(), winner->end());
        else duplicate_keys(mf.value, out);
      }
    }
  }
  return out;
}

bool is_sentinel(element e, int64_t value) { return is_int(e) && as_int(e) == value; }

// Merges sections of at least this many bytes are checked on other threads while they are read.
std::atomic<size_t> g_merge_pipeline_min_bytes{256u << 10};

// The big sections as the strict scanners (json_sections.h) read them while the file was
// skimmed: the vocabulary is in the token table already and the merges are checked. The reader
// takes them where it finds the sentinels standing for them.
struct Sections : SectionReader {
  Tokens* tk = nullptr;
  StringArena arena;  // their unescaped strings
  std::vector<std::string_view> vocab_repeats;
  bool vocab_read = false, vocab_used = false;
  std::optional<MergeChecker> checked_merges;
  size_t merges_count = 0;
  bool merges_used = false;

  bool vocab(detail::Cursor& c) override {
    // Every entry is at least `"":0,` (5 bytes): reserving for that many costs address space
    // only (the pages written are the ones touched); past 4M entries (more than any real
    // vocabulary) the vector grows as it goes.
    tk->by_text.reserve_entries(std::min<size_t>(size_t(c.end - c.p) / 5 + 64, size_t(1) << 22));
    if (!scan_vocab(c, [&](std::string_view key, int64_t id) { tk->by_text.append(key, id); })) return false;
    tk->by_text.index_appended(vocab_repeats, 64);
    vocab_read = true;
    return true;
  }
  bool merges(detail::Cursor& c) override {
    if (!vocab_read) return false;  // merges before the vocabulary: no writer does that
    MergeChecker& checker = checked_merges.emplace(*tk, true);
    size_t n = 0;
    bool ok;
    if (static_cast<size_t>(c.end - c.p) >= g_merge_pipeline_min_bytes.load(std::memory_order_relaxed) &&
        std::thread::hardware_concurrency() > 1) {
      MergePipeline pipe(checker);
      ok = scan_merges(
          c, [&](size_t i, std::string_view s) { pipe.push_string(i, s), n = i + 1; },
          [&](size_t i, std::string_view a, std::string_view b) { pipe.push_pair(i, a, b), n = i + 1; });
      pipe.finish();
    } else {
      ok = scan_merges(
          c, [&](size_t i, std::string_view s) { checker.add_string(i, s), n = i + 1; },
          [&](size_t i, std::string_view a, std::string_view b) { checker.add(i, a, b), n = i + 1; });
      checker.flush();
    }
    merges_count = n;
    return ok;
  }
};

// tokenizer.json's "model" section and added_tokens. With `sec`, the root's model.vocab and
// model.merges are sentinels standing for the sections the strict scanners read.
void read_tokenizer_json(const std::string& file, element root, Tokens& tk, FindingSink& sink, Sections* sec) {
  element model;
  if (!member(root, "model", model) || !model.is_object()) {
    sink.add("TK003", Severity::error,
             "tokenizer.json has no \"model\" object; expected {\"model\": {\"type\": ..., \"vocab\": ...}}",
             file, {}, "the file is not a tokenizers-library tokenizer.json (a slow-tokenizer file renamed?)");
    return;
  }
  element vocab, unused;
  bool has_vocab = member(model, "vocab", vocab);
  auto type = member_string(model, "type");
  if (type) {
    if (*type == "BPE") tk.type = ModelType::BPE;
    else if (*type == "Unigram") tk.type = ModelType::Unigram;
    else if (*type == "WordPiece") tk.type = ModelType::WordPiece;
    else if (*type == "WordLevel") tk.type = ModelType::WordLevel;
    else {
      sink.add("TK003", Severity::error,
               "tokenizer.json model.type is " + q(*type) +
                   "; expected one of BPE, Unigram, WordPiece, WordLevel",
               file, {}, "no tokenizer library can build this model");
      return;
    }
  } else {
    // The tokenizers library infers an untagged model from its fields.
    if (member(model, "merges", unused)) tk.type = ModelType::BPE;
    else if (has_vocab && vocab.is_array()) tk.type = ModelType::Unigram;
    else if (member(model, "max_input_chars_per_word", unused)) tk.type = ModelType::WordPiece;
    else tk.type = ModelType::WordLevel;
  }
  element pre;
  tk.byte_level = member(root, "pre_tokenizer", pre) && is_byte_level_component(pre);
  tk.source = file;

  Tally bad_vocab, dup_ids;
  std::vector<std::string_view> vocab_dups;  // keys of the vocabulary in use written twice
  bool read_vocab_object = false;
  if (tk.type == ModelType::Unigram) {
    dom::array arr;
    if (!has_vocab || vocab.get_array().get(arr) != simdjson::SUCCESS) {
      sink.add("TK003", Severity::error,
               "tokenizer.json Unigram model.vocab is not a list of [piece, score] pairs", file, {},
               "the model section is truncated or was written by another tool");
      return;
    }
    tk.by_text.reserve(arr.size());  // size() saturates at 2^24 - 1: a hint
    Tally dup_pieces;
    size_t n = 0;
    for (element e : arr) {
      size_t i = n++;
      element piece, score;
      std::string_view text;
      if (!pair_of(e, piece, score) || piece.get_string().get(text) != simdjson::SUCCESS || !is_number(score)) {
        bad_vocab.add_with([&] { return "entry " + std::to_string(i); });
        continue;
      }
      if (!tk.by_text.insert(text, int64_t(i)).second) dup_pieces.add_with([&] { return q(text); });
      tk.note_id(int64_t(i));
    }
    if (dup_pieces.count)
      sink.add("TK004", Severity::error,
               "tokenizer.json Unigram vocabulary lists the same piece more than once: " +
                   dup_pieces.list() + "; expected every piece once",
               file, {}, "two ids spell the same text; encoding picks one and the other is unreachable");
    element unk;
    if (member(model, "unk_id", unk) && !unk.is_null() && (!is_int(unk) || as_int(unk) < 0 || uint64_t(as_int(unk)) >= n))
      sink.add("TK003", Severity::error,
               "tokenizer.json model.unk_id is " + dump(unk) + "; expected an id below the " +
                   std::to_string(n) + "-piece vocabulary",
               file, {}, "the tokenizers library refuses to build a Unigram model whose unk_id is out of range");
  } else {
    dom::object obj;
    bool from_section = sec && sec->vocab_read && has_vocab && is_sentinel(vocab, kVocabSentinel);
    if (!has_vocab || (!from_section && vocab.get_object().get(obj) != simdjson::SUCCESS)) {
      sink.add("TK003", Severity::error,
               "tokenizer.json " + std::string(model_type_name(tk.type)) +
                   " model.vocab is not an object mapping token -> id",
               file, {}, "the model section is truncated or was written by another tool");
      return;
    }
    read_vocab_object = true;
    // A malformed id is kept as -1 - (its index in `bad`): the entry is spelled but no token.
    std::vector<element> bad;
    if (from_section) {  // read while the file was skimmed
      sec->vocab_used = true;
      vocab_dups = sec->vocab_repeats;
    } else {
      tk.by_text.reserve_entries(obj.size() + 64);  // size() saturates at 2^24 - 1: a hint
      for (auto field : obj) {
        element v = field.value;
        int64_t id;
        if (!is_int(v) || (id = as_int(v)) < 0) {
          id = -1 - int64_t(bad.size());
          bad.push_back(v);
        }
        tk.by_text.append(field.key, id);
      }
      tk.by_text.index_appended(vocab_dups, 64);
    }
    // Ids listed in increasing order (as every writer does) cannot repeat; otherwise sort them.
    bool increasing = true;
    for (const auto& e : tk.by_text.entries()) {
      if (e.id < 0) {
        bad_vocab.add_with([&] { return q(e.text) + " -> " + dump(bad[size_t(-1 - e.id)]); });
        continue;
      }
      increasing = increasing && e.id > tk.max_id;
      tk.max_id = std::max(tk.max_id, e.id);
    }
    tk.table_ids = true;
    if (!increasing) {
      std::vector<std::pair<int64_t, std::string_view>> by_id;
      by_id.reserve(tk.by_text.entries().size());
      for (const auto& e : tk.by_text.entries())
        if (e.id >= 0) by_id.emplace_back(e.id, e.text);
      std::sort(by_id.begin(), by_id.end());
      for (size_t i = 1; i < by_id.size(); ++i)
        if (by_id[i].first == by_id[i - 1].first)
          dup_ids.add_with([&] {
            return "id " + std::to_string(by_id[i].first) + " = " + q(by_id[i - 1].second) + " and " +
                   q(by_id[i].second);
          });
    }
  }
  for (std::string_view key : vocab_duplicates(root, read_vocab_object ? &vocab_dups : nullptr))
    dup_ids.add_with([&] { return "key " + q(key) + " written twice"; });
  if (bad_vocab.count)
    sink.add("TK003", Severity::error,
             "tokenizer.json model.vocab has malformed entries: " + bad_vocab.list() +
                 "; expected non-negative integer ids",
             file, {}, "the vocabulary was edited by hand or truncated");
  if (dup_ids.count)
    sink.add("TK004", Severity::error,
             "tokenizer.json model.vocab ids are not unique: " + dup_ids.list(), file, {},
             "two tokens share an id, so decoding that id is ambiguous and one token can never be produced");

  // BPE merges: present, well-formed, made of existing tokens, producing existing tokens.
  if (tk.type == ModelType::BPE) {
    element merges;
    dom::array arr;
    bool has_merges = member(model, "merges", merges);
    bool from_section = sec && sec->checked_merges && has_merges && is_sentinel(merges, kMergesSentinel);
    if (!has_merges || (!from_section && merges.get_array().get(arr) != simdjson::SUCCESS)) {
      sink.add("TK005", Severity::error,
               std::string("tokenizer.json BPE model has ") +
                   (has_merges ? "a non-list \"merges\"" : "no \"merges\" key") +
                   "; expected a list of merges (\"a b\" strings or [a, b] pairs)",
               file, {},
               "swift-transformers fatalErrors on a BPE model without merges and tokenizers cannot "
               "build it; regenerate tokenizer.json with the tokenizers library");
    } else {
      bool empty = from_section ? sec->merges_count == 0 : !(arr.begin() != arr.end());
      if (empty && tk.by_text.size() > 300) {
        // Tokens longer than one code point need merges to be produced.
        bool multi_char = false;
        for (const auto& e : tk.by_text.entries()) {
          if (e.id < 0 || e.text.empty()) continue;
          size_t i = 0;
          utf8_next(e.text, i);
          if (i < e.text.size()) {
            multi_char = true;
            break;
          }
        }
        if (multi_char)
          sink.add("TK005", Severity::warning,
                   "tokenizer.json BPE model has an empty merges list but " +
                       std::to_string(tk.by_text.size()) +
                       " vocabulary entries; multi-character tokens can never be produced",
                   file, {}, "the merges were dropped when the tokenizer was converted");
      }
      std::optional<MergeChecker> local;
      if (from_section) {  // checked while the file was skimmed
        sec->merges_used = true;
      } else {
        MergeChecker& checker = local.emplace(tk, tk.byte_level);
        size_t n = 0;
        for (element m : arr) {
          size_t i = n++;
          std::string_view a, b;
          element ea, eb;
          if (m.get_string().get(a) == simdjson::SUCCESS) {
            checker.add_string(i, a);
          } else if (!pair_of(m, ea, eb) || ea.get_string().get(a) != simdjson::SUCCESS ||
                     eb.get_string().get(b) != simdjson::SUCCESS || a.empty() || b.empty()) {
            checker.malformed.add_with([&] { return "#" + std::to_string(i) + " " + dump(m).substr(0, 80); });
          } else {
            checker.add(i, a, b);
          }
        }
        checker.flush();
      }
      const MergeChecker& checker = from_section ? *sec->checked_merges : *local;
      const Tally &malformed = checker.malformed, &missing_part = checker.missing_part,
                  &missing_result = checker.missing_result, &not_byte_level = checker.not_byte_level;
      if (malformed.count)
        sink.add("TK009", Severity::error,
                 "tokenizer.json has malformed merges: " + malformed.list() +
                     "; expected \"left right\" (one space) or a [left, right] pair",
                 file, {}, "a merge written with a literal space inside a token, or a truncated list");
      if (missing_part.count)
        sink.add("TK006", Severity::error,
                 "tokenizer.json merges use tokens that are not in the vocabulary: " + missing_part.list(),
                 file, {}, "the tokenizers library refuses to build: merge token out of vocabulary");
      if (missing_result.count)
        sink.add("TK007", Severity::error,
                 "tokenizer.json merges produce tokens that are not in the vocabulary: " +
                     missing_result.list(),
                 file, {}, "the tokenizers library refuses to build: merge result out of vocabulary");
      if (tk.byte_level && not_byte_level.count)
        sink.add("TK008", Severity::error,
                 "tokenizer.json pre-tokenizer is ByteLevel but merges are not spelled in the byte-level "
                 "alphabet: " + not_byte_level.list(),
                 file, {},
                 "write bytes as their byte-level symbols (a space is 'Ġ', a newline 'Ċ'); a raw space "
                 "can never appear after ByteLevel pre-tokenization");
    }
    // A byte-level BPE without byte fallback must cover all 256 byte symbols.
    if (tk.byte_level && !member_bool(model, "byte_fallback").value_or(false)) {
      Tally absent;
      for (const auto& s : byte_level_alphabet_sorted())
        if (!tk.by_text.contains(s)) absent.add(q(s));
      if (absent.count)
        sink.add("TK018", Severity::warning,
                 "tokenizer.json is byte-level BPE but " + std::to_string(absent.count) +
                     " of the 256 byte symbols have no token: " + absent.list(),
                 file, {}, "text containing those bytes cannot be encoded and is silently dropped");
    }
  }

  // added_tokens: well-formed, one content per id, consistent with the vocabulary.
  element added;
  if (member(root, "added_tokens", added) && !added.is_null()) {
    dom::array arr;
    if (added.get_array().get(arr) != simdjson::SUCCESS) {
      sink.add("TK010", Severity::error, "tokenizer.json added_tokens is not a list", file, {},
               "the file was edited by hand");
    } else {
      Tally malformed, clash_ids, vocab_conflict;
      std::unordered_map<int64_t, std::string_view> added_by_id;
      size_t n = 0;
      for (element e : arr) {
        size_t i = n++;
        auto id = member_int(e, "id");
        element content;
        std::string_view text;
        if (!id || *id < 0 || !member(e, "content", content) ||
            content.get_string().get(text) != simdjson::SUCCESS || text.empty()) {
          malformed.add_with([&] { return "#" + std::to_string(i) + " " + dump(e).substr(0, 80); });
          continue;
        }
        if (element sp; member(e, "special", sp)) {
          bool special = false;
          if (sp.get_bool().get(special) == simdjson::SUCCESS && special) tk.special_added.emplace_back(*id, text);
        }
        auto [it, fresh] = added_by_id.emplace(*id, text);
        if (!fresh && it->second != text)
          clash_ids.add_with([&] { return "id " + std::to_string(*id) + " = " + q(it->second) + " and " + q(text); });
        uint32_t index = tk.by_text.index_of(text);
        const TokenTable::Entry* v = index != TokenTable::npos && tk.by_text.entry(index).id >= 0 ? &tk.by_text.entry(index) : nullptr;
        if (v && v->id != *id)
          vocab_conflict.add_with([&] {
            return q(text) + " is id " + std::to_string(*id) + " in added_tokens but " + std::to_string(v->id) +
                   " in model.vocab";
          });
        else if (!v && index == TokenTable::npos)
          tk.by_text.insert(text, *id);
        else if (!v)
          tk.by_text.set_id(index, *id);  // spelled in the vocabulary with a malformed id
        tk.note_id(*id);
      }
      if (malformed.count)
        sink.add("TK010", Severity::error,
                 "tokenizer.json added_tokens has malformed entries: " + malformed.list() +
                     "; expected {\"id\": non-negative int, \"content\": non-empty string, ...}",
                 file, {}, "the tokenizers library refuses to load the file");
      if (clash_ids.count)
        sink.add("TK010", Severity::error,
                 "tokenizer.json added_tokens gives one id two contents: " + clash_ids.list(), file, {},
                 "two special tokens were appended with the same id");
      if (vocab_conflict.count)
        sink.add("TK011", Severity::warning,
                 "tokenizer.json added_tokens disagree with model.vocab: " + vocab_conflict.list(), file,
                 {}, "libraries differ on which id wins; encode and decode may not round-trip");
    }
  }
  tk.known = true;
}

std::atomic<bool> g_dom_reader_only{false};
thread_local bool t_last_read_used_sections = false;

// The fast path: the big sections through the strict scanners, the rest of the file through the
// DOM. False (tk reset, nothing reported) when the file is not of the plain shape these read,
// or is not valid JSON; the caller then parses the whole file with the DOM, which decides.
bool read_with_sections(const RawJsonFile& tj, dom::parser& parser, std::string& rest, Sections& sec, Tokens& tk,
                        FindingSink& sink) {
  const std::string& text = tj.text;
  if (g_dom_reader_only.load(std::memory_order_relaxed) || text.size() > limits::kMaxSideJsonBytes) return false;
  sec.tk = &tk;
  auto give_up = [&] {
    tk = Tokens{};
    sec.checked_merges.reset();
    sec.vocab_read = false;
    return false;
  };
  auto ranges = skim_sections(text, sec.arena, sec);
  if (!ranges || (!ranges->vocab_end && !ranges->merges_end)) return give_up();
  struct Cut {
    size_t begin, end;
    int64_t sentinel;
  };
  std::vector<Cut> cuts;
  if (ranges->vocab_end) cuts.push_back({ranges->vocab_begin, ranges->vocab_end, kVocabSentinel});
  if (ranges->merges_end) cuts.push_back({ranges->merges_begin, ranges->merges_end, kMergesSentinel});
  std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.begin < b.begin; });
  size_t cut_bytes = 0;
  for (const Cut& c : cuts) {
    // The DOM validates the UTF-8 of the rest; these bytes it never sees.
    if (!simdjson::validate_utf8(text.data() + c.begin, c.end - c.begin)) return give_up();
    cut_bytes += c.end - c.begin;
  }
  rest.clear();
  rest.reserve(text.size() - cut_bytes + 64 + simdjson::SIMDJSON_PADDING);  // parsed in place
  size_t at = 0;
  for (const Cut& c : cuts) {
    rest.append(text, at, c.begin - at);
    rest += std::to_string(c.sentinel);
    at = c.end;
  }
  rest.append(text, at, std::string::npos);
  element root;
  if (parser.allocate(std::max<size_t>(rest.size(), 64), limits::kMaxJsonDepth) != simdjson::SUCCESS ||
      rest.capacity() - rest.size() < simdjson::SIMDJSON_PADDING ||
      parser.parse(rest.data(), rest.size(), false).get(root) != simdjson::SUCCESS)
    return give_up();
  FindingSink local;
  read_tokenizer_json(tj.file, root, tk, local, &sec);
  // Every section must have been taken where the DOM reader would have read it.
  if (sec.vocab_used != (ranges->vocab_end != 0) || sec.merges_used != (ranges->merges_end != 0))
    return give_up();
  for (auto& f : local.findings()) sink.add(std::move(f));
  return true;
}

void read_sentencepiece(const Checkpoint& ck, const FileEntry& fe, Tokens& tk, FindingSink& sink) {
  constexpr uint64_t kMax = 64ull << 20;
  if (!fe.readable()) return;  // the FS family reports unreadable files and LFS pointers
  if (fe.size > kMax) return;
  std::ifstream in(fe.abs, std::ios::binary);
  std::string bytes(size_t(fe.size), '\0');
  if (!in.read(bytes.data(), std::streamsize(bytes.size()))) return;
  auto pieces = sentencepiece_pieces(bytes);
  if (!pieces) {
    sink.add("TK003", Severity::error,
             "tokenizer.model is not a SentencePiece model (" + std::to_string(fe.size) +
                 " bytes that do not parse as a ModelProto with pieces)",
             fe.rel, {}, "a truncated download or another file saved under this name");
    return;
  }
  tk.owned = std::move(*pieces);
  tk.type = ModelType::Unigram;
  tk.source = fe.rel;
  tk.by_text.reserve(tk.owned.size());
  for (size_t i = 0; i < tk.owned.size(); ++i) {
    tk.by_text.insert(tk.owned[i], int64_t(i));
    tk.note_id(int64_t(i));
  }
  tk.known = true;
  (void)ck;
}

// A special token in tokenizer_config.json: a string or an AddedToken object.
std::optional<std::string> token_text(const json::Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_object()) return v.get_string("content");
  return std::nullopt;
}

const json::Value* text_section(const json::Value& cfg) {
  for (const char* k : {"text_config", "language_config", "llm_config"}) {
    const json::Value* v = cfg.find(k);
    if (v && v->is_object()) return v;
  }
  return nullptr;
}

std::optional<int64_t> config_vocab_size(const Checkpoint& ck) {
  if (!ck.config.ok()) return std::nullopt;
  if (const json::Value* t = text_section(ck.config.value))
    if (auto v = t->get_int("vocab_size")) return v;
  return ck.config.value.get_int("vocab_size");
}

// Token-id fields, integers of any size (Python reads 10**30 as an int, and so does
// json::parse): a check that compares an id with the embedding must see them all.
void collect_ids(const json::Value& obj, const std::string& where,
                 std::vector<std::pair<std::string, json::Value>>& out) {
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"}) {
    const json::Value* v = obj.find(key);
    if (!v) continue;
    if (v->is_integer()) {
      out.emplace_back(where + key, *v);
    } else if (v->is_array()) {
      size_t i = 0;
      for (const auto& e : v->as_array()) {
        if (e.is_integer()) out.emplace_back(where + key + "[" + std::to_string(i) + "]", e);
        ++i;
      }
    }
  }
}

}  // namespace

std::vector<std::string> template_literal_tokens(std::string_view t) {
  std::vector<std::string> out;
  auto push = [&](std::string s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  };
  auto bad_inner = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '"' || c == '{' ||
           c == '}' || c == '<' || c == '>' || c == '+' || c == '~' || c == '%' || c == '\\';
  };
  // <|...|> and the full-width DeepSeek form <｜...｜>.
  const std::string_view opens[] = {"<|", "<\xEF\xBD\x9C"};
  const std::string_view closes[] = {"|>", "\xEF\xBD\x9C>"};
  for (int k = 0; k < 2; ++k) {
    size_t pos = 0;
    while ((pos = t.find(opens[k], pos)) != std::string_view::npos) {
      size_t start = pos + opens[k].size();
      size_t end = t.find(closes[k], start);
      pos = start;
      if (end == std::string_view::npos || end == start || end - start > 64) continue;
      std::string_view inner = t.substr(start, end - start);
      if (std::any_of(inner.begin(), inner.end(), bad_inner) || inner.find('|') != std::string_view::npos)
        continue;
      push(std::string(t.substr(pos - opens[k].size(), end + closes[k].size() - (pos - opens[k].size()))));
    }
  }
  for (std::string_view lit : {"<think>", "</think>", "<start_of_turn>", "<end_of_turn>"})
    if (t.find(lit) != std::string_view::npos) push(std::string(lit));
  return out;
}

std::vector<TemplateLiteral> emitted_template_literals(const Checkpoint& ck) {
  // Every template source a loader may use (the separate files, tokenizer_config.json's
  // field, the legacy chat_template.json), each judged on its own.
  std::vector<jinja::TemplateSource> sources;
  for (const auto& t : ck.templates)
    if (t.ok()) sources.push_back({t.file, t.file, t.file, t.text});
  auto from_field = [&](const JsonFile& jf) {
    if (!jf.ok()) return;
    const json::Value* ct = jf.value.find("chat_template");
    if (!ct) return;
    if (ct->is_string()) {
      sources.push_back({"default", jf.file, jf.file + ": chat_template", ct->as_string()});
    } else if (ct->is_array()) {
      for (const auto& e : ct->as_array())
        if (auto s = e.find("template"); s && s->is_string())
          sources.push_back({e.get_string("name").value_or(""), jf.file,
                             jf.file + ": chat_template[name=" + e.get_string("name").value_or("") + "]", s->as_string()});
    }
  };
  from_field(ck.tokenizer_config);
  from_field(ck.chat_template_json);

  std::vector<TemplateLiteral> out;
  const json::Value tokens = jinja::special_tokens(ck.tokenizer_config.ok() ? &ck.tokenizer_config.value : nullptr);
  for (const auto& rep : jinja::probe_templates(sources, tokens)) {
    if (!rep.parsed) continue;  // CT001 reports it
    for (const auto& piece : rep.parsed->emittable_text()) {
      for (auto& lit : template_literal_tokens(piece.text)) {
        if (std::any_of(out.begin(), out.end(), [&](const TemplateLiteral& o) {
              return o.literal == lit && o.origin == rep.source.origin;
            }))
          continue;
        TemplateLiteral tl;
        tl.file = rep.source.file;
        tl.origin = rep.source.origin;
        tl.literal = lit;
        // line:column of the literal itself inside the piece
        const size_t at = piece.text.find(lit);
        tl.line = piece.line;
        tl.column = piece.column;
        const std::string_view before = std::string_view(piece.text).substr(0, at);
        const size_t nl = before.rfind('\n');
        if (nl != std::string_view::npos) {
          tl.line += static_cast<uint32_t>(std::count(before.begin(), before.end(), '\n'));
          tl.column = 1;
        }
        for (size_t k = nl == std::string_view::npos ? 0 : nl + 1; k < before.size(); ++k)
          if ((static_cast<unsigned char>(before[k]) & 0xC0) != 0x80) ++tl.column;
        if (piece.constant && nl == std::string_view::npos) ++tl.column;  // past the opening quote
        for (const auto& p : rep.probes)
          if (p.ok && p.output.find(lit) != std::string::npos) {
            tl.probe = p.probe;
            break;
          }
        out.push_back(std::move(tl));
      }
    }
  }
  return out;
}

void set_dom_reader_only(bool on) { g_dom_reader_only.store(on, std::memory_order_relaxed); }
void set_merge_pipeline_min_bytes(size_t bytes) { g_merge_pipeline_min_bytes.store(bytes, std::memory_order_relaxed); }
bool last_read_used_sections() { return t_last_read_used_sections; }

void check_tokenizer(const Checkpoint& ck, const CheckInput& in, FindingSink& sink) {
  // tk's token texts view the parsed tokenizer.json (the file's bytes, the DOM's strings, the
  // sections' arena): all of them outlive every use of tk.
  dom::parser parser;
  simdjson::padded_string copy;
  std::string rest;
  Sections sections;
  Tokens tk;
  const FileEntry* tj_file = ck.file("tokenizer.json");
  const FileEntry* spm = ck.file("tokenizer.model");
  bool slow_bpe = ck.file("vocab.json") && ck.file("merges.txt");
  bool tiktoken = false;
  for (const auto& f : ck.files)
    if (f.rel.size() > 9 && f.rel.ends_with(".tiktoken") && f.rel.find('/') == std::string::npos)
      tiktoken = true;
  bool json_unreadable = tj_file && (!tj_file->readable() || tj_file->size == 0);  // FS reports these

  std::optional<json::ParseError> tj_error = ck.tokenizer.error;  // could not be read
  bool tj_parsed = false;
  t_last_read_used_sections = false;
  if (ck.tokenizer.present && !tj_error) {
    if (read_with_sections(ck.tokenizer, parser, rest, sections, tk, sink)) {
      tj_parsed = true;
      t_last_read_used_sections = true;
    } else {
      element root;
      tj_error = parse_document(ck.tokenizer.text, parser, copy, root);
      if (!tj_error) {
        tj_parsed = true;
        read_tokenizer_json(ck.tokenizer.file, root, tk, sink, nullptr);
      }
    }
  }
  if (ck.tokenizer.present && tj_error && !json_unreadable) {
    const auto& e = *tj_error;
    sink.add("TK002", Severity::error,
             "tokenizer.json is not valid JSON at " + std::to_string(e.line) + ":" +
                 std::to_string(e.column) + ": " + e.message,
             ck.tokenizer.file, {}, "a truncated download or a hand edit; re-fetch the file");
  } else if (!ck.tokenizer.present && !tj_file && spm) {
    read_sentencepiece(ck, *spm, tk, sink);
  }
  tk.finish();
  if (!ck.tokenizer.present && !tj_file && !spm && !slow_bpe && !tiktoken) {
    sink.add("TK001", Severity::warning,
             "no tokenizer: expected tokenizer.json (or tokenizer.model, or vocab.json + merges.txt)", {},
             {},
             "loaders fall back to a degenerate one-token vocabulary that encodes every prompt, "
             "including '<think>', to []; copy the tokenizer files from the base model");
  }

  const std::string tc_file = ck.tokenizer_config.file.empty() ? "tokenizer_config.json"
                                                               : ck.tokenizer_config.file;
  // Unigram behind the generic fast class (SwiftLM #155).
  if (tk.known && tk.type == ModelType::Unigram && tj_parsed && ck.tokenizer_config.ok()) {
    auto cls = ck.tokenizer_config.value.get_string("tokenizer_class");
    if (cls && *cls == "PreTrainedTokenizerFast")
      sink.add("TK016", Severity::info,
               "tokenizer.json holds a Unigram model behind the generic tokenizer_class "
               "PreTrainedTokenizerFast; loaders that pick the model from the class expect BPE",
               tc_file, {},
               "swift-transformers before SwiftLM #155 routed this class to a BPE tokenizer and "
               "fatalErrored on the missing merges; name a Unigram class (e.g. T5TokenizerFast) if "
               "your engine needs it");
  }

  // Special tokens named by tokenizer_config.json must exist as single tokens.
  if (tk.known && ck.tokenizer_config.ok()) {
    const json::Value& tc = ck.tokenizer_config.value;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                            "mask_token"}) {
      const json::Value* v = tc.find(key);
      if (!v || v->is_null()) continue;
      auto text = token_text(*v);
      if (!text || text->empty() || tk.has(*text)) continue;
      sink.add("TK012", Severity::error,
               std::string("tokenizer_config.json ") + key + " is " + q(*text) + " but " + tk.source +
                   " has no such token",
               tc_file, {},
               "the special token was renamed or the tokenizer belongs to another model; the engine "
               "will encode it as several ordinary tokens or fail to find it");
    }
    if (const json::Value* extra = tc.find("additional_special_tokens"); extra && extra->is_array()) {
      Tally missing;
      for (const auto& e : extra->as_array()) {
        auto text = token_text(e);
        if (text && !text->empty() && !tk.has(*text)) missing.add(q(*text));
      }
      if (missing.count)
        sink.add("TK012", Severity::error,
                 "tokenizer_config.json additional_special_tokens names tokens that " + tk.source +
                     " does not have: " + missing.list(),
                 tc_file, {}, "the tokenizer was replaced without updating tokenizer_config.json");
    }
  }

  // How many ids the model can embed.
  std::optional<uint64_t> rows;
  std::string rows_what;
  std::string rows_file, rows_tensor;
  if (in.embedding) {
    rows = in.embedding->rows;
    rows_what = "embedding " + in.embedding->tensor + " has " + std::to_string(*rows) + " rows";
    rows_file = in.embedding->file;
    rows_tensor = in.embedding->tensor;
  } else if (auto vs = config_vocab_size(ck); vs && *vs > 0) {
    rows = uint64_t(*vs);
    rows_what = "config.json vocab_size is " + std::to_string(*vs);
    rows_file = ck.config.file;
  }

  // The tokenizer must fit the embedding (smaller is normal: padded vocabularies).
  if (tk.known && rows && tk.max_id >= 0 && uint64_t(tk.max_id) >= *rows) {
    uint64_t beyond = tk.count_at_or_beyond(*rows);
    // Only special added tokens beyond the rows (gemma-3-1b-it, a text model, ships the image
    // placeholder <image_soft_token> at 262144 over 262144 rows): loaders do not check, and a
    // text prompt never contains them, so the model works unless a client sends that token.
    std::vector<std::pair<int64_t, std::string_view>> special_beyond;
    for (const auto& sa : tk.special_added)
      if (uint64_t(sa.first) >= *rows &&
          std::none_of(special_beyond.begin(), special_beyond.end(), [&](const auto& x) { return x.first == sa.first; }))
        special_beyond.push_back(sa);
    const bool only_special = !special_beyond.empty() && special_beyond.size() == beyond;
    std::string names;
    for (size_t k = 0; k < special_beyond.size() && k < 5; ++k)
      names += (k ? ", " : "") + q(special_beyond[k].second) + " = " + std::to_string(special_beyond[k].first);
    sink.add("TK014", only_special ? Severity::warning : Severity::error,
             tk.source + " has token ids up to " + std::to_string(tk.max_id) + " (" +
                 std::to_string(beyond) + " ids at or beyond " + std::to_string(*rows) + (only_special ? ", all of them special added tokens: " + names : "") +
                 ") but " + rows_what + "; expected every id < " + std::to_string(*rows),
             tk.source, rows_tensor,
             only_special ? "a prompt containing one of these special tokens indexes past the embedding (a crash or "
                            "garbage); text prompts never contain them, so only clients that send them are affected"
                          : "the tokenizer belongs to a larger model or tokens were added without resizing the "
                            "embedding; those ids index past the embedding table");
  }

  // Checks that read a side file which did not parse say so, rather than passing silently.
  for (const JsonFile* jf : {&ck.tokenizer_config, &ck.generation_config})
    if (jf->present && jf->error)
      sink.add("TK019", Severity::info,
               "not checked: the special tokens and token ids " + jf->file + " names, because the file did not parse (FS011)",
               jf->file, {}, "fix the file; its special tokens and ids are then checked against the tokenizer and the embedding");

  // Token ids named in config.json / generation_config.json.
  std::vector<std::tuple<std::string, std::string, json::Value>> ids;  // file, field, id
  auto gather = [&](const JsonFile& jf) {
    if (!jf.ok()) return;
    std::vector<std::pair<std::string, json::Value>> v;
    collect_ids(jf.value, "", v);
    if (const json::Value* t = text_section(jf.value)) {
      std::string prefix = t == jf.value.find("text_config") ? "text_config." :
                           t == jf.value.find("language_config") ? "language_config." : "llm_config.";
      collect_ids(*t, prefix, v);
    }
    for (auto& [field, id] : v) ids.emplace_back(jf.file, field, id);
  };
  gather(ck.config);
  gather(ck.generation_config);
  for (const auto& [file, field, id] : ids) {
    if (id.compare_integer(0) < 0) continue;  // -1 is a common "unset" placeholder
    const std::string text = id.integer_text();
    if (rows && id.compare_integer(*rows) >= 0) {
      sink.add("TK013", Severity::error,
               file + " " + field + " is " + text + " but " + rows_what +
                   "; expected an id < " + std::to_string(*rows),
               file, {},
               "generation would look up a row that does not exist (or never stop, for eos); the id "
               "belongs to another model's tokenizer");
    } else if (tk.known && (!id.is_int() || !tk.has_id(id.as_int()))) {
      sink.add("TK017", Severity::warning,
               file + " " + field + " is " + text + " but no token in " + tk.source +
                   " has that id (largest id " + std::to_string(tk.max_id) + ")",
               file, {}, "the id cannot be decoded to text; it probably belongs to another tokenizer");
    }
  }

  // Literal special tokens the chat template(s) emit must be single tokens. Only what the
  // parsed template can print counts (text outside tags and comments, printed string
  // constants): a marker mentioned in a {# comment #} never reaches a prompt (gpt-oss-20b's
  // template names <|final|> in one).
  if (tk.known) {
    for (const auto& lit : emitted_template_literals(ck)) {
      if (tk.has(lit.literal)) continue;
      const std::string where = lit.origin + ":" + std::to_string(lit.line) + ":" + std::to_string(lit.column);
      sink.add("TK015", Severity::error,
               "the chat template emits " + q(lit.literal) + " as a literal (" + where +
                   (lit.probe.empty() ? ", in a branch none of the load-time probes reached"
                                      : ", in the prompt of probe '" + lit.probe + "'") +
                   ") but " + tk.source + " has no such token; expected it to encode to one id",
               lit.file, {},
               "it will be split into several ordinary tokens (or encode to [] with a degenerate "
               "tokenizer), so the model never sees the marker it was trained on");
    }
  }
}

std::optional<EmbeddingInfo> find_embedding(const Checkpoint& ck, std::string_view preferred_prefix) {
  static const std::string_view suffixes[] = {
      "embed_tokens.weight", "embed_tokens.weight_packed", "embed_tokens.qweight", "wte.weight",
      "tok_embeddings.weight", "word_embeddings.weight", "embeddings.word_embeddings.weight",
      "embedding.weight"};
  static const std::string_view skip[] = {"per_layer", "vision", "audio", "mtp", "visual", "position",
                                          "draft", "speech", "image"};
  std::optional<Checkpoint::WeightTensor> best;  // a copy: the map yields its pairs by value
  std::string best_name;
  int best_rank = 1 << 30;
  for (const auto& [name, wt] : ck.weights()) {
    // Cheap necessary condition first (this loop sees every tensor of a 100k-tensor model):
    // every suffix above names its module embed_tokens, wte, tok_embeddings, word_embeddings
    // or embedding just before the final component.
    const char* last_dot = static_cast<const char*>(memrchr(name.data(), '.', name.size()));
    if (!last_dot) continue;
    std::string_view module(name.data(), static_cast<size_t>(last_dot - name.data()));
    if (const void* d = memrchr(module.data(), '.', module.size()))
      module.remove_prefix(static_cast<size_t>(static_cast<const char*>(d) - module.data()) + 1);
    if (module != "embed_tokens" && module != "wte" && module != "tok_embeddings" && module != "word_embeddings" &&
        module != "embedding")
      continue;
    int rank = -1;
    for (size_t i = 0; i < std::size(suffixes); ++i) {
      std::string_view s = suffixes[i];
      if (name.size() >= s.size() && std::string_view(name).substr(name.size() - s.size()) == s &&
          (name.size() == s.size() || name[name.size() - s.size() - 1] == '.')) {
        rank = int(i);
        break;
      }
    }
    if (rank < 0) continue;
    bool skipped = false;
    for (auto sk : skip)
      if (name.find(sk) != std::string::npos) skipped = true;
    if (skipped) continue;
    if (!preferred_prefix.empty() && !std::string_view(name).starts_with(preferred_prefix)) rank += 100;
    rank = rank * 1000 + int(std::min<size_t>(name.size(), 999));
    if (!wt.entry || wt.entry->shape.empty()) continue;
    if (rank < best_rank) {
      best_rank = rank;
      best = wt;
      best_name = name;
    }
  }
  if (!best) return std::nullopt;
  EmbeddingInfo e;
  e.rows = best->entry->shape[0];
  e.tensor = best_name;
  e.file = best->shard ? best->shard->file : std::string();
  return e;
}

}  // namespace ckpt::tok
