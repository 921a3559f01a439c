#include "format/pickle.h"

#include <cstring>
#include <unordered_map>

#include "io/utf8.h"
#include "util/utf8.h"

namespace {
bool valid_utf8(std::string_view s) { return !ckpt::io::first_invalid_utf8(s).has_value(); }
}  // namespace

namespace ckpt::pickle {

namespace {

// Opcode bytes (CPython Lib/pickletools.py).
enum Op : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P', BINPERSID = 'Q', REDUCE = 'R',
  STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U', UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a',
  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h',
  INST = 'i', LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q',
  LONG_BINPUT = 'r', SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85, TUPLE2 = 0x86,
  TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b, BINBYTES = 'B',
  SHORT_BINBYTES = 'C', SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f,
  ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

int opcode_protocol(uint8_t op) {
  if (op >= BYTEARRAY8 && op <= READONLY_BUFFER) return 5;
  if (op >= SHORT_BINUNICODE && op <= FRAME) return 4;
  if (op == BINBYTES || op == SHORT_BINBYTES) return 3;
  if (op >= PROTO && op <= LONG4) return 2;
  return 0;
}

struct Stop {
  std::string why;
  bool limit = false;
};

class Reader {
 public:
  Reader(std::string_view d, uint64_t base, const Limits& lim, Result& r) : d_(d), base_(base), lim_(lim), r_(r) {}

  void run() {
    try {
      loop();
    } catch (const Stop& s) {
      r_.error = s.why;
      r_.limit_hit = s.limit;
      r_.error_offset = base_ + op_at_;
    }
    r_.end = base_ + pos_;
  }

 private:
  std::string_view d_;
  uint64_t base_;
  const Limits& lim_;
  Result& r_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  uint64_t frame_end_ = 0;
  bool in_frame_ = false;

  [[noreturn]] void fail(std::string why, bool limit = false) { throw Stop{std::move(why), limit}; }

