// Encodes strings with @huggingface/tokenizers (the tokenizer.json encoder transformers.js uses),
// the independent implementation test_encode compares ckpt's encoders with.
//   node tok_encode.mjs MODEL_DIR STRINGS_JSON [--no-special]
// MODEL_DIR holds tokenizer.json (and optionally tokenizer_config.json); STRINGS_JSON is a file
// holding a JSON list of strings. Prints one JSON line per string: {"ids": [...]} or {"error": "..."}.
// A load failure prints {"load_error": "..."} and exits 1, so the test can say why it has no oracle.
import { Tokenizer } from "@huggingface/tokenizers";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const [modelDir, stringsFile, flag] = process.argv.slice(2);
const addSpecialTokens = flag !== "--no-special";
let tokenizer;
try {
  const tokenizerJson = JSON.parse(readFileSync(join(modelDir, "tokenizer.json"), "utf8"));
  const configPath = join(modelDir, "tokenizer_config.json");
  const tokenizerConfig = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
  tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
} catch (e) {
  process.stdout.write(JSON.stringify({ load_error: String(e && e.message ? e.message : e) }) + "\n");
  process.exit(1);
}
const strings = JSON.parse(readFileSync(stringsFile, "utf8"));
for (const text of strings) {
  let rec;
  try {
    rec = { ids: tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids };
  } catch (e) {
    rec = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(rec) + "\n");
}
