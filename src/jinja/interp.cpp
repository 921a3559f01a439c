// The evaluator: statements, expressions, the sandbox's attribute rules, filters, tests,
// Python string/dict/list methods, globals, and the step/output/depth budget.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>

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

// ------------------------------------------------------------------ helpers
[[noreturn]] void Interp::fail(std::string type, std::string msg) {
  throw JError{std::move(type), std::move(msg), cur_pos_, false};
}

void Interp::step() {
  if (++steps_ > opts_.max_steps)
    fail("BudgetExceeded", "render stopped: more than " + std::to_string(opts_.max_steps) + " evaluation steps (template bomb or runaway loop)");
}

void Interp::check_size(uint64_t n) {
  if (n > opts_.max_output)
    fail("BudgetExceeded", "render stopped: a string of " + std::to_string(n) + " bytes exceeds the output budget of " + std::to_string(opts_.max_output) + " bytes");
  built_ += n;
  if (built_ > 8 * opts_.max_output)
    fail("BudgetExceeded", "render stopped: more than " + std::to_string(8 * opts_.max_output) + " bytes of strings built");
}

void Interp::emit(std::string_view s) {
  if (out_->size() + s.size() > opts_.max_output)
    fail("BudgetExceeded", "render stopped: output exceeds the budget of " + std::to_string(opts_.max_output) + " bytes");
  built_ += s.size();
  if (built_ > 8 * opts_.max_output) fail("BudgetExceeded", "render stopped: too much output built");
  out_->append(s);
}

