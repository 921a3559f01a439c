// The smoke pass's text encoding (src/encode, when it lands).
#include "smoke/internal.h"

namespace ckpt::smoke {

bool encode_text(const Checkpoint&, const std::string&, std::vector<uint32_t>&, std::string&, std::string& error) {
  error = "no tokenizer encoder is built in yet";
  return false;
}

}  // namespace ckpt::smoke
