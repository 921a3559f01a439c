// The Ollama store: ckpt verify ollama:NAME[:TAG] and a models directory, built in a TempDir
// exactly as Ollama lays it out (manifests/<host>/<namespace>/<model>/<tag>, blobs/sha256-<hex>):
// a clean model, an empty and a truncated blob, a missing blob, an empty manifest, and a
// content change only --deep sees.
#include <gtest/gtest.h>

#include <cstdlib>

#include "builders.h"
#include "ckpt/fixture.h"
#include "hub/hash.h"

namespace ckpt::ftest {
namespace {

std::string sha256_of(const fs::path& p) {
  std::string err;
  return hub::detail::hash_file(p, hub::detail::EtagKind::sha256, fs::file_size(p), &err);
}

struct Store {
  TempDir dir;
  std::string model_digest, template_digest, params_digest;
  uint64_t model_size = 0;

  fs::path blob(const std::string& digest) const { return dir / ("blobs/sha256-" + digest); }

  Store() {
    fs::create_directories(dir / "blobs");
    TempDir tmp;
    fixture::GgufOptions o;
    o.arch = "qwen3";
    o.out = tmp.path();
    o.quant = "q8_0";
    auto r = fixture::make_gguf_fixture(o);
    EXPECT_EQ(r.error, "");
    const fs::path gguf = tmp.path() / r.files[0];
    model_digest = sha256_of(gguf);
    model_size = fs::file_size(gguf);
    fs::copy_file(gguf, blob(model_digest));
    write_text(dir / "t.tmp", "{{ .System }}{{ .Prompt }}");
    template_digest = sha256_of(dir / "t.tmp");
    fs::rename(dir / "t.tmp", blob(template_digest));
    write_text(dir / "p.tmp", R"({"stop": ["<|im_end|>"]})");
    params_digest = sha256_of(dir / "p.tmp");
    fs::rename(dir / "p.tmp", blob(params_digest));
    write_manifest("library", "tiny", "latest");
  }

  void write_manifest(const std::string& ns, const std::string& model, const std::string& tag) {
    auto layer = [&](const std::string& kind, const std::string& digest) {
      return R"({"mediaType":"application/vnd.ollama.image.)" + kind + R"(","digest":"sha256:)" + digest + R"(","size":)" +
             std::to_string(fs::file_size(blob(digest))) + "}";
    };
    const std::string manifest = R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json","layers":[)" +
                                 layer("model", model_digest) + "," + layer("template", template_digest) + "," +
                                 layer("params", params_digest) + "]}";
    write_text(dir / ("manifests/registry.ollama.ai/" + ns + "/" + model + "/" + tag), manifest);
  }

  std::vector<Finding> verify_name(const std::string& name, bool deep = false) const {
    ::setenv("OLLAMA_MODELS", dir.path().c_str(), 1);
    auto loaded = load_checkpoint("ollama:" + name);
    ::unsetenv("OLLAMA_MODELS");
    EXPECT_FALSE(loaded.error) << (loaded.error ? loaded.error->message : "");
    if (!loaded.checkpoint) return {};
    VerifyOptions o;
    o.deep = deep;
    return run_checks(*loaded.checkpoint, o);
  }
};

std::vector<Finding> serious(const std::vector<Finding>& all) {
  std::vector<Finding> out;
  for (const auto& f : all)
    if (f.severity != Severity::info) out.push_back(f);
  return out;
}

TEST(ollama, clean_model_verifies_clean_by_name_and_as_a_models_directory) {
  Store s;
  auto by_name = s.verify_name("tiny");
  EXPECT_TRUE(serious(by_name).empty()) << dump(by_name);
  auto with_tag = s.verify_name("tiny:latest", true);
  EXPECT_TRUE(serious(with_tag).empty()) << dump(with_tag);
  auto dir = verify(s.dir.path());
  EXPECT_TRUE(serious(dir).empty()) << dump(dir);
  // the model blob was judged as GGUF: its template went through the CT probes
  auto ck = load_ok(s.dir.path());
  ASSERT_EQ(ck.gguf_shards.size(), 1u);
  EXPECT_EQ(ck.gguf_shards[0].file, "blobs/sha256-" + s.model_digest);
}

TEST(ollama, unknown_name_is_a_load_error) {
  Store s;
  ::setenv("OLLAMA_MODELS", s.dir.path().c_str(), 1);
  auto loaded = load_checkpoint("ollama:nothere:7b");
  ::unsetenv("OLLAMA_MODELS");
  ASSERT_TRUE(loaded.error);
  EXPECT_TRUE(contains(loaded.error->message, "registry.ollama.ai/library/nothere/7b")) << loaded.error->message;
}

TEST(ollama, empty_model_blob_names_the_layer_and_its_media_type) {
  Store s;
  write_text(s.blob(s.model_digest), "");
  auto all = s.verify_name("tiny");
  const Finding* f = find(all, "GG052");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "empty (0 bytes)")) << f->message;
  EXPECT_TRUE(contains(f->message, "application/vnd.ollama.image.model")) << f->message;
  EXPECT_EQ(f->file, "blobs/sha256-" + s.model_digest);
}

