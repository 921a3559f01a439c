// The smoke pass's text -> ids: the checkpoint's own tokenizer, as transformers loads it (the
// fast tokenizer.json when present, else the SentencePiece tokenizer.model), with the special
// tokens it adds by default (src/encode).
#include <filesystem>

#include "ckpt/encode.h"
#include "io/file.h"
#include "smoke/internal.h"

namespace ckpt::smoke {

namespace {
constexpr uint64_t kMaxTokenizerBytes = 512ull << 20;  // the largest real tokenizer.json is ~35 MB
constexpr uint64_t kMaxConfigBytes = 64ull << 20;
}  // namespace

bool encode_text(const Checkpoint& ck, const std::string& text, std::vector<uint32_t>& ids, std::string& kind,
                 std::string& error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (is_gguf_target(ck)) {
    // A GGUF is run as llama.cpp runs it: with the vocabulary it carries, whatever lies beside it.
    const Shard* shard = ck.gguf_models.size() == 1 ? ck.gguf_models.front().first(ck.gguf_shards) : nullptr;
    if (!shard || !shard->gguf || !shard->gguf->metadata_ok) {
      error = ck.gguf_models.size() > 1 ? "the directory holds " + std::to_string(ck.gguf_models.size()) + " GGUF models; name one"
                                        : "the GGUF's metadata could not be read";
      return false;
    }
    auto encoder = encode::load_gguf_vocab(*shard->gguf, error);
    if (!encoder) {
      error = shard->file + ": " + error;
      return false;
    }
    kind = encoder->describe();
    if (!encode::encode(*encoder, text, /*add_special_tokens=*/true, ids, error)) {
      error = shard->file + ": " + error;
      return false;
    }
    return true;
  }
  std::string config;
  const fs::path config_path = ck.root / "tokenizer_config.json";
  if (fs::is_regular_file(config_path, ec)) {
    if (std::string e = io::read_file(config_path, kMaxConfigBytes, config); !e.empty()) {
      error = "tokenizer_config.json: " + e;
      return false;
    }
  }
  std::unique_ptr<encode::Encoder> encoder;
  std::string file;
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const fs::path path = ck.root / name;
    if (!fs::is_regular_file(path, ec)) continue;
    std::string bytes;
    if (std::string e = io::read_file(path, kMaxTokenizerBytes, bytes); !e.empty()) {
      error = std::string(name) + ": " + e;
      return false;
    }
    file = name;
    encoder = file == "tokenizer.json" ? encode::load_tokenizer_json(bytes, config, error)
                                       : encode::load_sentencepiece(bytes, config, error);
    if (!encoder) {
      error = file + ": " + error;
      return false;
    }
    break;
  }
  if (!encoder) {
    error = "the model directory has neither tokenizer.json nor tokenizer.model";
    return false;
  }
  kind = encoder->describe();
  if (!encode::encode(*encoder, text, /*add_special_tokens=*/true, ids, error)) {
    error = file + ": " + error;
    return false;
  }
  return true;
}

}  // namespace ckpt::smoke
