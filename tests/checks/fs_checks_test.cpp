// FS: files and cache state, on plain model directories and Hugging Face cache layouts
// built in a TempDir (HF_HUB_CACHE set in-process).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "builders.h"

namespace ckpt::ftest {
namespace {

using st::DType;

const char* kLfsPointer =
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 4950000000\n";

const std::string kEtag = "3f1c8a9d0e7b6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c";

struct Cache {
  TempDir tmp;
  fs::path root = tmp / "hub";
  EnvGuard env{"HF_HUB_CACHE", root.string()};
  CacheRepo repo{root, "org/name"};
};

TEST(fs_checks, clean_plain_directory) {
  TempDir d;
  make_two_shard(d.path());
  auto all = verify(d.path());
  expect_clean(all);
  EXPECT_TRUE(only(all, {"FS"}).empty()) << dump(all);
}

TEST(fs_checks, clean_cache_snapshot_symlinks_are_not_escapes) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok("org/name");
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->commit, kCommitA);
  const FileEntry* f = ck.file("model.safetensors");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->is_symlink);
  EXPECT_FALSE(f->escapes);
  EXPECT_FALSE(f->dangling);
  EXPECT_TRUE(f->readable());
  EXPECT_EQ(f->link_text, "../../blobs/e1111111111111111111111111111111111111111");
  EXPECT_EQ(ck.shards.size(), 1u);
  EXPECT_TRUE(ck.config.ok());
  auto all = run_checks(ck);
  expect_clean(all);
  EXPECT_TRUE(only(all, {"FS"}).empty()) << dump(all);
}

TEST(fs_checks, cache_links_from_subdirectories_are_not_escapes) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.add_text(kCommitA, "additional_chat_templates/tool.jinja", "{{ x }}", "e3333333333333333333333333333333333333333");
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok(c.repo.snapshot(kCommitA));
  const FileEntry* f = ck.file("additional_chat_templates/tool.jinja");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->link_text, "../../../blobs/e3333333333333333333333333333333333333333");
  EXPECT_TRUE(f->readable());
  EXPECT_TRUE(only(run_checks(ck), {"FS"}).empty());
}

TEST(fs_checks, FS001_broken_snapshot_symlink_names_incomplete_blob) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  c.repo.link(kCommitA, "model-00002-of-00002.safetensors", kEtag);  // blob never finished
  write_text(c.repo.dir() / "blobs" / (kEtag + ".incomplete"), std::string(3000, 'x'));
  auto all = verify("org/name");
  const Finding* f = find(all, "FS001", "model-00002-of-00002.safetensors");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_TRUE(contains(f->message, "blobs/" + kEtag + ".incomplete")) << f->message;
  EXPECT_TRUE(contains(f->message, "3000")) << f->message;
}

TEST(fs_checks, FS001_broken_symlink_new_style_uuid_incomplete) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  c.repo.link(kCommitA, "tokenizer.json", kEtag);
  write_text(c.repo.dir() / "blobs" / (kEtag + ".a1b2c3d4.incomplete"), "partial");
  auto all = verify("org/name");
  const Finding* f = find(all, "FS001", "tokenizer.json");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, kEtag + ".a1b2c3d4.incomplete")) << f->message;
}

TEST(fs_checks, FS001_broken_symlink_without_partial_download) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  fs::create_symlink("gone.safetensors", d / "model-extra.safetensors");
  auto all = verify(d.path());
  const Finding* f = find(all, "FS001", "model-extra.safetensors");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "gone.safetensors"));
  EXPECT_FALSE(contains(f->message, "incomplete"));
}

TEST(fs_checks, FS001_symlink_loop_is_a_finding_not_a_hang) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  fs::create_symlink("loop_b.json", d / "loop_a.json");
  fs::create_symlink("loop_a.json", d / "loop_b.json");
  fs::create_symlink("self.safetensors", d / "self.safetensors");
  auto all = verify(d.path());
  for (const char* n : {"loop_a.json", "loop_b.json", "self.safetensors"}) {
    bool any = find(all, "FS001", std::string(n)) || find(all, "FS010", std::string(n)) || find(all, "FS006", std::string(n));
    EXPECT_TRUE(any) << n << "\n" << dump(all);
  }
}

