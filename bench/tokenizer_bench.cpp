// Tokenizer checks on a 150k-token byte-level BPE tokenizer.json (150k vocab, ~150k merges).
// Measures what a user pays, `ckpt verify DIR` in fresh processes (the CLI binary itself, so its
// allocator tuning is included: CPU time user + system, page faults, wall), beside the same
// directory without the tokenizer files; then load + TK once per fresh process of this benchmark,
// which does not tune the allocator (every buffer is new memory, one page fault per 4 KiB
// touched: a measure of the memory the TK family touches); then, in this process with the
// allocator keeping freed memory (median thread CPU time), the TK checks alone (parse included),
// load + TK, and for reference simdjson's DOM parse of the whole file and the former loader
// parse into a json::Value. Baseline in the same run: Python's json.load of the same file
// (/usr/bin/python3), the cost a Python loader pays before building anything.
#include <fcntl.h>
#include <malloc.h>
#include <sys/wait.h>
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

// One `ckpt verify DIR` in a fresh process, as a user runs it (the CLI's allocator tuning
// included): CPU time (user + system, all threads), minor page faults, wall time.
struct Run {
  double cpu_ms = 0, wall_ms = 0;
  long faults = 0;
};
static bool run_ckpt(const std::string& ckpt, const fs::path& dir, Run& out) {
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(ckpt.c_str(), "ckpt", "verify", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) > 1) return false;
  out.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.cpu_ms = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  out.faults = ru.ru_minflt;
  return true;
}

static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static std::string load_average() {
  double l[3] = {0, 0, 0};
  if (getloadavg(l, 3) != 3) return "?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", l[0], l[1], l[2]);
  return buf;
}

