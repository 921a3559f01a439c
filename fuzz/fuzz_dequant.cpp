// libFuzzer: the dequantizing readers of `ckpt diff --deep` (src/inspect/dequant*.cpp) on a
// checkpoint made of the input: [u16 LE n][n bytes: config.json][the rest: model.safetensors].
// The config's quantization_config picks the layout (MLX affine, compressed-tensors, GPTQ, AWQ,
// FP8, bitsandbytes); the header picks shapes, dtypes and offsets; the data is whatever follows.
// Invariants: no crash/UB, and no weight claims more values than its stored bytes can hold
// (numeric.cpp allocates tiles of rows x cols, so a weight whose shape is not backed by bytes
// would be an unbounded allocation): values <= 8 x data bytes + 64 (1-bit packing at the
// extreme). Every weight is then read whole, tile by tile, as the diff reads it.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "fuzz_temp_dir.h"
#include "inspect/dequant.h"

namespace {

namespace fs = std::filesystem;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  if (size < 2) return 0;
  const size_t n = size_t(data[0]) | size_t(data[1]) << 8;
  if (n > size - 2) return 0;
  const fs::path& dir = fuzz::model_dir("dequant");
  const char* bytes = reinterpret_cast<const char*>(data);
  fuzz::write_bytes(dir / "config.json", std::string_view(bytes + 2, n));
  fuzz::write_bytes(dir / "model.safetensors", std::string_view(bytes + 2 + n, size - 2 - n));

  LoadOptions opts;
  opts.threads = 1;
  LoadResult r = load_checkpoint(dir.string(), opts);
  if (!r.checkpoint) std::abort();  // the directory exists: it always loads
  auto weights = diff::dequant::weights_of(*r.checkpoint);
  std::vector<float> tile;
  for (const auto& [name, w] : weights.by_name) {
    if (w.parts.empty()) std::abort();
    uint64_t stored = 0;
    for (const auto& p : w.parts) stored += p.nbytes;
    if (w.cols == 0 || w.rows == 0) continue;
    if (w.rows > (stored * 8 + 64) / w.cols) std::abort();  // a shape not backed by bytes
    std::string err;
    auto reader = diff::dequant::open_reader(w, err);
    if (!reader) continue;
    const uint64_t tile_rows = std::max<uint64_t>(1, (uint64_t(1) << 14) / w.cols);
    tile.resize(tile_rows * w.cols);
    for (uint64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
      const uint64_t k = std::min(tile_rows, w.rows - r0);
      if (!reader->read(r0, k, tile.data(), err)) {
        if (err.empty()) std::abort();  // a failed read says why
        break;
      }
    }
  }
  return 0;
}
