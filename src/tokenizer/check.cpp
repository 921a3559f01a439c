// The TK checks: tokenizer.json against itself (model type, ids, merges, added tokens),
// against tokenizer_config.json / generation_config.json / config.json (named special
// tokens and ids), against the embedding rows, and against the chat template's literals.
#include <algorithm>
#include <fstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ckpt/tokenizer.h"
#include "tokenizer/sentencepiece.h"
#include "tokenizer/utf8.h"

namespace ckpt::tok {

std::string_view model_type_name(ModelType t) {
  switch (t) {
    case ModelType::BPE: return "BPE";
    case ModelType::Unigram: return "Unigram";
    case ModelType::WordPiece: return "WordPiece";
    case ModelType::WordLevel: return "WordLevel";
    default: return "unknown";
  }
}

namespace {

constexpr size_t kMaxExamples = 3;

// Collects offending items for one code: a count and the first few examples.
struct Tally {
  uint64_t count = 0;
  std::vector<std::string> examples;
  void add(std::string s) {
    ++count;
    if (examples.size() < kMaxExamples) examples.push_back(std::move(s));
  }
  std::string list() const {
    std::string s;
    for (size_t i = 0; i < examples.size(); ++i) s += (i ? ", " : "") + examples[i];
    if (count > examples.size()) s += ", ... (" + std::to_string(count) + " in all)";
    return s;
  }
};

std::string q(std::string_view s) {
  std::string o = "'";
  o.append(s.substr(0, 80));
  if (s.size() > 80) o += "...";
  return o + "'";
}

// All tokens the tokenizer defines: model vocabulary plus added tokens.
struct Tokens {
  bool known = false;  // a token set was read (tokenizer.json or tokenizer.model)
  std::string source;  // file the tokens come from
  ModelType type = ModelType::Unknown;
  bool byte_level = false;
  std::unordered_map<std::string_view, int64_t> by_text;  // vocab + added
  std::vector<int64_t> ids;  // sorted and unique after finish()
  int64_t max_id = -1;
  std::vector<std::string> owned;  // backing store for SentencePiece pieces

