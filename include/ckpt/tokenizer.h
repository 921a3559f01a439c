// Tokenizer model: the byte-level alphabet, the TK checks (tokenizer.json,
// tokenizer_config.json, generation_config.json and config.json against each
// other and against the embedding), and the tiny tokenizer generator that
// `ckpt fixture` uses.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/finding.h"

namespace ckpt::tok {

// ---- the GPT-2 byte-level alphabet --------------------------------------------------

// UTF-8 spelling of the symbol that stands for byte b (bytes_to_unicode()).
const std::array<std::string, 256>& byte_level_symbols();
// The 256 symbols sorted by code point (the order fixture tokenizers use for ids).
const std::vector<std::string>& byte_level_alphabet_sorted();
// True when every code point of `s` is one of the 256 byte-level symbols (and s is valid UTF-8).
bool spelled_in_byte_level(std::string_view s);
// Spell raw bytes in the byte-level alphabet ("a b" -> "aĠb").
std::string to_byte_level(std::string_view raw);

// ---- the tokenizer summary ------------------------------------------------------------

enum class ModelType { Unknown, BPE, Unigram, WordPiece, WordLevel };
std::string_view model_type_name(ModelType t);

// Where the embedding rows come from (chosen by the caller: the arch registry's
// prefix when known, else a suffix match over weights()).
struct EmbeddingInfo {
  uint64_t rows = 0;
  std::string tensor;
  std::string file;
};

// Find the token-embedding tensor of the language model in `ck.weights()` by name suffix
// (`embed_tokens.weight`, `embed_tokens.weight_packed`, `wte.weight`, ...), skipping
// per-layer, vision, audio and MTP embeddings. Prefers names under `preferred_prefix`.
std::optional<EmbeddingInfo> find_embedding(const Checkpoint& ck,
                                            std::string_view preferred_prefix = {});

struct CheckInput {
  std::optional<EmbeddingInfo> embedding;  // rows of the token embedding, when known
};

// The TK family body: pure function of the checkpoint (plus the embedding rows the
// caller resolved). Emits TK codes into `sink`.
void check_tokenizer(const Checkpoint& ck, const CheckInput& in, FindingSink& sink);

// Literal special-token spellings in a piece of text (`<|im_start|>`, `<think>`, ...).
std::vector<std::string> template_literal_tokens(std::string_view text);

// A special-token spelling a chat template can print as written (TK015 checks it is a token).
struct TemplateLiteral {
  std::string file;    // the file the template came from
  std::string origin;  // how the template is named ("tokenizer_config.json: chat_template")
  std::string literal;
  uint32_t line = 0, column = 0;  // of the literal in the template source
  std::string probe;   // the first load-time probe whose prompt contains it; empty: none did
};
// The literals of every chat template source of `ck`, from the parsed templates (text and
// printed string constants, never comments), each with the probe that emitted it.
std::vector<TemplateLiteral> emitted_template_literals(const Checkpoint& ck);

// Number of pieces in a SentencePiece `tokenizer.model` (protobuf ModelProto field 1),
// or nullopt when the bytes are not a well-formed ModelProto.
std::optional<uint64_t> sentencepiece_piece_count(std::string_view bytes);

// ---- the generator ---------------------------------------------------------------------

struct GenOptions {
  uint32_t vocab_size = 288;     // total ids (specials + 256 symbols + merges + unused)
  bool unigram = false;          // Unigram model instead of BPE (same tokens, scores)
  uint32_t merges = 4;           // number of BPE merges; large vocabularies use vocab-260
  bool fill_with_merges = false; // every id after the alphabet is a merge (benchmarks)
  std::string chat_template;     // empty = the ChatML template
  // Defect knobs (the fixture catalogue uses them).
  bool drop_merges_key = false;
  int64_t eos_token_id_override = -1;  // generation_config/config eos id, -1 = the real one
};

struct Generated {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
  std::string generation_config_json;
  uint32_t vocab_size = 0;
  int64_t bos_id = 0, eos_id = 2, pad_id = 3;
};

std::string chatml_template();
Generated generate(const GenOptions& opts);

}  // namespace ckpt::tok
