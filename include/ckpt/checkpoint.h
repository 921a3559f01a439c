// The Checkpoint: one immutable model of a checkpoint on disk, built by
// locate -> discover -> parse, and read by every check family.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ckpt/gguf.h"
#include "ckpt/json.h"
#include "ckpt/name_index.h"
#include "ckpt/pytorch.h"
#include "ckpt/safetensors.h"

namespace ckpt {

// Set when the model root is a snapshot inside a Hugging Face hub cache.
struct CacheInfo {
  std::filesystem::path cache_root;  // .../hub
  std::filesystem::path repo_dir;    // .../hub/models--org--name
  std::string repo_id;               // org/name
  std::string commit;                // snapshot directory name
  std::string revision;              // as requested ("main", a commit, ...); may be empty
};

struct RefInfo {
  std::string name;      // "main", "refs/pr/1" style names are stored as their path below refs/
  std::string content;   // raw file content
  bool well_formed = false;  // exactly 40 lowercase hex, no trailing newline
  bool snapshot_exists = false;
};

struct IncompleteBlob {
  std::string path;                    // relative to the repo dir (blobs/<etag>.incomplete) or root
  uint64_t size = 0;
  std::vector<std::string> used_by;    // snapshot entries (relative to the root) waiting for it
};

struct CacheState {
  std::vector<RefInfo> refs;
  std::vector<IncompleteBlob> incomplete;
};

// One directory entry below the model root (files only; directories are walked).
struct FileEntry {
  std::string rel;                  // relative to the root, '/'-separated
  std::filesystem::path abs;        // the path to open (only set when it is safe to open)
  uint64_t size = 0;                // of the target, for symlinks that resolve
  bool is_symlink = false;
  std::string link_text;            // readlink() text for symlinks
  bool dangling = false;            // symlink whose target does not exist
  bool escapes = false;             // symlink leading outside the root and its cache
  bool unreadable = false;          // could not be stat'ed or opened
  std::string error;                // OS error text when unreadable
  bool lfs_pointer = false;         // a Git LFS pointer stands where content should be
  bool readable() const { return !dangling && !escapes && !unreadable && !lfs_pointer; }
};

// A parsed JSON side file (config.json, tokenizer_config.json, ...).
struct JsonFile {
  std::string file;  // relative path; empty when absent
  bool present = false;
  json::Value value;
  std::optional<json::ParseError> error;
  std::vector<json::DuplicateKey> duplicates;
  bool ok() const { return present && !error; }
};

// A JSON side file kept as read from disk, parsed by the family that reads it. tokenizer.json
// is one: a 150k-token file holds ~300k strings, and building a json::Value of them cost more
// than every TK check together, so the TK family reads the bytes with simdjson itself.
struct RawJsonFile {
  std::string file;  // relative path; empty when absent
  bool present = false;
  std::string text;  // the bytes; the loader leaves simdjson's padding in capacity() after them
  std::optional<json::ParseError> error;  // the file could not be read (JSON errors are the reader's)
};

struct TextFile {
  std::string file;  // relative path
  std::string text;
  // Why the file cannot be used as loaders read it (unreadable, too large, not UTF-8 with
  // its line:column); empty when `text` is the file. Such a file is still listed, so no check
  // reports it as absent.
  std::string error;
  bool ok() const { return error.empty(); }
};

// A weight file of any container format. `header.tensors` is the format-neutral tensor table
// of that file (ckpt::TensorEntry rows: name, dtype, shape outermost first, byte range) that
// every check above the container reads. The rest of `header` is safetensors' framing, read
// only by the ST family; another format keeps its own parse beside it (a member per format,
// read only by that format's family) and sets header.file_size/parsed for the common checks.
struct Shard {
  std::string file;  // relative path of the weight file
  Format format = Format::safetensors;
  st::Header header;
  // GGUF files: the parsed header, KV pairs and tensor infos (null for safetensors).
  std::shared_ptr<const gguf::File> gguf;
};

// One GGUF model: a single file, or a split set `PREFIX-0000k-of-0000n.gguf`.
struct GgufModel {
  std::string name;               // the file, or PREFIX-*-of-0000n.gguf for a split set
  std::vector<uint32_t> shards;   // into Checkpoint::gguf_shards, in split order
  uint32_t split_count = 0;       // n as the file names say; 0 for a file not named as a split
  std::vector<std::string> missing;  // split files the names imply but the directory lacks
  // The first shard's file (the one holding the metadata), or nullptr.
  const Shard* first(const std::vector<Shard>& all) const { return shards.empty() ? nullptr : &all[shards.front()]; }
};

struct ShardIndex {
  JsonFile json;                                  // the raw document
  std::string schema_error;                       // non-empty when weight_map is unusable
  std::optional<uint64_t> total_size;             // metadata.total_size
  // weight_map, in file order: entry k maps tensor names[k] to shard files[file_of[k]].
  // names are views into copies packed in blocks (or into the whole text and unescaped
  // copies, on the general path) that `storage` keeps alive: no allocation per entry for
  // 100k-entry indexes. Shard file names are stored once each, as `files` in first-mention
  // order, so later stages compare integers, not 100k strings.
  std::vector<std::string_view> names;
  std::vector<uint32_t> file_of;
  // When the index was read after the shards (the one-pass reader), each name's position in
  // Checkpoint::tensors_by_name, or NameIndex::npos; a name a shard holds then views that
  // shard's copy instead of a copy of its own. Empty otherwise (finalize() looks names up).
  std::vector<uint32_t> positions;
  std::vector<std::string_view> files;
  std::shared_ptr<const void> storage;
  bool general_path = false;  // read whole by simdjson: the one-pass reader declined the spelling
  bool read_in_two = false;   // one-pass, by two threads that met inside weight_map

