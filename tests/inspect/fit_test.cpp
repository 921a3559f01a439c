// The fit verdict: weights + KV + state + the documented allowance against --gpu-memory, and the
// largest context that fits, checked against the formula written out here.
#include "standin.h"

namespace ckpt::test {
namespace {

// a small llama: 2 layers, hidden 64, 4 heads / 2 kv heads x 16, intermediate 128, vocab 288
const char* kSmallLlama = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "vocab_size": 288, "max_position_embeddings": 1000000, "tie_word_embeddings": false,
    "torch_dtype": "float16"})";

constexpr uint64_t kFixed = 1ull << 30;                       // CUDA context and workspaces
constexpr uint64_t kKvPerToken = 2 * 2 * 2 * 16 * 2;          // K+V x 2 layers x 2 kv heads x 16 x f16
constexpr uint64_t kActPerToken = (2 * 64 + 4 * 16 + 2 * 2 * 16 + 2 * 128) * 2;  // 2H + q + k,v + gate,up
constexpr uint64_t kLogits = 288 * 4;                         // one sequence's fp32 logits

uint64_t weights_of(const StandIn& s) {
  uint64_t w = 0;
  for (const auto& p : s.tensors) w += stored_bytes(p);
  return w;
}

uint64_t required(uint64_t weights, uint64_t context) {
  return weights + kFixed + std::min<uint64_t>(context, 2048) * kActPerToken + kLogits + context * kKvPerToken;
}

TEST(Fit, RequiredIsWeightsKvAndAllowance) {
  auto s = plan_standin(kSmallLlama);
  const uint64_t W = weights_of(*s);
  inspect::Options o;
  o.context = 5000;
  o.gpu_memory = required(W, 10000);
  auto in = inspect_dir(s->root, o);
  ASSERT_TRUE(in.fit);
  EXPECT_EQ(in.kv.bytes_per_token, kKvPerToken);
  EXPECT_EQ(in.fit->weights, W);
  EXPECT_EQ(in.fit->kv, 5000 * kKvPerToken);
  EXPECT_EQ(in.fit->allowance.fixed, kFixed);
  EXPECT_EQ(in.fit->allowance.per_token, kActPerToken);
  EXPECT_EQ(in.fit->allowance.chunk_tokens, 2048u);
  EXPECT_EQ(in.fit->allowance.logits, kLogits);
  EXPECT_EQ(in.fit->required, required(W, 5000));
  EXPECT_TRUE(in.fit->fits);
  EXPECT_EQ(in.fit->headroom, static_cast<int64_t>(5000 * kKvPerToken));
  // the budget was sized for exactly 10000 tokens
  EXPECT_EQ(in.fit->max_context, 10000u);
  EXPECT_EQ(in.fit->max_context_limit, "memory");
}

TEST(Fit, SmallContextsScaleTheChunk) {
  auto s = plan_standin(kSmallLlama);
  const uint64_t W = weights_of(*s);
  inspect::Options o;
  o.context = 100;
  o.gpu_memory = required(W, 1000) - 1;  // one byte short of 1000 tokens
  auto in = inspect_dir(s->root, o);
  ASSERT_TRUE(in.fit);
  EXPECT_EQ(in.fit->allowance.chunk_tokens, 100u);
  EXPECT_EQ(in.fit->required, required(W, 100));
  EXPECT_EQ(in.fit->max_context, 999u);
}

TEST(Fit, DoesNotFitAndNothingFits) {
  auto s = plan_standin(kSmallLlama);
  const uint64_t W = weights_of(*s);
  inspect::Options o;
  o.context = 4096;
  o.gpu_memory = W;  // the weights alone, no room for the allowance
  auto in = inspect_dir(s->root, o);
  ASSERT_TRUE(in.fit);
  EXPECT_FALSE(in.fit->fits);
  EXPECT_EQ(in.fit->headroom, -static_cast<int64_t>(required(W, 4096) - W));
  EXPECT_EQ(in.fit->max_context, 0u);
}

TEST(Fit, OverheadReplacesTheAllowanceAndTheCapIsTheModelsContext) {
  const char* cfg = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "vocab_size": 288, "max_position_embeddings": 4096, "tie_word_embeddings": false,
      "torch_dtype": "float16"})";
  auto s = plan_standin(cfg);
  const uint64_t W = weights_of(*s);
  inspect::Options o;
  o.overhead = 1000;
  o.batch = 3;
  o.gpu_memory = 1ull << 40;
  auto in = inspect_dir(s->root, o);
  ASSERT_TRUE(in.fit);
  EXPECT_TRUE(in.fit->allowance.overridden);
  EXPECT_EQ(in.fit->allowance.total(), 1000u);
  EXPECT_EQ(in.kv.context, 4096u);  // default: max_position_embeddings
  EXPECT_EQ(in.fit->required, W + 1000 + 3 * 4096 * kKvPerToken);
  EXPECT_EQ(in.fit->max_context, 4096u);
  EXPECT_EQ(in.fit->max_context_limit, "max_position_embeddings");
}

TEST(Fit, ParseSize) {
  EXPECT_EQ(inspect::parse_size("80GB"), 80'000'000'000ull);
  EXPECT_EQ(inspect::parse_size("80GiB"), 80ull << 30);
  EXPECT_EQ(inspect::parse_size("24G"), 24ull << 30);
  EXPECT_EQ(inspect::parse_size("1.5 TiB"), 3ull << 39);
  EXPECT_EQ(inspect::parse_size("512mib"), 512ull << 20);
  EXPECT_EQ(inspect::parse_size("12345"), 12345ull);
  EXPECT_FALSE(inspect::parse_size("lots"));
  EXPECT_FALSE(inspect::parse_size("12 parsecs"));
  EXPECT_FALSE(inspect::parse_size(""));
}

}  // namespace
}  // namespace ckpt::test
