// Golden findings: the full `ckpt verify --format json` report of a fixed set of checkpoints —
// every fixture architecture with and without each quantization scheme, the defect catalogue
// planted on several architectures and schemes, every real corpus layout as the regression
// suite builds it (plus planted defects), and the DeepSeek-V3 layout at its real size (91,991
// tensors in 163 shards with the real config, clean and with defects) — compared byte for byte
// with reports recorded in tests/checks_arch/golden/. The goldens were recorded by the tree
// before the conformance engine was rewritten for speed, so a faster engine must say exactly
// what the old one said, finding for finding, in the same order.
//
// The reports are whole (every family), so a change anywhere that changes findings shows here:
// e.g. ten corpus tokenizer_config.json files hold 1e30-sized integers that this tree's
// json::parse declines (FS011/CT010/TK019 in their lines); a JSON reader that reads them changes
// those lines. Re-record such changes on their own, from the tree that makes them, never
// together with an optimisation that must not change anything.
//
// Re-record (only for an intended change of findings, and say so in the commit):
//   CKPT_UPDATE_GOLDENS=1 build/tests/test_checks_arch --gtest_filter='GoldenFindings.*'
#include <cstdlib>
#include <fstream>
#include <functional>

#include "ckpt/fixture.h"
#include "corpus_standins.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(CKPT_SOURCE_DIR) / "tests" / "checks_arch" / "golden"; }
bool updating() {
  const char* v = std::getenv("CKPT_UPDATE_GOLDENS");
  return v && *v && *v != '0';
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
}

// One golden line: the case, the exit code and the JSON report with the model directory
// spelled $DIR (temp directories differ per run) and the version left out.
std::string verify_line(const std::string& name, const fs::path& dir) {
  auto r = run_ckpt({"verify", dir.string(), "--format", "json"});
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  const std::string version_key = "\"ckpt_version\":";
  if (out.rfind("{" + version_key, 0) == 0) {
    const size_t end = out.find(",\"target\"");
    if (end != std::string::npos) out.erase(1, end);  // drops "ckpt_version":"...",
  }
  replace_all(out, json::quoted(dir.string()).substr(1, json::quoted(dir.string()).size() - 2), "$DIR");
  std::string line = "{\"case\":" + json::quoted(name) + ",\"exit\":" + std::to_string(r.exit_code) +
                     ",\"stderr\":" + json::quoted(r.err) + ",\"report\":" + (out.empty() ? "null" : out) + "}";
  return line;
}

std::string error_line(const std::string& name, const std::string& error) {
  return "{\"case\":" + json::quoted(name) + ",\"build_error\":" + json::quoted(error) + "}";
}

// Compare (or, with CKPT_UPDATE_GOLDENS, record) one group of golden lines.
void check_group(const std::string& file, const std::vector<std::string>& lines) {
  const fs::path p = golden_dir() / file;
  if (updating()) {
    fs::create_directories(p.parent_path());
    std::ofstream o(p, std::ios::binary | std::ios::trunc);
    for (const auto& l : lines) o << l << '\n';
    ASSERT_TRUE(o.good()) << p;
    std::printf("recorded %zu cases in %s\n", lines.size(), p.c_str());
    return;
  }
  ASSERT_TRUE(fs::exists(p)) << p << " is missing: record it with CKPT_UPDATE_GOLDENS=1";
  std::vector<std::string> want;
  {
    std::ifstream in(p, std::ios::binary);
    for (std::string l; std::getline(in, l);) want.push_back(l);
  }
  EXPECT_EQ(lines.size(), want.size()) << file << ": number of cases";
  size_t differ = 0;
  for (size_t i = 0; i < std::min(lines.size(), want.size()); ++i) {
    if (lines[i] == want[i]) continue;
    ++differ;
    if (differ > 5) continue;
    size_t k = 0;
    while (k < lines[i].size() && k < want[i].size() && lines[i][k] == want[i][k]) ++k;
    const size_t from = k > 200 ? k - 200 : 0;
    ADD_FAILURE() << file << " line " << i + 1 << " differs at byte " << k << "\n  golden: ..."
                  << want[i].substr(from, 600) << "\n  now:    ..." << lines[i].substr(from, 600);
  }
  EXPECT_EQ(differ, 0u) << file << ": " << differ << " of " << lines.size() << " cases differ";
}

