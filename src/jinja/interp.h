// The interpreter (private). One Interp renders one template once.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jinja/engine.h"

namespace ckpt::jinja {

// Variable names are views: every name comes from the AST, a string literal or the render
// context, all of which outlive the render.
struct Frame {
  std::vector<std::pair<std::string_view, Value>> vars;
  std::shared_ptr<Frame> parent;
  Value* find(std::string_view name);
  void set(std::string_view name, Value v);
};

// Callables with attributes (cycler).
struct CyclerLike : FuncObj {
  std::weak_ptr<Obj> self_;
  std::shared_ptr<Obj> shared_from_this_() { return self_.lock(); }
  virtual bool attr(Interp& in, const std::string& name, Value& out) = 0;
};

struct MacroObj;

class Interp {
 public:
  Interp(const Parsed& p, const Options& o);
  ~Interp();
  std::string run(const Value& ctx);

  enum class Flow { Normal, Break, Continue };

  [[noreturn]] void fail(std::string type, std::string msg);
  [[noreturn]] void undefined_error(const Value& u);
  void step();
  void check_size(uint64_t n);
  void emit(std::string_view s);
  Value str_val(std::string s, bool markup = false);
  Value escape(const Value& v);

  std::vector<Value> iterate(const Value& v);
  int64_t length(const Value& v);
  bool less(const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  std::string to_output(const Value& v);

  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);
  Value loop_attr(const Value& loop, const std::string& name);
  Value binop(const std::string& op, const Value& a, const Value& b);
  Value percent_format(const Value& fmt, const Value& args);

  Value call(const Value& fn, CallArgs& a);
  Value call_macro(MacroObj& m, CallArgs& a);
  Value call_method(const Value& self, const std::string& name, CallArgs& a);
  Value make_builtin(std::string name, std::function<Value(Interp&, CallArgs&)> fn);
  static Value arg(CallArgs& a, size_t idx, std::string_view name, const Value& dflt);

  bool apply_test(int id, const std::string& name, const Value& v, CallArgs& a);
  Value apply_filter(int id, const Value& v, CallArgs& a, std::shared_ptr<Frame>& f);
  Value apply_filter_chain(const Expr* chain, const Value& base, std::shared_ptr<Frame>& f);
  Value attr_path(const Value& obj, const Value& attribute);  // make_attrgetter
  std::string tojson(const Value& v, const Value& indent, bool ensure_ascii, const Value& separators, bool sort_keys);

  Value eval(const Expr* e, std::shared_ptr<Frame>& f);
  CallArgs eval_args(const Expr* e, std::shared_ptr<Frame>& f);
  void assign(const Expr* target, const Value& v, std::shared_ptr<Frame>& f);
  Flow exec(const Body& body, std::shared_ptr<Frame>& f);
  // Runs `body` with its output redirected into a string (set blocks, filter blocks).
  std::string capture(const Body& body, std::shared_ptr<Frame>& f);
  Flow exec_for(const Stmt* st, std::shared_ptr<Frame>& f);
  Flow run_loop(const Stmt* st, const Value& seq, std::shared_ptr<Frame>& f, uint32_t depth0);
  Value call_loop(const Value& loop, CallArgs& a);
  const Value* global(const std::string& name);
  void install_globals();

  const Parsed& parsed_;
  const Options& opts_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  uint64_t built_ = 0;
  uint32_t depth_ = 0;
  uint32_t cur_pos_ = 0;
  std::vector<std::pair<std::string, Value>> globals_;
  std::vector<std::pair<uint32_t, std::string>> fragments_hit_;
  // Objects that can close a reference cycle (macros hold their defining frame, namespaces
  // and loops hold values assigned after their creation); their references are dropped
  // when the render ends, so cycles among them are freed.
  std::vector<std::weak_ptr<Obj>> cyclic_;

  int64_t as_int_arg(const Value& v);
  static std::string split_join_ws(const std::string& s);
  static std::string html_escape_str(const std::string& s);

  struct Builtin;
};

const char* filter_name(int id);

}  // namespace ckpt::jinja
