// From a symbolically read state_dict pickle to storages and tensors: the rebuild calls torch
// emits (_rebuild_tensor_v2 and friends) are recognised by name and their literal arguments
// read; nothing else in the tree is interpreted.
#include <unordered_map>
#include <unordered_set>

#include "format/pytorch_internal.h"

namespace ckpt::pt {

namespace {

struct DTypeRow {
  std::string_view storage, dtype;
  uint32_t itemsize;
};
// torch/storage.py _dtype_to_storage_type_map (frozen) plus UntypedStorage (bytes).
constexpr DTypeRow kStorageTypes[] = {
    {"DoubleStorage", "float64", 8},      {"FloatStorage", "float32", 4},       {"HalfStorage", "float16", 2},
    {"BFloat16Storage", "bfloat16", 2},   {"LongStorage", "int64", 8},          {"IntStorage", "int32", 4},
    {"ShortStorage", "int16", 2},         {"CharStorage", "int8", 1},           {"ByteStorage", "uint8", 1},
    {"BoolStorage", "bool", 1},           {"ComplexFloatStorage", "complex64", 8}, {"ComplexDoubleStorage", "complex128", 16},
    {"QInt8Storage", "qint8", 1},         {"QUInt8Storage", "quint8", 1},       {"QInt32Storage", "qint32", 4},
    {"QUInt4x2Storage", "quint4x2", 1},   {"QUInt2x4Storage", "quint2x4", 1},   {"UntypedStorage", "uint8", 1},
};

constexpr std::pair<std::string_view, uint32_t> kDTypeSizes[] = {
    {"float64", 8}, {"float32", 4}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8}, {"int32", 4}, {"int16", 2},
    {"int8", 1}, {"uint8", 1}, {"bool", 1}, {"complex64", 8}, {"complex128", 16}, {"complex32", 4},
    {"qint8", 1}, {"quint8", 1}, {"qint32", 4}, {"quint4x2", 1}, {"quint2x4", 1}, {"float8_e5m2", 1},
    {"float8_e4m3fn", 1}, {"float8_e5m2fnuz", 1}, {"float8_e4m3fnuz", 1}, {"float8_e8m0fnu", 1}, {"bits8", 1},
    {"bits16", 2}, {"bits1x8", 1}, {"bits2x4", 1}, {"bits4x2", 1}, {"uint16", 2}, {"uint32", 4}, {"uint64", 8},
    {"float4_e2m1fn_x2", 1},
};

class Walker {
 public:
  Walker(const pickle::Result& r, FileScan& out) : r_(r), out_(out) {}

  void walk(uint32_t n, const std::string& path, int depth) {
    if (n == pickle::kNone || depth > 64) return;
    const pickle::Node& v = r_.at(n);
    if (is_tensor_call(n)) {
      add_tensor(n, path);
      return;
    }
    const bool dict_like = v.kind == pickle::Kind::Dict || (v.kind == pickle::Kind::Call && !v.items.empty());
    if (dict_like || v.kind == pickle::Kind::List || v.kind == pickle::Kind::Tuple) {
      if (!visited_.insert(n).second) return;  // a container holding itself
      if (v.kind == pickle::Kind::Dict || v.kind == pickle::Kind::Call) {
        for (size_t i = 0; i + 1 < v.items.size(); i += 2) walk(v.items[i + 1], join(path, key_text(v.items[i])), depth + 1);
      } else {
        for (size_t i = 0; i < v.items.size(); ++i) walk(v.items[i], join(path, std::to_string(i)), depth + 1);
      }
    }
  }

 private:
  const pickle::Result& r_;
  FileScan& out_;
  std::unordered_set<uint32_t> visited_;
  std::unordered_map<uint32_t, int32_t> tensor_of_node_;
  std::unordered_map<std::string, int32_t> storage_by_key_;

