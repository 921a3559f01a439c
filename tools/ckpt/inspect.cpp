// ckpt inspect TARGET: what a checkpoint costs to serve (parameters, bytes, quantization, KV
// cache, fit on a GPU), from its headers and config alone.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/engines.h"
#include "ckpt/timings.h"
#include "inspect/inspect.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

namespace {

int run_inspect(int argc, char** argv) {
  CLI::App app{"Report what a checkpoint costs to serve, from its headers and config: parameters (total, by "
               "dtype, by component, active per token), bytes on disk and in memory, quantization (effective "
               "bits per weight), the KV cache per token and for a context and batch, and whether it fits a GPU. "
               "Exit 0: reported (and fits, with --gpu-memory); 1: does not fit; 2: usage or unreadable target."};
  app.name(argv[0]);
  std::string target, format = "text", gpu, overhead, mla = "latent", swa = "window";
  inspect::Options o;
  uint64_t context = 0, batch = 1;
  app.add_option("TARGET", target, "model directory, HF cache snapshot directory, or org/name[@revision] in the local HF cache")
      ->required();
  app.add_option("--context", context, "context length per sequence (default: max_position_embeddings)");
  app.add_option("--batch", batch, "concurrent sequences (default 1)")->check(CLI::PositiveNumber);
  app.add_option("--kv-dtype", o.kv.dtype, "KV-cache dtype (auto: the serving dtype of the weights)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "fp8", "q8_0", "q4_0"}));
  app.add_option("--mla", mla, "MLA cache: latent (kv_lora_rank + rope dim, as vLLM/SGLang/llama.cpp) or full (per-head K and V)")
      ->check(CLI::IsMember({"latent", "full"}));
  app.add_option("--swa", swa, "sliding-window layers: window (capped at the window) or full (the whole context)")
      ->check(CLI::IsMember({"window", "full"}));
  app.add_option("--state-dtype", o.kv.state_dtype, "linear-attention state dtype (auto: conv at the serving dtype, "
                 "recurrent at the config's mamba_ssm_dtype)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16"}));
  std::string engine;
  app.add_option("--engine", engine, "size the KV cache as this engine lays it out (vllm, sglang, llama.cpp, transformers, "
                 "mlx-lm): MLA latent or per-head K/V, default cache dtype; --mla/--kv-dtype still override");
  app.add_option("--gpu-memory", gpu, "GPU memory to fit into (80GB, 80GiB, 24G = GiB, bytes)");
  app.add_option("--overhead", overhead, "replace the activation/workspace allowance with this size");
  app.add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
  if (auto code = parse_args(app, argc, argv)) return *code;
  if (!gpu.empty()) {
    o.gpu_memory = inspect::parse_size(gpu);
    if (!o.gpu_memory) {
      std::fprintf(stderr, "ckpt inspect: --gpu-memory: '%s' is not a size (e.g. 80GB, 24GiB)\n", gpu.c_str());
      return 2;
    }
  }
  if (!overhead.empty()) {
    o.overhead = inspect::parse_size(overhead);
    if (!o.overhead) {
      std::fprintf(stderr, "ckpt inspect: --overhead: '%s' is not a size\n", overhead.c_str());
      return 2;
    }
  }
  if (!engine.empty()) {
    std::string err;
    auto profile = engines::find_profile(engine, &err);
    const inspect::EngineKv* kv = profile ? inspect::engine_kv(profile->name) : nullptr;
    if (!kv) {
      std::fprintf(stderr, "ckpt inspect: --engine %s: %s\n", engine.c_str(),
                   !profile ? err.c_str() : "no KV-cache facts for this engine (vllm, sglang, llama.cpp, transformers, mlx-lm have them)");
      return 2;
    }
    o.engine = std::string(kv->engine);
    if (!app.count("--mla")) mla = kv->mla_full ? "full" : "latent";
    if (!app.count("--kv-dtype") && !kv->kv_dtype.empty()) o.kv.dtype = std::string(kv->kv_dtype);
  }
  o.context = context;
  o.batch = batch;
  o.kv.mla_full = mla == "full";
  o.kv.swa_full = swa == "full";
  timings::mark("cli: parse arguments");
  // Deliberately never freed (as in verify): the process exits right after rendering.
  auto* loaded = new LoadResult(load_checkpoint(target));
  if (loaded->error) {
    std::fprintf(stderr, "ckpt inspect: %s\n", loaded->error->message.c_str());
    return 2;
  }
  const Checkpoint& ck = *loaded->checkpoint;
  if (ck.weights().empty() && ck.gguf_models.empty()) {
    std::fprintf(stderr, "ckpt inspect: %s: no tensors could be read (run `ckpt verify %s`)\n",
                 target.c_str(), target.c_str());
    return 2;
  }
  inspect::Inspection in = inspect::inspect(ck, o);
  timings::mark("inspect: count, kv, fit");
  std::string text = format == "json" ? inspect::render_json(in) : inspect::render_text(in);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  timings::mark("render + write");
  timings::report();
  return in.fit && !in.fit->fits ? 1 : 0;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("inspect", "what a checkpoint costs to serve: parameters, bytes, quantization, KV cache, fit",
                         run_inspect);

}  // namespace ckpt::cli