[[noreturn]] void Interp::undefined_error(const Value& u) {
  if (u.o) {
    auto* uo = static_cast<UndefObj*>(u.o.get());
    if (uo->security) fail("SecurityError", uo->hint);
    if (uo->hint.empty() && !uo->attr.empty()) fail("UndefinedError", "'" + uo->owner_type + " object' has no attribute '" + uo->attr + "'");
    fail("UndefinedError", uo->hint);
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

std::string Interp::capture(const Body& body, std::shared_ptr<Frame>& f) {
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
      auto* l = static_cast<ListObj*>(v.o.get());
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
      if (v.o && static_cast<UndefObj*>(v.o.get())->security) undefined_error(v);
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
    case K::Dict:
      if (item.k == K::List || item.k == K::Dict) fail("TypeError", "unhashable type: '" + type_name(item) + "'");
      return container.d().find(item) != nullptr;
    case K::Undef:
      if (container.o && static_cast<UndefObj*>(container.o.get())->security) undefined_error(container);
      return false;
    default: fail("TypeError", "argument of type '" + type_name(container) + "' is not iterable");
  }
}

std::string Interp::to_output(const Value& v) {
  switch (v.k) {
    case K::Str: return v.s();
    case K::Undef: return {};
    default: return py_str(v);
  }
}

// ------------------------------------------------------------------ frames
Value* Frame::find(std::string_view name) {
  for (Frame* f = this; f; f = f->parent.get())
    for (auto& [k, v] : f->vars)
      if (k == name) return &v;
  return nullptr;
}
void Frame::set(std::string_view name, Value v) {
  for (auto& [k, val] : vars)
    if (k == name) { val = std::move(v); return; }
  vars.emplace_back(name, std::move(v));
}

// ------------------------------------------------------------------ callables
struct Interp::Builtin : FuncObj {
  std::function<Value(Interp&, CallArgs&)> fn;
  Value call(Interp& in, CallArgs& a) override { return fn(in, a); }
};

struct MacroObj : FuncObj {
  std::shared_ptr<MacroDef> def;
  std::shared_ptr<Frame> closure;
  Value call(Interp& in, CallArgs& a) override { return in.call_macro(*this, a); }
};

struct MethodObj : FuncObj {
  Value self;
  Value call(Interp& in, CallArgs& a) override { return in.call_method(self, name, a); }
};

Value Interp::make_builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn) {
  auto b = std::make_shared<Builtin>();
  b->name = std::move(name);
  b->fn = std::move(fn);
  Value v;
  v.k = K::Func;
  v.o = std::move(b);
  return v;
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

Value Interp::call_macro(MacroObj& m, CallArgs& a) {
  const MacroDef& d = *m.def;
  if (depth_ + 1 > opts_.max_depth)
    fail("BudgetExceeded", "render stopped: macro recursion deeper than " + std::to_string(opts_.max_depth) + " calls");
  auto frame = std::make_shared<Frame>();
  frame->parent = m.closure;
  size_t np = d.params.size();
  std::vector<bool> bound(np, false);
  std::vector<Value> extra;
  for (size_t i = 0; i < a.pos.size(); ++i) {
    if (i < np) {
      frame->set(d.params[i], a.pos[i]);
      bound[i] = true;
    } else {
      extra.push_back(a.pos[i]);
    }
  }
  if (!extra.empty() && !d.catch_varargs)
    fail("TypeError", "macro '" + d.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  Value kwargs = Value::dict();
  Value caller;
  bool have_caller = false;
  for (auto& [k, v] : a.kw) {
    bool found = false;
    for (size_t i = 0; i < np; ++i)
      if (d.params[i] == k) {
        if (bound[i]) fail("TypeError", "macro '" + d.name + "' got multiple values for argument '" + k + "'");
        frame->set(d.params[i], v);
        bound[i] = true;
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
    if (bound[i]) continue;
    if (i >= first_default) {
      std::shared_ptr<Frame> f = frame;
      frame->set(d.params[i], eval(d.defaults[i - first_default].get(), f));
    } else {
      frame->set(d.params[i], Value::undef("parameter '" + d.params[i] + "' was not provided"));
    }
  }
  if (d.catch_varargs) frame->set("varargs", Value::tuple(std::move(extra)));
  if (d.catch_kwargs) frame->set("kwargs", kwargs);
  if (d.caller) frame->set("caller", have_caller ? caller : Value::undef("No caller defined"));
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  ++depth_;
  try {
    exec(d.body, frame);
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
  if (fn.k == K::Func) return static_cast<FuncObj*>(fn.o.get())->call(*this, a);
  if (fn.k == K::Loop) return call_loop(fn, a);
  if (fn.k == K::Undef) undefined_error(fn);
  fail("TypeError", "'" + type_name(fn) + "' object is not callable");
}

// ------------------------------------------------------------------ attributes
static bool is_mutating(K k, std::string_view name) {
  static constexpr std::string_view list_mut[] = {"append", "extend", "insert", "remove", "sort", "reverse", "pop", "clear"};
  static constexpr std::string_view dict_mut[] = {"update", "pop", "setdefault", "clear", "popitem"};
  if (k == K::List) {
    for (auto m : list_mut)
      if (name == m) return true;
  } else if (k == K::Dict) {
    for (auto m : dict_mut)
      if (name == m) return true;
  }
  return false;
}

static bool has_method(const Value& obj, std::string_view name) {
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
  auto in = [&](auto& tbl) {
    for (auto m : tbl)
      if (name == m) return true;
    return false;
  };
  switch (obj.k) {
    case K::Str: return in(str_m);
    case K::Dict: return in(dict_m);
    case K::List: return in(list_m);
    case K::Tuple: return in(tuple_m);
    default: return false;
  }
}

Value Interp::getattr(const Value& obj, const std::string& name) {
  if (obj.k == K::Undef) undefined_error(obj);
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_')
    return Value::undef("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
  if (obj.k == K::NS) {
    for (auto& [k, v] : static_cast<NSObj*>(obj.o.get())->attrs)
      if (k == name) return v;
    return Value::undef("'" + py_repr(obj) + "' has no attribute '" + name + "'");
  }
  if (obj.k == K::Loop) return loop_attr(obj, name);
  if (obj.k == K::Func) {
    auto* f = static_cast<FuncObj*>(obj.o.get());
    if (auto* c = dynamic_cast<CyclerLike*>(f)) {
      Value r;
      if (c->attr(*this, name, r)) return r;
    }
    if (name == "name" && dynamic_cast<MacroObj*>(f)) return Value::str(static_cast<MacroObj*>(f)->def->name);
    return Value::undef("'function object' has no attribute '" + name + "'");
  }
  if (has_method(obj, name)) {
    if (is_mutating(obj.k, name))
      return Value::undef("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
    auto m = std::make_shared<MethodObj>();
    m->name = name;
    m->self = obj;
    Value v;
    v.k = K::Func;
    v.o = std::move(m);
    return v;
  }
  if ((obj.k == K::Int || obj.k == K::Bool) && (name == "real" || name == "numerator")) return Value::integer(obj.k == K::Int ? obj.i : obj.b);
  if (obj.k == K::Float && name == "real") return obj;
  if (obj.k == K::Dict) {
    if (const Value* v = obj.d().find_str(name)) return *v;
  }
  return Value::undef_attr(obj, name);
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

Value Interp::getitem(const Value& obj, const Value& key) {
  if (obj.k == K::Undef) undefined_error(obj);
  if (key.k == K::Undef && key.o && static_cast<UndefObj*>(key.o.get())->security) undefined_error(key);
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
    Value v = getattr(obj, key.s());
    if (v.k == K::Undef && (!v.o || !static_cast<UndefObj*>(v.o.get())->security)) return Value::undef_attr(obj, key.s());
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
Value Interp::loop_attr(const Value& loop, const std::string& name) {
  auto* l = static_cast<LoopObj*>(loop.o.get());
  int64_t n = int64_t(l->items->size());
  int64_t i = int64_t(l->index0);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(l->depth0 + 1);
  if (name == "depth0") return Value::integer(l->depth0);
  if (name == "previtem") return i > 0 ? (*l->items)[i - 1] : Value::undef("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? (*l->items)[i + 1] : Value::undef("there is no next item");
  if (name == "cycle") {
    Value self = loop;
    return make_builtin("cycle", [self](Interp& in, CallArgs& a) -> Value {
      if (a.pos.empty()) in.fail("TypeError", "no items for cycling given");
      auto* lo = static_cast<LoopObj*>(self.o.get());
      return a.pos[lo->index0 % a.pos.size()];
    });
  }
  if (name == "changed") {
    Value self = loop;
    return make_builtin("changed", [self](Interp& in, CallArgs& a) -> Value {
      auto* lo = static_cast<LoopObj*>(self.o.get());
      Value cur = Value::tuple(a.pos);
      if (!lo->has_last_changed || !py_equal(cur, lo->last_changed)) {
        lo->has_last_changed = true;
        lo->last_changed = cur;
        return Value::boolean(true);
      }
      return Value::boolean(false);
    });
  }
  return Value::undef("'LoopContext object' has no attribute '" + name + "'");
}

// ------------------------------------------------------------------ arithmetic
Value Interp::binop(const std::string& op, const Value& a, const Value& b) {
  if (a.k == K::Undef) undefined_error(a);
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
      if (a.markup || b.markup) {
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
    if (seq->k == K::Str) {
      uint64_t total = uint64_t(seq->s().size()) * uint64_t(n);
      if (n && total / uint64_t(n) != seq->s().size()) total = UINT64_MAX;
      check_size(total);
      std::string s;
      s.reserve(total);
      for (int64_t i = 0; i < n; ++i) s += seq->s();
      return Value::str(std::move(s), seq->markup);
    }
    uint64_t total = uint64_t(seq->items().size()) * uint64_t(n);
    check_size(total * 8);
    std::vector<Value> v;
    for (int64_t i = 0; i < n; ++i) v.insert(v.end(), seq->items().begin(), seq->items().end());
    return seq->k == K::List ? Value::list(std::move(v)) : Value::tuple(std::move(v));
  }
  if (code == '%' && a.k == K::Str) return percent_format(a, b);
  type_err();
}

static std::string fmt_float_fixed(double v, int prec) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

Value Interp::percent_format(const Value& fmt, const Value& args) {
  std::vector<Value> list;
  const Value* dict = nullptr;
  if (args.k == K::Tuple) list = args.items();
  else if (args.k == K::Dict) dict = &args;
  else list.push_back(args);
  const std::string& f = fmt.s();
  std::string out;
  size_t ai = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') { out.push_back(f[i]); continue; }
    if (++i >= f.size()) fail("ValueError", "incomplete format");
    const Value* src = nullptr;
    if (f[i] == '(' && dict) {
      size_t e = f.find(')', i);
      if (e == std::string::npos) fail("ValueError", "incomplete format key");
      src = dict->d().find_str(f.substr(i + 1, e - i - 1));
      if (!src) fail("KeyError", f.substr(i + 1, e - i - 1));
      i = e + 1;
    }
    std::string flags;
    while (i < f.size() && std::strchr("-+ 0#", f[i]) && f[i]) flags.push_back(f[i++]);
    int width = 0, prec = -1;
    while (i < f.size() && std::isdigit((unsigned char)f[i])) width = width * 10 + (f[i++] - '0');
    if (i < f.size() && f[i] == '.') {
      prec = 0;
      ++i;
      while (i < f.size() && std::isdigit((unsigned char)f[i])) prec = prec * 10 + (f[i++] - '0');
    }
    if (i >= f.size()) fail("ValueError", "incomplete format");
    char c = f[i];
    if (c == '%') { out.push_back('%'); continue; }
    if (!src) {
      if (dict) src = dict;
      else {
        if (ai >= list.size()) fail("TypeError", "not enough arguments for format string");
        src = &list[ai++];
      }
    }
    std::string piece;
    switch (c) {
      case 's': piece = py_str(*src); break;
      case 'r': case 'a': piece = py_repr(*src); break;
      case 'd': case 'i': case 'u':
        if (!src->is_num()) fail("TypeError", "%" + std::string(1, c) + " format: a real number is required, not " + type_name(*src));
        piece = std::to_string(src->k == K::Float ? int64_t(src->f) : src->k == K::Int ? src->i : src->b);
        break;
      case 'f': case 'F':
        if (!src->is_num()) fail("TypeError", "must be real number, not " + type_name(*src));
        piece = fmt_float_fixed(src->k == K::Float ? src->f : double(src->k == K::Int ? src->i : src->b), prec < 0 ? 6 : prec);
        break;
      default: fail("ValueError", std::string("unsupported format character '") + c + "'");
    }
    if (prec >= 0 && c == 's' && int(cp_len(piece)) > prec) piece = py_str(slice(Value::str(piece), nullptr, &*std::make_unique<Value>(Value::integer(prec)), nullptr));
    int pad = width - int(cp_len(piece));
    if (pad > 0) {
      if (flags.find('-') != std::string::npos) piece += std::string(pad, ' ');
      else piece = std::string(pad, flags.find('0') != std::string::npos && c != 's' ? '0' : ' ') + piece;
    }
    out += piece;
  }
  if (!dict && ai < list.size()) fail("TypeError", "not all arguments converted during string formatting");
  return str_val(std::move(out), fmt.markup);
}

// ------------------------------------------------------------------ tests
bool Interp::apply_test(int id, const std::string& name, const Value& v, CallArgs& a) {
  auto arg0 = [&]() -> const Value& {
    if (a.pos.empty()) fail("TypeError", "test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (id < 0) fail("TemplateRuntimeError", "No test named '" + name + "' found.");
  std::string_view n = kTests[id];
  if (n == "defined") return v.k != K::Undef;
  if (n == "undefined") return v.k == K::Undef;
  if (n == "none") return v.k == K::None;
  if (n == "string") return v.k == K::Str;
  if (n == "mapping") return v.k == K::Dict;
  if (n == "number") return v.k == K::Int || v.k == K::Float || v.k == K::Bool;
  if (n == "integer") return v.k == K::Int;
  if (n == "float") return v.k == K::Float;
  if (n == "boolean") return v.k == K::Bool;
  if (n == "true") return v.k == K::Bool && v.b;
  if (n == "false") return v.k == K::Bool && !v.b;
  if (n == "iterable") return v.k == K::Str || v.k == K::List || v.k == K::Tuple || v.k == K::Dict || v.k == K::Gen || v.k == K::Undef;
  if (n == "sequence") return v.k == K::Str || v.k == K::List || v.k == K::Tuple || v.k == K::Dict || v.k == K::Undef;
  if (n == "callable") return v.k == K::Func;
  if (n == "escaped") return v.k == K::Str && v.markup;
  if (n == "eq" || n == "equalto" || n == "==") return py_equal(v, arg0());
  if (n == "ne" || n == "!=") return !py_equal(v, arg0());
  if (n == "lt" || n == "lessthan" || n == "<") return less(v, arg0());
  if (n == "gt" || n == "greaterthan" || n == ">") return less(arg0(), v);
  if (n == "le" || n == "<=") return !less(arg0(), v);
  if (n == "ge" || n == ">=") return !less(v, arg0());
  if (n == "in") return contains(arg0(), v);
  if (n == "sameas") {
    const Value& o = arg0();
    if (v.k != o.k) return false;
    if (v.k == K::None || v.k == K::Undef) return v.k == K::None || v.o == o.o;
    if (v.k == K::Bool) return v.b == o.b;
    if (v.k == K::Int) return v.i == o.i && v.i >= -5 && v.i <= 256;
    return v.o && v.o == o.o;
  }
  if (n == "divisibleby") {
    int64_t x = as_int(*this, v, "value"), y = as_int(*this, arg0(), "divisor");
    if (y == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
    return x % y == 0;
  }
  if (n == "even" || n == "odd") {
    int64_t x = as_int(*this, v, "value");
    return (x % 2 == 0) == (n == "even");
  }
  if (n == "lower" || n == "upper") {
    if (v.k != K::Str) fail("AttributeError", "'" + type_name(v) + "' object has no attribute 'is" + std::string(n) + "'");
    bool cased = false;
    for (unsigned char c : v.s()) {
      if (std::isupper(c)) { if (n == "lower") return false; cased = true; }
      if (std::islower(c)) { if (n == "upper") return false; cased = true; }
    }
    return cased;
  }
  if (n == "filter") return v.k == K::Str && filter_id(v.s()) >= 0;
  if (n == "test") return v.k == K::Str && test_id(v.s()) >= 0;
  fail("TemplateRuntimeError", "test '" + name + "' is not supported");
}

// ------------------------------------------------------------------ expressions
Value Interp::eval(const Expr* e, std::shared_ptr<Frame>& f) {
  step();
  cur_pos_ = e->pos;
  switch (e->kind) {
    case EK::Const: {
      // AST constants outlive the render: hand out a non-owning reference (no refcounting)
      Value v;
      v.k = e->cval.k;
      v.markup = e->cval.markup;
      v.i = e->cval.i;
      if (e->cval.o) v.o = std::shared_ptr<Obj>(std::shared_ptr<Obj>(), e->cval.o.get());
      return v;
    }
    case EK::Name: {
      if (Value* v = f->find(e->name)) return *v;
      if (const Value* g = global(e->name)) return *g;
      return Value::undef("'" + e->name + "' is undefined");
    }
    case EK::Attr: {
      Value obj = eval(e->a.get(), f);
      cur_pos_ = e->pos;
      return getattr(obj, e->name);
    }
    case EK::Item: {
      Value obj = eval(e->a.get(), f);
      if (e->b->kind == EK::Slice) {
        const Expr* s = e->b.get();
        Value a, b, c;
        if (s->a) a = eval(s->a.get(), f);
        if (s->b) b = eval(s->b.get(), f);
        if (s->c) c = eval(s->c.get(), f);
        cur_pos_ = e->pos;
        return slice(obj, s->a ? &a : nullptr, s->b ? &b : nullptr, s->c ? &c : nullptr);
      }
      Value key = eval(e->b.get(), f);
      cur_pos_ = e->pos;
      return getitem(obj, key);
    }
    case EK::Slice: fail("TemplateRuntimeError", "slice outside of a subscript");
    case EK::Call: {
      Value fn = eval(e->a.get(), f);
      CallArgs args = eval_args(e, f);
      cur_pos_ = e->pos;
      return call(fn, args);
    }
    case EK::Filter: {
      Value v = e->a ? eval(e->a.get(), f) : Value();
      CallArgs args = eval_args(e, f);
      cur_pos_ = e->pos;
      if (e->id < 0) fail("TemplateRuntimeError", "No filter named '" + e->name + "' found.");
      return apply_filter(e->id, v, args, f);
    }
    case EK::Test: {
      Value v = eval(e->a.get(), f);
      CallArgs args = eval_args(e, f);
      cur_pos_ = e->pos;
      bool r = apply_test(e->id, e->name, v, args);  // id < 0: unknown test, raises here
      return Value::boolean(e->negated ? !r : r);
    }
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
      Value l = eval(e->a.get(), f);
      Value r = eval(e->b.get(), f);
      cur_pos_ = e->pos;
      return binop(e->name, l, r);
    }
    case EK::Compare: {
      Value l = eval(e->a.get(), f);
      for (size_t i = 0; i < e->ops.size(); ++i) {
        Value r = eval(e->kids[i].get(), f);
        cur_pos_ = e->pos;
        const std::string& op = e->ops[i];
        const char c0 = op[0];
        const bool two = op.size() == 2;
        bool ok;
        if (c0 == '=') ok = py_equal(l, r);
        else if (c0 == '!') ok = !py_equal(l, r);
        else if (c0 == '<') ok = two ? !less(r, l) : less(l, r);
        else if (c0 == '>') ok = two ? !less(l, r) : less(r, l);
        else if (c0 == 'i') ok = contains(r, l);
        else ok = !contains(r, l);
        if (!ok) return Value::boolean(false);
        l = std::move(r);
      }
      return Value::boolean(true);
    }
    case EK::Cond: {
      if (truthy(eval(e->a.get(), f))) return eval(e->b.get(), f);
      if (e->c) return eval(e->c.get(), f);
      return Value::undef("the inline if-expression evaluated to false and no else section was defined.");
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
        if (v.k == K::Undef && v.o && static_cast<UndefObj*>(v.o.get())->security) undefined_error(v);
        s += to_output(v);
        cur_pos_ = e->pos;
        check_size(s.size());
      }
      return Value::str(std::move(s));
    }
  }
  fail("TemplateRuntimeError", "unknown expression");
}

CallArgs Interp::eval_args(const Expr* e, std::shared_ptr<Frame>& f) {
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
void Interp::assign(const Expr* target, const Value& v, std::shared_ptr<Frame>& f) {
  if (target->kind == EK::Name) {
    f->set(target->name, v);
    return;
  }
  if (target->kind == EK::Attr) {
    Value* ns = f->find(target->a->name);
    const Value* g = ns ? ns : global(target->a->name);
    if (!g || g->k != K::NS) {
      cur_pos_ = target->pos;
      fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    }
    auto* o = static_cast<NSObj*>(g->o.get());
    for (auto& [k, val] : o->attrs)
      if (k == target->name) { val = v; return; }
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

Interp::Flow Interp::exec(const Body& body, std::shared_ptr<Frame>& f) {
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
      case SK::Output: {
        Value v = eval(st->expr.get(), f);
        cur_pos_ = st->pos;
        if (v.k == K::Str) emit(v.s());
        else if (v.k != K::Undef) emit(py_str(v));
        break;
      }
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
        auto m = std::make_shared<MacroObj>();
        m->name = st->macro->name;
        m->def = st->macro;
        m->closure = f;
        cyclic_.push_back(m);
        Value v;
        v.k = K::Func;
        v.o = std::move(m);
        f->set(st->macro->name, v);
        break;
      }
      case SK::CallBlock: {
        auto m = std::make_shared<MacroObj>();
        m->name = "caller";
        m->def = st->macro;
        m->closure = f;
        cyclic_.push_back(m);
        Value cv;
        cv.k = K::Func;
        cv.o = std::move(m);
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
        auto inner = std::make_shared<Frame>();
        inner->parent = f;
        std::vector<Value> vals;
        for (auto& [t, ex] : st->with_vars) vals.push_back(eval(ex.get(), f));
        for (size_t i = 0; i < vals.size(); ++i) assign(st->with_vars[i].first.get(), vals[i], inner);
        Flow fl = exec(st->body, inner);
        if (fl != Flow::Normal) return fl;
        break;
      }
      case SK::Unsupported: fail("TypeError", "no loader for this environment specified ('" + st->text + "' needs one; chat templates are self-contained)");
    }
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec_for(const Stmt* st, std::shared_ptr<Frame>& f) {
  Value seq = eval(st->expr.get(), f);
  cur_pos_ = st->pos;
  return run_loop(st, seq, f, 0);
}

Interp::Flow Interp::run_loop(const Stmt* st, const Value& seq, std::shared_ptr<Frame>& f, uint32_t depth0) {
  if (depth0 > opts_.max_depth) fail("BudgetExceeded", "render stopped: recursive loop deeper than " + std::to_string(opts_.max_depth));
  std::vector<Value> owned;
  const std::vector<Value>* itp;
  if ((seq.k == K::List || seq.k == K::Tuple) && !st->test) itp = &seq.items();  // immutable in the sandbox
  else {
    owned = iterate(seq);
    itp = &owned;
  }
  auto frame = std::make_shared<Frame>();
  frame->parent = f;
  if (st->test) {
    std::vector<Value>& items = owned;
    std::vector<Value> kept;
    for (auto& it : items) {
      assign(st->target.get(), it, frame);
      if (truthy(eval(st->test.get(), frame))) kept.push_back(it);
    }
    items = std::move(kept);
  }
  const std::vector<Value>& items = *itp;
  if (items.empty()) {
    if (!st->else_body.empty()) return exec(st->else_body, frame);
    return Flow::Normal;
  }
  auto lo = std::make_shared<LoopObj>();
  cyclic_.push_back(lo);
  lo->items = const_cast<std::vector<Value>*>(&items);
  lo->depth0 = depth0;
  if (st->recursive) {
    lo->stmt = st;
    lo->outer = f;
  }
  Value loopv;
  loopv.k = K::Loop;
  loopv.o = lo;
  frame->set("loop", loopv);
  struct Reset {
    LoopObj* l;
    ~Reset() {
      static std::vector<Value> empty;
      l->items = &empty;  // a loop object that escapes its loop stays inert
      l->outer.reset();
    }
  } reset{lo.get()};
  for (size_t i = 0; i < items.size(); ++i) {
    lo->index0 = i;
    cur_pos_ = st->pos;
    assign(st->target.get(), items[i], frame);
    Flow fl = exec(st->body, frame);
    if (fl == Flow::Break) break;
  }
  return Flow::Normal;
}

Value Interp::call_loop(const Value& loop, CallArgs& a) {
  auto* lo = static_cast<LoopObj*>(loop.o.get());
  if (!lo->stmt || !lo->outer) fail("TypeError", "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
  if (a.pos.size() != 1) fail("TypeError", "loop() takes exactly one argument");
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  std::shared_ptr<Frame> outer = lo->outer;
  try {
    run_loop(lo->stmt, a.pos[0], outer, lo->depth0 + 1);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return Value::str(std::move(buf));
}

// ------------------------------------------------------------------ globals
// The globals are stateless builtins, built once and shared by every render.
static std::vector<std::pair<std::string, Value>>& shared_globals() {
  static auto* g = new std::vector<std::pair<std::string, Value>>;
  return *g;
}

const Value* Interp::global(const std::string& name) {
  for (auto& [k, v] : shared_globals())
    if (k == name) return &v;
  return nullptr;
}

struct CyclerObj : CyclerLike {
  std::vector<Value> items;
  size_t pos = 0;
  Value call(Interp& in, CallArgs&) override { in.fail("TypeError", "'Cycler' object is not callable"); }
  bool attr(Interp& in, const std::string& name, Value& out) override {
    if (name == "current") { out = items[pos]; return true; }
    if (name == "next") {
      auto self = std::static_pointer_cast<CyclerObj>(shared_from_this_());
      out = in.make_builtin("next", [self](Interp&, CallArgs&) -> Value {
        Value r = self->items[self->pos];
        self->pos = (self->pos + 1) % self->items.size();
        return r;
      });
      return true;
    }
    if (name == "reset") {
      auto self = std::static_pointer_cast<CyclerObj>(shared_from_this_());
      out = in.make_builtin("reset", [self](Interp&, CallArgs&) -> Value {
        self->pos = 0;
        return Value::none();
      });
      return true;
    }
    return false;
  }
};

void Interp::install_globals() {
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
    auto ns = std::make_shared<NSObj>();
    in.cyclic_.push_back(ns);
    for (auto& p : a.pos) {
      if (p.k != K::Dict) in.fail("TypeError", "namespace() positional argument must be a mapping");
      for (auto& [k, v] : p.d().v) ns->attrs.emplace_back(py_str(k), v);
    }
    for (auto& [k, v] : a.kw) {
      bool set = false;
      for (auto& [nk, nv] : ns->attrs)
        if (nk == k) { nv = v; set = true; }
      if (!set) ns->attrs.emplace_back(k, v);
    }
    Value v;
    v.k = K::NS;
    v.o = std::move(ns);
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
    std::string buf(256 + fmt.size() * 8, '\0');
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
    auto c = std::make_shared<CyclerObj>();
    c->name = "Cycler";
    c->items = a.pos;
    c->self_ = c;
    Value v;
    v.k = K::Func;
    v.o = c;
    return v;
  }));
}

// ------------------------------------------------------------------ entry
Interp::Interp(const Parsed& p, const Options& o) : parsed_(p), opts_(o) {
  static std::once_flag once;
  std::call_once(once, [this] {
    install_globals();
    shared_globals() = std::move(globals_);
  });
}

Interp::~Interp() {
  for (auto& w : cyclic_) {
    std::shared_ptr<Obj> o = w.lock();
    if (!o) continue;
    if (auto* m = dynamic_cast<MacroObj*>(o.get())) m->closure.reset();
    else if (auto* n = dynamic_cast<NSObj*>(o.get())) n->attrs.clear();
    else if (auto* l = dynamic_cast<LoopObj*>(o.get())) {
      l->last_changed = Value();
      l->outer.reset();
    }
  }
}

std::string Interp::run(const Value& ctx) {
  auto root = std::make_shared<Frame>();
  if (ctx.k == K::Dict) root->vars.reserve(ctx.d().v.size() + 8);
  if (ctx.k == K::Dict)
    for (auto& [k, v] : ctx.d().v)
      if (k.k == K::Str) root->vars.emplace_back(k.s(), v);
  std::string out;
  out.reserve(parsed_.source.size() + 1024);
  out_ = &out;
  exec(parsed_.body, root);
  // break reference cycles (macros capture the frame that holds them)
  root->vars.clear();
  return out;
}

}  // namespace ckpt::jinja
