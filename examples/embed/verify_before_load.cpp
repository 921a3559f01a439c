// What an inference engine writes to refuse a broken checkpoint: verify the directory it is
// about to load, print the findings, and load only when there is no error.
//   verify_before_load MODEL_DIR [ENGINE]     exit 0: loaded; 1: refused; 2: cannot read it
#include <cstdio>
#include <string>
#include <vector>

#include <ckpt/ckpt.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [ENGINE]\n", argv[0]);
    return 2;
  }
  std::string model_dir = argv[1];

  // The engine this program is: its profile decides what is an error (here: vllm by default).
  std::string error;
  auto engines = ckpt::engines::parse_selection({argc > 2 ? argv[2] : "vllm"}, &error);
  if (!engines) {
    std::fprintf(stderr, "unknown engine: %s\n", error.c_str());
    return 2;
  }

  ckpt::LoadResult loaded = ckpt::load_checkpoint(model_dir);
  if (loaded.error) {
    std::fprintf(stderr, "cannot read %s: %s\n", model_dir.c_str(), loaded.error->message.c_str());
    return 2;
  }
  ckpt::VerifyOptions options;
  options.engines = &*engines;
  ckpt::Report report;
  report.target = model_dir;
  report.findings = ckpt::run_checks(*loaded.checkpoint, options);
  report.summary = ckpt::count_findings(report.findings);

  if (report.summary.errors > 0) {
    std::fputs(ckpt::render_text(report, /*color=*/false).c_str(), stderr);
    std::fprintf(stderr, "refusing to load %s: %llu errors\n", model_dir.c_str(),
                 static_cast<unsigned long long>(report.summary.errors));
    return 1;
  }
  for (const ckpt::Finding& f : report.findings)  // warnings and infos: log them, load anyway
    std::fprintf(stderr, "ckpt %s %s: %s\n", std::string(ckpt::severity_name(f.severity)).c_str(),
                 f.code.c_str(), f.message.c_str());
  std::printf("loading %s (%zu tensors checked by libckpt %s)\n", model_dir.c_str(),
              loaded.checkpoint->total_tensors(), CKPT_VERSION_STRING);
  return 0;
}
