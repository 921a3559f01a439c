// template_bench: ckpt's Jinja engine against Python jinja2, both rendering the same real chat
// templates in-process with the same context, timed in the same run.
//
//   template_bench [CORPUS_DIR] [--repeats N] [--clock cpu|wall] [--ckpt-only] [--match SUBSTRING]
//
// --clock: what a sample measures on both sides: the thread's CPU time (default; on a shared,
// loaded machine it leaves out the time the process waits for a core; samples are batches of
// at least 2 ms on both sides, as reading that clock costs ~2 us here) or wall time (batches of
// at least 20 us in C++ and 200 us in Python).
// --ckpt-only skips the jinja2 side (for profiling the engine: `perf record -g`); --match keeps
// only the templates whose name contains SUBSTRING.
//
// For every corpus template that Python renders, each side reports the median time of one
// render (templates compiled once, only rendering timed; jinja2 side: bench/template_bench.py).
// Prints per-template figures, the sum of medians on each side, and the ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "ckpt/jinja.h"
#include "ckpt/json.h"

namespace fs = std::filesystem;
using namespace ckpt;
extern char** environ;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv with `input` on stdin and returns stdout (empty on failure).
std::string run_with_stdin(const std::vector<std::string>& argv, const std::string& input) {
  int in_pipe[2], out_pipe[2];
  if (pipe(in_pipe) || pipe(out_pipe)) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<char*> args;
  std::vector<std::string> store = argv;
  for (auto& a : store) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    return {};
  }
  std::thread writer([&] {
    size_t off = 0;
    while (off < input.size()) {
      ssize_t n = write(in_pipe[1], input.data() + off, input.size() - off);
      if (n <= 0) break;
      off += size_t(n);
    }
    close(in_pipe[1]);
  });
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(out_pipe[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  writer.join();
  close(out_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : std::string{};
}

bool g_cpu_clock = true;

// Seconds on the selected clock.
double now_s() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path corpus = CKPT_BENCH_CORPUS_DIR;
  int repeats = 21;
  bool ckpt_only = false;
  std::string match;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--ckpt-only") ckpt_only = true;
    else if (a == "--clock" && i + 1 < argc && (std::string(argv[i + 1]) == "cpu" || std::string(argv[i + 1]) == "wall"))
      g_cpu_clock = std::string(argv[++i]) == "cpu";
    else if (a == "--match" && i + 1 < argc) match = argv[++i];
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "usage: template_bench [CORPUS_DIR] [--repeats N] [--clock cpu|wall] [--ckpt-only] [--match SUBSTRING]\n");
      return 2;
    }
    else corpus = a;
  }
  setenv("TZ", "UTC", 1);
  // The templates: every distinct corpus template, in probe order.
  std::ifstream list(corpus / "template-cases/probe/probe.results.jsonl");
  if (!list) {
    std::fprintf(stderr, "template_bench: %s has no template corpus\n", corpus.c_str());
    return 2;
  }
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::string line;
  while (std::getline(list, line)) {
    auto v = json::parse(line).value;
    if (auto t = v.get_string("template"); t && t->find(match) != std::string::npos && seen.insert(*t).second) names.push_back(*t);
  }
  // The context: the stored "system" conversation (system + user + assistant) with a tools list.
  json::Value contexts = json::parse(read_text(corpus / "template-cases/probe/contexts.json")).value;
  json::Value ctx = *contexts.find("system");

  json::Object templates;
  for (auto& n : names) templates.emplace_back(n, read_text(corpus / "templates" / n));
  json::Value req = json::Object{{"templates", json::Value(templates)}, {"context", ctx}, {"repeats", int64_t(repeats)},
                                 {"clock", g_cpu_clock ? "cpu" : "wall"}, {"sample_seconds", g_cpu_clock ? 2e-3 : 2e-4}};
  std::string script = std::string(CKPT_BENCH_SOURCE_DIR) + "/bench/template_bench.py";
  std::string py_out = ckpt_only ? std::string("{}") : run_with_stdin({"python3", script}, req.dump());
  auto py = json::parse(py_out);
  if (py_out.empty() || !py.ok()) {
    std::fprintf(stderr, "template_bench: the jinja2 side failed (python3 with jinja2 3.1.x needed)\n");
    return 2;
  }

  jinja::Options opts;
  opts.now = 1721995200;
  std::vector<double> ratios;
  double sum_ckpt = 0, sum_py = 0;
  size_t count = 0;
  std::printf("%-70s %12s %12s %8s\n", "template", "ckpt us", "jinja2 us", "ratio");
  for (auto& [name, text] : templates) {
    auto pm = ckpt_only ? std::optional<double>(0.0) : py.value.get_number(name);
    if (!pm) continue;  // Python raises on this template/context
    jinja::Error err;
    auto t = jinja::Template::parse(text.as_string(), name, opts, &err);
    if (!t) continue;
    auto first = t->render(ctx, opts);
    if (!first.ok()) continue;
    // batch renders so each sample is well above timer resolution
    double t0 = now_s();
    (void)t->render(ctx, opts);
    double one = now_s() - t0;
    const double sample_s = g_cpu_clock ? 2e-3 : 2e-5;
    int batch = one < sample_s ? std::max(1, int(sample_s / std::max(one, 1e-8))) : 1;
    std::vector<double> samples;
    for (int r = 0; r < repeats; ++r) {
      double s = now_s();
      for (int b = 0; b < batch; ++b) (void)t->render(ctx, opts);
      samples.push_back((now_s() - s) / batch);
    }
    double mc = median(samples);
    sum_ckpt += mc;
    sum_py += *pm;
    ratios.push_back(*pm / mc);
    ++count;
    std::printf("%-70s %12.2f %12.2f %8.1f\n", name.c_str(), mc * 1e6, *pm * 1e6, *pm / mc);
  }
  if (!count) return 2;
  if (ckpt_only) {
    std::printf("\ntemplates: %zu (context: 'system' conversation, %d repeats, medians, %s time)\n", count, repeats, g_cpu_clock ? "thread CPU" : "wall");
    std::printf("sum of median render times: ckpt %.3f ms\n", sum_ckpt * 1e3);
    return 0;
  }
  std::printf("\ntemplates: %zu (context: 'system' conversation, %d repeats, medians, %s time)\n", count, repeats, g_cpu_clock ? "thread CPU" : "wall");
  std::printf("sum of median render times: ckpt %.3f ms, jinja2 %.3f ms -> %.1fx faster\n", sum_ckpt * 1e3, sum_py * 1e3, sum_py / sum_ckpt);
  std::printf("per-template speed-up: median %.1fx, min %.1fx, max %.1fx\n", median(ratios), *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()));
  return 0;
}
