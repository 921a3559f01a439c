// Issue 13's regression suite from real files: every real layout of corpus/configs as a
// stand-in a user would download — the real config.json, tokenizer_config.json and
// generation_config.json, shards laid out exactly as the real index maps them (or one shard of
// the registry's plan for config-only folders), a tokenizer.json carrying the real special
// tokens at their real ids, and the real chat template of the family where the model's own
// tokenizer_config.json has none — must verify with no error, with every side file read; and
// each planted defect of the classes must be an error naming its file and field or
// tensor.
#include <set>

#include "ckpt/tokenizer.h"
#include "helpers.h"

namespace ckpt::test {
namespace {

std::string slurp(const std::filesystem::path& p) { return read_text(p); }

// The family's real template for layouts whose tokenizer_config.json carries none.
const char* family_template(const std::string& dir) {
  if (dir == "gpt-oss-20b") return "llama.cpp/openai-gpt-oss-120b.jinja";
  if (dir == "Llama-3.2-3B") return "llama.cpp/meta-llama-Llama-3.2-3B-Instruct.jinja";
  if (dir == "Llama-3.1-8B-Computer-Networks") return "llama.cpp/meta-llama-Llama-3.1-8B-Instruct.jinja";
  if (dir == "Qwen3.5-9B-multimodal" || dir == "Qwen3.5-25B-REAP-A3B-Coding") return "llama.cpp/Qwen3.5-4B.jinja";
  if (dir == "Devstral-Small-2507") return "llama.cpp/unsloth-mistral-Devstral-Small-2507.jinja";
  return nullptr;
}

// The layout whose tokenizer_config.json lists the special tokens (REAP ships none of its own:
// it is a pruned Qwen3.5 with the family's tokenizer).
std::string tokens_from(const std::string& dir) {
  return dir == "Qwen3.5-25B-REAP-A3B-Coding" ? "Qwen3.5-9B-multimodal" : dir;
}

// A byte-level BPE tokenizer.json holding the real added tokens of `tc` at their real ids,
// plus the 256 byte symbols and two merges at ids no added token uses. Empty when the real
// tokenizer_config.json lists no added tokens (the real vocabulary cannot be reconstructed).
std::string tokenizer_with_real_specials(const json::Value& tc) {
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
std::vector<T> layout_tensors(const std::string& dir, std::map<std::string, std::string>& file_of) {
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
  for (const auto& x : plan) by[x.name] = &x;
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

std::unique_ptr<StandIn> make_standin(const std::string& dir) {
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
  if (std::filesystem::exists(root / "tokenizer_config.json")) {
    // Python's json reads the real files (1e30 ints included); so must the stand-in's builder.
    const json::Value tc = parse_json(slurp(root / "tokenizer_config.json"));
    const auto* ct = tc.find("chat_template");
    s->has_template = ct && !ct->is_null();
    const auto tok_root = corpus_dir() / "configs" / tokens_from(dir) / "tokenizer_config.json";
    std::string tj = tokenizer_with_real_specials(parse_json(slurp(tok_root)));
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

std::string errors_of(const std::vector<Finding>& fs) {
  std::string errors;
  for (const auto& f : fs)
    if (f.severity == Severity::error) errors += "  " + f.code + " " + f.file + " " + f.tensor + ": " + f.message + "\n";
  return errors;
}

const Finding* find_code(const std::vector<Finding>& fs, const std::string& code, const std::string& needle = "") {
  for (const auto& f : fs)
    if (f.code == code && (needle.empty() || f.message.find(needle) != std::string::npos)) return &f;
  return nullptr;
}

const char* const kLayouts[] = {
    "3PRYMMAL-PHI3-3B-SLERP", "DeepSeek-R1", "DeepSeek-V3-config", "Devstral-Small-2507", "Genz-70b-GPTQ",
    "Llama-2-7b-hf", "Llama-3.1-8B-Computer-Networks", "Llama-3.2-3B", "Orpheus_3B_Quantized",
    "Qwen1.5-0.5B-Chat-dense", "Qwen3-1.7B-MLX-bf16", "Qwen3-14B-MLX-4bit", "Qwen3.5-25B-REAP-A3B-Coding",
    "Qwen3.5-9B-multimodal", "Reflection-Llama-3.1-70B", "WizardLM-2-8x22B", "cogito-v1-preview-qwen-14B",
    "dolphin-2.5-mixtral-8x7b", "gemma-2-2b-poem", "gemma-2b-finetune", "gemma-3-1b-it", "gpt-oss-20b",
    "medgemma-27b-it", "mimo_kor", "phi-3-mini-keyformer", "sakura-14b-qwen2.5-v1.0"};

class RealLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(RealLayout, VerifiesCleanAndReadsEverySideFile) {
  CKPT_REQUIRE_CORPUS();
  const std::string dir = GetParam();
  auto s = make_standin(dir);
  auto r = load_checkpoint(s->dir.path().string());
  ASSERT_TRUE(r.checkpoint) << (r.error ? r.error->message : "");
  const Checkpoint& ck = *r.checkpoint;
  // every side file the real folder has was read, none reported absent or unreadable
  for (const JsonFile* jf : {&ck.config, &ck.tokenizer_config, &ck.generation_config})
    if (jf->present) EXPECT_TRUE(jf->ok()) << dir << ": " << jf->file << ": " << (jf->error ? jf->error->message : "");
  EXPECT_EQ(ck.tokenizer_config.present, std::filesystem::exists(corpus_dir() / "configs" / dir / "tokenizer_config.json"));
  for (const auto& t : ck.templates) EXPECT_TRUE(t.ok()) << t.file << ": " << t.error;
  auto fs = run_checks(ck);
  EXPECT_EQ(errors_of(fs), "") << dir;
  for (const char* never : {"FS011", "CT010", "TK019"}) EXPECT_EQ(find_code(fs, never), nullptr) << dir << ": " << never;
  // the template was found where the real files have one, and probed
  EXPECT_EQ(find_code(fs, "CT007") == nullptr, s->has_template) << dir;
}

INSTANTIATE_TEST_SUITE_P(Corpus, RealLayout, ::testing::ValuesIn(kLayouts), [](const auto& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// The seeds' incident on a real layout: only the brace is lost.
TEST(RealLayoutDefects, OneBraceShortTemplateFailsTheGate) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("Qwen3-1.7B-MLX-bf16");
  std::string tc = slurp(s->dir / "tokenizer_config.json");
  json::Value v = parse_json(tc);
  std::string tmpl = "{- bos_token -}}" + v.get_string("chat_template").value();
  for (auto& m : v.mutable_object())
    if (m.first == "chat_template") m.second = tmpl;
  write_text(s->dir / "tokenizer_config.json", v.dump());
  auto fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "CT006", "broken tag '{- bos_token -}}'");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_EQ(f->file, "tokenizer_config.json");
  EXPECT_NE(f->message.find("chat_template:1:1"), std::string::npos) << f->message;
  auto cli = run_ckpt({"verify", s->dir.path().string()});
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
}

// A template syntax error in a file that also carries Python-only JSON (a 1e30 integer) is
// found: the file is read, not dropped.
TEST(RealLayoutDefects, TemplateErrorBehindABigIntegerIsFound) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("medgemma-27b-it");
  std::string tc = slurp(s->dir / "tokenizer_config.json");
  ASSERT_NE(tc.find("1000000000000000019884624838656"), std::string::npos);
  const std::string needle = "{{ bos_token }}";
  auto p = tc.find(needle);
  ASSERT_NE(p, std::string::npos);
  tc.replace(p, needle.size(), "{{ bos_token }");
  write_text(s->dir / "tokenizer_config.json", tc);
  auto fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "CT001");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->file, "tokenizer_config.json");
  EXPECT_EQ(find_code(fs, "CT007"), nullptr);
}

// The real gpt-oss-20b layout with its real special tokens and the family's template: the
// <|final|> in a {#- #} comment is not a literal. A literal the template really prints and the
// tokenizer lacks is still caught, with its probe.
TEST(RealLayoutDefects, GptOssCommentIsNotALiteralButAPrintedOneIs) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("gpt-oss-20b");
  ASSERT_TRUE(s->has_tokenizer);
  std::string t = slurp(s->dir / "chat_template.jinja");
  ASSERT_NE(t.find("<|final|>"), std::string::npos);
  auto fs = verify_dir(s->dir.path());
  EXPECT_EQ(find_code(fs, "TK015"), nullptr) << dump(fs);
  write_text(s->dir / "chat_template.jinja", "<|analysis|>" + t);
  fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "TK015", "'<|analysis|>'");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->file, "chat_template.jinja");
  EXPECT_NE(f->message.find("probe 'bare'"), std::string::npos) << f->message;
}

