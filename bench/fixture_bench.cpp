// ckpt fixture: wall time of every default fixture (median of 7 runs each) and of qwen2 with
// each quantization scheme; checks the output is byte-identical across runs.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ckpt/fixture.h"

using namespace ckpt;
namespace fs = std::filesystem;

static std::string digest(const fs::path& dir) {
  std::string all;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    all += f.filename().string() + std::string(std::istreambuf_iterator<char>(in), {});
  }
  return std::to_string(std::hash<std::string>{}(all));
}

int main() {
  fs::path root = fs::temp_directory_path() / ("ckpt-fixture-bench-" + std::to_string(::getpid()));
  double worst = 0;
  std::string worst_name;
  bool deterministic = true;
  auto run = [&](const std::string& arch, const std::string& quant) {
    fixture::Options o;
    o.arch = arch;
    o.quant = quant;
    o.out = root / (arch + quant);
    std::vector<double> t;
    std::string first;
    fixture::Result r;
    for (int i = 0; i < 7; ++i) {
      auto a = std::chrono::steady_clock::now();
      r = fixture::make_fixture(o);
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      if (!r.error.empty()) {
        std::printf("%s %s: %s\n", arch.c_str(), quant.c_str(), r.error.c_str());
        return;
      }
      std::string d = digest(o.out);
      if (i == 0) first = d;
      else if (d != first) deterministic = false;
    }
    std::sort(t.begin(), t.end());
    std::printf("%-18s %-8s %4llu tensors %8.1f KB %7.2f ms\n", arch.c_str(), quant.empty() ? "float" : quant.c_str(),
                (unsigned long long)r.tensors, double(r.bytes) / 1e3, t[3]);
    if (t[3] > worst) worst = t[3], worst_name = arch + " " + quant;
  };
  for (const auto& a : fixture::architectures()) run(a.model_type, "");
  for (const auto& s : fixture::schemes()) run("qwen2", std::string(s.name));
  for (const auto& s : fixture::schemes()) run("qwen3_moe", std::string(s.name));
  std::printf("slowest: %s %.2f ms; byte-identical across runs: %s\n", worst_name.c_str(), worst,
              deterministic ? "yes" : "NO");
  fs::remove_all(root);
  return deterministic ? 0 : 1;
}
