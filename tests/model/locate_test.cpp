// locate -> discover -> parse: cache root resolution, repo ids and revisions, snapshot
// detection, the bounded walk, side files, and the Checkpoint lookups.
#include <gtest/gtest.h>

#include "../checks/builders.h"

namespace ckpt::ftest {
namespace {

using st::DType;

// Clears every variable the cache root depends on, then sets the given ones.
struct CleanEnv {
  std::vector<std::unique_ptr<EnvGuard>> g;
  CleanEnv() {
    for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"}) {
      g.push_back(std::make_unique<EnvGuard>(v, ""));
      ::unsetenv(v);
    }
  }
};

TEST(model_cache_root, precedence_follows_huggingface_hub) {
  CleanEnv clean;
  EnvGuard home("HOME", "/home/u");
  EXPECT_EQ(hf_cache_root(), fs::path("/home/u/.cache/huggingface/hub"));
  {
    EnvGuard x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(hf_cache_root(), fs::path("/xdg/huggingface/hub"));
    EnvGuard h("HF_HOME", "/hfhome");
    EXPECT_EQ(hf_cache_root(), fs::path("/hfhome/hub"));
    EnvGuard legacy("HUGGINGFACE_HUB_CACHE", "/legacy");
    EXPECT_EQ(hf_cache_root(), fs::path("/legacy"));
    EnvGuard c("HF_HUB_CACHE", "/explicit");
    EXPECT_EQ(hf_cache_root(), fs::path("/explicit"));
  }
  EnvGuard tilde("HF_HOME", "~/hf");
  EXPECT_EQ(hf_cache_root(), fs::path("/home/u/hf/hub"));
}

TEST(model_repo_id, folder_names_and_shapes) {
  EXPECT_EQ(repo_folder_name("org/name"), "models--org--name");
  EXPECT_EQ(repo_folder_name("gpt2"), "models--gpt2");
  EXPECT_TRUE(looks_like_repo_id("org/name"));
  EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3-0.6B"));
  EXPECT_TRUE(looks_like_repo_id("org/name@main"));
  EXPECT_TRUE(looks_like_repo_id(std::string("org/name@") + kCommitA));
  EXPECT_TRUE(looks_like_repo_id("org/name@refs/pr/1"));
  for (const char* bad : {"name", "/org/name", "org/", "/name", "a/b/c", "../x", "org/..", "org--x/name", "org/na me",
                          "./model", "org/name/../x", "org/name-", "-org/name", "org/.name", "./name"})
    EXPECT_FALSE(looks_like_repo_id(bad)) << bad;
  EXPECT_TRUE(is_commit_hash(kCommitA));
  EXPECT_FALSE(is_commit_hash(std::string(kCommitA) + "\n"));
  EXPECT_FALSE(is_commit_hash("0123456789ABCDEF0123456789ABCDEF01234567"));
  EXPECT_FALSE(is_commit_hash("0123"));
}

struct Cache {
  TempDir tmp;
  fs::path root = tmp / "hub";
  EnvGuard env{"HF_HUB_CACHE", root.string()};
  CacheRepo repo{root, "org/name"};
};

TEST(model_locate, plain_directory) {
  TempDir d;
  make_two_shard(d.path());
  Checkpoint ck = load_ok(d.path());
  EXPECT_EQ(ck.root, fs::canonical(d.path()));
  EXPECT_FALSE(ck.cache);
  EXPECT_EQ(ck.target, d.path().string());
  EXPECT_EQ(ck.shards.size(), 2u);
  EXPECT_EQ(ck.total_tensors(), 4u);
  EXPECT_EQ(ck.total_bytes(), fs::file_size(d / "model-00001-of-00002.safetensors") +
                                  fs::file_size(d / "model-00002-of-00002.safetensors"));
  EXPECT_TRUE(ck.config.ok());
  EXPECT_EQ(ck.config.file, "config.json");
}

TEST(model_locate, repo_id_via_HF_HUB_CACHE) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok("org/name");
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->repo_id, "org/name");
  EXPECT_EQ(ck.cache->commit, kCommitA);
  EXPECT_EQ(ck.cache->revision, "main");
  EXPECT_EQ(ck.root, fs::canonical(c.repo.snapshot(kCommitA)));
  EXPECT_EQ(ck.shards.size(), 1u);
}

