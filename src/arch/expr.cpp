// The shape-formula language of the architecture tables: integers, variables,
// + - * / % (floor division/modulo on non-negative operands), comparisons, && || !,
// parentheses. Compiled once to a small postfix program; evaluation is allocation-free
// apart from the caller's variable lookup.
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/arch.h"

namespace ckpt::arch {

struct Expr {
  enum Op : uint8_t { Num, Var, Add, Sub, Mul, Div, Mod, Lt, Le, Gt, Ge, Eq, Ne, And, Or, Not, Neg };
  struct Ins {
    Ins(Op o, int64_t n = 0, std::string v = {}) : op(o), num(n), var(std::move(v)) {}
    Op op;
    int64_t num = 0;
    std::string var;
  };
  std::vector<Ins> code;
};

namespace {

struct Parser {
  std::string_view s;
  size_t p = 0;
  std::string err;
  std::vector<Expr::Ins> out;
  int depth = 0;

  void ws() {
    while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  }
  bool eat(std::string_view tok) {
    ws();
    if (s.substr(p, tok.size()) == tok) {
      p += tok.size();
      return true;
    }
    return false;
  }
  void fail(std::string m) {
    if (err.empty()) err = m + " at offset " + std::to_string(p) + " in \"" + std::string(s) + "\"";
  }

  void primary() {
    ws();
    if (++depth > 64) return fail("expression too deep");
    if (p >= s.size()) return fail("unexpected end");
    char c = s[p];
    if (c == '(') {
      ++p;
      orexpr();
      if (!eat(")")) fail("expected ')'");
    } else if (c == '!') {
      ++p;
      primary();
      out.push_back({Expr::Not});
    } else if (c == '-') {
      ++p;
      primary();
      out.push_back({Expr::Neg});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
        int d = s[p] - '0';
        if (v > (INT64_MAX - d) / 10) return fail("number too large");
        v = v * 10 + d;
        ++p;
      }
      out.push_back({Expr::Num, v});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = p;
      while (p < s.size() && (std::isalnum(static_cast<unsigned char>(s[p])) || s[p] == '_')) ++p;
      out.push_back({Expr::Var, 0, std::string(s.substr(b, p - b))});
    } else {
      fail(std::string("unexpected '") + c + "'");
    }
    --depth;
  }
  void mul() {
    primary();
    for (;;) {
      if (eat("*")) { primary(); out.push_back({Expr::Mul}); }
      else if (eat("/")) { primary(); out.push_back({Expr::Div}); }
      else if (eat("%")) { primary(); out.push_back({Expr::Mod}); }
      else break;
    }
  }
  void add() {
    mul();
    for (;;) {
      if (eat("+")) { mul(); out.push_back({Expr::Add}); }
      else if (eat("-")) { mul(); out.push_back({Expr::Sub}); }
      else break;
    }
  }
  void cmp() {
    add();
    for (;;) {
      if (eat("<=")) { add(); out.push_back({Expr::Le}); }
      else if (eat(">=")) { add(); out.push_back({Expr::Ge}); }
      else if (eat("==")) { add(); out.push_back({Expr::Eq}); }
      else if (eat("!=")) { add(); out.push_back({Expr::Ne}); }
      else if (eat("<")) { add(); out.push_back({Expr::Lt}); }
      else if (eat(">")) { add(); out.push_back({Expr::Gt}); }
      else break;
    }
  }
  void andexpr() {
    cmp();
    while (eat("&&")) { cmp(); out.push_back({Expr::And}); }
  }
  void orexpr() {
    andexpr();
    while (eat("||")) { andexpr(); out.push_back({Expr::Or}); }
  }
};

}  // namespace

std::shared_ptr<const Expr> compile_expr(std::string_view text, std::string* error) {
  Parser ps;
  ps.s = text;
  ps.orexpr();
  ps.ws();
  if (ps.err.empty() && ps.p != text.size()) ps.fail("trailing characters");
  if (!ps.err.empty()) {
    if (error) *error = ps.err;
    return nullptr;
  }
  auto e = std::make_shared<Expr>();
  e->code = std::move(ps.out);
  return e;
}

std::optional<int64_t> eval_expr(const Expr& e, const VarLookup& vars) {
  int64_t st[64];
  size_t n = 0;
  for (const auto& ins : e.code) {
    if (ins.op == Expr::Num || ins.op == Expr::Var) {
      if (n >= 64) return std::nullopt;
      if (ins.op == Expr::Num) {
        st[n++] = ins.num;
      } else {
        auto v = vars(ins.var);
        if (!v) return std::nullopt;
        st[n++] = *v;
      }
      continue;
    }
    if (ins.op == Expr::Not || ins.op == Expr::Neg) {
      if (n < 1) return std::nullopt;
      st[n - 1] = ins.op == Expr::Not ? !st[n - 1] : -st[n - 1];
      continue;
    }
    if (n < 2) return std::nullopt;
    int64_t b = st[--n], a = st[n - 1], r = 0;
    switch (ins.op) {
      case Expr::Add: if (__builtin_add_overflow(a, b, &r)) return std::nullopt; break;
      case Expr::Sub: if (__builtin_sub_overflow(a, b, &r)) return std::nullopt; break;
      case Expr::Mul: if (__builtin_mul_overflow(a, b, &r)) return std::nullopt; break;
      case Expr::Div:
        if (b == 0) return std::nullopt;
        r = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --r;
        break;
      case Expr::Mod:
        if (b == 0) return std::nullopt;
        r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        break;
      case Expr::Lt: r = a < b; break;
      case Expr::Le: r = a <= b; break;
      case Expr::Gt: r = a > b; break;
      case Expr::Ge: r = a >= b; break;
      case Expr::Eq: r = a == b; break;
      case Expr::Ne: r = a != b; break;
      case Expr::And: r = a && b; break;
      case Expr::Or: r = a || b; break;
      default: return std::nullopt;
    }
    st[n - 1] = r;
  }
  if (n != 1) return std::nullopt;
  return st[0];
}

}  // namespace ckpt::arch
