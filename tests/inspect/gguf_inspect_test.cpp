// ckpt inspect's KV cache for GGUF layouts built here key by key, each figure worked out by hand
// from llama.cpp's rules (specs/gguf.md 8.2, 3.3): MLA's single latent "head" without V, the
// sliding-window pattern (the last layer of each group dense) with llama-server's SWA cells,
// per-layer head_count_kv arrays with recurrent layers, and the context padded to 256.
#include <gtest/gtest.h>

#include "ckpt/gguf.h"
#include "standin.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;
using gguf::WriteValue;

json::Value inspect_json(const fs::path& dir, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"inspect", dir.string(), "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_ckpt(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return parse_json_text(r.out);
}

fs::path write_model(const TempDir& tmp, const std::string& arch, std::vector<std::pair<std::string, WriteValue>> kvs) {
  kvs.insert(kvs.begin(), {"general.architecture", WriteValue::string(arch)});
  gguf::WriteTensor t;
  t.name = "token_embd.weight";
  t.type = 0;
  t.ne = {32, 8};
  const fs::path dir = tmp / arch;
  fs::create_directories(dir);
  EXPECT_EQ(gguf::write_file(dir / "model.gguf", kvs, {t}), "");
  return dir;
}

TEST(InspectGgufKv, MlaCachesOneLatentRowWithoutV) {
  TempDir tmp;
  // DeepSeek-V3 as convert_hf_to_gguf writes it for MLA: head_count_kv 1, key_length 576
  const auto dir = write_model(tmp, "deepseek2",
                               {{"deepseek2.block_count", WriteValue::u32(61)},
                                {"deepseek2.embedding_length", WriteValue::u32(7168)},
                                {"deepseek2.attention.head_count", WriteValue::u32(128)},
                                {"deepseek2.attention.head_count_kv", WriteValue::u32(1)},
                                {"deepseek2.attention.key_length", WriteValue::u32(576)},
                                {"deepseek2.attention.value_length", WriteValue::u32(512)},
                                {"deepseek2.attention.key_length_mla", WriteValue::u32(192)},
                                {"deepseek2.attention.value_length_mla", WriteValue::u32(128)},
                                {"deepseek2.context_length", WriteValue::u32(163840)}});
  const json::Value j = inspect_json(dir, {"--context", "4096"});
  const json::Value* kv = j.find("kv_cache");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->get_int("bytes_per_token"), 61 * 576 * 2);  // 70,272 B at f16
  EXPECT_EQ(kv->get_int("bytes"), int64_t(61) * 576 * 2 * 4096);
  EXPECT_EQ(kv->get_string("attention").value_or(""), "mla");
}

TEST(InspectGgufKv, LegacyDeepseekGgufWithoutMlaKeysCachesFullKeysAndValues) {
  TempDir tmp;
  const auto dir = write_model(tmp, "deepseek2",
                               {{"deepseek2.block_count", WriteValue::u32(61)},
                                {"deepseek2.embedding_length", WriteValue::u32(7168)},
                                {"deepseek2.attention.head_count", WriteValue::u32(128)},
                                {"deepseek2.attention.head_count_kv", WriteValue::u32(128)},
                                {"deepseek2.attention.key_length", WriteValue::u32(192)},
                                {"deepseek2.attention.value_length", WriteValue::u32(128)},
                                {"deepseek2.context_length", WriteValue::u32(163840)}});
  const json::Value j = inspect_json(dir, {"--context", "4096"});
  EXPECT_EQ(j.find("kv_cache")->get_int("bytes_per_token"), int64_t(61) * 128 * (192 + 128) * 2);
}

TEST(InspectGgufKv, Gemma3SlidingLayersAndTheirCells) {
  TempDir tmp;
  // 12 layers, period 6 by default: layers 5 and 11 are dense, the other 10 slide over 1024
  const auto dir = write_model(tmp, "gemma3",
                               {{"gemma3.block_count", WriteValue::u32(12)},
                                {"gemma3.embedding_length", WriteValue::u32(1152)},
                                {"gemma3.attention.head_count", WriteValue::u32(4)},
                                {"gemma3.attention.head_count_kv", WriteValue::u32(1)},
                                {"gemma3.attention.key_length", WriteValue::u32(256)},
                                {"gemma3.attention.value_length", WriteValue::u32(256)},
                                {"gemma3.attention.sliding_window", WriteValue::u32(1024)},
                                {"gemma3.context_length", WriteValue::u32(32768)}});
  const json::Value j = inspect_json(dir, {"--context", "32768"});
  const json::Value* kv = j.find("kv_cache");
  ASSERT_NE(kv, nullptr);
  const json::Value* layers = kv->find("layers");
  ASSERT_NE(layers, nullptr) << j.dump();
  EXPECT_EQ(layers->get_int("sliding"), 10) << layers->dump();
  EXPECT_EQ(layers->get_int("full"), 2) << layers->dump();
  // dense layers: 32768 cells; sliding: pad256(1024 + 512) = 1536 cells; 1 head x (256 + 256) x 2 B
  const int64_t row = 1 * (256 + 256) * 2;
  EXPECT_EQ(kv->get_int("bytes"), 2 * row * 32768 + 10 * row * 1536);
}

TEST(InspectGgufKv, PerLayerHeadsWithRecurrentLayersAndPaddedContext) {
  TempDir tmp;
  // a hybrid: head_count_kv 0 marks recurrent layers, which hold no KV cells
  const auto dir = write_model(tmp, "lfm2",
                               {{"lfm2.block_count", WriteValue::u32(4)},
                               {"lfm2.embedding_length", WriteValue::u32(512)},
                               {"lfm2.attention.head_count", WriteValue::u32(8)},
                               {"lfm2.attention.head_count_kv", WriteValue::u32_array({0, 2, 0, 4})},
                               {"lfm2.context_length", WriteValue::u32(8192)}});
  const json::Value j = inspect_json(dir, {"--context", "1000"});
  const json::Value* kv = j.find("kv_cache");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->get_int("bytes_per_token"), (2 + 4) * (64 + 64) * 2);  // head dim 512 / 8
  EXPECT_EQ(kv->get_int("bytes"), int64_t(6) * 128 * 2 * 1024);        // 1000 -> 1024 cells
  bool noted = false;
  for (const auto& n : j.find("notes")->as_array()) noted |= n.as_string().find("multiple of 256") != std::string::npos;
  EXPECT_TRUE(noted) << j.dump();
}

}  // namespace
}  // namespace ckpt::test
