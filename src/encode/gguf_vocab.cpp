// A GGUF's own vocabulary (tokenizer.ggml.*, specs/gguf.md §5) as an encoder, by reusing the two
// encoders ckpt already has rather than writing a third:
//  - `gpt2` (byte-level BPE): the tokens, merges and the pre-tokenizer that `tokenizer.ggml.pre`
//    names are put back into the tokenizer.json form they were converted from and read by
//    load_tokenizer_json. Only the `pre` values whose regex ckpt knows are modelled; any other
//    (and a missing one, which llama.cpp runs with its "default" regexes) is refused with a
//    message, never guessed.
//  - `llama` (SentencePiece-style BPE over scores, with byte fallback): tokens, scores and
//    token types become a SentencePiece ModelProto (BPE, identity normaliser, the dummy prefix
//    as tokenizer.ggml.add_space_prefix says) read by load_sentencepiece.
// Special tokens: bos/eos ids and tokenizer.ggml.add_bos_token / add_eos_token, with
// llama.cpp's defaults when a flag is absent (SPM: bos on; BPE: off, except the llama3
// pre-tokenizer family, which turns it on).
#include <cstring>
#include <unordered_set>

#include "ckpt/encode.h"
#include "ckpt/gguf.h"
#include "ckpt/json.h"

namespace ckpt::encode {

namespace {

// The pre-tokenizer regexes of the `pre` values modelled here. These are the patterns the
// families' own tokenizer.json files carry (Llama 3, Qwen2, GPT-2), which llama.cpp's
// pre-tokenizers of the same name reproduce.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Pre {
  const char* name;
  const char* pattern;
  bool ignore_merges;  // llama.cpp's llama3 family looks a whole pre-token up before merging
  bool add_bos;        // llama.cpp's default when add_bos_token is absent
};
constexpr Pre kPres[] = {
    {"llama-bpe", kLlama3Pattern, true, true}, {"llama3", kLlama3Pattern, true, true},
    {"llama-v3", kLlama3Pattern, true, true},  {"qwen2", kQwen2Pattern, false, false},
    {"gpt-2", kGpt2Pattern, false, false},
};

enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

class Named final : public Encoder {
 public:
  Named(std::unique_ptr<Encoder> inner, std::string what) : inner_(std::move(inner)), what_(std::move(what)) {}
  bool encode(std::string_view text, bool add_special, std::vector<uint32_t>& ids, std::string& error) const override {
    return inner_->encode(text, add_special, ids, error);
  }
  std::string describe() const override { return what_; }

