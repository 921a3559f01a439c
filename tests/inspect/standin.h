// Stand-ins of real checkpoints for the inspect tests: the real config.json (and index) from
// corpus/configs, shards laid out exactly as the real index maps them, every tensor with the
// shape the registry gives its name (tests/checks_arch/corpus_regression_test.cpp does the
// same); tensor bytes are holes, so a 685 GB layout costs a few MB of disk. The registry's
// shapes are checked against the real index's metadata.total_size by the tests themselves.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/checkpoint.h"
#include "ckpt/json.h"
#include "ckpt/quant.h"
#include "ckpt/safetensors.h"
#include "inspect/inspect.h"
#include "test_support.h"

namespace ckpt::test {

inline json::Value parse_json_text(const std::string& text) {
  auto r = json::parse(text);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->message : "");
  return r.value;
}

struct Planned {
  std::string name, file;
  st::DType dtype = st::DType::F32;
  std::vector<uint64_t> shape;
};

struct StandIn {
  TempDir dir;
  std::filesystem::path root;            // where it was written: dir, or the caller's directory
  std::vector<Planned> tensors;          // what was written
  std::optional<uint64_t> index_total;   // the real index's metadata.total_size
};

// Writes `tensors` as shards (one file per distinct Planned::file) plus `side` files.
inline void write_shards(const std::filesystem::path& root, const std::vector<Planned>& tensors) {
  std::map<std::string, std::vector<st::TensorToWrite>> by_file;
  for (const auto& t : tensors) by_file[t.file].push_back({t.name, t.dtype, t.shape, {}});
  for (auto& [file, ts] : by_file) ASSERT_EQ(st::write_file(root / file, std::move(ts)), "") << file;
}

// The real layout of corpus/configs/<dir>: the index's names (or, for config-only folders, the
// registry's plan in one shard), shaped by the registry.
inline std::unique_ptr<StandIn> corpus_standin(const std::string& dir, const std::filesystem::path& at = {}) {
  auto s = std::make_unique<StandIn>();
  s->root = at.empty() ? s->dir.path() : at;
  std::filesystem::create_directories(s->root);
  const auto root = corpus_dir() / "configs" / dir;
  const std::string cfg_text = read_text(root / "config.json");
  const json::Value cfg = parse_json_text(cfg_text);
  const bool has_index = std::filesystem::exists(root / "model.safetensors.index.json");
  std::map<std::string, std::string> file_of;
  std::set<std::string> names;
  if (has_index) {
    const json::Value idx = parse_json_text(read_text(root / "model.safetensors.index.json"));
    for (const auto& [k, v] : idx.find("weight_map")->as_object()) {
      names.insert(k);
      file_of[k] = v.as_string();
    }
    if (const auto* md = idx.find("metadata"))
      if (auto t = md->get_int("total_size")) s->index_total = static_cast<uint64_t>(*t);
  }
  auto view = arch::resolve_config(cfg, [&](std::string_view n) { return names.count(std::string(n)) > 0; });
  auto scheme = quant::parse_scheme(cfg);
  auto plan = arch::expected_tensors(view, scheme ? &*scheme : nullptr);
  std::map<std::string, const arch::ExpectedTensor*> by;
  for (const auto& x : plan) by[std::string(x.name)] = &x;
  if (!has_index)
    for (const auto& x : plan)
      if (x.presence != arch::Presence::Optional || x.mtp) {  // a tied head is not shipped; MTP layers are
        names.emplace(x.name);
        file_of[std::string(x.name)] = "model.safetensors";
      }
  for (const auto& n : names) {
    Planned p;
    p.name = n;
    p.file = file_of.at(n);
    auto it = by.find(n);
    if (it != by.end()) {
      p.dtype = arch::resolve_dtype(it->second->dtype, view.model_dtype);
      p.shape = it->second->shape;
    } else if (n.find("rotary_emb.inv_freq") != std::string::npos) {
      p.dtype = st::DType::F32;  // Llama-2's saved buffer: fp32 [hd/2]
      p.shape = {static_cast<uint64_t>(view.dim_or("hd", 128) / 2)};
    } else {
      ADD_FAILURE() << dir << ": the registry gives no shape for " << n;
      continue;
    }
    // as the real Qwen3.5 checkpoints store them (tests/arch/corpus_index_test.cpp)
    if (dir == "Qwen3.5-9B-multimodal" &&
        (n.find("linear_attn.A_log") != std::string::npos || n.find("linear_attn.norm") != std::string::npos))
      p.dtype = st::DType::F32;
    s->tensors.push_back(std::move(p));
  }
  write_shards(s->root, s->tensors);
  for (const char* side : {"config.json", "model.safetensors.index.json", "quantize_config.json"})
    if (std::filesystem::exists(root / side)) std::filesystem::copy_file(root / side, s->root / side);
  return s;
}

// A stand-in of the registry's plan for `config_text` (one shard, config.json beside it).
inline std::unique_ptr<StandIn> plan_standin(const std::string& config_text) {
  auto s = std::make_unique<StandIn>();
  s->root = s->dir.path();
  const json::Value cfg = parse_json_text(config_text);
  auto view = arch::resolve_config(cfg);
  auto scheme = quant::parse_scheme(cfg);
  for (const auto& x : arch::expected_tensors(view, scheme ? &*scheme : nullptr)) {
    if (x.presence == arch::Presence::Optional && !x.mtp) continue;
    s->tensors.push_back({std::string(x.name), "model.safetensors", arch::resolve_dtype(x.dtype, view.model_dtype), x.shape});
  }
  write_shards(s->dir.path(), s->tensors);
  write_text(s->dir / "config.json", config_text);
  return s;
}

inline uint64_t numel(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

inline uint64_t stored_bytes(const Planned& p) { return *st::tensor_nbytes(p.dtype, p.shape); }

inline inspect::Inspection inspect_dir(const std::filesystem::path& dir, const inspect::Options& o = {}) {
  auto r = load_checkpoint(dir.string());
  EXPECT_TRUE(r.checkpoint) << (r.error ? r.error->message : "");
  if (!r.checkpoint) return {};
  return inspect::inspect(*r.checkpoint, o);
}

}  // namespace ckpt::test
