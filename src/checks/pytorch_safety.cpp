// PK: pickle safety. Every import a pickle performs is judged against an allowlist (torch's
// weights-only unpickler's, plus the numpy names of trainer state): allowed, dangerous (a
// module or callable that runs code, reads or writes files, opens sockets, loads a nested
// pickle, or reaches attributes through dunder names — the published scanner bypasses
// included), or unknown (a warning: loading needs that class, and it is not known to be safe).
// The verdict depends only on the bytes: every file whose content is a pickle, a torch zip or
// legacy stream, .npy or .npz is scanned, whatever its name.
#include "checks/pytorch_safety.h"

#include <array>
#include <map>

#include "checks/family.h"
#include "checks/util.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 13> kCodes{{
    {"PK001", Severity::error, "pickle imports a dangerous module or callable"},
    {"PK002", Severity::error, "pickle import cannot be resolved statically"},
    {"PK003", Severity::warning, "pickle imports a name outside the allowlist"},
    {"PK004", Severity::error, "pickle sets attributes on an imported module or function"},
    {"PK005", Severity::warning, "pickle stops before its end (malformed or truncated)"},
    {"PK006", Severity::error, "pickle exceeds the reader's bounds (expansion or huge values)"},
    {"PK007", Severity::warning, "encrypted archive member not inspected"},
    {"PK008", Severity::warning, "container or member not inspected"},
    {"PK009", Severity::warning, "zip layout torch never writes"},
    {"PK010", Severity::info, "TorchScript archive (code not interpreted)"},
    {"PK011", Severity::error, "pickle FRAME lengths disagree with its opcodes"},
    {"PK012", Severity::info, "pickle protocol above 2 (torch's weights_only loader rejects it)"},
    {"PK013", Severity::warning, "bytes after the last pickle"},
}};

}  // namespace

