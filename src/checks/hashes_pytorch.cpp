// The --deep plan for pickled tensors (HS002-HS004 over .bin / .pt / .pth storages). A tensor
// is scanned as it addresses its storage, not as the storage range naively: its dims are
// sorted by stride, the innermost dense run of them is one span, and each combination of the
// outer dims is another span (a transposed or permuted tensor is one span; a strided slice
// such as w[:, ::2] is one span per row). Stride-0 dims (expand) are dropped, so each stored
// value is scanned once. First hits are mapped back to the tensor's row-major index.
// Big-endian storages (a torch zip whose byteorder record says "big") are swapped before the
// bit-pattern scan. The legacy stream is little-endian whatever its sys_info says: torch's
// THPStorage_writeFileRaw converts to little-endian when it writes. Deflated records are not
// scanned (their bytes on disk are not the elements).
#include <numeric>

#include "checks/hashes_plan.h"
#include "checks/util.h"
#include "io/checked.h"
#include "model/pytorch_shards.h"

namespace ckpt::checks::hs {

namespace {

constexpr size_t kMaxSpansPerTensor = 4096;
constexpr size_t kMaxSpansPerFile = 1u << 20;

bool is_meta_rank(std::string_view rel) {
  return rel.find('/') == std::string_view::npos && starts_with(rel, "consolidated.") && ends_with(rel, ".pth");
}

}  // namespace

std::optional<Strided> strided_spans(const pt::Tensor& t, const pt::Storage& s, size_t max_spans) {
  if (t.shape.size() != t.stride.size() || t.storage_offset < 0 || t.itemsize == 0) return std::nullopt;
  const size_t n = t.shape.size();
  Strided out;
  for (size_t i = 0; i < n; ++i) {
    if (t.shape[i] < 0 || t.stride[i] < 0) return std::nullopt;
    if (t.shape[i] == 0) return out;  // no element
  }
  // Row-major weight of each logical dim.
  std::vector<uint64_t> weight(n, 1);
  for (size_t i = n; i-- > 1;) {
    auto w = io::checked_mul(weight[i], static_cast<uint64_t>(t.shape[i]));
    if (!w) return std::nullopt;
    weight[i - 1] = *w;
  }
  struct Dim {
    uint64_t size, stride, weight;
  };
  std::vector<Dim> dims;
  for (size_t i = 0; i < n; ++i) {
    if (t.shape[i] == 1) continue;
    if (t.stride[i] == 0) {
      out.distinct_only = true;
      continue;
    }
    dims.push_back({static_cast<uint64_t>(t.shape[i]), static_cast<uint64_t>(t.stride[i]), weight[i]});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride > b.stride; });
  // Elements must not overlap: each dim steps past the whole extent of the dims inside it.
  // The innermost dims forming a dense block (stride 1, each next = size x stride) are one run.
  uint64_t extent = 1;  // elements spanned by the dims inside the current one
  size_t dense_from = dims.size();
  bool dense = true;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d].stride < extent) return std::nullopt;  // overlapping (or mis-sorted) layout
    if (dense && dims[d].stride == extent) dense_from = d;
    else dense = false;
    auto e = io::checked_mul(dims[d].stride, dims[d].size);
    if (!e) return std::nullopt;
    extent = *e;
  }
  uint64_t run = 1, runs = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    auto& acc = d >= dense_from ? run : runs;
    auto m = io::checked_mul(acc, dims[d].size);
    if (!m) return std::nullopt;
    acc = *m;
  }
  if (runs > max_spans) return std::nullopt;
  // The last element must lie inside the storage's declared bytes and the record.
  uint64_t last = static_cast<uint64_t>(t.storage_offset);
  for (const auto& d : dims) {
    auto step = io::checked_mul(d.stride, d.size - 1);
    auto sum = step ? io::checked_add(last, *step) : std::nullopt;
    if (!sum) return std::nullopt;
    last = *sum;
  }
  const auto end_bytes = io::checked_mul(last + 1, uint64_t{t.itemsize});
  const auto declared = io::checked_mul(s.numel, uint64_t{std::max<uint32_t>(s.itemsize, 1)});
  if (!end_bytes || !declared || *end_bytes > std::min(*declared, s.bytes)) return std::nullopt;
  for (const auto& d : dims) {
    out.map.sizes.push_back(d.size);
    out.map.logical.push_back(d.weight);
  }
  out.elements = run * runs;
  // Enumerate the outer dims (odometer); each combination starts one run.
  std::vector<uint64_t> idx(dense_from, 0);
  for (uint64_t r = 0; r < runs; ++r) {
    uint64_t elem = static_cast<uint64_t>(t.storage_offset);
    for (size_t d = 0; d < dense_from; ++d) elem += idx[d] * dims[d].stride;  // bounded by `last` above
    out.spans.push_back({s.data_offset + elem * t.itemsize, run * t.itemsize, r * run});
    for (size_t d = dense_from; d-- > 0;) {
      if (++idx[d] < dims[d].size) break;
      idx[d] = 0;
    }
  }
  return out;
}

void plan_pickles(const Checkpoint& ck, Plan& plan) {
  for (const auto& scan : ck.pickle_scans) {
    if (!scan.weights_read || (scan.container != pt::Container::TorchZip && scan.container != pt::Container::Legacy)) continue;
    const Shard* sh = ck.shard(scan.file);
    if (!is_meta_rank(scan.file) && !(sh && sh->format == Format::pytorch)) continue;
    const FileEntry* f = ck.file(scan.file);
    if (!f || !f->readable() || f->abs.empty()) continue;
    const bool big = scan.container == pt::Container::TorchZip && scan.byteorder == "big";
    std::optional<size_t> job;
    size_t spans = 0;
    for (const auto& t : scan.tensors) {
      if (t.alias_of >= 0 || t.storage < 0 || !t.problem.empty()) continue;  // tied: scanned once; PT008 reports the rest
      const st::DType d = torch_dtype(t.dtype);
      if (!deep::scannable(d) || st::dtype_bits(d) / 8 != t.itemsize) continue;
      const pt::Storage& s = scan.storages[static_cast<size_t>(t.storage)];
      if (!s.present || s.compressed || s.itemsize == 0) continue;
      auto sp = strided_spans(t, s, kMaxSpansPerTensor);
      if (!sp || sp->elements == 0 || spans + sp->spans.size() > kMaxSpansPerFile) continue;
      spans += sp->spans.size();
      if (!job) job = plan.job_for(*f);
      TensorRef ref;
      ref.file = scan.file;
      ref.name = t.name;
      ref.dtype = d;
      for (int64_t x : t.shape) ref.shape.push_back(static_cast<uint64_t>(x));
      ref.numel = sp->elements;
      ref.map = std::move(sp->map);
      ref.distinct_only = sp->distinct_only;
      for (const auto& span : sp->spans) {
        ref.spans.push_back(static_cast<uint32_t>(plan.jobs[*job].tensors.size()));
        ref.span_first.push_back(span.first);
        plan.jobs[*job].tensors.push_back({d, span.offset, span.nbytes, big});
      }
      plan.tensors[*job].push_back(std::move(ref));
    }
  }
}

}  // namespace ckpt::checks::hs
