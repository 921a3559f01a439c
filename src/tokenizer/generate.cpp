// The fixture tokenizer: byte-level BPE (or Unigram) over the 256-symbol GPT-2 alphabet,
// in the shape SwiftLM's make-test-fixtures.py writes (specials 0-3, alphabet 4-259,
// a few merges, <|unusedN|> filler), plus tokenizer_config.json and generation_config.json.
#include <charconv>
#include <string>
#include <unordered_set>
#include <vector>

#include "ckpt/json.h"
#include "ckpt/tokenizer.h"

namespace ckpt::tok {

static const char* const kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"};

std::string chatml_template() {
  return "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
}

static void put_double(std::string& out, double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  out += s;
}

namespace {
struct Merge {
  std::string a, b;
};
}  // namespace

// The merges of the fixture tokenizer. The first four are SwiftLM's (h e, l l, he ll, t e);
// larger tokenizers continue with every pair of alphabet symbols, then symbol triples.
static std::vector<Merge> make_merges(uint32_t count) {
  std::vector<Merge> m;
  m.reserve(count);
  const Merge fixed[] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"t", "e"}};
  std::unordered_set<std::string> made;
  for (const auto& f : fixed) {
    if (m.size() >= count) return m;
    m.push_back(f);
    made.insert(f.a + f.b);
  }
  const auto& alpha = byte_level_alphabet_sorted();
  std::vector<std::string> pairs;
  for (const auto& a : alpha) {
    for (const auto& b : alpha) {
      if (m.size() >= count) return m;
      std::string t = a + b;
      if (!made.insert(t).second) continue;
      m.push_back({a, b});
      pairs.push_back(std::move(t));
    }
  }
  for (const auto& p : pairs) {
    for (const auto& c : alpha) {
      if (m.size() >= count) return m;
      std::string t = p + c;
      if (!made.insert(t).second) continue;
      m.push_back({p, c});
    }
  }
  return m;
}

static void added_tokens(std::string& o) {
  o += "  \"added_tokens\": [";
  for (int i = 0; i < 4; ++i) {
    o += i ? ",\n" : "\n";
    o += "    {\"id\": " + std::to_string(i) + ", \"content\": ";
    json::append_quoted(o, kSpecials[i]);
    o += ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
         "\"special\": true}";
  }
  o += "\n  ],\n";
}

static const char* kByteLevelParts =
    "  \"normalizer\": null,\n"
    "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": "
    "true, \"use_regex\": true},\n"
    "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
    "false, \"use_regex\": true},\n"
    "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
    "\"use_regex\": true},\n";

Generated generate(const GenOptions& opts) {
  Generated g;
  const uint32_t base = 4 + 256;
  uint32_t vocab = opts.vocab_size < base ? base : opts.vocab_size;
  g.vocab_size = vocab;
  uint32_t n_merges = opts.unigram ? 0 : (opts.fill_with_merges ? vocab - base : opts.merges);
  if (n_merges > vocab - base) n_merges = vocab - base;
  std::vector<Merge> merges = make_merges(n_merges);

  // id -> token text
  std::vector<std::string> tokens;
  tokens.reserve(vocab);
  for (const char* s : kSpecials) tokens.emplace_back(s);
  for (const auto& s : byte_level_alphabet_sorted()) tokens.push_back(s);
  for (const auto& m : merges) tokens.push_back(m.a + m.b);
  while (tokens.size() < vocab) tokens.push_back("<|unused" + std::to_string(tokens.size()) + "|>");

  std::string& o = g.tokenizer_json;
  o.reserve(size_t(vocab) * 24 + merges.size() * 16 + 4096);
  o += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  added_tokens(o);
  o += kByteLevelParts;
  if (opts.unigram) {
    o += "  \"model\": {\n    \"type\": \"Unigram\",\n    \"unk_id\": 0,\n    \"vocab\": [";
    for (uint32_t i = 0; i < vocab; ++i) {
      o += i ? ",\n      [" : "\n      [";
      json::append_quoted(o, tokens[i]);
      o += ", ";
      double score = i == 0 ? 0.0 : i < 4 ? -1.0 : i < base ? -2.0 - 0.01 * i : -10.0;
      put_double(o, score);
      o += "]";
    }
    o += "\n    ],\n    \"byte_fallback\": false\n  }\n}\n";
  } else {
    o += "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
         "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
         "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
         "    \"vocab\": {";
    for (uint32_t i = 0; i < vocab; ++i) {
      o += i ? ",\n      " : "\n      ";
      json::append_quoted(o, tokens[i]);
      o += ": " + std::to_string(i);
    }
    o += "\n    }";
    if (!opts.drop_merges_key) {
      o += ",\n    \"merges\": [";
      for (size_t i = 0; i < merges.size(); ++i) {
        o += i ? ",\n      [" : "\n      [";
        json::append_quoted(o, merges[i].a);
        o += ", ";
        json::append_quoted(o, merges[i].b);
        o += "]";
      }
      o += merges.empty() ? "]" : "\n    ]";
    }
    o += "\n  }\n}\n";
  }

  std::string tmpl = opts.chat_template.empty() ? chatml_template() : opts.chat_template;
  std::string& c = g.tokenizer_config_json;
  c += "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n";
  c += "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|im_end|>\",\n";
  c += "  \"pad_token\": \"<pad>\",\n  \"unk_token\": \"<|endoftext|>\",\n";
  c += "  \"model_max_length\": 512,\n  \"chat_template\": ";
  json::append_quoted(c, tmpl);
  c += "\n}\n";

  g.bos_id = 0;
  g.eos_id = opts.eos_token_id_override >= 0 ? opts.eos_token_id_override : 2;
  g.pad_id = 3;
  std::string& gc = g.generation_config_json;
  gc += "{\n  \"bos_token_id\": " + std::to_string(g.bos_id) + ",\n";
  gc += "  \"eos_token_id\": " + std::to_string(g.eos_id) + ",\n";
  gc += "  \"pad_token_id\": " + std::to_string(g.pad_id) + ",\n";
  gc += "  \"do_sample\": false,\n  \"max_new_tokens\": 32\n}\n";
  return g;
}

}  // namespace ckpt::tok