TEST(fs_checks, FS002_incomplete_blob_names_snapshot_entries) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  c.repo.link(kCommitA, "model-00003-of-00004.safetensors", kEtag);
  write_text(c.repo.dir() / "blobs" / (kEtag + ".incomplete"), std::string(100, 'x'));
  auto all = verify("org/name");
  auto fs2 = with_code(all, "FS002");
  ASSERT_EQ(fs2.size(), 1u) << dump(all);
  EXPECT_TRUE(contains(fs2[0]->message, "blobs/" + kEtag + ".incomplete")) << fs2[0]->message;
  EXPECT_TRUE(contains(fs2[0]->message, "model-00003-of-00004.safetensors")) << fs2[0]->message;
  EXPECT_EQ(fs2[0]->severity, Severity::error);
}

TEST(fs_checks, FS002_orphan_incomplete_blob) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  write_text(c.repo.dir() / "blobs" / "deadbeef.incomplete", "x");
  auto all = verify("org/name");
  const Finding* f = find(all, "FS002");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "blobs/deadbeef.incomplete"));
  EXPECT_TRUE(contains(f->message, "no snapshot entry")) << f->message;
}

TEST(fs_checks, FS002_incomplete_in_local_dir) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "model-00002-of-00002.safetensors.incomplete", std::string(10, 'x'));
  auto all = verify(d.path());
  EXPECT_NE(find(all, "FS002", "model-00002-of-00002.safetensors.incomplete"), nullptr) << dump(all);
}

TEST(fs_checks, FS003_lfs_pointer_in_place_of_weights_and_tokenizer) {
  TempDir d;
  write_text(d / "model.safetensors", kLfsPointer);
  write_text(d / "tokenizer.json", kLfsPointer);
  write_text(d / "config.json", "{}");
  Checkpoint ck = load_ok(d.path());
  EXPECT_TRUE(ck.shards.empty()) << "an LFS pointer is not parsed as a shard";
  auto all = run_checks(ck);
  for (const char* n : {"model.safetensors", "tokenizer.json"}) {
    const Finding* f = find(all, "FS003", std::string(n));
    ASSERT_NE(f, nullptr) << n << "\n" << dump(all);
    EXPECT_TRUE(contains(f->message, std::to_string(std::strlen(kLfsPointer)) + "-byte")) << f->message;
  }
  EXPECT_TRUE(only(all, {"ST"}).empty()) << "no confusing header errors:\n" << dump(all);
}

TEST(fs_checks, FS004_zero_byte_weights_and_side_files) {
  TempDir d;
  write_st(d / "model-00001-of-00002.safetensors", {{"a"}});
  write_text(d / "model-00002-of-00002.safetensors", "");
  write_text(d / "model.safetensors.index.json",
             index_json({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}));
  write_text(d / "tokenizer.json", "");
  write_text(d / "config.json", "");
  write_text(d / "README.md", "");  // not essential: no finding
  auto all = verify(d.path());
  for (const char* n : {"model-00002-of-00002.safetensors", "tokenizer.json", "config.json"})
    EXPECT_NE(find(all, "FS004", std::string(n)), nullptr) << n << "\n" << dump(all);
  EXPECT_EQ(find(all, "FS004", std::string("README.md")), nullptr) << dump(all);
  EXPECT_EQ(find(all, "FS004", std::string("model-00001-of-00002.safetensors")), nullptr) << dump(all);
}

TEST(fs_checks, FS005_dangling_main_ref) {
  Cache c;
  c.repo.ref("main", kCommitB);  // nothing under snapshots/
  LoadResult r = load_checkpoint("org/name");
  ASSERT_FALSE(r.error) << r.error->message;
  ASSERT_TRUE(r.checkpoint);
  EXPECT_TRUE(r.checkpoint->snapshot_missing);
  auto all = run_checks(*r.checkpoint);
  const Finding* f = find(all, "FS005");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "refs/main")) << f->message;
  EXPECT_TRUE(contains(f->message, kCommitB)) << f->message;
}

