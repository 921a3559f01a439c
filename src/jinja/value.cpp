// Python value semantics for the engine: construction, truthiness, equality, str()/repr(),
// UTF-8 code-point helpers and the JSON -> Value conversion of render contexts.
#include <cmath>
#include <cstring>

#include "jinja/engine.h"
#include "util/pyfloat.h"
#include "util/utf8.h"

namespace ckpt::jinja {

Value Value::str(std::string s, bool markup) {
  Value v = owning(K::Str, new StrObj(std::move(s)));
  v.markup = markup;
  return v;
}
Value Value::list(std::vector<Value> items) {
  auto* l = new ListObj();
  l->v = std::move(items);
  return owning(K::List, l);
}
Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.k = K::Tuple;
  return v;
}
Value Value::gen(std::vector<Value> items, const char* what) {
  Value v = list(std::move(items));
  v.k = K::Gen;
  static_cast<ListObj*>(v.o)->what = what;
  return v;
}
Value Value::dict() { return owning(K::Dict, new DictObj()); }
Value Value::undef(std::string hint, bool security) {
  Value v;
  if (!hint.empty() || security) {
    auto* u = new UndefObj();
    u->hint = std::move(hint);
    u->security = security;
    v = owning(K::Undef, u);
    v.uk = UK::Hint;
  }
  return v;
}

namespace {
thread_local uint32_t undef_serial = 0;

Value undef_with(UK uk, const Value& name) {
  Value v = name;  // shares the string object
  v.k = K::Undef;
  v.markup = false;
  v.uk = uk;
  uint32_t n = ++undef_serial;
  std::memcpy(v.serial, &n, 2);
  return v;
}
}  // namespace

Value Value::undef_name(const Value& name) { return undef_with(UK::Name, name); }
Value Value::undef_param(const Value& name) { return undef_with(UK::Param, name); }
Value Value::undef_attr(const Value& owner, const Value& attr) {
  Value v = undef_with(UK::Attr, attr);
  v.owner = uint8_t(uint8_t(owner.k) | (owner.k == K::Str && owner.markup ? 0x80 : 0));
  return v;
}
Value Value::undef_attr(const Value& owner, const std::string& attr) { return undef_attr(owner, Value::str(attr)); }

const Value* DictObj::find(const Value& key) const {
  if (src) const_cast<DictObj*>(this)->materialize();
  if (key.k == K::Str) return find_str(key.s());
  for (auto& [k, val] : v)
    if (py_equal(k, key)) return &val;
  return nullptr;
}
Value* DictObj::find(const Value& key) { return const_cast<Value*>(static_cast<const DictObj*>(this)->find(key)); }
int DictObj::get_str(std::string_view key, Value& out) {
  if (!src) {
    if (const Value* x = find_str(key)) {
      out = *x;
      return 1;
    }
    return 0;
  }
  for (auto& [k, j] : *src) {
    if (!str_eq(k, key)) continue;
    switch (j.type()) {
      case json::Type::string: out = Value::borrowed_str(&j.as_string()); return 1;
      case json::Type::null: out = Value::none(); return 1;
      case json::Type::boolean: out = Value::boolean(j.as_bool()); return 1;
      case json::Type::integer: out = Value::integer(j.as_int()); return 1;
      case json::Type::number: out = Value::flt(j.as_double()); return 1;
      case json::Type::big_int: out = Value::flt(j.as_double()); return 1;  // no big ints here: nearest float
      default: return -1;
    }
  }
  return 0;
}

const Value* DictObj::find_str(std::string_view key) const {
  if (src) const_cast<DictObj*>(this)->materialize();
  for (auto& [k, val] : v)
    if (k.k == K::Str && str_eq(k.s(), key)) return &val;
  return nullptr;
}
void DictObj::set(const Value& key, Value val) {
  if (Value* p = find(key)) *p = std::move(val);
  else v.emplace_back(key, std::move(val));
}

static double num(const Value& v) { return v.k == K::Float ? v.f : v.k == K::Int ? double(v.i) : double(v.b); }