  bool has(std::string_view s) const { return by_text.count(s) != 0; }
  void note_id(int64_t id) {
    ids.push_back(id);
    max_id = std::max(max_id, id);
  }
  void finish() {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
  bool has_id(int64_t id) const { return std::binary_search(ids.begin(), ids.end(), id); }
};

bool is_byte_level_component(const json::Value* v) {
  if (!v || !v->is_object()) return false;
  auto t = v->get_string("type");
  if (!t) return false;
  if (*t == "ByteLevel") return true;
  if (*t == "Sequence") {
    const json::Value* list = v->find("pretokenizers");
    if (list && list->is_array())
      for (const auto& e : list->as_array())
        if (is_byte_level_component(&e)) return true;
  }
  return false;
}

std::optional<std::string> token_text(const json::Value& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_object()) return v.get_string("content");
  return std::nullopt;
}

// tokenizer.json's "model" section and added_tokens.
void read_tokenizer_json(const JsonFile& tj, Tokens& tk, FindingSink& sink) {
  const std::string& file = tj.file;
  const json::Value& root = tj.value;
  const json::Value* model = root.find("model");
  if (!root.is_object() || !model || !model->is_object()) {
    sink.add("TK003", Severity::error,
             "tokenizer.json has no \"model\" object; expected {\"model\": {\"type\": ..., \"vocab\": ...}}",
             file, {}, "the file is not a tokenizers-library tokenizer.json (a slow-tokenizer file renamed?)");
    return;
  }
  const json::Value* vocab = model->find("vocab");
  auto type = model->get_string("type");
  if (type) {
    if (*type == "BPE") tk.type = ModelType::BPE;
    else if (*type == "Unigram") tk.type = ModelType::Unigram;
    else if (*type == "WordPiece") tk.type = ModelType::WordPiece;
    else if (*type == "WordLevel") tk.type = ModelType::WordLevel;
    else {
      sink.add("TK003", Severity::error,
               "tokenizer.json model.type is " + q(*type) +
                   "; expected one of BPE, Unigram, WordPiece, WordLevel",
               file, {}, "no tokenizer library can build this model");
      return;
    }
  } else {
    // The tokenizers library infers an untagged model from its fields.
    if (model->find("merges")) tk.type = ModelType::BPE;
    else if (vocab && vocab->is_array()) tk.type = ModelType::Unigram;
    else if (model->find("max_input_chars_per_word")) tk.type = ModelType::WordPiece;
    else tk.type = ModelType::WordLevel;
  }
  tk.byte_level = is_byte_level_component(root.find("pre_tokenizer"));
  tk.source = file;

  Tally bad_vocab, dup_ids;
  std::vector<std::pair<int64_t, std::string_view>> by_id;
  if (tk.type == ModelType::Unigram) {
    if (!vocab || !vocab->is_array()) {
      sink.add("TK003", Severity::error,
               "tokenizer.json Unigram model.vocab is not a list of [piece, score] pairs", file, {},
               "the model section is truncated or was written by another tool");
      return;
    }
    const auto& arr = vocab->as_array();
    by_id.reserve(arr.size());
    Tally dup_pieces;
    for (size_t i = 0; i < arr.size(); ++i) {
      const auto& e = arr[i];
      if (!e.is_array() || e.as_array().size() != 2 || !e.as_array()[0].is_string() ||
          !e.as_array()[1].is_number()) {
        bad_vocab.add("entry " + std::to_string(i));
        continue;
      }
      std::string_view piece = e.as_array()[0].as_string();
      if (!tk.by_text.emplace(piece, int64_t(i)).second) dup_pieces.add(q(piece));
      tk.note_id(int64_t(i));
    }
    if (dup_pieces.count)
      sink.add("TK004", Severity::error,
               "tokenizer.json Unigram vocabulary lists the same piece more than once: " +
                   dup_pieces.list() + "; expected every piece once",
               file, {}, "two ids spell the same text; encoding picks one and the other is unreachable");
    auto unk = model->find("unk_id");
    if (unk && !unk->is_null() && (!unk->is_int() || unk->as_int() < 0 || uint64_t(unk->as_int()) >= arr.size()))
      sink.add("TK003", Severity::error,
               "tokenizer.json model.unk_id is " + unk->dump() + "; expected an id below the " +
                   std::to_string(arr.size()) + "-piece vocabulary",
               file, {}, "the tokenizers library refuses to build a Unigram model whose unk_id is out of range");
  } else {
    if (!vocab || !vocab->is_object()) {
      sink.add("TK003", Severity::error,
               "tokenizer.json " + std::string(model_type_name(tk.type)) +
                   " model.vocab is not an object mapping token -> id",
               file, {}, "the model section is truncated or was written by another tool");
      return;
    }
    const auto& obj = vocab->as_object();
    by_id.reserve(obj.size());
    tk.by_text.max_load_factor(0.5f);
    tk.by_text.reserve(obj.size() + 64);
    tk.ids.reserve(obj.size() + 64);
    for (const auto& [text, idv] : obj) {
      if (!idv.is_int() || idv.as_int() < 0) {
        bad_vocab.add(q(text) + " -> " + idv.dump());
        continue;
      }
      int64_t id = idv.as_int();
      tk.by_text.emplace(text, id);
      by_id.emplace_back(id, text);
      tk.note_id(id);
    }
    std::sort(by_id.begin(), by_id.end());
    for (size_t i = 1; i < by_id.size(); ++i)
      if (by_id[i].first == by_id[i - 1].first)
        dup_ids.add("id " + std::to_string(by_id[i].first) + " = " + q(by_id[i - 1].second) +
                    " and " + q(by_id[i].second));
  }
  for (const auto& d : tj.duplicates)
    if (d.path == "/model/vocab") dup_ids.add("key " + q(d.key) + " written twice");
  if (bad_vocab.count)
    sink.add("TK003", Severity::error,
             "tokenizer.json model.vocab has malformed entries: " + bad_vocab.list() +
                 "; expected non-negative integer ids",
             file, {}, "the vocabulary was edited by hand or truncated");
  if (dup_ids.count)
    sink.add("TK004", Severity::error,
             "tokenizer.json model.vocab ids are not unique: " + dup_ids.list(), file, {},
             "two tokens share an id, so decoding that id is ambiguous and one token can never be produced");

  // BPE merges: present, well-formed, made of existing tokens, producing existing tokens.
  if (tk.type == ModelType::BPE) {
    const json::Value* merges = model->find("merges");
    if (!merges || !merges->is_array()) {
      sink.add("TK005", Severity::error,
               std::string("tokenizer.json BPE model has ") +
                   (merges ? "a non-list \"merges\"" : "no \"merges\" key") +
                   "; expected a list of merges (\"a b\" strings or [a, b] pairs)",
               file, {},
               "swift-transformers fatalErrors on a BPE model without merges and tokenizers cannot "
               "build it; regenerate tokenizer.json with the tokenizers library");
    } else {
      const auto& arr = merges->as_array();
      size_t multi_char = 0;  // tokens longer than one code point need merges to be produced
      for (const auto& [text, id] : tk.by_text) {
        (void)id;
        size_t i = 0;
        utf8_next(text, i);
        if (i < text.size() && ++multi_char > 0) break;
      }
      if (arr.empty() && multi_char > 0 && tk.by_text.size() > 300)
        sink.add("TK005", Severity::warning,
                 "tokenizer.json BPE model has an empty merges list but " +
                     std::to_string(tk.by_text.size()) +
                     " vocabulary entries; multi-character tokens can never be produced",
                 file, {}, "the merges were dropped when the tokenizer was converted");
      Tally malformed, missing_part, missing_result, not_byte_level;
      std::string joined;
      for (size_t i = 0; i < arr.size(); ++i) {
        const auto& m = arr[i];
        std::string_view a, b;
        if (m.is_string()) {
          std::string_view s = m.as_string();
          size_t sp = s.find(' ');
          if (sp == std::string_view::npos || sp == 0 || sp + 1 >= s.size() ||
              s.find(' ', sp + 1) != std::string_view::npos) {
            malformed.add("#" + std::to_string(i) + " " + q(s));
            continue;
          }
          a = s.substr(0, sp);
          b = s.substr(sp + 1);
        } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() &&
                   m.as_array()[1].is_string() && !m.as_array()[0].as_string().empty() &&
                   !m.as_array()[1].as_string().empty()) {
          a = m.as_array()[0].as_string();
          b = m.as_array()[1].as_string();
        } else {
          malformed.add("#" + std::to_string(i) + " " + m.dump().substr(0, 80));
          continue;
        }
        if (tk.byte_level && (!spelled_in_byte_level(a) || !spelled_in_byte_level(b)))
          not_byte_level.add("#" + std::to_string(i) + " " + q(a) + " + " + q(b));
        bool ha = tk.by_text.count(a) != 0, hb = tk.by_text.count(b) != 0;
        if (!ha || !hb) {
          missing_part.add("#" + std::to_string(i) + " " + q(a) + " + " + q(b) + " (" +
                           (!ha ? q(a) : q(b)) + " not in vocab)");
          continue;
        }
        joined.assign(a);
        joined.append(b);
        if (!tk.by_text.count(joined))
          missing_result.add("#" + std::to_string(i) + " " + q(a) + " + " + q(b) + " -> " + q(joined));
      }
      if (malformed.count)
        sink.add("TK009", Severity::error,
                 "tokenizer.json has malformed merges: " + malformed.list() +
                     "; expected \"left right\" (one space) or a [left, right] pair",
                 file, {}, "a merge written with a literal space inside a token, or a truncated list");
      if (missing_part.count)
        sink.add("TK006", Severity::error,
                 "tokenizer.json merges use tokens that are not in the vocabulary: " + missing_part.list(),
                 file, {}, "the tokenizers library refuses to build: merge token out of vocabulary");
      if (missing_result.count)
        sink.add("TK007", Severity::error,
                 "tokenizer.json merges produce tokens that are not in the vocabulary: " +
                     missing_result.list(),
                 file, {}, "the tokenizers library refuses to build: merge result out of vocabulary");
      if (not_byte_level.count)
        sink.add("TK008", Severity::error,
                 "tokenizer.json pre-tokenizer is ByteLevel but merges are not spelled in the byte-level "
                 "alphabet: " + not_byte_level.list(),
                 file, {},
                 "write bytes as their byte-level symbols (a space is 'Ġ', a newline 'Ċ'); a raw space "
                 "can never appear after ByteLevel pre-tokenization");
    }
    // A byte-level BPE without byte fallback must cover all 256 byte symbols.
    if (tk.byte_level && !model->get_bool("byte_fallback").value_or(false)) {
      Tally absent;
      for (const auto& s : byte_level_alphabet_sorted())
        if (!tk.by_text.count(s)) absent.add(q(s));
      if (absent.count)
        sink.add("TK018", Severity::warning,
                 "tokenizer.json is byte-level BPE but " + std::to_string(absent.count) +
                     " of the 256 byte symbols have no token: " + absent.list(),
                 file, {}, "text containing those bytes cannot be encoded and is silently dropped");
    }
  }