  size_t size() const { return names.size(); }
  bool empty() const { return names.empty(); }
  // Entry k as (tensor name, shard file).
  std::pair<std::string_view, std::string_view> entry(size_t k) const { return {names[k], files[file_of[k]]}; }
  void clear_entries() {
    names.clear();
    positions.clear();
    file_of.clear();
    files.clear();
  }
};

// Where a tensor lives: shard index into Checkpoint::shards and entry index into its header.
struct TensorLoc {
  uint32_t shard = 0;
  uint32_t entry = 0;
};

// Every tensor name of a checkpoint and the shards that store it, built by the loader once the
// shard headers are parsed (the index reader resolves names against it), or by
// Checkpoint::finalize() when absent or stale. A name's position is the global ordinal of its first copy: shard s's
// entry e is at (entries of shards before s) + e. The table keeps no per-name record of its own
// (names and hashes are read from the shards' entries): for a 100k-tensor checkpoint it is one
// 8-byte slot per bucket, and a side list for names stored more than once.
class TensorTable {
 public:
  // The locations of one name, in shard order (view: valid while the table is).
  class Locations {
   public:
    Locations() = default;
    Locations(TensorLoc first, const std::vector<TensorLoc>* more) : first_(first), more_(more), n_(1 + (more ? more->size() : 0)) {}
    size_t size() const { return n_; }
    bool empty() const { return n_ == 0; }
    const TensorLoc& front() const { return first_; }
    const TensorLoc& operator[](size_t i) const { return i == 0 ? first_ : (*more_)[i - 1]; }
    struct iterator {
      const Locations* owner;
      size_t i;
      const TensorLoc& operator*() const { return (*owner)[i]; }
      const TensorLoc* operator->() const { return &(*owner)[i]; }
      iterator& operator++() {
        ++i;
        return *this;
      }
      bool operator==(const iterator& o) const { return i == o.i; }
    };
    iterator begin() const { return {this, 0}; }
    iterator end() const { return {this, n_}; }

   private:
    TensorLoc first_{};
    const std::vector<TensorLoc>* more_ = nullptr;
    size_t n_ = 0;
  };

