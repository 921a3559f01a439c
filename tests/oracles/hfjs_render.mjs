// Renders chat templates with @huggingface/jinja (the engine of transformers.js), the
// independent implementation tests compare ckpt's Runtime::hf_jinja with. Reads JSON lines
// {"id", "template", "context"} on stdin; writes {"id", "ok", "output"|"error"} per line.
// Templates are rendered as transformers.js renders chat templates (trim_blocks and
// lstrip_blocks on, as its applyChatTemplate passes them).
import { Template } from "@huggingface/jinja";
import { createInterface } from "node:readline";

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const c = JSON.parse(line);
  let rec;
  try {
    const t = new Template(c.template);
    rec = { id: c.id, ok: true, output: t.render(c.context ?? {}) };
  } catch (e) {
    rec = { id: c.id, ok: false, error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(rec) + "\n");
}
