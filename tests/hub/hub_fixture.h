// The mock-hub fixture shared by the fetch tests: a repo org/model with a small config, an LFS
// safetensors file and a nested tokenizer, plus helpers asserting the published end state.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "ckpt/hub.h"
#include "mock_hub.h"
#include "test_support.h"

namespace hubtest {

namespace fs = std::filesystem;
using namespace ckpt;
using namespace ckpt::test;


inline const std::string kRepo = "org/model";
inline const std::string kC1 = "1111111111111111111111111111111111111111";
inline const std::string kC2 = "2222222222222222222222222222222222222222";

inline std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

inline MockFile text_file(const std::string& path, const std::string& content) {
  MockFile f;
  f.path = path;
  f.content = content;
  return f;
}

inline MockFile lfs_file(const std::string& path, size_t n, unsigned seed) {
  MockFile f;
  f.path = path;
  f.content = random_bytes(n, seed);
  f.lfs = true;
  return f;
}

inline std::vector<MockFile> standard_files() {
  return {text_file("config.json", "{\"model_type\": \"llama\"}\n"),
          lfs_file("model.safetensors", 300 * 1024, 7),
          text_file("sub/dir/tokenizer.json", "{\"version\": \"1.0\"}")};
}

inline double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct HubTest : ::testing::Test {
  MockHub hub;
  TempDir tmp;
  fs::path cache() const { return tmp.path() / "hub"; }
  fs::path repo_dir() const { return cache() / "models--org--model"; }

  void SetUp() override {
    hub.add_commit(kRepo, kC1, standard_files());
    hub.set_ref(kRepo, "main", kC1);
  }
  hub::FetchOptions opts() const {
    hub::FetchOptions o;
    o.endpoint = hub.endpoint();
    o.cache_dir = cache();
    o.token = "hf_test";
    o.stall_timeout = 1.0;
    o.stall_bytes = 1024;
    o.backoff_base = 0.01;
    o.backoff_max = 0.05;
    o.retries = 3;
    o.connect_timeout = 2;
    o.jobs = 4;
    o.range_threshold = 1ull << 40;  // single stream unless a test asks
    return o;
  }
  hub::FetchResult fetch(const hub::FetchOptions& o, const std::string& rev = "main") {
    hub::RepoSpec s;
    s.repo_id = kRepo;
    s.revision = rev;
    return hub::fetch(s, o);
  }
  const MockFile& file(const std::string& path) {
    static std::vector<MockFile> files = standard_files();
    for (const auto& f : files)
      if (f.path == path) return f;
    throw std::runtime_error("no such file");
  }
  // A published file: a relative symlink snapshots/<commit>/<path> -> ../../blobs/<etag>,
  // and the blob holds exactly the content.
  void expect_published(const std::string& commit, const MockFile& f) {
    auto link = repo_dir() / "snapshots" / commit / f.path;
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    std::string up = "../../";
    for (char c : f.path)
      if (c == '/') up += "../";
    EXPECT_EQ(fs::read_symlink(link).string(), up + "blobs/" + MockHub::etag_of(f));
    EXPECT_TRUE(read_text(link) == f.content) << f.path << ": published bytes differ";
    EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / (MockHub::etag_of(f) + ".incomplete")));
  }
  void expect_not_published(const std::string& commit, const MockFile& f) {
    auto link = repo_dir() / "snapshots" / commit / f.path;
    EXPECT_FALSE(fs::exists(fs::symlink_status(link))) << link;
    EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / MockHub::etag_of(f)));
  }
  const hub::FileResult* result_for(const hub::FetchResult& r, const std::string& path) {
    for (const auto& f : r.files)
      if (f.path == path) return &f;
    return nullptr;
  }
};


}  // namespace hubtest
