// Cost of the CF/AR/QZ families on a 22,213-tensor MoE layout.
//
//   arch_bench [CORPUS_DIR] [RUNS]
//
// Builds a sparse, header-only stand-in of Qwen3.5-25B-REAP-A3B-Coding (the real config.json,
// the real index's 22,213 names, shapes predicted by the registry) in a temporary directory,
// then times, RUNS times each: load_checkpoint + every other family (the in-run baseline), and
// load_checkpoint + every family including CF/AR/QZ; and the conformance engine alone. Prints
// medians in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "arch/conformance.h"
#include "ckpt/arch.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checks.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "ckpt/safetensors.h"

namespace fs = std::filesystem;
using namespace ckpt;

static std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char** argv) {
  fs::path corpus = argc > 1 ? fs::path(argv[1]) : fs::path(CKPT_BENCH_CORPUS_DIR);
  int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 15;
  fs::path src = corpus / "configs" / "Qwen3.5-25B-REAP-A3B-Coding";
  std::string cfg_text = slurp(src / "config.json");
  auto cfg = json::parse(cfg_text);
  auto idx = json::parse(slurp(src / "model.safetensors.index.json"));
  if (!cfg.ok() || !idx.ok()) {
    std::fprintf(stderr, "cannot read %s\n", src.c_str());
    return 2;
  }
  std::set<std::string> names;
  for (const auto& [k, v] : idx.value.find("weight_map")->as_object()) names.insert(k);
  auto view = arch::resolve_config(cfg.value, [&](std::string_view n) { return names.count(std::string(n)) > 0; });
  auto plan = arch::expected_tensors(view);
  std::vector<st::TensorToWrite> tensors;
  for (const auto& x : plan)
    if (names.count(std::string(x.name))) tensors.push_back({std::string(x.name), arch::resolve_dtype(x.dtype, view.model_dtype), x.shape, {}});

  fs::path dir = fs::temp_directory_path() / ("ckpt-arch-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << cfg_text;
  std::string err = st::write_file(dir / "model.safetensors", tensors);
  if (!err.empty()) {
    std::fprintf(stderr, "write failed: %s\n", err.c_str());
    return 2;
  }

  std::vector<double> base, full, engine;
  size_t n_tensors = 0, n_findings = 0;
  for (int r = 0; r < runs; ++r) {
    for (int with : {0, 1}) {
      auto t0 = std::chrono::steady_clock::now();
      auto lr = load_checkpoint(dir.string());
      if (!lr.checkpoint) return 2;
      FindingSink sink;
      for (const auto& f : check_families()) {
        bool ours = f.name == "CF" || f.name == "AR" || f.name == "QZ";
        if (ours && !with) continue;
        f.run(*lr.checkpoint, VerifyOptions{}, sink);
      }
      auto t1 = std::chrono::steady_clock::now();
      (with ? full : base).push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (with) {
        n_tensors = lr.checkpoint->weights().size();
        n_findings = 0;
        for (const auto& f : sink.findings())
          if ((f.code[0] == 'C' && f.code[1] == 'F') || f.code[0] == 'A' || f.code[0] == 'Q')
            n_findings += f.severity == Severity::error;
        auto e0 = std::chrono::steady_clock::now();
        FindingSink s2;
        arch::ConformanceInput in = arch::conformance_input(*lr.checkpoint);
        arch::check_conformance(in, arch::kCF | arch::kAR | arch::kQZ, s2);
        auto e1 = std::chrono::steady_clock::now();
        engine.push_back(std::chrono::duration<double, std::milli>(e1 - e0).count());
      }
    }
  }
  fs::remove_all(dir);
  double b = median(base), f = median(full);
  std::printf("layout: Qwen3.5-25B-REAP-A3B-Coding stand-in, %zu tensors, %d runs, CF/AR/QZ errors: %zu\n",
              n_tensors, runs, n_findings);
  std::printf("load + other families (baseline): median %.1f ms\n", b);
  std::printf("load + all families incl. CF/AR/QZ: median %.1f ms\n", f);
  std::printf("added by CF/AR/QZ: %.1f ms\n", f - b);
  std::printf("conformance engine alone (CF+AR+QZ in one pass): median %.1f ms\n", median(engine));
  return 0;
}
