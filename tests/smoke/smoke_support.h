// What the smoke tests share: the torch oracle's interpreter, the trained-model cache and the
// agreement bounds with torch.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/json.h"
#include "test_support.h"

namespace ckpt::test::smoke_support {

// Agreement with torch, float32 on both sides: BLAS and torch sum in different orders, so
// logits differ by rounding that grows with depth; these bounds hold with a margin of ~10x.
inline constexpr double kLogitTolerance = 2e-3;   // max |logit_ckpt - logit_torch|
inline constexpr double kNllTolerance = 1e-4;     // |mean NLL difference| (nats)
inline constexpr double kRmsRelTolerance = 1e-4;  // per-stage hidden-state RMS, relative

inline const char* kPython = "/usr/bin/python3";

inline bool have_torch() {
  static const bool ok = [] {
    if (!std::filesystem::exists(kPython)) return false;
    return run_program({kPython, "-c", "import torch, numpy, sentencepiece, regex"}).exit_code == 0;
  }();
  return ok;
}

inline std::string source(const std::string& rel) { return std::string(CKPT_SOURCE_DIR) + "/" + rel; }

// The cached trained model of `family` (trained on first use).
inline std::filesystem::path trained(const std::string& family, const std::string& dtype = "bf16") {
  auto r = run_program({kPython, source("tools/smoke/ensure_model.py"), CKPT_SMOKE_MODELS_DIR, family, "--dtype", dtype});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::string dir = r.out;
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  return dir;
}

// The ids a model directory's smoke_tokens.json holds (those it was trained and baselined on).
inline std::vector<uint32_t> smoke_ids_of(const std::filesystem::path& dir) {
  auto parsed = json::parse(read_text(dir / "smoke_tokens.json"));
  std::vector<uint32_t> ids;
  if (!parsed.ok()) return ids;
  for (const auto& v : parsed.value.find("ids")->as_array()) ids.push_back(uint32_t(v.as_int()));
  return ids;
}

}  // namespace ckpt::test::smoke_support

#define REQUIRE_TORCH()                                                                                         \
  do {                                                                                                          \
    if (!::ckpt::test::smoke_support::have_torch())                                                            \
      GTEST_SKIP() << "skipped: /usr/bin/python3 with torch, numpy, sentencepiece and regex is absent (the "    \
                      "trained smoke models, the torch reference and the Python writers need them)";            \
  } while (0)
