// The engine post-pass and the CLI: --engine parsing, `ckpt engines`, portable vs per-engine
// severities on fixtures that reproduce the incidents, and the `engines` field in every format.
#include <gtest/gtest.h>

#include "../checks/builders.h"
#include "ckpt/engines.h"
#include "ckpt/report.h"

#include <cstring>

namespace ckpt::engines {
namespace {

using test::run_ckpt;
using test::TempDir;

std::string show(const test::CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out.substr(0, 4000) + "\n--- stderr\n" + r.err.substr(0, 2000);
}

json::Value json_out(const test::CommandResult& r) {
  auto p = json::parse(r.out);
  EXPECT_TRUE(p.ok()) << show(r);
  return p.value;
}

// The findings with this code, as JSON objects.
std::vector<json::Value> with_code(const json::Value& v, const std::string& code) {
  std::vector<json::Value> out;
  for (const auto& f : v.find("findings")->as_array())
    if (f.get_string("code") == code) out.push_back(f);
  return out;
}

std::vector<std::string> engines_of(const json::Value& f) {
  std::vector<std::string> out;
  if (const json::Value* e = f.find("engines"))
    for (const auto& x : e->as_array()) out.push_back(x.as_string());
  return out;
}

void fixture(const std::string& arch, const std::filesystem::path& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"fixture", arch, dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_ckpt(args);
  ASSERT_EQ(r.exit_code, 0) << show(r);
}

TEST(engines_profiles, every_profile_states_its_sources) {
  const auto& all = all_profiles();
  ASSERT_EQ(all.size(), 8u);
  std::vector<std::string> names;
  for (const auto& p : all) {
    names.emplace_back(p.name);
    EXPECT_FALSE(p.dialect.source.empty()) << p.name;
    for (const Behaviour* b : {&p.loader.unexpected_tensors, &p.loader.missing_tensors, &p.loader.stray_shards,
                               &p.loader.tied_head, &p.loader.rotary_buffers, &p.loader.dtype_casts})
      if (b->verdict != Verdict::unknown) EXPECT_FALSE(b->source.empty()) << p.name << ": " << b->note;
    for (const auto& q : p.quant) EXPECT_FALSE(q.source.empty()) << p.name << " " << q.scheme;
    for (const auto& c : p.config) EXPECT_FALSE(c.source.empty()) << p.name << " " << c.key;
    for (const auto& t : p.tokenizers) EXPECT_FALSE(t.source.empty()) << p.name << " " << t.model;
    EXPECT_EQ(p.reference, p.name == "transformers" || p.name == "vllm" || p.name == "sglang" || p.name == "tgi");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"transformers", "vllm", "sglang", "tgi", "mlx-lm", "swiftlm", "llama.cpp",
                                             "transformers.js"}));
}

TEST(engines_profiles, names_versions_and_selection) {
  std::string err;
  auto s = find_profile("swiftlm", &err);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, "2.3.5") << "default: the swift-jinja SwiftLM pins";
  EXPECT_EQ(s->id(), "swiftlm@2.3.5");
  EXPECT_EQ(find_profile("SwiftLM@2.4.0", &err)->dialect.version, (Version{2, 4, 0}));
  EXPECT_EQ(find_profile("mlx_lm", &err)->name, "mlx-lm");
  EXPECT_FALSE(find_profile("swiftlm@1.2.4", &err));
  EXPECT_NE(err.find("not modelled"), std::string::npos) << err;
  EXPECT_FALSE(find_profile("vllm@0.9.0", &err));
  EXPECT_FALSE(find_profile("swiftlm@2.x", &err));
  EXPECT_FALSE(find_profile("ollama", &err));
  EXPECT_NE(err.find("known:"), std::string::npos);
  auto sel = parse_selection({"swiftlm,vllm", " mlx-lm "}, &err);
  ASSERT_TRUE(sel);
  ASSERT_EQ(sel->engines.size(), 3u);
  EXPECT_EQ(sel->engines[0].name, "vllm") << "profile order";
  EXPECT_EQ(sel->engines[2].name, "swiftlm");
  sel = parse_selection({"swiftlm", "swiftlm@2.4.0"}, &err);
  ASSERT_EQ(sel->engines.size(), 1u);
  EXPECT_EQ(sel->engines[0].version, "2.4.0") << "the later version wins";
  EXPECT_TRUE(parse_selection({}, &err)->portable());
}

