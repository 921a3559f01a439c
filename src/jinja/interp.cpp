// The evaluator: statements, expressions, the sandbox's attribute rules, filters, tests,
// Python string/dict/list methods, globals, and the step/output/depth budget.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>

#include "jinja/interp.h"
#include "util/pyfloat.h"

namespace ckpt::jinja {

// ------------------------------------------------------------------ tables
static const char* const kFilters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
    "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
    "wordwrap", "xmlattr"};
static const char* const kTests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false", "filter",
    "float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lessthan", "lower", "lt",
    "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined",
    "upper", "==", "!=", "<", "<=", ">", ">="};
// The globals, in the order install_globals() creates them.
static const char* const kGlobals[] = {"range", "dict", "namespace", "raise_exception", "strftime_now", "lipsum", "joiner", "cycler"};
static const char* const kLoopAttrs[] = {"index0", "index", "revindex", "revindex0", "first", "last", "length",
                                         "depth", "depth0", "previtem", "nextitem", "cycle", "changed"};
enum LoopAttr { LA_index0, LA_index, LA_revindex, LA_revindex0, LA_first, LA_last, LA_length, LA_depth, LA_depth0,
                LA_previtem, LA_nextitem, LA_cycle, LA_changed };

// The globals are stateless builtins, built once and shared by every render (by index, in
// kGlobals order).
static std::vector<std::pair<std::string, Value>>& shared_globals_() {
  static auto* g = [] {
    auto* v = new std::vector<std::pair<std::string, Value>>;
    Interp::install_globals(*v);
    return v;
  }();
  return *g;
}

int filter_id(std::string_view name) {
  for (size_t i = 0; i < std::size(kFilters); ++i)
    if (name == kFilters[i]) return int(i);
  return -1;
}
const char* filter_name(int id) { return kFilters[id]; }

int test_id(std::string_view name) {
  for (size_t i = 0; i < std::size(kTests); ++i)
    if (name == kTests[i]) return int(i);
  return -1;
}

int global_id(std::string_view name) {
  for (size_t i = 0; i < std::size(kGlobals); ++i)
    if (name == kGlobals[i]) return int(i);
  return -1;
}

uint32_t attr_info(std::string_view name) {
  static constexpr std::string_view str_m[] = {"upper", "lower", "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                      "replace", "title", "capitalize", "format", "find", "rfind", "index", "rindex", "count",
                                      "join", "splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower",
                                      "isnumeric", "isdecimal", "istitle", "removeprefix", "removesuffix", "center", "ljust",
                                      "rjust", "zfill", "partition", "rpartition", "swapcase", "casefold", "expandtabs", "encode",
                                      "format_map", "isidentifier", "isprintable", "isascii", "translate", "maketrans"};
  static constexpr std::string_view dict_m[] = {"items", "keys", "values", "get", "copy", "fromkeys",
                                       "update", "pop", "setdefault", "clear", "popitem"};
  static constexpr std::string_view list_m[] = {"index", "count", "copy", "append", "extend", "insert", "remove", "sort", "reverse", "pop", "clear"};
  static constexpr std::string_view tuple_m[] = {"index", "count"};
  static constexpr std::string_view list_mut[] = {"append", "extend", "insert", "remove", "sort", "reverse", "pop", "clear"};
  static constexpr std::string_view dict_mut[] = {"update", "pop", "setdefault", "clear", "popitem"};
  auto in = [&](auto& tbl) {
    for (auto m : tbl)
      if (name == m) return true;
    return false;
  };
  uint32_t r = 0;
  if (in(str_m)) r |= kStrMethod;
  if (in(dict_m)) r |= kDictMethod;
  if (in(list_m)) r |= kListMethod;
  if (in(tuple_m)) r |= kTupleMethod;
  if (in(list_mut)) r |= kListMutating;
  if (in(dict_mut)) r |= kDictMutating;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') r |= kDunder;
  for (size_t i = 0; i < std::size(kLoopAttrs); ++i)
    if (name == kLoopAttrs[i]) r |= uint32_t(i + 1) << kLoopShift;
  return r;
}

// ------------------------------------------------------------------ helpers
[[noreturn]] void Interp::fail(std::string type, std::string msg) {
  throw JError{std::move(type), std::move(msg), cur_pos_, false};
}

void Interp::steps_exceeded() {
  fail("BudgetExceeded", "render stopped: more than " + std::to_string(opts_.max_steps) + " evaluation steps (template bomb or runaway loop)");
}

void Interp::size_exceeded(uint64_t n) {
  if (n > opts_.max_output)
    fail("BudgetExceeded", "render stopped: a string of " + std::to_string(n) + " bytes exceeds the output budget of " + std::to_string(opts_.max_output) + " bytes");
  fail("BudgetExceeded", "render stopped: more than " + std::to_string(8 * opts_.max_output) + " bytes of strings built");
}

void Interp::output_exceeded() {
  if (built_ > 8 * opts_.max_output) fail("BudgetExceeded", "render stopped: too much output built");
  fail("BudgetExceeded", "render stopped: output exceeds the budget of " + std::to_string(opts_.max_output) + " bytes");
}

[[noreturn]] void Interp::undefined_error(const Value& u) {
  switch (u.uk) {
    case UK::Plain: break;
    case UK::Hint: {
      auto* uo = static_cast<UndefObj*>(u.o);
      if (uo->security) fail("SecurityError", uo->hint);
      fail("UndefinedError", uo->hint);
    }
    case UK::Name: fail("UndefinedError", "'" + u.undef_text() + "' is undefined");
    case UK::Param: fail("UndefinedError", "parameter '" + u.undef_text() + "' was not provided");
    case UK::Attr:
      fail("UndefinedError", "'" + type_name(K(u.owner & 0x7F), (u.owner & 0x80) != 0) + " object' has no attribute '" +
                                 u.undef_text() + "'");
  }
  fail("UndefinedError", "value is undefined");
}

Value Interp::str_val(std::string s, bool markup) {
  check_size(s.size());
  return Value::str(std::move(s), markup);
}

static std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string Interp::html_escape_str(const std::string& s) { return html_escape(s); }

std::string Interp::capture(const Body& body, Frame* f) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body, f);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Value Interp::escape(const Value& v) {
  if (v.k == K::Str && v.markup) return v;
  return str_val(html_escape(py_str(v)), true);
}

std::vector<Value> Interp::iterate(const Value& v) {
  switch (v.k) {
    case K::List:
    case K::Tuple: return v.items();
    case K::Gen: {
      auto* l = static_cast<ListObj*>(v.o);
      if (l->consumed) return {};
      l->consumed = true;
      return l->v;
    }
    case K::Dict: {
      std::vector<Value> out;
      out.reserve(v.d().v.size());
      for (auto& kv : v.d().v) out.push_back(kv.first);
      return out;
    }
    case K::Str: {
      std::vector<Value> out;
      const std::string& s = v.s();
      for (size_t i = 0; i < s.size();) {
        size_t len = 1;
        unsigned char c = s[i];
        if (c >= 0xF0) len = 4; else if (c >= 0xE0) len = 3; else if (c >= 0xC0) len = 2;
        out.push_back(Value::str(s.substr(i, len), v.markup));
        i += len;
      }
      return out;
    }
    case K::Undef:
      if (v.is_security()) undefined_error(v);
      return {};
    default: fail("TypeError", "'" + type_name(v) + "' object is not iterable");
  }
}

int64_t Interp::length(const Value& v) {
  switch (v.k) {
    case K::Str: return int64_t(cp_len(v.s()));
    case K::List:
    case K::Tuple: return int64_t(v.items().size());
    case K::Dict: return int64_t(v.d().v.size());
    case K::Undef: return 0;
    default: fail("TypeError", "object of type '" + type_name(v) + "' has no len()");
  }
}

