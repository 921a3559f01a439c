// @huggingface/jinja itself as the oracle of Runtime::hf_jinja: the real engine (npm, installed
// by scripts/test.sh into tests/oracles/node_modules) renders the 216 corpus templates in their
// four contexts and the trim-mode reference fixtures; ckpt renders the same cases with its
// hf_jinja runtime and with Python's. Skipped, visibly, without Node or the package.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "ckpt/jinja.h"
#include "ckpt/json.h"
#include "test_support.h"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

struct Case {
  std::string id, tmpl;
  json::Value ctx;
};

json::Value parse_json(const std::string& text) {
  auto r = json::parse(text);
  return r.ok() ? r.value : json::Value();
}

}  // namespace

TEST(JinjaHfjsOracle, HfRuntimeAgreesWithHuggingfaceJinja) {
  CKPT_REQUIRE_CORPUS();
  const fs::path oracle_dir = fs::path(CKPT_SOURCE_DIR) / "tests/oracles";
  if (!fs::exists(oracle_dir / "node_modules/@huggingface/jinja/package.json"))
    GTEST_SKIP() << "@huggingface/jinja not installed in tests/oracles (scripts/test.sh installs it with npm)";
  if (test::run_program({"node", "--version"}).exit_code != 0) GTEST_SKIP() << "node not found";

  const fs::path root = test::corpus_dir() / "template-cases";
  std::vector<Case> cases;
  json::Value contexts = parse_json(test::read_text(root / "probe/contexts.json"));
  std::ifstream probe(root / "probe/probe.results.jsonl");
  std::string line;
  while (std::getline(probe, line)) {
    json::Value rec = parse_json(line);
    const std::string path = *rec.get_string("template"), cn = *rec.get_string("context");
    cases.push_back({path + "@" + cn, test::read_text(test::corpus_dir() / "templates" / path), *contexts.find(cn)});
  }
  for (const auto& entry : fs::directory_iterator(root / "reference")) {
    const std::string group = entry.path().filename().string();
    if (group.rfind("huggingface.js_jinja_templates", 0) == 0) continue;  // recorded without trim_blocks
    json::Value doc = parse_json(test::read_text(entry.path()));
    if (!doc.is_array()) continue;  // one file holds a lone surrogate escape
    for (const auto& c : doc.as_array()) {
      json::Value ctx = c.find("context") && c.find("context")->is_object() ? *c.find("context") : json::Value(json::Object{});
      cases.push_back({group + ":" + *c.get_string("id"), *c.get_string("template"), ctx});
    }
  }
  std::string req;
  for (const auto& c : cases)
    req += json::Value(json::Object{{"id", c.id}, {"template", c.tmpl}, {"context", c.ctx}}).dump() + "\n";
  auto r = test::run_program({"node", (oracle_dir / "hfjs_render.mjs").string()}, {"TZ=UTC"}, req);
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 500);
  std::map<std::string, json::Value> got;
  std::istringstream in(r.out);
  while (std::getline(in, line)) {
    json::Value v = parse_json(line);
    if (auto id = v.get_string("id")) got[*id] = v;
  }
  ASSERT_EQ(got.size(), cases.size());

  size_t compared = 0, py_equal = 0, hf_equal = 0, lost = 0;
  std::string lost_ids;
  for (const auto& c : cases) {
    const json::Value& o = got[c.id];
    if (!o.get_bool("ok").value_or(false)) continue;
    const std::string expected = *o.get_string("output");
    jinja::Options opts;  // trim_blocks and lstrip_blocks on, as hf.js's Template renders
    opts.now = 1721995200;
    auto py = jinja::render_string(c.tmpl, c.ctx, opts, c.id);
    opts.runtime = jinja::Runtime::hf_jinja;
    auto hf = jinja::render_string(c.tmpl, c.ctx, opts, c.id);
    if (!py.ok() || !hf.ok()) continue;
    if (c.tmpl.find("strftime_now") != std::string::npos) continue;  // hf.js reads the real clock
    ++compared;
    const bool p = py.output == expected, h = hf.output == expected;
    py_equal += p;
    hf_equal += h;
    if (p && !h && ++lost <= 10) lost_ids += c.id + " ";
  }
  std::printf("@huggingface/jinja renders reproduced: Python runtime %zu, hf_jinja runtime %zu of %zu\n", py_equal,
              hf_equal, compared);
  EXPECT_GT(compared, 1000u);
  EXPECT_GT(hf_equal, py_equal);
  EXPECT_EQ(lost, 0u) << "reproduced by the Python runtime only: " << lost_ids;
}