TEST(engines_cli, engines_command_text_and_json) {
  auto r = run_ckpt({"engines"});
  ASSERT_EQ(r.exit_code, 0) << show(r);
  for (const char* n : {"transformers", "vllm", "sglang", "tgi", "mlx-lm", "swiftlm@2.3.5", "llama.cpp",
                        "transformers.js@0.5.11"})
    EXPECT_NE(r.out.find(n), std::string::npos) << n;
  EXPECT_NE(r.out.find("source: incidents.md §1.7"), std::string::npos);
  auto j = run_ckpt({"engines", "swiftlm@2.4.0", "--format", "json"});
  ASSERT_EQ(j.exit_code, 0) << show(j);
  auto v = json_out(j);
  const auto& list = v.find("engines")->as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].get_string("id"), "swiftlm@2.4.0");
  EXPECT_EQ(list[0].find("dialect")->get_string("label"), "swift-jinja 2.4.0");
  EXPECT_EQ(list[0].find("loader")->get_string("shard_glob"), "*.safetensors");
  EXPECT_EQ(run_ckpt({"engines", "nosuch"}).exit_code, 2);
}

TEST(engines_cli, malformed_template_is_an_error_for_swiftlm_only) {
  TempDir d;
  fixture("qwen2", d.path() / "m", {"--defect", "malformed-template"});
  const std::string dir = (d.path() / "m").string();
  auto sw = run_ckpt({"verify", dir, "--format", "json", "--engine", "swiftlm"});
  EXPECT_EQ(sw.exit_code, 1) << show(sw);
  auto v = json_out(sw);
  auto ct = with_code(v, "CT011");
  ASSERT_EQ(ct.size(), 1u) << show(sw);
  EXPECT_EQ(ct[0].get_string("severity"), "error");
  EXPECT_EQ(engines_of(ct[0]), std::vector<std::string>{"swiftlm"});
  EXPECT_NE(ct[0].get_string("message")->find("SwiftLM (swift-jinja 2.3.5): parser('Unexpected token type: closeExpression') at "
                                                "tokenizer_config.json: chat_template:1:14"),
            std::string::npos)
      << *ct[0].get_string("message");
  // 2.4.0 parses it but renders the bare probe differently.
  auto fixed = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "swiftlm@2.4.0"}));
  EXPECT_TRUE(with_code(fixed, "CT011").empty());
  auto diff = with_code(fixed, "CT012");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0].get_string("severity"), "warning");
  EXPECT_NE(diff[0].get_string("message")->find("first difference at byte 13"), std::string::npos)
      << *diff[0].get_string("message");
  // Engines that keep the text verbatim get no dialect finding; portable names SwiftLM in a warning.
  auto vl = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "vllm,transformers.js,llama.cpp"}));
  EXPECT_TRUE(with_code(vl, "CT011").empty());
  EXPECT_TRUE(with_code(vl, "CT012").empty());
  auto portable = json_out(run_ckpt({"verify", dir, "--format", "json"}));
  auto pc = with_code(portable, "CT011");
  ASSERT_EQ(pc.size(), 1u);
  EXPECT_EQ(pc[0].get_string("severity"), "warning");
  EXPECT_EQ(engines_of(pc[0]), std::vector<std::string>{"swiftlm"});
  // Text output appends the engines in parentheses.
  auto text = run_ckpt({"verify", dir, "--engine", "swiftlm"});
  EXPECT_NE(text.out.find("(swiftlm)"), std::string::npos) << show(text);
}

TEST(engines_cli, template_printing_a_boolean_renders_differently_for_transformers_js) {
  // @huggingface/jinja prints True as "true" (template-dialects.md §2): the prompt differs
  // although its parser accepts the template.
  TempDir d;
  fixture("qwen2", d.path() / "m", {});
  const std::string dir = (d.path() / "m").string();
  test::write_text(d.path() / "m" / "chat_template.jinja",
             "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
             "{% if add_generation_prompt %}<|assistant|>thinking={{ add_generation_prompt }}{% endif %}");
  auto js = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "transformers.js"}));
  auto diff = with_code(js, "CT012");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(engines_of(diff[0]), std::vector<std::string>{"transformers.js"});
  const std::string msg = *diff[0].get_string("message");
  EXPECT_NE(msg.find("reference \"True\", engine \"true\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("prints values as JavaScript does"), std::string::npos) << msg;
  auto py = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "vllm,mlx-lm"}));  // Python jinja2
  EXPECT_TRUE(with_code(py, "CT012").empty());
}