  static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
  std::string key_text(uint32_t k) const {
    const auto& v = r_.at(k);
    if (v.kind == pickle::Kind::Str) return v.text;
    if (v.kind == pickle::Kind::Int) return std::to_string(v.i);
    return "<key>";
  }
  const pickle::Node* global_of(uint32_t n) const {
    if (n == pickle::kNone) return nullptr;
    const auto& v = r_.at(n);
    return v.kind == pickle::Kind::Global && v.flag ? &v : nullptr;
  }
  // The rebuild function a call names, or "".
  std::string_view rebuild_name(uint32_t n) const {
    const auto& v = r_.at(n);
    if (v.kind != pickle::Kind::Call) return {};
    const auto* g = global_of(v.a);
    if (!g) return {};
    if (g->text == "torch._utils") {
      static constexpr std::string_view names[] = {"_rebuild_tensor_v2", "_rebuild_tensor", "_rebuild_tensor_v3",
                                                   "_rebuild_parameter", "_rebuild_parameter_with_state",
                                                   "_rebuild_qtensor", "_rebuild_meta_tensor_no_storage"};
      for (auto nm : names)
        if (g->text2 == nm) return nm;
    }
    if (g->text == "torch._tensor" && g->text2 == "_rebuild_from_type_v2") return "_rebuild_from_type_v2";
    if (g->text == "torch.nn.parameter" && g->text2 == "Parameter") return "Parameter";
    return {};
  }
  bool is_tensor_call(uint32_t n) const { return !rebuild_name(n).empty(); }
  const std::vector<uint32_t>* args_of(uint32_t call) const {
    const auto& v = r_.at(call);
    if (v.b == pickle::kNone) return nullptr;
    const auto& a = r_.at(v.b);
    return a.kind == pickle::Kind::Tuple ? &a.items : nullptr;
  }
  bool int_of(uint32_t n, int64_t& out) const {
    if (n == pickle::kNone) return false;
    const auto& v = r_.at(n);
    if (v.kind == pickle::Kind::Int) {
      out = v.i;
      return true;
    }
    if (v.kind == pickle::Kind::Bool) {
      out = v.flag;
      return true;
    }
    return false;
  }
  // A tuple of ints (or torch.Size((...),)).
  bool dims_of(uint32_t n, std::vector<int64_t>& out) const {
    if (n == pickle::kNone) return false;
    const auto* v = &r_.at(n);
    if (v->kind == pickle::Kind::Call) {
      const auto* g = global_of(v->a);
      const auto* a = args_of(n);
      if (!g || g->text2 != "Size" || !a || a->size() != 1) return false;
      v = &r_.at((*a)[0]);
    }
    if (v->kind != pickle::Kind::Tuple && v->kind != pickle::Kind::List) return false;
    out.clear();
    for (uint32_t k : v->items) {
      int64_t d;
      if (!int_of(k, d)) return false;
      out.push_back(d);
    }
    return true;
  }
  int32_t storage_of(uint32_t n, std::string& problem) {
    const auto& p = r_.at(n);
    if (p.kind != pickle::Kind::PersId) {
      problem = "the storage argument is not a persistent id";
      return -1;
    }
    const auto& pid = r_.at(p.a);
    if (pid.kind != pickle::Kind::Tuple || pid.items.size() < 5 || r_.at(pid.items[0]).kind != pickle::Kind::Str ||
        r_.at(pid.items[0]).text != "storage") {
      problem = "the persistent id is not ('storage', type, key, location, numel)";
      return -1;
    }
    const auto* type = global_of(pid.items[1]);
    const auto& key = r_.at(pid.items[2]);
    int64_t numel = -1;
    if (!type || key.kind != pickle::Kind::Str || !int_of(pid.items[4], numel) || numel < 0) {
      problem = "the persistent id's storage type, key or element count is not a literal";
      return -1;
    }
    auto it = storage_by_key_.find(key.text);
    if (it != storage_by_key_.end()) return it->second;
    Storage s;
    s.key = key.text;
    s.type = type->text2;
    storage_dtype(s.type, s.dtype, s.itemsize);
    s.numel = static_cast<uint64_t>(numel);
    if (r_.at(pid.items[3]).kind == pickle::Kind::Str) s.location = r_.at(pid.items[3]).text;
    s.pickle_offset = p.offset;
    out_.storages.push_back(std::move(s));
    const int32_t idx = static_cast<int32_t>(out_.storages.size() - 1);
    storage_by_key_.emplace(key.text, idx);
    return idx;
  }