// ---- fixtures ------------------------------------------------------------------------------

std::string fixture_case(const std::string& name, fixture::Options o) {
  TempDir d;
  o.out = d / "m";
  fixture::Result r = fixture::make_fixture(o);
  if (!r.error.empty()) return error_line(name, r.error);
  return verify_line(name, r.model_dir);
}

std::string fixture_name(const fixture::Options& o) {
  std::string n = o.arch + (o.quant.empty() ? "" : " --quant " + o.quant);
  for (const auto& d : o.defects) n += " --defect " + d;
  if (o.layers) n += " --layers " + std::to_string(*o.layers);
  if (o.hidden) n += " --hidden " + std::to_string(*o.hidden);
  if (o.experts) n += " --experts " + std::to_string(*o.experts);
  if (o.shards != 1) n += " --shards " + std::to_string(o.shards);
  if (o.unigram) n += " --unigram";
  return n;
}

TEST(GoldenFindings, EveryArchitectureAndScheme) {
  std::vector<std::string> lines;
  std::vector<std::string> quants{""};
  for (const auto& s : fixture::schemes()) quants.emplace_back(s.name);
  for (const auto& a : fixture::architectures())
    for (const auto& q : quants) {
      fixture::Options o;
      o.arch = a.model_type;
      o.quant = q;
      lines.push_back(fixture_case(fixture_name(o), o));
    }
  // larger dimensions, several shards, the Unigram tokenizer
  struct Extra {
    const char* arch;
    const char* quant;
    int64_t layers, experts;
    uint32_t shards;
    bool unigram;
  };
  for (const Extra& e : {Extra{"deepseek_v3", "fp8", 6, 16, 3, false}, Extra{"deepseek_v3", "", 5, 12, 1, false},
                         Extra{"qwen3_moe", "mlx4", 4, 24, 4, false}, Extra{"qwen3_moe", "ct-int4", 3, 8, 2, false},
                         Extra{"glm4_moe", "gptq4", 4, 8, 1, false}, Extra{"mixtral", "", 3, 6, 2, true},
                         Extra{"qwen3_next", "mlx8", 8, 8, 1, false}, Extra{"gemma4_text", "", 6, 0, 1, false}}) {
    fixture::Options o;
    o.arch = e.arch;
    o.quant = e.quant;
    o.layers = e.layers;
    if (e.experts) o.experts = e.experts;
    o.shards = e.shards;
    o.unigram = e.unigram;
    lines.push_back(fixture_case(fixture_name(o), o));
  }
  check_group("fixtures.jsonl", lines);
}

TEST(GoldenFindings, DefectCatalogue) {
  std::vector<std::string> lines;
  const char* archs[] = {"llama", "qwen3_moe", "deepseek_v3", "gemma4_text", "gpt_oss"};
  for (const auto& d : fixture::defects()) {
    std::vector<std::string> quants = d.needs_quant ? std::vector<std::string>{"mlx4", "ct-int4", "gptq4", "fp8"}
                                                    : std::vector<std::string>{"", "mlx4"};
    for (const char* a : archs)
      for (const auto& q : quants) {
        fixture::Options o;
        o.arch = a;
        o.quant = q;
        o.defects = {std::string(d.name)};
        if (d.needs_shards) o.shards = 2;
        lines.push_back(fixture_case(fixture_name(o), o));
      }
  }
  // several defects at once
  for (auto defects : {std::vector<std::string>{"missing-tensor", "unexpected-tensor", "transposed-tensor"},
                       std::vector<std::string>{"expert-count-mismatch", "missing-scales", "think-not-a-token"},
                       std::vector<std::string>{"stray-shard", "wrong-total-size", "malformed-template"}}) {
    for (const char* q : {"", "mlx4", "fp8"}) {
      fixture::Options o;
      o.arch = "qwen3_moe";
      o.quant = q;
      o.defects = defects;
      o.shards = 2;
      lines.push_back(fixture_case(fixture_name(o), o));
    }
  }
  check_group("defects.jsonl", lines);
}

// ---- the real corpus layouts -----------------------------------------------------------------

