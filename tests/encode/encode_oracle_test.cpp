// ckpt's encoders against the references: @huggingface/tokenizers (tests/oracles/tok_encode.mjs)
// for tokenizer.json, python3 sentencepiece for tokenizer.model. Fixtures are generated at test
// time with tools/smoke/train_tiny.py's writers; the corpus fixtures are used when present.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "ckpt/encode.h"
#include "ckpt/json.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ckpt::test::read_text;
using ckpt::test::run_program;
using ckpt::test::TempDir;
using ckpt::test::write_text;

namespace {

const char* kPython = "/usr/bin/python3";

std::vector<std::string> test_strings() {
  std::string ref = read_text(fs::path(CKPT_SOURCE_DIR) / "src/smoke/reference.txt");
  std::vector<std::string> out;
  out.push_back(ref);
  std::istringstream is(ref);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(is, line)) lines.push_back(line);
  for (const auto& l : lines) {
    out.push_back(l);
    out.push_back(l + "\n");
    std::string upper = l;
    for (char& c : upper)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    out.push_back(upper);
    out.push_back("  " + l + "   ");
  }
  for (size_t i = 0; i + 1 < lines.size(); i += 2) out.push_back(lines[i] + "\n\n" + lines[i + 1]);
  const char* hard[] = {
      "I'm", "DON'T", "you're we've they'll he'd it's", "'S 'T 'RE 'VE 'M 'LL 'D", "she'll've", "12345",
      "1234567890 3.14159 1,000,000", "  \n\n\t x", "   ", " ", "\n", "\t", "x\r\ny\r\n", "a  b   c    d",
      "hello world", " hello", "hello ", "café naïve 日本語 🙂", "e\u0301", "Å Å", "ÀÉÎÕÜ àéîõü", "ﬁ ligature ①②③",
      "Straße İstanbul", "😀😃😄👍🏽", "\u00a0nbsp\u2003em", "<|im_start|>user\nhello<|im_end|>\n",
      "<|endoftext|>", "a<|endoftext|>b", "<|im_start|><|im_end|>", "<s>hi</s>", "<|begin_of_text|>x<|end_of_text|>",
      "<|end|>", "<|im_start", "def f(x):\n    return x**2  # square\n",
      "for (int i = 0; i < n; ++i) { a[i] = b[i]; }", "#include <stdio.h>\nint main() { printf(\"%d\\n\", 42); }",
      "Hello, World!!!", "...", "--- *** ===", "mixed123abc456", "ABC123def", "The year 2024-12-03.",
      "email@example.com https://example.com/path?q=1&r=2", "tab\tsep\tvalues", "trailing spaces    ",
      "   leading spaces", "CamelCaseWordsHere", "UPPER lower MiXeD", "Привет мир", "مرحبا بالعالم", "שלום",
      "γειά σου κόσμε", "한국어 텍스트", "中文，标点。", "\u200b zero width", "x\u0300\u0301\u0302",
      "'''quoted'''", "\"double\" 'single'", "a\n\n\nb", "\n\n", " \n ", "$100 & 50%", "[1, 2, 3]", "<|user|>hello <|user|> the thing", "XYZ QQQ qqq",
  };
  for (const char* h : hard) out.push_back(h);
  out.push_back("");
  return out;
}