 private:
  std::unique_ptr<Encoder> inner_;
  std::string what_;
};

struct Vocab {
  std::vector<std::string_view> tokens;
  std::vector<int64_t> types;  // kNormal when absent
  std::vector<float> scores;   // 0 when absent
  std::optional<uint32_t> bos, eos, unk;
  std::optional<bool> add_bos, add_eos;
};

std::optional<bool> flag(const gguf::File& f, std::string_view key) {
  const gguf::KeyValue* kv = f.find(key);
  if (!kv || kv->value.type != gguf::ValueType::BOOL) return std::nullopt;
  return kv->value.bits != 0;
}

bool read_vocab(const gguf::File& f, Vocab& v, std::string& error) {
  const gguf::KeyValue* toks = f.find("tokenizer.ggml.tokens");
  if (!toks || !toks->value.is_array() || toks->value.elem != gguf::ValueType::STRING) {
    error = "tokenizer.ggml.tokens is absent or not a string array";
    return false;
  }
  v.tokens = toks->value.strings;
  if (v.tokens.empty()) {
    error = "tokenizer.ggml.tokens is empty";
    return false;
  }
  const size_t n = v.tokens.size();
  v.types.assign(n, kNormal);
  v.scores.assign(n, 0.0f);
  if (const gguf::KeyValue* t = f.find("tokenizer.ggml.token_type")) {
    if (!t->value.is_array() || t->value.elem != gguf::ValueType::I32 || t->value.count < n) {
      error = "tokenizer.ggml.token_type is not an i32 array of at least " + std::to_string(n) + " entries";
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = t->value.int_at(i).value_or(0);
      v.types[i] = x >= 1 && x <= 6 ? x : kNormal;  // 0 / other: UNDEFINED, a normal piece
    }
  }
  if (const gguf::KeyValue* s = f.find("tokenizer.ggml.scores")) {
    if (!s->value.is_array() || s->value.count < n ||
        (s->value.elem != gguf::ValueType::F32 && s->value.elem != gguf::ValueType::I32)) {
      error = "tokenizer.ggml.scores is not an f32/i32 array of at least " + std::to_string(n) + " entries";
      return false;
    }
    for (size_t i = 0; i < n; ++i)
      v.scores[i] = s->value.elem == gguf::ValueType::F32 ? float(s->value.float_at(i).value_or(0))
                                                          : float(s->value.int_at(i).value_or(0));
  }
  auto id = [&](std::string_view key) -> std::optional<uint32_t> {
    auto x = f.get_uint(key);
    if (!x || *x >= n) return std::nullopt;  // llama.cpp: an id past the vocabulary is ignored
    return uint32_t(*x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.add_bos = flag(f, "tokenizer.ggml.add_bos_token");
  v.add_eos = flag(f, "tokenizer.ggml.add_eos_token");
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < n; ++i)
    if (!seen.insert(v.tokens[i]).second) {
      error = "tokenizer.ggml.tokens holds \"" + std::string(v.tokens[i]) + "\" twice (llama.cpp aborts on such a file)";
      return false;
    }
  return true;
}

// The tokenizer.json a byte-level BPE GGUF vocabulary was converted from.
std::unique_ptr<Encoder> bpe(const gguf::File& f, const Vocab& v, std::string& error) {
  auto pre_name = f.get_string("tokenizer.ggml.pre");
  std::string known;
  for (const Pre& p : kPres) known += std::string(known.empty() ? "" : ", ") + p.name;
  if (!pre_name) {
    error = "tokenizer.ggml.pre is absent (llama.cpp then uses its \"default\" pre-tokenizer, which ckpt does not model; modelled: " +
            known + ")";
    return nullptr;
  }
  const Pre* pre = nullptr;
  for (const Pre& p : kPres)
    if (*pre_name == p.name) pre = &p;
  if (!pre) {
    error = "tokenizer.ggml.pre \"" + std::string(*pre_name) + "\" is not modelled by ckpt's encoder (modelled: " + known + ")";
    return nullptr;
  }
  const gguf::KeyValue* merges = f.find("tokenizer.ggml.merges");
  if (!merges || !merges->value.is_array() || merges->value.elem != gguf::ValueType::STRING) {
    error = "tokenizer.ggml.merges is absent or not a string array (llama.cpp: \"cannot find tokenizer merges in model file\")";
    return nullptr;
  }
  std::string j = "{\"added_tokens\":[";
  bool first = true;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != kControl && v.types[i] != kUserDefined) continue;
    j += first ? "" : ",";
    first = false;
    j += "{\"id\":" + std::to_string(i) + ",\"content\":" + json::quoted(v.tokens[i]) +
         ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":" +
         (v.types[i] == kControl ? "true" : "false") + "}";
  }
  j += "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":";
  j += json::quoted(pre->pattern);
  j += "},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
       "\"use_regex\":false}]},";
  const bool add_bos = v.add_bos.value_or(pre->add_bos) && v.bos, add_eos = v.add_eos.value_or(false) && v.eos;
  if (add_bos || add_eos) {
    auto special = [&](uint32_t id) { return "{\"SpecialToken\":{\"id\":" + json::quoted(v.tokens[id]) + ",\"type_id\":0}}"; };
    auto entry = [&](uint32_t id) {
      return json::quoted(v.tokens[id]) + ":{\"id\":" + json::quoted(v.tokens[id]) + ",\"ids\":[" + std::to_string(id) +
             "],\"tokens\":[" + json::quoted(v.tokens[id]) + "]}";
    };
    j += "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[";
    if (add_bos) j += special(*v.bos) + ",";
    j += "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}";
    if (add_eos) j += "," + special(*v.eos);
    j += "],\"special_tokens\":{";
    if (add_bos) j += entry(*v.bos);
    if (add_eos && (!add_bos || *v.eos != *v.bos)) j += std::string(add_bos ? "," : "") + entry(*v.eos);
    j += "}},";
  } else {
    j += "\"post_processor\":null,";
  }
  j += "\"decoder\":null,\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
       "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":";
  j += pre->ignore_merges ? "true" : "false";
  j += ",\"vocab\":{";
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] == kControl || v.types[i] == kUserDefined) continue;  // added tokens, as HF keeps them
    j += (j.back() == '{' ? "" : ",") + json::quoted(v.tokens[i]) + ":" + std::to_string(i);
  }
  j += "},\"merges\":[";
  for (size_t i = 0; i < merges->value.strings.size(); ++i) j += (i ? "," : "") + json::quoted(merges->value.strings[i]);
  j += "]}}";
  auto enc = load_tokenizer_json(j, "", error);
  if (!enc) return nullptr;
  return std::make_unique<Named>(std::move(enc), "GGUF vocabulary: byte-level BPE (tokenizer.ggml.pre " + std::string(pre->name) +
                                                     "), " + std::to_string(v.tokens.size()) + " tokens, " +
                                                     std::to_string(merges->value.strings.size()) + " merges");
}