const char* const kLayouts[] = {
    "3PRYMMAL-PHI3-3B-SLERP", "DeepSeek-R1", "DeepSeek-V3-config", "Devstral-Small-2507", "Genz-70b-GPTQ",
    "Llama-2-7b-hf", "Llama-3.1-8B-Computer-Networks", "Llama-3.2-3B", "Orpheus_3B_Quantized",
    "Qwen1.5-0.5B-Chat-dense", "Qwen3-1.7B-MLX-bf16", "Qwen3-14B-MLX-4bit", "Qwen3.5-25B-REAP-A3B-Coding",
    "Qwen3.5-9B-multimodal", "Reflection-Llama-3.1-70B", "WizardLM-2-8x22B", "cogito-v1-preview-qwen-14B",
    "dolphin-2.5-mixtral-8x7b", "gemma-2-2b-poem", "gemma-2b-finetune", "gemma-3-1b-it", "gpt-oss-20b",
    "medgemma-27b-it", "mimo_kor", "phi-3-mini-keyformer", "sakura-14b-qwen2.5-v1.0"};

void edit_json_file(const fs::path& p, const std::function<void(json::Object&)>& edit) {
  json::Value v = parse_json(read_text(p));
  edit(v.mutable_object());
  write_text(p, v.dump());
}

void set_member(json::Object& o, const std::string& key, json::Value value) {
  for (auto& m : o)
    if (m.first == key) {
      m.second = std::move(value);
      return;
    }
  o.emplace_back(key, std::move(value));
}

void erase_member(json::Object& o, const std::string& key) {
  std::erase_if(o, [&](const auto& m) { return m.first == key; });
}

TEST(GoldenFindings, CorpusLayouts) {
  CKPT_REQUIRE_CORPUS();
  std::vector<std::string> lines;
  for (const char* dir : kLayouts) {
    auto s = corpus::make_standin(dir, /*require_json=*/false);
    lines.push_back(verify_line(dir, s->dir.path()));
  }
  // planted on real layouts (the regression suite's defects, and a few more)
  auto planted = [&](const char* name, const char* dir, const std::function<void(const fs::path&)>& plant) {
    auto s = corpus::make_standin(dir, /*require_json=*/false);
    plant(s->dir.path());
    lines.push_back(verify_line(std::string(dir) + ": " + name, s->dir.path()));
  };
  planted("template one brace short", "Qwen3-1.7B-MLX-bf16", [](const fs::path& d) {
    edit_json_file(d / "tokenizer_config.json", [](json::Object& o) {
      for (auto& m : o)
        if (m.first == "chat_template") m.second = "{- bos_token -}}" + m.second.as_string();
    });
  });
  planted("template error behind a big integer", "medgemma-27b-it", [](const fs::path& d) {
    std::string tc = read_text(d / "tokenizer_config.json");
    auto p = tc.find("{{ bos_token }}");
    if (p != std::string::npos) tc.replace(p, 15, "{{ bos_token }");
    write_text(d / "tokenizer_config.json", tc);
  });
  planted("literal the tokenizer lacks", "gpt-oss-20b", [](const fs::path& d) {
    write_text(d / "chat_template.jinja", "<|analysis|>" + read_text(d / "chat_template.jinja"));
  });
  planted("hidden_size removed", "gemma-3-1b-it",
          [](const fs::path& d) { edit_json_file(d / "config.json", [](json::Object& o) { erase_member(o, "hidden_size"); }); });
  planted("broken side files", "medgemma-27b-it", [](const fs::path& d) {
    std::string tc = read_text(d / "tokenizer_config.json");
    tc.insert(tc.rfind('}'), ",");
    write_text(d / "tokenizer_config.json", tc);
    write_text(d / "generation_config.json", "{\"eos_token_id\": [1, 106],}");
  });
  planted("per-module override against the packed geometry", "Qwen3-14B-MLX-4bit", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) {
      for (auto& m : o)
        if (m.first == "quantization" || m.first == "quantization_config")
          m.second.mutable_object().emplace_back("model.layers.0.mlp.down_proj", json::Object{{"group_size", 64}, {"bits", 8}});
    });
  });
  planted("num_experts back to 256 (REAP)", "Qwen3.5-25B-REAP-A3B-Coding",
          [](const fs::path& d) { edit_json_file(d / "config.json", [](json::Object& o) { set_member(o, "num_experts", 256); }); });
  planted("quantization declaration dropped", "Qwen3-14B-MLX-4bit", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) {
      erase_member(o, "quantization");
      erase_member(o, "quantization_config");
    });
  });
  planted("declared 8 bits over 4-bit words", "Qwen3-14B-MLX-4bit", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) {
      for (auto& m : o)
        if (m.first == "quantization" || m.first == "quantization_config") set_member(m.second.mutable_object(), "bits", 8);
    });
  });
  planted("tie_word_embeddings flipped", "Llama-3.2-3B", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) { set_member(o, "tie_word_embeddings", false); });
  });
  planted("vocab_size off by one", "Qwen3.5-9B-multimodal", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) {
      for (auto& m : o)
        if (m.first == "text_config") {
          auto& t = m.second.mutable_object();
          for (auto& f : t)
            if (f.first == "vocab_size") f.second = f.second.as_int() + 1;
        }
    });
  });
  planted("group_size changed", "Genz-70b-GPTQ", [](const fs::path& d) {
    edit_json_file(d / "config.json", [](json::Object& o) {
      for (auto& m : o)
        if (m.first == "quantization_config") set_member(m.second.mutable_object(), "group_size", 128);
    });
  });
  check_group("corpus.jsonl", lines);
}

