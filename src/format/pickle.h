// An opcode-level pickle reader (protocols 0-5) that never executes anything: it builds a
// symbolic value tree in which GLOBAL / STACK_GLOBAL / INST yield names and REDUCE / NEWOBJ /
// OBJ / BUILD yield calls on those names. Nothing is imported, looked up or run. Memo, stack,
// MARK depth, string sizes, node count and opcode count are all bounded.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::pickle {

enum class Kind : uint8_t {
  None, Bool, Int, BigInt, Float, Str, Bytes, Tuple, List, Dict, Set, FrozenSet,
  Global,   // module/name in `text`/`text2`; `resolved` false when STACK_GLOBAL had no strings
  Call,     // callee(args...): REDUCE, NEWOBJ, NEWOBJ_EX, INST, OBJ
  PersId,   // persistent id: `a` = the pid object
  Ext,      // an extension-registry code (copyreg): an arbitrary callable
  Buffer,   // an out-of-band buffer (protocol 5)
  Unknown,
};

struct Node {
  Kind kind = Kind::Unknown;
  bool flag = false;        // Bool value; Global: resolved
  int64_t i = 0;            // Int value; Ext code
  double f = 0;
  std::string text;         // Str/Bytes content; Global module; BigInt decimal-ish (hex) text
  std::string text2;        // Global name
  uint32_t a = UINT32_MAX;  // Call: callee; PersId: pid
  uint32_t b = UINT32_MAX;  // Call: args tuple (or kwargs for NEWOBJ_EX in `c`)
  uint32_t state = UINT32_MAX;  // BUILD state, applied to this object
  uint64_t offset = 0;      // opcode offset that made it
  std::vector<uint32_t> items;  // Tuple/List/Set items; Dict: key, value, key, value...
};

inline constexpr uint32_t kNone = UINT32_MAX;

// One GLOBAL-like import: where, which opcode, and the dotted name.
struct GlobalRef {
  uint64_t offset = 0;
  std::string module, name;
  bool resolved = true;   // false: STACK_GLOBAL operands were not strings (computed at run time)
  std::string how;        // "GLOBAL", "STACK_GLOBAL", "INST", "EXT1"...
  std::string why_unresolved;
};

// A call or attribute write the reader saw, on a global (for BUILD-on-import checks).
struct Event {
  enum Type : uint8_t { BuildOnGlobal, Ext } type;
  uint64_t offset;
  uint32_t node;
};

struct Limits {
  uint64_t max_ops = 50'000'000;
  uint32_t max_stack = 1'000'000;
  uint32_t max_marks = 4096;
  uint32_t max_memo = 1u << 24;
  uint64_t max_string = 256ull << 20;
  uint32_t max_nodes = 4u << 20;   // ~140 bytes each: a 100k-tensor state_dict needs ~1.5M
};

struct Result {
  bool stopped = false;        // reached STOP
  uint64_t end = 0;            // offset just after STOP (or where reading stopped)
  uint64_t ops = 0;
  int protocol = -1;           // PROTO argument (-1 none)
  int max_opcode_protocol = 0; // the highest protocol any opcode used needs
  std::string error;           // why reading stopped early ("" when STOP was reached)
  uint64_t error_offset = 0;
  bool limit_hit = false;      // the error is a bound (expansion / size), not malformed bytes
  bool ran_out = false;        // the error is the end of `data` (more bytes may complete it)
  uint32_t root = kNone;       // the value STOP returned
  std::vector<Node> nodes;
  std::vector<GlobalRef> globals;
  std::vector<Event> events;
  std::vector<uint64_t> frame_mismatches;  // FRAME lengths that disagree with the opcodes

  const Node& at(uint32_t k) const { return nodes[k]; }
};

// Reads one pickle starting at `data[0]` (offsets in the result are relative to `base`).
Result read(std::string_view data, uint64_t base = 0, const Limits& limits = {});

// Whether the bytes may start a pickle: a PROTO opcode with protocol 0-5, or any other opcode
// byte (pickle.load accepts a pickle without PROTO opening with any opcode).
bool looks_like_pickle(std::string_view prefix);

std::string dotted(const GlobalRef& g);

}  // namespace ckpt::pickle