  std::string_view take(uint64_t n) {
    if (d_.size() - pos_ < n) r_.ran_out = true;
    if (d_.size() - pos_ < n) fail("needs " + std::to_string(n) + " bytes, " + std::to_string(d_.size() - pos_) + " remain (truncated)");
    auto v = d_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint64_t le(size_t n) {
    auto b = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }
  std::string_view line() {
    const size_t nl = d_.find('\n', pos_);
    if (nl == std::string_view::npos) r_.ran_out = true;
    if (nl == std::string_view::npos) fail("a text argument has no terminating newline (truncated)");
    if (nl - pos_ > lim_.max_string) fail("text argument longer than the string cap", true);
    auto v = d_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return v;
  }
  uint64_t length(uint64_t n) {
    if (n > d_.size() - pos_) {
      r_.ran_out = true;
      fail("needs " + std::to_string(n) + " bytes, " + std::to_string(d_.size() - pos_) + " remain (truncated)");
    }
    if (n > lim_.max_string) fail("string of " + std::to_string(n) + " bytes, above the cap", true);
    return n;
  }

  uint32_t make(Kind k) {
    if (r_.nodes.size() >= lim_.max_nodes) fail("more than " + std::to_string(lim_.max_nodes) + " values", true);
    Node n;
    n.kind = k;
    n.offset = base_ + op_at_;
    r_.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(r_.nodes.size() - 1);
  }
  Node& node(uint32_t k) { return r_.nodes[k]; }
  void push(uint32_t v) {
    if (stack_.size() >= lim_.max_stack) fail("stack deeper than " + std::to_string(lim_.max_stack), true);
    stack_.push_back(v);
  }
  uint32_t pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) fail("stack underflow");
    uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back())) fail("stack underflow");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  uint32_t scalar_int(int64_t v) {
    uint32_t k = make(Kind::Int);
    node(k).i = v;
    return k;
  }
  uint32_t str(Kind k, std::string_view s) {
    uint32_t n = make(k);
    node(n).text.assign(s);
    return n;
  }
  uint32_t seq(Kind k, std::vector<uint32_t> items) {
    uint32_t n = make(k);
    node(n).items = std::move(items);
    return n;
  }
  // LONG1/LONG4 little-endian two's complement; ints above 64 bits stay symbolic (hex text).
  uint32_t long_bytes(std::string_view b) {
    if (b.size() <= 8) {
      uint64_t v = 0;
      for (size_t i = b.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
      if (!b.empty() && b.size() < 8 && (static_cast<uint8_t>(b.back()) & 0x80)) v |= ~uint64_t(0) << (8 * b.size());
      return scalar_int(static_cast<int64_t>(v));
    }
    uint32_t n = make(Kind::BigInt);
    static const char* hex = "0123456789abcdef";
    std::string t = "0x";
    for (size_t i = b.size(); i-- > 0;) {
      t += hex[static_cast<uint8_t>(b[i]) >> 4];
      t += hex[static_cast<uint8_t>(b[i]) & 15];
    }
    node(n).text = t;
    return n;
  }
  uint32_t decimal(std::string_view s, bool allow_bool) {
    if (allow_bool && s == "00") {
      uint32_t n = make(Kind::Bool);
      return n;
    }
    if (allow_bool && s == "01") {
      uint32_t n = make(Kind::Bool);
      node(n).flag = true;
      return n;
    }
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
    bool neg = false;
    size_t i = 0;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == s.size()) fail("INT/LONG argument is not a number");
    uint64_t v = 0;
    bool big = false;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') fail("INT/LONG argument is not a number");
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, uint64_t(s[i] - '0'), &v)) big = true;
    }
    if (big || v > uint64_t(INT64_MAX)) {
      uint32_t n = make(Kind::BigInt);
      node(n).text.assign(s);
      return n;
    }
    return scalar_int(neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v));
  }
  // Python-2 style quoted STRING: strip the quotes, undo simple escapes.
  std::string unquote(std::string_view s) {
    if (s.size() < 2 || (s.front() != '\'' && s.front() != '"') || s.back() != s.front())
      fail("STRING argument is not quoted");
    s = s.substr(1, s.size() - 2);
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\' || i + 1 == s.size()) {
        out += s[i];
        continue;
      }
      char c = s[++i];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case 'x':
          if (i + 2 < s.size() + 0 && i + 2 <= s.size() - 1) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
          }
          break;
        default: out += c;
      }
    }
    return out;
  }
  // raw-unicode-escape: \uXXXX and \UXXXXXXXX become UTF-8, everything else is latin-1.
  std::string raw_unicode(std::string_view s) {
    std::string out;
    auto put = [&](uint32_t cp) { util::append_utf8(out, cp); };
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        const size_t n = s[i + 1] == 'u' ? 4 : 8;
        if (i + 2 + n <= s.size()) {
          uint32_t cp = 0;
          bool ok = true;
          for (size_t k = 0; k < n; ++k) {
            char c = s[i + 2 + k];
            int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (v < 0) ok = false;
            cp = cp * 16 + static_cast<uint32_t>(v < 0 ? 0 : v);
          }
          if (ok && cp <= 0x10FFFF) {
            put(cp);
            i += 1 + n;
            continue;
          }
        }
      }
      put(static_cast<uint8_t>(s[i]));
    }
    return out;
  }

  void add_global(uint32_t n, std::string how) {
    const Node& g = node(n);
    GlobalRef ref;
    ref.offset = g.offset;
    ref.module = g.text;
    ref.name = g.text2;
    ref.resolved = g.flag;
    ref.how = std::move(how);
    r_.globals.push_back(std::move(ref));
  }
  uint32_t named_global(std::string_view module, std::string_view name) {
    uint32_t n = make(Kind::Global);
    node(n).text.assign(module);
    node(n).text2.assign(name);
    node(n).flag = true;
    return n;
  }
  static std::string_view kind_name(Kind k) {
    switch (k) {
      case Kind::None: return "None";
      case Kind::Bool: return "bool";
      case Kind::Int: case Kind::BigInt: return "int";
      case Kind::Float: return "float";
      case Kind::Str: return "str";
      case Kind::Bytes: return "bytes";
      case Kind::Tuple: return "tuple";
      case Kind::List: return "list";
      case Kind::Dict: return "dict";
      case Kind::Set: case Kind::FrozenSet: return "set";
      case Kind::Global: return "an imported object";
      case Kind::Call: return "a call's result";
      case Kind::PersId: return "a persistent object";
      case Kind::Ext: return "an extension object";
      case Kind::Buffer: return "a buffer";
      case Kind::Unknown: return "an unknown value";
    }
    return "?";
  }

  uint32_t memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    // CPython raises here; the scan goes on with an unknown value, so that what follows (a
    // STACK_GLOBAL fed by it) is still seen and judged unresolvable.
    uint32_t n = make(Kind::Unknown);
    node(n).text = "memo key " + std::to_string(key) + " was never stored";
    return n;
  }
  void memo_put(uint64_t key, uint32_t v) {
    if (memo_.size() >= lim_.max_memo && !memo_.count(key)) fail("memo holds more than " + std::to_string(lim_.max_memo) + " entries", true);
    memo_[key] = v;
  }
  uint64_t line_int(std::string_view s) {
    uint64_t v = 0;
    if (s.empty()) fail("GET/PUT argument is empty");
    for (char c : s) {
      if (c < '0' || c > '9' || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, uint64_t(c - '0'), &v))
        fail("GET/PUT argument is not a number");
    }
    return v;
  }
  void dict_items(uint32_t target, const std::vector<uint32_t>& kv) {
    if (kv.size() % 2) fail("SETITEMS with an odd number of items");
    auto& items = node(target).items;
    items.insert(items.end(), kv.begin(), kv.end());
  }
  uint32_t call(uint32_t callee, uint32_t args) {
    uint32_t c = make(Kind::Call);
    node(c).a = callee;
    node(c).b = args;
    return c;
  }

  void loop() {
    while (true) {
      if (r_.ops >= lim_.max_ops) fail("more than " + std::to_string(lim_.max_ops) + " opcodes", true);
      if (in_frame_ && pos_ > frame_end_) {
        r_.frame_mismatches.push_back(base_ + frame_end_);
        in_frame_ = false;
      } else if (in_frame_ && pos_ == frame_end_) {
        in_frame_ = false;
      }
      op_at_ = pos_;
      if (pos_ >= d_.size()) r_.ran_out = true;
      if (pos_ >= d_.size()) fail("ends without STOP (truncated)");
      const uint8_t op = static_cast<uint8_t>(d_[pos_++]);
      ++r_.ops;
      r_.max_opcode_protocol = std::max(r_.max_opcode_protocol, opcode_protocol(op));
      switch (op) {
        case PROTO: {
          const uint8_t p = u8();
          if (p > 5) fail("unsupported pickle protocol " + std::to_string(p));
          if (r_.protocol < 0) r_.protocol = p;
          break;
        }
        case FRAME: {
          const uint64_t n = le(8);
          if (in_frame_) r_.frame_mismatches.push_back(base_ + op_at_);
          if (n > d_.size() - pos_) r_.frame_mismatches.push_back(base_ + op_at_);
          frame_end_ = pos_ + std::min<uint64_t>(n, d_.size() - pos_);
          in_frame_ = n > 0;
          break;
        }
        case STOP: {
          r_.root = pop();
          r_.stopped = true;
          if (in_frame_ && pos_ != frame_end_) r_.frame_mismatches.push_back(base_ + frame_end_);
          return;
        }
        case MARK:
          if (marks_.size() >= lim_.max_marks) fail("MARK nesting deeper than " + std::to_string(lim_.max_marks), true);
          marks_.push_back(stack_.size());
          break;
        case POP:
          if (!stack_.empty() && !(marks_.size() && marks_.back() == stack_.size())) stack_.pop_back();
          else if (!marks_.empty()) marks_.pop_back();  // CPython pops a MARK here
          else fail("stack underflow");
          break;
        case POP_MARK: pop_mark(); break;
        case DUP: push(top()); break;
        case NONE: push(make(Kind::None)); break;
        case NEWTRUE: case NEWFALSE: {
          uint32_t n = make(Kind::Bool);
          node(n).flag = op == NEWTRUE;
          push(n);
          break;
        }
        case INT: push(decimal(line(), true)); break;
        case LONG: push(decimal(line(), false)); break;
        case BININT: push(scalar_int(static_cast<int32_t>(le(4)))); break;
        case BININT1: push(scalar_int(static_cast<int64_t>(le(1)))); break;
        case BININT2: push(scalar_int(static_cast<int64_t>(le(2)))); break;
        case LONG1: push(long_bytes(take(le(1)))); break;
        case LONG4: {
          const uint64_t n = le(4);
          if (n & 0x80000000u) fail("LONG4 with a negative length");
          push(long_bytes(take(length(n))));
          break;
        }
        case FLOAT: {
          std::string s(line());
          uint32_t n = make(Kind::Float);
          node(n).f = std::strtod(s.c_str(), nullptr);
          push(n);
          break;
        }
        case BINFLOAT: {
          auto b = take(8);
          uint64_t v = 0;
          for (char c : b) v = (v << 8) | static_cast<uint8_t>(c);  // big-endian
          double f;
          std::memcpy(&f, &v, 8);
          uint32_t n = make(Kind::Float);
          node(n).f = f;
          push(n);
          break;
        }
        case STRING: push(str(Kind::Str, unquote(line()))); break;
        case BINSTRING: {
          const uint64_t n = le(4);
          if (n & 0x80000000u) fail("BINSTRING with a negative length");
          push(str(Kind::Str, take(length(n))));
          break;
        }
        case SHORT_BINSTRING: push(str(Kind::Str, take(le(1)))); break;
        case UNICODE: push(str(Kind::Str, raw_unicode(line()))); break;
        case SHORT_BINUNICODE: push(str(Kind::Str, take(le(1)))); break;
        case BINUNICODE: push(str(Kind::Str, take(length(le(4))))); break;
        case BINUNICODE8: push(str(Kind::Str, take(length(le(8))))); break;
        case SHORT_BINBYTES: push(str(Kind::Bytes, take(le(1)))); break;
        case BINBYTES: push(str(Kind::Bytes, take(length(le(4))))); break;
        case BINBYTES8: case BYTEARRAY8: push(str(Kind::Bytes, take(length(le(8))))); break;
        case NEXT_BUFFER: push(make(Kind::Buffer)); break;
        case READONLY_BUFFER: top(); break;
        case EMPTY_TUPLE: push(seq(Kind::Tuple, {})); break;
        case TUPLE1: case TUPLE2: case TUPLE3: {
          const size_t n = op - TUPLE1 + 1;
          std::vector<uint32_t> items(n);
          for (size_t i = n; i-- > 0;) items[i] = pop();
          push(seq(Kind::Tuple, std::move(items)));
          break;
        }
        case TUPLE: push(seq(Kind::Tuple, pop_mark())); break;
        case EMPTY_LIST: push(seq(Kind::List, {})); break;
        case LIST: push(seq(Kind::List, pop_mark())); break;
        case EMPTY_DICT: push(seq(Kind::Dict, {})); break;
        case DICT: {
          auto kv = pop_mark();
          if (kv.size() % 2) fail("DICT with an odd number of items");
          push(seq(Kind::Dict, std::move(kv)));
          break;
        }
        case EMPTY_SET: push(seq(Kind::Set, {})); break;
        case FROZENSET: push(seq(Kind::FrozenSet, pop_mark())); break;
        case APPEND: {
          uint32_t v = pop();
          node(top()).items.push_back(v);
          break;
        }
        case APPENDS: case ADDITEMS: {
          auto items = pop_mark();
          auto& dst = node(top()).items;
          dst.insert(dst.end(), items.begin(), items.end());
          break;
        }
        case SETITEM: {
          uint32_t v = pop(), k = pop();
          dict_items(top(), {k, v});
          break;
        }
        case SETITEMS: {
          auto kv = pop_mark();
          dict_items(top(), kv);
          break;
        }
        case GLOBAL: {
          auto module = line();
          auto name = line();
          if (!valid_utf8(module) || !valid_utf8(name)) fail("GLOBAL names are not valid UTF-8");
          uint32_t g = named_global(module, name);
          add_global(g, "GLOBAL");
          push(g);
          break;
        }
        case STACK_GLOBAL: {
          uint32_t name = pop(), module = pop();
          const Node m = node(module);  // copies: make() below may move the node array
          const Node n = node(name);
          uint32_t g = make(Kind::Global);
          const bool ok = m.kind == Kind::Str && n.kind == Kind::Str;
          node(g).flag = ok;
          node(g).text = m.kind == Kind::Str ? m.text : "<" + std::string(kind_name(m.kind)) + ">";
          node(g).text2 = n.kind == Kind::Str ? n.text : "<" + std::string(kind_name(n.kind)) + ">";
          add_global(g, "STACK_GLOBAL");
          if (!ok) {
            std::string why;
            if (m.kind != Kind::Str) why += "module operand is " + std::string(kind_name(m.kind)) + (m.kind == Kind::Unknown && !m.text.empty() ? " (" + m.text + ")" : "");
            if (n.kind != Kind::Str) why += std::string(why.empty() ? "" : "; ") + "name operand is " + std::string(kind_name(n.kind)) + (n.kind == Kind::Unknown && !n.text.empty() ? " (" + n.text + ")" : "");
            r_.globals.back().why_unresolved = why;
          }
          push(g);
          break;
        }
        case INST: {
          auto module = line();
          auto name = line();
          if (!valid_utf8(module) || !valid_utf8(name)) fail("INST names are not valid UTF-8");
          uint32_t g = named_global(module, name);
          add_global(g, "INST");
          push(call(g, seq(Kind::Tuple, pop_mark())));
          break;
        }
        case OBJ: {
          auto items = pop_mark();
          if (items.empty()) fail("OBJ without a class");
          uint32_t cls = items.front();
          items.erase(items.begin());
          push(call(cls, seq(Kind::Tuple, std::move(items))));
          break;
        }
        case EXT1: case EXT2: case EXT4: {
          const uint64_t code = le(op == EXT1 ? 1 : op == EXT2 ? 2 : 4);
          uint32_t g = make(Kind::Global);
          node(g).text = "<copyreg extension>";
          node(g).text2 = std::to_string(code);
          node(g).flag = false;
          add_global(g, op == EXT1 ? "EXT1" : op == EXT2 ? "EXT2" : "EXT4");
          r_.globals.back().why_unresolved = "an extension-registry code names whatever copyreg maps it to at load time";
          push(g);
          break;
        }
        case REDUCE: {
          uint32_t args = pop(), fn = pop();
          push(call(fn, args));
          break;
        }
        case NEWOBJ: {
          uint32_t args = pop(), cls = pop();
          push(call(cls, args));
          break;
        }
        case NEWOBJ_EX: {
          uint32_t kwargs = pop(), args = pop(), cls = pop();
          uint32_t c = call(cls, args);
          node(c).state = kwargs;
          push(c);
          break;
        }
        case BUILD: {
          uint32_t st = pop();
          uint32_t obj = top();
          if (node(obj).kind == Kind::Global) r_.events.push_back({Event::BuildOnGlobal, base_ + op_at_, obj});
          if (node(obj).state == kNone) node(obj).state = st;
          else {  // a second BUILD: keep both states
            uint32_t pair = seq(Kind::Tuple, {node(obj).state, st});
            node(obj).state = pair;
          }
          break;
        }
        case PERSID: {
          uint32_t pid = str(Kind::Str, line());
          uint32_t p = make(Kind::PersId);
          node(p).a = pid;
          push(p);
          break;
        }
        case BINPERSID: {
          uint32_t pid = pop();
          uint32_t p = make(Kind::PersId);
          node(p).a = pid;
          push(p);
          break;
        }
        case GET: push(memo_get(line_int(line()))); break;
        case BINGET: push(memo_get(le(1))); break;
        case LONG_BINGET: push(memo_get(le(4))); break;
        case PUT: memo_put(line_int(line()), top()); break;
        case BINPUT: memo_put(le(1), top()); break;
        case LONG_BINPUT: memo_put(le(4), top()); break;
        case MEMOIZE: memo_put(memo_.size(), top()); break;
        default: {
          char b[8];
          std::snprintf(b, sizeof b, "0x%02x", op);
          fail(std::string("invalid opcode ") + b);
        }
      }
      if (in_frame_ && pos_ > frame_end_) {
        r_.frame_mismatches.push_back(base_ + op_at_);
        in_frame_ = false;
      }
    }
  }
};

}  // namespace