// The model directory: the tokenizer files, a config.json naming the vocabulary size, and a
// model.safetensors holding the token embedding the TK checks compare ids with (its data a
// hole: header-only verify never reads it). Without `with_tokenizer`, the same directory minus
// the tokenizer files: what `ckpt verify` costs without them.
static void write_model_dir(const fs::path& dir, uint32_t vocab, const tok::Generated* g) {
  fs::create_directories(dir);
  auto put = [&](const char* name, const std::string& s) { std::ofstream(dir / name, std::ios::binary) << s; };
  if (g) {
    put("tokenizer.json", g->tokenizer_json);
    put("tokenizer_config.json", g->tokenizer_config_json);
    put("generation_config.json", g->generation_config_json);
  }
  put("config.json", "{\"model_type\":\"qwen2\",\"vocab_size\":" + std::to_string(vocab) + "}");
  std::string header = "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[" + std::to_string(vocab) +
                       ",8],\"data_offsets\":[0," + std::to_string(uint64_t(vocab) * 16) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string st(8, '\0');
  for (int i = 0; i < 8; ++i) st[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
  put("model.safetensors", st + header);
  fs::resize_file(dir / "model.safetensors", 8 + header.size() + uint64_t(vocab) * 16);
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
  // Options: [VOCAB] [--ckpt PATH] [--write DIR]. --write only writes the model directory (to
  // time `ckpt verify DIR` with other tools); --ckpt names the CLI to time (default: the `ckpt`
  // of this build tree, ../ckpt from this binary).
  uint32_t vocab = 150000;
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string ckpt = (fs::path(self).parent_path().parent_path() / "ckpt").string();
  std::string write_dir;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ckpt") && i + 1 < argc) ckpt = argv[++i];
    else if (!std::strcmp(argv[i], "--write") && i + 1 < argc) write_dir = argv[++i];
    else vocab = uint32_t(std::atoi(argv[i]));
  }
  tok::GenOptions o;
  o.vocab_size = vocab;
  o.fill_with_merges = true;
  auto g = tok::generate(o);
  if (!write_dir.empty()) {
    write_model_dir(write_dir, vocab, &g);
    return 0;
  }
  fs::path dir = fs::temp_directory_path() / ("ckpt-tokenizer-bench-" + std::to_string(::getpid()));
  fs::path bare = dir.string() + "-no-tokenizer";
  write_model_dir(dir, vocab, &g);
  write_model_dir(bare, vocab, nullptr);
  std::printf("tokenizer.json: %u tokens, %u merges, %.1f MB; simdjson %d.%d.%d, implementation %s; load average %s\n", vocab,
              vocab - 260, double(g.tokenizer_json.size()) / 1e6, int(simdjson::SIMDJSON_VERSION_MAJOR),
              int(simdjson::SIMDJSON_VERSION_MINOR), int(simdjson::SIMDJSON_VERSION_REVISION),
              simdjson::get_active_implementation()->name().c_str(), load_average().c_str());

  // What a user pays: `ckpt verify DIR` in fresh processes, alternating with the same directory
  // without the tokenizer files so both see the same machine load.
  std::vector<double> v_cpu, v_wall, b_cpu, b_wall;
  std::vector<long> v_faults, b_faults;
  bool have_ckpt = access(ckpt.c_str(), X_OK) == 0;
  for (int i = 0; have_ckpt && i < 9; ++i) {
    Run r;
    if (run_ckpt(ckpt, dir, r)) v_cpu.push_back(r.cpu_ms), v_wall.push_back(r.wall_ms), v_faults.push_back(r.faults);
    if (run_ckpt(ckpt, bare, r)) b_cpu.push_back(r.cpu_ms), b_wall.push_back(r.wall_ms), b_faults.push_back(r.faults);
  }
  std::sort(v_faults.begin(), v_faults.end());
  std::sort(b_faults.begin(), b_faults.end());

  // Cold first, before this process's allocator holds freed memory that later runs would reuse.
  std::vector<double> cold;
  long cold_faults = 0;
  size_t cold_findings = 0;
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
  std::printf("simdjson DOM parse, whole file:   %8.1f ms (median of 9; for reference)\n", dom);
  std::printf("json::parse to json::Value:      %8.1f ms (the loader's former parse)\n", value);
  std::printf("ckpt TK checks (parse included): %8.1f ms (%zu findings)\n", check, n);
  std::printf("ckpt load + TK, in process:      %8.1f ms\n", total);
  if (!cold.empty())
    std::printf("ckpt load + TK, fresh process:   %8.1f ms (median of %zu, default malloc: %ld page faults, %zu findings)\n",
                cold[cold.size() / 2], cold.size(), cold_faults, cold_findings);
  if (!v_cpu.empty() && !b_cpu.empty()) {
    std::printf("ckpt verify DIR, fresh process:  %8.1f ms CPU (user+sys), %.1f ms wall, %ld page faults (medians of %zu; %s)\n",
                median(v_cpu), median(v_wall), v_faults[v_faults.size() / 2], v_cpu.size(), ckpt.c_str());
    std::printf("  same DIR without tokenizer:    %8.1f ms CPU (user+sys), %.1f ms wall, %ld page faults\n", median(b_cpu),
                median(b_wall), b_faults[b_faults.size() / 2]);
  } else {
    std::printf("ckpt verify DIR: not measured (%s is not a runnable ckpt)\n", ckpt.c_str());
  }
  std::string cmd = "/usr/bin/python3 -c \"import json,time,sys;t=[];\nfor i in range(5):\n a=time.process_time();json.load(open(sys.argv[1]));t.append(time.process_time()-a)\nprint('%.1f'%(sorted(t)[2]*1000))\" " +
                    (dir / "tokenizer.json").string();
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[64] = {0};
    if (fgets(buf, sizeof buf, p)) std::printf("baseline python json.load:       %8.1f ms\n", std::atof(buf));
    pclose(p);
  }
  std::printf("load average at the end: %s\n", load_average().c_str());
  fs::remove_all(dir);
  fs::remove_all(bare);
  return 0;
}
