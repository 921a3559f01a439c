#include "model/pytorch_shards.h"

#include <algorithm>
#include <deque>

#include "io/checked.h"

namespace ckpt {

DType torch_dtype(std::string_view n) {
  static constexpr std::pair<std::string_view, DType> kMap[] = {
      {"float32", DType::F32},         {"float16", DType::F16},           {"bfloat16", DType::BF16},
      {"float64", DType::F64},         {"int64", DType::I64},             {"int32", DType::I32},
      {"int16", DType::I16},           {"int8", DType::I8},               {"uint8", DType::U8},
      {"bool", DType::BOOL},           {"complex64", DType::C64},         {"float8_e4m3fn", DType::F8_E4M3},
      {"float8_e5m2", DType::F8_E5M2}, {"float8_e8m0fnu", DType::F8_E8M0}, {"float8_e4m3fnuz", DType::F8_E4M3FNUZ},
      {"float8_e5m2fnuz", DType::F8_E5M2FNUZ}, {"uint16", DType::U16},   {"uint32", DType::U32},
      {"uint64", DType::U64},
  };
  for (const auto& [k, d] : kMap)
    if (k == n) return d;
  return DType::Unknown;
}

namespace {

bool starts_with_consolidated(std::string_view rel) {
  return rel.rfind("consolidated.", 0) == 0 && rel.size() > 4 && rel.substr(rel.size() - 4) == ".pth";
}

// The byte span [begin, end) of the file a tensor's elements lie in (empty for zero-size).
std::pair<uint64_t, uint64_t> file_span(const pt::Tensor& t, const pt::Storage& s) {
  const uint64_t item = std::max<uint32_t>(t.itemsize, 1);
  if (t.storage_offset < 0 || t.shape.size() != t.stride.size()) return {s.data_offset, s.data_offset};
  auto begin = io::checked_mul(static_cast<uint64_t>(t.storage_offset), item);
  std::optional<uint64_t> last = static_cast<uint64_t>(t.storage_offset) + 1;
  for (size_t i = 0; i < t.shape.size() && last; ++i) {
    if (t.shape[i] <= 0 || t.stride[i] < 0) return {s.data_offset + begin.value_or(0), s.data_offset + begin.value_or(0)};
    auto step = io::checked_mul(static_cast<uint64_t>(t.stride[i]), static_cast<uint64_t>(t.shape[i] - 1));
    last = step ? io::checked_add(*last, *step) : std::nullopt;
  }
  auto end = last ? io::checked_mul(*last, item) : std::nullopt;
  if (!begin || !end) return {s.data_offset, s.data_offset};
  auto b = io::checked_add(s.data_offset, *begin), e = io::checked_add(s.data_offset, *end);
  if (!b || !e) return {s.data_offset, s.data_offset};
  return {*b, *e};
}

}  // namespace

void add_pytorch_shards(Checkpoint& ck, const std::vector<std::string_view>& indexed_files) {
  for (const auto& scan : ck.pickle_scans) {
    if (!scan.weights_read) continue;
    if (scan.container != pt::Container::TorchZip && scan.container != pt::Container::Legacy) continue;
    const bool indexed = std::find(indexed_files.begin(), indexed_files.end(), scan.file) != indexed_files.end();
    if (!pt::is_weights_name(scan.file) && !(indexed && !scan.tensors.empty())) continue;
    // Meta's consolidated.NN.pth hold one model-parallel slice each, under Meta's names: no
    // loader reads them as one table; PT015-PT021 (checks/pytorch_meta.cpp) judge them.
    if (starts_with_consolidated(scan.file)) continue;
    Shard sh;
    sh.file = scan.file;
    sh.format = Format::pytorch;
    auto names = std::make_shared<std::deque<std::string>>();
    st::Header& h = sh.header;
    h.file_size = scan.file_size;
    h.framing_ok = true;
    h.parsed = true;
    h.data_base = 0;
    for (const auto& t : scan.tensors) {
      if (t.storage < 0 || !t.problem.empty()) continue;  // meta tensors; PT008 reports the rest
      const pt::Storage& s = scan.storages[static_cast<size_t>(t.storage)];
      TensorEntry e;
      names->push_back(t.name);
      e.name = names->back();
      e.name_hash = hash_name(e.name);
      for (int64_t d : t.shape) e.shape.push_back(static_cast<uint64_t>(std::max<int64_t>(d, 0)));
      e.dtype = torch_dtype(t.dtype);
      std::tie(e.begin, e.end) = file_span(t, s);
      h.tensors.push_back(std::move(e));
    }
    h.storage = names;
    ck.shards.push_back(std::move(sh));
  }
}

}  // namespace ckpt
