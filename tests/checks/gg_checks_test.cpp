// GGUF through `verify`: clean fixtures of every modelled architecture verify clean; each
// planted defect (fixture catalogue and hand-made files) yields its code, located; the corpus
// files yield their GG code and never a crash; split sets; unmodelled architectures warn only.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>

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

// A GGUF file read back as writer inputs, `edit` applied, and written again.
std::string rewritten(const fs::path& file, const std::function<void(std::vector<std::pair<std::string, WriteValue>>&, std::vector<gguf::WriteTensor>&)>& edit, std::string* err) {
  const auto f = gguf::read_file(file);
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
  return gguf::build(kvs, ts, {}, err);
}

// A hand-built file: the same fixture metadata with one change applied.
std::string tiny_llama(const std::function<void(std::vector<std::pair<std::string, WriteValue>>&, std::vector<gguf::WriteTensor>&)>& edit) {
  TempDir tmp;
  auto r = make(tmp.path(), "llama");
  std::string err;
  return rewritten(tmp.path() / r.files[0], edit, &err);
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

using Edit = std::function<void(std::vector<std::pair<std::string, WriteValue>>&, std::vector<gguf::WriteTensor>&)>;

// A fixture of `arch` with hidden 256 (rows every K-quant block divides), rebuilt with `edit` applied.
std::string rebuilt(const std::string& arch, const Edit& edit) {
  TempDir tmp;
  fixture::GgufOptions o;
  o.arch = arch;
  o.out = tmp.path();
  o.hidden = 256;
  auto r = fixture::make_gguf_fixture(o);
  EXPECT_EQ(r.error, "");
  std::string err;
  auto bytes = rewritten(tmp.path() / r.files[0], edit, &err);
  EXPECT_EQ(err, "");
  return bytes;
}
std::string llama_256(const Edit& edit) { return rebuilt("llama", edit); }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama-quantize's Q4_K_M mix (llama_tensor_get_type): attn_v and ffn_down of some layers at
// Q6_K, output at Q6_K, everything else 2-D at Q4_K, norms F32.
void q4_k_m_layout(std::vector<gguf::WriteTensor>& ts) {
  for (auto& t : ts) {
    if (t.ne.size() < 2) continue;
    const bool high = ends_with(t.name, "attn_v.weight") || ends_with(t.name, "ffn_down.weight") || t.name == "output.weight";
    t.type = high ? 14 : 12;  // q6_k : q4_k
  }
}

TEST(gg_checks, declared_file_type_against_the_stored_tensor_types) {
  // The incident: Q8_0 declared over Q4_0 weights.
  {
    auto all = verify_bytes(llama_256([](auto& kvs, auto& ts) {
      for (auto& t : ts)
        if (t.ne.size() >= 2) t.type = 2;  // q4_0
      set(kvs, "general.file_type", WriteValue::u32(7));
    }));
    const Finding* f = find(all, "GG035");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_TRUE(contains(f->message, "MOSTLY_Q8_0")) << f->message;
    EXPECT_TRUE(contains(f->message, " q4_0")) << f->message;
    EXPECT_FALSE(f->tensor.empty());
    EXPECT_TRUE(contains(f->message, f->tensor)) << f->message;
  }
  // A real Q4_K_M mix declared Q4_K_M: clean.
  {
    auto all = verify_bytes(llama_256([](auto& kvs, auto& ts) {
      q4_k_m_layout(ts);
      set(kvs, "general.file_type", WriteValue::u32(15));
    }));
    EXPECT_EQ(find(all, "GG035"), nullptr) << dump(all);
    EXPECT_EQ(find(all, "GG036"), nullptr) << dump(all);
  }
  // The same mix declared F16, or Q8_0: nothing stored matches.
  for (uint32_t declared : {1u, 7u, 18u}) {
    auto all = verify_bytes(llama_256([&](auto& kvs, auto& ts) {
      q4_k_m_layout(ts);
      if (declared == 18u)  // Q6_K declared: make every tensor Q4_K so Q6_K (and its Q8_0 fallback) is nowhere
        for (auto& t : ts)
          if (t.ne.size() >= 2) t.type = 12;
      set(kvs, "general.file_type", WriteValue::u32(declared));
    }));
    const Finding* f = find(all, "GG035");
    ASSERT_NE(f, nullptr) << declared << "\n" << dump(all);
    EXPECT_TRUE(contains(f->message, "q4_k")) << f->message;
  }
  // Q4_K_M with every matrix in Q5_0, the fallback llama-quantize uses for Q4_K
  // (the hidden-256 rows Q4_K holds) stored in it: accepted, no finding.
  {
    auto all = verify_bytes(tiny_llama([](auto& kvs, auto& ts) {
      for (auto& t : ts)
        if (t.ne.size() >= 2) t.type = 6;  // q5_0
      set(kvs, "general.file_type", WriteValue::u32(15));
    }));
    EXPECT_EQ(find(all, "GG035"), nullptr) << dump(all);
  }
  // The GUESSED flag is not a different type; an unknown id is a warning only.
  {
    auto all = verify_bytes(llama_256([](auto& kvs, auto& ts) {
      q4_k_m_layout(ts);
      set(kvs, "general.file_type", WriteValue::u32(15 | 1024));
    }));
    EXPECT_EQ(find(all, "GG035"), nullptr) << dump(all);
    EXPECT_EQ(find(all, "GG036"), nullptr) << dump(all);
  }
  {
    auto all = verify_bytes(llama_256([](auto& kvs, auto&) { set(kvs, "general.file_type", WriteValue::u32(148)); }));
    const Finding* f = find(all, "GG036");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_EQ(f->severity, Severity::warning);
    EXPECT_TRUE(contains(f->message, "148")) << f->message;
    EXPECT_EQ(find(all, "GG035"), nullptr);
  }
}

TEST(gg_checks, every_fixture_quant_declares_what_it_stores) {
  for (auto q : fixture::gguf_quants()) {
    for (int64_t hidden : {64, 256}) {
      TempDir d;
      fixture::GgufOptions o;
      o.arch = "qwen3";
      o.out = d.path();
      o.quant = std::string(q);
      o.hidden = hidden;
      auto r = fixture::make_gguf_fixture(o);
      ASSERT_EQ(r.error, "") << q;
      auto all = verify(d.path());
      EXPECT_EQ(find(all, "GG035"), nullptr) << q << " " << hidden << "\n" << dump(all);
      EXPECT_EQ(find(all, "GG036"), nullptr) << q << " " << hidden;
    }
  }
}

void drop(std::vector<gguf::WriteTensor>& ts, const std::string& name) {
  ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const auto& t) { return t.name == name; }), ts.end());
}