TEST(ollama, truncated_model_blob_is_a_size_error_and_a_truncated_gguf) {
  Store s;
  fs::resize_file(s.blob(s.model_digest), s.model_size / 2);
  auto all = s.verify_name("tiny");
  const Finding* f = find(all, "GG052");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "but the manifest says " + std::to_string(s.model_size))) << f->message;
  EXPECT_NE(find(all, "GG025"), nullptr) << dump(all);  // the GGUF itself is cut
}

TEST(ollama, missing_blob_empty_manifest_bad_params) {
  {
    Store s;
    fs::remove(s.blob(s.template_digest));
    auto all = s.verify_name("tiny");
    const Finding* f = find(all, "GG051");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_TRUE(contains(f->message, "template")) << f->message;
  }
  {
    Store s;
    write_text(s.dir / "manifests/registry.ollama.ai/library/broken/latest", "");
    auto all = verify(s.dir.path());
    const Finding* f = find(all, "GG050");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_TRUE(contains(f->message, "empty")) << f->message;
  }
  {
    Store s;
    write_text(s.blob(s.params_digest), R"({"stop": [)");
    // keep the size the manifest records: rewrite the manifest for the new blob size
    s.write_manifest("library", "tiny", "latest");
    auto all = s.verify_name("tiny");
    EXPECT_NE(find(all, "GG055"), nullptr) << dump(all);
  }
}

TEST(ollama, deep_compares_the_digest) {
  Store s;
  std::string bytes = read_text(s.blob(s.template_digest));
  bytes[0] = 'X';
  write_text(s.blob(s.template_digest), bytes);
  EXPECT_EQ(find(s.verify_name("tiny"), "GG053"), nullptr);
  auto deep = s.verify_name("tiny", true);
  const Finding* f = find(deep, "GG053");
  ASSERT_NE(f, nullptr) << dump(deep);
  EXPECT_TRUE(contains(f->message, "not its digest")) << f->message;
}

TEST(ollama, a_layer_only_partially_downloaded_is_an_unfinished_pull) {
  Store s;
  // As Ollama's downloader leaves an interrupted pull: the data under -partial, part state in -partial-0.
  const std::string bytes = read_text(s.blob(s.model_digest));
  fs::remove(s.blob(s.model_digest));
  write_text(s.dir / ("blobs/sha256-" + s.model_digest + "-partial"), bytes.substr(0, 4096));
  write_text(s.dir / ("blobs/sha256-" + s.model_digest + "-partial-0"), R"({"N":0,"Offset":0,"Size":4096,"Completed":4096})");
  for (const auto& all : {s.verify_name("tiny"), verify(s.dir.path())}) {
    const Finding* f = find(all, "GG056");
    ASSERT_NE(f, nullptr) << dump(all);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_TRUE(contains(f->message, "application/vnd.ollama.image.model")) << f->message;
    EXPECT_TRUE(contains(f->message, "a -partial data file and 1 part file(s)")) << f->message;
    EXPECT_TRUE(contains(f->message, "; the manifest says " + std::to_string(s.model_size))) << f->message;
    EXPECT_EQ(f->file, "blobs/sha256-" + s.model_digest + "-partial");
    EXPECT_EQ(find(all, "GG051"), nullptr) << dump(all);  // the specific finding replaces "missing"
    EXPECT_EQ(find(all, "GG057"), nullptr) << dump(all);  // the partial belongs to a verified layer
  }
}

