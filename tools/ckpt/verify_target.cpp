#include "verify_target.h"

#include <chrono>
#include <filesystem>
#include <memory>

namespace ckpt::cli {

namespace {

bool matches(const std::string& code, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (code.rfind(p, 0) == 0) return true;  // exact code or a family/prefix such as "ST" or "IX00"
  return false;
}

}  // namespace

bool VerifySettings::keeps(const std::string& code) const {
  if (!ignore_codes.empty() && matches(code, ignore_codes)) return false;
  return select_codes.empty() || matches(code, select_codes);
}

bool TargetResult::failed() const {
  if (!load_error.empty()) return true;
  return report.summary.errors > 0 || (strict && report.summary.warnings > 0);
}

std::string file_prefix_for(const std::string& target) {
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec)) {
    std::string p = target;
    if (!p.empty() && p.back() != '/') p += '/';
    return p;
  }
  if (std::filesystem::is_regular_file(target, ec) && !std::filesystem::path(target).parent_path().empty())
    return std::filesystem::path(target).parent_path().string() + "/";  // a .gguf target
  return {};
}

TargetResult verify_target(const std::string& target, const VerifySettings& settings, DeepProgress* progress,
                           bool keep_model) {
  TargetResult out;
  out.strict = settings.strict;
  out.report.target = target;
  auto t0 = std::chrono::steady_clock::now();
  auto loaded = std::make_unique<LoadResult>(load_checkpoint(target, settings.load));
  if (loaded->error) {
    out.load_error = loaded->error->message;
    return out;
  }
  const Checkpoint& ck = *loaded->checkpoint;
  VerifyOptions opts;
  opts.deep = settings.deep;
  opts.engines = settings.selection;
  // A GGUF-only target is judged for llama.cpp, the runtime its format belongs to, unless
  // --engine names others.
  if (!settings.engines_given && settings.gguf_default && ck.shards.empty() && !ck.gguf_models.empty())
    opts.engines = settings.gguf_default;
  opts.progress = progress;
  std::vector<Finding> all = run_checks(ck, opts);
  auto t1 = std::chrono::steady_clock::now();

  Report& report = out.report;
  report.root = ck.root.string();
  report.file_prefix = file_prefix_for(target);
  for (auto& f : all) {
    if (settings.keeps(f.code)) report.findings.push_back(std::move(f));
  }
  report.summary = summary_for(report.findings, ck);
  report.elapsed_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (keep_model) (void)loaded.release();  // deliberately never freed (see verify_target.h)
  return out;
}

}  // namespace ckpt::cli