  void add_tensor(uint32_t n, const std::string& path) {
    auto seen = tensor_of_node_.find(n);
    Tensor t;
    t.name = path;
    t.pickle_offset = r_.at(n).offset;
    if (seen != tensor_of_node_.end()) {  // the very same object under a second key: tied
      const Tensor& first = out_.tensors[static_cast<size_t>(seen->second)];
      t = first;
      t.name = path;
      t.alias_of = seen->second;
      out_.tensors.push_back(std::move(t));
      return;
    }
    read_call(n, t, 0);
    tensor_of_node_.emplace(n, static_cast<int32_t>(out_.tensors.size()));
    out_.tensors.push_back(std::move(t));
  }

  void read_call(uint32_t n, Tensor& t, int depth) {
    const std::string_view fn = rebuild_name(n);
    t.rebuild = t.rebuild.empty() ? std::string(fn) : t.rebuild + "/" + std::string(fn);
    const auto* a = args_of(n);
    if (!a) {
      t.problem = std::string(fn) + " has no argument tuple";
      return;
    }
    auto arg = [&](size_t i) { return i < a->size() ? (*a)[i] : pickle::kNone; };
    if (fn == "_rebuild_parameter" || fn == "_rebuild_parameter_with_state" || fn == "Parameter") {
      if (depth < 4 && arg(0) != pickle::kNone && is_tensor_call(arg(0))) return read_call(arg(0), t, depth + 1);
      t.problem = std::string(fn) + "'s data is not a rebuilt tensor";
      return;
    }
    if (fn == "_rebuild_from_type_v2") {
      // (func, new_type, args, state): the tensor is func(*args).
      const auto* g = global_of(arg(0));
      const auto& inner = arg(2) != pickle::kNone ? r_.at(arg(2)) : r_.at(n);
      if (!g || g->text != "torch._utils" || inner.kind != pickle::Kind::Tuple) {
        t.problem = "_rebuild_from_type_v2 does not wrap a torch._utils rebuild";
        return;
      }
      t.rebuild += "/" + g->text2;
      return read_args(g->text2, inner.items, t);
    }
    read_args(fn, *a, t);
  }

  void read_args(std::string_view fn, const std::vector<uint32_t>& a, Tensor& t) {
    auto arg = [&](size_t i) { return i < a.size() ? a[i] : pickle::kNone; };
    if (fn == "_rebuild_meta_tensor_no_storage") {
      const auto* d = global_of(arg(0));
      if (d) t.dtype = d->text2;
      t.itemsize = dtype_itemsize(t.dtype);
      if (!dims_of(arg(1), t.shape) || !dims_of(arg(2), t.stride)) t.problem = "size or stride is not a tuple of ints";
      return;
    }
    const size_t min_args = 4;
    if (a.size() < min_args) {
      t.problem = std::string(fn) + " has " + std::to_string(a.size()) + " arguments, expected at least 4";
      return;
    }
    t.storage = storage_of(arg(0), t.problem);
    if (!t.problem.empty()) return;
    const Storage& s = out_.storages[static_cast<size_t>(t.storage)];
    t.dtype = s.dtype;
    t.itemsize = s.itemsize;
    if (fn == "_rebuild_tensor_v3") {
      const auto* d = global_of(arg(6));
      if (!d) {
        t.problem = "_rebuild_tensor_v3's dtype is not a torch dtype";
        return;
      }
      t.dtype = d->text2;
      t.itemsize = dtype_itemsize(t.dtype);
    }
    if (!int_of(arg(1), t.storage_offset)) t.problem = "storage offset is not an int";
    else if (!dims_of(arg(2), t.shape) || !dims_of(arg(3), t.stride)) t.problem = "size or stride is not a tuple of ints";
  }
};

}  // namespace

bool storage_dtype(std::string_view type, std::string& dtype, uint32_t& itemsize) {
  for (const auto& r : kStorageTypes)
    if (r.storage == type) {
      dtype = r.dtype;
      itemsize = r.itemsize;
      return true;
    }
  return false;
}

uint32_t dtype_itemsize(std::string_view dtype) {
  for (const auto& [n, s] : kDTypeSizes)
    if (n == dtype) return s;
  return 0;
}

void extract_tensors(const pickle::Result& r, FileScan& out) {
  if (r.root == pickle::kNone) return;
  Walker(r, out).walk(r.root, "", 0);
}

}  // namespace ckpt::pt