namespace pk {

namespace {

bool starts_with_module(std::string_view module, std::string_view prefix) {
  return module == prefix || (module.size() > prefix.size() && module.substr(0, prefix.size()) == prefix && module[prefix.size()] == '.');
}

std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (true) {
    const size_t d = s.find('.', at);
    out.push_back(s.substr(at, d == std::string_view::npos ? std::string_view::npos : d - at));
    if (d == std::string_view::npos) break;
    at = d + 1;
  }
  return out;
}

// Modules whose import alone is judged dangerous (the module and every submodule): picklescan's
// and modelscan's unsafe modules, fickling's UNSAFE_IMPORTS and its ML list (bad-inputs.md §4.3).
constexpr std::string_view kDangerousModules[] = {
    "os", "posix", "nt", "subprocess", "_posixsubprocess", "sys", "pty", "commands", "multiprocessing", "runpy",
    "code", "codeop", "marshal", "types", "doctest", "_interpreters", "_xxsubinterpreters", "importlib",
    "_frozen_importlib", "_frozen_importlib_external", "_imp", "imp", "pkgutil", "zipimport", "gc", "site",
    "unittest", "inspect", "test", "_operator", "operator", "functools", "cProfile", "profile", "pdb", "bdb",
    "timeit", "trace", "socket", "socketserver", "ssl", "httplib", "http", "urllib", "urllib2", "requests",
    "aiohttp", "asyncio", "webbrowser", "smtplib", "imaplib", "ftplib", "poplib", "telnetlib", "nntplib",
    "ctypes", "_ctypes", "pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "shutil", "tempfile",
    "filecmp", "distutils", "setuptools", "pydoc", "pexpect", "pipes", "venv", "ensurepip", "pip", "idlelib",
    "lib2to3", "xmlrpc", "signal", "_signal", "threading", "_thread", "atexit", "sqlite3", "_sqlite3",
    "fileinput", "glob", "platform", "linecache", "difflib", "compileall", "py_compile", "mmap", "select",
    "selectors", "logging", "syslog", "tarfile", "zipfile", "shelve", "uuid", "_osx_support", "_aix_support",
    "_pyrepl", "numpy.f2py", "numpy.distutils", "numpy.testing", "torch.hub", "torch._dynamo", "torch._inductor",
    "torch.jit", "torch.compile", "torch.utils.bottleneck", "torch.utils.collect_env", "torch.utils._config_module",
    "torch.utils.data.datapipes.utils.decoder", "torch.distributed.elastic.rendezvous", "torch.fx.experimental.symbolic_shapes",
    "__builtins__", "fickling", "picklescan", "modelscan", "model_unpickler", "saferpickle", "modelaudit",
};

// Single callables (module, name) that run code, read files or load nested pickles.
constexpr std::pair<std::string_view, std::string_view> kDangerousNames[] = {
    {"torch.serialization", "load"}, {"torch", "load"}, {"torch", "compile"}, {"torch.storage", "_load_from_bytes"},
    {"torch._utils", "_rebuild_device_tensor_from_numpy_unsafe"}, {"_io", "FileIO"}, {"io", "FileIO"}, {"_io", "open"},
    {"io", "open"}, {"numpy", "load"}, {"numpy.lib.npyio", "load"}, {"numpy", "fromfile"}, {"numpy", "memmap"},
    {"numpy.core.memmap", "memmap"}, {"numpy", "loadtxt"}, {"numpy.lib.npyio", "loadtxt"}, {"pandas", "read_pickle"},
    {"pandas.io.pickle", "read_pickle"},
};

// Parts of a dotted module or name that make any import containing them dangerous: how the
// published bypasses reach os.system through an innocent-looking first module
// ("numpy prod.os.system", "pathlib os.system", "numpy core._internal.sys.modules").
constexpr std::string_view kDangerousParts[] = {
    "os", "posix", "nt", "subprocess", "sys", "builtins", "__builtin__", "__builtins__", "runpy", "pty", "socket",
    "shutil", "ctypes", "pickle", "_pickle", "marshal", "importlib", "eval", "exec", "execfile", "__import__",
    "getattr", "setattr", "delattr", "globals", "locals", "breakpoint", "execWrapper", "_run_code", "run_path",
    "run_module",
};

// Builtins that only construct plain values (torch's weights_only allows set, bytearray,
// complex; the rest are the value types of the language).
constexpr std::string_view kSafeBuiltins[] = {"set", "frozenset", "bytearray", "bytes", "complex", "int", "float", "str",
                                              "bool", "list", "tuple", "dict", "slice", "range"};

// The allowlist: torch's weights_only unpickler (_weights_only_unpickler.py _get_allowed_globals),
// and the numpy names of trainer state (rng_state.pth) and object .npy/.npz files.
constexpr std::pair<std::string_view, std::string_view> kAllowed[] = {
    {"collections", "OrderedDict"}, {"collections", "Counter"}, {"_codecs", "encode"},
    {"torch._utils", "_rebuild_tensor"}, {"torch._utils", "_rebuild_tensor_v2"}, {"torch._utils", "_rebuild_tensor_v3"},
    {"torch._utils", "_rebuild_parameter"}, {"torch._utils", "_rebuild_parameter_with_state"},
    {"torch._utils", "_rebuild_qtensor"}, {"torch._utils", "_rebuild_sparse_tensor"},
    {"torch._utils", "_rebuild_meta_tensor_no_storage"}, {"torch._utils", "_rebuild_wrapper_subclass"},
    {"torch._utils", "_rebuild_device_tensor_from_cpu_tensor"}, {"torch._utils", "_rebuild_device_tensor_from_numpy"},
    {"torch._tensor", "_rebuild_from_type_v2"}, {"torch.nn.parameter", "Parameter"}, {"torch.serialization", "_get_layout"},
    {"torch.storage", "UntypedStorage"}, {"torch.storage", "TypedStorage"}, {"torch", "UntypedStorage"},
    {"torch", "TypedStorage"}, {"torch", "Size"}, {"torch", "device"}, {"torch", "Tensor"},
    {"torch", "per_tensor_affine"}, {"torch", "per_tensor_symmetric"}, {"torch", "per_channel_affine"},
    {"torch", "per_channel_symmetric"}, {"torch", "per_channel_affine_float_qparams"},
    {"torch", "sparse_coo"}, {"torch", "sparse_csr"}, {"torch", "sparse_csc"}, {"torch", "sparse_bsr"},
    {"torch", "sparse_bsc"}, {"torch", "strided"},
    {"numpy.core.multiarray", "_reconstruct"}, {"numpy._core.multiarray", "_reconstruct"},
    {"numpy.core.multiarray", "scalar"}, {"numpy._core.multiarray", "scalar"}, {"numpy", "ndarray"}, {"numpy", "dtype"},
    // TorchScript's own list builders (torch.jit._pickle), named only inside TorchScript archives.
    {"torch.jit._pickle", "build_intlist"}, {"torch.jit._pickle", "build_tensorlist"},
    {"torch.jit._pickle", "build_doublelist"}, {"torch.jit._pickle", "build_boollist"},
    {"torch.jit._pickle", "build_tensor_from_id"}, {"torch.jit._pickle", "restore_type_tag"},
};

constexpr std::string_view kTorchDTypes[] = {
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex32",
    "complex64", "complex128", "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "float8_e5m2", "float8_e4m3fn",
    "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "bits8", "bits16", "bits1x8",
    "bits2x4", "bits4x2", "uint16", "uint32", "uint64", "half", "float", "double", "long", "int", "short", "cfloat",
    "cdouble", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "int1", "int2", "int3", "int4", "int5",
    "int6", "int7",
};

bool is_dunder(std::string_view p) { return p.size() > 4 && p.substr(0, 2) == "__" && p.substr(p.size() - 2) == "__"; }

bool allowed(std::string_view module, std::string_view name) {
  for (const auto& [m, n] : kAllowed)
    if (m == module && n == name) return true;
  if (module == "torch") {
    std::string d;
    uint32_t sz;
    if (pt::storage_dtype(name, d, sz)) return true;  // FloatStorage ... (type tags only)
    for (auto t : kTorchDTypes)
      if (t == name) return true;
    // torch._tensor_classes: FloatTensor, cuda tensor classes are not pickled by name.
    static constexpr std::string_view tensor_classes[] = {"FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor",
                                                          "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
                                                          "ByteTensor", "BoolTensor"};
    for (auto t : tensor_classes)
      if (t == name) return true;
  }
  // numpy >= 1.25 dtype classes (numpy.dtypes.Float32DType), needed by the BUILD of a dtype.
  if (module == "numpy.dtypes" && name.size() > 5 && name.substr(name.size() - 5) == "DType" && name.find('.') == std::string_view::npos)
    return true;
  return false;
}

}  // namespace