TEST(engines_cli, runtime_differences_of_llama_cpp_and_swiftlm_are_warnings) {
  // A template printing a possibly-None value and a dict through tojson: llama.cpp prints None
  // as "" (recorded micro print_none), swift-jinja sorts and compacts tojson (§1b row "tojson").
  TempDir d;
  fixture("qwen2", d.path() / "m", {});
  const std::string dir = (d.path() / "m").string();
  test::write_text(d.path() / "m" / "chat_template.jinja",
             "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
             "cfg={{ {'z': 1, 'a': 2}|tojson }} sys={{ messages[0].get('name') }}"
             "{% if add_generation_prompt %}[assistant]{% endif %}");
  auto ll = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "llama.cpp"}));
  auto diff = with_code(ll, "CT012");
  ASSERT_EQ(diff.size(), 1u) << ll.find("findings")->as_array().size();
  EXPECT_EQ(*diff[0].get_string("severity"), "warning");
  EXPECT_EQ(engines_of(diff[0]), std::vector<std::string>{"llama.cpp"});
  std::string msg = *diff[0].get_string("message");
  EXPECT_NE(msg.find("reference \"None"), std::string::npos) << msg;
  EXPECT_NE(msg.find("its runtime (common/jinja)"), std::string::npos) << msg;
  auto sw = json_out(run_ckpt({"verify", dir, "--format", "json", "--engine", "swiftlm"}));
  diff = with_code(sw, "CT012");
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(*diff[0].get_string("severity"), "warning");
  msg = *diff[0].get_string("message");
  EXPECT_NE(msg.find("reference \"z\": 1, \"a\": 2}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("engine \"a\":2,\"z\":1}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sorts and compacts tojson"), std::string::npos) << msg;
  for (const auto* v : {&ll, &sw})
    for (const auto& f : v->find("findings")->as_array())
      EXPECT_NE(*f.get_string("severity"), "error") << *f.get_string("code") << " " << *f.get_string("message");
}

TEST(engines_cli, stray_shard_breaks_glob_loaders_only) {
  TempDir d;
  fixture("qwen2", d.path() / "s", {"--defect", "stray-shard", "--shards", "2"});
  const std::string dir = (d.path() / "s").string();
  auto portable = json_out(run_ckpt({"verify", dir, "--format", "json"}));
  auto ix = with_code(portable, "IX002");
  ASSERT_EQ(ix.size(), 1u);
  EXPECT_EQ(ix[0].get_string("severity"), "warning");
  EXPECT_EQ(engines_of(ix[0]), std::vector<std::string>{"swiftlm"}) << "mlx-lm's model*.safetensors glob skips it";
  auto sw = run_ckpt({"verify", dir, "--format", "json", "--engine", "swiftlm", "--select", "IX"});
  EXPECT_EQ(sw.exit_code, 1) << show(sw);
  EXPECT_EQ(with_code(json_out(sw), "IX002")[0].get_string("severity"), "error");
  auto vllm = run_ckpt({"verify", dir, "--format", "json", "--engine", "vllm", "--select", "IX"});
  EXPECT_EQ(vllm.exit_code, 0) << show(vllm);
  auto vf = with_code(json_out(vllm), "IX002");
  ASSERT_EQ(vf.size(), 1u);
  EXPECT_EQ(vf[0].get_string("severity"), "warning");
  EXPECT_EQ(engines_of(vf[0]), std::vector<std::string>{"vllm"});
}

TEST(engines_cli, unexpected_tensor_strict_loaders_error_transformers_warns) {
  TempDir d;
  const auto dir = d.path() / "u";
  fixture("qwen2", dir, {});
  ftest::write_st(dir / "model-extra.safetensors", {{"model.layers.0.mlp.extra_proj.weight", st::DType::F32, {8, 8}}});
  // Put it into the picture for every loader: the single-file fixture has no index, so every
  // loader opens every model*.safetensors file.
  auto t = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "transformers", "--select", "AR002"}));
  auto ar = with_code(t, "AR002");
  ASSERT_EQ(ar.size(), 1u) << t.dump();
  EXPECT_EQ(ar[0].get_string("severity"), "warning");
  auto m = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "mlx-lm", "--select", "AR002"}));
  EXPECT_EQ(with_code(m, "AR002")[0].get_string("severity"), "error");
  EXPECT_EQ(engines_of(with_code(m, "AR002")[0]), std::vector<std::string>{"mlx-lm"});
  auto p = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--select", "AR002"}));
  auto pa = with_code(p, "AR002")[0];
  EXPECT_EQ(pa.get_string("severity"), "error") << "vLLM (reference family) refuses unknown keys";
  EXPECT_EQ(engines_of(pa), (std::vector<std::string>{"vllm", "mlx-lm", "swiftlm"}));
  auto sg = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "sglang", "--select", "AR002"}));
  EXPECT_NE(with_code(sg, "AR002")[0].get_string("hint")->find("portable verdict"), std::string::npos);
}

