// The interpreter (private). One Interp renders one template once.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jinja/engine.h"

namespace ckpt::jinja {

// A scope: variables by interned name id. Frames are reference counted (a macro keeps the
// frame it was defined in); the chain ends at the render's root frame, whose variables live
// in an array indexed by name id (see Interp::lookup).
struct Frame : Recycled<Frame> {
  uint32_t rc = 1;
  FrameRef parent;
  SmallVec<std::pair<int, Value>, 4> vars;
  ContextPool* root = nullptr;  // set on the root frame: its variables are root->ctx_vals
  void set(int id, Value v) {
    if (root) {
      root->ctx_state[size_t(id)] = 2;
      root->ctx_vals[size_t(id)] = std::move(v);
      return;
    }
    for (auto& [k, val] : vars)
      if (k == id) { val = std::move(v); return; }
    vars.emplace_back(id, std::move(v));
  }
};

inline FrameRef::FrameRef(Frame* f) : p_(f) {}
inline FrameRef FrameRef::retain(Frame* f) {
  ++f->rc;
  return FrameRef(f);
}
inline FrameRef::FrameRef(const FrameRef& o) : p_(o.p_) {
  if (p_) ++p_->rc;
}
inline FrameRef& FrameRef::operator=(const FrameRef& o) {
  if (o.p_) ++o.p_->rc;
  reset();
  p_ = o.p_;
  return *this;
}
inline FrameRef& FrameRef::operator=(FrameRef&& o) noexcept {
  if (this != &o) {
    reset();
    p_ = o.p_;
    o.p_ = nullptr;
  }
  return *this;
}
inline void FrameRef::reset() {
  if (p_ && --p_->rc == 0) delete p_;
  p_ = nullptr;
}

// Callables with attributes (cycler).
struct CyclerLike : FuncObj {
  virtual bool attr(Interp& in, const std::string& name, Value& out, const Value& self) = 0;
};

struct MacroObj;

class Interp {
 public:
  Interp(const Parsed& p, const Options& o, const json::Value& ctx, ContextPool& pool);
  ~Interp();
  std::string run();

  enum class Flow { Normal, Break, Continue };

  [[noreturn]] void fail(std::string type, std::string msg);
  [[noreturn]] void undefined_error(const Value& u);
  void step() {
    if (++steps_ > opts_.max_steps) steps_exceeded();
  }
  [[noreturn]] void steps_exceeded();
  // A string of n bytes is about to be built: within the budget?
  void check_size(uint64_t n) {
    if (n > opts_.max_output || (built_ += n) > 8 * opts_.max_output) size_exceeded(n);
  }
  [[noreturn]] void size_exceeded(uint64_t n);
  void emit(std::string_view s) {
    if (out_->size() + s.size() > opts_.max_output) output_exceeded();
    built_ += s.size();
    if (built_ > 8 * opts_.max_output) output_exceeded();
    out_->append(s);
  }
  [[noreturn]] void output_exceeded();
  Value str_val(std::string s, bool markup = false);
  Value escape(const Value& v);

  std::vector<Value> iterate(const Value& v);
  int64_t length(const Value& v);
  bool less(const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  std::string to_output(const Value& v);
  std::string hf_str(const Value& v);  // printing under Runtime::hf_jinja
  std::string llama_str(const Value& v);  // printing under Runtime::llama_cpp
  std::string swift_str(const Value& v);  // printing under Runtime::swift_jinja
  const Options& options() const { return opts_; }
  void emit_value(const Value& v);

  // `name` is a Str value; `info` is attr_info() of it.
  Value getattr(const Value& obj, const Value& name, uint32_t info);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key, uint32_t info = kInfoUnknown);
  Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
  Value loop_attr(const Value& loop, int attr, const std::string& name);
  Value binop(const std::string& op, const Value& a, const Value& b);
  Value percent_format(const Value& fmt, const Value& args);
  // printf's %e/%f/%g (conv, with '#' when alt) of a finite double, exact for any precision;
  // `already` bytes of the result string exist (the budget check covers both).
  std::string format_double(double d, char conv, int64_t prec, bool alt, size_t already = 0);

