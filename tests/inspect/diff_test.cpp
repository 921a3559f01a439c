// `ckpt diff`: the template incident between two cache revisions, and every kind of change the
// issue names, each planted by hand in a copy of a fixture.
#include <fstream>

#include "inspect/diff.h"
#include "standin.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const fs::path& out, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {"fixture", "llama", out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  auto r = run_ckpt(a);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// A copy of a plain fixture directory (files copied, not linked).
fs::path copy_dir(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

json::Value diff_json(const std::string& a, const std::string& b, std::vector<std::string> extra = {},
                      int want_exit = 1, const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {"diff", a, b, "--format", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_ckpt(args, env);
  EXPECT_EQ(r.exit_code, want_exit) << r.out << r.err;
  return parse_json_text(r.out);
}

std::string blob_name_for(const std::string& text) {
  // any unique name serves as a blob name here; the cache only needs the file under blobs/
  return std::to_string(std::hash<std::string>{}(text)) + "0000000000000000000000";
}

// ---- the incident -------------------------------------------------------------------------

// The template every revision of the incident ships (a ChatML template that opens with the BOS
// token); revision 2 differs only in the broken tag `{- bos_token -}}`.
const char* kTemplate =
    "{{- bos_token -}}\n"
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

struct Cache {
  TempDir root;
  fs::path repo;
  std::string commit(const std::string& ref) const { return read_text(repo / "refs" / ref); }
};

// Adds snapshot `ref` to the cache: every file of the fixture's snapshot (same blobs) plus a
// chat_template.jinja blob holding `tmpl`.
void add_revision(const Cache& c, const std::string& ref, const std::string& tmpl, const std::string& commit) {
  const fs::path base = c.repo / "snapshots" / c.commit("main");
  const fs::path snap = c.repo / "snapshots" / commit;
  fs::create_directories(snap);
  for (const auto& e : fs::directory_iterator(base)) fs::create_symlink(fs::read_symlink(e.path()), snap / e.path().filename());
  const std::string blob = blob_name_for(tmpl);
  write_text(c.repo / "blobs" / blob, tmpl);
  fs::create_symlink(fs::path("../../blobs") / blob, snap / "chat_template.jinja");
  write_text(c.repo / "refs" / ref, commit);
}

std::unique_ptr<Cache> incident_cache() {
  auto c = std::make_unique<Cache>();
  auto r = run_ckpt({"fixture", "llama", c->root.path().string(), "--hf-cache", "org/name"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  c->repo = c->root / "models--org--name";
  std::string broken = kTemplate;
  broken.replace(broken.find("{{- bos_token -}}"), 17, "{- bos_token -}}");
  add_revision(*c, "rev1", kTemplate, std::string(40, '1'));
  add_revision(*c, "rev2", broken, std::string(40, '2'));
  return c;
}

TEST(Diff, TemplateIncidentBetweenTwoCacheRevisions) {
  auto c = incident_cache();
  const std::vector<std::string> env = {"HF_HUB_CACHE=" + c->root.path().string()};
  auto r = run_ckpt({"diff", "org/name@rev1", "org/name@rev2"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // the template line, numbered, both sides
  EXPECT_NE(r.out.find("@@ -1,4 +1,4 @@"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    1       - {{- bos_token -}}\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("          1 + {- bos_token -}}\n"), std::string::npos) << r.out;
  // the weights are the same blobs
  EXPECT_NE(r.out.find("weights: unchanged (same blobs)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("changed chat_template.jinja (blob"), std::string::npos) << r.out;

  json::Value j = diff_json("org/name@rev1", "org/name@rev2", {}, 1, env);
  EXPECT_EQ(j.get_bool("identical"), false);
  const json::Value& files = *j.find("files");
  ASSERT_EQ(files.find("changed")->as_array().size(), 1u);
  EXPECT_EQ(files.find("changed")->as_array()[0].get_string("path"), "chat_template.jinja");
  EXPECT_EQ(files.find("changed")->as_array()[0].get_string("basis"), "blob");
  EXPECT_TRUE(files.find("added")->as_array().empty());
  EXPECT_TRUE(files.find("removed")->as_array().empty());
  EXPECT_EQ(j.find("weights")->get_bool("identical"), true);
  EXPECT_EQ(j.find("weights")->get_string("basis"), "blobs");
  EXPECT_TRUE(j.find("config")->as_array().empty());
  ASSERT_EQ(j.find("templates")->as_array().size(), 1u);
  const json::Value& t = j.find("templates")->as_array()[0];
  EXPECT_EQ(t.get_string("name"), "default");
  EXPECT_EQ(t.get_string("origin_a"), "chat_template.jinja");
  std::vector<std::string> changed;
  for (const auto& h : t.find("hunks")->as_array())
    for (const auto& l : h.find("lines")->as_array())
      if (l.get_string("op") != " ") changed.push_back(*l.get_string("op") + *l.get_string("text"));
  EXPECT_EQ(changed, (std::vector<std::string>{"-{{- bos_token -}}", "+{- bos_token -}}"}));
  const json::Value& tensors = *j.find("tensors");
  for (const char* k : {"added_count", "removed_count", "reshaped_count", "retyped_count", "moved_count"})
    EXPECT_EQ(tensors.get_int(k), 0) << k;
  EXPECT_EQ(j.find("tokenizer")->get_int("added_count"), 0);

  // the same revision twice: identical, exit 0
  auto same = run_ckpt({"diff", "org/name@rev1", "org/name@rev1"}, env);
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_NE(same.out.find("identical"), std::string::npos);
  // a commit hash works as a revision too
  EXPECT_EQ(run_ckpt({"diff", "org/name@" + std::string(40, '1'), "org/name@rev1"}, env).exit_code, 0);
}

// ---- plain directories ----------------------------------------------------------------------

TEST(Diff, IdenticalDirectoriesAndDeep) {
  TempDir tmp;
  auto a = fixture(tmp / "a"), b = fixture(tmp / "b");  // same seed: byte-identical
  json::Value j = diff_json(a.string(), b.string(), {}, 0);
  EXPECT_EQ(j.get_bool("identical"), true);
  EXPECT_EQ(j.find("weights")->get_string("basis"), "size and header");
  EXPECT_EQ(j.find("files")->find("not_compared")->as_array().size(), 1u);  // model.safetensors
  json::Value deep = diff_json(a.string(), b.string(), {"--deep"}, 0);
  EXPECT_EQ(deep.find("weights")->get_string("basis"), "sha256");
  EXPECT_TRUE(deep.find("files")->find("not_compared")->as_array().empty());
  // a different seed: same headers, other bytes; only --deep sees it, down to the tensors
  auto c = fixture(tmp / "c", {"--seed", "7"});
  EXPECT_EQ(run_ckpt({"diff", a.string(), c.string()}).exit_code, 0);
  json::Value dc = diff_json(a.string(), c.string(), {"--deep"}, 1);
  EXPECT_EQ(dc.find("weights")->get_bool("identical"), false);
  ASSERT_EQ(dc.find("files")->find("changed")->as_array().size(), 1u);
  EXPECT_EQ(dc.find("files")->find("changed")->as_array()[0].get_string("basis"), "sha256");
  EXPECT_GT(*dc.find("tensors")->get_int("content_changed_count"), 0);
}

TEST(Diff, ConfigKeysAsPointerPaths) {
  TempDir tmp;
  auto a = fixture(tmp / "a");
  auto b = copy_dir(a, tmp / "b");
  json::Value cfg = parse_json_text(read_text(b / "config.json"));
  json::Object& o = cfg.mutable_object();
  for (auto& [k, v] : o)
    if (k == "rope_theta") v = json::Value(500000.0);
  std::erase_if(o, [](const json::Member& m) { return m.first == "rms_norm_eps"; });
  o.emplace_back("rope_scaling", json::Value(json::Object{{"rope_type", "llama3"}, {"factor", 8.0}}));
  o.emplace_back("a/b~c", json::Value(1));
  write_text(b / "config.json", cfg.dump());
  json::Value j = diff_json(a.string(), b.string());
  std::map<std::string, std::string> got;
  for (const auto& v : j.find("config")->as_array())
    got[*v.get_string("path")] = *v.get_string("change");
  EXPECT_EQ(got["/rope_theta"], "changed");
  EXPECT_EQ(got["/rms_norm_eps"], "removed");
  EXPECT_EQ(got["/rope_scaling"], "added");
  EXPECT_EQ(got["/a~1b~0c"], "added");  // JSON-pointer escapes
  EXPECT_EQ(got.size(), 4u);
  // the file itself changed by content (a small side file)
  const auto& changed = j.find("files")->find("changed")->as_array();
  ASSERT_EQ(changed.size(), 1u);
  EXPECT_EQ(changed[0].get_string("path"), "config.json");
  // nested: an edit inside an object is reported at its own path
  json::Value c2 = parse_json_text(read_text(b / "config.json"));
  for (auto& [k, v] : c2.mutable_object())
    if (k == "rope_scaling")
      for (auto& [k2, v2] : v.mutable_object())
        if (k2 == "factor") v2 = json::Value(32.0);
  auto c = copy_dir(b, tmp / "c");
  write_text(c / "config.json", c2.dump());
  json::Value j2 = diff_json(b.string(), c.string());
  ASSERT_EQ(j2.find("config")->as_array().size(), 1u);
  EXPECT_EQ(j2.find("config")->as_array()[0].get_string("path"), "/rope_scaling/factor");
  EXPECT_EQ(j2.find("config")->as_array()[0].find("a")->as_double(), 8.0);
  EXPECT_EQ(j2.find("config")->as_array()[0].find("b")->as_double(), 32.0);
}

TEST(Diff, TokenizerTokensAndSpecials) {
  TempDir tmp;
  auto a = fixture(tmp / "a");
  auto b = copy_dir(a, tmp / "b");
  json::Value tok = parse_json_text(read_text(b / "tokenizer.json"));
  json::Value tc = parse_json_text(read_text(b / "tokenizer_config.json"));
  // in B: "he" is gone, "ll" moves to id 500, "<tool>" (id 501) is new and special, "<pad>" is no
  // longer special, and the eos token is "<|endoftext|>"
  for (auto& [k, v] : tok.mutable_object()) {
    if (k == "model")
      for (auto& [k2, v2] : v.mutable_object()) {
        if (k2 != "vocab") continue;
        auto& vocab = v2.mutable_object();
        std::erase_if(vocab, [](const json::Member& m) { return m.first == "he"; });
        for (auto& [t, id] : vocab)
          if (t == "ll") id = json::Value(500);
      }
    if (k == "added_tokens") {
      for (auto& e : v.mutable_array())
        if (e.get_string("content") == "<pad>")
          for (auto& [k3, v3] : e.mutable_object())
            if (k3 == "special") v3 = json::Value(false);
      v.mutable_array().push_back(json::Value(json::Object{{"id", 501}, {"content", "<tool>"}, {"special", true}}));
    }
  }
  for (auto& [k, v] : tc.mutable_object())
    if (k == "eos_token") v = json::Value("<|endoftext|>");
  write_text(b / "tokenizer.json", tok.dump());
  write_text(b / "tokenizer_config.json", tc.dump());
  json::Value j = diff_json(a.string(), b.string());
  const json::Value& t = *j.find("tokenizer");
  EXPECT_EQ(t.get_bool("compared"), true);
  ASSERT_EQ(t.get_int("added_count"), 1);
  EXPECT_EQ(t.find("added")->as_array()[0].get_string("token"), "<tool>");
  EXPECT_EQ(t.find("added")->as_array()[0].get_int("id_b"), 501);
  ASSERT_EQ(t.get_int("removed_count"), 1);
  EXPECT_EQ(t.find("removed")->as_array()[0].get_string("token"), "he");
  ASSERT_EQ(t.get_int("renumbered_count"), 1);
  EXPECT_EQ(t.find("renumbered")->as_array()[0].get_string("token"), "ll");
  EXPECT_EQ(t.find("renumbered")->as_array()[0].get_int("id_b"), 500);
  std::map<std::string, std::pair<std::string, std::string>> sp;
  for (const auto& s : t.find("special_tokens")->as_array())
    sp[*s.get_string("name")] = {s.get_string("a").value_or(""), s.get_string("b").value_or("")};
  EXPECT_EQ(sp["eos_token"], (std::pair<std::string, std::string>{"<|im_end|> (2)", "<|endoftext|> (0)"}));
  EXPECT_EQ(sp["<pad> special"], (std::pair<std::string, std::string>{"true", "false"}));
  EXPECT_EQ(sp.size(), 2u);
}

TEST(Diff, TensorsAddedRemovedReshapedRetypedMoved) {
  TempDir tmp;
  auto write = [](const fs::path& dir, const std::vector<Planned>& ts) {
    fs::create_directories(dir);
    write_shards(dir, ts);
  };
  // no config: the tensor table alone
  write(tmp / "a", {{"w.keep", "model-00001-of-00002.safetensors", st::DType::F16, {4, 4}},
                    {"w.gone", "model-00001-of-00002.safetensors", st::DType::F16, {4}},
                    {"w.shape", "model-00001-of-00002.safetensors", st::DType::F16, {4, 8}},
                    {"w.type", "model-00002-of-00002.safetensors", st::DType::F16, {8}},
                    {"w.move", "model-00002-of-00002.safetensors", st::DType::F16, {8}}});
  write(tmp / "b", {{"w.keep", "model-00001-of-00002.safetensors", st::DType::F16, {4, 4}},
                    {"w.shape", "model-00001-of-00002.safetensors", st::DType::F16, {8, 4}},
                    {"w.move", "model-00001-of-00002.safetensors", st::DType::F16, {8}},
                    {"w.type", "model-00002-of-00002.safetensors", st::DType::BF16, {8}},
                    {"w.new", "model-00002-of-00002.safetensors", st::DType::F32, {2}}});
  json::Value j = diff_json((tmp / "a").string(), (tmp / "b").string());
  const json::Value& t = *j.find("tensors");
  auto names = [&](const char* k) {
    std::vector<std::string> n;
    for (const auto& e : t.find(k)->as_array()) n.push_back(*e.get_string("name"));
    return n;
  };
  EXPECT_EQ(names("added"), std::vector<std::string>{"w.new"});
  EXPECT_EQ(names("removed"), std::vector<std::string>{"w.gone"});
  EXPECT_EQ(names("reshaped"), std::vector<std::string>{"w.shape"});
  EXPECT_EQ(names("retyped"), std::vector<std::string>{"w.type"});
  EXPECT_EQ(names("moved"), std::vector<std::string>{"w.move"});
  EXPECT_EQ(t.find("moved")->as_array()[0].get_string("file_a"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(t.find("moved")->as_array()[0].get_string("file_b"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(t.find("reshaped")->as_array()[0].find("shape_b")->as_array()[0].as_int(), 8);
  EXPECT_EQ(t.get_int("unchanged"), 1);
  EXPECT_EQ(j.find("weights")->get_bool("identical"), false);
  auto text = run_ckpt({"diff", (tmp / "a").string(), (tmp / "b").string()});
  EXPECT_NE(text.out.find("retyped w.type: F16 -> BF16"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("moved w.move: model-00002-of-00002.safetensors -> model-00001-of-00002.safetensors"),
            std::string::npos);
}

TEST(Diff, SameSizeOtherDtypeIsAWeightChange) {
  TempDir tmp;
  auto a = fixture(tmp / "a"), b = fixture(tmp / "b", {"--dtype", "BF16"});
  json::Value j = diff_json(a.string(), b.string());
  // F16 and BF16 take the same bytes: the files agree in size, the headers do not
  EXPECT_EQ(j.find("weights")->get_bool("identical"), false);
  const json::Value& t = *j.find("tensors");
  EXPECT_EQ(*t.get_int("retyped_count"), *j.find("a")->get_int("tensors"));
  EXPECT_EQ(t.get_int("unchanged"), 0);
  bool dtype_key = false;
  for (const auto& v : j.find("config")->as_array()) dtype_key |= v.get_string("path") == "/torch_dtype";
  EXPECT_TRUE(dtype_key);
}

TEST(Diff, FilesAddedAndRemovedAndErrors) {
  TempDir tmp;
  auto a = fixture(tmp / "a");
  auto b = copy_dir(a, tmp / "b");
  fs::remove(b / "generation_config.json");
  write_text(b / "chat_template.jinja", "{{ messages[0]['content'] }}\n");
  json::Value j = diff_json(a.string(), b.string());
  EXPECT_EQ(j.find("files")->find("added")->as_array()[0].get_string("path"), "chat_template.jinja");
  EXPECT_EQ(j.find("files")->find("removed")->as_array()[0].get_string("path"), "generation_config.json");
  // the .jinja file now wins over tokenizer_config.json's template
  ASSERT_EQ(j.find("templates")->as_array().size(), 1u);
  EXPECT_EQ(j.find("templates")->as_array()[0].get_string("origin_b"), "chat_template.jinja");
  EXPECT_EQ(run_ckpt({"diff", a.string(), (tmp / "absent").string()}).exit_code, 2);
  EXPECT_EQ(run_ckpt({"diff", a.string()}).exit_code, 2);
}

// ---- the line diff against diff(1) ----------------------------------------------------------

std::string numbered_free(const std::string& rendered) {
  // keeps the hunk headers and the op + text of each line: the form `diff -u` prints
  std::string out;
  size_t pos = 0;
  while (pos < rendered.size()) {
    size_t nl = rendered.find('\n', pos);
    std::string line = rendered.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.starts_with("---") || line.starts_with("+++")) continue;
    if (line.starts_with("@@")) out += line + "\n";
    else out += line.substr(12, 1) + line.substr(14) + "\n";
  }
  return out;
}

TEST(LineDiff, AgreesWithGnuDiff) {
  TempDir tmp;
  std::string base;
  for (int i = 1; i <= 30; ++i) base += "line " + std::to_string(i) + "\n";
  auto edit = [&](std::initializer_list<std::pair<int, std::string>> repl, std::initializer_list<int> drop = {},
                  std::initializer_list<std::pair<int, std::string>> insert_after = {}) {
    std::string out;
    for (int i = 1; i <= 30; ++i) {
      bool dropped = false;
      for (int d : drop) dropped |= d == i;
      std::string line = "line " + std::to_string(i);
      for (auto& [n, s] : repl)
        if (n == i) line = s;
      if (!dropped) out += line + "\n";
      for (auto& [n, s] : insert_after)
        if (n == i) out += s + "\n";
    }
    return out;
  };
  const std::vector<std::string> cases = {
      edit({{2, "changed two"}}),
      edit({{1, "first"}, {30, "last"}}),
      edit({{5, "five"}, {9, "nine"}}),            // close: one hunk
      edit({{5, "five"}, {20, "twenty"}}),         // far: two hunks
      edit({}, {3, 4, 5}),
      edit({}, {}, {{10, "new a"}, {10, "new b"}}),
      edit({{15, "x"}}, {16}, {{29, "y"}}),
  };
  for (const auto& b : cases) {
    write_text(tmp / "a", base);
    write_text(tmp / "b", b);
    auto gnu = run_program({"diff", "-U3", (tmp / "a").string(), (tmp / "b").string()});
    ASSERT_EQ(gnu.exit_code, 1);
    std::string want = gnu.out.substr(gnu.out.find("@@"));
    std::string got = numbered_free(diff::render_hunks(diff::line_diff(base, b, 3), "a", "b"));
    EXPECT_EQ(got, want) << b;
  }
  EXPECT_TRUE(diff::line_diff(base, base).empty());
  // line numbers on both sides
  auto h = diff::line_diff("a\nb\nc\n", "a\nB\nc\n", 1);
  ASSERT_EQ(h.size(), 1u);
  ASSERT_EQ(h[0].lines.size(), 4u);
  EXPECT_EQ(h[0].lines[1].op, '-');
  EXPECT_EQ(h[0].lines[1].a_line, 2u);
  EXPECT_EQ(h[0].lines[2].op, '+');
  EXPECT_EQ(h[0].lines[2].b_line, 2u);
}

}  // namespace
}  // namespace ckpt::test