  // added_tokens: well-formed, one content per id, consistent with the vocabulary.
  const json::Value* added = root.find("added_tokens");
  if (added && !added->is_null()) {
    if (!added->is_array()) {
      sink.add("TK010", Severity::error, "tokenizer.json added_tokens is not a list", file, {},
               "the file was edited by hand");
    } else {
      Tally malformed, clash_ids, vocab_conflict;
      std::unordered_map<int64_t, std::string_view> added_by_id;
      for (size_t i = 0; i < added->as_array().size(); ++i) {
        const auto& e = added->as_array()[i];
        auto id = e.get_int("id");
        auto content = e.find("content");
        if (!id || *id < 0 || !content || !content->is_string() || content->as_string().empty()) {
          malformed.add("#" + std::to_string(i) + " " + e.dump().substr(0, 80));
          continue;
        }
        std::string_view text = content->as_string();
        auto [it, fresh] = added_by_id.emplace(*id, text);
        if (!fresh && it->second != text)
          clash_ids.add("id " + std::to_string(*id) + " = " + q(it->second) + " and " + q(text));
        auto v = tk.by_text.find(text);
        if (v != tk.by_text.end() && v->second != *id)
          vocab_conflict.add(q(text) + " is id " + std::to_string(*id) + " in added_tokens but " +
                             std::to_string(v->second) + " in model.vocab");
        else if (v == tk.by_text.end())
          tk.by_text.emplace(text, *id);
        tk.note_id(*id);
      }
      if (malformed.count)
        sink.add("TK010", Severity::error,
                 "tokenizer.json added_tokens has malformed entries: " + malformed.list() +
                     "; expected {\"id\": non-negative int, \"content\": non-empty string, ...}",
                 file, {}, "the tokenizers library refuses to load the file");
      if (clash_ids.count)
        sink.add("TK010", Severity::error,
                 "tokenizer.json added_tokens gives one id two contents: " + clash_ids.list(), file, {},
                 "two special tokens were appended with the same id");
      if (vocab_conflict.count)
        sink.add("TK011", Severity::warning,
                 "tokenizer.json added_tokens disagree with model.vocab: " + vocab_conflict.list(), file,
                 {}, "libraries differ on which id wins; encode and decode may not round-trip");
    }
  }
  tk.known = true;
}

void read_sentencepiece(const Checkpoint& ck, const FileEntry& fe, Tokens& tk, FindingSink& sink) {
  constexpr uint64_t kMax = 64ull << 20;
  if (!fe.readable()) return;  // the FS family reports unreadable files and LFS pointers
  if (fe.size > kMax) return;
  std::ifstream in(fe.abs, std::ios::binary);
  std::string bytes(size_t(fe.size), '\0');
  if (!in.read(bytes.data(), std::streamsize(bytes.size()))) return;
  auto pieces = sentencepiece_pieces(bytes);
  if (!pieces) {
    sink.add("TK003", Severity::error,
             "tokenizer.model is not a SentencePiece model (" + std::to_string(fe.size) +
                 " bytes that do not parse as a ModelProto with pieces)",
             fe.rel, {}, "a truncated download or another file saved under this name");
    return;
  }
  tk.owned = std::move(*pieces);
  tk.type = ModelType::Unigram;
  tk.source = fe.rel;
  for (size_t i = 0; i < tk.owned.size(); ++i) {
    tk.by_text.emplace(tk.owned[i], int64_t(i));
    tk.note_id(int64_t(i));
  }
  tk.known = true;
  (void)ck;
}

const json::Value* text_section(const json::Value& cfg) {
  for (const char* k : {"text_config", "language_config", "llm_config"}) {
    const json::Value* v = cfg.find(k);
    if (v && v->is_object()) return v;
  }
  return nullptr;
}

std::optional<int64_t> config_vocab_size(const Checkpoint& ck) {
  if (!ck.config.ok()) return std::nullopt;
  if (const json::Value* t = text_section(ck.config.value))
    if (auto v = t->get_int("vocab_size")) return v;
  return ck.config.value.get_int("vocab_size");
}

void collect_ids(const json::Value& obj, const std::string& where,
                 std::vector<std::pair<std::string, int64_t>>& out) {
  for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"}) {
    const json::Value* v = obj.find(key);
    if (!v) continue;
    if (v->is_int()) {
      out.emplace_back(where + key, v->as_int());
    } else if (v->is_array()) {
      size_t i = 0;
      for (const auto& e : v->as_array()) {
        if (e.is_int()) out.emplace_back(where + key + "[" + std::to_string(i) + "]", e.as_int());
        ++i;
      }
    }
  }
}

}  // namespace