  Value call(const Value& fn, CallArgs& a);
  // direct: the macro writes into the current output (its result is being printed)
  Value call_macro(MacroObj& m, CallArgs& a, bool direct = false);
  Value call_method(const Value& self, const std::string& name, CallArgs& a);
  static Value make_builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn);
  static Value arg(CallArgs& a, size_t idx, std::string_view name, const Value& dflt);

  bool apply_test(int id, const std::string& name, const Value& v, CallArgs& a);
  Value apply_filter(int id, const Value& v, CallArgs& a, Frame* f);
  Value apply_filter_chain(const Expr* chain, const Value& base, Frame* f);
  Value attr_path(const Value& obj, const Value& attribute);  // make_attrgetter
  std::string tojson(const Value& v, const Value& indent, bool ensure_ascii, const Value& separators, bool sort_keys);

  // Constants and names inline (the commonest leaves), everything else in eval_node().
  Value eval(const Expr* e, Frame* f) {
    if (e->kind == EK::Const) {
      step();
      cur_pos_ = e->pos;
      return e->cval.borrow();
    }
    if (e->kind == EK::Name) {
      step();
      cur_pos_ = e->pos;
      return lookup(e, f);
    }
    if (e->name_key) return eval_name_key(e, f);
    return eval_node(e, f);
  }
  // name.attr and name['key']: what eval_node() does for them, in one call
  Value eval_name_key(const Expr* e, Frame* f);
  Value eval_node(const Expr* e, Frame* f);
  // A Name: the frames up to the root, then the root's variables (set at the top level or
  // from the render context), then the globals.
  Value lookup(const Expr* e, Frame* f) {
    int id = e->id;
    if (!e->root_only)
      for (; !f->root; f = f->parent.get())
        for (auto& [k, v] : f->vars)
          if (k == id) return v;
    if (pool_.ctx_state[size_t(id)] == 2) return pool_.ctx_vals[size_t(id)];
    return lookup_root(e);
  }
  Value lookup_root(const Expr* e);
  Value eval_slice(const Expr* e, Frame* f);
  Value eval_call(const Expr* e, Frame* f);
  Value eval_filter(const Expr* e, Frame* f);
  Value eval_test(const Expr* e, Frame* f);
  Value eval_compare(const Expr* e, Frame* f);
  Value eval_other(const Expr* e, Frame* f);
  CallArgs eval_args(const Expr* e, Frame* f);
  void assign(const Expr* target, const Value& v, Frame* f);
  Flow exec(const Body& body, Frame* f);
  Value add_chain(const Expr* e, Frame* f, bool direct, bool stepped);
  // Writes an output expression: string concatenations go straight to the output.
  void output(const Expr* e, Frame* f);
  // Runs `body` with its output redirected into a string (set blocks, filter blocks).
  std::string capture(const Body& body, Frame* f);
  Flow exec_for(const Stmt* st, Frame* f);
  Flow run_loop(const Stmt* st, const Value& seq, Frame* f, uint32_t depth0);
  Value call_loop(const Value& loop, CallArgs& a);
  static void install_globals(std::vector<std::pair<std::string, Value>>& globals);
  template <class T>
  T* track(T* o) {
    o->link(&cyc_head_);
    return o;
  }

  const Parsed& parsed_;
  const Options& opts_;
  const json::Value& ctx_json_;
  ContextPool& pool_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  uint64_t built_ = 0;
  uint32_t depth_ = 0;
  uint32_t cur_pos_ = 0;
  std::vector<std::pair<uint32_t, std::string>> fragments_hit_;
  CycLink* cyc_head_ = nullptr;
  Frame root_;  // the template's top-level scope

  int64_t as_int_arg(const Value& v);
  static std::string split_join_ws(const std::string& s);
  static std::string html_escape_str(const std::string& s);

  struct Builtin;
};

const char* filter_name(int id);

}  // namespace ckpt::jinja