// GLM-4.5-Air's layout (specs/gguf.md §4.12) at fixture size: E 256, H 4 x Dk 64, Hkv 2, layer 0
// dense, layers 1.. MoE with exp_probs_b and one shared expert, q/k/v biases, no q/k norms
// (optional: the 355B variant has none), and a trailing NextN layer that llama.cpp skips.
TEST(gg_checks, glm4moe_real_layout_is_clean_and_its_defects_are_found) {
  auto glm_air = [](auto& kvs, auto& ts) {
    const uint64_t E = 256, Kkv = 2 * 64, X = 4, V = 0;
    (void)V;
    for (int i = 0; i < 2; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      drop(ts, b + "attn_q_norm.weight");
      drop(ts, b + "attn_k_norm.weight");
      ts.push_back({b + "attn_q.bias", 0, {4 * 64}, {}});
      ts.push_back({b + "attn_k.bias", 0, {Kkv}, {}});
      ts.push_back({b + "attn_v.bias", 0, {Kkv}, {}});
    }
    // NextN layer 2: block_count 3, nextn_predict_layers 1; its tensors as the converter writes them.
    uint64_t n_vocab = 0;
    for (const auto& t : ts)
      if (t.name == "token_embd.weight") n_vocab = t.ne[1];
    const std::string b = "blk.2.";
    for (const auto& [n, ne] : std::vector<std::pair<std::string, std::vector<uint64_t>>>{
             {"attn_norm.weight", {E}},
             {"attn_q.weight", {E, 256}},
             {"attn_k.weight", {E, Kkv}},
             {"attn_v.weight", {E, Kkv}},
             {"attn_output.weight", {256, E}},
             {"post_attention_norm.weight", {E}},
             {"ffn_gate_inp.weight", {E, X}},
             {"exp_probs_b.bias", {X}},
             {"ffn_gate_exps.weight", {E, E, X}},
             {"ffn_up_exps.weight", {E, E, X}},
             {"ffn_down_exps.weight", {E, E, X}},
             {"nextn.eh_proj.weight", {2 * E, E}},
             {"nextn.enorm.weight", {E}},
             {"nextn.hnorm.weight", {E}},
             {"nextn.shared_head_norm.weight", {E}},
             {"nextn.embed_tokens.weight", {E, n_vocab}},
         })
      ts.push_back({b + n, ne.size() >= 2 ? 1 : 0, ne, {}});
    set(kvs, "glm4moe.block_count", WriteValue::u32(3));
    set(kvs, "glm4moe.nextn_predict_layers", WriteValue::u32(1));
  };
  {
    auto all = verify_bytes(rebuilt("glm4moe", glm_air));
    EXPECT_TRUE(errors_and_warnings(all).empty()) << dump(all);
  }
  // exp_probs_b.bias is required for glm4moe (optional for deepseek2).
  {
    auto all = verify_bytes(rebuilt("glm4moe", [&](auto& kvs, auto& ts) {
      glm_air(kvs, ts);
      drop(ts, "blk.1.exp_probs_b.bias");
    }));
    const Finding* f = find(all, "AR021");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_TRUE(contains(f->message, "blk.1.exp_probs_b.bias")) << f->message;
  }
  // glm4moe has no ffn_norm (post_attention_norm feeds the FFN): one is unexpected.
  {
    auto all = verify_bytes(rebuilt("glm4moe", [&](auto& kvs, auto& ts) {
      glm_air(kvs, ts);
      ts.push_back({"blk.0.ffn_norm.weight", 0, {256}, {}});
    }));
    EXPECT_NE(find(all, "AR022"), nullptr) << dump(all);
  }
  // The shared expert's width follows expert_feed_forward_length x expert_shared_count.
  {
    auto all = verify_bytes(rebuilt("glm4moe", [&](auto& kvs, auto& ts) {
      glm_air(kvs, ts);
      set(kvs, "glm4moe.expert_shared_count", WriteValue::u32(2));
    }));
    const Finding* f = find(all, "AR023");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_TRUE(contains(f->message, "shexp")) << f->message;
  }
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
  EXPECT_EQ(n, 40 + 9 + 9 + 6 + 1);  // GG structure, Ollama store, TK, AR, HS006
}

}  // namespace
}  // namespace ckpt::ftest