TEST(fs_checks, FS005_stale_second_ref) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  c.repo.ref("v1.0", kCommitB);
  auto all = verify("org/name");
  auto f5 = with_code(all, "FS005");
  ASSERT_EQ(f5.size(), 1u) << dump(all);
  EXPECT_TRUE(contains(f5[0]->message, "refs/v1.0")) << f5[0]->message;
  EXPECT_TRUE(contains(f5[0]->message, kCommitB));
}

TEST(fs_checks, FS005_nested_pr_ref) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  fs::create_directories(c.repo.dir() / "refs/refs/pr");
  c.repo.ref("refs/pr/1", kCommitB);
  auto all = verify("org/name");
  const Finding* f = find(all, "FS005");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "refs/refs/pr/1")) << f->message;
}

TEST(fs_checks, FS006_symlink_outside_root_is_not_followed) {
  TempDir outside;
  write_st(outside / "secret.safetensors", {{"outside.secret"}});
  write_text(outside / "tok.json", R"({"secret": true})");
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  fs::create_symlink(outside / "secret.safetensors", d / "model-extra.safetensors");
  fs::create_symlink(outside / "tok.json", d / "config.json");
  fs::create_symlink("/nonexistent/dir/x.json", d / "tokenizer.json");  // dangling and outside
  Checkpoint ck = load_ok(d.path());
  EXPECT_EQ(ck.tensors_by_name.count("outside.secret"), 0u);
  EXPECT_EQ(ck.shard("model-extra.safetensors"), nullptr);
  EXPECT_FALSE(ck.config.ok()) << "config.json behind an escaping link must not be parsed";
  const FileEntry* fe = ck.file("model-extra.safetensors");
  ASSERT_NE(fe, nullptr);
  EXPECT_TRUE(fe->escapes);
  EXPECT_TRUE(fe->abs.empty());
  auto all = run_checks(ck);
  for (const char* n : {"model-extra.safetensors", "config.json", "tokenizer.json"}) {
    const Finding* f = find(all, "FS006", std::string(n));
    ASSERT_NE(f, nullptr) << n << "\n" << dump(all);
    EXPECT_TRUE(contains(f->message, "did not follow")) << f->message;
  }
  for (const auto& f : all) EXPECT_FALSE(contains(f.message, "outside.secret")) << dump(all);
}

TEST(fs_checks, FS006_relative_escape_from_cache_snapshot) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  // Leaves snapshots/<commit>, the repo and the cache root.
  write_st(c.tmp / "elsewhere.safetensors", {{"elsewhere.w"}});
  fs::create_symlink("../../../../elsewhere.safetensors", c.repo.snapshot(kCommitA) / "model-extra.safetensors");
  ASSERT_TRUE(fs::exists(c.repo.snapshot(kCommitA) / "model-extra.safetensors"));
  Checkpoint ck = load_ok("org/name");
  EXPECT_EQ(ck.tensors_by_name.count("elsewhere.w"), 0u);
  auto all = run_checks(ck);
  EXPECT_NE(find(all, "FS006", std::string("model-extra.safetensors")), nullptr) << dump(all);
  EXPECT_EQ(find(all, "FS006", std::string("model.safetensors")), nullptr) << dump(all);
}

TEST(fs_checks, FS007_ref_with_trailing_newline) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", std::string(kCommitA) + "\n");
  auto all = verify("org/name");  // still resolvable by ckpt
  const Finding* f = find(all, "FS007");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "refs/main")) << f->message;
  EXPECT_TRUE(contains(f->message, "newline")) << f->message;
  EXPECT_EQ(find(all, "FS005"), nullptr) << dump(all);
}

TEST(fs_checks, FS007_ref_with_garbage) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  c.repo.ref("dev", "not-a-commit");
  c.repo.ref("upper", "0123456789ABCDEF0123456789ABCDEF01234567");
  auto all = verify("org/name");
  auto f7 = with_code(all, "FS007");
  ASSERT_EQ(f7.size(), 2u) << dump(all);
  EXPECT_TRUE(contains(dump(all), "not-a-commit"));
}

TEST(fs_checks, FS008_no_weight_files) {
  TempDir d;
  write_text(d / "config.json", "{}");
  write_text(d / "tokenizer.json", "{}");
  auto all = verify(d.path());
  const Finding* f = find(all, "FS008");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::error);
}

