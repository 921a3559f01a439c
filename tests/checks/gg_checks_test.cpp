// GGUF through `verify`: clean fixtures of every modelled architecture verify clean; each
// planted defect (fixture catalogue and hand-made files) yields its code, located; the corpus
// files yield their GG code and never a crash; split sets; unmodelled architectures warn only.
#include <gtest/gtest.h>

#include <fstream>

#include "builders.h"
#include "ckpt/engines.h"
#include "ckpt/fixture.h"
#include "ckpt/gguf.h"
#include "ckpt/gguf_arch.h"

namespace ckpt::ftest {
namespace {

using gguf::WriteValue;

fixture::Result make(const fs::path& out, const std::string& arch, const std::string& quant = "f16",
                     std::vector<std::string> defects = {}, uint32_t splits = 1) {
  fixture::GgufOptions o;
  o.arch = arch;
  o.out = out;
  o.quant = quant;
  o.defects = std::move(defects);
  o.splits = splits;
  auto r = fixture::make_gguf_fixture(o);
  EXPECT_EQ(r.error, "") << arch;
  return r;
}

std::vector<Finding> errors_and_warnings(const std::vector<Finding>& all) {
  std::vector<Finding> out;
  for (const auto& f : all)
    if (f.severity != Severity::info) out.push_back(f);
  return out;
}

TEST(gg_checks, clean_fixture_of_every_modelled_architecture_verifies_clean) {
  for (auto arch : gguf_arch::modelled_architectures()) {
    TempDir d;
    make(d.path(), std::string(arch));
    auto all = verify(d.path());
    EXPECT_TRUE(errors_and_warnings(all).empty()) << arch << "\n" << dump(all);
    EXPECT_EQ(find(all, "CT007"), nullptr) << arch;  // the template in the metadata was found
  }
}

TEST(gg_checks, clean_quantized_fixtures_verify_clean) {
  for (const char* q : {"q8_0", "q4_0", "q4_k", "q6_k", "q2_k", "bf16", "f32"}) {
    TempDir d;
    make(d.path(), "qwen3", q);
    auto all = verify(d.path());
    EXPECT_TRUE(errors_and_warnings(all).empty()) << q << "\n" << dump(all);
  }
}

TEST(gg_checks, a_gguf_file_target_is_verified_with_its_split_siblings) {
  TempDir d;
  auto r = make(d.path(), "llama", "q8_0", {}, 3);
  ASSERT_EQ(r.files.size(), 3u);
  write_text(d / "unrelated.gguf", "not a gguf");  // not part of the target: never read
  auto ck = load_ok((d / r.files[1]).string());
  EXPECT_EQ(ck.gguf_shards.size(), 3u);
  ASSERT_EQ(ck.gguf_models.size(), 1u);
  EXPECT_EQ(ck.gguf_models[0].split_count, 3u);
  auto all = run_checks(ck);
  EXPECT_TRUE(errors_and_warnings(all).empty()) << dump(all);
  EXPECT_EQ(ck.total_tensors(), r.tensors);
}

TEST(gg_checks, every_fixture_defect_is_reported_with_its_code) {
  for (const auto& defect : fixture::gguf_defects()) {
    TempDir d;
    make(d.path(), "llama", "q8_0", {std::string(defect.name)});
    auto all = verify(d.path());
    const Finding* f = find(all, std::string(defect.code));
    ASSERT_NE(f, nullptr) << defect.name << "\n" << dump(all);
    EXPECT_EQ(f->severity, Severity::error) << defect.name;
    EXPECT_FALSE(f->file.empty()) << defect.name;
  }
}

TEST(gg_checks, corpus_files_each_give_their_gg_code_and_clean_ones_none) {
  CKPT_REQUIRE_CORPUS();
  const auto dir = test::corpus_dir() / "gguf";
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    const std::string name = e.path().filename().string();
    auto all = run_checks(load_ok(e.path().string()));
    bool gg_error = false;
    for (const auto& f : all)
      if (f.code.rfind("GG", 0) == 0 && f.severity == Severity::error) gg_error = true;
    bool any_error = false;
    for (const auto& f : all) any_error |= f.severity == Severity::error;
    // The two the README accepts verify without an error (no model metadata: GG030 warns).
    if (name.rfind("ok_", 0) == 0 || name.rfind("edge_", 0) == 0) EXPECT_FALSE(any_error) << name << "\n" << dump(all);
    else EXPECT_TRUE(gg_error) << name << "\n" << dump(all);
  }
}

TEST(gg_checks, truncated_data_names_the_tensor_and_the_missing_bytes) {
  TempDir d;
  make(d.path(), "llama", "f16", {"gguf-truncated-data"});
  auto all = verify(d.path());
  const Finding* f = find(all, "GG025");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_FALSE(f->tensor.empty());
  EXPECT_TRUE(contains(f->message, "but the file ends at")) << f->message;
}

// A hand-built file: the same fixture metadata with one change applied.
std::string tiny_llama(const std::function<void(std::vector<std::pair<std::string, WriteValue>>&, std::vector<gguf::WriteTensor>&)>& edit) {
  TempDir tmp;
  auto r = make(tmp.path(), "llama");
  const auto f = gguf::read_file(tmp.path() / r.files[0]);
  std::vector<std::pair<std::string, WriteValue>> kvs;
  for (const auto& kv : f.kvs) {
    WriteValue v;
    v.type = kv.value.type;
    v.elem = kv.value.elem;
    v.bits = kv.value.bits;
    v.str = std::string(kv.value.str);
    for (auto s : kv.value.strings) v.strings.push_back(std::string(s));
    v.raw = std::string(kv.value.raw);
    v.count = kv.value.count;
    kvs.emplace_back(std::string(kv.key), std::move(v));
  }
  std::vector<gguf::WriteTensor> ts;
  for (const auto& t : f.tensors) {
    std::vector<uint64_t> ne;
    for (uint32_t i = 0; i < t.n_dims; ++i) ne.push_back(static_cast<uint64_t>(t.ne[i]));
    ts.push_back({std::string(t.name), t.type, ne, {}});
  }
  edit(kvs, ts);
  std::string err;
  return gguf::build(kvs, ts, {}, &err);
}

void set(std::vector<std::pair<std::string, WriteValue>>& kvs, const std::string& key, WriteValue v) {
  for (auto& kv : kvs)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  kvs.emplace_back(key, std::move(v));
}

std::vector<Finding> verify_bytes(const std::string& bytes) {
  TempDir d;
  write_text(d / "model.gguf", bytes);
  return verify(d.path());
}

TEST(gg_checks, metadata_llama_cpp_refuses_or_aborts_on) {
  auto wrong_type = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "llama.context_length", WriteValue::u64(4096)); }));
  ASSERT_NE(find(wrong_type, "GG031"), nullptr) << dump(wrong_type);
  EXPECT_TRUE(contains(find(wrong_type, "GG031")->message, "u64"));
  auto zero_layers = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "llama.block_count", WriteValue::u32(0)); }));
  EXPECT_NE(find(zero_layers, "GG032"), nullptr) << dump(zero_layers);
  auto rope = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "llama.rope.scaling.type", WriteValue::string("dynamic")); }));
  EXPECT_NE(find(rope, "GG032"), nullptr) << dump(rope);
  auto per_layer = verify_bytes(
      tiny_llama([](auto& kvs, auto&) { set(kvs, "llama.attention.head_count_kv", WriteValue::u32_array({2, 2, 2})); }));
  EXPECT_NE(find(per_layer, "GG033"), nullptr) << dump(per_layer);
  auto no_arch = verify_bytes(tiny_llama([](auto& kvs, auto&) {
    kvs.erase(std::remove_if(kvs.begin(), kvs.end(), [](auto& kv) { return kv.first == "general.architecture"; }), kvs.end());
  }));
  EXPECT_NE(find(no_arch, "GG030"), nullptr) << dump(no_arch);
}

