// trees/<commit>.json, huggingface_hub >= 1.22's tree-listing cache: written from the complete
// listing before any file (so snapshot_download(local_files_only=True) can tell an incomplete
// snapshot), byte-for-byte as its json.dump(indent=1) writes it, and never when the listing is
// incomplete or the hub contradicted it.
#include "ckpt/json.h"
#include "hub_fixture.h"

using namespace hubtest;

namespace {

std::string tree_file(const fs::path& folder) { return (folder / "trees" / (kC1 + ".json")).string(); }

// The entry huggingface_hub's TreeCacheEntry.to_json() gives, as the JSON the oracle reads.
std::string entry_json(const MockFile& f) {
  std::string e = "{\"size\": " + std::to_string(f.size()) + ", \"blob_id\": \"" + MockHub::tree_oid(f) + "\"";
  if (f.lfs) e += ", \"lfs_sha256\": \"" + MockHub::etag_of(f) + "\", \"lfs_size\": " + std::to_string(f.size());
  if (f.xet_hash.size() == 64 && f.xet_hash.find('*') == std::string::npos)
    e += ", \"xet_hash\": " + ckpt::json::quoted(f.xet_hash);
  return e + "}";
}

// What Python's json.dump(indent=1) writes for these files (the call _tree_cache.py makes).
std::optional<std::string> python_oracle(const std::vector<MockFile>& files, const fs::path& work) {
  std::string in = "{";
  for (size_t i = 0; i < files.size(); ++i)
    in += (i ? ", " : "") + ckpt::json::quoted(files[i].path) + ": " + entry_json(files[i]);
  in += "}";
  write_text(work / "oracle_in.json", in);
  auto r = run_program({"python3", "-c",
                        "import json,sys\n"
                        "d=json.load(open(sys.argv[1],encoding='utf-8'))\n"
                        "data={'format_version':1,'files':{p:d[p] for p in sorted(d)}}\n"
                        "with open(sys.argv[2],'w',encoding='utf-8') as f: json.dump(data,f,indent=1)\n",
                        (work / "oracle_in.json").string(), (work / "oracle_out.json").string()});
  if (r.exit_code != 0) return std::nullopt;
  return read_text(work / "oracle_out.json");
}

}  // namespace

TEST_F(HubTest, TreeCacheIsWrittenExactlyAsHuggingfaceHubWritesIt) {
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  const auto& cfg = file("config.json");
  const auto& model = file("model.safetensors");
  const auto& tok = file("sub/dir/tokenizer.json");
  std::string expected = "{\n \"format_version\": 1,\n \"files\": {\n"
                         "  \"config.json\": {\n   \"size\": " + std::to_string(cfg.size()) +
                         ",\n   \"blob_id\": \"" + MockHub::etag_of(cfg) + "\"\n  },\n"
                         "  \"model.safetensors\": {\n   \"size\": 307200,\n   \"blob_id\": \"" + MockHub::tree_oid(model) +
                         "\",\n   \"lfs_sha256\": \"" + MockHub::etag_of(model) + "\",\n   \"lfs_size\": 307200\n  },\n"
                         "  \"sub/dir/tokenizer.json\": {\n   \"size\": " + std::to_string(tok.size()) +
                         ",\n   \"blob_id\": \"" + MockHub::etag_of(tok) + "\"\n  }\n }\n}";
  EXPECT_EQ(read_text(tree_file(repo_dir())), expected);
  if (auto oracle = python_oracle(standard_files(), tmp.path())) {
    EXPECT_EQ(read_text(tree_file(repo_dir())), *oracle);
  }
  // A second run leaves it as it is.
  auto before = fs::last_write_time(tree_file(repo_dir()));
  ASSERT_TRUE(fetch(opts()).ok);
  EXPECT_EQ(fs::last_write_time(tree_file(repo_dir())), before);
}

TEST_F(HubTest, TreeCacheEscapesLikePythonAndDropsRedactedXetHashes) {
  auto files = standard_files();
  files[1].xet_hash = std::string(64, '*');  // redacted on gated repos (xet-core#895)
  MockFile u = text_file("dir with space/ünï \"q\" 模型 😀 \x7f.json", "{}");
  u.xet_hash = std::string(64, 'a');
  files.push_back(u);
  hub.add_commit(kRepo, kC1, files);
  auto r = fetch(opts());
  ASSERT_TRUE(r.ok) << r.error;
  std::string written = read_text(tree_file(repo_dir()));
  EXPECT_NE(written.find("\\u00fcn\\u00ef \\\"q\\\" \\u6a21\\u578b \\ud83d\\ude00 \\u007f.json"), std::string::npos) << written;
  EXPECT_EQ(written.find("****"), std::string::npos);
  EXPECT_NE(written.find("\"xet_hash\": \"" + std::string(64, 'a') + "\""), std::string::npos);
  if (auto oracle = python_oracle(files, tmp.path())) {
    EXPECT_EQ(written, *oracle);
  }
}

