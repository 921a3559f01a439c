// ckpt: proves an LLM checkpoint is whole, consistent and loadable before anything serves it.
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>

#include "ckpt/timings.h"
#include "subcommand.h"

namespace ckpt::cli {

static std::map<std::string, Subcommand>& registry() {
  static std::map<std::string, Subcommand> subs;
  return subs;
}

bool register_subcommand(const Subcommand& sub) {
  registry().emplace(sub.name, sub);
  return true;
}

// Commands built into sibling executables (see CMakeLists.txt): ckpt-fetch keeps libcurl, and
// ckpt-smoke keeps OpenBLAS, out of every other command's start-up.
struct SiblingCommand {
  const char* name;
  const char* summary;
  const char* executable;
};
constexpr SiblingCommand kSiblingCommands[] = {
    {"fetch", "download a repo into the Hugging Face cache: pinned, resumable, verified", "ckpt-fetch"},
    {"resolve", "print the local cache snapshot path of org/name[@revision]", "ckpt-fetch"},
    {"smoke", "judge a checkpoint's numbers with one CPU forward pass over a reference text", "ckpt-smoke"},
};

std::string sibling_executable(const char* name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return name;
  const std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/') + 1) + name;
}

static void print_usage(FILE* out) {
  std::fprintf(out, "usage: ckpt <command> [args...]\n\ncommands:\n");
  std::map<std::string, const char*> all;
  for (const auto& [name, sub] : registry()) all[name] = sub.summary;
  for (const auto& c : kSiblingCommands) all.emplace(c.name, c.summary);
  for (const auto& [name, summary] : all) std::fprintf(out, "  %-10s %s\n", name.c_str(), summary);
  std::fprintf(out, "\n'ckpt <command> --help' shows a command's options.\n");
}

// ckpt is a short-lived process that builds large tables (100k-tensor checkpoints) in one go.
// On virtual machines a first touch of a fresh 4 KiB page costs microseconds, which made page
// faults the largest single cost of `ckpt verify`. So: one malloc arena for all threads, a heap
// grown in large steps, never trimmed, and backed by transparent huge pages where the kernel
// allows them (madvise mode). Blocks of 32 MB and more (a million-tensor table, its plan)
// would otherwise be mmapped apart from the heap, on 4 KiB pages: on the 1M-tensor scale
// stand-in that was 41k page faults of 42k, and ~13% of the run. So no block is mmapped, and
// the first gigabyte of heap (address space; pages appear when touched) is the madvised one.
// Pure policy: behaviour is identical when any call is refused.
static void tune_allocator_for_short_run() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);  // every block from the heap (glibc still maps when the heap cannot grow)
  mallopt(M_TRIM_THRESHOLD, 1u << 30);
  mallopt(M_TOP_PAD, 1u << 30);  // address space only; pages appear when touched
  auto* before = static_cast<char*>(sbrk(0));
  void* volatile prime = std::malloc(1u << 20);  // volatile: the pair must not be optimised away
  std::free(prime);
  auto* after = static_cast<char*>(sbrk(0));
  mallopt(M_TOP_PAD, 64u << 20);
  if (before == reinterpret_cast<char*>(-1) || after <= before) return;
  constexpr uintptr_t kHuge = 2u << 20;
  uintptr_t lo = (reinterpret_cast<uintptr_t>(before) + kHuge - 1) & ~(kHuge - 1);
  uintptr_t hi = reinterpret_cast<uintptr_t>(after) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

}  // namespace ckpt::cli

int main(int argc, char** argv) {
  using namespace ckpt::cli;
  ckpt::timings::enabled();  // starts the phase clock (CKPT_TIMINGS=1)
  tune_allocator_for_short_run();
  ckpt::timings::mark("main: allocator setup");
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("ckpt %s\n", CKPT_VERSION);
    return 0;
  }
  auto it = registry().find(argv[1]);
  if (it == registry().end()) {
    for (const auto& c : kSiblingCommands) {
      if (std::strcmp(argv[1], c.name) != 0) continue;
      // This binary was built without the command: run the sibling that has it.
      const std::string sibling = sibling_executable(c.executable);
      execv(sibling.c_str(), argv);
      std::fprintf(stderr, "ckpt %s: cannot run %s: %s (it is installed beside ckpt)\n", c.name, sibling.c_str(),
                   std::strerror(errno));
      return 2;
    }
    std::fprintf(stderr, "ckpt: unknown command '%s'\n", argv[1]);
    print_usage(stderr);
    return 2;
  }
  std::string prog = std::string("ckpt ") + argv[1];
  argv[1] = prog.data();
  try {
    int code = it->second.run(argc - 1, argv + 1);
    // Skip tearing down large in-memory models (100k-tensor checkpoints): the OS frees it all.
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ckpt %s: out of memory\n", it->first.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt %s: internal error: %s\n", it->first.c_str(), e.what());
    return 2;
  }
}
