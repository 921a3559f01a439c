// GG05x: Ollama's local store (specs/gguf.md §7): every manifest parses, every layer's blob
// exists with the manifest's size (and, with --deep, its sha256 digest); a model has a model
// layer; params/messages layers are JSON. The model, projector and adapter blobs are GGUF
// files judged by the other GGUF families like any .gguf; the template layer is a Go
// text/template, so only its presence and size are checked.
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "checks/family.h"
#include "checks/util.h"
#include "hub/hash.h"
#include "io/file.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 9> kCodes{{
    {"GG050", Severity::error, "Ollama manifest unreadable, empty or not a manifest"},
    {"GG051", Severity::error, "Ollama layer blob missing"},
    {"GG052", Severity::error, "Ollama blob size differs from the manifest (empty or truncated)"},
    {"GG053", Severity::error, "Ollama blob content differs from its digest (--deep)"},
    {"GG054", Severity::error, "Ollama manifest has no model layer"},
    {"GG055", Severity::warning, "Ollama params or messages layer is not JSON"},
    {"GG056", Severity::error, "Ollama layer only partially downloaded (unfinished pull)"},
    {"GG057", Severity::info, "Ollama partial download of a blob no verified layer names"},
    {"GG058", Severity::info, "Ollama blobs no manifest references (orphans)"},
}};

constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string kind_of(const OllamaLayer& l) {
  constexpr std::string_view prefix = "application/vnd.ollama.image.";
  if (l.is_config) return "config";
  return l.media_type.rfind(prefix, 0) == 0 ? l.media_type.substr(prefix.size()) : l.media_type;
}


// blobs/ as Ollama's downloader leaves it (specs/gguf.md §7): a finished blob is
// sha256-<64 hex>; a pull in progress or interrupted writes sha256-<hex>-partial and its
// per-chunk state files sha256-<hex>-partial-N. Bounded: a store holds hundreds of blobs.
struct BlobDir {
  std::map<std::string, uint64_t> complete;          // digest hex -> bytes
  struct Partial {
    uint64_t bytes = 0;       // every -partial* file together
    bool data = false;        // sha256-<hex>-partial itself exists (the data, pre-sized to the blob)
    int parts = 0;            // -partial-N part state files
  };
  std::map<std::string, Partial> partial;  // digest hex -> its partial files
  bool listed = false;
};

bool is_hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