std::vector<std::string> template_literal_tokens(std::string_view t) {
  std::vector<std::string> out;
  auto push = [&](std::string s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  };
  auto bad_inner = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '"' || c == '{' ||
           c == '}' || c == '<' || c == '>' || c == '+' || c == '~' || c == '%' || c == '\\';
  };
  // <|...|> and the full-width DeepSeek form <｜...｜>.
  const std::string_view opens[] = {"<|", "<\xEF\xBD\x9C"};
  const std::string_view closes[] = {"|>", "\xEF\xBD\x9C>"};
  for (int k = 0; k < 2; ++k) {
    size_t pos = 0;
    while ((pos = t.find(opens[k], pos)) != std::string_view::npos) {
      size_t start = pos + opens[k].size();
      size_t end = t.find(closes[k], start);
      pos = start;
      if (end == std::string_view::npos || end == start || end - start > 64) continue;
      std::string_view inner = t.substr(start, end - start);
      if (std::any_of(inner.begin(), inner.end(), bad_inner) || inner.find('|') != std::string_view::npos)
        continue;
      push(std::string(t.substr(pos - opens[k].size(), end + closes[k].size() - (pos - opens[k].size()))));
    }
  }
  for (std::string_view lit : {"<think>", "</think>", "<start_of_turn>", "<end_of_turn>"})
    if (t.find(lit) != std::string_view::npos) push(std::string(lit));
  return out;
}

