// Test helpers for the CF/AR/QZ families: write header-only checkpoints on disk from a
// config and a tensor plan (the registry's own plan, optionally mutated), then verify.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "ckpt/safetensors.h"
#include "test_support.h"

namespace ckpt::test {

struct T {
  std::string name;
  st::DType dtype;
  std::vector<uint64_t> shape;
};

inline json::Value parse_json(const std::string& text) {
  auto r = json::parse(text);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->message : "");
  return r.value;
}

// The registry's plan for a config (required tensors + every optional group present when
// `with_groups`), as concrete tensors.
inline std::vector<T> plan_for(const std::string& config_text, bool with_groups = true,
                               bool with_optional = false) {
  json::Value cfg = parse_json(config_text);
  auto view = arch::resolve_config(cfg);
  EXPECT_NE(view.arch, nullptr);
  auto scheme = quant::parse_scheme(cfg);
  auto plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
  std::vector<T> out;
  for (const auto& x : plan) {
    if (x.presence == arch::Presence::Optional && !with_optional) continue;
    if (x.presence == arch::Presence::Group && (!with_groups || x.mtp)) continue;
    out.push_back({std::string(x.name), arch::resolve_dtype(x.dtype, view.model_dtype), x.shape});
  }
  return out;
}

inline T* find_t(std::vector<T>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}
inline void erase_t(std::vector<T>& ts, const std::string& name) {
  auto n = ts.size();
  std::erase_if(ts, [&](const T& t) { return t.name == name; });
  EXPECT_EQ(ts.size() + 1, n) << "no tensor " << name << " to remove";
}

// Write config.json + model.safetensors (sparse) into `dir`.
inline void write_model(const std::filesystem::path& dir, const std::string& config_text,
                        const std::vector<T>& tensors) {
  std::filesystem::create_directories(dir);
  write_text(dir / "config.json", config_text);
  std::vector<st::TensorToWrite> w;
  for (const auto& t : tensors) w.push_back({t.name, t.dtype, t.shape, {}});
  std::string err = st::write_file(dir / "model.safetensors", std::move(w));
  ASSERT_TRUE(err.empty()) << err;
}

inline std::vector<Finding> verify_dir(const std::filesystem::path& dir) {
  auto r = load_checkpoint(dir.string());
  EXPECT_TRUE(r.checkpoint.has_value()) << (r.error ? r.error->message : "");
  if (!r.checkpoint) return {};
  return run_checks(*r.checkpoint);
}

inline bool ours(const Finding& f) {
  return f.code.rfind("CF", 0) == 0 || f.code.rfind("AR", 0) == 0 || f.code.rfind("QZ", 0) == 0;
}

inline std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs)
    s += "  " + f.code + " " + std::string(severity_name(f.severity)) + " [" + f.tensor + "] " + f.message +
         (f.hint.empty() ? "" : " -- " + f.hint) + "\n";
  return s;
}

inline std::vector<Finding> our_errors(const std::vector<Finding>& fs) {
  std::vector<Finding> o;
  for (const auto& f : fs)
    if (ours(f) && f.severity == Severity::error) o.push_back(f);
  return o;
}

// Verify config + tensors; returns every finding.
inline std::vector<Finding> check(const std::string& config_text, const std::vector<T>& tensors) {
  TempDir d;
  write_model(d.path(), config_text, tensors);
  return verify_dir(d.path());
}

inline const Finding* has(const std::vector<Finding>& fs, const std::string& code, const std::string& needle = {}) {
  for (const auto& f : fs)
    if (f.code == code && (needle.empty() || f.message.find(needle) != std::string::npos ||
                           f.tensor.find(needle) != std::string::npos || f.hint.find(needle) != std::string::npos))
      return &f;
  return nullptr;
}

#define EXPECT_CLEAN(fs) EXPECT_TRUE(::ckpt::test::our_errors(fs).empty()) << ::ckpt::test::dump(fs)
#define EXPECT_FINDING(fs, code, needle) \
  EXPECT_NE(::ckpt::test::has(fs, code, needle), nullptr) << "want " << code << " ~ " << needle << "\n" << ::ckpt::test::dump(fs)

}  // namespace ckpt::test