TEST_F(HubTest, PartialFetchCachesTheWholeListing) {
  // The listing describes the commit, not what was fetched: an offline snapshot_download with
  // the same allow_patterns succeeds, one without reports the files that are not there.
  auto o = opts();
  o.include = {"*.json"};
  o.exclude = {"sub/*"};
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  std::string written = read_text(tree_file(repo_dir()));
  for (const auto& f : standard_files()) EXPECT_NE(written.find("\"" + f.path + "\""), std::string::npos) << f.path;
  EXPECT_FALSE(fs::exists(repo_dir() / "snapshots" / kC1 / "model.safetensors"));
}

TEST_F(HubTest, FailedFetchKeepsTheListingSoTheGapIsVisible) {
  hub.set_fault(kRepo, "model.safetensors", {FaultKind::status, 0, 0, 500, -1});
  auto o = opts();
  o.retries = 0;
  auto r = fetch(o);
  EXPECT_FALSE(r.ok);
  expect_not_published(kC1, file("model.safetensors"));
  EXPECT_NE(read_text(tree_file(repo_dir())).find("\"model.safetensors\""), std::string::npos);
  EXPECT_FALSE(fs::exists(repo_dir() / "refs" / "main"));
}

TEST_F(HubTest, ListingContradictedByTheHubIsNotCached) {
  hub.lie_in_tree("sub/dir/tokenizer.json");
  auto r = fetch(opts());
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(fs::exists(tree_file(repo_dir())));
}

TEST_F(HubTest, LocalDirKeepsTheListingUnderDotCache) {
  auto o = opts();
  o.local_dir = tmp.path() / "local";
  o.cache_dir.clear();
  auto r = fetch(o);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(fs::is_regular_file(tree_file(o.local_dir / ".cache" / "huggingface")));
  EXPECT_FALSE(fs::exists(o.local_dir / "trees"));
  EXPECT_FALSE(fs::exists(cache()));
}

TEST_F(HubTest, ListingOfAnotherFormatIsLeftAndACorruptOneReplaced) {
  auto p = fs::path(tree_file(repo_dir()));
  write_text(p, "{\"format_version\": 2, \"files\": {}}");
  ASSERT_TRUE(fetch(opts()).ok);
  EXPECT_EQ(read_text(p), "{\"format_version\": 2, \"files\": {}}") << "a newer huggingface_hub's file";
  write_text(p, "{\"format_vers");
  fs::remove_all(repo_dir() / "snapshots");
  ASSERT_TRUE(fetch(opts()).ok);
  EXPECT_EQ(read_text(p).rfind("{\n \"format_version\": 1,", 0), 0u);
}

TEST_F(HubTest, OfflineFetchChecksTheSnapshotAgainstTheCachedListing) {
  // A subset was fetched: offline, the same subset is whole, the whole repo is not.
  auto o = opts();
  o.include = {"*.json"};
  ASSERT_TRUE(fetch(o).ok);
  auto off = opts();
  off.offline = true;
  off.include = {"*.json"};
  auto subset = fetch(off);
  EXPECT_TRUE(subset.ok) << subset.error;
  EXPECT_EQ(subset.files.size(), 2u);
  off.include.clear();
  auto whole = fetch(off);
  EXPECT_FALSE(whole.ok);
  auto* fr = result_for(whole, "model.safetensors");
  ASSERT_NE(fr, nullptr);
  EXPECT_EQ(fr->kind, hub::ErrorKind::offline_missing);
  EXPECT_EQ(fr->expected, 300u * 1024);
  EXPECT_TRUE(hub.log().size() > 0);
  // A cached file of another size than listed is reported too.
  auto cfg = repo_dir() / "snapshots" / kC1 / "config.json";
  auto blob = fs::canonical(cfg);
  fs::resize_file(blob, 3);
  off.include = {"*.json"};
  auto bad = fetch(off);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(result_for(bad, "config.json")->kind, hub::ErrorKind::integrity);
}
