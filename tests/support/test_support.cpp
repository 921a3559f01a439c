#include "test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace ckpt::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  auto base = fs::temp_directory_path();
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = base / ("ckpt-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
                     std::to_string(rd() % 100000));
    std::error_code ec;
    if (fs::create_directory(p, ec)) {
      path_ = p;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
  std::error_code ec;
  // Undo read-only bits tests may have set, then remove.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink()) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::remove_all(path_, ec);
}

fs::path corpus_dir() {
  fs::path p = CKPT_CORPUS_DIR;
  std::error_code ec;
  if (fs::is_directory(p, ec)) return p;
  return {};
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static std::string drain(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  return out;
}

CommandResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
                          const std::string& stdin_text) {
  CommandResult r;
  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (pipe(out_pipe) || pipe(err_pipe) || pipe(in_pipe)) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], in_pipe[0], in_pipe[1]})
    posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const auto& e : extra_env) {
    auto key = e.substr(0, e.find('=') + 1);
    std::erase_if(env_store, [&](const std::string& s) { return s.rfind(key, 0) == 0; });
    env_store.push_back(e);
  }
  std::vector<char*> envp, args;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  for (auto& a : argv_store) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(in_pipe[1]);
    r.err = std::string("spawn failed: ") + std::strerror(rc);
    return r;
  }
  std::thread writer([&] {
    size_t off = 0;
    while (off < stdin_text.size()) {
      ssize_t n = write(in_pipe[1], stdin_text.data() + off, stdin_text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(in_pipe[1]);
  });
  std::thread err_reader([&] { r.err = drain(err_pipe[0]); });
  r.out = drain(out_pipe[0]);
  err_reader.join();
  writer.join();
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// With CKPT_CAPTURE_REPORTS=DIR, every `ckpt verify --format json|jsonl|sarif` output a test
// produces is kept in DIR, so tests/package/validate_reports.py can validate all of them
// against docs/report.schema.json and the SARIF schema.
static void capture_report(const std::vector<std::string>& args, const CommandResult& r) {
  const char* dir = std::getenv("CKPT_CAPTURE_REPORTS");
  if (!dir || !*dir || args.empty() || args[0] != "verify" || r.out.empty()) return;
  std::string format;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--format") format = args[i + 1];
  if (format != "json" && format != "jsonl" && format != "sarif") return;
  static std::atomic<unsigned> counter{0};
  std::filesystem::create_directories(dir);
  write_text(std::filesystem::path(dir) /
                 (std::to_string(::getpid()) + "-" + std::to_string(counter++) + "." + format),
             r.out);
}

CommandResult run_ckpt(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv{CKPT_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = run_program(argv, extra_env);
  capture_report(args, r);
  return r;
}

std::vector<std::string> codes_of(const json::Value& report) {
  std::vector<std::string> out;
  if (const auto* f = report.find("findings"); f && f->is_array())
    for (const auto& x : f->as_array()) out.push_back(*x.get_string("code"));
  return out;
}

}  // namespace ckpt::test
