// ckpt fixture ARCH OUT_DIR: tiny synthetic checkpoints (real config keys and weight names,
// seeded weights, real quantization packing) with optional planted defects.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "ckpt/fixture.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_fixture(int argc, char** argv) {
  CLI::App app{"Generate a tiny synthetic checkpoint (kilobytes, milliseconds, no network)", "ckpt fixture"};
  fixture::Options o;
  std::string arch, out, dtype = "F16", format = "safetensors";
  bool list = false, list_defects = false;
  int64_t layers = 0, hidden = 0, experts = 0;
  app.add_option("ARCH", arch, "model_type from the architecture registry (see --list)");
  app.add_option("OUT_DIR", out, "output directory (must be empty or a previous fixture)");
  app.add_option("--quant", o.quant,
                 "quantization scheme: mlx4, mlx8, ct-int4, gptq4, fp8; with --format gguf a ggml type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 "
                 "q5_1 q2_k q3_k q4_k q5_k q6_k (default f16)");
  app.add_option("--format", format,
                 "weight format: safetensors (default), gguf (llama.cpp's layout, keys and tensor names) or pytorch "
                 "(torch.save zip .bin files)");
  app.add_flag("--pytorch-legacy", o.pytorch_legacy,
               "with --format pytorch: write the legacy torch.save stream (_use_new_zipfile_serialization=False) instead of the zip");
  app.add_option("--defect", o.defects, "plant a defect (repeatable; see --list-defects)");
  app.add_option("--seed", o.seed, "seed of the weight generator (default 0)");
  app.add_option("--layers", layers, "number of decoder layers");
  app.add_option("--hidden", hidden, "hidden size (multiple of 16)");
  app.add_option("--experts", experts, "routed experts (MoE architectures)");
  app.add_option("--shards", o.shards, "number of safetensors shards (>1 writes an index)");
  app.add_option("--dtype", dtype, "float dtype: F16 (default), BF16, F32");
  app.add_option("--hf-cache", o.hf_repo, "write a Hugging Face cache layout for org/name under OUT_DIR");
  app.add_flag("--unigram", o.unigram, "Unigram tokenizer instead of byte-level BPE");
  app.add_flag("--list", list, "list architectures and quantization schemes");
  app.add_flag("--list-defects", list_defects, "list the defect catalogue");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (list) {
    std::printf("architectures:\n");
    for (const auto& a : fixture::architectures()) std::printf("  %-18s %s\n", a.model_type.c_str(), a.summary.c_str());
    std::printf("\nquantization schemes (--quant):\n");
    for (const auto& s : fixture::schemes())
      std::printf("  %-18.*s %.*s\n", int(s.name.size()), s.name.data(), int(s.summary.size()), s.summary.data());
    std::printf("\nGGUF (--format gguf): llama qwen2 qwen3 qwen3moe gemma gemma2 gemma3 phi3 deepseek2 gpt-oss; --quant");
    for (auto q : fixture::gguf_quants()) std::printf(" %.*s", int(q.size()), q.data());
    std::printf("\n");
    return 0;
  }
  if (list_defects) {
    std::printf("%-32s %-6s %s\n", "defect", "code", "incident");
    for (const auto* list : {&fixture::defects(), &fixture::pytorch_defects(), &fixture::gguf_defects()})
      for (const auto& d : *list)
        std::printf("%-32.*s %-6.*s %.*s%s\n", int(d.name.size()), d.name.data(), int(d.code.size()), d.code.data(),
                    int(d.incident.size()), d.incident.data(),
                    list == &fixture::gguf_defects() ? " (--format gguf)"
                    : d.needs == "pytorch"            ? " (--format pytorch)"
                                                      : "");
    return 0;
  }
  if (arch.empty() || out.empty()) {
    std::fprintf(stderr, "ckpt fixture: ARCH and OUT_DIR are required (or --list / --list-defects)\n");
    return 2;
  }
  if (o.pytorch_legacy && format != "pytorch") {
    std::fprintf(stderr, "ckpt fixture: --pytorch-legacy needs --format pytorch\n");
    return 2;
  }
  if (format == "gguf") {
    fixture::GgufOptions g;
    g.arch = arch;
    g.out = out;
    if (!o.quant.empty()) g.quant = o.quant;
    g.defects = o.defects;
    g.seed = o.seed;
    if (layers) g.layers = layers;
    if (hidden) g.hidden = hidden;
    if (experts) g.experts = experts;
    g.splits = o.shards;
    fixture::Result r = fixture::make_gguf_fixture(g);
    if (!r.error.empty()) {
      std::fprintf(stderr, "ckpt fixture: %s\n", r.error.c_str());
      return 2;
    }
    std::printf("%s: %llu tensors, %zu files, %llu bytes\n", r.model_dir.c_str(), (unsigned long long)r.tensors, r.files.size(),
                (unsigned long long)r.bytes);
    return 0;
  }
  o.arch = arch;
  o.out = out;
  if (layers) o.layers = layers;
  if (hidden) o.hidden = hidden;
  if (experts) o.experts = experts;
  if (dtype == "F16" || dtype == "f16") o.dtype = st::DType::F16;
  else if (dtype == "BF16" || dtype == "bf16") o.dtype = st::DType::BF16;
  else if (dtype == "F32" || dtype == "f32") o.dtype = st::DType::F32;
  else {
    std::fprintf(stderr, "ckpt fixture: --dtype must be F16, BF16 or F32\n");
    return 2;
  }
  if (format == "pytorch") o.format = Format::pytorch;
  else if (format != "safetensors") {
    std::fprintf(stderr, "ckpt fixture: --format must be safetensors, gguf or pytorch\n");
    return 2;
  }
  fixture::Result r = fixture::make_fixture(o);
  if (!r.error.empty()) {
    std::fprintf(stderr, "ckpt fixture: %s\n", r.error.c_str());
    return 2;
  }
  std::printf("%s: %llu tensors, %zu files, %llu bytes\n", r.model_dir.c_str(), (unsigned long long)r.tensors,
              r.files.size(), (unsigned long long)r.bytes);
  return 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("fixture", "generate a tiny synthetic checkpoint (optionally with planted defects)", run_fixture);

}  // namespace ckpt::cli
