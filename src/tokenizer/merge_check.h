// The TK checks' merge checker and the pipeline that runs it beside the reader, with what they
// report into (Tally) and the token set they check against (Tokens). Internal to
// src/tokenizer/check.cpp, which reads tokenizer.json and turns the tallies into findings.
#pragma once
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ckpt/tokenizer.h"
#include "tokenizer/token_table.h"

namespace ckpt::tok {

namespace detail {

constexpr size_t kMaxExamples = 3;

// Collects offending items for one code: a count and the first few examples.
struct Tally {
  uint64_t count = 0;
  std::vector<std::string> examples;
  void add(std::string s) {
    ++count;
    if (examples.size() < kMaxExamples) examples.push_back(std::move(s));
  }
  // Same as add(make()), but the example is only built while it will be kept.
  template <class F>
  void add_with(F&& make) {
    ++count;
    if (examples.size() < kMaxExamples) examples.push_back(make());
  }
  // Appends a later part of the same list (its items come after all of ours in file order):
  // the count and examples a single pass over both parts would have kept.
  void append(const Tally& later) {
    count += later.count;
    for (const auto& e : later.examples)
      if (examples.size() < kMaxExamples) examples.push_back(e);
  }
  std::string list() const {
    std::string s;
    for (size_t i = 0; i < examples.size(); ++i) s += (i ? ", " : "") + examples[i];
    if (count > examples.size()) s += ", ... (" + std::to_string(count) + " in all)";
    return s;
  }
};

inline std::string q(std::string_view s) {
  std::string o = "'";
  o.append(s.substr(0, 80));
  if (s.size() > 80) o += "...";
  return o + "'";
}

// All tokens the tokenizer defines: model vocabulary plus added tokens.
struct Tokens {
  bool known = false;  // a token set was read (tokenizer.json or tokenizer.model)
  std::string source;  // file the tokens come from
  ModelType type = ModelType::Unknown;
  bool byte_level = false;
  TokenTable by_text;        // vocab + added
  // The ids: those of a vocabulary object's entries are read from the table (no second list of
  // 150k ids to write); the others (Unigram positions, added tokens, SentencePiece) are here.
  bool table_ids = false;
  std::vector<int64_t> ids;  // sorted and unique after finish()
  int64_t max_id = -1;
  std::vector<std::string> owned;  // backing store for SentencePiece pieces
  // added_tokens marked "special": true (id, content), for TK014's judgement of ids beyond the
  // embedding: a multimodal placeholder no text prompt contains is not a broken tokenizer.
  std::vector<std::pair<int64_t, std::string_view>> special_added;

  bool has(std::string_view s) const { return by_text.contains(s); }
  void note_id(int64_t id) {
    ids.push_back(id);
    max_id = std::max(max_id, id);
  }
  void finish() {
    // Vocabularies list ids in order and added tokens append a few: sort only the unsorted tail,
    // and merge a short one in place (no second buffer of every id).
    auto tail = std::is_sorted_until(ids.begin(), ids.end());
    size_t head = size_t(tail - ids.begin());
    std::sort(tail, ids.end());
    if (ids.size() - head <= 16) {
      for (size_t k = head; k < ids.size(); ++k)
        std::rotate(std::upper_bound(ids.begin(), ids.begin() + k, ids[k]), ids.begin() + k, ids.begin() + k + 1);
    } else {
      std::inplace_merge(ids.begin(), ids.begin() + head, ids.end());
    }
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  bool has_id(int64_t id) const {
    if (std::binary_search(ids.begin(), ids.end(), id)) return true;
    if (table_ids)  // a few lookups per checkpoint (the config's special ids): a scan is fine
      for (const auto& e : by_text.entries())
        if (e.id == id) return true;
    return false;
  }
  // How many distinct ids are at or beyond `rows` (TK014; only computed when some are).
  uint64_t count_at_or_beyond(uint64_t rows) const {
    std::vector<int64_t> beyond;
    for (int64_t id : ids)
      if (uint64_t(id) >= rows) beyond.push_back(id);
    if (table_ids)
      for (const auto& e : by_text.entries())
        if (e.id >= 0 && uint64_t(e.id) >= rows) beyond.push_back(e.id);
    std::sort(beyond.begin(), beyond.end());
    return uint64_t(std::unique(beyond.begin(), beyond.end()) - beyond.begin());
  }
};

// The BPE merges, fed in file order: well-formed, made of existing tokens, producing existing
// tokens, spelled in the byte-level alphabet when the pre-tokenizer is ByteLevel. Merges are
// checked in batches: the two parts' slots of a whole batch are prefetched before the first
// lookup, so their cache misses overlap. A merge's result is usually the vocabulary entry after
// the previous merge's result (writers number tokens in merge order): that guess is checked
// first, with no hashing and no random access.
// What a merge checker found, one tally per code.
struct MergeTallies {
  Tally malformed, missing_part, missing_result, not_byte_level;