TEST(engines_cli, quantization_and_config_by_engine) {
  TempDir d;
  const auto dir = d.path() / "q";
  fixture("qwen2", dir, {"--quant", "gptq4"});
  // A clean GPTQ 4-bit checkpoint: SwiftLM's MLX loader cannot load it, mlx-lm and vLLM can.
  auto sw = run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "QZ"});
  EXPECT_EQ(sw.exit_code, 1) << show(sw);
  auto q = with_code(json_out(sw), "QZ012");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_NE(q[0].get_string("message")->find("SwiftLM does not load gptq 4-bit"), std::string::npos);
  EXPECT_EQ(run_ckpt({"verify", dir.string(), "--engine", "vllm,mlx-lm", "--select", "QZ"}).exit_code, 0);
  auto portable = run_ckpt({"verify", dir.string(), "--format", "json", "--select", "QZ"});
  EXPECT_EQ(portable.exit_code, 0) << "a scheme some engines do not load is a warning without --engine\n" << show(portable);
  // SwiftLM decodes rms_norm_eps without a default.
  auto cfg = json::parse(test::read_text(dir / "config.json")).value;
  json::Object o;
  for (const auto& [k, v] : cfg.as_object())
    if (k != "rms_norm_eps" && k != "rope_theta") o.emplace_back(k, v);
  test::write_text(dir / "config.json", json::Value(o).dump());
  auto c = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF"}));
  auto cf = with_code(c, "CF012");
  ASSERT_EQ(cf.size(), 1u) << c.dump();
  EXPECT_NE(cf[0].get_string("message")->find("keyNotFound(\"rms_norm_eps\")"), std::string::npos);
  auto rope = with_code(c, "CF006");
  bool rope_found = false;
  for (const auto& f : rope)
    if (f.get_string("message")->find("rope_theta is absent: transformers uses 10000, SwiftLM 1000000") != std::string::npos)
      rope_found = true;
  EXPECT_TRUE(rope_found) << c.dump();
  auto t = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "transformers", "--select", "CF"}));
  EXPECT_TRUE(with_code(t, "CF012").empty());
}

TEST(engines_report, engines_field_only_when_set) {
  Report r;
  r.target = "m";
  Finding plain{"AR001", Severity::error, "missing x", "model.safetensors", "x", "h"};
  Finding some = plain;
  some.code = "AR002";
  some.engines = {"mlx-lm", "swiftlm"};
  r.findings = {plain, some};
  r.summary = count_findings(r.findings);
  std::string j = render_json(r);
  EXPECT_NE(j.find("\"hint\":\"h\"},{"), std::string::npos) << "no engines key when empty: " << j;
  EXPECT_NE(j.find("\"hint\":\"h\",\"engines\":[\"mlx-lm\",\"swiftlm\"]}"), std::string::npos) << j;
  EXPECT_NE(render_text(r, false).find("missing x (mlx-lm, swiftlm)"), std::string::npos);
  EXPECT_NE(render_github(r).find("AR002 missing x (mlx-lm, swiftlm)"), std::string::npos);
  EXPECT_NE(render_sarif(r).find("missing x (mlx-lm, swiftlm)"), std::string::npos);
}

}  // namespace
}  // namespace ckpt::engines

namespace ckpt::engines {
namespace {

TEST(engines_cli, indexed_shard_outside_mlx_glob_and_wordlevel_tokenizer) {
  TempDir d;
  const auto dir = d.path() / "g";
  fixture("qwen2", dir, {"--shards", "2"});
  std::filesystem::rename(dir / "model-00002-of-00002.safetensors", dir / "embed.safetensors");
  std::string idx = test::read_text(dir / "model.safetensors.index.json");
  for (size_t p; (p = idx.find("model-00002-of-00002.safetensors")) != std::string::npos;)
    idx.replace(p, std::strlen("model-00002-of-00002.safetensors"), "embed.safetensors");
  test::write_text(dir / "model.safetensors.index.json", idx);
  auto m = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "mlx-lm"}));
  auto ix = with_code(m, "IX014");
  ASSERT_EQ(ix.size(), 1u) << m.dump();
  EXPECT_EQ(ix[0].get_string("severity"), "error");
  EXPECT_NE(ix[0].get_string("message")->find("(embed.safetensors)"), std::string::npos);
  auto t = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "transformers,swiftlm"}));
  EXPECT_TRUE(with_code(t, "IX014").empty()) << "index-driven and recursive-glob loaders open it";
  // A WordLevel tokenizer: SwiftLM cannot build it.
  test::write_text(dir / "tokenizer.json",
                   R"({"version": "1.0", "added_tokens": [], "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1},)"
                   R"( "unk_token": "a"}})");
  auto s = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "TK020"}));
  auto tk = with_code(s, "TK020");
  ASSERT_EQ(tk.size(), 1u) << s.dump();
  EXPECT_NE(tk[0].get_string("message")->find("SwiftLM cannot build a WordLevel tokenizer"), std::string::npos);
  auto v = json_out(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "vllm", "--select", "TK020"}));
  EXPECT_TRUE(with_code(v, "TK020").empty());
}

}  // namespace
}  // namespace ckpt::engines
