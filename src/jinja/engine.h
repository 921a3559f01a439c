// Private internals of ckpt's Jinja engine: the Python-like Value, the AST and the
// parser/interpreter entry points. Public API: include/ckpt/jinja.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckpt/jinja.h"

namespace ckpt::jinja {

// ---------------------------------------------------------------- values
enum class K : uint8_t { Undef, None, Bool, Int, Float, Str, List, Tuple, Dict, Gen, Func, NS, Loop };

struct Obj {
  virtual ~Obj() = default;
};

struct Value {
  K k = K::Undef;
  bool markup = false;  // Str only: a markupsafe.Markup
  union {
    bool b;
    int64_t i;
    double f;
  };
  std::shared_ptr<Obj> o;

  Value() : i(0) {}
  static Value none() { Value v; v.k = K::None; return v; }
  static Value boolean(bool x) { Value v; v.k = K::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.k = K::Int; v.i = x; return v; }
  static Value flt(double x) { Value v; v.k = K::Float; v.f = x; return v; }
  static Value str(std::string s, bool markup = false);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value gen(std::vector<Value> items, std::string what);
  static Value dict();
  static Value undef(std::string hint = {}, bool security = false);
  static Value undef_attr(const Value& owner, const std::string& attr);

  bool is_undef() const { return k == K::Undef; }
  bool is_none() const { return k == K::None; }
  bool is_str() const { return k == K::Str; }
  bool is_num() const { return k == K::Int || k == K::Float || k == K::Bool; }
  const std::string& s() const;
  std::vector<Value>& items() const;  // List / Tuple / Gen
  struct DictObj& d() const;
};

struct StrObj : Obj {
  std::string s;
  const std::string* ref = nullptr;  // borrowed from the render context (lives for the render)
  explicit StrObj(std::string x) : s(std::move(x)) {}
  explicit StrObj(const std::string* r) : ref(r) {}
  const std::string& get() const { return ref ? *ref : s; }
};

struct ListObj : Obj {
  std::vector<Value> v;
  bool consumed = false;  // generators only
  std::string what;       // generators only: the producing filter
};

struct DictObj : Obj {
  std::vector<std::pair<Value, Value>> v;
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find_str(std::string_view key) const;
  void set(const Value& key, Value val);
};

struct UndefObj : Obj {
  std::string hint;
  bool security = false;
  std::string attr, owner_type;  // missing attribute: the message is built only when it raises
};

struct NSObj : Obj {
  std::vector<std::pair<std::string, Value>> attrs;
};

struct Frame;
struct Stmt;

struct LoopObj : Obj {
  std::vector<Value>* items = nullptr;
  size_t index0 = 0;
  uint32_t depth0 = 0;
  bool has_last_changed = false;
  Value last_changed;
  const Stmt* stmt = nullptr;        // recursive loops: the for statement
  std::shared_ptr<Frame> outer;      // ... and the frame it runs in
};

class Interp;
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get_kw(std::string_view name) const {
    for (auto& [k, v] : kw)
      if (k == name) return &v;
    return nullptr;
  }
};

struct FuncObj : Obj {
  std::string name;
  virtual Value call(Interp& in, CallArgs& args) = 0;
};

// Python semantics helpers
bool truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
std::string py_str(const Value& v);   // str(v)
std::string py_repr(const Value& v);  // repr(v)
std::string type_name(const Value& v);
Value from_json(const json::Value& j);

// The render context converted without per-node allocations or reference counting: every
// object lives in this pool (strings borrowed from the JSON) for the duration of one render,
// and Values point into it through non-owning shared_ptrs.
struct ContextPool {
  std::vector<StrObj> strs;
  std::vector<ListObj> lists;
  std::vector<DictObj> dicts;
};
Value from_json_pooled(const json::Value& j, ContextPool& pool);

// UTF-8 helpers
size_t cp_len(std::string_view s);
std::vector<uint32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t cp);
bool py_isspace(uint32_t cp);

// Errors thrown inside the engine.
struct JError {
  std::string type;
  std::string message;
  uint32_t pos = UINT32_MAX;  // byte offset in the normalized source
  bool parse = false;
};

// ---------------------------------------------------------------- AST
enum class EK : uint8_t {
  Const, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Pos, Not, And, Or, Bin, Compare,
  Cond, List, Tuple, Dict, Concat
};

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  EK kind;
  uint32_t pos = 0;
  Value cval;                 // Const
  std::string name;           // Name / Attr / Filter / Test / Bin op
  int id = -1;                // filter/test id
  bool negated = false;       // Test
  std::vector<ExprP> kids;    // operands, args, items (Dict: k0,v0,k1,v1...)
  std::vector<std::pair<std::string, ExprP>> kwargs;
  ExprP dyn_args, dyn_kwargs;
  std::vector<std::string> ops;  // Compare operators
  ExprP a, b, c;                // node/operand(s); Slice: a=start b=stop c=step; Call/Filter/Test base: a
  Expr(EK k, uint32_t p) : kind(k), pos(p) {}
};

enum class SK : uint8_t {
  Data, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Body,
  With, Unsupported
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt>;
using Body = std::vector<StmtP>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprP> defaults;  // aligned to the last params
  Body body;
  bool catch_varargs = false, catch_kwargs = false, caller = false;
  uint32_t pos = 0;
};

struct Stmt {
  SK kind;
  uint32_t pos = 0;
  std::string text;                            // Data
  std::vector<std::pair<uint32_t, std::string>> fragments;  // Data: delimiter-like text
  ExprP expr;                                  // Output / If cond / For iter / Set value / Call
  ExprP target;                                // For / Set target (Name, Tuple of Names, NS attr)
  ExprP test;                                  // For ... if
  std::vector<std::pair<ExprP, Body>> branches;  // If: (cond, body)...; else has null cond
  Body body, else_body;
  ExprP filter;                                // SetBlock / FilterBlock: Filter chain with null base
  std::shared_ptr<MacroDef> macro;             // Macro / CallBlock (the caller)
  std::vector<std::pair<ExprP, ExprP>> with_vars;
  bool recursive = false;                      // For
  Stmt(SK k, uint32_t p) : kind(k), pos(p) {}
};

struct Parsed {
  std::string source;  // normalized text
  Body body;
  std::vector<std::string> names_read;  // every Name loaded anywhere
};

// Throws JError (parse=true) on failure.
std::unique_ptr<Parsed> parse_template(std::string_view text, const Options& opts);

std::string normalize_source(std::string_view text);
int filter_id(std::string_view name);  // -1 when unknown
int test_id(std::string_view name);

}  // namespace ckpt::jinja
