// FS: files and cache state — what is on disk before any format is parsed.
#include <array>

#include "checks/family.h"
#include "checks/util.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 13> kCodes{{
    {"FS001", Severity::error, "broken symlink: the file it stands for is not in the cache"},
    {"FS002", Severity::error, "interrupted download: an .incomplete file is present"},
    {"FS003", Severity::error, "Git LFS pointer file in place of the real content"},
    {"FS004", Severity::error, "zero-byte weight or tokenizer file"},
    {"FS005", Severity::error, "cache ref points at a snapshot that is not on disk"},
    {"FS006", Severity::error, "symlink leads outside the model directory and its cache"},
    {"FS007", Severity::error, "malformed cache ref (not exactly 40 hex characters)"},
    {"FS008", Severity::error, "no weight files found"},
    {"FS009", Severity::info, "weights in a format this version does not verify"},
    {"FS010", Severity::error, "file cannot be read"},
    {"FS011", Severity::error, "side file does not parse as the loaders read it"},
    {"FS012", Severity::warning, "file walk stopped early: part of the directory was not checked"},
    // Raised by batch verify (tools/ckpt/verify_batch.cpp) for a listed target the loader cannot
    // locate or read; a single-target run exits 2 instead.
    {"FS013", Severity::error, "listed target cannot be located or read (batch verify)"},
}};

// A PyTorch checkpoint the PK and PT families read (its tensors and imports are verified).
bool read_as_pytorch(const Checkpoint& ck, std::string_view rel) {
  for (const auto& s : ck.pickle_scans)
    if (s.file == rel && s.weights_read) return true;
  return false;
}

// What a loader does when it meets this side file broken (the FS011 hint).
std::string broken_side_file_effect(std::string_view rel) {
  if (rel == "tokenizer_config.json" || rel == "special_tokens_map.json" || rel == "added_tokens.json")
    return "AutoTokenizer.from_pretrained (transformers, vLLM, SGLang, TGI) raises on it, so the server does not start";
  if (rel == "generation_config.json")
    return "transformers and vLLM catch the error and silently fall back to defaults: the eos ids and sampling "
           "settings in it are lost (a Llama-3 instruct model then never stops at <|eot_id|>)";
  if (rel == "chat_template.json" || rel == "processor_config.json" || rel.find("preprocessor_config") != std::string_view::npos)
    return "AutoProcessor.from_pretrained raises on it, so a multimodal server does not start";
  if (rel == "params.json") return "Meta-format loaders (llama reference code, vLLM --load-format mistral) fail on it";
  if (rel == "quantize_config.json" || rel == "quant_config.json")
    return "GPTQ/AWQ loaders that read it fail, or load with defaults that do not match the tensors";
  if (rel == "adapter_config.json") return "PEFT and vLLM's LoRA loader fail on it";
  if (rel.size() > 6 && rel.substr(rel.size() - 6) == ".jinja")
    return "transformers reads chat templates as UTF-8 text; the tokenizer load fails on it";
  return "loaders that read it fail";
}

void report_side_file(const std::string& file, const std::optional<json::ParseError>& error, const Checkpoint& ck,
                      FindingSink& out) {
  if (!error) return;
  if (const FileEntry* f = ck.file(file); f && !f->readable()) return;  // FS001/FS003/FS006/FS010 say why
  const auto& e = *error;
  std::string where = e.line ? file + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) + " (byte " +
                                   std::to_string(e.offset) + "): "
                             : file + ": ";
  out.add("FS011", Severity::error, where + e.message + "; expected a document Python's json.load reads", file, "",
          broken_side_file_effect(file));
}

bool is_weight_file(std::string_view rel) {
  for (auto ext : {".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz"})
    if (ends_with(rel, ext)) return true;
  return false;
}

