// Layer replay (src/arch/layer_replay.h) must change no finding: the conformance findings of
// every fixture architecture and quantization scheme, clean and with each tensor of a
// replayed layer and of the representative layer removed, retyped, reshaped, renamed, given
// a stray companion or moved to another shard, are compared with the engine's findings with
// replay turned off, field for field and in order.
#include <algorithm>
#include <deque>

#include "arch/conformance.h"
#include "ckpt/fixture.h"
#include "helpers.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

std::string describe(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs)
    s += f.code + " " + std::string(severity_name(f.severity)) + " " + f.message + " | " + f.file + " | " + f.tensor +
         " | " + f.hint + "\n";
  return s;
}

std::vector<Finding> conformance(const arch::ConformanceInput& in, bool replay) {
  arch::set_layer_replay(replay);
  FindingSink sink;
  arch::check_conformance(in, arch::kCF | arch::kAR | arch::kQZ, sink);
  arch::set_layer_replay(true);
  return sink.findings();
}

bool same(const std::vector<Finding>& a, const std::vector<Finding>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].code != b[i].code || a[i].severity != b[i].severity || a[i].message != b[i].message ||
        a[i].file != b[i].file || a[i].tensor != b[i].tensor || a[i].hint != b[i].hint)
      return false;
  return true;
}

struct Counts {
  size_t variants = 0, with_findings = 0;
};

// Every mutation of every tensor under `layer_base`, each compared with replay on and off.
void mutate_layer(const arch::ConformanceInput& clean, const std::string& layer_base, const std::string& label,
                  Counts& counts) {
  std::deque<std::string> names;
  std::deque<std::vector<uint64_t>> shapes;
  auto compare = [&](const arch::ConformanceInput& in, const std::string& what) {
    const auto on = conformance(in, true), off = conformance(in, false);
    ++counts.variants;
    if (!off.empty()) ++counts.with_findings;
    EXPECT_TRUE(same(on, off)) << label << ": " << what << "\nwith replay:\n" << describe(on) << "without:\n" << describe(off);
  };
  for (size_t i = 0; i < clean.tensors.size(); ++i) {
    const arch::ActualTensor& t = clean.tensors[i];
    if (!t.name.starts_with(layer_base)) continue;
    const std::string n(t.name);
    {
      arch::ConformanceInput in = clean;
      in.tensors.erase(in.tensors.begin() + static_cast<std::ptrdiff_t>(i));
      compare(in, "removed " + n);
    }
    {
      arch::ConformanceInput in = clean;
      in.tensors[i].dtype = st::dtype_bits(t.dtype) == 32 && t.dtype != st::DType::F32 ? st::DType::F16 : st::DType::I32;
      compare(in, "retyped " + n);
    }
    if (!t.shape.empty()) {
      arch::ConformanceInput in = clean;
      auto& s = shapes.emplace_back(t.shape.begin(), t.shape.end());
      s.back() += 1;
      in.tensors[i].shape = s;
      compare(in, "reshaped " + n);
    }
    {
      arch::ConformanceInput in = clean;
      in.tensors[i].name = names.emplace_back(n + "_x");
      in.tensors[i].hash = 0;
      compare(in, "renamed " + n);
    }
    if (n.ends_with(".weight")) {
      arch::ConformanceInput in = clean;
      in.tensors.push_back({names.emplace_back(n.substr(0, n.size() - 7) + ".scales"), st::DType::F16,
                            std::span<const uint64_t>(shapes.emplace_back(std::vector<uint64_t>{4, 1})), t.file, 0});
      compare(in, "stray .scales beside " + n);
    }
    {
      arch::ConformanceInput in = clean;
      in.tensors[i].file = names.emplace_back("other-shard.safetensors");
      compare(in, "moved " + n);
    }
    {  // a name held twice (lookups find the first): replay may not take a tensor by position
      arch::ConformanceInput in = clean;
      arch::ActualTensor copy = t;
      copy.dtype = st::DType::I32;
      in.tensors.insert(in.tensors.begin(), copy);
      compare(in, "duplicated " + n);
    }
  }
}