TEST(fs_checks, FS008_not_raised_when_weights_exist) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  EXPECT_EQ(find(verify(d.path()), "FS008"), nullptr);
}

TEST(fs_checks, FS009_pickle_weights_are_info) {
  TempDir d;
  write_text(d / "pytorch_model.bin", std::string(2000, 'x'));
  write_text(d / "config.json", "{}");
  auto all = verify(d.path());
  const Finding* f = find(all, "FS009");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::info);
  EXPECT_TRUE(contains(f->message, "pytorch_model.bin"));
  EXPECT_EQ(find(all, "FS008"), nullptr) << dump(all);
}

TEST(fs_checks, FS010_link_to_a_fifo_is_unreadable) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  ASSERT_EQ(::mkfifo((d / "pipe").c_str(), 0644), 0);
  fs::create_symlink("pipe", d / "tokenizer.json");
  auto all = verify(d.path());  // must not block on the FIFO
  const Finding* f = find(all, "FS010", std::string("tokenizer.json"));
  ASSERT_NE(f, nullptr) << dump(all);
}

TEST(fs_checks, FS010_mode_000_file) {
  if (::geteuid() == 0) GTEST_SKIP() << "running as root: mode 000 does not stop reads";
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "config.json", "{}");
  fs::permissions(d / "config.json", fs::perms::none);
  auto all = verify(d.path());
  EXPECT_NE(find(all, "FS010", std::string("config.json")), nullptr) << dump(all);
}

TEST(fs_hostile, special_files_named_safetensors) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  ASSERT_EQ(::mkfifo((d / "fifo.safetensors").c_str(), 0644), 0);
  fs::create_directory(d / "dir.safetensors");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sp = (d / "sock.safetensors").string();
  ASSERT_LT(sp.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sp.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Checkpoint ck = load_ok(d.path());  // returns: never opens a FIFO for reading
  ::close(s);
  EXPECT_EQ(ck.shards.size(), 1u);
  auto all = run_checks(ck);
  // A FIFO or socket where a weight file should be is reported, not silently skipped.
  for (const char* n : {"fifo.safetensors", "sock.safetensors"})
    EXPECT_NE(find(all, "FS010", std::string(n)), nullptr) << n << "\n" << dump(all);
}

TEST(fs_hostile, non_utf8_file_name) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "bad\xff\xfe.incomplete", "x");
  auto all = verify(d.path());
  EXPECT_NE(find(all, "FS002", std::string("bad\xff\xfe.incomplete")), nullptr) << dump(all);
}

// The walk is bounded against hostile trees; a bound that is reached is a finding, never a
// silent partial check.
TEST(fs_checks, FS012_walk_limits_are_reported) {
  TempDir d;
  for (int i = 0; i < 6; ++i) write_text(d.path() / ("f" + std::to_string(i) + ".txt"), "x");
  LoadOptions few;
  few.max_walk_entries = 3;
  LoadResult r = load_checkpoint(d.path().string(), few);
  ASSERT_FALSE(r.error);
  EXPECT_NE(r.checkpoint->walk_stopped.find("more than 3 files and directories"), std::string::npos)
      << r.checkpoint->walk_stopped;
  auto findings = run_checks(*r.checkpoint, VerifyOptions{});
  size_t fs012 = 0;
  for (const auto& f : findings) fs012 += f.code == "FS012";
  EXPECT_EQ(fs012, 1u);

  TempDir deep;
  fs::path p = deep.path();
  for (int i = 0; i < 4; ++i) p /= "d" + std::to_string(i);
  fs::create_directories(p);
  LoadOptions shallow;
  shallow.max_walk_depth = 2;
  LoadResult r2 = load_checkpoint(deep.path().string(), shallow);
  ASSERT_FALSE(r2.error);
  EXPECT_NE(r2.checkpoint->walk_stopped.find("d0/d1/ was not walked"), std::string::npos) << r2.checkpoint->walk_stopped;
  // Within the bounds nothing is said.
  LoadResult r3 = load_checkpoint(deep.path().string());
  EXPECT_TRUE(r3.checkpoint->walk_stopped.empty()) << r3.checkpoint->walk_stopped;
}

}  // namespace
}  // namespace ckpt::ftest
