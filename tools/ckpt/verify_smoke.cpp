#include "verify_smoke.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "ckpt/json.h"
#include "subcommand.h"

extern char** environ;

namespace ckpt::cli {

namespace {

constexpr size_t kMaxReportBytes = 64u << 20;  // a smoke report is a few KB; a runaway child is cut off

struct ChildRun {
  std::string out, err, spawn_error;
  int status = -1;
};

// Runs argv with stdout and stderr captured (both read as they come, so neither pipe fills).
ChildRun run_captured(const std::vector<std::string>& args) {
  ChildRun r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::strerror(errno);
    close(out_pipe[0]), close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]), close(err_pipe[1]);
  if (rc != 0) {
    r.spawn_error = std::strerror(rc);
    close(out_pipe[0]), close(err_pipe[0]);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0 && sinks[i]->size() < kMaxReportBytes) sinks[i]->append(buf, size_t(n));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) + "…" : line;
}

// The sibling's JSON report -> findings; false when it is not one.
bool parse_smoke_report(const std::string& text, std::vector<Finding>& out, std::string& verdict) {
  auto parsed = json::parse(text);
  if (!parsed.ok() || !parsed.value.is_object()) return false;
  const json::Value* v = parsed.value.find("verdict");
  const json::Value* list = parsed.value.find("findings");
  if (!v || !v->is_string() || !list || !list->is_array()) return false;
  verdict = v->as_string();
  for (const auto& f : list->as_array()) {
    if (!f.is_object()) return false;
    auto str = [&](const char* key) -> std::string {
      const json::Value* s = f.find(key);
      return s && s->is_string() ? s->as_string() : std::string();
    };
    Finding finding{str("code"), Severity::info, str("message"), str("file"), str("tensor"), str("hint"), {}};
    const std::string sev = str("severity");
    if (sev == "error") finding.severity = Severity::error;
    else if (sev == "warning") finding.severity = Severity::warning;
    else if (sev != "info") return false;
    if (finding.code.rfind("SM", 0) != 0) return false;
    out.push_back(std::move(finding));
  }
  return true;
}

}  // namespace

void add_smoke_findings(Report& report, const VerifySettings& settings) {
  std::vector<Finding> added;
  if (report.summary.errors > 0) {
    added.push_back(Finding{"SM009", Severity::info,
                            "smoke pass skipped: the header checks found " + std::to_string(report.summary.errors) +
                                " error(s), and a forward pass over a checkpoint that does not load says nothing more",
                            "", "", "fix the errors above, then run verify --smoke (or ckpt smoke) again", {}});
  } else {
    const std::string exe = sibling_executable("ckpt-smoke");
    ChildRun run = run_captured({exe, "smoke", report.root, "--format", "json"});
    std::string verdict;
    const bool exited = run.spawn_error.empty() && WIFEXITED(run.status);
    if (!run.spawn_error.empty()) {
      added.push_back(Finding{"SM016", Severity::error, "smoke pass did not run: cannot run " + exe + ": " + run.spawn_error, "",
                              "", "ckpt-smoke is installed beside ckpt", {}});
    } else if (!exited || !parse_smoke_report(run.out, added, verdict)) {
      std::string why = !exited ? (WIFSIGNALED(run.status) ? "was killed by signal " + std::to_string(WTERMSIG(run.status))
                                                           : std::string("did not exit"))
                                : "exited " + std::to_string(WEXITSTATUS(run.status)) + " without its report";
      if (!run.err.empty()) why += ": " + first_line(run.err);
      added.clear();
      added.push_back(Finding{"SM016", Severity::error, "smoke pass did not run: " + exe + " " + why, "", "",
                              "run `ckpt smoke " + report.root + "` to see it alone", {}});
    }
  }
  for (auto& f : added) {
    if (settings.keeps(f.code)) report.findings.push_back(std::move(f));
  }
  const Summary counted = count_findings(report.findings);
  report.summary.errors = counted.errors;
  report.summary.warnings = counted.warnings;
  report.summary.infos = counted.infos;
}

}  // namespace ckpt::cli
