// Tokenizer encoder: text -> token ids, as Hugging Face tokenizers / transformers.js encode with
// a tokenizer.json (BPE models) and as SentencePiece encodes with a tokenizer.model (BPE models).
// Every reader is bounded: malformed or hostile input gives an error string, never a crash.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::gguf {
struct File;
}

namespace ckpt::encode {

class Encoder {
 public:
  virtual ~Encoder();
  virtual bool encode(std::string_view utf8_text, bool add_special_tokens, std::vector<uint32_t>& ids,
                      std::string& error) const = 0;
  virtual std::string describe() const = 0;
};

// tokenizer.json bytes (+ optional tokenizer_config.json bytes, may be empty; not needed for the
// ids: the post-processor decides what add_special_tokens adds, as in transformers.js).
// nullptr + error on failure (including unsupported models/normalizers/pre-tokenizers).
std::unique_ptr<Encoder> load_tokenizer_json(std::string_view json, std::string_view tokenizer_config,
                                             std::string& error);
// tokenizer.model (SentencePiece ModelProto) bytes (+ tokenizer_config.json bytes: add_bos_token /
// add_eos_token, default add_bos true, add_eos false).
std::unique_ptr<Encoder> load_sentencepiece(std::string_view model, std::string_view tokenizer_config,
                                            std::string& error);
// A GGUF's own vocabulary (tokenizer.ggml.*, specs/gguf.md §5): `gpt2` byte-level BPE with the
// pre-tokenizer tokenizer.ggml.pre names (gpt-2, llama-bpe/llama3/llama-v3, qwen2), `llama`
// SentencePiece-style BPE; bos/eos as add_bos_token / add_eos_token say (llama.cpp's defaults
// when absent). nullptr + error for any other model or pre-tokenizer: never a guess.
std::unique_ptr<Encoder> load_gguf_vocab(const gguf::File& file, std::string& error);
// Invalid UTF-8 in utf8_text is an error ("text is not valid UTF-8 at byte N"); neither
// reference can be handed such bytes (Rust &str, JS/Python strings).
bool encode(const Encoder& e, std::string_view utf8_text, bool add_special_tokens, std::vector<uint32_t>& ids,
            std::string& error);
std::string describe(const Encoder& e);

}  // namespace ckpt::encode
