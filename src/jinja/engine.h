// Private internals of ckpt's Jinja engine: the Python-like Value, the AST and the
// parser/interpreter entry points. Public API: include/ckpt/jinja.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ckpt/jinja.h"

namespace ckpt::jinja {

// ---------------------------------------------------------------- small vector
// A vector that keeps its first N elements inline (no heap allocation for short argument
// lists and frames).
template <class T, size_t N>
class SmallVec {
 public:
  SmallVec() = default;
  SmallVec(const SmallVec& o) { append(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { take(std::move(o)); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      destroy();
      take(std::move(o));
    }
    return *this;
  }
  ~SmallVec() { destroy(); }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T& back() { return p_[n_ - 1]; }
  T& front() { return p_[0]; }
  void reserve(size_t c) {
    if (c > cap_) grow(c);
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    if (n_ == cap_) {
      // construct first: an argument may refer to an element that grow() moves
      T tmp(std::forward<A>(a)...);
      grow(cap_ * 2);
      return *new (p_ + n_++) T(std::move(tmp));
    }
    return *new (p_ + n_++) T(std::forward<A>(a)...);
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { p_[--n_].~T(); }
  void clear() {
    for (size_t i = 0; i < n_; ++i) p_[i].~T();
    n_ = 0;
  }
  template <class It>
  void append(It b, It e) {
    for (; b != e; ++b) emplace_back(*b);
  }
  template <class It>
  void assign(It b, It e) {
    clear();
    append(b, e);
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

 private:
  T* inline_ptr() { return reinterpret_cast<T*>(buf_); }
  void grow(size_t c) {
    T* np = static_cast<T*>(::operator new(c * sizeof(T)));
    for (size_t i = 0; i < n_; ++i) {
      new (np + i) T(std::move(p_[i]));
      p_[i].~T();
    }
    if (p_ != inline_ptr()) ::operator delete(p_);
    p_ = np;
    cap_ = c;
  }
  void destroy() {
    clear();
    if (p_ != inline_ptr()) ::operator delete(p_);
    p_ = inline_ptr();
    cap_ = N;
  }
  void take(SmallVec&& o) {
    if (o.p_ == o.inline_ptr()) {
      p_ = inline_ptr();
      cap_ = N;
      n_ = 0;
      for (size_t i = 0; i < o.n_; ++i) new (p_ + n_++) T(std::move(o.p_[i]));
      o.clear();
    } else {
      p_ = o.p_;
      n_ = o.n_;
      cap_ = o.cap_;
      o.p_ = o.inline_ptr();
      o.n_ = 0;
      o.cap_ = N;
    }
  }
  alignas(T) unsigned char buf_[N * sizeof(T)];
  T* p_ = inline_ptr();
  size_t n_ = 0;
  size_t cap_ = N;
};

// ---------------------------------------------------------------- allocation
// A per-thread free list for the engine's small, frequently created objects (strings, lists,
// frames): a render creates and drops many of them, and reusing blocks is cheaper than malloc.
template <class T>
struct Recycled {
  struct Block {
    Block* next;
  };
  struct List {
    Block* head = nullptr;
    size_t count = 0;
    ~List() {
      while (head) {
        Block* b = head;
        head = b->next;
        ::operator delete(b);
      }
    }
  };
  static List& list() {
    thread_local List l;
    return l;
  }
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kRecycle = false;  // let AddressSanitizer see every block's lifetime
#else
  static constexpr bool kRecycle = true;
#endif
  static void* operator new(size_t n) {
    static_assert(sizeof(T) >= sizeof(Block));
    if (kRecycle && n == sizeof(T)) {
      List& l = list();
      if (l.head) {
        Block* b = l.head;
        l.head = b->next;
        --l.count;
        return b;
      }
    }
    return ::operator new(n);
  }
  static void operator delete(void* p, size_t n) {
    if (kRecycle && n == sizeof(T)) {
      List& l = list();
      if (l.count < 1024) {
        auto* b = static_cast<Block*>(p);
        b->next = l.head;
        l.head = b;
        ++l.count;
        return;
      }
    }
    ::operator delete(p);
  }
};

// ---------------------------------------------------------------- values
enum class K : uint8_t { Undef, None, Bool, Int, Float, Str, List, Tuple, Dict, Gen, Func, NS, Loop };

// Heap objects behind Values. Reference counts are plain integers: the objects of one render
// belong to one thread. Objects shared between renders (AST constants, the converted render
// context, the global builtins) are never counted: Values hold them "borrowed".
struct Obj {
  uint32_t rc = 1;
  virtual ~Obj() = default;
};

// How an Undefined came about (decides the message when it raises).
enum class UK : uint8_t {
  Plain,    // no payload
  Hint,     // o: UndefObj (hint text, security flag)
  Name,     // o/sp: the variable's name (as a Str value holds it): "'x' is undefined"
  Attr,     // o/sp: the attribute; `owner` holds the owner's type
  Param,    // o/sp: the macro parameter's name: "parameter 'x' was not provided"
};

struct Value {
  K k = K::Undef;
  bool markup = false;   // Str only: a markupsafe.Markup
  bool counted = false;  // o is owned (reference counted); otherwise borrowed or absent
  UK uk = UK::Plain;     // Undef only
  uint8_t owner = 0;     // Undef/Attr: the owner's K, | 0x80 for Markup
  bool sref = false;      // Str, and Undef with a name: o is a borrowed `const std::string*`
  uint8_t serial[2] = {};  // Undef: identity of the Undefined object (for `is sameas`)
  union {
    bool b;
    int64_t i;
    double f;
    Obj* o;
    const std::string* sp;  // sref
  };

  Value() : i(0) {}
  Value(const Value& x) {
    copy_fields(x);
    if (counted) ++o->rc;
  }
  Value(Value&& x) noexcept {
    copy_fields(x);
    x.reset_moved_from();
  }
  Value& operator=(const Value& x) {
    if (x.counted) ++x.o->rc;  // before release(): x may be owned through *this
    release();
    copy_fields(x);
    return *this;
  }
  Value& operator=(Value&& x) noexcept {
    if (this != &x) {
      release();
      copy_fields(x);
      x.reset_moved_from();
    }
    return *this;
  }
  // Every field, bit for bit; reference counts are the callers' business.
  void copy_fields(const Value& x) {
    k = x.k;
    markup = x.markup;
    counted = x.counted;
    uk = x.uk;
    owner = x.owner;
    sref = x.sref;
    std::memcpy(serial, x.serial, 2);
    i = x.i;
  }
  void reset_moved_from() {
    counted = false;
    k = K::Undef;
    uk = UK::Plain;
    i = 0;
  }
  ~Value() { release(); }
  void release() {
    if (counted && --o->rc == 0) delete o;
    counted = false;
  }

  // Takes ownership of a freshly allocated object (rc == 1).
  static Value owning(K k, Obj* o) {
    Value v;
    v.k = k;
    v.o = o;
    v.counted = true;
    return v;
  }
  // Refers to an object that outlives every use of this Value (no counting).
  static Value borrowed(K k, const Obj* o) {
    Value v;
    v.k = k;
    v.o = const_cast<Obj*>(o);
    return v;
  }
  // The name an Undefined of kind Name/Attr/Param carries.
  inline const std::string& undef_text() const;
  // The same value, borrowed: for values whose owner outlives the render (AST constants,
  // globals, the converted context). Never for values created during a render.
  Value borrow() const {
    Value v;
    v.k = k;
    v.markup = markup;
    v.uk = uk;
    v.owner = owner;
    v.sref = sref;
    std::memcpy(v.serial, serial, 2);
    v.i = i;
    return v;
  }

  // A string that outlives every use of this Value (render context, template).
  static Value borrowed_str(const std::string* s) {
    Value v;
    v.k = K::Str;
    v.sref = true;
    v.sp = s;
    return v;
  }
  static Value none() { Value v; v.k = K::None; return v; }
  static Value boolean(bool x) { Value v; v.k = K::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.k = K::Int; v.i = x; return v; }
  static Value flt(double x) { Value v; v.k = K::Float; v.f = x; return v; }
  static Value str(std::string s, bool markup = false);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value gen(std::vector<Value> items, const char* what);
  static Value dict();
  static Value undef(std::string hint = {}, bool security = false);
  // Lazy messages: `name` is a Str Value (kept alive by the Undefined).
  static Value undef_name(const Value& name);
  static Value undef_param(const Value& name);
  static Value undef_attr(const Value& owner, const Value& attr);
  static Value undef_attr(const Value& owner, const std::string& attr);

  bool is_undef() const { return k == K::Undef; }
  bool is_none() const { return k == K::None; }
  bool is_str() const { return k == K::Str; }
  bool is_num() const { return k == K::Int || k == K::Float || k == K::Bool; }
  inline const std::string& s() const;
  inline std::vector<Value>& items() const;  // List / Tuple / Gen
  inline struct DictObj& d() const;
  // Python's `is` for two Undefined values.
  bool same_undefined(const Value& x) const { return uk == x.uk && o == x.o && std::memcmp(serial, x.serial, 2) == 0; }
  // An Undefined that raises SecurityError when used.
  inline bool is_security() const;
};
static_assert(sizeof(Value) == 16);

// Byte equality of two strings, inline for the short keys and names templates compare.
inline bool str_eq(std::string_view a, std::string_view b) {
  size_t n = a.size();
  if (n != b.size()) return false;
  if (n > 16) return std::memcmp(a.data(), b.data(), n) == 0;
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

struct StrObj : Obj, Recycled<StrObj> {
  std::string s;
  StrObj() = default;
  explicit StrObj(std::string x) : s(std::move(x)) {}
};

struct ListObj : Obj, Recycled<ListObj> {
  std::vector<Value> v;
  bool consumed = false;     // generators only
  const char* what = "";     // generators only: the producing filter
};

struct ContextPool;

struct DictObj : Obj, Recycled<DictObj> {
  std::vector<std::pair<Value, Value>> v;
  // A dict of the render context is converted when first used as a whole (Value::d());
  // until then `v` is not valid and string keys are looked up in the JSON (get_str()).
  const json::Object* src = nullptr;
  ContextPool* pool = nullptr;
  void materialize();
  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  const Value* find_str(std::string_view key) const;
  // 1: found (out set), 0: no such key, -1: the member is a list or a dict (use d()).
  int get_str(std::string_view key, Value& out);
  void set(const Value& key, Value val);
};

struct UndefObj : Obj {
  std::string hint;
  bool security = false;
};

inline const std::string& Value::s() const { return sref ? *sp : static_cast<StrObj*>(o)->s; }
inline const std::string& Value::undef_text() const { return sref ? *sp : static_cast<StrObj*>(o)->s; }
inline std::vector<Value>& Value::items() const { return static_cast<ListObj*>(o)->v; }
inline DictObj& Value::d() const {
  auto* d = static_cast<DictObj*>(o);
  if (d->src) d->materialize();
  return *d;
}
inline bool Value::is_security() const {
  return k == K::Undef && uk == UK::Hint && static_cast<UndefObj*>(o)->security;
}

inline bool truthy(const Value& v) {
  switch (v.k) {
    case K::Undef:
    case K::None: return false;
    case K::Bool: return v.b;
    case K::Int: return v.i != 0;
    case K::Float: return v.f != 0;
    case K::Str: return !v.s().empty();
    case K::List:
    case K::Tuple: return !v.items().empty();
    case K::Dict: {
      // a context dict not yet converted: its JSON says whether it is empty
      auto* d = static_cast<DictObj*>(v.o);
      return d->src ? !d->src->empty() : !d->v.empty();
    }
    default: return true;
  }
}

// Objects that can close a reference cycle (a macro holds the frame it was defined in; a
// namespace or a loop holds values assigned after its creation). Each is linked into its
// render's list while alive; when the render ends, the references of the ones still alive
// (only cycles keep them) are dropped, which frees the cycles.
struct CycLink {
  CycLink** head = nullptr;
  CycLink* prev = nullptr;
  CycLink* next = nullptr;
  void link(CycLink** h) {
    head = h;
    next = *h;
    if (next) next->prev = this;
    *h = this;
  }
  void unlink() {
    if (!head) return;
    if (prev) prev->next = next;
    else *head = next;
    if (next) next->prev = prev;
    head = nullptr;
    prev = next = nullptr;
  }
  virtual Obj* self() = 0;
  virtual void drop_refs() = 0;
  virtual ~CycLink() { unlink(); }
};

struct NSObj : Obj, CycLink {
  std::vector<std::pair<std::string, Value>> attrs;
  Obj* self() override { return this; }
  void drop_refs() override { attrs.clear(); }
};

struct Frame;
struct Stmt;

// Intrusive reference to a Frame.
class FrameRef {
 public:
  FrameRef() = default;
  explicit FrameRef(Frame* f);  // adopts a new frame (rc 1)
  static FrameRef retain(Frame* f);  // one more reference to an existing frame
  FrameRef(const FrameRef& o);
  FrameRef(FrameRef&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  FrameRef& operator=(const FrameRef& o);
  FrameRef& operator=(FrameRef&& o) noexcept;
  ~FrameRef() { reset(); }
  void reset();
  Frame* get() const { return p_; }
  Frame* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  Frame* p_ = nullptr;
};

struct LoopObj : Obj, CycLink, Recycled<LoopObj> {
  std::vector<Value>* items = nullptr;
  size_t index0 = 0;
  uint32_t depth0 = 0;
  bool has_last_changed = false;
  Value last_changed;
  const Stmt* stmt = nullptr;  // recursive loops: the for statement
  FrameRef outer;              // ... and the frame it runs in
  Obj* self() override { return this; }
  void drop_refs() override {
    last_changed = Value();
    outer.reset();
  }
};

class Interp;
struct CallArgs {
  SmallVec<Value, 4> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get_kw(std::string_view name) const {
    for (auto& [k, v] : kw)
      if (k == name) return &v;
    return nullptr;
  }
};

struct FuncObj : Obj {
  std::string name;
  bool is_macro = false;  // a MacroObj (tested on every {{ f(...) }} without a dynamic_cast)
  virtual Value call(Interp& in, CallArgs& args) = 0;
  virtual std::string func_name() const { return name; }
};

// Python semantics helpers
bool py_equal(const Value& a, const Value& b);
std::string py_str(const Value& v);   // str(v)
std::string py_repr(const Value& v);  // repr(v)
std::string type_name(const Value& v);
std::string type_name(K k, bool markup);
Value from_json(const json::Value& j);

// The render context converted without reference counting: every list and dict lives in this
// pool for the duration of one render (strings are borrowed from the JSON), and Values borrow
// them.
// The pool keeps its storage between renders (one pool per thread), so converting a context
// allocates nothing once the pool has grown to the context's size.
struct ContextPool {
  template <class T>
  struct Chunks {
    static constexpr size_t kChunk = 64;
    std::vector<std::unique_ptr<T[]>> chunks;
    size_t used = 0;
    T* next() {
      if (used == chunks.size() * kChunk) chunks.emplace_back(new T[kChunk]);
      T* t = &chunks[used / kChunk][used % kChunk];
      ++used;
      return t;
    }
  };
  Chunks<ListObj> lists;
  Chunks<DictObj> dicts;
  // Scratch space of the render, also kept between renders: the output buffer and the
  // context variables converted so far, by name id (state 0: not looked up, 1: absent,
  // 2: present).
  std::string out;
  std::vector<uint8_t> ctx_state;
  std::vector<Value> ctx_vals;
  void reset(size_t names);  // forgets the previous render's objects, keeps their storage
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

// The AST's nodes come from one bump allocator per template: they sit in memory in parse
// order, close together, which is the order a render visits them. The arena frees the memory
// with the template; the nodes' destructors still run (NodeDelete).
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  void* alloc(size_t n, size_t align) {
    size_t pad = (align - reinterpret_cast<uintptr_t>(cur_) % align) % align;
    if (pad + n > left_) {
      size_t size = n + align > kChunk ? n + align : kChunk;
      chunks_.emplace_back(new char[size]);
      cur_ = chunks_.back().get();
      left_ = size;
      pad = (align - reinterpret_cast<uintptr_t>(cur_) % align) % align;
    }
    void* p = cur_ + pad;
    cur_ += pad + n;
    left_ -= pad + n;
    return p;
  }

 private:
  static constexpr size_t kChunk = 16384;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* cur_ = nullptr;
  size_t left_ = 0;
};
struct NodeDelete {
  template <class T>
  void operator()(T* p) const {
    p->~T();
  }
};

struct Expr;
using ExprP = std::unique_ptr<Expr, NodeDelete>;

// What an attribute name can denote, computed once per name (see attr_info()).
enum : uint32_t {
  kStrMethod = 1, kDictMethod = 2, kListMethod = 4, kTupleMethod = 8,
  kListMutating = 16, kDictMutating = 32, kDunder = 64,
  kLoopShift = 8,  // (loop attribute index + 1) << kLoopShift
  kInfoUnknown = 0xFFFFFFFFu,
};
uint32_t attr_info(std::string_view name);

struct Expr {
  // hot fields first
  EK kind;
  char op = 0;                // Bin: + - * / % and F (//), P (**)
  bool name_key = false;      // Attr of a Name, or Item of a Name with a constant string key
  bool root_only = false;     // Name: never bound below the top level (lookups go to the root)
  bool negated = false;       // Test
  uint32_t pos = 0;
  int id = -1;                // filter/test id; Name: the interned name's id
  uint32_t info = 0;          // Attr, Item with a constant key: attr_info(name)
  Value cval;                 // Const; Name and Attr: the name as a Str value
  ExprP a, b, c;              // node/operand(s); Slice: a=start b=stop c=step; Call/Filter/Test base: a
  std::vector<ExprP> kids;    // operands, args, items (Dict: k0,v0,k1,v1...)
  std::string name;           // Name / Attr / Filter / Test / Bin op
  std::vector<std::pair<std::string, ExprP>> kwargs;
  ExprP dyn_args, dyn_kwargs;
  std::vector<std::string> ops;  // Compare operators
  Expr(EK k, uint32_t p) : kind(k), pos(p) {}
};

// Calls f on each direct sub-expression of e (non-null ones, in field order) until f returns
// true; returns whether it did. The one list of Expr's child fields that tree walkers share.
template <class F>
bool any_child(const Expr& e, F&& f) {
  for (Expr* x : {e.a.get(), e.b.get(), e.c.get()})
    if (x && f(x)) return true;
  for (const auto& k : e.kids)
    if (k && f(k.get())) return true;
  for (const auto& kw : e.kwargs)
    if (kw.second && f(kw.second.get())) return true;
  for (Expr* x : {e.dyn_args.get(), e.dyn_kwargs.get()})
    if (x && f(x)) return true;
  return false;
}

enum class SK : uint8_t {
  Data, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Body,
  With, Unsupported
};

struct Stmt;
using StmtP = std::unique_ptr<Stmt, NodeDelete>;
using Body = std::vector<StmtP>;

struct MacroDef {
  std::string name;
  int name_id = -1;               // interned id of the name
  std::vector<std::string> params;
  std::vector<int> param_ids;     // interned ids of params
  std::vector<Value> param_strs;  // params as Str values (messages of missing parameters)
  std::vector<ExprP> defaults;    // aligned to the last params
  Body body;
  bool catch_varargs = false, catch_kwargs = false, caller = false;
  uint32_t pos = 0;
};

struct Stmt {
  // hot fields first
  SK kind;
  bool recursive = false;                      // For
  bool uses_loop = true;                       // For: the body (or test) may read `loop`
  uint32_t pos = 0;
  ExprP expr;                                  // Output / If cond / For iter / Set value / Call
  ExprP target;                                // For / Set target (Name, Tuple of Names, NS attr)
  std::string text;                            // Data
  Body body;
  std::vector<std::pair<ExprP, Body>> branches;  // If: (cond, body)...; else has null cond
  ExprP test;                                  // For ... if
  Body else_body;
  ExprP filter;                                // SetBlock / FilterBlock: Filter chain with null base
  std::shared_ptr<MacroDef> macro;             // Macro / CallBlock (the caller)
  std::vector<std::pair<uint32_t, std::string>> fragments;  // Data: delimiter-like text
  std::vector<std::pair<ExprP, ExprP>> with_vars;
  Stmt(SK k, uint32_t p) : kind(k), pos(p) {}
};

// Interned names: every variable name of a template gets a small id, so frames compare
// integers. The first ids are the names the engine itself binds.
enum : int { kNameLoop = 0, kNameVarargs = 1, kNameKwargs = 2, kNameCaller = 3, kReservedNames = 4 };

struct Parsed {
  std::string source;  // normalized text
  Arena arena;         // the nodes of `body` (declared first: destroyed after them)
  Body body;
  std::vector<std::string> names_read;  // every Name loaded anywhere
  std::vector<std::string> names;       // interned names, by id
  std::vector<int> name_global;         // by id: index of the global of that name, or -1
  std::vector<std::unique_ptr<Obj>> consts;  // the objects of the AST's constant values
};

// Throws JError (parse=true) on failure.
std::unique_ptr<Parsed> parse_template(std::string_view text, const Options& opts);

std::string normalize_source(std::string_view text);
int filter_id(std::string_view name);  // -1 when unknown
int test_id(std::string_view name);
int global_id(std::string_view name);  // -1 when not a global

}  // namespace ckpt::jinja