// Writes tokenizer.json files in the styles transformers' converters give SentencePiece BPE
// models (gemma, llama 2, Metaspace) plus a mix of normalizers / pre-tokenizers, from the
// generated tokenizer.model: vocab = pieces, merges ordered by the merged piece's score.
const char* kSpmToHf = R"PY(import sys, os, json, sentencepiece
src, out = sys.argv[1], sys.argv[2]
sp = sentencepiece.SentencePieceProcessor(model_file=src)
n = sp.get_piece_size()
vocab = {sp.id_to_piece(i): i for i in range(n)}
scores = {sp.id_to_piece(i): sp.get_score(i) for i in range(n) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))}
merges = []
for piece, score in scores.items():
    local = [(piece[:k], piece[k:], score) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
    local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
    merges.extend(local)
merges.sort(key=lambda m: m[2], reverse=True)
special = [{"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True} for i in range(n) if sp.is_control(i) or sp.is_unknown(i)]
bos = sp.id_to_piece(sp.bos_id())
post = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {bos: {"id": bos, "ids": [sp.bos_id()], "tokens": [bos]}}}
def model(**kw):
    m = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None, "end_of_word_suffix": None,
         "fuse_unk": True, "byte_fallback": True, "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b, _ in merges]}
    m.update(kw)
    return m
styles = {
    # gemma: spaces -> U+2581, no dummy prefix, no pre-tokenizer
    "hf_gemma": {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, "pre_tokenizer": None},
    # llama 2: dummy prefix via Prepend
    "hf_llama2": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                  {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}, "pre_tokenizer": None},
    # newer llama/mistral conversions: Metaspace pre-tokenizer
    "hf_metaspace": {"normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                     "prepend_scheme": "first", "split": False}},
    "hf_metaspace_split": {"normalizer": None, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                           "prepend_scheme": "always", "split": True}},
    # a mix of normalizers and pre-tokenizers
    "hf_mixed": {"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                 {"type": "Strip", "strip_left": True, "strip_right": True},
                 {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
                 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                 {"type": "Split", "pattern": {"Regex": "\\r?\\n"}, "behavior": "Isolated", "invert": False},
                 {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
                 "model": {"ignore_merges": True, "fuse_unk": False}},
}
for name, st in styles.items():
    d = os.path.join(out, name)
    os.makedirs(d)
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
           "normalizer": st["normalizer"], "pre_tokenizer": st["pre_tokenizer"], "post_processor": post,
           "decoder": None, "model": model(**st.get("model", {}))}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
)PY";

// More SentencePiece models trained directly: llama 2 style (dummy prefix, extra whitespace
// removed, user-defined pieces), one without byte fallback (unk), and two that must be refused.
const char* kSpmMore = R"PY(import sys, os, sentencepiece
text = open(sys.argv[1]).read()
out = sys.argv[2]
lines = [l for l in text.split("\n") if l.strip()]
def train(name, **kw):
    d = os.path.join(out, name)
    os.makedirs(d)
    args = dict(sentence_iterator=iter(lines), model_prefix=os.path.join(d, "tokenizer"), vocab_size=300,
                character_coverage=1.0, num_threads=1, minloglevel=2)
    args.update(kw)
    sentencepiece.SentencePieceTrainer.train(**args)
    os.remove(os.path.join(d, "tokenizer.vocab"))
# llama 2 style: identity rules, dummy prefix, extra whitespace removed, byte fallback, user-defined pieces
train("spm_llama2", model_type="bpe", byte_fallback=True, normalization_rule_name="identity",
      add_dummy_prefix=True, remove_extra_whitespaces=True, user_defined_symbols=["<|user|>", "ing", "\u2581the"], vocab_size=420)
# no byte fallback: unknown characters become unk; whitespace as suffix; a rare character left out
train("spm_unk", model_type="bpe", byte_fallback=False, normalization_rule_name="identity",
      add_dummy_prefix=True, remove_extra_whitespaces=False, treat_whitespace_as_suffix=True, character_coverage=0.995)
# nmt_nfkc normalisation (refused); a Unigram model
train("spm_nfkc", model_type="bpe", byte_fallback=True, vocab_size=420)
train("spm_unigram", model_type="unigram", byte_fallback=True, normalization_rule_name="identity", vocab_size=400, hard_vocab_limit=False)
train("spm_unigram_unk", model_type="unigram", byte_fallback=False, normalization_rule_name="identity", vocab_size=200,
      hard_vocab_limit=False, character_coverage=0.995, user_defined_symbols=["<|user|>"])
)PY";

struct Fixtures {
  TempDir dir;
  bool ok = false;
  std::string why;
};