  // Indexes every entry of `shards` (which must outlive the table and not change).
  void build(const std::vector<Shard>& shards);
  // Whether the table was built from exactly these shards' entries.
  bool built_from(const std::vector<Shard>& shards) const;
  void clear() { *this = TensorTable(); }

  size_t size() const { return total_ - later_copies_; }  // distinct names
  size_t ordinals() const { return total_; }               // entries of all shards
  bool empty() const { return size() == 0; }
  // Position of `name` (NameIndex::npos when no shard holds it); hash = hash_name(name).
  uint32_t position(std::string_view name, uint64_t hash) const;
  uint32_t position(std::string_view name) const { return position(name, hash_name(name)); }
  size_t count(std::string_view name) const { return position(name) != NameIndex::npos; }
  Locations locations(uint32_t position) const;  // position of a name, as returned above
  Locations at(std::string_view name) const;     // throws std::out_of_range when absent
  // Whether the entry at a global ordinal is a later copy of a name (its position is another).
  bool is_later_copy(uint32_t ordinal) const { return !later_copy_.empty() && later_copy_[ordinal]; }
  TensorLoc loc_of(uint32_t ordinal) const;
  const st::TensorEntry& entry_at(uint32_t ordinal) const {
    const TensorLoc l = loc_of(ordinal);
    return bases_[l.shard][l.entry];
  }

  // For batches of lookups, in steps some iterations apart so each has landed before the next:
  // prefetch_bucket(hash); then candidate(hash), the position of the first slot whose tag
  // matches (NameIndex::npos if none; usually the answer, never a wrong one once its name is
  // compared), whose entry and name the caller prefetches; then compare, or call position().
  void prefetch_bucket(uint64_t hash) const { index_.prefetch(hash); }
  uint32_t candidate(uint64_t hash) const { return index_.first_candidate(hash); }

 private:
  auto name_at() const {
    return [this](uint32_t ordinal) { return entry_at(ordinal).name; };
  }
  std::vector<const st::TensorEntry*> bases_;  // each shard's entries (their buffers never move)
  std::vector<uint32_t> first_;                // first_[s]: ordinal of shard s's entry 0; one extra at the end
  // Ordinal -> shard in constant time: the shards holding entries, in order, and for each block
  // of 2^kBlockBits ordinals the first of them that reaches into the block (a lookup then steps
  // over at most the shards starting inside one block).
  static constexpr unsigned kBlockBits = 6;
  std::vector<uint32_t> filled_;       // shards with at least one entry
  std::vector<uint32_t> block_start_;  // per block: index into filled_
  NameIndex index_;
  size_t total_ = 0, later_copies_ = 0;
  std::vector<bool> later_copy_;  // by ordinal; empty when every name is stored once
  std::unordered_map<uint32_t, std::vector<TensorLoc>> more_;  // position -> its other copies
};

inline uint32_t TensorTable::position(std::string_view name, uint64_t hash) const {
  return index_.find(name, hash, name_at());
}

// Ollama's local store (`ckpt verify ollama:NAME[:TAG]`, or a path to a models directory):
// manifests/<host>/<namespace>/<model>/<tag> and blobs/sha256-<hex> (specs/gguf.md §7).
struct OllamaLayer {
  std::string media_type;   // application/vnd.ollama.image.model, ...template, ...params, ...
  std::string digest;       // "sha256:<64 hex>" as the manifest says
  int64_t size = -1;        // as the manifest says (-1 when absent or not an integer)
  std::string blob;         // relative path of the blob (empty when the digest is malformed)
  bool present = false;
  uint64_t actual_size = 0;
  bool is_config = false;   // the manifest's config blob
};

struct OllamaManifest {
  std::string file;         // relative to the models root
  std::string name;         // host/namespace/model:tag
  std::string error;        // unreadable, empty or not a manifest
  std::vector<OllamaLayer> layers;  // config first, then the layers in order
};

struct OllamaStore {
  std::vector<OllamaManifest> manifests;
};

class Checkpoint {
 public:
  std::string target;                    // what the user asked for
  std::filesystem::path root;            // canonical model root
  std::optional<CacheInfo> cache;
  CacheState cache_state;
  bool snapshot_missing = false;         // the requested ref names a snapshot that is not on disk
  // Why the file walk left entries out (LoadOptions::max_walk_entries / max_walk_depth), or
  // empty: every check below then saw only part of the directory (FS012).
  std::string walk_stopped;