// ---- DeepSeek-V3 at its real size ------------------------------------------------------------

// The registry's plan for the real DeepSeek-V3 config, MTP layer included (what a real
// download ships), written as 163 sparse shards with an index, the real config.json and the
// real tokenizer_config.json: 91,991 tensors.
std::vector<T> deepseek_tensors(const std::string& cfg_text) {
  json::Value cfg = parse_json(cfg_text);
  auto view = arch::resolve_config(cfg);
  auto scheme = quant::parse_scheme(cfg);
  std::vector<T> out;
  for (const auto& x : arch::expected_tensors(view, scheme ? &*scheme : nullptr)) {
    if (x.presence == arch::Presence::Optional) continue;
    // the real checkpoint keeps the MTP layer's eh_proj and shared head in BF16, unscaled
    const bool bf16_in_mtp = x.name == "model.layers.61.eh_proj.weight" || x.name == "model.layers.61.shared_head.head.weight";
    if (x.name == "model.layers.61.eh_proj.weight_scale_inv" || x.name == "model.layers.61.shared_head.head.weight_scale_inv")
      continue;
    out.push_back({std::string(x.name), bf16_in_mtp ? st::DType::BF16 : arch::resolve_dtype(x.dtype, view.model_dtype), x.shape});
  }
  return out;
}

void write_sharded(const fs::path& dir, const std::vector<T>& ts, size_t shards) {
  fs::create_directories(dir);
  const size_t per = (ts.size() + shards - 1) / shards;
  std::map<std::string, std::vector<st::TensorToWrite>> by_file;
  std::string wm;
  uint64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    char f[64];
    std::snprintf(f, sizeof f, "model-%05zu-of-%05zu.safetensors", i / per + 1, shards);
    by_file[f].push_back({ts[i].name, ts[i].dtype, ts[i].shape, {}});
    wm += (i ? ",\n    " : "\n    ") + json::quoted(ts[i].name) + ": " + json::quoted(f);
    total += st::tensor_nbytes(ts[i].dtype, ts[i].shape).value_or(0);
  }
  for (auto& [f, t] : by_file) ASSERT_EQ(st::write_file(dir / f, std::move(t)), "") << f;
  write_text(dir / "model.safetensors.index.json",
             "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) + "},\n  \"weight_map\": {" + wm + "\n  }\n}\n");
}

