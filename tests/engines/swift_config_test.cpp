// SwiftLM's Codable configurations: rope_theta without a default for the model types whose
// mlx-swift-lm configuration decodes it with decode() (src/engines/swiftlm.cpp cites each), as
// an error for --engine swiftlm only; the key is read at the top level, not under
// rope_parameters; real configs that carry it stay clean.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "../checks/builders.h"

namespace ckpt::engines {
namespace {

using test::run_ckpt;
using test::TempDir;
namespace fs = std::filesystem;

json::Value json_of(const test::CommandResult& r) {
  auto p = json::parse(r.out);
  EXPECT_TRUE(p.ok()) << r.out << r.err;
  return p.value;
}

std::vector<json::Value> cf012(const json::Value& v) {
  std::vector<json::Value> out;
  if (const auto* f = v.find("findings"); f && f->is_array())
    for (const auto& x : f->as_array())
      if (*x.get_string("code") == "CF012") out.push_back(x);
  return out;
}

// config.json rewritten with `edit` applied to its top-level members.
void rewrite_config(const fs::path& dir, const std::function<void(json::Object&)>& edit) {
  auto cfg = json::parse(test::read_text(dir / "config.json")).value;
  json::Object o = cfg.as_object();
  edit(o);
  test::write_text(dir / "config.json", json::Value(o).dump());
}

void erase_key(json::Object& o, std::string_view key) {
  o.erase(std::remove_if(o.begin(), o.end(), [&](const auto& kv) { return kv.first == key; }), o.end());
}

TEST(swift_config, deepseek_v3_without_rope_theta_is_key_not_found_for_swiftlm_only) {
  TempDir d;
  auto dir = d.path() / "m";
  ASSERT_EQ(run_ckpt({"fixture", "deepseek_v3", dir.string()}).exit_code, 0);
  auto clean = json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF012"}));
  EXPECT_TRUE(cf012(clean).empty()) << clean.dump();

  rewrite_config(dir, [](json::Object& o) { erase_key(o, "rope_theta"); });
  auto sw = run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF012"});
  EXPECT_EQ(sw.exit_code, 1) << sw.out;
  auto f = cf012(json_of(sw));
  ASSERT_EQ(f.size(), 1u) << sw.out;
  EXPECT_EQ(*f[0].get_string("severity"), "error");
  EXPECT_NE(f[0].get_string("message")->find("keyNotFound(\"rope_theta\")"), std::string::npos) << sw.out;
  EXPECT_NE(f[0].get_string("hint")->find("DeepseekV3.swift@14414441:34"), std::string::npos) << sw.out;
  for (const char* engine : {"transformers", "vllm", "mlx-lm"}) {
    auto other = json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", engine, "--select", "CF012"}));
    EXPECT_TRUE(cf012(other).empty()) << engine << ": " << other.dump();
  }
  // Portable verdict: still reported, naming the one engine it breaks.
  auto portable = cf012(json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--select", "CF012"})));
  ASSERT_EQ(portable.size(), 1u);
  ASSERT_NE(portable[0].find("engines"), nullptr);
  EXPECT_EQ(portable[0].find("engines")->as_array().size(), 1u);

  // Under rope_parameters only (transformers v5 layout): Python loaders find it, Swift does not.
  rewrite_config(dir, [](json::Object& o) {
    json::Object rp;
    rp.emplace_back("rope_theta", json::Value(10000.0));
    rp.emplace_back("rope_type", json::Value(std::string("default")));
    o.emplace_back("rope_parameters", json::Value(rp));
  });
  EXPECT_EQ(cf012(json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF012"}))).size(), 1u);
}

TEST(swift_config, models_that_default_rope_theta_are_not_flagged) {
  // Qwen2/Qwen3/Llama configurations decode rope_theta with decodeIfPresent.
  for (const char* arch : {"llama", "qwen3", "qwen3_moe"}) {
    TempDir d;
    auto dir = d.path() / "m";
    ASSERT_EQ(run_ckpt({"fixture", arch, dir.string()}).exit_code, 0);
    rewrite_config(dir, [](json::Object& o) { erase_key(o, "rope_theta"); });
    auto v = json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF012"}));
    for (const auto& f : cf012(v))
      EXPECT_EQ(f.get_string("message")->find("rope_theta"), std::string::npos) << arch << ": " << v.dump();
  }
}

TEST(swift_config, real_configs_with_rope_theta_stay_clean_for_swiftlm) {
  CKPT_REQUIRE_CORPUS();
  for (const char* name : {"DeepSeek-V3-config", "DeepSeek-R1"}) {
    auto src = test::corpus_dir() / "configs" / name / "config.json";
    if (!fs::exists(src)) continue;
    TempDir d;
    auto dir = d.path() / "m";
    ASSERT_EQ(run_ckpt({"fixture", "deepseek_v3", dir.string()}).exit_code, 0);
    fs::copy_file(src, dir / "config.json", fs::copy_options::overwrite_existing);
    auto v = json_of(run_ckpt({"verify", dir.string(), "--format", "json", "--engine", "swiftlm", "--select", "CF012"}));
    EXPECT_TRUE(cf012(v).empty()) << name << ": " << v.dump();
  }
}

}  // namespace
}  // namespace ckpt::engines