TEST(gg_checks, tokenizer_metadata) {
  auto short_scores = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.ggml.scores", WriteValue::f32_array({0, 1})); }));
  ASSERT_NE(find(short_scores, "TK023"), nullptr) << dump(short_scores);
  EXPECT_EQ(find(short_scores, "TK023")->severity, Severity::error);
  auto bad_eos = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.ggml.eos_token_id", WriteValue::u32(99999)); }));
  ASSERT_NE(find(bad_eos, "TK025"), nullptr) << dump(bad_eos);
  EXPECT_EQ(find(bad_eos, "TK025")->severity, Severity::warning);
  auto none_eos = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.ggml.padding_token_id", WriteValue::u32(0xFFFFFFFFu)); }));
  EXPECT_EQ(find(none_eos, "TK025"), nullptr) << dump(none_eos);
  auto i32_id = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.ggml.bos_token_id", WriteValue::i32(1)); }));
  EXPECT_NE(find(i32_id, "TK026"), nullptr) << dump(i32_id);
  auto dup = verify_bytes(tiny_llama([](auto& kvs, auto&) {
    for (auto& kv : kvs)
      if (kv.first == "tokenizer.ggml.tokens") kv.second.strings[5] = kv.second.strings[4];
  }));
  EXPECT_NE(find(dup, "TK028"), nullptr) << dump(dup);
  auto gpt2_no_merges = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.ggml.model", WriteValue::string("gpt2")); }));
  EXPECT_NE(find(gpt2_no_merges, "TK027"), nullptr) << dump(gpt2_no_merges);
  EXPECT_NE(find(gpt2_no_merges, "TK029"), nullptr) << dump(gpt2_no_merges);
}