TEST(model_locate, repo_id_via_HF_HOME) {
  CleanEnv clean;
  TempDir tmp;
  EnvGuard h("HF_HOME", tmp.path().string());
  CacheRepo repo(tmp / "hub", "org/name");
  repo.clean_snapshot(kCommitA);
  repo.ref("main", kCommitA);
  Checkpoint ck = load_ok("org/name");
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->commit, kCommitA);
}

TEST(model_locate, repo_id_via_home_default) {
  CleanEnv clean;
  TempDir tmp;
  EnvGuard home("HOME", tmp.path().string());
  CacheRepo repo(tmp / ".cache/huggingface/hub", "org/name");
  repo.clean_snapshot(kCommitA);
  repo.ref("main", kCommitA);
  Checkpoint ck = load_ok("org/name");
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->commit, kCommitA);
}

TEST(model_locate, commit_hash_revision_used_directly) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.clean_snapshot(kCommitB, "f");
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok(std::string("org/name@") + kCommitB);
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->commit, kCommitB);
  EXPECT_EQ(ck.root.filename(), kCommitB);
}

TEST(model_locate, branch_revision_via_refs) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.clean_snapshot(kCommitB, "f");
  c.repo.ref("main", kCommitA);
  c.repo.ref("dev", kCommitB);
  fs::create_directories(c.repo.dir() / "refs/refs/pr");
  c.repo.ref("refs/pr/1", kCommitB);
  EXPECT_EQ(load_ok("org/name@dev").cache->commit, kCommitB);
  EXPECT_EQ(load_ok("org/name@refs/pr/1").cache->commit, kCommitB);
  EXPECT_EQ(load_ok("org/name@main").cache->commit, kCommitA);
  EXPECT_EQ(load_ok("org/name@").cache->commit, kCommitA);
}

TEST(model_locate, snapshot_directory_is_recognised_as_cache) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok(c.repo.snapshot(kCommitA));
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->repo_id, "org/name");
  EXPECT_EQ(ck.cache->commit, kCommitA);
  EXPECT_EQ(ck.cache_state.refs.size(), 1u);
}

TEST(model_locate, repo_folder_resolves_main) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  Checkpoint ck = load_ok(c.repo.dir());
  ASSERT_TRUE(ck.cache);
  EXPECT_EQ(ck.cache->commit, kCommitA);
}

TEST(model_locate, unknown_repo_is_a_load_error) {
  Cache c;
  LoadResult r = load_checkpoint("org/other");
  ASSERT_TRUE(r.error);
  EXPECT_FALSE(r.checkpoint);
  EXPECT_TRUE(contains(r.error->message, "org/other")) << r.error->message;
  EXPECT_TRUE(contains(r.error->message, "not in the local Hugging Face cache")) << r.error->message;
  EXPECT_TRUE(contains(r.error->message, c.root.string())) << r.error->message;
}

TEST(model_locate, unknown_ref_is_a_load_error_naming_known_refs) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  LoadResult r = load_checkpoint("org/name@nope");
  ASSERT_TRUE(r.error);
  EXPECT_TRUE(contains(r.error->message, "nope")) << r.error->message;
  EXPECT_TRUE(contains(r.error->message, "main")) << r.error->message;
}

TEST(model_locate, unknown_commit_is_not_silently_clean) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  LoadResult r = load_checkpoint(std::string("org/name@") + kCommitB);
  if (r.error) {
    EXPECT_TRUE(contains(r.error->message, kCommitB)) << r.error->message;
  } else {
    ASSERT_TRUE(r.checkpoint);
    auto all = run_checks(*r.checkpoint);
    bool fs_error = false;
    for (const auto& f : all) fs_error |= f.severity == Severity::error && f.code.rfind("FS", 0) == 0;
    EXPECT_TRUE(fs_error) << "a commit that is not in the cache verified clean:\n" << dump(all);
  }
}