// Name the cause: gemma3 without hidden_size gets the loader's default against the tensors.
TEST(RealLayoutDefects, MissingFieldWhoseDefaultContradictsTheTensors) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("gemma-3-1b-it");
  json::Value cfg = parse_json(slurp(s->dir / "config.json"));
  const int64_t H = cfg.get_int("hidden_size").value();
  json::Object kept;
  for (auto& m : cfg.as_object())
    if (m.first != "hidden_size") kept.push_back(m);
  write_text(s->dir / "config.json", json::Value(std::move(kept)).dump());
  auto fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "CF011", "hidden_size is absent");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_EQ(f->file, "config.json");
  EXPECT_NE(f->message.find("default 2304"), std::string::npos) << f->message;
  EXPECT_NE(f->message.find("hidden_size = " + std::to_string(H)), std::string::npos) << f->message;
  EXPECT_EQ(f->tensor, "model.embed_tokens.weight");
}

// A side file that does not parse is an error naming it and its position, and the template
// it hides is said to be unchecked — never "no chat template".
TEST(RealLayoutDefects, BrokenSideFilesAreFindingsNotAbsences) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("medgemma-27b-it");
  std::string tc = slurp(s->dir / "tokenizer_config.json");
  tc.insert(tc.rfind('}'), ",");  // a trailing comma: Python's json refuses it
  write_text(s->dir / "tokenizer_config.json", tc);
  write_text(s->dir / "generation_config.json", "{\"eos_token_id\": [1, 106],}");
  auto fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "FS011", "tokenizer_config.json:");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->file, "tokenizer_config.json");
  EXPECT_NE(find_code(fs, "FS011", "generation_config.json:1:27"), nullptr) << dump(fs);
  EXPECT_NE(find_code(fs, "CT010", "tokenizer_config.json did not parse"), nullptr) << dump(fs);
  EXPECT_EQ(find_code(fs, "CT007"), nullptr) << dump(fs);
  EXPECT_NE(find_code(fs, "TK019"), nullptr) << dump(fs);
}

// A per-module override that contradicts the packed tensors, on the real MLX 4-bit layout:
// mlx-lm applies the module's own entry, so 8 bits over 4-bit words is an error naming it.
TEST(RealLayoutDefects, PerModuleOverrideAgainstPackedGeometry) {
  CKPT_REQUIRE_CORPUS();
  auto s = make_standin("Qwen3-14B-MLX-4bit");
  EXPECT_EQ(errors_of(verify_dir(s->dir.path())), "");
  json::Value cfg = parse_json(slurp(s->dir / "config.json"));
  for (auto& m : cfg.mutable_object())
    if (m.first == "quantization" || m.first == "quantization_config")
      m.second.mutable_object().emplace_back("model.layers.0.mlp.down_proj",
                                             json::Object{{"group_size", 64}, {"bits", 8}});
  write_text(s->dir / "config.json", cfg.dump());
  auto fs = verify_dir(s->dir.path());
  const Finding* f = find_code(fs, "QZ003", "model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(f, nullptr) << dump(fs);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_NE(f->message.find("model.layers.0.mlp.down_proj"), std::string::npos) << f->message;
  EXPECT_NE(f->hint.find("4 bits"), std::string::npos) << f->hint;
}

}  // namespace
}  // namespace ckpt::test
