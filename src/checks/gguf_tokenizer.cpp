// TK/CT for GGUF: the tokenizer and chat templates a GGUF carries in its metadata, read as
// llama.cpp's llama_vocab::load reads them (specs/gguf.md §5): array types and lengths, the
// token count against token_embd, special ids, gpt2 merges, pre-tokenizer names; the
// templates (tokenizer.chat_template and tokenizer.chat_template.NAME) go through the CT probes.
#include <array>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "checks/family.h"
#include "checks/gguf_templates.h"
#include "ckpt/jinja.h"
#include "ckpt/name_index.h"

namespace ckpt::checks {

namespace {

using gguf::ValueType;

constexpr std::array<CheckInfo, 9> kCodes{{
    {"TK021", Severity::error, "GGUF tokenizer model missing or unknown"},
    {"TK022", Severity::error, "GGUF vocabulary missing or not a string array"},
    {"TK023", Severity::error, "GGUF scores or token types disagree with the vocabulary"},
    {"TK024", Severity::error, "GGUF token count differs from the embedding rows"},
    {"TK025", Severity::warning, "GGUF special token id outside the vocabulary"},
    {"TK026", Severity::error, "GGUF tokenizer key stored with a type llama.cpp refuses"},
    {"TK027", Severity::error, "GGUF BPE merges missing or malformed"},
    {"TK028", Severity::error, "GGUF vocabulary holds the same token twice"},
    {"TK029", Severity::warning, "GGUF pre-tokenizer missing or unknown to llama.cpp"},
}};

// tokenizer.ggml.pre values llama.cpp 3f545bec accepts (specs/gguf.md §5.2).
constexpr std::string_view kKnownPre[] = {
    "a.x-4.0", "afmoe", "bailingmoe", "bailingmoe2", "bloom", "chameleon", "chatglm-bpe", "codeshell", "cohere2moe",
    "command-r", "dbrx", "deepseek-coder", "deepseek-llm", "deepseek-r1-qwen", "deepseek-v3", "default", "exaone",
    "exaone-moe", "exaone4", "f2llmv2", "falcon", "falcon-h1", "falcon3", "gemma4", "gigachat", "glm4", "gpt-2", "gpt-4o",
    "gpt3-finnish", "granite-docling", "granite-embed-multi-311m", "granite-embed-multi-97m", "grok-2", "hunyuan",
    "hunyuan-dense", "jais", "jais-2", "jina-de", "jina-es", "jina-v1-en", "jina-v2-code", "jina-v2-de", "jina-v2-es",
    "jina-v5-nano", "joyai-llm", "kanana2", "kimi-k2", "kormo", "laguna", "lfm2", "llada-moe", "llama-bpe", "llama-v3",
    "llama3", "llama4", "megrez", "mellum", "mellum2", "midm-2.0", "minerva-7b", "minicpm5", "minimax-m2", "modern-bert",
    "mpt", "olmo", "phi-2", "pixtral", "poro-chat", "qwen2", "qwen35", "refact", "roberta-bpe", "sarvam-moe", "seed-coder",
    "smaug-bpe", "smollm", "solar-open", "stablelm2", "starcoder", "superbpe", "talkie", "tekken", "tiny_aya", "trillion",
    "viking", "whitespace", "youtu"};

constexpr std::string_view kSpecialIds[] = {
    "bos_token_id", "eos_token_id", "eot_token_id", "eom_token_id", "unknown_token_id", "seperator_token_id",
    "padding_token_id", "cls_token_id", "mask_token_id", "fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id",
    "fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id", "prefix_token_id", "suffix_token_id", "middle_token_id"};

constexpr size_t kMaxListed = 10;

// Rows of a tensor of the model (ne[1] of a 2-D tensor), looked up over every shard.
std::optional<uint64_t> rows_of(const Checkpoint& ck, const GgufModel& m, std::string_view name, std::string* file) {
  for (uint32_t i : m.shards) {
    const auto& g = *ck.gguf_shards[i].gguf;
    for (const auto& t : g.tensors)
      if (t.name == name && t.n_dims >= 2 && t.ne[1] >= 0) {
        if (file) *file = ck.gguf_shards[i].file;
        return static_cast<uint64_t>(t.ne[1]);
      }
  }
  return std::nullopt;
}

void check_tokenizer(const Checkpoint& ck, const GgufModel& m, const Shard& sh, FindingSink& out) {
  const gguf::File& g = *sh.gguf;
  const std::string& file = sh.file;
  const auto* model_kv = g.find("tokenizer.ggml.model");
  if (!model_kv || model_kv->value.type != ValueType::STRING) {
    out.add("TK021", Severity::error,
            model_kv ? "tokenizer.ggml.model is a " + model_kv->value.type_text() + ", expected a string" : "tokenizer.ggml.model is missing",
            file, "", "llama.cpp fails \"key not found in model: tokenizer.ggml.model\"; re-convert the model with its tokenizer");
    return;
  }
  const std::string model(model_kv->value.str);
  static const std::set<std::string_view> kModels{"no_vocab", "none", "llama", "bert", "gpt2", "hybriddna", "whitespace", "t5", "rwkv", "plamo2", "gemma4"};
  if (!kModels.count(model)) {
    out.add("TK021", Severity::error, "tokenizer.ggml.model is \"" + model + "\", which llama.cpp does not know", file, "",
            "llama.cpp fails \"unknown tokenizer\"; known: llama, gpt2, bert, t5, rwkv, plamo2, gemma4, none");
    return;
  }
  if (model == "none" || model == "no_vocab") return;
  const auto* tokens_kv = g.find("tokenizer.ggml.tokens");
  if (!tokens_kv || !tokens_kv->value.is_array() || tokens_kv->value.elem != ValueType::STRING) {
    out.add("TK022", Severity::error,
            tokens_kv ? "tokenizer.ggml.tokens is a " + tokens_kv->value.type_text() + ", expected array[string]"
                      : "tokenizer.ggml.tokens is missing",
            file, "", "llama.cpp fails \"cannot find tokenizer vocab in model file\"");
    return;
  }
  const auto& tokens = tokens_kv->value.strings;
  const uint64_t n = tokens.size();

  // One flat index of the vocabulary (no per-token allocation: 256k-token vocabularies), for
  // duplicates here and merge lookups below. Duplicate strings abort llama.cpp
  // (GGML_ASSERT id_to_token.size() == token_to_id.size()).
  NameIndex vocab;
  vocab.reset(n);
  auto token_at = [&](uint32_t pos) { return tokens[pos]; };
  {
    size_t dups = 0;
    std::string listed;
    for (uint64_t i = 0; i < n; ++i) {
      if (tokens[i].empty()) continue;  // empty strings become [EMPTY_i]
      const uint32_t first = vocab.insert(tokens[i], hash_name(tokens[i]), static_cast<uint32_t>(i), token_at);
      if (first == i) continue;
      if (++dups <= 3) listed += (listed.empty() ? "" : ", ") + std::string("'") + std::string(tokens[i].substr(0, 40)) + "' at " +
                                 std::to_string(first) + " and " + std::to_string(i);
    }
    if (dups)
      out.add("TK028", Severity::error, std::to_string(dups) + " token string(s) appear more than once: " + listed, file, "",
              "llama.cpp aborts loading the vocabulary (GGML_ASSERT); the converter padded or merged vocabularies wrongly");
  }
  auto in_vocab = [&](std::string_view t) { return vocab.find(t, hash_name(t), token_at) != NameIndex::npos; };

  // scores (f32 or i32) and token_type (i32): llama.cpp needs at least n, the spec exactly n.
  struct Parallel {
    std::string_view key;
    std::initializer_list<ValueType> types;
    std::string_view types_text;
  };
  for (const Parallel& p : {Parallel{"tokenizer.ggml.scores", {ValueType::F32, ValueType::I32}, "array[f32] (or array[i32])"},
                            Parallel{"tokenizer.ggml.token_type", {ValueType::I32}, "array[i32]"}}) {
    const auto* kv = g.find(p.key);
    if (!kv) continue;
    const auto& v = kv->value;
    const bool type_ok = v.is_array() && std::find(p.types.begin(), p.types.end(), v.elem) != p.types.end();
    if (!type_ok) {
      out.add("TK026", Severity::error, std::string(p.key) + " is a " + v.type_text() + ", expected " + std::string(p.types_text), file, "",
              "llama.cpp refuses other element types (a u8 scores array was read as float*, an out-of-bounds read, PR #26690)");
      continue;
    }
    if (v.count < n)
      out.add("TK023", Severity::error,
              std::string(p.key) + " has " + std::to_string(v.count) + " entries for " + std::to_string(n) + " tokens", file, "",
              "llama.cpp fails \"Index out of array bounds\"; the arrays must run parallel to tokenizer.ggml.tokens");
    else if (v.count > n)
      out.add("TK023", Severity::warning,
              std::string(p.key) + " has " + std::to_string(v.count) + " entries for " + std::to_string(n) +
                  " tokens (llama.cpp ignores the extra ones; the spec requires equal lengths)",
              file, "", "a vocabulary trimmed after conversion; re-convert");
  }

  // Token count vs the embedding (and output head) rows: shapes use the token count.
  for (std::string_view tensor : {"token_embd.weight", "output.weight"}) {
    std::string tfile;
    if (auto rows = rows_of(ck, m, tensor, &tfile); rows && *rows != n)
      out.add("TK024", Severity::error,
              std::string(tensor) + " has " + std::to_string(*rows) + " rows but tokenizer.ggml.tokens has " + std::to_string(n) + " tokens",
              tfile, tensor,
              "llama.cpp fails \"tensor has wrong shape\" (llama.cpp#5910, #8445): the vocabulary was edited or padded differently from the embedding; "
              "converters pad the token list with [PAD{i}] up to the embedding rows");
  }

  // Special ids: u32, inside the vocabulary (llama.cpp warns and falls back otherwise).
  for (std::string_view suffix : kSpecialIds) {
    const std::string key = "tokenizer.ggml." + std::string(suffix);
    const auto* kv = g.find(key);
    if (!kv) continue;
    if (kv->value.type != ValueType::U32) {
      out.add("TK026", Severity::error, key + " is stored as " + kv->value.type_text() + ", expected u32", file, "",
              "llama.cpp's get_key demands u32 and fails the load otherwise");
      continue;
    }
    const uint64_t id = kv->value.bits;
    if (id == 0xFFFFFFFFu) continue;  // LLAMA_TOKEN_NULL: "no such token", as converters write it
    if (id >= n)
      out.add("TK025", Severity::warning, key + " is " + std::to_string(id) + ", outside the " + std::to_string(n) + "-token vocabulary",
              file, "",
              "llama.cpp warns \"bad special token\" and uses its default id (or none): generation may not stop, or start without BOS");
  }
  for (std::string_view flag : {"add_bos_token", "add_eos_token", "add_sep_token", "add_space_prefix"}) {
    const std::string key = "tokenizer.ggml." + std::string(flag);
    if (const auto* kv = g.find(key); kv && kv->value.type != ValueType::BOOL)
      out.add("TK026", Severity::error, key + " is stored as " + kv->value.type_text() + ", expected bool", file, "",
              "llama.cpp's get_key demands bool and fails the load otherwise");
  }

  // BPE: merges required (unless kimi-k2), each "left right" with both parts non-empty.
  const bool bpe = model == "gpt2" || model == "hybriddna" || model == "whitespace" || model == "gemma4";
  const auto* pre_kv = g.find("tokenizer.ggml.pre");
  const std::string pre = pre_kv && pre_kv->value.type == ValueType::STRING ? std::string(pre_kv->value.str) : "";
  if (bpe) {
    const auto* merges_kv = g.find("tokenizer.ggml.merges");
    if (!merges_kv && pre != "kimi-k2") {
      out.add("TK027", Severity::error, "tokenizer.ggml.model is \"" + model + "\" (BPE) but tokenizer.ggml.merges is missing", file, "",
              "llama.cpp fails \"cannot find tokenizer merges in model file\" (ollama#10930); re-convert with the tokenizer's merges");
    } else if (merges_kv && (!merges_kv->value.is_array() || merges_kv->value.elem != ValueType::STRING)) {
      out.add("TK027", Severity::error, "tokenizer.ggml.merges is a " + merges_kv->value.type_text() + ", expected array[string]", file, "",
              "llama.cpp reads merges as strings");
    } else if (merges_kv) {
      size_t bad = 0, unknown = 0;
      std::string first_bad, first_unknown, joined;
      for (size_t i = 0; i < merges_kv->value.strings.size(); ++i) {
        std::string_view mrg = merges_kv->value.strings[i];
        const size_t sp = mrg.size() > 1 ? mrg.find(' ', 1) : std::string_view::npos;
        if (sp == std::string_view::npos || sp + 1 >= mrg.size()) {
          if (++bad == 1) first_bad = "entry " + std::to_string(i) + " '" + std::string(mrg.substr(0, 60)) + "'";
          continue;
        }
        const std::string_view l = mrg.substr(0, sp), r = mrg.substr(sp + 1);
        joined.assign(l);
        joined.append(r);
        if (!in_vocab(l) || !in_vocab(r) || !in_vocab(joined)) {
          if (++unknown == 1) first_unknown = "entry " + std::to_string(i) + " '" + std::string(mrg.substr(0, 60)) + "'";
        }
      }
      if (bad)
        out.add("TK027", Severity::error,
                std::to_string(bad) + " merge(s) are not two space-separated parts, first " + first_bad, file, "",
                "llama.cpp splits each merge at the first space after position 1; these merges never apply");
      if (unknown)
        out.add("TK027", Severity::warning,
                std::to_string(unknown) + " merge(s) use or produce a string not in the vocabulary, first " + first_unknown, file, "",
                "such merges are dead weight at best; a vocabulary and merges from different tokenizers encode wrongly");
    }
    if (!pre_kv)
      out.add("TK029", Severity::warning, "tokenizer.ggml.pre is missing", file, "",
              "llama.cpp uses the default pre-tokenizer and warns \"GENERATION QUALITY WILL BE DEGRADED\" (llama.cpp#7476); re-convert");
    else if (!pre.empty() && std::find(std::begin(kKnownPre), std::end(kKnownPre), pre) == std::end(kKnownPre))
      out.add("TK029", Severity::warning, "tokenizer.ggml.pre is \"" + pre + "\", which llama.cpp 3f545bec does not know", file, "",
              "llama.cpp fails \"unknown pre-tokenizer type\" (llama.cpp#12122): a converter newer than the runtime, or a typo");
  }
}

// The special tokens a template sees, from the ids in the metadata.
json::Value special_tokens_of(const gguf::File& g) {
  json::Object o;
  const auto* tokens_kv = g.find("tokenizer.ggml.tokens");
  if (!tokens_kv || tokens_kv->value.elem != ValueType::STRING) return json::Value(std::move(o));
  const auto& tokens = tokens_kv->value.strings;
  for (auto [name, key] : {std::pair{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
                           {"unk_token", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "tokenizer.ggml.padding_token_id"}}) {
    const auto id = g.get_uint(key);
    if (id && *id < tokens.size()) o.emplace_back(name, json::Value(std::string(tokens[*id])));
  }
  return json::Value(std::move(o));
}

bool is_language_model(const gguf::File& g) {
  const auto type = g.get_string("general.type");
  const auto arch = g.get_string("general.architecture");
  // Projectors (mmproj/clip) and adapters carry no vocabulary or template of their own.
  return !((type && (*type == "mmproj" || *type == "adapter")) || (arch && *arch == "clip"));
}

void check_templates(const Shard& sh, FindingSink& out) {
  const gguf::File& g = *sh.gguf;
  for (const auto& kv : g.kvs)
    if ((kv.key == "tokenizer.chat_template" || kv.key.rfind("tokenizer.chat_template.", 0) == 0) && kv.value.type != ValueType::STRING)
      out.add("CT008", Severity::warning, std::string(kv.key) + " is a " + kv.value.type_text() + ", expected a string", sh.file, "",
              "llama.cpp skips array-typed keys when it looks up the template, so it sees none; other tools may read it");
  auto sources = gguf_chat_templates(sh);
  if (sources.empty()) {
    out.add("CT007", Severity::info, "no chat template: the GGUF has no tokenizer.chat_template", sh.file, "",
            "base models legitimately have none; llama.cpp then falls back to a built-in template guessed from the name, or none");
    return;
  }
  for (auto& f : jinja::template_findings(sources, special_tokens_of(g))) out.add(std::move(f));
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  for (const auto& m : ck.gguf_models) {
    const Shard* first = m.first(ck.gguf_shards);
    if (!first || !first->gguf->metadata_ok) continue;  // GG says why
    if (!is_language_model(*first->gguf) || !first->gguf->get_string("general.architecture")) continue;  // GG030 says why
    check_tokenizer(ck, m, *first, out);
    check_templates(*first, out);
  }
}

}  // namespace

std::vector<jinja::TemplateSource> gguf_chat_templates(const Shard& first) {
  std::vector<jinja::TemplateSource> sources;
  for (const auto& kv : first.gguf->kvs) {
    const bool plain = kv.key == "tokenizer.chat_template";
    const bool named = kv.key.rfind("tokenizer.chat_template.", 0) == 0;
    if ((!plain && !named) || kv.value.type != ValueType::STRING) continue;
    jinja::TemplateSource src;
    src.name = plain ? "default" : std::string(kv.key.substr(24));
    src.file = first.file;
    src.origin = first.file + ": " + std::string(kv.key);
    src.text = std::string(kv.value.str);
    sources.push_back(std::move(src));
  }
  return sources;
}

std::vector<jinja::TemplateSource> gguf_chat_templates(const Checkpoint& ck) {
  std::vector<jinja::TemplateSource> all;
  for (const auto& m : ck.gguf_models) {
    const Shard* first = m.first(ck.gguf_shards);
    if (!first || !first->gguf->metadata_ok || !is_language_model(*first->gguf)) continue;
    auto some = gguf_chat_templates(*first);
    all.insert(all.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
  }
  return all;
}

const FamilyDef kGgufTokenizerFamily{"GGUF TK/CT", kCodes, run};

}  // namespace ckpt::checks