bool py_equal(const Value& a, const Value& b) {
  if (a.is_num() && b.is_num()) {
    if (a.k != K::Float && b.k != K::Float) return (a.k == K::Int ? a.i : a.b) == (b.k == K::Int ? b.i : b.b);
    return num(a) == num(b);
  }
  if (a.k != b.k) {
    if ((a.k == K::List && b.k == K::Tuple) || (a.k == K::Tuple && b.k == K::List)) return false;
    return false;
  }
  switch (a.k) {
    case K::Undef:
    case K::None: return true;
    case K::Str: return str_eq(a.s(), b.s());
    case K::List:
    case K::Tuple: {
      auto& x = a.items();
      auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      auto& x = a.d().v;
      auto& y = b.d();
      if (x.size() != y.v.size()) return false;
      for (auto& [k, val] : x) {
        const Value* o = y.find(k);
        if (!o || !py_equal(val, *o)) return false;
      }
      return true;
    }
    default: return a.o == b.o;
  }
}

// ---------------------------------------------------------------- UTF-8
size_t cp_len(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    uint32_t cp;
    size_t len;
    if (c < 0x80) { cp = c; len = 1; }
    else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; len = 2; }
    else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; len = 3; }
    else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; len = 4; }
    else { out.push_back(0xFFFD); ++i; continue; }
    if (i + len > s.size()) { out.push_back(0xFFFD); break; }
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) { util::append_utf8(out, cp); }

bool py_isspace(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---------------------------------------------------------------- printing
static bool printable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp >= 0x80 && cp <= 0xA0) return false;
  if (cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xD800 && cp <= 0xF8FF) ||
      (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF)
    return false;
  return true;
}

static void repr_str(std::string& out, const std::string& s) {
  bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  out.push_back(q);
  static const char* hexd = "0123456789abcdef";
  for (uint32_t cp : decode_utf8(s)) {
    if (cp == (uint32_t)q || cp == '\\') { out.push_back('\\'); out.push_back(char(cp)); }
    else if (cp == '\n') out += "\\n";
    else if (cp == '\r') out += "\\r";
    else if (cp == '\t') out += "\\t";
    else if (!printable(cp)) {
      if (cp < 0x100) { out += "\\x"; out.push_back(hexd[cp >> 4]); out.push_back(hexd[cp & 15]); }
      else if (cp < 0x10000) { out += "\\u"; for (int sh = 12; sh >= 0; sh -= 4) out.push_back(hexd[(cp >> sh) & 15]); }
      else { out += "\\U"; for (int sh = 28; sh >= 0; sh -= 4) out.push_back(hexd[(cp >> sh) & 15]); }
    } else append_utf8(out, cp);
  }
  out.push_back(q);
}

static void repr_into(std::string& out, const Value& v, int depth);

static void str_into(std::string& out, const Value& v, int depth) {
  switch (v.k) {
    case K::Undef: return;
    case K::None: out += "None"; return;
    case K::Bool: out += v.b ? "True" : "False"; return;
    case K::Int: out += std::to_string(v.i); return;
    case K::Float: out += util::python_float_repr(v.f); return;
    case K::Str: out += v.s(); return;
    default: repr_into(out, v, depth);
  }
}

static void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > 600) { out += "..."; return; }
  switch (v.k) {
    case K::Str:
      if (v.markup) { out += "Markup("; repr_str(out, v.s()); out += ")"; }
      else repr_str(out, v.s());
      return;
    case K::List:
    case K::Tuple: {
      out.push_back(v.k == K::List ? '[' : '(');
      auto& it = v.items();
      for (size_t i = 0; i < it.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, it[i], depth + 1);
      }
      if (v.k == K::Tuple && it.size() == 1) out.push_back(',');
      out.push_back(v.k == K::List ? ']' : ')');
      return;
    }
    case K::Dict: {
      out.push_back('{');
      bool first = true;
      for (auto& [k, val] : v.d().v) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, val, depth + 1);
      }
      out.push_back('}');
      return;
    }
    case K::NS: {
      out += "<Namespace {";
      bool first = true;
      for (auto& [k, val] : static_cast<NSObj*>(v.o)->attrs) {
        if (!first) out += ", ";
        first = false;
        repr_str(out, k);
        out += ": ";
        repr_into(out, val, depth + 1);
      }
      out += "}>";
      return;
    }
    case K::Gen: out += std::string("<generator object ") + static_cast<ListObj*>(v.o)->what + " at 0x7f0000000000>"; return;
    case K::Func: out += "<function " + static_cast<FuncObj*>(v.o)->func_name() + ">"; return;
    case K::Loop: {
      auto* l = static_cast<LoopObj*>(v.o);
      out += "<LoopContext " + std::to_string(l->index0 + 1) + "/" + std::to_string(l->items->size()) + ">";
      return;
    }
    case K::Undef: out += "Undefined"; return;
    default: str_into(out, v, depth);
  }
}