  bool any() const { return malformed.count || missing_part.count || missing_result.count || not_byte_level.count; }
  // The tallies of merges checked after all of these (see Tally::append).
  void append(const MergeTallies& later) {
    malformed.append(later.malformed);
    missing_part.append(later.missing_part);
    missing_result.append(later.missing_result);
    not_byte_level.append(later.not_byte_level);
  }
};

class MergeChecker : public MergeTallies {
 public:
  // `spelling`: check the byte-level spelling (only reported when the pre-tokenizer is ByteLevel).
  MergeChecker(const Tokens& tk, bool spelling) : tk_(tk), spelling_(spelling) {}

  // A checker of the same tokens and options, for another thread.
  MergeChecker sibling() const { return MergeChecker(tk_, spelling_); }
  // What this checker found so far, leaving it with empty tallies.
  MergeTallies take_tallies() { return std::exchange(static_cast<MergeTallies&>(*this), MergeTallies{}); }

  // A merge written as one string, "left right".
  void add_string(size_t i, std::string_view s) {
    size_t sp = s.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= s.size() ||
        s.find(' ', sp + 1) != std::string_view::npos) {
      malformed.add_with([&] { return "#" + std::to_string(i) + " " + q(s); });
      return;
    }
    add(i, s.substr(0, sp), s.substr(sp + 1));
  }
  void add(size_t i, std::string_view a, std::string_view b) {
    Merge& m = batch_[pending_++];
    m = Merge{i, a, b, tk_.by_text.key(a), tk_.by_text.key(b)};
    tk_.by_text.prefetch(m.ka);
    tk_.by_text.prefetch(m.kb);
    if (pending_ == kBatch) flush();
  }
  void flush() {
    // The batch's slots were prefetched as the merges came in; now their entries, then the
    // entries' texts, so that the lookups below find each step cached.
    const TokenTable& table = tk_.by_text;
    for (size_t k = 0; k < pending_; ++k) {
      table.prefetch_entry(batch_[k].ka, batch_[k].a.size());
      table.prefetch_entry(batch_[k].kb, batch_[k].b.size());
    }
    for (size_t k = 0; k < pending_; ++k) {
      table.prefetch_text(batch_[k].ka, batch_[k].a.size());
      table.prefetch_text(batch_[k].kb, batch_[k].b.size());
    }
    for (size_t k = 0; k < pending_; ++k) {
      const Merge& m = batch_[k];
      const size_t i = m.i;
      std::string_view a = m.a, b = m.b;
      const uint32_t ia = tk_.by_text.index_of(a, m.ka), ib = tk_.by_text.index_of(b, m.kb);
      if (spelling_ && (!spelled(ia, a) || !spelled(ib, b)))
        not_byte_level.add_with([&] { return "#" + std::to_string(i) + " " + q(a) + " + " + q(b); });
      const bool ha = ia != TokenTable::npos && tk_.by_text.entry(ia).id >= 0,
                 hb = ib != TokenTable::npos && tk_.by_text.entry(ib).id >= 0;
      if (!ha || !hb) {
        missing_part.add_with([&] {
          return "#" + std::to_string(i) + " " + q(a) + " + " + q(b) + " (" + (!ha ? q(a) : q(b)) + " not in vocab)";
        });
        continue;
      }
      if (tk_.by_text.token_at_is(next_result_, a, b)) {
        ++next_result_;
        continue;
      }
      joined_.assign(a);
      joined_.append(b);
      uint32_t index = tk_.by_text.index_of(joined_);
      if (index != TokenTable::npos && tk_.by_text.entry(index).id >= 0)
        next_result_ = index + 1;
      else
        missing_result.add_with([&] { return "#" + std::to_string(i) + " " + q(a) + " + " + q(b) + " -> " + q(joined_); });
    }
    pending_ = 0;
  }