TEST(LayerReplay, ChangesNoFindingOnAnyFixtureOrMutation) {
  std::vector<std::string> quants = {""};
  for (const auto& s : fixture::schemes()) quants.emplace_back(s.name);
  Counts counts;
  size_t fixtures = 0;
  for (const auto& a : fixture::architectures()) {
    for (const auto& q : quants) {
      TempDir d;
      fixture::Options o;
      o.arch = a.model_type;
      o.quant = q;
      o.layers = 5;
      o.out = d / "m";
      const fixture::Result made = fixture::make_fixture(o);
      if (!made.error.empty()) continue;  // a combination the fixture writer refuses
      auto loaded = load_checkpoint(made.model_dir.string());
      ASSERT_TRUE(loaded.checkpoint.has_value()) << o.arch << " " << q;
      const Checkpoint& ck = *loaded.checkpoint;
      const arch::ConformanceInput clean = arch::conformance_input(ck);
      if (!clean.config) continue;
      const std::string label = o.arch + (q.empty() ? "" : " --quant " + q);
      const auto on = conformance(clean, true), off = conformance(clean, false);
      EXPECT_TRUE(same(on, off)) << label << " clean\nwith replay:\n" << describe(on) << "without:\n" << describe(off);
      {  // the tensors listed in another order: layers no longer sit alike, replay finds them by name
        arch::ConformanceInput reversed = clean;
        std::reverse(reversed.tensors.begin(), reversed.tensors.end());
        std::rotate(reversed.tensors.begin(), reversed.tensors.begin() + reversed.tensors.size() / 3, reversed.tensors.end());
        const auto r_on = conformance(reversed, true), r_off = conformance(reversed, false);
        EXPECT_TRUE(same(r_on, r_off)) << label << " reordered\nwith replay:\n" << describe(r_on) << "without:\n" << describe(r_off);
      }
      ++fixtures;
      // The prefix of the decoder layers: the text of a stored name up to "layers.".
      std::string prefix;
      for (const auto& t : clean.tensors)
        if (auto p = t.name.find("layers.0."); p != std::string_view::npos) {
          prefix = std::string(t.name.substr(0, p));
          break;
        }
      mutate_layer(clean, prefix + "layers.3.", label, counts);  // a replayed layer
      mutate_layer(clean, prefix + "layers.1.", label, counts);  // the representative of layers 2-4 in most
    }
  }
  EXPECT_GE(fixtures, 60u);
  EXPECT_GE(counts.variants, 5000u);
  EXPECT_GE(counts.with_findings, 2000u);
  std::printf("layer replay: %zu fixtures, %zu mutated inputs (%zu with findings), identical with and without replay\n",
              fixtures, counts.variants, counts.with_findings);
}

// The replay is taken where it should be: a layout repeated across layers is checked once.
TEST(LayerReplay, IsTakenOnRepeatedLayers) {
  TempDir d;
  fixture::Options o;
  o.arch = "qwen3_moe";
  o.quant = "fp8";
  o.layers = 6;
  o.out = d / "m";
  ASSERT_TRUE(fixture::make_fixture(o).error.empty());
  auto loaded = load_checkpoint((d / "m").string());
  ASSERT_TRUE(loaded.checkpoint.has_value());
  const arch::ConformanceInput in = arch::conformance_input(*loaded.checkpoint);
  const uint64_t before = arch::layer_replays(), hits_before = arch::layer_replay_position_hits();
  const auto on = conformance(in, true);
  EXPECT_EQ(arch::layer_replays() - before, 5u) << describe(on);  // layer 0 checked, layers 1-5 replayed
  // The layers are listed alike, so after a replayed layer's first lookup by name each of its
  // other tensors is found at its representative's position (companion lookups may add more).
  size_t later_layer_tensors = 0;
  for (int layer = 1; layer <= 5; ++layer) {
    const std::string base = "layers." + std::to_string(layer) + ".";
    size_t here = 0;
    for (const auto& t : in.tensors) here += t.name.find(base) != std::string_view::npos;
    ASSERT_GT(here, 1u);
    later_layer_tensors += here - 1;
  }
  EXPECT_GE(arch::layer_replay_position_hits() - hits_before, later_layer_tensors);
  for (const auto& f : on) EXPECT_NE(f.severity, Severity::error) << describe(on);
  EXPECT_TRUE(same(on, conformance(in, false)));
  EXPECT_EQ(arch::layer_replays() - before, 5u);
}

}  // namespace
}  // namespace ckpt::test
