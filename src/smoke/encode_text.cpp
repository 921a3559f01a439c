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
    error = ck.gguf_models.empty() ? "the model directory has neither tokenizer.json nor tokenizer.model"
                                   : "a GGUF's own vocabulary is not encoded by ckpt smoke yet";
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