Fixtures& fixtures() {
  static Fixtures* f = [] {
    auto* fx = new Fixtures();
    if (!fs::exists(kPython)) {
      fx->why = "/usr/bin/python3 not found";
      return fx;
    }
    std::string src = CKPT_SOURCE_DIR;
    std::string code =
        "import sys, os\n"
        "sys.path.insert(0, os.path.join(sys.argv[1], 'tools', 'smoke'))\n"
        "import train_tiny\n"
        "t = open(os.path.join(sys.argv[1], 'src', 'smoke', 'reference.txt')).read()\n"
        "for s in ['llama3', 'qwen', 'gpt2', 'gpt2_bos']:\n"
        "    d = os.path.join(sys.argv[2], s); os.makedirs(d); train_tiny.write_bpe_tokenizer(d, t, s)\n"
        "d = os.path.join(sys.argv[2], 'spm'); os.makedirs(d); train_tiny.write_sentencepiece_tokenizer(d, t)\n";
    auto r = run_program({kPython, "-c", code, src, fx->dir.path().string()});
    if (r.exit_code != 0) {
      fx->why = "train_tiny.py writers failed: " + r.err.substr(0, 500);
      return fx;
    }
    auto h = run_program({kPython, "-c", kSpmToHf, (fx->dir / "spm/tokenizer.model").string(), fx->dir.path().string()});
    if (h.exit_code != 0) {
      fx->why = "tokenizer.json from tokenizer.model failed: " + h.err.substr(0, 500);
      return fx;
    }
    auto m = run_program({kPython, "-c", kSpmMore, src + "/src/smoke/reference.txt", fx->dir.path().string()});
    if (m.exit_code != 0) {
      fx->why = "sentencepiece training failed: " + m.err.substr(0, 500);
      return fx;
    }
    fx->ok = true;
    return fx;
  }();
  return *f;
}

std::string strings_file(const TempDir& d, const std::vector<std::string>& strings) {
  std::string s = "[";
  for (size_t i = 0; i < strings.size(); ++i) {
    if (i) s += ",";
    s += ckpt::json::quoted(strings[i]);
  }
  s += "]";
  auto p = d / "strings.json";
  write_text(p, s);
  return p.string();
}

std::vector<ckpt::json::Value> parse_lines(const std::string& out) {
  std::vector<ckpt::json::Value> v;
  std::istringstream is(out);
  std::string line;
  while (std::getline(is, line)) {
    if (line.empty()) continue;
    auto r = ckpt::json::parse(line);
    if (r.ok()) v.push_back(r.value);
  }
  return v;
}

std::vector<uint32_t> ids_of(const ckpt::json::Value& v) {
  std::vector<uint32_t> ids;
  const auto* a = v.find("ids");
  if (a && a->is_array())
    for (const auto& x : a->as_array()) ids.push_back(static_cast<uint32_t>(x.as_int()));
  return ids;
}

std::string node_skip_reason() {
  auto r = run_program({"node", "--version"});
  if (r.exit_code != 0) return "node not found";
  fs::path nm = fs::path(CKPT_SOURCE_DIR) / "tests/oracles/node_modules/@huggingface/tokenizers";
  if (!fs::exists(nm)) return "tests/oracles/node_modules missing (cd tests/oracles && npm install)";
  return "";
}

// Compares every string, both add_special_tokens settings; returns the number of matches.
// `skip`: strings left out because transformers.js is known to differ from the Rust library there.
void compare_with_hf(const fs::path& model_dir, const std::string& label,
                     bool (*skip)(const std::string&) = nullptr, const char* skip_why = "") {
  auto all = test_strings();
  std::vector<std::string> strings;
  for (auto& s : all)
    if (!skip || !skip(s)) strings.push_back(s);
  size_t skipped = all.size() - strings.size();
  TempDir tmp;
  std::string sf = strings_file(tmp, strings);
  std::string err;
  std::string cfg;
  if (fs::exists(model_dir / "tokenizer_config.json")) cfg = read_text(model_dir / "tokenizer_config.json");
  auto enc = ckpt::encode::load_tokenizer_json(read_text(model_dir / "tokenizer.json"), cfg, err);
  ASSERT_TRUE(enc) << label << ": " << err;
  std::string script = (fs::path(CKPT_SOURCE_DIR) / "tests/oracles/tok_encode.mjs").string();
  size_t total = 0, same = 0;
  for (bool special : {true, false}) {
    std::vector<std::string> argv{"node", script, model_dir.string(), sf};
    if (!special) argv.push_back("--no-special");
    auto r = run_program(argv);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto recs = parse_lines(r.out);
    ASSERT_EQ(recs.size(), strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      ASSERT_TRUE(recs[i].find("ids")) << "oracle failed on " << ckpt::json::quoted(strings[i]) << ": " << recs[i].dump();
      std::vector<uint32_t> ids;
      ASSERT_TRUE(ckpt::encode::encode(*enc, strings[i], special, ids, err)) << err;
      auto want = ids_of(recs[i]);
      ++total;
      if (ids == want) ++same;
      EXPECT_EQ(ids, want) << label << " special=" << special << " text=" << ckpt::json::quoted(strings[i]);
    }
  }
  std::cout << "[oracle] " << label << " (" << ckpt::encode::describe(*enc) << "): " << same << "/" << total
            << " id sequences match @huggingface/tokenizers";
  if (skipped) std::cout << " (" << skipped << " strings not compared: " << skip_why << ")";
  std::cout << "\n";
}

