// The issue-13 stand-ins of the real corpus layouts, shared by the regression suite
// (corpus_regression_test.cpp) and the golden-findings test (golden_findings_test.cpp): the
// real config.json, tokenizer_config.json and generation_config.json, shards laid out exactly
// as the real index maps them (or one shard of the registry's plan for config-only folders), a
// tokenizer.json carrying the real special tokens at their real ids, and the family's real
// chat template where the model's own tokenizer_config.json has none.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "ckpt/tokenizer.h"
#include "helpers.h"

namespace ckpt::test::corpus {

inline std::string slurp(const std::filesystem::path& p) { return read_text(p); }

// The family's real template for layouts whose tokenizer_config.json carries none.
inline const char* family_template(const std::string& dir) {
  if (dir == "gpt-oss-20b") return "llama.cpp/openai-gpt-oss-120b.jinja";
  if (dir == "Llama-3.2-3B") return "llama.cpp/meta-llama-Llama-3.2-3B-Instruct.jinja";
  if (dir == "Llama-3.1-8B-Computer-Networks") return "llama.cpp/meta-llama-Llama-3.1-8B-Instruct.jinja";
  if (dir == "Qwen3.5-9B-multimodal" || dir == "Qwen3.5-25B-REAP-A3B-Coding") return "llama.cpp/Qwen3.5-4B.jinja";
  if (dir == "Devstral-Small-2507") return "llama.cpp/unsloth-mistral-Devstral-Small-2507.jinja";
  return nullptr;
}

// The layout whose tokenizer_config.json lists the special tokens (REAP ships none of its own:
// it is a pruned Qwen3.5 with the family's tokenizer).
inline std::string tokens_from(const std::string& dir) {
  return dir == "Qwen3.5-25B-REAP-A3B-Coding" ? "Qwen3.5-9B-multimodal" : dir;
}

// A byte-level BPE tokenizer.json holding the real added tokens of `tc` at their real ids,
// plus the 256 byte symbols and two merges at ids no added token uses. Empty when the real
// tokenizer_config.json lists no added tokens (the real vocabulary cannot be reconstructed).
inline std::string tokenizer_with_real_specials(const json::Value& tc) {
  const json::Value* added = tc.find("added_tokens_decoder");
  if (!added || !added->is_object() || added->as_object().empty()) return "";
  std::set<int64_t> used;
  json::Array added_list;
  json::Object vocab;
  for (const auto& [id, tok] : added->as_object()) {
    const int64_t n = std::stoll(id);
    used.insert(n);
    json::Object e;
    e.emplace_back("id", n);
    e.emplace_back("content", tok.get_string("content").value_or(""));
    e.emplace_back("single_word", false);
    e.emplace_back("lstrip", false);
    e.emplace_back("rstrip", false);
    e.emplace_back("normalized", false);
    e.emplace_back("special", tok.get_bool("special").value_or(true));
    added_list.emplace_back(std::move(e));
    vocab.emplace_back(tok.get_string("content").value_or(""), n);
  }
  int64_t next = 0;
  auto fresh = [&] {
    while (used.count(next)) ++next;
    used.insert(next);
    return next;
  };
  for (const auto& sym : tok::byte_level_alphabet_sorted()) vocab.emplace_back(sym, fresh());
  vocab.emplace_back("he", fresh());
  vocab.emplace_back("ll", fresh());
  json::Object model;
  model.emplace_back("type", "BPE");
  model.emplace_back("vocab", json::Value(std::move(vocab)));
  model.emplace_back("merges", json::Array{json::Value("h e"), json::Value("l l")});
  json::Object pre;
  pre.emplace_back("type", "ByteLevel");
  pre.emplace_back("add_prefix_space", false);
  json::Object doc;
  doc.emplace_back("version", "1.0");
  doc.emplace_back("added_tokens", json::Value(std::move(added_list)));
  doc.emplace_back("pre_tokenizer", json::Value(std::move(pre)));
  doc.emplace_back("model", json::Value(std::move(model)));
  return json::Value(std::move(doc)).dump();
}

struct StandIn {
  TempDir dir;
  bool has_template = false;   // the stand-in carries a chat template (its own or the family's)
  bool has_tokenizer = false;  // a tokenizer.json with the real special tokens was written
};

// shapes for the real index's names, from the registry (as tests/checks_arch/corpus_standin_test.cpp)
inline std::vector<T> layout_tensors(const std::string& dir, std::map<std::string, std::string>& file_of) {
  auto root = corpus_dir() / "configs" / dir;
  std::string cfg_text = slurp(root / "config.json");
  if (!std::filesystem::exists(root / "model.safetensors.index.json")) {
    auto ts = plan_for(cfg_text, true, false);
    for (const auto& t : ts) file_of[t.name] = "model.safetensors";
    return ts;
  }
  json::Value cfg = parse_json(cfg_text);
  json::Value idx = parse_json(slurp(root / "model.safetensors.index.json"));
  std::set<std::string> names;
  for (const auto& [k, v] : idx.find("weight_map")->as_object()) {
    names.insert(k);
    file_of[k] = v.as_string();
  }
  auto view = arch::resolve_config(cfg, [&](std::string_view n) { return names.count(std::string(n)) > 0; });
  auto scheme = quant::parse_scheme(cfg);
  auto plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
  std::map<std::string, const arch::ExpectedTensor*> by;
  for (const auto& x : plan) by[std::string(x.name)] = &x;
  std::vector<T> out;
  for (const auto& n : names) {
    auto it = by.find(n);
    st::DType dtype = st::DType::F32;
    std::vector<uint64_t> shape{64};
    if (it != by.end()) {
      dtype = arch::resolve_dtype(it->second->dtype, view.model_dtype);
      shape = it->second->shape;
    } else if (n.find("rotary_emb.inv_freq") == std::string::npos) {
      ADD_FAILURE() << dir << ": no shape for " << n;
      continue;
    }
    if (dir == "Qwen3.5-9B-multimodal" &&
        (n.find("linear_attn.A_log") != std::string::npos || n.find("linear_attn.norm") != std::string::npos))
      dtype = st::DType::F32;  // as the real checkpoint stores them (corpus_index_test.cpp)
    out.push_back({n, dtype, shape});
  }
  return out;
}

// `require_json`: the real side files must parse (the regression suite's promise, an
// EXPECT). Without it (the golden-findings test, which records whatever the tree says) a side
// file json::parse declines is copied as it is and no tokenizer.json is derived from it.
inline std::unique_ptr<StandIn> make_standin(const std::string& dir, bool require_json = true) {
  auto s = std::make_unique<StandIn>();
  auto root = corpus_dir() / "configs" / dir;
  std::map<std::string, std::string> file_of;
  auto ts = layout_tensors(dir, file_of);
  std::map<std::string, std::vector<st::TensorToWrite>> by_file;
  for (const auto& t : ts) by_file[file_of.at(t.name)].push_back({t.name, t.dtype, t.shape, {}});
  for (auto& [file, tensors] : by_file) EXPECT_EQ(st::write_file(s->dir / file, tensors), "") << file;
  for (const char* side : {"config.json", "tokenizer_config.json", "generation_config.json",
                           "model.safetensors.index.json", "quantize_config.json"})
    if (std::filesystem::exists(root / side)) std::filesystem::copy_file(root / side, s->dir / side);
  auto read_json = [&](const std::filesystem::path& p) -> std::optional<json::Value> {
    if (require_json) return parse_json(slurp(p));
    auto r = json::parse(slurp(p));
    if (!r.ok()) return std::nullopt;
    return std::move(r.value);
  };
  if (std::filesystem::exists(root / "tokenizer_config.json")) {
    // Python's json reads the real files (1e30 ints included); so must the stand-in's builder.
    if (const auto tc = read_json(root / "tokenizer_config.json")) {
      const auto* ct = tc->find("chat_template");
      s->has_template = ct && !ct->is_null();
    } else {
      s->has_template = slurp(root / "tokenizer_config.json").find("\"chat_template\"") != std::string::npos;
    }
    const auto tok_root = corpus_dir() / "configs" / tokens_from(dir) / "tokenizer_config.json";
    const auto specials = read_json(tok_root);
    std::string tj = specials ? tokenizer_with_real_specials(*specials) : std::string();
    if (!tj.empty()) {
      write_text(s->dir / "tokenizer.json", tj);
      s->has_tokenizer = true;
    }
  }
  if (!s->has_template)
    if (const char* t = family_template(dir)) {
      std::filesystem::copy_file(corpus_dir() / "templates" / t, s->dir / "chat_template.jinja");
      s->has_template = true;
    }
  return s;
}

}  // namespace ckpt::test::corpus