Result read(std::string_view data, uint64_t base, const Limits& limits) {
  Result r;
  Reader(data, base, limits, r).run();
  return r;
}

bool looks_like_pickle(std::string_view p) {
  if (p.empty()) return false;
  const uint8_t c = static_cast<uint8_t>(p[0]);
  if (c == PROTO) return p.size() >= 2 && static_cast<uint8_t>(p[1]) <= 5;
  // pickle.load starts at byte 0 whatever it is: a pickle without PROTO may open with any opcode
  // (a protocol-0 GLOBAL, or SHORT_BINUNICODE feeding a STACK_GLOBAL), so every opcode byte is
  // a candidate; bytes that are no pickle fail within a few opcodes and are then left alone.
  static constexpr uint8_t kOpcodes[] = {
      MARK, POP, POP_MARK, DUP, FLOAT, INT, BININT, BININT1, LONG, BININT2, NONE, PERSID, BINPERSID, REDUCE, STRING,
      BINSTRING, SHORT_BINSTRING, UNICODE, BINUNICODE, APPEND, BUILD, GLOBAL, DICT, EMPTY_DICT, APPENDS, GET, BINGET,
      INST, LONG_BINGET, LIST, EMPTY_LIST, OBJ, PUT, BINPUT, LONG_BINPUT, SETITEM, TUPLE, EMPTY_TUPLE, SETITEMS,
      BINFLOAT, NEWOBJ, EXT1, EXT2, EXT4, TUPLE1, TUPLE2, TUPLE3, NEWTRUE, NEWFALSE, LONG1, LONG4, BINBYTES,
      SHORT_BINBYTES, SHORT_BINUNICODE, BINUNICODE8, BINBYTES8, EMPTY_SET, ADDITEMS, FROZENSET, NEWOBJ_EX,
      STACK_GLOBAL, MEMOIZE, FRAME, BYTEARRAY8, NEXT_BUFFER, READONLY_BUFFER};
  for (uint8_t op : kOpcodes)
    if (op == c) return true;
  return false;
}

std::string dotted(const GlobalRef& g) { return g.module + "." + g.name; }

}  // namespace ckpt::pickle