bool is_essential_side_file(std::string_view rel) {
  return rel == "tokenizer.json" || rel == "tokenizer.model" || rel == "config.json" ||
         ends_with(rel, ".safetensors.index.json");
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  const std::string cache_note = ck.cache ? " (cache " + ck.cache->repo_dir.string() + ")" : "";

  for (const auto& ref : ck.cache_state.refs) {
    std::string commit = ref.content;
    bool trailing_ws = false;
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) {
      commit.pop_back();
      trailing_ws = true;
    }
    if (!ref.well_formed) {
      std::string what = trailing_ws && is_commit_hash(commit) ? "holds a commit followed by a newline/whitespace"
                                                                : "holds \"" + ref.content.substr(0, 60) + "\"";
      out.add("FS007", Severity::error,
              "refs/" + ref.name + " " + what + "; exactly 40 lowercase hex characters with no trailing newline were expected",
              "", "",
              "huggingface_hub reads refs without stripping, so offline lookups of '" + ref.name +
                  "' fail; rewrite the file with `printf %s <commit> > refs/" + ref.name + "`");
    }
    if (is_commit_hash(commit) && !ref.snapshot_exists) {
      out.add("FS005", Severity::error,
              "refs/" + ref.name + " points at commit " + commit + " but snapshots/" + commit + " does not exist" + cache_note,
              "", "",
              "huggingface_hub writes the ref before downloading any file; an interrupted download leaves it dangling. "
              "Re-run the download for that revision.");
    }
  }
  if (ck.snapshot_missing) return;  // nothing below the root to look at

  for (const auto& inc : ck.cache_state.incomplete) {
    std::string who = inc.used_by.empty() ? "no snapshot entry links to it yet"
                                          : "it is the blob behind " + list_names(inc.used_by);
    out.add("FS002", Severity::error,
            inc.path + " (" + bytes_str(inc.size) + ") is a partial download; " + who + cache_note, "", "",
            "a download was interrupted; resume it (`ckpt fetch` resumes .incomplete blobs) or delete the file");
  }

  bool any_verified_weights = false, any_pytorch = false;
  std::vector<std::string> other_weights;
  for (const auto& f : ck.files) {
    if (ends_with(f.rel, ".incomplete")) {
      out.add("FS002", Severity::error, "partial download left in the model directory (" + bytes_str(f.size) + ")", f.rel, "",
              "a download was interrupted; resume it or delete the file before serving");
      continue;
    }
    if (starts_with(f.rel, ".cache/")) continue;  // huggingface_hub's local-dir bookkeeping
    if (f.escapes) {
      out.add("FS006", Severity::error,
              "symlink to \"" + f.link_text + "\" leads outside the model directory" +
                  (ck.cache ? std::string(" and its cache") : std::string()) + "; ckpt did not follow it",
              f.rel, "", "copy the file into the model directory, or verify the directory it really lives in");
      continue;
    }
    if (f.dangling) {
      std::string etag = std::filesystem::path(f.link_text).filename().string();
      std::string partial;
      for (const auto& inc : ck.cache_state.incomplete)
        for (const auto& u : inc.used_by)
          if (u == f.rel) partial = "; its download is incomplete (" + inc.path + ", " + bytes_str(inc.size) + ")";
      out.add("FS001", Severity::error, "symlink to \"" + f.link_text + "\" is broken: the target does not exist" + partial,
              f.rel, "", "the blob was never fully downloaded or was deleted; re-download the file");
      continue;
    }
    if (f.unreadable) {
      out.add("FS010", Severity::error, "cannot read the file: " + f.error, f.rel, "", "check permissions");
      continue;
    }
    if (f.lfs_pointer) {
      out.add("FS003", Severity::error,
              "a " + std::to_string(f.size) + "-byte Git LFS pointer stands where the real file should be", f.rel, "",
              "the repository was cloned without git-lfs; run `git lfs pull` or download with a hub client");
      continue;
    }
    if (ends_with(f.rel, ".safetensors") || ends_with(f.rel, ".gguf")) any_verified_weights = true;
    if (f.size == 0 && (is_weight_file(f.rel) || is_essential_side_file(f.rel))) {
      out.add("FS004", Severity::error, "the file is empty (0 bytes)", f.rel, "",
              "a failed or interrupted copy; re-download the file");
      continue;
    }
    if (!ends_with(f.rel, ".safetensors") && !ends_with(f.rel, ".gguf") && is_weight_file(f.rel)) {
      if (read_as_pytorch(ck, f.rel)) any_pytorch = true;
      else other_weights.push_back(f.rel);
    }
  }
  // Side files that exist but cannot be used are findings, never "absent" (config.json is
  // CF002's, tokenizer.json TK002's, the index IX's).
  report_side_file(ck.tokenizer_config.file, ck.tokenizer_config.error, ck, out);
  report_side_file(ck.generation_config.file, ck.generation_config.error, ck, out);
  report_side_file(ck.chat_template_json.file, ck.chat_template_json.error, ck, out);
  for (const auto& jf : ck.other_json) report_side_file(jf.file, jf.error, ck, out);
  for (const auto& t : ck.templates) {
    if (t.ok()) continue;
    if (const FileEntry* f = ck.file(t.file); f && !f->readable()) continue;
    out.add("FS011", Severity::error, t.file + ": " + t.error, t.file, "", broken_side_file_effect(t.file));
  }

  bool any_unusable_weight = false;
  for (const auto& f : ck.files)
    if (is_weight_file(f.rel) && !f.readable()) any_unusable_weight = true;
  if (!other_weights.empty()) {
    out.add("FS009", Severity::info,
            "weights in formats ckpt does not verify yet: " + list_names(other_weights), "", "",
            "pickle-based .bin/.pt files can run code when loaded; prefer safetensors");
  }
  if (!ck.walk_stopped.empty())
    out.add("FS012", Severity::warning, "the file walk stopped early: " + ck.walk_stopped, "", "",
            "ckpt bounds the walk against hostile trees; what lies past the limit was not checked. Point ckpt at the "
            "model directory itself");
  if (!any_verified_weights && !any_pytorch && other_weights.empty() && !any_unusable_weight && !ck.index && !ck.ollama) {
    out.add("FS008", Severity::error, "no weight files (*.safetensors, *.bin, *.gguf, ...) in " + ck.root.string(), "", "",
            "the download may have fetched only metadata (check --include patterns), or the path is wrong");
  }
}

}  // namespace

const FamilyDef kFilesFamily{"FS", kCodes, run};

}  // namespace ckpt::checks