TEST(gg_checks, chat_template_from_metadata_goes_through_the_ct_probes) {
  auto broken = verify_bytes(tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.chat_template", WriteValue::string("{% for m in messages %}{{ m.content }")); }));
  const Finding* f = find(broken, "CT001");
  ASSERT_NE(f, nullptr) << dump(broken);
  EXPECT_EQ(f->file, "model.gguf");
  EXPECT_TRUE(contains(f->message, "tokenizer.chat_template")) << f->message;
  auto none = verify_bytes(tiny_llama([](auto& kvs, auto&) {
    kvs.erase(std::remove_if(kvs.begin(), kvs.end(), [](auto& kv) { return kv.first == "tokenizer.chat_template"; }), kvs.end());
  }));
  EXPECT_NE(find(none, "CT007"), nullptr) << dump(none);
}

TEST(gg_checks, gguf_template_is_judged_with_llama_cpp_s_parser_by_default_in_the_cli) {
  TempDir d;
  write_text(d / "model.gguf",
             tiny_llama([](auto& kvs, auto&) { set(kvs, "tokenizer.chat_template", WriteValue::string("{%+ if true %}hi{% endif %}")); }));
  std::string err;
  auto sel = engines::parse_selection({"llama.cpp"}, &err);
  ASSERT_TRUE(sel) << err;
  VerifyOptions o;
  o.engines = &*sel;
  auto all = run_checks(load_ok(d.path()), o);
  const Finding* f = find(all, "CT011");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->file, "model.gguf");
  // The CLI picks llama.cpp for a GGUF-only target without --engine.
  auto r = test::run_ckpt({"verify", (d / "model.gguf").string(), "--format", "json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "\"CT011\"")) << r.out;
}

TEST(gg_checks, conformance_missing_unexpected_misshapen_and_experts) {
  auto missing = verify_bytes(tiny_llama([](auto&, auto& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "blk.1.ffn_up.weight"; }), ts.end());
  }));
  ASSERT_NE(find(missing, "AR021"), nullptr) << dump(missing);
  EXPECT_TRUE(contains(find(missing, "AR021")->message, "blk.1.ffn_up.weight"));
  auto extra = verify_bytes(tiny_llama([](auto&, auto& ts) { ts.push_back({"blk.0.surprise.weight", 0, {4}, {}}); }));
  EXPECT_NE(find(extra, "AR022"), nullptr) << dump(extra);
  auto shape = verify_bytes(tiny_llama([](auto&, auto& ts) {
    for (auto& t : ts)
      if (t.name == "blk.0.ffn_down.weight") t.ne[0] /= 2;
  }));
  ASSERT_NE(find(shape, "AR023"), nullptr) << dump(shape);
  EXPECT_EQ(find(shape, "AR023")->tensor, "blk.0.ffn_down.weight");
  // The tied head is optional for llama: dropping output.weight stays clean.
  auto tied = verify_bytes(tiny_llama([](auto&, auto& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "output.weight"; }), ts.end());
  }));
  EXPECT_TRUE(errors_and_warnings(tied).empty()) << dump(tied);

  TempDir moe;
  make(moe.path(), "qwen3moe");
  auto r = gguf::read_file(moe.path() / "qwen3moe-f16.gguf");
  ASSERT_TRUE(r.loadable());
  // expert_count rewritten to 8 while 4 experts are stored
  TempDir d2;
  fixture::GgufOptions o;
  o.arch = "qwen3moe";
  o.out = d2.path();
  o.experts = 4;
  ASSERT_EQ(fixture::make_gguf_fixture(o).error, "");
  std::string bytes = test::read_text(d2.path() / "qwen3moe-f16.gguf");
  const auto f = gguf::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size());
  const auto* kv = f.find("qwen3moe.expert_count");
  ASSERT_NE(kv, nullptr);
  // the u32 value sits after the key (8 + len) and the type (4)
  const uint64_t at = kv->offset + 8 + kv->key.size() + 4;
  bytes[at] = 8;
  auto experts = verify_bytes(bytes);
  EXPECT_NE(find(experts, "AR024"), nullptr) << dump(experts);
}