TEST(EncodeOracle, TrainTinyStylesMatchHfTokenizers) {
  auto why = node_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  auto& fx = fixtures();
  if (!fx.ok) GTEST_SKIP() << fx.why;
  for (const char* s : {"llama3", "qwen", "gpt2", "gpt2_bos"}) compare_with_hf(fx.dir / s, s);
}

TEST(EncodeOracle, SentencePieceStyleJsonMatchHfTokenizers) {
  auto why = node_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  auto& fx = fixtures();
  if (!fx.ok) GTEST_SKIP() << fx.why;
  for (const char* s : {"hf_gemma", "hf_llama2", "hf_metaspace", "hf_mixed"}) compare_with_hf(fx.dir / s, s);
  // transformers.js ignores Metaspace's "split": it keeps "\u2581\u2581\u2581How" whole where the Rust
  // library splits it into "\u2581" "\u2581" "\u2581How" (tokenizers' own Metaspace tests). ckpt follows
  // Rust; the strings without a run of spaces are the same in both.
  compare_with_hf(
      fx.dir / "hf_metaspace_split", "hf_metaspace_split",
      [](const std::string& s) { return s.find("  ") != std::string::npos; },
      "runs of spaces, where transformers.js ignores Metaspace split");
}

TEST(EncodeOracle, CorpusFixturesMatchHfTokenizers) {
  auto why = node_skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  fs::path root = fs::path(CKPT_CORPUS_DIR) / "seed-fixtures/SharpAI/SwiftLM/tests/fixtures";
  if (!fs::exists(root)) GTEST_SKIP() << root << " not found";
  int n = 0;
  for (const auto& d : fs::directory_iterator(root)) {
    fs::path tj = d.path() / "tokenizer.json";
    if (!fs::exists(tj)) continue;
    std::string err;
    auto enc = ckpt::encode::load_tokenizer_json(read_text(tj), "", err);
    if (!enc) {
      // only unsupported models may be refused, and clearly
      EXPECT_NE(err.find("is not supported for encoding"), std::string::npos) << err;
      std::cout << "[oracle] " << d.path().filename().string() << ": refused: " << err << "\n";
      continue;
    }
    compare_with_hf(d.path(), d.path().filename().string());
    ++n;
  }
  EXPECT_GT(n, 0);
}