TEST(model_locate, hostile_revisions_are_refused) {
  Cache c;
  c.repo.clean_snapshot(kCommitA);
  c.repo.ref("main", kCommitA);
  write_text(c.tmp / "hub" / "secret", kCommitA);  // refs/../../secret would resolve to this
  for (const char* t : {"org/name@../../secret", "org/name@/etc/passwd"}) {
    LoadResult r = load_checkpoint(t);
    EXPECT_TRUE(r.error) << t;
  }
}

TEST(model_locate, not_a_directory_and_nonsense) {
  TempDir d;
  write_text(d / "file.txt", "x");
  EXPECT_TRUE(load_checkpoint((d / "file.txt").string()).error);
  EXPECT_TRUE(load_checkpoint((d / "missing").string()).error);
  EXPECT_TRUE(load_checkpoint("").error);
}

// ---- discover ---------------------------------------------------------------------------

TEST(model_discover, walk_lists_files_sorted_and_skips_git) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "b.json", "{}");
  write_text(d / "a/nested.txt", "x");
  write_text(d / ".git/objects/aa", "x");
  write_text(d / ".cache/huggingface/download/model.safetensors.metadata", "x");
  Checkpoint ck = load_ok(d.path());
  std::vector<std::string> rels;
  for (const auto& f : ck.files) rels.push_back(f.rel);
  EXPECT_EQ(rels, (std::vector<std::string>{".cache/huggingface/download/model.safetensors.metadata", "a/nested.txt",
                                            "b.json", "model.safetensors"}));
  EXPECT_TRUE(only(run_checks(ck), {"FS"}).empty());
}

TEST(model_discover, walk_is_bounded) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  fs::path deep = d.path();
  for (int i = 0; i < 40; ++i) deep /= "d";
  write_text(deep / "deep.json", "{}");
  for (int i = 0; i < 300; ++i) write_text(d / "many" / (std::to_string(i) + ".txt"), "");
  LoadOptions o;
  o.max_walk_entries = 100;
  LoadResult r = load_checkpoint(d.path().string(), o);
  ASSERT_TRUE(r.checkpoint);
  EXPECT_LE(r.checkpoint->files.size(), 100u);
  Checkpoint ck = load_ok(d.path());
  for (const auto& f : ck.files) EXPECT_FALSE(contains(f.rel, "deep.json")) << "depth is capped: " << f.rel;
}

TEST(model_discover, directory_symlink_loop_terminates) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  fs::create_directory(d / "sub");
  fs::create_directory_symlink("..", d / "sub" / "up");
  fs::create_directory_symlink(d.path(), d / "self");
  Checkpoint ck = load_ok(d.path());
  EXPECT_EQ(ck.shards.size(), 1u);
}

TEST(model_discover, side_files_are_parsed_with_duplicates_and_errors) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "config.json", R"({"a": 1, "a": 2})");
  write_text(d / "tokenizer_config.json", R"({"chat_template": "{{ x }}",})");
  write_text(d / "generation_config.json", R"({"eos_token_id": 2})");
  write_text(d / "chat_template.jinja", "{{ messages }}");
  write_text(d / "additional_chat_templates/tool_use.jinja", "{{ tools }}");
  Checkpoint ck = load_ok(d.path());
  ASSERT_TRUE(ck.config.ok());
  ASSERT_EQ(ck.config.duplicates.size(), 1u);
  EXPECT_EQ(ck.config.duplicates[0].key, "a");
  EXPECT_EQ(ck.config.value.get_int("a"), 2) << "the last duplicate wins, as Python";
  EXPECT_TRUE(ck.tokenizer_config.present);
  ASSERT_TRUE(ck.tokenizer_config.error);
  EXPECT_EQ(ck.tokenizer_config.error->line, 1u);
  EXPECT_TRUE(ck.generation_config.ok());
  EXPECT_FALSE(ck.tokenizer.present);
  ASSERT_EQ(ck.templates.size(), 2u);
  EXPECT_EQ(ck.templates[0].file, "additional_chat_templates/tool_use.jinja");
  EXPECT_EQ(ck.templates[1].text, "{{ messages }}");
}

