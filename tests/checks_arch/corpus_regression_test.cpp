// Issue 13's regression suite from real files: every real layout of corpus/configs as a
// stand-in a user would download — the real config.json, tokenizer_config.json and
// generation_config.json, shards laid out exactly as the real index maps them (or one shard of
// the registry's plan for config-only folders), a tokenizer.json carrying the real special
// tokens at their real ids, and the real chat template of the family where the model's own
// tokenizer_config.json has none — must verify with no error, with every side file read; and
// each planted defect of the classes must be an error naming its file and field or
// tensor.
#include "corpus_standins.h"

namespace ckpt::test {
namespace {

using namespace corpus;

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