// Protobuf wire helpers for the ModelProto the `llama` vocabulary stands for.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += char(v);
}
void tag(std::string& out, uint32_t field, uint32_t wire) { varint(out, (uint64_t(field) << 3) | wire); }
void bytes_field(std::string& out, uint32_t field, std::string_view b) {
  tag(out, field, 2);
  varint(out, b.size());
  out += b;
}
void int_field(std::string& out, uint32_t field, int64_t v) {
  tag(out, field, 0);
  varint(out, uint64_t(v));
}

std::unique_ptr<Encoder> spm(const gguf::File& f, const Vocab& v, std::string& error) {
  std::string model;
  bool any_byte = false;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    std::string piece;
    bytes_field(piece, 1, v.tokens[i]);
    tag(piece, 2, 5);
    uint32_t u;
    std::memcpy(&u, &v.scores[i], 4);
    for (int k = 0; k < 4; ++k) piece += char((u >> (8 * k)) & 0xFF);
    int_field(piece, 3, v.types[i]);
    bytes_field(model, 1, piece);
    any_byte = any_byte || v.types[i] == kByte;
  }
  std::string trainer;
  int_field(trainer, 3, 2);  // BPE
  if (any_byte) int_field(trainer, 35, 1);
  // llama.cpp's SPM defaults: unk 0, bos 1, eos 2 (specs/gguf.md §5.1); -1 = none.
  int_field(trainer, 40, v.unk ? int64_t(*v.unk) : (f.find("tokenizer.ggml.unknown_token_id") ? -1 : 0));
  int_field(trainer, 41, v.bos ? int64_t(*v.bos) : 1);
  int_field(trainer, 42, v.eos ? int64_t(*v.eos) : 2);
  bytes_field(model, 2, trainer);
  std::string norm;
  bytes_field(norm, 1, "identity");
  int_field(norm, 3, flag(f, "tokenizer.ggml.add_space_prefix").value_or(true) ? 1 : 0);
  int_field(norm, 4, flag(f, "tokenizer.ggml.remove_extra_whitespaces").value_or(false) ? 1 : 0);
  int_field(norm, 5, 1);
  bytes_field(model, 3, norm);
  const bool add_bos = v.add_bos.value_or(true), add_eos = v.add_eos.value_or(false);
  const std::string config = std::string("{\"add_bos_token\":") + (add_bos ? "true" : "false") +
                             ",\"add_eos_token\":" + (add_eos ? "true" : "false") + "}";
  auto enc = load_sentencepiece(model, config, error);
  if (!enc) return nullptr;
  return std::make_unique<Named>(std::move(enc), "GGUF vocabulary: SentencePiece-style BPE (tokenizer.ggml.model llama), " +
                                                     std::to_string(v.tokens.size()) + " tokens");
}

}  // namespace

std::unique_ptr<Encoder> load_gguf_vocab(const gguf::File& file, std::string& error) {
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) {
    error = "tokenizer.ggml.model is absent (llama.cpp: \"key not found in model: tokenizer.ggml.model\")";
    return nullptr;
  }
  if (*model != "gpt2" && *model != "llama") {
    error = "tokenizer.ggml.model \"" + std::string(*model) + "\" is not encoded by ckpt (modelled: gpt2, llama)";
    return nullptr;
  }
  Vocab v;
  if (!read_vocab(file, v, error)) return nullptr;
  auto enc = *model == "gpt2" ? bpe(file, v, error) : spm(file, v, error);
  if (!enc) error = "GGUF vocabulary: " + error;
  return enc;
}

}  // namespace ckpt::encode
