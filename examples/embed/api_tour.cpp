// The rest of libckpt's public API in one run: make a fixture, verify it, render the report
// as JSON, and render a chat template.   api_tour OUT_DIR
#include <cstdio>
#include <string>

#include <ckpt/ckpt.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  ckpt::fixture::Options fo;
  fo.arch = "llama";
  fo.out = argv[1];
  fo.defects = {"stray-shard"};
  fo.shards = 2;  // a stray shard needs an index
  ckpt::fixture::Result made = ckpt::fixture::make_fixture(fo);
  if (!made.error.empty()) {
    std::fprintf(stderr, "fixture: %s\n", made.error.c_str());
    return 2;
  }
  ckpt::LoadResult loaded = ckpt::load_checkpoint(made.model_dir.string());
  if (loaded.error) return 2;
  ckpt::Report report;
  report.target = made.model_dir.string();
  report.findings = ckpt::run_checks(*loaded.checkpoint);
  report.summary = ckpt::count_findings(report.findings);
  std::fputs(ckpt::render_json(report).c_str(), stdout);

  ckpt::json::Object message = {{"role", "user"}, {"content", "hi"}};
  ckpt::json::Object context = {{"messages", ckpt::json::Array{ckpt::json::Value(message)}}};
  auto rendered = ckpt::jinja::render_string(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}", ckpt::json::Value(context));
  if (!rendered.ok()) {
    std::fprintf(stderr, "template: %s\n", rendered.error->format().c_str());
    return 1;
  }
  std::printf("template: %s\n", rendered.output.c_str());
  return 0;
}
