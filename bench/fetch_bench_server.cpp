// A loopback hub serving every regular file of a directory as one repo (LFS-style etags =
// sha256, served straight from the hub with Range support), for bench/fetch_bench.py.
// Usage: fetch_bench_server REPO_ID DIR   -> prints "endpoint http://127.0.0.1:PORT", serves
// until stdin closes.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "hub/hash.h"
#include "mock_hub.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fetch_bench_server REPO_ID DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  std::vector<ckpt::test::MockFile> files;
  for (const auto& e : fs::directory_iterator(argv[2])) {
    if (!e.is_regular_file()) continue;
    ckpt::test::MockFile f;
    f.path = e.path().filename().string();
    f.disk_path = e.path().string();
    f.disk_size = e.file_size();
    f.lfs = true;
    std::string err;
    f.content = ckpt::hub::detail::hash_file(e.path(), ckpt::hub::detail::EtagKind::sha256, f.disk_size, &err);
    if (f.content.empty()) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 1;
    }
    files.push_back(std::move(f));
  }
  ckpt::test::MockHub hub;
  const std::string commit(40, 'b');
  hub.add_commit(argv[1], commit, files);
  hub.set_ref(argv[1], "main", commit);
  std::printf("endpoint %s\n", hub.endpoint().c_str());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