TEST(gg_checks, gemma_with_an_output_head_fails_the_tensor_count) {
  TempDir d;
  make(d.path(), "gemma2");
  std::string bytes = test::read_text(d / "gemma2-f16.gguf");
  const auto f = gguf::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size());
  std::vector<std::pair<std::string, WriteValue>> kvs;
  for (const auto& kv : f.kvs) {
    WriteValue v{kv.value.type, kv.value.elem, kv.value.bits, std::string(kv.value.str), {}, std::string(kv.value.raw), kv.value.count};
    for (auto s : kv.value.strings) v.strings.push_back(std::string(s));
    kvs.emplace_back(std::string(kv.key), std::move(v));
  }
  std::vector<gguf::WriteTensor> ts;
  for (const auto& t : f.tensors) {
    std::vector<uint64_t> ne;
    for (uint32_t i = 0; i < t.n_dims; ++i) ne.push_back(static_cast<uint64_t>(t.ne[i]));
    ts.push_back({std::string(t.name), t.type, ne, {}});
    if (t.name == "token_embd.weight") ts.push_back({"output.weight", t.type, ne, {}});
  }
  std::string err;
  auto all = verify_bytes(gguf::build(kvs, ts, {}, &err));
  const Finding* x = find(all, "AR022");
  ASSERT_NE(x, nullptr) << dump(all);
  EXPECT_EQ(x->tensor, "output.weight");
  EXPECT_TRUE(contains(x->hint, "tie")) << x->hint;
}

TEST(gg_checks, unmodelled_architecture_warns_and_never_errs) {
  auto all = verify_bytes(tiny_llama([](auto& kvs, auto&) {
    for (auto& kv : kvs)
      if (kv.first.rfind("llama.", 0) == 0) kv.first = "mamba2." + kv.first.substr(6);
    set(kvs, "general.architecture", WriteValue::string("mamba2"));
  }));
  ASSERT_NE(find(all, "AR020"), nullptr) << dump(all);
  for (const auto& f : all) EXPECT_NE(f.severity, Severity::error) << dump(all);
}