  std::vector<FileEntry> files;          // every file below the root (bounded walk)
  std::vector<Shard> shards;             // every top-level safetensors file that could be opened
  // Every *.gguf file below the root (or the file named as the target and its split
  // siblings): Shards of Format::gguf whose header.tensors are the format-neutral rows, kept
  // in their own list so the weight map safetensors loaders see (weights(), and every family
  // reading it: CF, AR, QZ, TK, IX) is unchanged in a directory holding both formats, and
  // grouped into models (single files and split sets) that the GGUF families judge one by one.
  std::vector<Shard> gguf_shards;
  std::vector<GgufModel> gguf_models;
  std::optional<OllamaStore> ollama;     // set for an Ollama target; its model blobs are gguf_shards
  std::optional<ShardIndex> index;       // model.safetensors.index.json (or another *.safetensors.index.json)

  JsonFile config;                       // config.json
  JsonFile generation_config;            // generation_config.json
  JsonFile tokenizer_config;             // tokenizer_config.json
  RawJsonFile tokenizer;                 // tokenizer.json (parsed by the TK family)
  JsonFile chat_template_json;           // legacy chat_template.json
  // The other JSON side files a loader opens with Python's json (special_tokens_map.json,
  // added_tokens.json, preprocessor/processor configs, params.json, quantize_config.json,
  // adapter_config.json): parsed so a broken one is a finding, not a surprise at load time.
  std::vector<JsonFile> other_json;
  std::vector<TextFile> templates;       // chat_template.jinja, additional_chat_templates/*.jinja
  // Every file whose bytes are a pickle, a torch zip or legacy stream, .npy/.npz or another
  // archive holding one (decided by content, not name), and every PyTorch weight file even
  // when its bytes are none of those: statically scanned, never unpickled (PK).
  std::vector<pt::FileScan> pickle_scans;

  // All tensors by name, across every parsed shard (several locations = duplicates).
  // Reads the entries stored in `shards` (valid as long as this Checkpoint lives).
  TensorTable tensors_by_name;

  Checkpoint() = default;
  Checkpoint(Checkpoint&&) = default;  // moving keeps every internal pointer valid
  Checkpoint& operator=(Checkpoint&&) = default;
  Checkpoint(const Checkpoint&) = delete;  // a copy's lookup tables would point into the original
  Checkpoint& operator=(const Checkpoint&) = delete;

  const FileEntry* file(std::string_view rel) const;
  const Shard* shard(std::string_view rel) const;
  const st::TensorEntry& entry(const TensorLoc& loc) const {
    return shards[loc.shard].header.tensors[loc.entry];
  }

  // The tensors a loader will see: those the index maps (taken from the mapped shard when it
  // holds them), or every tensor of every shard when there is no index.
  struct WeightTensor {
    const st::TensorEntry* entry;
    const Shard* shard;
  };
  // In index order (shard order without an index); iterate as pairs (name, WeightTensor),
  // look up with find/at/count. Stores only the WeightTensor (the name is its entry's): 16
  // bytes per tensor, so iterators yield the pairs by value: copy what must outlive the loop
  // step (a pointer to a yielded pair dangles; its entry and shard pointers do not).
  class WeightMap {
   public:
    using value_type = std::pair<std::string_view, WeightTensor>;
    class const_iterator {
     public:
      using iterator_category = std::forward_iterator_tag;
      using value_type = WeightMap::value_type;
      using difference_type = std::ptrdiff_t;
      using pointer = void;
      using reference = value_type;
      struct Arrow {
        value_type v;
        const value_type* operator->() const { return &v; }
      };
      const_iterator() = default;
      explicit const_iterator(const WeightTensor* p) : p_(p) {}
      value_type operator*() const { return {p_->entry->name, *p_}; }
      Arrow operator->() const { return Arrow{**this}; }
      const_iterator& operator++() {
        ++p_;
        return *this;
      }
      const_iterator operator++(int) {
        const_iterator old = *this;
        ++p_;
        return old;
      }
      friend bool operator==(const_iterator a, const_iterator b) { return a.p_ == b.p_; }

