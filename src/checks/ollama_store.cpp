// GG05x: Ollama's local store (specs/gguf.md §7): every manifest parses, every layer's blob
// exists with the manifest's size (and, with --deep, its sha256 digest); a model has a model
// layer; params/messages layers are JSON. The model, projector and adapter blobs are GGUF
// files judged by the other GGUF families like any .gguf; the template layer is a Go
// text/template, so only its presence and size are checked.
#include <array>
#include <cctype>

#include "checks/family.h"
#include "hub/hash.h"
#include "io/file.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 6> kCodes{{
    {"GG050", Severity::error, "Ollama manifest unreadable, empty or not a manifest"},
    {"GG051", Severity::error, "Ollama layer blob missing"},
    {"GG052", Severity::error, "Ollama blob size differs from the manifest (empty or truncated)"},
    {"GG053", Severity::error, "Ollama blob content differs from its digest (--deep)"},
    {"GG054", Severity::error, "Ollama manifest has no model layer"},
    {"GG055", Severity::warning, "Ollama params or messages layer is not JSON"},
}};

constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::string kind_of(const OllamaLayer& l) {
  constexpr std::string_view prefix = "application/vnd.ollama.image.";
  if (l.is_config) return "config";
  return l.media_type.rfind(prefix, 0) == 0 ? l.media_type.substr(prefix.size()) : l.media_type;
}

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  if (!ck.ollama) return;
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
}

}  // namespace

const FamilyDef kOllamaFamily{"GG (Ollama store)", kCodes, run};

}  // namespace ckpt::checks