TEST(model_discover, deeply_nested_config_is_an_error_not_a_crash) {
  TempDir d;
  write_st(d / "model.safetensors", {{"w"}});
  write_text(d / "config.json", std::string(10000, '[') + std::string(10000, ']'));
  std::string obj;
  for (int i = 0; i < 10000; ++i) obj += "{\"a\":";
  write_text(d / "tokenizer.json", obj + "1" + std::string(10000, '}'));
  Checkpoint ck = load_ok(d.path());
  EXPECT_TRUE(ck.config.error);
  // tokenizer.json is kept as bytes; the TK family parses it and reports the depth.
  EXPECT_TRUE(ck.tokenizer.present);
  EXPECT_FALSE(ck.tokenizer.error);
  auto all = run_checks(ck);  // every family copes with the failed parse
  bool tk002 = false;
  for (const auto& f : all) tk002 |= f.code == "TK002" && f.message.find("nesting deeper") != std::string::npos;
  EXPECT_TRUE(tk002);
}

TEST(model_discover, lfs_pointer_flagged_on_entry) {
  TempDir d;
  write_text(d / "model.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 5\n");
  Checkpoint ck = load_ok(d.path());
  const FileEntry* f = ck.file("model.safetensors");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->lfs_pointer);
  EXPECT_FALSE(f->readable());
}

TEST(model_checkpoint, weights_follow_the_index) {
  TempDir d;
  write_st(d / "model-00001-of-00002.safetensors", {{"a", DType::F32, {1}}, {"dup", DType::F32, {1}}});
  write_st(d / "model-00002-of-00002.safetensors", {{"b", DType::F32, {2}}, {"dup", DType::F16, {7}}});
  write_text(d / "model.safetensors.index.json",
             index_json({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"},
                         {"dup", "model-00002-of-00002.safetensors"}}));
  Checkpoint ck = load_ok(d.path());
  ASSERT_EQ(ck.tensors_by_name.at("dup").size(), 2u);
  const st::TensorEntry* dup = ck.weight("dup");
  ASSERT_NE(dup, nullptr);
  EXPECT_EQ(dup->dtype, DType::F16) << "the copy in the mapped shard is the one loaders see";
  EXPECT_EQ(ck.weights().at("dup").shard->file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(ck.weights().size(), 3u);
  EXPECT_EQ(ck.weight("missing"), nullptr);
}

TEST(model_checkpoint, weights_without_index_are_every_tensor) {
  TempDir d;
  write_st(d / "model.safetensors", {{"x"}, {"y"}});
  Checkpoint ck = load_ok(d.path());
  EXPECT_EQ(ck.weights().size(), 2u);
  ASSERT_NE(ck.weight("y"), nullptr);
  ASSERT_NE(ck.shard("model.safetensors"), nullptr);
  EXPECT_EQ(ck.shard("nope.safetensors"), nullptr);
}

TEST(model_checkpoint, load_is_parallel_and_deterministic) {
  TempDir d;
  std::vector<std::pair<std::string, std::string>> map;
  for (int i = 1; i <= 12; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00012.safetensors", i);
    write_st(d / name, {{"t" + std::to_string(i)}});
    map.push_back({"t" + std::to_string(i), name});
  }
  write_text(d / "model.safetensors.index.json", index_json(map, 12 * 16));
  LoadOptions one, many;
  one.threads = 1;
  many.threads = 8;
  auto a = load_checkpoint(d.path().string(), one), b = load_checkpoint(d.path().string(), many);
  ASSERT_TRUE(a.checkpoint && b.checkpoint);
  ASSERT_EQ(a.checkpoint->shards.size(), 12u);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(a.checkpoint->shards[i].file, b.checkpoint->shards[i].file);
    EXPECT_EQ(a.checkpoint->shards[i].header.tensors.size(), 1u);
  }
  auto fa = run_checks(*a.checkpoint), fb = run_checks(*b.checkpoint);
  EXPECT_EQ(dump(fa), dump(fb));
  expect_clean(fa);
}

}  // namespace
}  // namespace ckpt::ftest