// Python's `<` for sortable values; throws TypeError otherwise.
bool Interp::less(const Value& a, const Value& b) {
  if (a.is_undef()) undefined_error(a);
  if (b.is_undef()) undefined_error(b);
  if (a.is_num() && b.is_num()) {
    if (a.k != K::Float && b.k != K::Float) return (a.k == K::Int ? a.i : a.b) < (b.k == K::Int ? b.i : b.b);
    double x = a.k == K::Float ? a.f : a.k == K::Int ? double(a.i) : a.b;
    double y = b.k == K::Float ? b.f : b.k == K::Int ? double(b.i) : b.b;
    return x < y;
  }
  if (a.k == K::Str && b.k == K::Str) return a.s() < b.s();
  if ((a.k == K::List && b.k == K::List) || (a.k == K::Tuple && b.k == K::Tuple)) {
    auto& x = a.items();
    auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("TypeError", "'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool Interp::contains(const Value& container, const Value& item) {
  switch (container.k) {
    case K::Str:
      if (item.k != K::Str) fail("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
      return container.s().find(item.s()) != std::string::npos;
    case K::List:
    case K::Tuple:
      for (auto& e : container.items())
        if (py_equal(e, item)) return true;
      return false;
    case K::Gen: {
      for (auto& e : iterate(container))
        if (py_equal(e, item)) return true;
      return false;
    }
    case K::Dict: {
      if (item.k == K::List || item.k == K::Dict) fail("TypeError", "unhashable type: '" + type_name(item) + "'");
      if (item.k == K::Str) {  // 'key' in message: without converting a context dict
        Value out;
        int r = static_cast<DictObj*>(container.o)->get_str(item.s(), out);
        if (r >= 0) return r == 1;
      }
      return container.d().find(item) != nullptr;
    }
    case K::Undef:
      if (container.is_security()) undefined_error(container);
      return false;
    default: fail("TypeError", "argument of type '" + type_name(container) + "' is not iterable");
  }
}

std::string Interp::to_output(const Value& v) {
  switch (v.k) {
    case K::Str: return v.s();
    case K::Undef: return {};
    default:
      switch (opts_.runtime) {
        case Runtime::hf_jinja: return hf_str(v);
        case Runtime::llama_cpp: return llama_str(v);
        case Runtime::swift_jinja: return swift_str(v);
        default: return py_str(v);
      }
  }
}

// How llama.cpp's common/jinja prints a value (recorded: micro print_none, print_list_mixed,
// print_tuple, print_string_with_quote, print_split, print_dict, print_nested_unicode,
// print_namespace, and_or_values, dict_get_default): None as nothing, a list or tuple as
// its items printed one after another, a dict or namespace as nothing; True stays "True".
std::string Interp::llama_str(const Value& v) {
  switch (v.k) {
    case K::Str: return v.s();
    case K::None:
    case K::Undef:
    case K::Dict:
    case K::NS: return {};
    case K::List:
    case K::Tuple: {
      std::string s;
      for (auto& x : v.items()) {
        s += llama_str(x);
        check_size(s.size());
      }
      return s;
    }
    default: return py_str(v);
  }
}

// How swift-jinja prints a value (template-dialects.md §1b row "printing {{ true }}, {{ none }},
// {{ {'a':'b'} }}", Value.swift:494-517): true/false, None as "", a dict as {'a': b} (quoted
// keys, values printed as themselves). Lists have no row and keep Python's spelling.
std::string Interp::swift_str(const Value& v) {
  switch (v.k) {
    case K::Str: return v.s();
    case K::Bool: return v.b ? "true" : "false";
    case K::None:
    case K::Undef: return {};
    case K::Dict: {
      std::string s = "{";
      bool first = true;
      for (auto& [k, x] : v.d().v) {
        if (!first) s += ", ";
        first = false;
        s += "'" + py_str(k) + "': " + swift_str(x);
        check_size(s.size());
      }
      return s + "}";
    }
    default: return py_str(v);
  }
}

// How @huggingface/jinja prints a value: booleans in JavaScript spelling, None as nothing,
// lists and dicts as JSON with ", " and ": " (its toString of ArrayValue/ObjectValue).
std::string Interp::hf_str(const Value& v) {
  switch (v.k) {
    case K::Bool: return v.b ? "true" : "false";
    case K::None:
    case K::Undef: return {};
    case K::List:
    case K::Tuple:
    case K::Dict: return tojson(v, Value::none(), false, Value::none(), false);
    default: return py_str(v);
  }
}

void Interp::emit_value(const Value& v) {
  if (v.k == K::Str) emit(v.s());
  else if (v.k != K::Undef) emit(to_output(v));
}

// ------------------------------------------------------------------ callables
struct Interp::Builtin : FuncObj {
  std::function<Value(Interp&, CallArgs&)> fn;
  Value call(Interp& in, CallArgs& a) override { return fn(in, a); }
};

struct MacroObj : FuncObj, CycLink {
  const MacroDef* def = nullptr;  // owned by the template
  FrameRef closure;
  MacroObj() { is_macro = true; }
  std::string func_name() const override { return def->name; }
  Value call(Interp& in, CallArgs& a) override { return in.call_macro(*this, a); }
  Obj* self() override { return this; }
  void drop_refs() override { closure.reset(); }
};

struct MethodObj : FuncObj {
  Value self;
  Value call(Interp& in, CallArgs& a) override { return in.call_method(self, name, a); }
};

Value Interp::make_builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn) {
  auto* b = new Builtin();
  b->name = std::move(name);
  b->fn = std::move(fn);
  return Value::owning(K::Func, b);
}

Value Interp::arg(CallArgs& a, size_t idx, std::string_view name, const Value& dflt) {
  if (idx < a.pos.size()) return a.pos[idx];
  if (const Value* v = a.get_kw(name)) return *v;
  return dflt;
}

static int64_t as_int(Interp& in, const Value& v, const char* what) {
  if (v.k == K::Int) return v.i;
  if (v.k == K::Bool) return v.b;
  if (v.k == K::Undef) in.undefined_error(v);
  in.fail("TypeError", std::string(what) + " must be an integer, not " + type_name(v));
}

Value Interp::call_macro(MacroObj& m, CallArgs& a, bool direct) {
  const MacroDef& d = *m.def;
  if (depth_ + 1 > opts_.max_depth)
    fail("BudgetExceeded", "render stopped: macro recursion deeper than " + std::to_string(opts_.max_depth) + " calls");
  FrameRef frame(new Frame());
  frame->parent = m.closure;
  size_t np = d.params.size();
  uint64_t bound_small = 0;
  std::vector<bool> bound_big(np > 64 ? np : 0, false);
  auto is_bound = [&](size_t i) { return np > 64 ? bool(bound_big[i]) : ((bound_small >> i) & 1) != 0; };
  auto set_bound = [&](size_t i) {
    if (np > 64) bound_big[i] = true;
    else bound_small |= uint64_t(1) << i;
  };
  frame->vars.reserve(np + 1);
  std::vector<Value> extra;
  for (size_t i = 0; i < a.pos.size(); ++i) {
    if (i < np) {
      frame->set(d.param_ids[i], a.pos[i]);
      set_bound(i);
    } else {
      extra.push_back(a.pos[i]);
    }
  }
  if (!extra.empty() && !d.catch_varargs)
    fail("TypeError", "macro '" + d.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  Value kwargs;
  if (d.catch_kwargs) kwargs = Value::dict();
  Value caller;
  bool have_caller = false;
  for (auto& [k, v] : a.kw) {
    bool found = false;
    for (size_t i = 0; i < np; ++i)
      if (d.params[i] == k) {
        if (is_bound(i)) fail("TypeError", "macro '" + d.name + "' got multiple values for argument '" + k + "'");
        frame->set(d.param_ids[i], v);
        set_bound(i);
        found = true;
      }
    if (found) continue;
    if (k == "caller" && d.caller) {
      caller = v;
      have_caller = true;
      continue;
    }
    if (!d.catch_kwargs) fail("TypeError", "macro '" + d.name + "' takes no keyword argument '" + k + "'");
    kwargs.d().set(Value::str(k), v);
  }
  size_t first_default = np - d.defaults.size();
  for (size_t i = 0; i < np; ++i) {
    if (is_bound(i)) continue;
    if (i >= first_default) {
      frame->set(d.param_ids[i], eval(d.defaults[i - first_default].get(), frame.get()));
    } else {
      frame->set(d.param_ids[i], Value::undef_param(d.param_strs[i]));
    }
  }
  if (d.catch_varargs) frame->set(kNameVarargs, Value::tuple(std::move(extra)));
  if (d.catch_kwargs) frame->set(kNameKwargs, kwargs);
  static const Value no_caller = Value::undef("No caller defined");
  if (d.caller) frame->set(kNameCaller, have_caller ? caller : no_caller.borrow());
  if (direct) {
    ++depth_;
    exec(d.body, frame.get());  // on an error the render fails: depth_ needs no repair
    --depth_;
    return Value();
  }
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  ++depth_;
  try {
    exec(d.body, frame.get());
  } catch (...) {
    out_ = saved;
    --depth_;
    throw;
  }
  out_ = saved;
  --depth_;
  return Value::str(std::move(buf));
}

Value Interp::call(const Value& fn, CallArgs& a) {
  if (fn.k == K::Func) return static_cast<FuncObj*>(fn.o)->call(*this, a);
  if (fn.k == K::Loop) return call_loop(fn, a);
  if (fn.k == K::Undef) undefined_error(fn);
  fail("TypeError", "'" + type_name(fn) + "' object is not callable");
}

// ------------------------------------------------------------------ attributes
static bool has_method(K k, uint32_t info) {
  switch (k) {
    case K::Str: return info & kStrMethod;
    case K::Dict: return info & kDictMethod;
    case K::List: return info & kListMethod;
    case K::Tuple: return info & kTupleMethod;
    default: return false;
  }
}
static bool is_mutating(K k, uint32_t info) {
  return (k == K::List && (info & kListMutating)) || (k == K::Dict && (info & kDictMutating));
}

Value Interp::getattr(const Value& obj, const std::string& name) { return getattr(obj, Value::str(name), kInfoUnknown); }

Value Interp::getattr(const Value& obj, const Value& namev, uint32_t info) {
  const std::string& name = namev.s();
  if (info == kInfoUnknown) info = attr_info(name);
  if (obj.k == K::Undef) undefined_error(obj);
  if (info & kDunder)
    return Value::undef("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
  if (obj.k == K::Dict && !(info & kDictMethod)) {
    Value out;
    int r = static_cast<DictObj*>(obj.o)->get_str(name, out);
    if (r == 1) return out;
    if (r < 0) return *obj.d().find_str(name);
    return Value::undef_attr(obj, namev);
  }
  if (obj.k == K::NS) {
    for (auto& [k, v] : static_cast<NSObj*>(obj.o)->attrs)
      if (str_eq(k, name)) return v;
    return Value::undef("'" + py_repr(obj) + "' has no attribute '" + name + "'");
  }
  if (obj.k == K::Loop) return loop_attr(obj, int(info >> kLoopShift) - 1, name);
  if (obj.k == K::Func) {
    auto* f = static_cast<FuncObj*>(obj.o);
    if (auto* c = dynamic_cast<CyclerLike*>(f)) {
      Value r;
      if (c->attr(*this, name, r, obj)) return r;
    }
    if (name == "name" && f->is_macro) return Value::str(static_cast<MacroObj*>(f)->def->name);
    return Value::undef("'function object' has no attribute '" + name + "'");
  }
  if (has_method(obj.k, info)) {
    if (is_mutating(obj.k, info))
      return Value::undef("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
    auto* m = new MethodObj();
    m->name = name;
    m->self = obj;
    return Value::owning(K::Func, m);
  }
  if ((obj.k == K::Int || obj.k == K::Bool) && (name == "real" || name == "numerator")) return Value::integer(obj.k == K::Int ? obj.i : obj.b);
  if (obj.k == K::Float && name == "real") return obj;
  return Value::undef_attr(obj, namev);
}

static bool slice_indices(int64_t len, const Value* start, const Value* stop, const Value* step, int64_t& b, int64_t& e, int64_t& st, Interp& in) {
  st = (step && !step->is_none()) ? as_int(in, *step, "slice step") : 1;
  if (st == 0) in.fail("ValueError", "slice step cannot be zero");
  auto norm = [&](const Value* v, int64_t dflt, bool is_start) -> int64_t {
    if (!v || v->is_none()) return dflt;
    int64_t x = as_int(in, *v, "slice indices");
    if (x < 0) {
      x += len;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= len) {
      x = st < 0 ? len - 1 : len;
    }
    return x;
  };
  b = norm(start, st < 0 ? len - 1 : 0, true);
  e = norm(stop, st < 0 ? -1 : len, false);
  return true;
}

Value Interp::getitem(const Value& obj, const Value& key, uint32_t info) {
  if (obj.k == K::Dict && key.k == K::Str) {  // the common case: message['role']
    Value out;
    int r = static_cast<DictObj*>(obj.o)->get_str(key.s(), out);
    if (r == 1) return out;
    if (r == 0) {
      // not a key: Python tries the attribute (a dict method), else the attribute error
      if (info == kInfoUnknown) info = attr_info(key.s());
      if (!(info & (kDictMethod | kDunder))) return Value::undef_attr(obj, key);
    }
  }
  if (obj.k == K::Undef) undefined_error(obj);
  if (key.is_security()) undefined_error(key);
  switch (obj.k) {
    case K::List:
    case K::Tuple:
    case K::Str:
      if (key.k == K::Int || key.k == K::Bool) {
        int64_t i = key.k == K::Int ? key.i : key.b;
        if (obj.k == K::Str) {
          const std::string& s = obj.s();
          bool ascii = true;
          for (unsigned char c : s)
            if (c >= 0x80) { ascii = false; break; }
          if (ascii) {
            int64_t n = int64_t(s.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) break;
            return Value::str(std::string(1, s[i]), obj.markup);
          }
          auto cps = decode_utf8(s);
          int64_t n = int64_t(cps.size());
          if (i < 0) i += n;
          if (i < 0 || i >= n) break;
          std::string out;
          append_utf8(out, cps[i]);
          return Value::str(out, obj.markup);
        }
        auto& it = obj.items();
        int64_t n = int64_t(it.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) break;
        return it[i];
      }
      break;
    case K::Dict: {
      if (key.k == K::List || key.k == K::Dict) break;
      if (const Value* v = obj.d().find(key)) return *v;
      break;
    }
    default: break;
  }
  if (key.k == K::Str) {
    Value v = getattr(obj, key, info);
    if (v.k == K::Undef && !v.is_security()) return Value::undef_attr(obj, key);
    return v;
  }
  return Value::undef("'" + type_name(obj) + " object' has no element " + py_repr(key));
}

Value Interp::slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  // jinja2 compiles slices to a plain Python subscript (no sandbox getitem fallback)
  if (obj.k == K::Undef) undefined_error(obj);
  if (obj.k == K::Dict) fail("TypeError", "unhashable type: 'slice'");
  if (obj.k != K::List && obj.k != K::Tuple && obj.k != K::Str) fail("TypeError", "'" + type_name(obj) + "' object is not subscriptable");
  int64_t b, e, st;
  if (obj.k == K::Str) {
    auto cps = decode_utf8(obj.s());
    slice_indices(int64_t(cps.size()), start, stop, step, b, e, st, *this);
    std::string out;
    if (st > 0) for (int64_t i = b; i < e; i += st) append_utf8(out, cps[i]);
    else for (int64_t i = b; i > e; i += st) append_utf8(out, cps[i]);
    return Value::str(std::move(out), obj.markup);
  }
  auto& it = obj.items();
  slice_indices(int64_t(it.size()), start, stop, step, b, e, st, *this);
  std::vector<Value> out;
  if (st > 0) for (int64_t i = b; i < e; i += st) out.push_back(it[i]);
  else for (int64_t i = b; i > e; i += st) out.push_back(it[i]);
  return obj.k == K::List ? Value::list(std::move(out)) : Value::tuple(std::move(out));
}

// ------------------------------------------------------------------ loop
Value Interp::loop_attr(const Value& loop, int attr, const std::string& name) {
  auto* l = static_cast<LoopObj*>(loop.o);
  int64_t n = int64_t(l->items->size());
  int64_t i = int64_t(l->index0);
  switch (attr) {
    case LA_index0: return Value::integer(i);
    case LA_index: return Value::integer(i + 1);
    case LA_revindex: return Value::integer(n - i);
    case LA_revindex0: return Value::integer(n - i - 1);
    case LA_first: return Value::boolean(i == 0);
    case LA_last: return Value::boolean(i == n - 1);
    case LA_length: return Value::integer(n);
    case LA_depth: return Value::integer(l->depth0 + 1);
    case LA_depth0: return Value::integer(l->depth0);
    case LA_previtem: return i > 0 ? (*l->items)[i - 1] : Value::undef("there is no previous item");
    case LA_nextitem: return i + 1 < n ? (*l->items)[i + 1] : Value::undef("there is no next item");
    case LA_cycle: {
      Value self = loop;
      return make_builtin("cycle", [self](Interp& in, CallArgs& a) -> Value {
        if (a.pos.empty()) in.fail("TypeError", "no items for cycling given");
        auto* lo = static_cast<LoopObj*>(self.o);
        return a.pos[lo->index0 % a.pos.size()];
      });
    }
    case LA_changed: {
      Value self = loop;
      return make_builtin("changed", [self](Interp& in, CallArgs& a) -> Value {
        auto* lo = static_cast<LoopObj*>(self.o);
        Value cur = Value::tuple(a.pos.vec());
        if (!lo->has_last_changed || !py_equal(cur, lo->last_changed)) {
          lo->has_last_changed = true;
          lo->last_changed = cur;
          return Value::boolean(true);
        }
        return Value::boolean(false);
      });
    }
    default: break;
  }
  return Value::undef("'LoopContext object' has no attribute '" + name + "'");
}

// ------------------------------------------------------------------ arithmetic
Value Interp::binop(const std::string& op, const Value& a, const Value& b) {
  if (a.k == K::Undef) undefined_error(a);
  // str % x is str.__mod__: an Undefined argument is formatted (str() gives ''), not raised
  if (a.k == K::Str && op.size() == 1 && op[0] == '%') return percent_format(a, b);
  if (b.k == K::Undef) undefined_error(b);
  auto type_err = [&]() {
    fail("TypeError", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
  };
  // operator code without string comparisons: + - * / % ~, F = //, P = **
  const char code = op.size() == 1 ? op[0] : (op[0] == '/' ? 'F' : 'P');
  bool ai = a.k == K::Int || a.k == K::Bool, bi = b.k == K::Int || b.k == K::Bool;
  int64_t x = a.k == K::Int ? a.i : a.k == K::Bool ? a.b : 0;
  int64_t y = b.k == K::Int ? b.i : b.k == K::Bool ? b.b : 0;
  auto overflow = [&]() { fail("OverflowError", "integer result of '" + op + "' exceeds 64 bits (ckpt's integer range)"); };
  if (a.is_num() && b.is_num()) {
    double fx = a.k == K::Float ? a.f : double(x), fy = b.k == K::Float ? b.f : double(y);
    bool ints = ai && bi;
    char c = op[0];
    int64_t r;
    if (code == '+') {
      if (ints) { if (__builtin_add_overflow(x, y, &r)) overflow(); return Value::integer(r); }
      return Value::flt(fx + fy);
    }
    if (code == '-') {
      if (ints) { if (__builtin_sub_overflow(x, y, &r)) overflow(); return Value::integer(r); }
      return Value::flt(fx - fy);
    }
    if (code == '*') {
      if (ints) { if (__builtin_mul_overflow(x, y, &r)) overflow(); return Value::integer(r); }
      return Value::flt(fx * fy);
    }
    if (code == '/') {
      if (fy == 0) fail("ZeroDivisionError", "division by zero");
      return Value::flt(fx / fy);
    }
    if (code == 'F' || code == '%') {
      if (fy == 0) fail("ZeroDivisionError", code == '%' ? "integer modulo by zero" : "integer division or modulo by zero");
      if (ints) {
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y, m = x % y;
        // JavaScript's % keeps the dividend's sign (-7 % 3 is -1); // floors in both.
        if (code == '%' && opts_.runtime == Runtime::hf_jinja) return Value::integer(m);
        // Swift's / and % truncate toward zero: -7 // 2 is -3, -7 % 3 is -1 (template-dialects.md
        // §1b rows "//" and "% on ints", Value.swift:332-351).
        if (opts_.runtime == Runtime::swift_jinja) return Value::integer(code == '%' ? m : q);
        if (m != 0 && ((m < 0) != (y < 0))) { --q; m += y; }
        return Value::integer(code == '%' ? m : q);
      }
      double m = std::fmod(fx, fy);
      if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
      if (code == '%') return Value::flt(m == 0 ? std::copysign(0.0, fy) : m);
      return Value::flt(std::floor((fx - m) / fy + 0.0));
    }
    if (code == 'P') {
      if (ints && y >= 0) {
        int64_t res = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if (e & 1) { if (__builtin_mul_overflow(res, base, &res)) overflow(); }
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow();
        }
        return Value::integer(res);
      }
      return Value::flt(std::pow(fx, fy));
    }
    (void)c;
    type_err();
  }
  if (code == '+') {
    if (a.k == K::Str && b.k == K::Str) {
      // llama.cpp has no Markup strings: `'x'|safe + '<b>'` is plain concatenation (recorded:
      // micro markup_safe_concat; probe llama.cpp/meetkai-functionary-medium-v3.1.jinja@tool_use,
      // where Python's tojson output after a |safe string is HTML-escaped and llama.cpp's is not).
      if ((a.markup || b.markup) && opts_.runtime != Runtime::llama_cpp) {
        std::string l = a.markup ? a.s() : html_escape(a.s());
        std::string rr = b.markup ? b.s() : html_escape(b.s());
        check_size(l.size() + rr.size());
        return Value::str(l + rr, true);
      }
      check_size(a.s().size() + b.s().size());
      std::string s;
      s.reserve(a.s().size() + b.s().size());
      s += a.s();
      s += b.s();
      return Value::str(std::move(s));
    }
    if ((a.k == K::List && b.k == K::List) || (a.k == K::Tuple && b.k == K::Tuple)) {
      std::vector<Value> v = a.items();
      check_size((v.size() + b.items().size()) * 8);
      v.insert(v.end(), b.items().begin(), b.items().end());
      return a.k == K::List ? Value::list(std::move(v)) : Value::tuple(std::move(v));
    }
    if (a.k == K::Str && b.k != K::Str) fail("TypeError", "can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.k == K::List) fail("TypeError", "can only concatenate list (not \"" + type_name(b) + "\") to list");
    type_err();
  }
  if (code == '*') {
    const Value* seq = nullptr;
    int64_t n = 0;
    if ((a.k == K::Str || a.k == K::List || a.k == K::Tuple) && bi) { seq = &a; n = y; }
    else if ((b.k == K::Str || b.k == K::List || b.k == K::Tuple) && ai) { seq = &b; n = x; }
    if (!seq) type_err();
    if (n < 0) n = 0;
    // Sizes saturate (a wrapped product must not slip under the budget), and an empty
    // operand never loops n times.
    if (seq->k == K::Str) {
      const std::string& unit = seq->s();
      if (unit.empty()) n = 0;
      uint64_t total;
      if (__builtin_mul_overflow(uint64_t(unit.size()), uint64_t(n), &total)) total = UINT64_MAX;
      check_size(total);
      std::string s;
      s.reserve(total);
      for (int64_t i = 0; i < n; ++i) s += unit;
      return Value::str(std::move(s), seq->markup);
    }
    const std::vector<Value>& unit = seq->items();
    if (unit.empty()) n = 0;
    uint64_t total;
    if (__builtin_mul_overflow(uint64_t(unit.size()), uint64_t(n), &total) || total > UINT64_MAX / 8) total = UINT64_MAX / 8;
    check_size(total * 8);
    std::vector<Value> v;
    v.reserve(total);
    for (int64_t i = 0; i < n; ++i) v.insert(v.end(), unit.begin(), unit.end());
    return seq->k == K::List ? Value::list(std::move(v)) : Value::tuple(std::move(v));
  }
    type_err();
  __builtin_unreachable();  // type_err() raises
}

// ------------------------------------------------------------------ printf-style `%`
// str % args as CPython's PyUnicode_Format does it (same argument state machine, flags,
// padding and errors); Markup % args escapes every argument as markupsafe's
// _MarkupEscapeHelper does. Every width, precision and result size is checked against the
// output budget before anything is built.
namespace {

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// ascii(): repr with every non-ASCII code point escaped.
std::string ascii_escape(const std::string& s) {
  std::string out;
  char buf[16];
  for (uint32_t cp : decode_utf8(s)) {
    if (cp < 0x80) out.push_back(char(cp));
    else {
      if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      else std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    }
  }
  return out;
}

// int(str) / float(str) for markupsafe's helper (Markup % '12' with %d): ASCII forms only.
std::string strip_py_ws(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || (s[b] >= 9 && s[b] <= 13))) ++b;
  while (e > b && (s[e - 1] == ' ' || (s[e - 1] >= 9 && s[e - 1] <= 13))) --e;
  return s.substr(b, e - b);
}
// Digits with single underscores between them; appends the digits to `out`.
bool take_digits(const std::string& s, size_t& i, std::string& out) {
  if (i >= s.size() || !std::isdigit((unsigned char)s[i])) return false;
  while (i < s.size()) {
    if (std::isdigit((unsigned char)s[i])) out.push_back(s[i++]);
    else if (s[i] == '_' && i + 1 < s.size() && std::isdigit((unsigned char)s[i + 1])) ++i;
    else break;
  }
  return true;
}
bool parse_py_int(const std::string& text, int64_t& v, bool& overflow) {
  std::string s = strip_py_ws(text), digits;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (!take_digits(s, i, digits) || i != s.size()) return false;
  overflow = false;
  uint64_t r = 0;
  for (char c : digits) {
    if (r > (uint64_t(INT64_MAX) + 1 - uint64_t(c - '0')) / 10) { overflow = true; return true; }
    r = r * 10 + uint64_t(c - '0');
  }
  if (!neg && r > uint64_t(INT64_MAX)) { overflow = true; return true; }
  v = neg ? int64_t(0 - r) : int64_t(r);
  return true;
}
bool parse_py_float(const std::string& text, double& d) {
  std::string s = strip_py_ws(text), clean;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
  std::string rest = s.substr(i);
  for (auto& c : rest) c = char(std::tolower((unsigned char)c));
  if (rest == "inf" || rest == "infinity" || rest == "nan") {
    d = rest == "nan" ? std::nan("") : HUGE_VAL;
    if (!clean.empty() && clean[0] == '-') d = -d;
    return true;
  }
  bool int_part = take_digits(s, i, clean);
  bool frac_part = false;
  if (i < s.size() && s[i] == '.') {
    clean.push_back(s[i++]);
    frac_part = take_digits(s, i, clean);
  }
  if (!int_part && !frac_part) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean.push_back(s[i++]);
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
    if (!take_digits(s, i, clean)) return false;
  }
  if (i != s.size()) return false;
  d = std::strtod(clean.c_str(), nullptr);
  return true;
}

}  // namespace

std::string Interp::format_double(double d, char conv, int64_t prec, bool alt, size_t already) {
  // at most 309 integer digits, a sign, a point and an exponent besides the precision
  uint64_t need = sat_add(already, uint64_t(prec) + 330);
  if (need > opts_.max_output || prec > INT32_MAX) size_exceeded(need);
  // A double's exact decimal value has at most 1074 fractional and 767 significant digits:
  // further digits are zeros, so a huge precision is formatted short and padded with zeros
  // (glibc would compute each of those digits, seconds for tens of millions).
  const char lc = char(std::tolower((unsigned char)conv));
  const int64_t cap = lc == 'f' ? 1100 : 800;
  const int p = int(std::min(prec, cap));
  char spec[8] = "%";
  size_t k = 1;
  if (alt) spec[k++] = '#';
  spec[k++] = '.';
  spec[k++] = '*';
  spec[k++] = conv;
  spec[k] = 0;
  int n = std::snprintf(nullptr, 0, spec, p, d);
  if (n < 0) fail("ValueError", "cannot format float");
  std::string r(size_t(n) + 1, '\0');
  std::snprintf(r.data(), r.size(), spec, p, d);
  r.resize(size_t(n));
  if (prec > cap && (lc != 'g' || alt)) {
    // %g without '#' strips trailing zeros: the short form is already the whole answer
    size_t at = lc == 'f' ? r.size() : r.find_first_of("eE");
    if (at == std::string::npos) at = r.size();
    r.insert(at, size_t(prec - cap), '0');
  }
  return r;
}

Value Interp::percent_format(const Value& fmt, const Value& args) {
  const bool esc = fmt.markup;  // Markup % args: every argument goes through the escape helper
  // CPython's argument state: a tuple is consumed item by item; anything else is the one
  // argument (arglen -1). A mapping (dict, list, Undefined; not str) also serves %(key)s and
  // excuses unused arguments. Markup wraps a lone non-mapping argument into a 1-tuple.
  const bool tuple = args.k == K::Tuple;
  const bool mapping = !tuple && (args.k == K::Dict || args.k == K::List || args.k == K::Undef);
  Value cur = args;  // what the state machine consumes (CPython's ctx->args)
  const std::vector<Value>* items = tuple ? &args.items() : nullptr;
  int64_t arglen = tuple ? int64_t(items->size()) : -1, argidx = tuple ? 0 : -2;
  std::vector<Value> one_items;
  if (esc && !tuple && !mapping) {
    one_items.push_back(args);
    items = &one_items;
    arglen = 1;
    argidx = 0;
  }
  const Value* dict = mapping ? &args : nullptr;
  auto next_arg = [&]() -> Value {
    if (argidx < arglen) {
      int64_t i = argidx++;
      return arglen < 0 ? cur : (*items)[size_t(i)];
    }
    fail("TypeError", "not enough arguments for format string");
  };
  const std::string& f = fmt.s();
  const uint64_t limit = opts_.max_output;
  std::string out;
  size_t i = 0;
  while (i < f.size()) {
    size_t pct = f.find('%', i);
    if (pct == std::string::npos) pct = f.size();
    out.append(f, i, pct - i);
    if (pct >= f.size()) break;
    i = pct + 1;
    if (i >= f.size()) fail("ValueError", "incomplete format");
    if (f[i] == '%') {  // only directly after '%': "%5%" is an error in Python 3
      out.push_back('%');
      ++i;
      continue;
    }
    if (f[i] == '(') {
      if (!dict) fail("TypeError", "format requires a mapping");
      size_t ks = ++i;
      int depth = 1;
      while (i < f.size() && depth > 0) {
        if (f[i] == ')') --depth;
        else if (f[i] == '(') ++depth;
        ++i;
      }
      if (depth > 0 || i >= f.size()) fail("ValueError", "incomplete format key");
      std::string key = f.substr(ks, i - 1 - ks);
      if (dict->k == K::Undef) undefined_error(*dict);
      if (dict->k != K::Dict) fail("TypeError", "list indices must be integers or slices, not str");
      const Value* v = dict->d().find_str(key);
      if (!v) fail("KeyError", py_repr(Value::str(key)));
      cur = *v;
      arglen = -1;
      argidx = -2;
    }
    bool ljust = false, plus = false, blank = false, alt = false, zero = false;
    for (; i < f.size(); ++i) {
      char c = f[i];
      if (c == '-') ljust = true;
      else if (c == '+') plus = true;
      else if (c == ' ') blank = true;
      else if (c == '#') alt = true;
      else if (c == '0') zero = true;
      else break;
    }
    int64_t width = -1, prec = -1;
    if (i < f.size() && f[i] == '*') {
      Value w = next_arg();
      if (esc || (w.k != K::Int && w.k != K::Bool)) fail("TypeError", "* wants int");  // Markup's helper is no int
      width = w.k == K::Int ? w.i : w.b;
      if (width < 0) {
        ljust = true;
        width = width == INT64_MIN ? INT64_MAX : -width;
      }
      ++i;
    } else if (i < f.size() && std::isdigit((unsigned char)f[i])) {
      width = 0;
      for (; i < f.size() && std::isdigit((unsigned char)f[i]); ++i) {
        int d = f[i] - '0';
        if (width > (INT64_MAX - d) / 10) fail("ValueError", "width too big");
        width = width * 10 + d;
      }
    }
    if (i < f.size() && f[i] == '.') {
      prec = 0;
      ++i;
      if (i < f.size() && f[i] == '*') {
        Value p = next_arg();
        if (esc || (p.k != K::Int && p.k != K::Bool)) fail("TypeError", "* wants int");
        prec = p.k == K::Int ? p.i : p.b;
        if (prec > INT32_MAX || prec < INT32_MIN) fail("OverflowError", "Python int too large to convert to C int");
        if (prec < 0) prec = 0;
        ++i;
      } else {
        for (; i < f.size() && std::isdigit((unsigned char)f[i]); ++i) {
          int d = f[i] - '0';
          if (prec > (INT32_MAX - d) / 10) fail("ValueError", "precision too big");
          prec = prec * 10 + d;
        }
      }
    }
    if (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) fail("ValueError", "incomplete format");
    const char c = f[i];
    const size_t conv_at = i++;
    Value v = next_arg();
    if (width > 0 && uint64_t(width) > limit) size_exceeded(uint64_t(width));
    std::string str;      // the converted argument (CPython's `str`)
    bool numeric = false;  // takes a sign and zero padding (CPython's arg->sign)
    switch (c) {
      case 's':
        if (esc) str = v.k == K::Str && v.markup ? v.s() : html_escape(py_str(v));
        else str = py_str(v);
        break;
      case 'r':
      case 'a':
        str = py_repr(v);
        if (esc) str = html_escape(str);
        if (c == 'a') str = ascii_escape(str);
        break;
      case 'd': case 'i': case 'u': case 'o': case 'x': case 'X': {
        numeric = true;
        const bool radix = c == 'o' || c == 'x' || c == 'X';
        auto wrong = [&]() {
          fail("TypeError", std::string("%") + c + " format: " + (radix ? "an integer" : "a real number") + " is required, not " + type_name(v));
        };
        if (v.k == K::Undef && !radix) undefined_error(v);  // Undefined.__int__ raises (it has no __index__)
        // The magnitude as decimal or radix digits; floats beyond 64 bits keep their exact value.
        bool neg = false;
        uint64_t mag = 0;
        std::string big;  // decimal digits of a float too large for 64 bits
        auto from_float = [&](double d) {
          if (std::isnan(d)) fail("ValueError", "cannot convert float NaN to integer");
          if (std::isinf(d)) fail("OverflowError", "cannot convert float infinity to integer");
          d = std::trunc(d);
          neg = d < 0;
          double a = std::fabs(d);
          if (a < 9223372036854775808.0) mag = uint64_t(a);
          else {
            char buf[400];
            std::snprintf(buf, sizeof buf, "%.0f", a);  // exact: a is an integer below 2^1024
            big = buf;
          }
        };
        auto from_int = [&](int64_t x) {
          neg = x < 0;
          mag = neg ? 0 - uint64_t(x) : uint64_t(x);
        };
        if (esc) {
          // int(helper) = int(obj); the helper has no __index__, so %o/%x/%X refuse it
          if (radix) wrong();
          if (v.k == K::Int || v.k == K::Bool) from_int(v.k == K::Int ? v.i : v.b);
          else if (v.k == K::Float) from_float(v.f);
          else if (v.k == K::Str) {
            int64_t x = 0;
            bool over = false;
            if (!parse_py_int(v.s(), x, over)) fail("ValueError", "invalid literal for int() with base 10: " + py_repr(v));
            if (over) fail("OverflowError", "integer exceeds 64 bits (ckpt's integer range)");
            from_int(x);
          } else wrong();
        } else if (v.k == K::Int || v.k == K::Bool) from_int(v.k == K::Int ? v.i : v.b);
        else if (v.k == K::Float && !radix) from_float(v.f);
        else wrong();
        std::string digits = big;
        if (big.empty()) {
          char buf[32];
          std::snprintf(buf, sizeof buf, c == 'o' ? "%llo" : radix ? "%llx" : "%llu", (unsigned long long)mag);
          digits = buf;
        }
        uint64_t zeros = prec > int64_t(digits.size()) ? uint64_t(prec) - digits.size() : 0;
        uint64_t need = sat_add(sat_add(out.size(), digits.size() + 3), zeros);
        if (need > limit) size_exceeded(need);
        if (neg) str.push_back('-');
        if (alt && radix) str += c == 'o' ? "0o" : "0x";
        str.append(size_t(zeros), '0');
        str += digits;
        if (c == 'X')
          for (auto& ch : str) ch = char(std::toupper((unsigned char)ch));
        break;
      }
      case 'e': case 'E': case 'f': case 'F': case 'g': case 'G': {
        numeric = true;
        double d = 0;
        if (v.k == K::Float) d = v.f;
        else if (v.k == K::Int || v.k == K::Bool) d = double(v.k == K::Int ? v.i : v.b);
        else if (v.k == K::Undef) undefined_error(v);  // Undefined.__float__ raises
        else if (esc && v.k == K::Str) {
          if (!parse_py_float(v.s(), d)) fail("ValueError", "could not convert string to float: " + py_repr(v));
        } else fail("TypeError", "must be real number, not " + type_name(v));
        const bool upper = c == 'E' || c == 'F' || c == 'G';
        if (std::isnan(d)) str = upper ? "NAN" : "nan";  // Python never signs a NaN
        else if (std::isinf(d)) str = std::string(d < 0 ? "-" : "") + (upper ? "INF" : "inf");
        else str = format_double(d, c, prec < 0 ? 6 : prec, alt, out.size());
        break;
      }
      case 'c': {
        uint32_t cp = 0;
        if (!esc && v.k == K::Str) {
          auto cps = decode_utf8(v.s());
          if (cps.size() != 1) fail("TypeError", "%c requires int or char");
          cp = cps[0];
        } else if (!esc && (v.k == K::Int || v.k == K::Bool)) {
          int64_t x = v.k == K::Int ? v.i : v.b;
          if (x < 0 || x > 0x10FFFF) fail("OverflowError", "%c arg not in range(0x110000)");
          cp = uint32_t(x);
        } else fail("TypeError", "%c requires int or char");
        append_utf8(str, cp);
        break;
      }
      default: {
        char buf[96];
        std::snprintf(buf, sizeof buf, "unsupported format character '%c' (0x%x) at index %zu", c, unsigned((unsigned char)c), cp_len(std::string_view(f).substr(0, conv_at)));
        fail("ValueError", buf);
      }
    }
    // CPython's unicode_format_arg_output: precision cuts s/r/a; a sign (from the text, or
    // '+'/' ' flags) and the 0x/0o prefix go before zero padding, after space padding; the
    // right side is always padded with spaces.
    size_t len = cp_len(str);  // code points to write (numeric text is ASCII)
    size_t end = str.size();   // byte end of what is written
    if ((c == 's' || c == 'r' || c == 'a') && prec >= 0 && len > uint64_t(prec)) {
      size_t b = 0;
      for (int64_t k = 0; k < prec; ++k) {
        unsigned char ch = str[b];
        b += ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
      }
      end = std::min(b, str.size());
      len = size_t(prec);
    }
    const char fill = numeric && zero ? '0' : ' ';
    size_t p0 = 0;
    char signchar = 0;
    if (numeric) {
      if (!str.empty() && (str[0] == '-' || str[0] == '+')) {
        signchar = str[0];
        p0 = 1;
        --len;
      } else if (plus) signchar = '+';
      else if (blank) signchar = ' ';
    }
    uint64_t w = width > int64_t(len) ? uint64_t(width) : len;
    uint64_t need = sat_add(sat_add(out.size(), end + 1), w > len ? w - len : 0);
    if (need > limit) size_exceeded(need);
    const bool prefix = alt && (c == 'x' || c == 'X' || c == 'o');
    if (signchar) {
      if (fill != ' ') out.push_back(signchar);
      if (w > len) --w;
    }
    if (prefix) {
      if (fill != ' ') {
        out.append(str, p0, 2);
        p0 += 2;
      }
      w = w >= 2 ? w - 2 : 0;
      len -= 2;
    }
    if (w > len && !ljust) {
      out.append(size_t(w - len), fill);
      w = len;
    }
    if (fill == ' ') {
      if (signchar) out.push_back(signchar);
      if (prefix) {
        out.append(str, p0, 2);
        p0 += 2;
      }
    }
    out.append(str, p0, end - p0);
    if (w > len) out.append(size_t(w - len), ' ');
  }
  if (argidx < arglen && !dict) fail("TypeError", "not all arguments converted during string formatting");
  return str_val(std::move(out), esc);
}

// ------------------------------------------------------------------ tests
enum TestId { T_boolean, T_callable, T_defined, T_divisibleby, T_eq, T_equalto, T_escaped, T_even, T_false, T_filter, T_float, T_ge, T_gt, T_greaterthan, T_in, T_integer, T_iterable, T_le, T_lessthan, T_lower, T_lt, T_mapping, T_ne, T_none, T_number, T_odd, T_sameas, T_sequence, T_string, T_test, T_true, T_undefined, T_upper, T_op_eq, T_op_ne, T_op_lt, T_op_le, T_op_gt, T_op_ge };

bool Interp::apply_test(int id, const std::string& name, const Value& v, CallArgs& a) {
  auto arg0 = [&]() -> const Value& {
    if (a.pos.empty()) fail("TypeError", "test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (id < 0) fail("TemplateRuntimeError", "No test named '" + name + "' found.");
  if (id == T_defined) return v.k != K::Undef;
  if (id == T_undefined) return v.k == K::Undef;
  if (id == T_none) return v.k == K::None;
  if (id == T_string) return v.k == K::Str;
  if (id == T_mapping) return v.k == K::Dict;
  if (id == T_number) return v.k == K::Int || v.k == K::Float || v.k == K::Bool;
  if (id == T_integer) return v.k == K::Int;
  if (id == T_float) return v.k == K::Float;
  if (id == T_boolean) return v.k == K::Bool;
  if (id == T_true) return v.k == K::Bool && v.b;
  if (id == T_false) return v.k == K::Bool && !v.b;
  if (id == T_iterable) return v.k == K::Str || v.k == K::List || v.k == K::Tuple || v.k == K::Dict || v.k == K::Gen || v.k == K::Undef;
  if (id == T_sequence) return v.k == K::Str || v.k == K::List || v.k == K::Tuple || v.k == K::Dict || v.k == K::Undef;
  if (id == T_callable) return v.k == K::Func;
  if (id == T_escaped) return v.k == K::Str && v.markup;
  if (id == T_eq || id == T_equalto || id == T_op_eq) return py_equal(v, arg0());
  if (id == T_ne || id == T_op_ne) return !py_equal(v, arg0());
  if (id == T_lt || id == T_lessthan || id == T_op_lt) return less(v, arg0());
  if (id == T_gt || id == T_greaterthan || id == T_op_gt) return less(arg0(), v);
  if (id == T_le || id == T_op_le) return !less(arg0(), v);
  if (id == T_ge || id == T_op_ge) return !less(v, arg0());
  if (id == T_in) return contains(arg0(), v);
  if (id == T_sameas) {
    const Value& o = arg0();
    if (v.k != o.k) return false;
    if (v.k == K::None || v.k == K::Undef) return v.k == K::None || v.same_undefined(o);
    if (v.k == K::Bool) return v.b == o.b;
    if (v.k == K::Int) return v.i == o.i && v.i >= -5 && v.i <= 256;
    return v.o && v.o == o.o;
  }
  if (id == T_divisibleby) {
    int64_t x = as_int(*this, v, "value"), y = as_int(*this, arg0(), "divisor");
    if (y == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
    return x % y == 0;
  }
  if (id == T_even || id == T_odd) {
    int64_t x = as_int(*this, v, "value");
    return (x % 2 == 0) == (id == T_even);
  }
  if (id == T_lower || id == T_upper) {
    if (v.k != K::Str) fail("AttributeError", "'" + type_name(v) + "' object has no attribute 'is" + std::string(kTests[id]) + "'");
    bool cased = false;
    for (unsigned char c : v.s()) {
      if (std::isupper(c)) { if (id == T_lower) return false; cased = true; }
      if (std::islower(c)) { if (id == T_upper) return false; cased = true; }
    }
    return cased;
  }
  if (id == T_filter) return v.k == K::Str && filter_id(v.s()) >= 0;
  if (id == T_test) return v.k == K::Str && test_id(v.s()) >= 0;
  fail("TemplateRuntimeError", "test '" + name + "' is not supported");
}

// ------------------------------------------------------------------ expressions
Value Interp::lookup_root(const Expr* e) {
  int id = e->id;
  // the root frame: variables set at the top level, else the render context (converted on
  // first use), else the globals
  uint8_t& st = pool_.ctx_state[size_t(id)];
  if (st == 0) {
    st = 1;
    if (ctx_json_.is_object()) {
      const std::string& name = parsed_.names[size_t(id)];
      for (auto& [k, j] : ctx_json_.as_object())
        if (str_eq(k, name)) {
          pool_.ctx_vals[size_t(id)] = from_json_pooled(j, pool_);
          st = 2;
          break;
        }
    }
  }
  if (st == 2) return pool_.ctx_vals[size_t(id)];
  int g = parsed_.name_global[size_t(id)];
  if (g >= 0) return shared_globals_()[size_t(g)].second.borrow();
  return Value::undef_name(e->cval);  // e->cval is borrowed (owned by the template)
}

Value Interp::eval_node(const Expr* e, Frame* f) {
  step();
  cur_pos_ = e->pos;
  switch (e->kind) {
    case EK::Const: return e->cval.borrow();  // AST constants outlive the render
    case EK::Name: return lookup(e, f);
    case EK::Attr: {
      Value obj = eval(e->a.get(), f);
      cur_pos_ = e->pos;
      return getattr(obj, e->cval, e->info);
    }
    case EK::Item: {
      if (e->b->kind == EK::Slice) return eval_slice(e, f);
      Value obj = eval(e->a.get(), f);
      Value key = eval(e->b.get(), f);
      cur_pos_ = e->pos;
      return getitem(obj, key, e->info);
    }
    case EK::Call: return eval_call(e, f);
    case EK::Filter: return eval_filter(e, f);
    case EK::Test: return eval_test(e, f);
    case EK::Not: return Value::boolean(!truthy(eval(e->a.get(), f)));
    case EK::And: {
      Value l = eval(e->a.get(), f);
      if (!truthy(l)) return l;
      return eval(e->b.get(), f);
    }
    case EK::Or: {
      Value l = eval(e->a.get(), f);
      if (truthy(l)) return l;
      return eval(e->b.get(), f);
    }
    case EK::Bin: {
      if (e->op == '+') return add_chain(e, f, false, true);
      Value l = eval(e->a.get(), f);
      Value r = eval(e->b.get(), f);
      cur_pos_ = e->pos;
      return binop(e->name, l, r);
    }
    case EK::Compare: return eval_compare(e, f);
    case EK::Cond: {
      if (truthy(eval(e->a.get(), f))) return eval(e->b.get(), f);
      if (e->c) return eval(e->c.get(), f);
      static const Value no_else = Value::undef("the inline if-expression evaluated to false and no else section was defined.");
      return no_else.borrow();
    }
    default: return eval_other(e, f);
  }
}

Value Interp::eval_name_key(const Expr* e, Frame* f) {
  const Expr* n = e->a.get();
  steps_ += e->kind == EK::Item ? 2 : 1;  // this node and the constant key; the name's below
  step();
  cur_pos_ = n->pos;
  Value obj = lookup(n, f);
  cur_pos_ = e->pos;
  const Value& key = e->kind == EK::Item ? e->b->cval : e->cval;
  if (e->kind == EK::Item) return getitem(obj, key, e->info);
  return getattr(obj, key, e->info);
}

Value Interp::eval_slice(const Expr* e, Frame* f) {
  Value obj = eval(e->a.get(), f);
  const Expr* s = e->b.get();
  Value a, b, c;
  if (s->a) a = eval(s->a.get(), f);
  if (s->b) b = eval(s->b.get(), f);
  if (s->c) c = eval(s->c.get(), f);
  cur_pos_ = e->pos;
  return slice(obj, s->a ? &a : nullptr, s->b ? &b : nullptr, s->c ? &c : nullptr);
}

Value Interp::eval_call(const Expr* e, Frame* f) {
  const Expr* callee = e->a.get();
  if (callee->kind == EK::Attr) {
    // obj.method(...): call the str/dict/list method without a bound-method object
    Value obj = eval(callee->a.get(), f);
    cur_pos_ = callee->pos;
    step();  // the attribute lookup's step
    if (has_method(obj.k, callee->info) && !is_mutating(obj.k, callee->info) && !(callee->info & kDunder)) {
      CallArgs args = eval_args(e, f);
      cur_pos_ = e->pos;
      return call_method(obj, callee->name, args);
    }
    Value fn = getattr(obj, callee->cval, callee->info);
    CallArgs args = eval_args(e, f);
    cur_pos_ = e->pos;
    return call(fn, args);
  }
  Value fn = eval(callee, f);
  CallArgs args = eval_args(e, f);
  cur_pos_ = e->pos;
  return call(fn, args);
}

Value Interp::eval_filter(const Expr* e, Frame* f) {
  Value v = e->a ? eval(e->a.get(), f) : Value();
  CallArgs args = eval_args(e, f);
  cur_pos_ = e->pos;
  if (e->id < 0) fail("TemplateRuntimeError", "No filter named '" + e->name + "' found.");
  return apply_filter(e->id, v, args, f);
}

Value Interp::eval_test(const Expr* e, Frame* f) {
  Value v = eval(e->a.get(), f);
  CallArgs args = eval_args(e, f);
  cur_pos_ = e->pos;
  bool r = apply_test(e->id, e->name, v, args);  // id < 0: unknown test, raises here
  return Value::boolean(e->negated ? !r : r);
}

Value Interp::eval_compare(const Expr* e, Frame* f) {
  Value l = eval(e->a.get(), f);
  for (size_t i = 0; i < e->ops.size(); ++i) {
    Value r = eval(e->kids[i].get(), f);
    cur_pos_ = e->pos;
    const std::string& op = e->ops[i];
    const char c0 = op[0];
    const bool two = op.size() == 2;
    bool ok;
    if (c0 == '=') ok = (l.k == K::Str && r.k == K::Str) ? str_eq(l.s(), r.s()) : py_equal(l, r);
    else if (c0 == '!') ok = !((l.k == K::Str && r.k == K::Str) ? str_eq(l.s(), r.s()) : py_equal(l, r));
    else if (c0 == '<') ok = two ? !less(r, l) : less(l, r);
    else if (c0 == '>') ok = two ? !less(l, r) : less(r, l);
    else if (c0 == 'i') ok = contains(r, l);
    else ok = !contains(r, l);
    if (!ok) return Value::boolean(false);
    l = std::move(r);
  }
  return Value::boolean(true);
}

Value Interp::eval_other(const Expr* e, Frame* f) {
  switch (e->kind) {
    case EK::Slice: fail("TemplateRuntimeError", "slice outside of a subscript");
    case EK::Neg:
    case EK::Pos: {
      Value v = eval(e->a.get(), f);
      cur_pos_ = e->pos;
      if (v.k == K::Undef) undefined_error(v);
      if (v.k == K::Int || v.k == K::Bool) {
        int64_t x = v.k == K::Int ? v.i : v.b;
        if (e->kind == EK::Pos) return Value::integer(x);
        if (x == INT64_MIN) fail("OverflowError", "integer overflow");
        return Value::integer(-x);
      }
      if (v.k == K::Float) return Value::flt(e->kind == EK::Neg ? -v.f : v.f);
      fail("TypeError", std::string("bad operand type for unary ") + (e->kind == EK::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case EK::List:
    case EK::Tuple: {
      std::vector<Value> items;
      items.reserve(e->kids.size());
      for (auto& k : e->kids) items.push_back(eval(k.get(), f));
      return e->kind == EK::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case EK::Dict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e->kids.size(); i += 2) {
        Value k = eval(e->kids[i].get(), f);
        Value v = eval(e->kids[i + 1].get(), f);
        if (k.k == K::List || k.k == K::Dict) { cur_pos_ = e->kids[i]->pos; fail("TypeError", "unhashable type: '" + type_name(k) + "'"); }
        d.d().set(k, std::move(v));
      }
      return d;
    }
    case EK::Concat: {
      std::string s;
      for (auto& k : e->kids) {
        Value v = eval(k.get(), f);
        if (v.is_security()) undefined_error(v);
        if (v.k == K::Str) s += v.s();
        // `~ none` adds nothing in llama.cpp (recorded: micro concat_tilde) and swift-jinja
        // (template-dialects.md §1b row "~", Value.swift:248-259).
        else if (v.k == K::None && (opts_.runtime == Runtime::llama_cpp || opts_.runtime == Runtime::swift_jinja)) {}
        else if (v.k != K::Undef) s += py_str(v);
        cur_pos_ = e->pos;
        check_size(s.size());
      }
      return Value::str(std::move(s));
    }
    default: break;
  }
  fail("TemplateRuntimeError", "unknown expression");
}

// a + b + c + ... (the left spine of '+' nodes): while the operands are plain strings they
// are joined once at the end (or, when `direct`, written to the output piece by piece)
// instead of building every intermediate string. Evaluation order, errors, steps and the size
// accounting are those of evaluating the nodes one by one. `stepped`: the outermost node's
// step was already taken.
Value Interp::add_chain(const Expr* e, Frame* f, bool direct, bool stepped) {
  const Expr* spine[32];
  size_t n = 0;
  const Expr* x = e;
  while (x->kind == EK::Bin && x->op == '+' && n < 32) {
    spine[n++] = x;
    x = x->a.get();
  }
  // spine[n-1] is the innermost '+': its left operand is x
  for (size_t i = stepped ? 1 : 0; i < n; ++i) step();  // the '+' nodes, evaluated before their operands
  SmallVec<Value, 8> parts;
  uint64_t total = 0;
  Value acc;
  cur_pos_ = spine[n - 1]->pos;
  Value first = eval(x, f);
  bool plain = first.k == K::Str && !first.markup;
  if (plain) {
    total = first.s().size();
    parts.push_back(std::move(first));
  } else {
    acc = std::move(first);
  }
  for (size_t i = n; i-- > 0;) {
    const Expr* node = spine[i];
    Value r = eval(node->b.get(), f);
    cur_pos_ = node->pos;
    if (plain && r.k == K::Str && !r.markup) {
      total += r.s().size();
      check_size(total);
      parts.push_back(std::move(r));
      continue;
    }
    if (plain) {
      // materialize what was deferred, then continue as one node at a time
      plain = false;
      if (parts.size() == 1) acc = std::move(parts[0]);
      else {
        std::string s;
        s.reserve(total);
        for (auto& p : parts) s += p.s();
        acc = Value::str(std::move(s));
      }
      parts.clear();
    }
    acc = binop(node->name, acc, r);
  }
  if (direct) {
    if (plain) {
      for (auto& p : parts) emit(p.s());
    } else {
      cur_pos_ = e->pos;
      emit_value(acc);
    }
    return Value();
  }
  if (!plain) return acc;
  std::string s;
  s.reserve(total);
  for (auto& p : parts) s += p.s();
  return Value::str(std::move(s));
}

// `{{ a ~ b ~ c }}` and `{{ a + b + c }}` with plain strings: the pieces go to the output
// without building the joined string. Evaluation order, errors and the size accounting are
// those of eval().
void Interp::output(const Expr* e, Frame* f) {
  if (e->kind == EK::Concat) {
    step();
    uint64_t total = 0;
    for (auto& k : e->kids) {
      Value v = eval(k.get(), f);
      if (v.is_security()) undefined_error(v);
      cur_pos_ = e->pos;
      if (v.k == K::Str) {
        total += v.s().size();
        check_size(total);
        emit(v.s());
      } else if (v.k == K::None && (opts_.runtime == Runtime::llama_cpp || opts_.runtime == Runtime::swift_jinja)) {
        check_size(total);  // `~ none` adds nothing there (see EK::Concat in eval)
      } else if (v.k != K::Undef) {
        std::string s = py_str(v);
        total += s.size();
        check_size(total);
        emit(s);
      } else {
        check_size(total);
      }
    }
    return;
  }
  if (e->kind == EK::Bin && e->op == '+') {
    add_chain(e, f, true, false);
    return;
  }
  if (e->kind == EK::Call && e->a->kind == EK::Name) {
    // {{ macro(...) }}: the macro writes straight into the output
    step();
    cur_pos_ = e->pos;
    Value fn = eval(e->a.get(), f);
    CallArgs args = eval_args(e, f);
    cur_pos_ = e->pos;
    if (fn.k == K::Func && static_cast<FuncObj*>(fn.o)->is_macro) {
      call_macro(*static_cast<MacroObj*>(static_cast<FuncObj*>(fn.o)), args, true);
      return;
    }
    emit_value(call(fn, args));
    return;
  }
  Value v = eval(e, f);
  emit_value(v);
}

CallArgs Interp::eval_args(const Expr* e, Frame* f) {
  CallArgs a;
  a.pos.reserve(e->kids.size());
  for (auto& k : e->kids) a.pos.push_back(eval(k.get(), f));
  for (auto& [name, ex] : e->kwargs) a.kw.emplace_back(name, eval(ex.get(), f));
  if (e->dyn_args) {
    Value v = eval(e->dyn_args.get(), f);
    for (auto& x : iterate(v)) a.pos.push_back(x);
  }
  if (e->dyn_kwargs) {
    Value v = eval(e->dyn_kwargs.get(), f);
    if (v.k != K::Dict) fail("TypeError", "argument after ** must be a mapping");
    for (auto& [k, x] : v.d().v) a.kw.emplace_back(py_str(k), x);
  }
  return a;
}

// ------------------------------------------------------------------ statements
void Interp::assign(const Expr* target, const Value& v, Frame* f) {
  if (target->kind == EK::Name) {
    f->set(target->id, v);
    return;
  }
  if (target->kind == EK::Attr) {
    Value g = lookup(target->a.get(), f);
    if (g.k != K::NS) {
      cur_pos_ = target->pos;
      fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    }
    auto* o = static_cast<NSObj*>(g.o);
    for (auto& [k, val] : o->attrs)
      if (str_eq(k, target->name)) { val = v; return; }
    o->attrs.emplace_back(target->name, v);
    return;
  }
  // tuple unpacking
  std::vector<Value> items = iterate(v);
  if (items.size() != target->kids.size()) {
    cur_pos_ = target->pos;
    if (items.size() > target->kids.size()) fail("ValueError", "too many values to unpack (expected " + std::to_string(target->kids.size()) + ")");
    fail("ValueError", "not enough values to unpack (expected " + std::to_string(target->kids.size()) + ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) assign(target->kids[i].get(), items[i], f);
}

Interp::Flow Interp::exec(const Body& body, Frame* f) {
  for (auto& stp : body) {
    const Stmt* st = stp.get();
    step();
    cur_pos_ = st->pos;
    switch (st->kind) {
      case SK::Data:
        emit(st->text);
        if (!st->fragments.empty())
          for (auto& fr : st->fragments) fragments_hit_.push_back(fr);
        break;
      case SK::Output: output(st->expr.get(), f); break;
      case SK::If: {
        for (auto& [cond, b] : st->branches) {
          if (!cond || truthy(eval(cond.get(), f))) {
            Flow fl = exec(b, f);
            if (fl != Flow::Normal) return fl;
            break;
          }
        }
        break;
      }
      case SK::For: {
        Flow fl = exec_for(st, f);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case SK::Set: {
        Value v = eval(st->expr.get(), f);
        assign(st->target.get(), v, f);
        break;
      }
      case SK::SetBlock: {
        Value v = Value::str(capture(st->body, f));
        if (st->filter) v = apply_filter_chain(st->filter.get(), v, f);
        assign(st->target.get(), v, f);
        break;
      }
      case SK::Macro: {
        auto* m = track(new MacroObj());
        Value v = Value::owning(K::Func, m);
        m->def = st->macro.get();
        m->closure = FrameRef::retain(f);
        f->set(st->macro->name_id, v);
        break;
      }
      case SK::CallBlock: {
        auto* m = track(new MacroObj());
        Value cv = Value::owning(K::Func, m);
        m->def = st->macro.get();
        m->closure = FrameRef::retain(f);
        const Expr* ce = st->expr.get();
        Value fn = eval(ce->a.get(), f);
        CallArgs args = eval_args(ce, f);
        args.kw.emplace_back("caller", cv);
        cur_pos_ = st->pos;
        Value r = call(fn, args);
        if (r.k != K::Undef) emit(to_output(r));
        break;
      }
      case SK::FilterBlock: {
        Value v = apply_filter_chain(st->filter.get(), Value::str(capture(st->body, f)), f);
        emit(to_output(v));
        break;
      }
      case SK::Break: return Flow::Break;
      case SK::Continue: return Flow::Continue;
      case SK::Body: {
        Flow fl = exec(st->body, f);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case SK::With: {
        FrameRef inner(new Frame());
        inner->parent = FrameRef::retain(f);
        std::vector<Value> vals;
        for (auto& [t, ex] : st->with_vars) vals.push_back(eval(ex.get(), f));
        for (size_t i = 0; i < vals.size(); ++i) assign(st->with_vars[i].first.get(), vals[i], inner.get());
        Flow fl = exec(st->body, inner.get());
        if (fl != Flow::Normal) return fl;
        break;
      }
      case SK::Unsupported: fail("TypeError", "no loader for this environment specified ('" + st->text + "' needs one; chat templates are self-contained)");
    }
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec_for(const Stmt* st, Frame* f) {
  Value seq = eval(st->expr.get(), f);
  cur_pos_ = st->pos;
  return run_loop(st, seq, f, 0);
}

Interp::Flow Interp::run_loop(const Stmt* st, const Value& seq, Frame* f, uint32_t depth0) {
  if (depth0 > opts_.max_depth) fail("BudgetExceeded", "render stopped: recursive loop deeper than " + std::to_string(opts_.max_depth));
  std::vector<Value> owned;
  const std::vector<Value>* itp;
  if ((seq.k == K::List || seq.k == K::Tuple) && !st->test) itp = &seq.items();  // immutable in the sandbox
  else {
    owned = iterate(seq);
    itp = &owned;
  }
  FrameRef frame(new Frame());
  frame->parent = FrameRef::retain(f);
  // swift-jinja builds the loop object from the unfiltered list before testing the `if`
  // (template-dialects.md §1b row "{% for x in xs if cond %}", Interpreter.swift:319-337), so
  // loop.index/first/last/length count the items the filter drops.
  std::vector<Value> unfiltered;
  std::vector<bool> kept_at;
  const bool swift_filter = st->test && opts_.runtime == Runtime::swift_jinja && st->uses_loop && !st->recursive;
  if (st->test) {
    std::vector<Value>& items = owned;
    std::vector<Value> kept;
    for (auto& it : items) {
      assign(st->target.get(), it, frame.get());
      const bool keep = truthy(eval(st->test.get(), frame.get()));
      if (keep) kept.push_back(it);
      if (swift_filter) kept_at.push_back(keep);
    }
    if (swift_filter) unfiltered = items;
    items = std::move(kept);
  }
  const std::vector<Value>& items = *itp;
  if (items.empty()) {
    if (!st->else_body.empty()) return exec(st->else_body, frame.get());
    return Flow::Normal;
  }
  if (!st->uses_loop && !st->recursive) {
    // the body never reads `loop`: no loop object
    for (size_t i = 0; i < items.size(); ++i) {
      cur_pos_ = st->pos;
      assign(st->target.get(), items[i], frame.get());
      Flow fl = exec(st->body, frame.get());
      if (fl == Flow::Break) break;
    }
    return Flow::Normal;
  }
  auto* lo = track(new LoopObj());
  Value loopv = Value::owning(K::Loop, lo);
  lo->items = const_cast<std::vector<Value>*>(swift_filter ? &unfiltered : &items);
  lo->depth0 = depth0;
  if (st->recursive) {
    lo->stmt = st;
    lo->outer = FrameRef::retain(f);
  }
  frame->set(kNameLoop, loopv);
  struct Reset {
    LoopObj* l;
    ~Reset() {
      static std::vector<Value> empty;
      l->items = &empty;  // a loop object that escapes its loop stays inert
      l->outer.reset();
    }
  } reset{lo};
  const std::vector<Value>& walked = swift_filter ? unfiltered : items;
  for (size_t i = 0; i < walked.size(); ++i) {
    if (swift_filter && !kept_at[i]) continue;
    lo->index0 = i;
    cur_pos_ = st->pos;
    assign(st->target.get(), walked[i], frame.get());
    Flow fl = exec(st->body, frame.get());
    if (fl == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interp::call_loop(const Value& loop, CallArgs& a) {
  auto* lo = static_cast<LoopObj*>(loop.o);
  if (!lo->stmt || !lo->outer) fail("TypeError", "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
  if (a.pos.size() != 1) fail("TypeError", "loop() takes exactly one argument");
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  FrameRef outer = lo->outer;
  try {
    run_loop(lo->stmt, a.pos[0], outer.get(), lo->depth0 + 1);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return Value::str(std::move(buf));
}

// ------------------------------------------------------------------ globals
struct CyclerObj : CyclerLike {
  std::vector<Value> items;
  size_t pos = 0;
  Value call(Interp& in, CallArgs&) override { in.fail("TypeError", "'Cycler' object is not callable"); }
  bool attr(Interp& in, const std::string& name, Value& out, const Value& self) override {
    if (name == "current") { out = items[pos]; return true; }
    if (name == "next") {
      out = in.make_builtin("next", [self](Interp&, CallArgs&) -> Value {
        auto* c = static_cast<CyclerObj*>(self.o);
        Value r = c->items[c->pos];
        c->pos = (c->pos + 1) % c->items.size();
        return r;
      });
      return true;
    }
    if (name == "reset") {
      out = in.make_builtin("reset", [self](Interp&, CallArgs&) -> Value {
        static_cast<CyclerObj*>(self.o)->pos = 0;
        return Value::none();
      });
      return true;
    }
    return false;
  }
};

void Interp::install_globals(std::vector<std::pair<std::string, Value>>& globals_) {
  globals_.emplace_back("range", make_builtin("range", [](Interp& in, CallArgs& a) -> Value {
    if (!a.kw.empty()) in.fail("TypeError", "range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) in.fail("TypeError", "range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) stop = as_int(in, a.pos[0], "range() argument");
    else {
      start = as_int(in, a.pos[0], "range() argument");
      stop = as_int(in, a.pos[1], "range() argument");
      if (a.pos.size() == 3) step = as_int(in, a.pos[2], "range() argument");
    }
    if (step == 0) in.fail("ValueError", "range() arg 3 must not be zero");
    __int128 n = 0;
    if (step > 0 && stop > start) n = ((__int128)stop - start + step - 1) / step;
    if (step < 0 && stop < start) n = ((__int128)start - stop - step - 1) / (-step);
    if (n > 100000) in.fail("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    std::vector<Value> out;
    out.reserve(size_t(n));
    for (int64_t i = 0; i < int64_t(n); ++i) out.push_back(Value::integer(start + i * step));
    return Value::list(std::move(out));
  }));
  globals_.emplace_back("dict", make_builtin("dict", [](Interp& in, CallArgs& a) -> Value {
    Value d = Value::dict();
    if (a.pos.size() > 1) in.fail("TypeError", "dict expected at most 1 argument");
    if (a.pos.size() == 1) {
      const Value& src = a.pos[0];
      if (src.k == K::Dict) d.d().v = src.d().v;
      else
        for (auto& item : in.iterate(src)) {
          auto kv = in.iterate(item);
          if (kv.size() != 2) in.fail("ValueError", "dictionary update sequence element has wrong length");
          d.d().set(kv[0], kv[1]);
        }
    }
    for (auto& [k, v] : a.kw) d.d().set(Value::str(k), v);
    return d;
  }));
  globals_.emplace_back("namespace", make_builtin("namespace", [](Interp& in, CallArgs& a) -> Value {
    auto* ns = in.track(new NSObj());
    Value v = Value::owning(K::NS, ns);
    for (auto& p : a.pos) {
      if (p.k != K::Dict) in.fail("TypeError", "namespace() positional argument must be a mapping");
      for (auto& [k, x] : p.d().v) ns->attrs.emplace_back(py_str(k), x);
    }
    for (auto& [k, x] : a.kw) {
      bool set = false;
      for (auto& [nk, nv] : ns->attrs)
        if (nk == k) { nv = x; set = true; }
      if (!set) ns->attrs.emplace_back(k, x);
    }
    return v;
  }));
  globals_.emplace_back("raise_exception", make_builtin("raise_exception", [](Interp& in, CallArgs& a) -> Value {
    std::string msg = a.pos.empty() ? "" : py_str(a.pos[0]);
    in.fail("TemplateError", msg);
  }));
  globals_.emplace_back("strftime_now", make_builtin("strftime_now", [](Interp& in, CallArgs& a) -> Value {
    if (a.pos.size() != 1 || a.pos[0].k != K::Str) in.fail("TypeError", "strftime_now() takes one string argument");
    std::time_t t = in.opts_.now ? *in.opts_.now : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    const std::string& fmt = a.pos[0].s();
    if (fmt.empty()) return Value::str("");
    // the same buffer size either way (strftime gives nothing when the text does not fit)
    const size_t cap = 256 + fmt.size() * 8;
    if (cap <= 1024) {
      char buf[1024];
      size_t n = std::strftime(buf, cap, fmt.c_str(), &tm);
      return in.str_val(std::string(buf, n));
    }
    std::string buf(cap, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    buf.resize(n);
    return in.str_val(std::move(buf));
  }));
  globals_.emplace_back("lipsum", make_builtin("lipsum", [](Interp& in, CallArgs&) -> Value {
    in.fail("TemplateRuntimeError", "lipsum() produces random text and is not supported by ckpt");
  }));
  globals_.emplace_back("joiner", make_builtin("joiner", [](Interp& in, CallArgs& a) -> Value {
    Value sep = a.pos.empty() ? (a.get_kw("sep") ? *a.get_kw("sep") : Value::str(", ")) : a.pos[0];
    auto used = std::make_shared<bool>(false);
    return in.make_builtin("joiner", [sep, used](Interp&, CallArgs&) -> Value {
      if (!*used) { *used = true; return Value::str(""); }
      return sep;
    });
  }));
  globals_.emplace_back("cycler", make_builtin("cycler", [](Interp& in, CallArgs& a) -> Value {
    if (a.pos.empty()) in.fail("RuntimeError", "at least one item has to be provided");
    auto* c = new CyclerObj();
    Value v = Value::owning(K::Func, c);
    c->name = "Cycler";
    c->items = a.pos.vec();
    return v;
  }));
}


// ------------------------------------------------------------------ entry
Interp::Interp(const Parsed& p, const Options& o, const json::Value& ctx, ContextPool& pool)
    : parsed_(p), opts_(o), ctx_json_(ctx), pool_(pool) {
  root_.root = &pool;
}

Interp::~Interp() {
  // the root frame's variables (they live in the reused pool)
  for (size_t i = 0; i < parsed_.names.size(); ++i) pool_.ctx_vals[i] = Value();
  // Whatever is still alive here is kept alive by reference cycles only: drop the
  // references of the objects that can close one.
  while (cyc_head_) {
    CycLink* c = cyc_head_;
    Obj* o = c->self();
    ++o->rc;
    c->unlink();
    c->drop_refs();
    if (--o->rc == 0) delete o;
  }
}

std::string Interp::run() {
  // rendered into the reused buffer, returned as a string of exactly the output's size
  out_ = &pool_.out;
  exec(parsed_.body, &root_);
  return std::string(pool_.out);
}

}  // namespace ckpt::jinja
