// ckpt: proves an LLM checkpoint is whole, consistent and loadable before anything serves it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <new>
#include <string>

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

static void print_usage(FILE* out) {
  std::fprintf(out, "usage: ckpt <command> [args...]\n\ncommands:\n");
  for (const auto& [name, sub] : registry()) std::fprintf(out, "  %-10s %s\n", name.c_str(), sub.summary);
  std::fprintf(out, "\n'ckpt <command> --help' shows a command's options.\n");
}

}  // namespace ckpt::cli

int main(int argc, char** argv) {
  using namespace ckpt::cli;
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
