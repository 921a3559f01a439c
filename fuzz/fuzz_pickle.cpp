// libFuzzer: the opcode-level pickle reader on arbitrary bytes, then the whole PyTorch scan
// (container sniffing, legacy framing, tensor walk) and the PK + PT families over the result.
// Invariants: no crash/UB, every stop is explained, bounds hold, findings are well-formed.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "checks/family.h"
#include "checks/pytorch_safety.h"
#include "ckpt/checkpoint.h"
#include "format/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  pickle::Limits lim;
  lim.max_ops = 200000;  // small bounds so expansion inputs stay fast
  lim.max_nodes = 1u << 16;
  pickle::Result r = pickle::read(bytes, 0, lim);
  if (!r.stopped && r.error.empty()) std::abort();          // every early stop says why
  if (r.stopped && r.root >= r.nodes.size()) std::abort();  // STOP returned a real value
  if (r.end > size || r.ops > lim.max_ops || r.nodes.size() > lim.max_nodes) std::abort();
  for (const auto& g : r.globals)
    if (g.how.empty() || (!g.resolved && g.why_unresolved.empty())) std::abort();

  Checkpoint ck;
  ck.pickle_scans.push_back(pt::scan_bytes(bytes, "pytorch_model.bin"));
  const auto& s = ck.pickle_scans.back();
  for (const auto& t : s.tensors)
    if (t.storage >= static_cast<int32_t>(s.storages.size()) || (t.alias_of >= 0 && t.alias_of >= static_cast<int32_t>(s.tensors.size())))
      std::abort();
  for (const auto& st : s.storages)
    if (st.available > st.bytes) std::abort();
  FindingSink sink;
  checks::kPickleSafetyFamily.run(ck, VerifyOptions{}, sink);
  checks::kPyTorchStructureFamily.run(ck, VerifyOptions{}, sink);
  for (const auto& f : sink.findings())
    if (f.code.size() != 5 || (f.code.compare(0, 2, "PK") != 0 && f.code.compare(0, 2, "PT") != 0) || f.message.empty()) std::abort();
  return 0;
}