Judgement judge_import(std::string_view module, std::string_view name) {
  // Builtins first: a few plain constructors are fine, everything else there (eval, exec,
  // getattr, __import__, open, compile, apply, breakpoint, globals...) runs or reaches code.
  if (module == "builtins" || module == "__builtin__") {
    for (auto b : kSafeBuiltins)
      if (b == name) return {Verdict::Allowed, {}};
    return {Verdict::Dangerous, "'" + std::string(name) + "' is a builtin outside the plain value constructors"};
  }
  if (allowed(module, name)) return {Verdict::Allowed, {}};
  for (auto m : kDangerousModules)
    if (starts_with_module(module, m))
      return {Verdict::Dangerous, module == m ? "'" + std::string(m) + "' is a blocked module"
                                              : "module '" + std::string(module) + "' is inside the blocked module '" + std::string(m) + "'"};
  // Nested names (Bdb.run, ShapeEnv.evaluate_guards_expression) may also climb to a blocked module.
  const std::string full = std::string(module) + "." + std::string(name);
  for (auto m : kDangerousModules)
    if (starts_with_module(full, m)) return {Verdict::Dangerous, "'" + full + "' lies in the blocked module '" + std::string(m) + "'"};
  for (const auto& [m, n] : kDangerousNames)
    if (m == module && n == name) return {Verdict::Dangerous, "'" + full + "' loads files, nested pickles or code"};
  const auto mparts = split_dots(module), nparts = split_dots(name);
  for (const auto& parts : {mparts, nparts})
    for (size_t i = 0; i < parts.size(); ++i) {
      for (auto d : kDangerousParts)
        if (parts[i] == d) return {Verdict::Dangerous, "the dotted part '" + std::string(d) + "' of '" + full + "' reaches a blocked module or callable"};
    }
  // Dunder attribute names (__globals__, __getattribute__, __subclasses__, a __main__ below a
  // package) are how pickles climb from an innocent object to builtins.
  for (size_t i = 0; i < nparts.size(); ++i)
    if (is_dunder(nparts[i])) return {Verdict::Dangerous, "the name reaches the dunder attribute '" + std::string(nparts[i]) + "'"};
  for (size_t i = 1; i < mparts.size(); ++i)
    if (is_dunder(mparts[i])) return {Verdict::Dangerous, "the module path passes through '" + std::string(mparts[i]) + "'"};
  if (module.empty() || name.empty()) return {Verdict::Dangerous, "an empty module or name"};
  return {Verdict::Unknown, {}};
}