TEST(GoldenFindings, DeepSeekV3AtRealSize) {
  CKPT_REQUIRE_CORPUS();
  const fs::path real = corpus_dir() / "configs" / "DeepSeek-V3-config";
  const std::string cfg = read_text(real / "config.json");
  const std::vector<T> base = deepseek_tensors(cfg);
  ASSERT_EQ(base.size(), 91991u);
  std::vector<std::string> lines;
  auto variant = [&](const std::string& name, const std::function<void(std::vector<T>&, json::Object&)>& plant) {
    std::vector<T> ts = base;
    json::Value c = parse_json(cfg);
    plant(ts, c.mutable_object());
    TempDir d;
    write_sharded(d.path(), ts, 163);
    write_text(d / "config.json", c.dump());
    std::filesystem::copy_file(real / "tokenizer_config.json", d / "tokenizer_config.json");
    lines.push_back(verify_line("deepseek-v3 92k: " + name, d.path()));
  };
  auto find = [](std::vector<T>& ts, const std::string& n) -> T& {
    T* t = find_t(ts, n);
    if (!t) throw std::runtime_error("no tensor " + n);
    return *t;
  };
  const std::string L = "model.layers.";
  variant("clean", [](std::vector<T>&, json::Object&) {});
  variant("an expert's block scales missing",
          [&](std::vector<T>& ts, json::Object&) { erase_t(ts, L + "10.mlp.experts.77.down_proj.weight_scale_inv"); });
  variant("an expert left in BF16", [&](std::vector<T>& ts, json::Object&) {
    find(ts, L + "20.mlp.experts.5.up_proj.weight").dtype = st::DType::BF16;
    erase_t(ts, L + "20.mlp.experts.5.up_proj.weight_scale_inv");
  });
  variant("o_proj transposed", [&](std::vector<T>& ts, json::Object&) {
    auto& s = find(ts, L + "4.self_attn.o_proj.weight").shape;
    std::swap(s[0], s[1]);
  });
  variant("norm of the wrong width", [&](std::vector<T>& ts, json::Object&) { find(ts, L + "7.self_attn.kv_a_layernorm.weight").shape = {256}; });
  variant("router bias in I32", [&](std::vector<T>& ts, json::Object&) {
    find(ts, L + "30.mlp.gate.e_score_correction_bias").dtype = st::DType::I32;
  });
  variant("block scales in BF16", [&](std::vector<T>& ts, json::Object&) {
    find(ts, L + "12.mlp.shared_experts.gate_proj.weight_scale_inv").dtype = st::DType::BF16;
  });
  variant("n_routed_experts 255", [](std::vector<T>&, json::Object& o) { set_member(o, "n_routed_experts", 255); });
  variant("an extra expert in one layer", [&](std::vector<T>& ts, json::Object&) {
    ts.push_back({L + "9.mlp.experts.256.gate_proj.weight", st::DType::F8_E4M3, {2048, 7168}});
  });
  variant("unexpected tensors", [&](std::vector<T>& ts, json::Object&) {
    ts.push_back({"model.layers.3.mlp.experts.0.gate_proj.bias", st::DType::BF16, {2048}});
    ts.push_back({"model.rotary_emb.inv_freq", st::DType::F32, {32}});
    ts.push_back({"lm_head.bias", st::DType::BF16, {129280}});
  });
  variant("num_nextn_predict_layers removed", [](std::vector<T>&, json::Object& o) { erase_member(o, "num_nextn_predict_layers"); });
  variant("MTP layer partly present", [&](std::vector<T>& ts, json::Object&) {
    erase_t(ts, L + "61.enorm.weight");
    erase_t(ts, L + "61.mlp.experts.100.gate_proj.weight");
  });
  variant("quantization_config dropped", [](std::vector<T>&, json::Object& o) { erase_member(o, "quantization_config"); });
  variant("weight_block_size 64", [](std::vector<T>&, json::Object& o) {
    for (auto& m : o)
      if (m.first == "quantization_config") set_member(m.second.mutable_object(), "weight_block_size", json::Array{json::Value(64), json::Value(64)});
  });
  variant("ignored_layers names one expert", [](std::vector<T>&, json::Object& o) {
    for (auto& m : o)
      if (m.first == "quantization_config")
        set_member(m.second.mutable_object(), "ignored_layers", json::Array{json::Value("model.layers.5.mlp.experts.3.down_proj")});
  });
  variant("hidden_size removed", [](std::vector<T>&, json::Object& o) { erase_member(o, "hidden_size"); });
  variant("moe_intermediate_size 1024", [](std::vector<T>&, json::Object& o) { set_member(o, "moe_intermediate_size", 1024); });
  variant("first_k_dense_replace 4", [](std::vector<T>&, json::Object& o) { set_member(o, "first_k_dense_replace", 4); });
  variant("tie_word_embeddings true", [](std::vector<T>&, json::Object& o) { set_member(o, "tie_word_embeddings", true); });
  check_group("deepseek_v3.jsonl", lines);
}

}  // namespace
}  // namespace ckpt::test