     private:
      const WeightTensor* p_ = nullptr;
    };
    const_iterator begin() const { return const_iterator(items_.data()); }
    const_iterator end() const { return const_iterator(items_.data() + items_.size()); }
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    const_iterator find(std::string_view name) const;
    size_t count(std::string_view name) const { return find(name) != end(); }
    const WeightTensor& at(std::string_view name) const;

   private:
    friend class Checkpoint;
    uint32_t position(std::string_view name) const;  // NameIndex::npos when absent
    std::vector<WeightTensor> items_;
    // Built on the first lookup (most runs only iterate); check families run concurrently,
    // so the build happens under a once_flag (held by pointer: WeightMap must stay movable).
    mutable NameIndex by_name_;
    mutable std::unique_ptr<std::once_flag> index_once_ = std::make_unique<std::once_flag>();
  };
  const WeightMap& weights() const { return weights_; }
  // For each index weight_map entry (same order): its position in tensors_by_name, or
  // NameIndex::npos when no shard holds the name (ShardIndex::positions: resolved by the index
  // reader, or by finalize() for the general path and when shards were added).
  const std::vector<uint32_t>& index_positions() const {
    static const std::vector<uint32_t> none;
    return index ? index->positions : none;
  }
  const st::TensorEntry* weight(std::string_view name) const;

  // Totals for the summary line.
  uint64_t total_tensors() const;
  uint64_t total_bytes() const;  // sum of parsed shard file sizes

  void finalize();  // builds the lookup tables; called once by the loader

 private:
  WeightMap weights_;
  std::unordered_map<std::string_view, uint32_t> file_by_rel_, shard_by_file_;
};

struct LoadOptions {
  unsigned threads = 0;           // 0 = hardware concurrency
  uint32_t max_walk_entries = 100000;
  uint32_t max_walk_depth = 8;
  // The index is read through a buffer of this many bytes (at least 64), chunk by chunk.
  // Tests and the fuzz target use small ones to reach the chunk boundaries.
  size_t index_buffer_bytes = 256u << 10;
  // An index at least this large is read by two threads when more than one is allowed (0:
  // never). Tests set it low to reach the hand-over between them.
  uint64_t index_split_min_bytes = 1u << 20;
};

struct LoadError {
  std::string message;
};

// locate + discover + parse. A target that cannot be located (no such directory, repo not
// in the cache, unknown revision) is a LoadError (exit 2); everything wrong *inside* a located
// checkpoint becomes part of the model and is judged by the checks.
struct LoadResult {
  std::optional<Checkpoint> checkpoint;
  std::optional<LoadError> error;
};
LoadResult load_checkpoint(const std::string& target, const LoadOptions& opts = {});

// Hugging Face cache resolution (HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub).
std::filesystem::path hf_cache_root();
// "org/name" -> "models--org--name"
std::string repo_folder_name(std::string_view repo_id);
bool looks_like_repo_id(std::string_view target);
bool is_commit_hash(std::string_view s);  // 40 lowercase hex
// A path a file (an index's weight_map) may name: relative, no "..", no empty component,
// no backslash or drive letter, no NUL. Anything else is never opened.
bool is_safe_relative_path(std::string_view p);

}  // namespace ckpt
