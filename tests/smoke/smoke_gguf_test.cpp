// ckpt smoke over GGUF files. The trained tiny models (tools/smoke/train_tiny.py, cached by
// ensure_model.py) are converted by tools/smoke/to_gguf.py, an independent Python writer and
// quantizer written from specs/gguf.md (q/k rows permuted for arch llama as llama.cpp's converter
// does), which writes beside the GGUF the baseline torch computes on the weights it dequantized.
//  - the clean GGUF is judged ok; its NLL matches that baseline and its logits match
//    tests/smoke/torch_forward.py on the dequantized float copy;
//  - the built-in text, encoded from the GGUF's own vocabulary, gives the model's smoke ids;
//  - a planted defect (tools/smoke/plant_gguf_defect.py) is not ok and names its layer;
//  - ckpt's decoders read exactly the values the Python writer's decoders read (Q4_K included,
//    which the 64-wide tiny models cannot hold), and @huggingface/gguf reads the writer's
//    metadata and tensor infos as ckpt does;
//  - `ckpt fixture llama --format gguf` output runs without a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/encode.h"
#include "ckpt/gguf.h"
#include "ckpt/json.h"
#include "ckpt/smoke.h"
#include "inspect/dequant.h"
#include "smoke_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ckpt;

namespace {

using namespace test::smoke_support;

std::vector<uint32_t> ids_in(const fs::path& dir) { return smoke_ids_of(dir); }

smoke::Options options() {
  smoke::Options o;
  o.threads = 2;
  o.max_tokens = 0;
  return o;
}

// The pass over the model's own smoke ids (those it was trained and baselined on).
smoke::Result smoke_ids(const fs::path& gguf, std::vector<float>* logits = nullptr) {
  auto loaded = load_checkpoint(gguf.string());
  EXPECT_FALSE(loaded.error) << (loaded.error ? loaded.error->message : "");
  if (loaded.error) return {};
  return smoke::run_tokens(*loaded.checkpoint, ids_in(gguf.parent_path()), options(), logits);
}

std::string describe(const smoke::Result& r) {
  std::string s = std::string(smoke::verdict_name(r.verdict)) + " ppl " + std::to_string(r.perplexity) + " baseline " +
                  std::to_string(r.baseline_perplexity) + " first_broken " + std::to_string(r.first_broken_layer) +
                  " tokenizer '" + r.tokenizer + "'";
  for (const auto& f : r.findings) s += "\n  " + f.code + ": " + f.message;
  return s;
}

// tools/smoke/to_gguf.py MODEL OUT.gguf --type T [--float-copy DIR]
fs::path convert(const fs::path& model, const fs::path& dir, const std::string& type, const fs::path& float_copy = {}) {
  const fs::path out = dir / "model.gguf";
  std::vector<std::string> argv = {kPython, source("tools/smoke/to_gguf.py"), model.string(), out.string(), "--type", type};
  if (!float_copy.empty()) argv.insert(argv.end(), {"--float-copy", float_copy.string()});
  auto r = test::run_program(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

struct Case {
  std::string family, type;
};

class SmokeGguf : public ::testing::TestWithParam<Case> {};

TEST_P(SmokeGguf, CleanIsOkMatchesTorchAndEncodesItsOwnVocabulary) {
  REQUIRE_TORCH();
  const Case& c = GetParam();
  const fs::path model = trained(c.family);
  test::TempDir tmp;
  const fs::path gguf = convert(model, tmp / "q", c.type, tmp / "float");
  ASSERT_TRUE(fs::exists(gguf));
  std::vector<float> logits;
  smoke::Result r = smoke_ids(gguf, &logits);
  EXPECT_EQ(r.verdict, smoke::Verdict::ok) << describe(r);
  EXPECT_EQ(r.family, c.family) << describe(r);
  ASSERT_FALSE(r.baseline_file.empty()) << describe(r);
  EXPECT_NEAR(std::log(r.perplexity), std::log(r.baseline_perplexity), kNllTolerance) << describe(r);

  // Logits against the torch reference on the dequantized float copy (q/k rows in HF order).
  auto ref = test::run_program({kPython, source("tests/smoke/torch_forward.py"), (tmp / "float").string(), "--tokens",
                                (tmp / "q" / "smoke_tokens.json").string(), "--out", (tmp / "torch.json").string()});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  auto parsed = json::parse(test::read_text(tmp / "torch.json"));
  ASSERT_TRUE(parsed.ok());
  const auto& rows = parsed.value.find("logits")->as_array();
  const size_t T = r.tokens.size();
  ASSERT_EQ(rows.size(), T);
  const size_t V = rows[0].as_array().size();
  ASSERT_EQ(logits.size(), T * V);
  double worst = 0;
  for (size_t i = 0; i < T; ++i)
    for (size_t j = 0; j < V; ++j) worst = std::max(worst, std::fabs(double(logits[i * V + j]) - rows[i].as_array()[j].as_double()));
  EXPECT_LE(worst, kLogitTolerance);
  EXPECT_NEAR(std::log(r.perplexity), parsed.value.find("nll_mean")->as_double(), kNllTolerance);

  // What a user runs: `ckpt smoke MODEL.gguf`, the built-in text through the GGUF's vocabulary.
  auto loaded = load_checkpoint(gguf.string());
  ASSERT_FALSE(loaded.error);
  smoke::Result u = smoke::run(*loaded.checkpoint, "", options());
  EXPECT_EQ(u.tokens, ids_in(model)) << describe(u);
  EXPECT_NE(u.tokenizer.find("GGUF vocabulary"), std::string::npos) << u.tokenizer;
  EXPECT_EQ(u.verdict, smoke::Verdict::ok) << describe(u);
  EXPECT_FALSE(u.baseline_file.empty()) << describe(u);
  for (const auto& f : u.findings) EXPECT_NE(f.code, "SM008") << f.message;
}

std::vector<Case> clean_cases() {
  std::vector<Case> out;
  for (const char* f : {"llama", "qwen2", "qwen3", "gemma"})
    for (const char* t : {"f16", "q8_0", "q4_0", "q4_k"}) out.push_back({f, t});
  out.push_back({"llama", "f32"});
  out.push_back({"llama", "bf16"});
  out.push_back({"qwen3_moe", "q8_0"});
  out.push_back({"mixtral", "q4_0"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Types, SmokeGguf, ::testing::ValuesIn(clean_cases()),
                         [](const auto& info) { return info.param.family + "_" + info.param.type; });

struct Defect {
  std::string family, type, defect;
  int layer;
};

class SmokeGgufDefect : public ::testing::TestWithParam<Defect> {};

TEST_P(SmokeGgufDefect, IsNotOkAndNamesTheLayer) {
  REQUIRE_TORCH();
  const Defect& d = GetParam();
  test::TempDir tmp;
  const fs::path gguf = convert(trained(d.family), tmp / "q", d.type);
  const fs::path broken = tmp / "broken" / "model.gguf";
  auto planted = test::run_program({kPython, source("tools/smoke/plant_gguf_defect.py"), gguf.string(), broken.string(), d.defect,
                                    "--layer", std::to_string(d.layer)});
  ASSERT_EQ(planted.exit_code, 0) << planted.err;
  smoke::Result r = smoke_ids(broken);
  EXPECT_NE(r.verdict, smoke::Verdict::ok) << describe(r);
  EXPECT_NE(r.verdict, smoke::Verdict::not_run) << describe(r);
  EXPECT_EQ(r.first_broken_layer, d.layer) << describe(r);
}

std::vector<Defect> defect_cases() {
  std::vector<Defect> out;
  for (const char* f : {"llama", "qwen2", "qwen3", "gemma"}) {
    for (int layer : {0, 1, 2}) out.push_back({f, "q8_0", "scales-shifted", layer});
    out.push_back({f, "q4_0", "scales-shifted", 1});
    out.push_back({f, "f16", "transpose-square", 1});
  }
  out.push_back({"llama", "q4_k", "scales-shifted", 2});
  out.push_back({"llama", "q8_0", "transpose-square", 0});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Planted, SmokeGgufDefect, ::testing::ValuesIn(defect_cases()), [](const auto& info) {
  std::string n = info.param.family + "_" + info.param.type + "_" + info.param.defect + "_layer" + std::to_string(info.param.layer);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

// The writer's decoders and ckpt's agree value for value, in every type it writes, on rows
// 512 wide (Q4_K's 256-element super-blocks, which no tiny smoke model can hold).
TEST(SmokeGgufWriter, CkptDecodesWhatThePythonWriterDecodes) {
  REQUIRE_TORCH();
  test::TempDir tmp;
  const fs::path file = tmp / "types.gguf";
  auto made = test::run_program({kPython, source("tools/smoke/to_gguf.py"), file.string(), "--self-test"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto expect = json::parse(test::read_text(file.string() + ".json"));
  ASSERT_TRUE(expect.ok());
  auto loaded = load_checkpoint(file.string());
  ASSERT_FALSE(loaded.error);
  auto weights = diff::dequant::weights_of(*loaded.checkpoint);
  size_t checked = 0;
  for (const auto& [name, rows] : expect.value.as_object()) {
    auto it = weights.by_name.find(name);
    ASSERT_NE(it, weights.by_name.end()) << name;
    std::string e;
    auto reader = diff::dequant::open_reader(it->second, e);
    ASSERT_TRUE(reader) << e;
    std::vector<float> got(it->second.rows * it->second.cols);
    ASSERT_TRUE(reader->read(0, it->second.rows, got.data(), e)) << e;
    const auto& want = rows.as_array();
    ASSERT_EQ(want.size(), it->second.rows);
    for (size_t i = 0; i < want.size(); ++i)
      for (size_t j = 0; j < it->second.cols; ++j)
        ASSERT_EQ(got[i * it->second.cols + j], float(want[i].as_array()[j].as_double())) << name << " [" << i << ", " << j << "]";
    ++checked;
  }
  EXPECT_EQ(checked, 7u);
}

// @huggingface/gguf (tests/oracles) reads the writer's metadata and tensor infos as ckpt does.
TEST(SmokeGgufWriter, HuggingfaceGgufReadsTheWriterAsCkptDoes) {
  REQUIRE_TORCH();
  const fs::path oracle = source("tests/oracles/node_modules/@huggingface/gguf");
  if (!fs::exists(oracle) || !fs::exists("/usr/bin/node")) GTEST_SKIP() << "skipped: tests/oracles/node_modules is not installed";
  test::TempDir tmp;
  const fs::path gguf = convert(trained("qwen3"), tmp / "q", "q8_0");
  auto r = test::run_program({"/usr/bin/node", source("tests/oracles/gguf_read.mjs"), gguf.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto hf = json::parse(r.out);
  ASSERT_TRUE(hf.ok());
  const gguf::File g = gguf::read_file(gguf);
  ASSERT_TRUE(g.parsed);
  const auto& md = *hf.value.find("metadata");
  for (const auto& kv : g.kvs) {
    const json::Value* v = md.find(kv.key);
    ASSERT_TRUE(v) << kv.key;
    if (kv.value.type == gguf::ValueType::STRING) {
      EXPECT_EQ(v->as_string(), std::string(kv.value.str)) << kv.key;
    } else if (kv.value.is_integer()) {
      EXPECT_EQ(v->as_string(), std::to_string(*kv.value.as_uint())) << kv.key;
    } else if (kv.value.is_array()) {
      EXPECT_EQ(v->as_array().size(), kv.value.count) << kv.key;
    }
  }
  const auto& tensors = hf.value.find("tensors")->as_array();
  ASSERT_EQ(tensors.size(), g.tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].get_string("name").value_or(""), std::string(g.tensors[i].name));
    EXPECT_EQ(tensors[i].find("dtype")->as_int(), g.tensors[i].type) << g.tensors[i].name;
    EXPECT_EQ(tensors[i].get_string("offset").value_or(""), std::to_string(g.tensors[i].offset)) << g.tensors[i].name;
    const auto& shape = tensors[i].find("shape")->as_array();
    ASSERT_EQ(shape.size(), g.tensors[i].n_dims);
    for (size_t d = 0; d < shape.size(); ++d) EXPECT_EQ(shape[d].as_string(), std::to_string(g.tensors[i].ne[d]));
  }
  EXPECT_EQ(hf.value.get_string("tensorDataOffset").value_or(""), std::to_string(g.data_start));
}

// A GGUF vocabulary ckpt does not model is refused with its name, never guessed.
TEST(SmokeGgufVocab, UnmodelledPreTokenizerIsRefused) {
  test::TempDir tmp;
  using gguf::WriteValue;
  const fs::path file = tmp / "v.gguf";
  auto kvs = std::vector<std::pair<std::string, WriteValue>>{
      {"general.architecture", WriteValue::string("llama")},
      {"tokenizer.ggml.model", WriteValue::string("gpt2")},
      {"tokenizer.ggml.pre", WriteValue::string("deepseek-llm")},
      {"tokenizer.ggml.tokens", WriteValue::string_array({"a", "b", "ab"})},
      {"tokenizer.ggml.merges", WriteValue::string_array({"a b"})}};
  ASSERT_EQ(gguf::write_file(file, kvs, {}), "");
  const gguf::File g = gguf::read_file(file);
  std::string error;
  EXPECT_FALSE(encode::load_gguf_vocab(g, error));
  EXPECT_NE(error.find("\"deepseek-llm\" is not modelled"), std::string::npos) << error;
  kvs.erase(kvs.begin() + 2);
  ASSERT_EQ(gguf::write_file(file, kvs, {}), "");
  EXPECT_FALSE(encode::load_gguf_vocab(gguf::read_file(file), error));
  EXPECT_NE(error.find("tokenizer.ggml.pre is absent"), std::string::npos) << error;
}

// tokenizer.ggml.model `llama`: SentencePiece-style BPE over scores, dummy prefix, byte fallback, bos.
TEST(SmokeGgufVocab, SentencePieceStyleVocabularyEncodes) {
  test::TempDir tmp;
  using gguf::WriteValue;
  const std::string sp = "\xE2\x96\x81";
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", sp, "h", "e", "l", "o", sp + "h", "ll", sp + "he", "llo", sp + "hello"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -2, -2, -2, -3, -4, -5, -6, -7};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.push_back(name);
    scores.push_back(0);
    types.push_back(6);
  }
  const fs::path file = tmp / "v.gguf";
  ASSERT_EQ(gguf::write_file(file, {{"general.architecture", WriteValue::string("llama")},
                                    {"tokenizer.ggml.model", WriteValue::string("llama")},
                                    {"tokenizer.ggml.tokens", WriteValue::string_array(tokens)},
                                    {"tokenizer.ggml.scores", WriteValue::f32_array(scores)},
                                    {"tokenizer.ggml.token_type", WriteValue::i32_array(types)},
                                    {"tokenizer.ggml.bos_token_id", WriteValue::u32(1)},
                                    {"tokenizer.ggml.eos_token_id", WriteValue::u32(2)}},
                             {}),
            "");
  std::string error;
  auto enc = encode::load_gguf_vocab(gguf::read_file(file), error);
  ASSERT_TRUE(enc) << error;
  std::vector<uint32_t> ids;
  ASSERT_TRUE(encode::encode(*enc, "hello h!", true, ids, error)) << error;
  // <s>, ▁hello, ▁h, then '!' by byte fallback (0x21 -> <0x21> at 13 + 0x21)
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 12, 8, 13 + 0x21}));
}

// An untrained `ckpt fixture llama --format gguf` model: any verdict, but the pass runs clean.
TEST(SmokeGgufFixture, FixtureRunsWithoutACrash) {
  test::TempDir tmp;
  auto made = test::run_program({CKPT_CLI_PATH, "fixture", "llama", (tmp / "fx").string(), "--format", "gguf"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  fs::path gguf;
  for (const auto& e : fs::recursive_directory_iterator(tmp / "fx"))
    if (e.path().extension() == ".gguf") gguf = e.path();
  ASSERT_FALSE(gguf.empty());
  auto loaded = load_checkpoint(gguf.string());
  ASSERT_FALSE(loaded.error);
  smoke::Options o = options();
  o.max_tokens = 64;
  smoke::Result r = smoke::run(*loaded.checkpoint, "", o);
  EXPECT_FALSE(r.findings.empty());
  for (const auto& f : r.findings) EXPECT_FALSE(f.message.empty());
  std::cout << describe(r) << "\n";
}

}  // namespace