TEST(ollama, unrelated_partials_and_orphan_blobs_are_info_with_their_bytes) {
  Store s;
  const std::string other(64, 'a'), orphan1(64, 'b'), orphan2(64, 'c');
  write_text(s.dir / ("blobs/sha256-" + other + "-partial"), std::string(12, 'x'));
  write_text(s.dir / ("blobs/sha256-" + orphan1), std::string(1000, 'x'));
  write_text(s.dir / ("blobs/sha256-" + orphan2), std::string(24, 'x'));
  write_text(s.dir / "blobs/not-a-blob", "ignored");
  auto all = verify(s.dir.path());
  EXPECT_TRUE(serious(all).empty()) << dump(all);
  const Finding* p = find(all, "GG057");
  ASSERT_NE(p, nullptr) << dump(all);
  EXPECT_EQ(p->severity, Severity::info);
  EXPECT_TRUE(contains(p->message, "1 interrupted download(s)")) << p->message;
  EXPECT_TRUE(contains(p->message, "12 bytes")) << p->message;
  const Finding* o = find(all, "GG058");
  ASSERT_NE(o, nullptr) << dump(all);
  EXPECT_EQ(o->severity, Severity::info);
  EXPECT_TRUE(contains(o->message, "2 blob(s)")) << o->message;
  EXPECT_TRUE(contains(o->message, "1024 bytes")) << o->message;  // 1000 + 24
  EXPECT_EQ(o->file, "blobs/sha256-" + orphan1);
  // A second model sharing the store: its blobs are referenced, so only the two remain orphans.
  // One model by name loads one manifest: orphans cannot be told, partials still can.
  s.write_manifest("library", "tiny2", "latest");
  auto by_name = s.verify_name("tiny");
  EXPECT_EQ(find(by_name, "GG058"), nullptr) << dump(by_name);
  EXPECT_NE(find(by_name, "GG057"), nullptr) << dump(by_name);
  // The clean store has neither.
  Store clean;
  auto c = verify(clean.dir.path());
  EXPECT_EQ(find(c, "GG057"), nullptr) << dump(c);
  EXPECT_EQ(find(c, "GG058"), nullptr) << dump(c);
}

}  // namespace
}  // namespace ckpt::ftest

#include "model/ollama.h"

namespace ckpt::ftest {
namespace {

TEST(ollama, names_map_to_manifest_paths_as_ollama_lays_them_out) {
  EXPECT_EQ(ollama::manifest_path("llama3.2"), "manifests/registry.ollama.ai/library/llama3.2/latest");
  EXPECT_EQ(ollama::manifest_path("qwen3:8b"), "manifests/registry.ollama.ai/library/qwen3/8b");
  EXPECT_EQ(ollama::manifest_path("user/model:tag"), "manifests/registry.ollama.ai/user/model/tag");
  EXPECT_EQ(ollama::manifest_path("hf.co/unsloth/Qwen3-8B-GGUF:Q4_K_M"), "manifests/hf.co/unsloth/Qwen3-8B-GGUF/Q4_K_M");
  EXPECT_EQ(ollama::manifest_path("localhost:5000/ns/m"), "manifests/localhost:5000/ns/m/latest");
  EXPECT_EQ(ollama::manifest_path("../etc/passwd"), "");  // never a path outside manifests/
  EXPECT_EQ(ollama::manifest_path("a/b/c/d"), "");
  EXPECT_EQ(ollama::manifest_path("ns.with.dots/m"), "");
}

}  // namespace
}  // namespace ckpt::ftest
