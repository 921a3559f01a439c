// Tokenizer checks on a 150k-token byte-level BPE tokenizer.json (150k vocab, ~150k merges).
// Measures (median thread CPU time): the JSON parse the TK family does (simdjson DOM over the
// loader's bytes), the former loader parse into a json::Value (for comparison), the TK checks
// alone on a loaded checkpoint (parse included), and load + TK end to end, both repeated in this
// process with the allocator keeping freed memory (the work itself) and once per fresh process
// (what one `ckpt verify` pays: every buffer is new memory, one page fault per 4 KiB touched).
// Baseline in the same run: Python's json.load of the same file (/usr/bin/python3), the cost a
// Python loader pays before building anything.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "ckpt/tokenizer.h"

using namespace ckpt;
namespace fs = std::filesystem;

// Thread CPU time: the machine running the benchmark may be shared, and CPU time is what the
// work costs (wall time is printed by the fixture benchmark). It includes the kernel's time
// for this thread's page faults.
static double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

static long minor_faults() {
  rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
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

// load + TK once (single-threaded load: thread CPU time only counts the calling thread).
static size_t load_and_check(const fs::path& dir) {
  LoadOptions one;
  one.threads = 1;
  auto l = load_checkpoint(dir.string(), one);
  if (!l.checkpoint) std::abort();
  FindingSink sink;
  tok::check_tokenizer(*l.checkpoint, {}, sink);
  return sink.findings().size();
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--once") == 0) {  // child: one cold run
    long f0 = minor_faults();
    double a = cpu_ms();
    size_t n = load_and_check(argv[2]);
    double ms = cpu_ms() - a;
    std::printf("%.3f %ld %zu\n", ms, minor_faults() - f0, n);
    return 0;
  }
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
  std::printf("tokenizer.json: %u tokens, %u merges, %.1f MB; simdjson %d.%d.%d, implementation %s\n", vocab,
              vocab - 260, double(g.tokenizer_json.size()) / 1e6, int(simdjson::SIMDJSON_VERSION_MAJOR),
              int(simdjson::SIMDJSON_VERSION_MINOR), int(simdjson::SIMDJSON_VERSION_REVISION),
              simdjson::get_active_implementation()->name().c_str());

  // Cold first, before this process's allocator holds freed memory that later runs would reuse.
  std::vector<double> cold;
  long cold_faults = 0;
  size_t cold_findings = 0;
  std::string self = fs::read_symlink("/proc/self/exe").string();
  for (int i = 0; i < 9; ++i) {
    std::string cmd = "'" + self + "' --once '" + dir.string() + "'";
    if (FILE* p = popen(cmd.c_str(), "r")) {
      double ms = 0;
      long faults = 0;
      if (fscanf(p, "%lf %ld %zu", &ms, &faults, &cold_findings) == 3) {
        cold.push_back(ms);
        cold_faults = faults;
      }
      pclose(p);
    }
  }
  std::sort(cold.begin(), cold.end());

  // In-process figures: freed memory stays with the allocator (no mmap, no trimming), so
  // repeated runs measure the work, not the kernel handing out fresh pages again.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  simdjson::padded_string padded(g.tokenizer_json);
  double dom = median_ms(9, [&] {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (parser.parse(padded).get(root) != simdjson::SUCCESS) std::abort();
  });
  double value = median_ms(9, [&] {
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
  double total = median_ms(9, [&] { load_and_check(dir); });
  std::printf("simdjson DOM parse (TK family):  %8.1f ms (median of 9)\n", dom);
  std::printf("json::parse to json::Value:      %8.1f ms (the loader's former parse)\n", value);
  std::printf("ckpt TK checks (parse included): %8.1f ms (%zu findings)\n", check, n);
  std::printf("ckpt load + TK, in process:      %8.1f ms\n", total);
  if (!cold.empty())
    std::printf("ckpt load + TK, fresh process:   %8.1f ms (median of %zu, %ld page faults, %zu findings)\n",
                cold[cold.size() / 2], cold.size(), cold_faults, cold_findings);
  std::string cmd = "/usr/bin/python3 -c \"import json,time,sys;t=[];\nfor i in range(5):\n a=time.process_time();json.load(open(sys.argv[1]));t.append(time.process_time()-a)\nprint('%.1f'%(sorted(t)[2]*1000))\" " +
                    (dir / "tokenizer.json").string();
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[64] = {0};
    if (fgets(buf, sizeof buf, p)) std::printf("baseline python json.load:       %8.1f ms\n", std::atof(buf));
    pclose(p);
  }
  fs::remove_all(dir);
  return 0;
}