// Python sentencepiece's encode(text) for every string; with add_special_tokens ckpt adds BOS
// and/or EOS as tokenizer_config.json says (default: BOS only).
void compare_with_spm(const fs::path& dir, const std::string& label, const std::string& config, bool bos,
                      bool eos) {
  auto strings = test_strings();
  TempDir tmp;
  std::string sf = strings_file(tmp, strings);
  std::string code =
      "import sys, json, sentencepiece\n"
      "sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])\n"
      "for s in json.load(open(sys.argv[2], encoding='utf-8')):\n"
      "    print(json.dumps({'ids': sp.encode(s), 'bos': sp.bos_id(), 'eos': sp.eos_id()}))\n";
  auto r = run_program({kPython, "-c", code, (dir / "tokenizer.model").string(), sf});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto recs = parse_lines(r.out);
  ASSERT_EQ(recs.size(), strings.size());
  std::string err;
  auto enc = ckpt::encode::load_sentencepiece(read_text(dir / "tokenizer.model"), config, err);
  ASSERT_TRUE(enc) << label << ": " << err;
  size_t total = 0, same = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    auto want = ids_of(recs[i]);
    for (bool special : {false, true}) {
      std::vector<uint32_t> ids;
      ASSERT_TRUE(ckpt::encode::encode(*enc, strings[i], special, ids, err)) << err;
      std::vector<uint32_t> w = want;
      if (special && bos) w.insert(w.begin(), static_cast<uint32_t>(recs[i].find("bos")->as_int()));
      if (special && eos) w.push_back(static_cast<uint32_t>(recs[i].find("eos")->as_int()));
      ++total;
      if (ids == w) ++same;
      EXPECT_EQ(ids, w) << label << " special=" << special << " text=" << ckpt::json::quoted(strings[i]);
    }
  }
  std::cout << "[oracle] " << label << " (" << ckpt::encode::describe(*enc) << "): " << same << "/" << total
            << " id sequences match python sentencepiece\n";
}

TEST(EncodeOracle, SentencePieceMatchesPython) {
  auto& fx = fixtures();
  if (!fx.ok) GTEST_SKIP() << fx.why;
  if (run_program({kPython, "-c", "import sentencepiece"}).exit_code != 0)
    GTEST_SKIP() << "python3 sentencepiece not installed";
  compare_with_spm(fx.dir / "spm", "gemma-style tokenizer.model", read_text(fx.dir / "spm/tokenizer_config.json"),
                   true, false);
  compare_with_spm(fx.dir / "spm_llama2", "llama2-style tokenizer.model", "", true, false);
  compare_with_spm(fx.dir / "spm_unk", "unk/suffix tokenizer.model", R"({"add_bos_token":false,"add_eos_token":true})",
                   false, true);
  compare_with_spm(fx.dir / "spm_unigram", "unigram tokenizer.model", "", true, false);
  compare_with_spm(fx.dir / "spm_unigram_unk", "unigram unk tokenizer.model", "", true, false);
  for (const char* refused : {"spm_nfkc"}) {
    std::string err;
    EXPECT_FALSE(ckpt::encode::load_sentencepiece(read_text(fx.dir / refused / "tokenizer.model"), "", err));
    EXPECT_NE(err.find("is not supported for encoding"), std::string::npos) << err;
    std::cout << "[oracle] " << refused << ": refused: " << err << "\n";
  }
}

TEST(EncodeOracle, MegabyteIsFast) {
  auto& fx = fixtures();
  if (!fx.ok) GTEST_SKIP() << fx.why;
  std::string ref = read_text(fs::path(CKPT_SOURCE_DIR) / "src/smoke/reference.txt");
  std::string big;
  while (big.size() < (1u << 20)) big += ref;
  for (const char* s : {"llama3", "qwen", "gpt2"}) {
    std::string err;
    auto enc = ckpt::encode::load_tokenizer_json(read_text(fx.dir / s / "tokenizer.json"), "", err);
    ASSERT_TRUE(enc) << err;
    std::vector<uint32_t> ids;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(ckpt::encode::encode(*enc, big, false, ids, err)) << err;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[perf] " << s << ": 1 MiB -> " << ids.size() << " ids in " << secs << " s\n";
    EXPECT_LT(secs, 5.0);  // generous for sanitizer builds; ~0.1 s in a release build
  }
  std::string err;
  auto spm = ckpt::encode::load_sentencepiece(read_text(fx.dir / "spm/tokenizer.model"), "", err);
  ASSERT_TRUE(spm) << err;
  std::vector<uint32_t> ids;
  std::string line_free = big;  // one long "word": exercises the merge queue on a long sequence
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(ckpt::encode::encode(*spm, line_free, false, ids, err)) << err;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[perf] spm: 1 MiB -> " << ids.size() << " ids in " << secs << " s\n";
  EXPECT_LT(secs, 10.0);
}

}  // namespace