 private:
  struct Merge {
    size_t i;
    std::string_view a, b;
    TokenKey ka, kb;
  };
  // Whether `s` (the text of table entry `index`, or of no entry when npos) is spelled in the
  // byte-level alphabet. A token is a part of many merges, so each entry's answer is worked
  // out once.
  bool spelled(uint32_t index, std::string_view s) {
    if (index == TokenTable::npos) return spelled_in_byte_level(s);
    if (spelled_state_.size() <= index) spelled_state_.resize(tk_.by_text.entries().size(), 0);
    uint8_t& st = spelled_state_[index];
    if (st == 0) st = spelled_in_byte_level(s) ? 1 : 2;
    return st == 1;
  }
  static constexpr size_t kBatch = 16;
  const Tokens& tk_;
  bool spelling_;
  Merge batch_[kBatch];
  size_t pending_ = 0;
  uint32_t next_result_ = TokenTable::npos;
  std::string joined_;
  std::vector<uint8_t> spelled_state_;  // per table entry: 0 not yet known, 1 spelled, 2 not
};

// The merges checked on other threads while the scanner reads on: the scanner hands over
// chunks of merges (views into the file or the section arena, which never move) through a
// bounded queue to two consumers. Each checks whole chunks with its own MergeChecker, and
// what a chunk found is kept by its position in the file; finish() appends the chunks' tallies
// in file order, so the counts and the examples (the first few in file order) are what a
// serial read reports. (A checker's guess of the next result is only a shortcut: a chunk
// starting without it finds the same.) Reading the list and checking it cost about the same on
// a large vocabulary (Qwen3.5's 248k tokens, ~600 instructions per merge to check), so the
// checking, after the vocabulary the longest chain of the run, is split.

class MergePipeline {
 public:
  explicit MergePipeline(MergeChecker& checker) : checker_(checker) {
    fill_.reserve(kChunk);
    for (size_t k = 0; k < kConsumers; ++k) workers_[k] = std::thread([this] { consume(); });
  }
  MergePipeline(const MergePipeline&) = delete;
  MergePipeline& operator=(const MergePipeline&) = delete;
  ~MergePipeline() { stop_consumers(); }  // on the scanner's exception path: drop what it threw

  void push_string(size_t i, std::string_view s) { push({i, s, {}, false}); }
  void push_pair(size_t i, std::string_view a, std::string_view b) { push({i, a, b, true}); }
  // Hands over the last chunk, waits for the consumers, rethrows what they threw, and leaves
  // in the checker the tallies of every chunk in file order.
  void finish() {
    if (!workers_[0].joinable()) return;
    hand_over();
    stop_consumers();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    for (const auto& found : found_)
      if (found) checker_.append(*found);
  }

 private:
  struct Item {
    size_t i;
    std::string_view a, b;
    bool pair;
  };
  struct Chunk {
    size_t index;  // position in the file, in chunks
    std::vector<Item> items;
  };
  static constexpr size_t kConsumers = 2;
  static constexpr size_t kChunk = 4096, kMaxQueued = 8;  // at most ~1.3 MB of items in flight

  // Lets the consumers drain the queue and end, and waits for them.
  void stop_consumers() {
    if (!workers_[0].joinable()) return;
    {
      std::lock_guard lk(m_);
      done_ = true;
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void push(const Item& it) {
    fill_.push_back(it);
    if (fill_.size() == kChunk) hand_over();
  }
  void hand_over() {
    if (fill_.empty()) return;
    std::vector<Item> next;
    {
      std::unique_lock lk(m_);
      room_.wait(lk, [&] { return queue_.size() < kMaxQueued; });
      queue_.push_back(Chunk{found_.size(), std::move(fill_)});
      found_.emplace_back();  // the chunk's findings, if any, land here
      if (!spare_.empty()) {
        next = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    ready_.notify_one();
    fill_ = std::move(next);
    fill_.clear();
    fill_.reserve(kChunk);
  }
  void consume() {
    MergeChecker mine = checker_.sibling();
    bool failed = false;
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock lk(m_);
        ready_.wait(lk, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) break;
        chunk = std::move(queue_.front());
        queue_.pop_front();
      }
      room_.notify_one();
      std::optional<MergeTallies> found;
      if (!failed) {
        try {
          for (const Item& it : chunk.items) it.pair ? mine.add(it.i, it.a, it.b) : mine.add_string(it.i, it.a);
          mine.flush();
          if (mine.any()) found = mine.take_tallies();
        } catch (...) {
          std::lock_guard lk(m_);
          if (!failure_) failure_ = std::current_exception();
          failed = true;  // keep draining so the scanner never waits on a full queue
        }
      }
      chunk.items.clear();
      std::lock_guard lk(m_);
      if (found) found_[chunk.index] = std::move(found);
      spare_.push_back(std::move(chunk.items));
    }
  }

  MergeChecker& checker_;
  std::vector<Item> fill_;
  std::mutex m_;
  std::condition_variable ready_, room_;
  std::deque<Chunk> queue_;
  std::vector<std::vector<Item>> spare_;
  std::vector<std::optional<MergeTallies>> found_;  // by chunk: what it found (empty: nothing)
  bool done_ = false;
  std::exception_ptr failure_;
  std::thread workers_[kConsumers];  // last: started once every member above exists
};

}  // namespace detail
}  // namespace ckpt::tok