void check_tokenizer(const Checkpoint& ck, const CheckInput& in, FindingSink& sink) {
  Tokens tk;
  const FileEntry* tj_file = ck.file("tokenizer.json");
  const FileEntry* spm = ck.file("tokenizer.model");
  bool slow_bpe = ck.file("vocab.json") && ck.file("merges.txt");
  bool tiktoken = false;
  for (const auto& f : ck.files)
    if (f.rel.size() > 9 && f.rel.ends_with(".tiktoken") && f.rel.find('/') == std::string::npos)
      tiktoken = true;
  bool json_unreadable = tj_file && (!tj_file->readable() || tj_file->size == 0);  // FS reports these

  if (ck.tokenizer.present && ck.tokenizer.error && !json_unreadable) {
    const auto& e = *ck.tokenizer.error;
    sink.add("TK002", Severity::error,
             "tokenizer.json is not valid JSON at " + std::to_string(e.line) + ":" +
                 std::to_string(e.column) + ": " + e.message,
             ck.tokenizer.file, {}, "a truncated download or a hand edit; re-fetch the file");
  } else if (ck.tokenizer.ok()) {
    read_tokenizer_json(ck.tokenizer, tk, sink);
  } else if (!tj_file && spm) {
    read_sentencepiece(ck, *spm, tk, sink);
  }
  tk.finish();
  if (!ck.tokenizer.present && !tj_file && !spm && !slow_bpe && !tiktoken) {
    sink.add("TK001", Severity::warning,
             "no tokenizer: expected tokenizer.json (or tokenizer.model, or vocab.json + merges.txt)", {},
             {},
             "loaders fall back to a degenerate one-token vocabulary that encodes every prompt, "
             "including '<think>', to []; copy the tokenizer files from the base model");
  }

  const std::string tc_file = ck.tokenizer_config.file.empty() ? "tokenizer_config.json"
                                                               : ck.tokenizer_config.file;
  // Unigram behind the generic fast class (SwiftLM #155).
  if (tk.known && tk.type == ModelType::Unigram && ck.tokenizer.ok() && ck.tokenizer_config.ok()) {
    auto cls = ck.tokenizer_config.value.get_string("tokenizer_class");
    if (cls && *cls == "PreTrainedTokenizerFast")
      sink.add("TK016", Severity::info,
               "tokenizer.json holds a Unigram model behind the generic tokenizer_class "
               "PreTrainedTokenizerFast; loaders that pick the model from the class expect BPE",
               tc_file, {},
               "swift-transformers before SwiftLM #155 routed this class to a BPE tokenizer and "
               "fatalErrored on the missing merges; name a Unigram class (e.g. T5TokenizerFast) if "
               "your engine needs it");
  }

  // Special tokens named by tokenizer_config.json must exist as single tokens.
  if (tk.known && ck.tokenizer_config.ok()) {
    const json::Value& tc = ck.tokenizer_config.value;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                            "mask_token"}) {
      const json::Value* v = tc.find(key);
      if (!v || v->is_null()) continue;
      auto text = token_text(*v);
      if (!text || text->empty() || tk.has(*text)) continue;
      sink.add("TK012", Severity::error,
               std::string("tokenizer_config.json ") + key + " is " + q(*text) + " but " + tk.source +
                   " has no such token",
               tc_file, {},
               "the special token was renamed or the tokenizer belongs to another model; the engine "
               "will encode it as several ordinary tokens or fail to find it");
    }
    if (const json::Value* extra = tc.find("additional_special_tokens"); extra && extra->is_array()) {
      Tally missing;
      for (const auto& e : extra->as_array()) {
        auto text = token_text(e);
        if (text && !text->empty() && !tk.has(*text)) missing.add(q(*text));
      }
      if (missing.count)
        sink.add("TK012", Severity::error,
                 "tokenizer_config.json additional_special_tokens names tokens that " + tk.source +
                     " does not have: " + missing.list(),
                 tc_file, {}, "the tokenizer was replaced without updating tokenizer_config.json");
    }
  }

  // How many ids the model can embed.
  std::optional<uint64_t> rows;
  std::string rows_what;
  std::string rows_file, rows_tensor;
  if (in.embedding) {
    rows = in.embedding->rows;
    rows_what = "embedding " + in.embedding->tensor + " has " + std::to_string(*rows) + " rows";
    rows_file = in.embedding->file;
    rows_tensor = in.embedding->tensor;
  } else if (auto vs = config_vocab_size(ck); vs && *vs > 0) {
    rows = uint64_t(*vs);
    rows_what = "config.json vocab_size is " + std::to_string(*vs);
    rows_file = ck.config.file;
  }

  // The tokenizer must fit the embedding (smaller is normal: padded vocabularies).
  if (tk.known && rows && tk.max_id >= 0 && uint64_t(tk.max_id) >= *rows) {
    uint64_t beyond = 0;
    for (int64_t id : tk.ids)
      if (uint64_t(id) >= *rows) ++beyond;
    sink.add("TK014", Severity::error,
             tk.source + " has token ids up to " + std::to_string(tk.max_id) + " (" +
                 std::to_string(beyond) + " ids at or beyond " + std::to_string(*rows) + ") but " +
                 rows_what + "; expected every id < " + std::to_string(*rows),
             tk.source, rows_tensor,
             "the tokenizer belongs to a larger model or tokens were added without resizing the "
             "embedding; those ids index past the embedding table");
  }

  // Token ids named in config.json / generation_config.json.
  std::vector<std::tuple<std::string, std::string, int64_t>> ids;  // file, field, id
  auto gather = [&](const JsonFile& jf) {
    if (!jf.ok()) return;
    std::vector<std::pair<std::string, int64_t>> v;
    collect_ids(jf.value, "", v);
    if (const json::Value* t = text_section(jf.value)) {
      std::string prefix = t == jf.value.find("text_config") ? "text_config." :
                           t == jf.value.find("language_config") ? "language_config." : "llm_config.";
      collect_ids(*t, prefix, v);
    }
    for (auto& [field, id] : v) ids.emplace_back(jf.file, field, id);
  };
  gather(ck.config);
  gather(ck.generation_config);
  for (const auto& [file, field, id] : ids) {
    if (id < 0) continue;  // -1 is a common "unset" placeholder
    if (rows && uint64_t(id) >= *rows) {
      sink.add("TK013", Severity::error,
               file + " " + field + " is " + std::to_string(id) + " but " + rows_what +
                   "; expected an id < " + std::to_string(*rows),
               file, {},
               "generation would look up a row that does not exist (or never stop, for eos); the id "
               "belongs to another model's tokenizer");
    } else if (tk.known && !tk.has_id(id)) {
      sink.add("TK017", Severity::warning,
               file + " " + field + " is " + std::to_string(id) + " but no token in " + tk.source +
                   " has that id (largest id " + std::to_string(tk.max_id) + ")",
               file, {}, "the id cannot be decoded to text; it probably belongs to another tokenizer");
    }
  }

  // Literal special tokens in the chat template(s) must be single tokens.
  if (tk.known) {
    std::vector<std::pair<std::string, std::string_view>> sources;  // file, text
    for (const auto& t : ck.templates) sources.emplace_back(t.file, t.text);
    if (ck.tokenizer_config.ok()) {
      if (const json::Value* ct = ck.tokenizer_config.value.find("chat_template")) {
        if (ct->is_string()) {
          sources.emplace_back(tc_file, ct->as_string());
        } else if (ct->is_array()) {
          for (const auto& e : ct->as_array())
            if (auto s = e.find("template"); s && s->is_string()) sources.emplace_back(tc_file, s->as_string());
        }
      }
    }
    if (ck.chat_template_json.ok())
      if (const json::Value* ct = ck.chat_template_json.value.find("chat_template"); ct && ct->is_string())
        sources.emplace_back(ck.chat_template_json.file, ct->as_string());
    for (const auto& [file, text] : sources) {
      for (const auto& lit : template_literal_tokens(text)) {
        if (tk.has(lit)) continue;
        sink.add("TK015", Severity::error,
                 "the chat template emits " + q(lit) + " as a literal but " + tk.source +
                     " has no such token; expected it to encode to one id",
                 file, {},
                 "it will be split into several ordinary tokens (or encode to [] with a degenerate "
                 "tokenizer), so the model never sees the marker it was trained on");
      }
    }
  }
}