TEST(gg_checks, split_sets) {
  {  // consistent set: clean
    TempDir d;
    make(d.path(), "qwen2", "q8_0", {}, 2);
    auto all = verify(d.path());
    EXPECT_TRUE(errors_and_warnings(all).empty()) << dump(all);
  }
  {  // the second shard of another run: tensors twice, counts off
    TempDir d, other;
    auto a = make(d.path(), "qwen2", "q8_0", {}, 2);
    auto b = make(other.path(), "qwen2", "q8_0", {}, 3);
    fs::copy_file(other.path() / b.files[0], d.path() / "qwen2-q8_0-00002-of-00002.gguf", fs::copy_options::overwrite_existing);
    auto all = verify(d.path());
    EXPECT_NE(find(all, "GG041"), nullptr) << dump(all);
    EXPECT_NE(find(all, "GG042"), nullptr) << dump(all);
  }
  {  // a split shard renamed as a single file: split.count 2 without the name
    TempDir d, src;
    auto r = make(src.path(), "qwen2", "q8_0", {}, 2);
    fs::copy_file(src.path() / r.files[0], d.path() / "merged.gguf");
    auto all = verify(d.path());
    EXPECT_NE(find(all, "GG041"), nullptr) << dump(all);
  }
}

TEST(gg_checks, deep_scans_float_tensors_and_quantized_block_scales) {
  TempDir d;
  make(d.path(), "llama", "q4_0");
  EXPECT_TRUE(errors_and_warnings(run_checks(load_ok(d.path()), VerifyOptions{true})).empty());
  std::string bytes = test::read_text(d / "llama-q4_0.gguf");
  const auto f = gguf::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), bytes.size());
  for (const auto& t : f.tensors) {
    const uint64_t at = f.data_start + t.offset;
    if (t.name == "blk.0.ffn_up.weight") {  // q4_0: block 2's fp16 scale becomes +Inf
      ASSERT_EQ(t.type, 2);
      bytes[at + 2 * 18] = 0x00;
      bytes[at + 2 * 18 + 1] = 0x7c;
    }
    if (t.name == "output_norm.weight") {  // f32: element 3 becomes NaN
      bytes[at + 12] = 0;
      bytes[at + 13] = 0;
      bytes[at + 14] = static_cast<char>(0xc0);
      bytes[at + 15] = 0x7f;
    }
  }
  write_text(d / "llama-q4_0.gguf", bytes);
  auto all = run_checks(load_ok(d.path()), VerifyOptions{true});
  const Finding* scale = find(all, "HS006");
  ASSERT_NE(scale, nullptr) << dump(all);
  EXPECT_EQ(scale->tensor, "blk.0.ffn_up.weight");
  EXPECT_TRUE(contains(scale->message, "first: block 2")) << scale->message;
  const Finding* nan = find(all, "HS002");
  ASSERT_NE(nan, nullptr) << dump(all);
  EXPECT_EQ(nan->tensor, "output_norm.weight");
  EXPECT_TRUE(contains(nan->message, "first at element 3")) << nan->message;
  EXPECT_EQ(find(run_checks(load_ok(d.path())), "HS006"), nullptr);  // header-only by default
}

TEST(gg_checks, every_gguf_code_is_documented) {
  std::string docs = read_text(fs::path(CKPT_SOURCE_DIR) / "docs/checks.md");
  int n = 0;
  for (const auto& c : all_checks()) {
    std::string code(c.code);
    const bool gguf = code.rfind("GG", 0) == 0 || code == "HS006" || (code >= "TK021" && code <= "TK029") || (code >= "AR020" && code <= "AR025");
    if (!gguf) continue;
    ++n;
    EXPECT_TRUE(contains(docs, "## " + code + " — ")) << code;
  }
  EXPECT_EQ(n, 38 + 6 + 9 + 6 + 1);
}

}  // namespace
}  // namespace ckpt::ftest
