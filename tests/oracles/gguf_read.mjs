// Reads a local GGUF with @huggingface/gguf (an independent reader) and prints what it saw as
// one JSON object: metadata (numbers and bigints as decimal strings, arrays in full) and the
// tensor infos. Used by tests/fixture/gguf_oracle_test.cpp.
import { gguf } from "@huggingface/gguf";

const path = process.argv[2];
const { metadata, tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true });
const plain = (v) => (Array.isArray(v) ? v.map(plain) : typeof v === "bigint" || typeof v === "number" ? String(v) : v);
const out = { metadata: {}, tensors: [], tensorDataOffset: String(tensorDataOffset) };
for (const [k, v] of Object.entries(metadata)) out.metadata[k] = plain(v);
for (const t of tensorInfos)
  out.tensors.push({ name: t.name, n_dims: t.n_dims, shape: t.shape.map(String), dtype: t.dtype, offset: String(t.offset) });
process.stdout.write(JSON.stringify(out));