BlobDir list_blobs(const std::filesystem::path& root) {
  BlobDir d;
  std::error_code ec;
  size_t seen = 0;
  for (auto it = std::filesystem::directory_iterator(root / "blobs", ec); !ec && it != std::filesystem::directory_iterator() && seen < 100000;
       it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (name.rfind("sha256-", 0) != 0 || name.size() < 7 + 64 || !is_hex64(std::string_view(name).substr(7, 64))) continue;
    std::error_code sec;
    if (!it->is_regular_file(sec)) continue;
    const uint64_t size = it->file_size(sec);
    std::string hex = name.substr(7, 64);
    for (auto& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string_view rest = std::string_view(name).substr(7 + 64);
    if (rest.empty()) {
      d.complete[hex] = sec ? 0 : size;
    } else if (rest == "-partial" || rest.rfind("-partial-", 0) == 0) {
      auto& p = d.partial[hex];
      p.bytes += sec ? 0 : size;
      if (rest == "-partial") p.data = true;
      else ++p.parts;
    }
  }
  d.listed = !ec;
  return d;
}

// Every manifest Ollama would list (manifests/*/*/*/*), to tell whether the target is the
// whole store: only then is a blob no loaded manifest references an orphan.
size_t manifests_on_disk(const std::filesystem::path& root) {
  std::error_code ec;
  size_t n = 0, seen = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(root / "manifests", std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator() && seen < 10000; it.increment(ec), ++seen) {
    if (it.depth() == 3 && !it->is_directory(ec)) ++n;
    if (it.depth() >= 3 && it->is_directory(ec)) it.disable_recursion_pending();
  }
  return n;
}

std::string hex_of(const OllamaLayer& l) {
  if (l.digest.size() != 7 + 64) return {};
  std::string hex = l.digest.substr(7);
  for (auto& c : hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return hex;
}

void check_blob_dir(const Checkpoint& ck, const BlobDir& d, FindingSink& out) {
  if (!d.listed) return;
  std::set<std::string> referenced;
  for (const auto& m : ck.ollama->manifests)
    for (const auto& l : m.layers)
      if (auto h = hex_of(l); !h.empty()) referenced.insert(h);
  // Partials of no loaded layer: a pull of another model (or of this one before an update) that
  // stopped; they take disk space and `ollama pull` resumes them.
  uint64_t stray_bytes = 0;
  size_t stray = 0;
  std::string example;
  for (const auto& [hex, p] : d.partial)
    if (!referenced.count(hex)) {
      stray_bytes += p.bytes;
      if (++stray == 1) example = "blobs/sha256-" + hex + "-partial";
    }
  if (stray)
    out.add("GG057", Severity::info,
            std::to_string(stray) + " interrupted download(s) in blobs/ that no verified layer names (" + bytes_str(stray_bytes) + ")",
            example, "", "an `ollama pull` that stopped (the -partial file is pre-sized to the full blob); pulling that model again resumes it, and `ollama serve` deletes stale partials at start-up unless OLLAMA_NOPRUNE is set");
  // Orphans: only when every manifest on disk was loaded (the target is the models directory).
  if (ck.ollama->manifests.size() != manifests_on_disk(ck.root)) return;
  uint64_t orphan_bytes = 0;
  size_t orphans = 0;
  std::string first;
  for (const auto& [hex, size] : d.complete)
    if (!referenced.count(hex)) {
      orphan_bytes += size;
      if (++orphans == 1) first = "blobs/sha256-" + hex;
    }
  if (orphans)
    out.add("GG058", Severity::info,
            std::to_string(orphans) + " blob(s) no manifest references, " + bytes_str(orphan_bytes) + " in all", first, "",
            "disk space no model uses; `ollama serve` deletes unreferenced blobs older than an hour at start-up unless OLLAMA_NOPRUNE is set or a manifest is corrupt");
}

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  if (!ck.ollama) return;
  const BlobDir blobs = list_blobs(ck.root);
  for (const auto& m : ck.ollama->manifests) {
    if (!m.error.empty()) {
      out.add("GG050", Severity::error, m.name + ": " + m.error, m.file, "",
              "Ollama fails every pull and list with \"EOF\" on a corrupt manifest (ollama#7393); remove the model and pull it again");
      continue;
    }
    bool has_model = false;
    for (const auto& l : m.layers) {
      const std::string kind = kind_of(l);
      has_model |= kind == "model";
      const std::string what = "layer " + kind + " (" + l.media_type + ", " + l.digest + ")";
      if (l.blob.empty()) {
        out.add("GG051", Severity::error, m.name + ": " + what + " has no usable sha256 digest", m.file, "",
                "the manifest is damaged; pull the model again");
        continue;
      }
      if (!l.present) {
        if (auto p = blobs.partial.find(hex_of(l)); p != blobs.partial.end()) {
          out.add("GG056", Severity::error,
                  m.name + ": " + what + " is only partially downloaded (" +
                      (p->second.data ? std::string("a -partial data file") : std::string("no -partial data file")) + " and " +
                      std::to_string(p->second.parts) + " part file(s), " + bytes_str(p->second.bytes) + " in all" +
                      (l.size >= 0 ? "; the manifest says " + std::to_string(l.size) : std::string()) + "): an unfinished pull",
                  l.blob + "-partial", "", "`ollama pull " + m.name + "` resumes the download; the model cannot load until it completes");
          continue;
        }
        out.add("GG051", Severity::error, m.name + ": the blob of " + what + " is missing", l.blob, "",
                "an interrupted pull or a pruned store; `ollama pull " + m.name + "` fetches it again");
        continue;
      }
      if (l.size >= 0 && static_cast<uint64_t>(l.size) != l.actual_size) {
        const bool empty = l.actual_size == 0;
        out.add("GG052", Severity::error,
                m.name + ": the blob of " + what + " is " + (empty ? std::string("empty (0 bytes)") : std::to_string(l.actual_size) + " bytes") +
                    " but the manifest says " + std::to_string(l.size),
                l.blob, "",
                empty ? "an empty blob (its digest would be sha256:" + std::string(kEmptySha256).substr(0, 12) +
                            "..., ollama#9846); Ollama does not re-verify existing blobs on pull, so delete it and pull again"
                      : "a truncated blob (ollama#143): Ollama treats an existing blob as a cache hit and never re-checks it; delete it and pull again");
        continue;
      }
      if (opts.deep) {
        std::string err;
        std::string want = l.digest.substr(7);
        for (auto& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const std::string got = hub::detail::hash_file(ck.root / l.blob, hub::detail::EtagKind::sha256, l.actual_size, &err);
        if (got.empty())
          out.add("GG053", Severity::error, m.name + ": cannot hash the blob of " + what + ": " + err, l.blob);
        else if (got != want)
          out.add("GG053", Severity::error, m.name + ": the blob of " + what + " hashes to sha256:" + got + ", not its digest", l.blob, "",
                  "the blob is corrupt; delete it and pull again (Ollama re-verifies only blobs it downloads)");
      }
      if (kind == "params" || kind == "messages") {
        std::string text;
        if (io::read_file(ck.root / l.blob, 1u << 20, text).empty()) {
          auto parsed = json::parse(text);
          if (parsed.error)
            out.add("GG055", Severity::warning,
                    m.name + ": the " + kind + " layer is not JSON (" + parsed.error->message + " at " + std::to_string(parsed.error->line) +
                        ":" + std::to_string(parsed.error->column) + ")",
                    l.blob, "", "Ollama decodes it as JSON when the model is loaded");
        }
      }
    }
    if (!has_model)
      out.add("GG054", Severity::error, m.name + ": the manifest has no application/vnd.ollama.image.model layer", m.file, "",
              "nothing to run; pull the model again");
  }
  check_blob_dir(ck, blobs, out);
}

}  // namespace

const FamilyDef kOllamaFamily{"GG (Ollama store)", kCodes, run};

}  // namespace ckpt::checks