std::optional<EmbeddingInfo> find_embedding(const Checkpoint& ck, std::string_view preferred_prefix) {
  static const std::string_view suffixes[] = {
      "embed_tokens.weight", "embed_tokens.weight_packed", "embed_tokens.qweight", "wte.weight",
      "tok_embeddings.weight", "word_embeddings.weight", "embeddings.word_embeddings.weight",
      "embedding.weight"};
  static const std::string_view skip[] = {"per_layer", "vision", "audio", "mtp", "visual", "position",
                                          "draft", "speech", "image"};
  const Checkpoint::WeightTensor* best = nullptr;
  std::string best_name;
  int best_rank = 1 << 30;
  for (const auto& [name, wt] : ck.weights()) {
    int rank = -1;
    for (size_t i = 0; i < std::size(suffixes); ++i) {
      std::string_view s = suffixes[i];
      if (name.size() >= s.size() && std::string_view(name).substr(name.size() - s.size()) == s &&
          (name.size() == s.size() || name[name.size() - s.size() - 1] == '.')) {
        rank = int(i);
        break;
      }
    }
    if (rank < 0) continue;
    bool skipped = false;
    for (auto sk : skip)
      if (name.find(sk) != std::string::npos) skipped = true;
    if (skipped) continue;
    if (!preferred_prefix.empty() && !std::string_view(name).starts_with(preferred_prefix)) rank += 100;
    rank = rank * 1000 + int(std::min<size_t>(name.size(), 999));
    if (!wt.entry || wt.entry->shape.empty()) continue;
    if (rank < best_rank) {
      best_rank = rank;
      best = &wt;
      best_name = name;
    }
  }
  if (!best) return std::nullopt;
  EmbeddingInfo e;
  e.rows = best->entry->shape[0];
  e.tensor = best_name;
  e.file = best->shard ? best->shard->file : std::string();
  return e;
}

}  // namespace ckpt::tok