void safety_findings(const pt::FileScan& scan, FindingSink& out) {
  if (scan.container == pt::Container::NotPickle) return;
  // One finding per distinct import and verdict, located at its first occurrence.
  struct Seen {
    const pt::Import* first;
    size_t count = 0;
    Judgement j;
  };
  std::map<std::string, Seen> by_name;
  std::vector<std::string> order;
  for (const auto& imp : scan.imports) {
    const std::string key = (imp.resolved ? "" : "?") + imp.dotted();
    auto it = by_name.find(key);
    if (it != by_name.end()) {
      ++it->second.count;
      continue;
    }
    Seen s{&imp, 1, imp.resolved ? judge_import(imp.module, imp.name) : Judgement{Verdict::Dangerous, imp.why_unresolved}};
    by_name.emplace(key, std::move(s));
    order.push_back(key);
  }
  auto where = [](const std::string& member, uint64_t offset) {
    return (member.empty() ? std::string() : "member " + member + ", ") + "opcode offset " + std::to_string(offset);
  };
  for (const auto& key : order) {
    const Seen& s = by_name[key];
    const pt::Import& imp = *s.first;
    const std::string times = s.count > 1 ? " (" + std::to_string(s.count) + " times; first at " : " (at ";
    const std::string loc = times + where(imp.member, imp.offset) + ", " + imp.how + ")";
    if (!imp.resolved) {
      out.add("PK002", Severity::error,
              "the pickle imports a name computed at load time" + loc + ": " + imp.why_unresolved +
                  "; a legitimate checkpoint names every import literally",
              scan.file, {}, "treat it as malicious: a computed STACK_GLOBAL is how payloads hide os.system from scanners");
      continue;
    }
    switch (s.j.verdict) {
      case Verdict::Allowed: break;
      case Verdict::Dangerous:
        out.add("PK001", Severity::error, "the pickle imports " + imp.dotted() + loc + ": " + s.j.reason, scan.file, {},
                "loading this file (torch.load without weights_only, pickle.load) runs that callable; do not load it, and get the weights as safetensors");
        break;
      case Verdict::Unknown:
        out.add("PK003", Severity::warning,
                "the pickle imports " + imp.dotted() + loc + ", which is outside the allowlist of torch's weights_only loader",
                scan.file, {},
                "torch.load(weights_only=True) refuses it; loading it with weights_only=False imports and may run that code");
        break;
    }
  }
  for (const auto& n : scan.notes) {
    const std::string at = " (" + (n.member.empty() ? std::string() : "member " + n.member + ", ") + "offset " + std::to_string(n.offset) + ")";
    switch (n.kind) {
      case pt::NoteKind::BuildOnImport:
        out.add("PK004", Severity::error, n.detail + at + ": a pickle that rewrites a module's attributes changes what later imports resolve to",
                scan.file, {}, "treat it as malicious (the sys.modules override bypass)");
        break;
      case pt::NoteKind::PickleError:
        if (!scan.imports.empty() || scan.container != pt::Container::RawPickle)
          out.add("PK005", Severity::warning, "the pickle stops before STOP: " + n.detail + at + "; the imports before that point are reported",
                  scan.file, {}, "a truncated or deliberately malformed pickle; loaders fail on it, scanners may miss what follows");
        break;
      case pt::NoteKind::PickleLimit:
        out.add("PK006", Severity::error, "reading stopped at a bound: " + n.detail + at, scan.file, {},
                "no legitimate checkpoint comes near these bounds: an expansion (billion-laughs) or resource-exhaustion pickle");
        break;
      case pt::NoteKind::Encrypted:
        out.add("PK007", Severity::warning, n.detail + at, scan.file, {},
                "torch cannot load encrypted members either; decrypt the archive and scan its contents");
        break;
      case pt::NoteKind::Unsupported:
      case pt::NoteKind::DecompressCap:
        out.add("PK008", Severity::warning, n.detail + at, scan.file, {}, "its contents were not scanned for imports");
        break;
      case pt::NoteKind::ZipLayout:
        out.add("PK009", Severity::warning, n.detail + at, scan.file, {},
                "torch's writer never produces this; the archive was rewritten by another tool (or crafted to confuse scanners)");
        break;
      case pt::NoteKind::TorchScript:
        out.add("PK010", Severity::info, n.detail, scan.file, {}, "TorchScript code runs when the archive is loaded with torch.jit.load");
        break;
      case pt::NoteKind::FrameMismatch:
        out.add("PK011", Severity::error, n.detail + at + ": pickletools and pickle.load read such a pickle differently", scan.file,
                {}, "scanners and the loader disagree about its opcodes; treat it as crafted");
        break;
      case pt::NoteKind::TrailingBytes:
        out.add("PK013", Severity::warning, n.detail + at, scan.file, {}, "pickle.load ignores them; a scanner that stops at STOP may miss a second payload");
        break;
      default: break;
    }
  }
  if (scan.max_protocol > 2)
    out.add("PK012", Severity::info,
            "the pickle uses protocol " + std::to_string(scan.max_protocol) +
                " opcodes; torch.load(weights_only=True) accepts only the protocol-2 opcodes torch.save writes (\"Unsupported operand\")",
            scan.file, {}, "re-save with torch.save's default pickle_protocol=2, or convert to safetensors");
}

}  // namespace pk

namespace {

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  for (const auto& scan : ck.pickle_scans) pk::safety_findings(scan, out);
}

}  // namespace

const FamilyDef kPickleSafetyFamily{"PK", kCodes, run};

}  // namespace ckpt::checks