std::string py_str(const Value& v) {
  if (v.k == K::Str) return v.s();
  std::string out;
  str_into(out, v, 0);
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string type_name(const Value& v) { return type_name(v.k, v.markup); }

std::string type_name(K k, bool markup) {
  switch (k) {
    case K::Undef: return "Undefined";
    case K::None: return "NoneType";
    case K::Bool: return "bool";
    case K::Int: return "int";
    case K::Float: return "float";
    case K::Str: return markup ? "Markup" : "str";
    case K::List: return "list";
    case K::Tuple: return "tuple";
    case K::Dict: return "dict";
    case K::Gen: return "generator";
    case K::Func: return "function";
    case K::NS: return "Namespace";
    case K::Loop: return "LoopContext";
  }
  return "object";
}

Value from_json(const json::Value& j) {
  switch (j.type()) {
    case json::Type::null: return Value::none();
    case json::Type::boolean: return Value::boolean(j.as_bool());
    case json::Type::integer: return Value::integer(j.as_int());
    case json::Type::number: return Value::flt(j.as_double());
    case json::Type::big_int: return Value::flt(j.as_double());  // the engine has no big ints: nearest float
    case json::Type::string: return Value::str(j.as_string());
    case json::Type::array: {
      std::vector<Value> items;
      items.reserve(j.as_array().size());
      for (auto& e : j.as_array()) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case json::Type::object: {
      Value d = Value::dict();
      auto& dv = d.d().v;
      dv.reserve(j.as_object().size());
      for (auto& [k, e] : j.as_object()) dv.emplace_back(Value::str(k), from_json(e));
      return d;
    }
  }
  return Value::none();
}

namespace {
Value pooled(const json::Value& j, ContextPool& pool) {
  switch (j.type()) {
    case json::Type::null: return Value::none();
    case json::Type::boolean: return Value::boolean(j.as_bool());
    case json::Type::integer: return Value::integer(j.as_int());
    case json::Type::number: return Value::flt(j.as_double());
    case json::Type::big_int: return Value::flt(j.as_double());  // the engine has no big ints: nearest float
    case json::Type::string: return Value::borrowed_str(&j.as_string());
    case json::Type::array: {
      ListObj* l = pool.lists.next();
      l->v.clear();
      l->v.reserve(j.as_array().size());
      for (auto& e : j.as_array()) l->v.push_back(pooled(e, pool));
      return Value::borrowed(K::List, l);
    }
    case json::Type::object: {
      DictObj* d = pool.dicts.next();
      d->src = &j.as_object();  // converted on first use as a whole (DictObj::materialize)
      d->pool = &pool;
      return Value::borrowed(K::Dict, d);
    }
  }
  return Value::none();
}
}  // namespace

void DictObj::materialize() {
  const json::Object* obj = src;
  src = nullptr;
  v.clear();
  v.reserve(obj->size());
  for (auto& [k, e] : *obj) v.emplace_back(Value::borrowed_str(&k), pooled(e, *pool));
}

void ContextPool::reset(size_t names) {
  lists.used = 0;
  dicts.used = 0;
  if (out.capacity() > (1u << 20)) std::string().swap(out);  // do not keep a huge buffer
  out.clear();
  ctx_state.assign(names, 0);
  if (ctx_vals.size() < names) ctx_vals.resize(names);
}

Value from_json_pooled(const json::Value& j, ContextPool& pool) { return pooled(j, pool); }

}  // namespace ckpt::jinja
