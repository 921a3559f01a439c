// Tokenizer checks on a 150k-token byte-level BPE tokenizer.json (150k vocab, ~150k merges):
// JSON parse (what the Checkpoint loader does), the TK checks alone, and load + TK end to end.
// Baseline in the same run: Python's json.load of the same file (/usr/bin/python3), the cost a
// Python loader pays before building anything.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "ckpt/tokenizer.h"

using namespace ckpt;
namespace fs = std::filesystem;

// Median thread CPU time: the machine running the benchmark may be shared, and CPU time is
// what the work costs (wall time is printed by the fixture benchmark).
static double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double a = cpu_ms();
    f();
    t.push_back(cpu_ms() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  uint32_t vocab = argc > 1 ? uint32_t(std::atoi(argv[1])) : 150000;
  tok::GenOptions o;
  o.vocab_size = vocab;
  o.fill_with_merges = true;
  auto g = tok::generate(o);
  fs::path dir = fs::temp_directory_path() / ("ckpt-tokenizer-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto put = [&](const char* name, const std::string& s) { std::ofstream(dir / name, std::ios::binary) << s; };
  put("tokenizer.json", g.tokenizer_json);
  put("tokenizer_config.json", g.tokenizer_config_json);
  put("generation_config.json", g.generation_config_json);
  put("config.json", "{\"model_type\":\"qwen2\",\"vocab_size\":" + std::to_string(vocab) + "}");
  std::printf("tokenizer.json: %u tokens, %u merges, %.1f MB\n", vocab, vocab - 260,
              double(g.tokenizer_json.size()) / 1e6);

  double parse = median_ms(9, [&] {
    auto r = json::parse(g.tokenizer_json);
    if (!r.ok()) std::abort();
  });
  auto lr = load_checkpoint(dir.string());
  if (!lr.checkpoint) return 1;
  size_t n = 0;
  double check = median_ms(9, [&] {
    FindingSink sink;
    tok::check_tokenizer(*lr.checkpoint, {}, sink);
    n = sink.findings().size();
  });
  LoadOptions one;
  one.threads = 1;  // thread CPU time only counts the calling thread
  double total = median_ms(9, [&] {
    auto l = load_checkpoint(dir.string(), one);
    FindingSink sink;
    tok::check_tokenizer(*l.checkpoint, {}, sink);
  });
  std::printf("ckpt json::parse:            %8.1f ms (median of 9)\n", parse);
  std::printf("ckpt TK checks (parsed):     %8.1f ms (%zu findings)\n", check, n);
  std::printf("ckpt load + TK checks:       %8.1f ms\n", total);
  std::string cmd = "/usr/bin/python3 -c \"import json,time,sys;t=[];\nfor i in range(5):\n a=time.process_time();json.load(open(sys.argv[1]));t.append(time.process_time()-a)\nprint('%.1f'%(sorted(t)[2]*1000))\" " +
                    (dir / "tokenizer.json").string();
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[64] = {0};
    if (fgets(buf, sizeof buf, p)) std::printf("baseline python json.load:   %8.1f ms\n", std::atof(buf));
    pclose(p);
  }
  fs::remove_all(dir);
  return 0;
}
