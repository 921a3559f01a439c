#!/usr/bin/env python3
"""The baseline ckpt verify is measured against: a careful Python script doing the
same header-only structural checks (safetensors framing, header schema, dtype sizes,
exact tiling of the data section, truncation; index <-> shards: missing, stray, duplicate,
misplaced, absent, unlisted tensors, total_size) and, as the seeds' verify.sh does, the side
files a download carries: config.json, generation_config.json and tokenizer_config.json
parsed; tokenizer.json parsed, every vocabulary and added-token id within the embedding
(config vocab_size), every merge well-formed (two parts in the vocabulary, their join too);
the chat template compiled in transformers' sandboxed jinja2 environment and the one-turn
probe rendered. Prints one line per problem and exits 1 when there is any, 0 otherwise.
With --structure-only it does only the structural part (the baseline of earlier sessions).

    python3 verify_baseline.py MODEL_DIR [--structure-only]
"""
import json
import os
import struct
import sys

MAX_HEADER = 100_000_000
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16,
        "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64}
U64_MAX = 2**64 - 1


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def read_header(path, problems):
    size = os.path.getsize(path)
    name = os.path.basename(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            problems.append("%s: file shorter than 8 bytes" % name)
            return None
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER:
            problems.append("%s: header length %d above limit" % (name, n))
            return None
        if 8 + n > size:
            problems.append("%s: header past EOF" % name)
            return None
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        problems.append("%s: bad header: %s" % (name, e))
        return None
    if not isinstance(header, dict):
        problems.append("%s: header not an object" % name)
        return None
    tensors = {}
    meta = header.pop("__metadata__", None)
    if meta is not None and (not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values())):
        problems.append("%s: __metadata__ not strings" % name)
    entries = []
    for key, e in header.items():
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
            problems.append("%s: %s: malformed entry" % (name, key))
            continue
        dtype, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in BITS:
            problems.append("%s: %s: unknown dtype %r" % (name, key, dtype))
            continue
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and o >= 0 for o in offs)):
            problems.append("%s: %s: malformed shape/offsets" % (name, key))
            continue
        numel = 1
        for d in shape:
            numel *= d
        nbits = numel * BITS[dtype]
        if nbits > U64_MAX:
            problems.append("%s: %s: size overflow" % (name, key))
            continue
        if nbits % 8:
            problems.append("%s: %s: not byte aligned" % (name, key))
            continue
        if offs[1] - offs[0] != nbits // 8:
            problems.append("%s: %s: span %d != %d" % (name, key, offs[1] - offs[0], nbits // 8))
        entries.append((offs[0], offs[1], key))
        tensors[key] = (dtype, shape, offs)
    entries.sort()
    expected = 0
    for begin, end, key in entries:
        if end < begin or begin < expected:
            problems.append("%s: %s: overlapping offsets" % (name, key))
        elif begin > expected:
            problems.append("%s: %s: gap before tensor" % (name, key))
        expected = max(expected, end)
    data_len = size - 8 - n
    if expected > data_len:
        cut = [k for b, e, k in entries if e > data_len]
        problems.append("%s: truncated, %d bytes missing, %d tensors cut" % (name, expected - data_len, len(cut)))
    elif expected < data_len:
        problems.append("%s: %d trailing bytes" % (name, data_len - expected))
    return tensors


def main(root):
    problems = []
    files = sorted(f for f in os.listdir(root) if f.endswith(".safetensors"))
    headers = {f: read_header(os.path.join(root, f), problems) for f in files}
    index_path = os.path.join(root, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            index = json.load(f, object_pairs_hook=no_duplicates)
        weight_map = index["weight_map"]
        named = set()
        for tensor, shard in weight_map.items():
            if shard.startswith("/") or ".." in shard.split("/") or "\\" in shard:
                problems.append("index: unsafe path %s" % shard)
                continue
            named.add(shard)
        for shard in sorted(named):
            if shard not in headers:
                problems.append("index: missing shard %s" % shard)
        holders = {}
        for f, tensors in headers.items():
            for key in tensors or {}:
                holders.setdefault(key, []).append(f)
        for f in files:
            if f not in named:
                problems.append("stray shard %s" % f)
        total = 0
        for tensor, shard in weight_map.items():
            where = holders.get(tensor, [])
            if len(where) > 1:
                problems.append("%s in several shards" % tensor)
            elif where and where[0] != shard:
                problems.append("%s in %s, index says %s" % (tensor, where[0], shard))
            elif not where and headers.get(shard) is not None:
                problems.append("%s absent from %s" % (tensor, shard))
            if shard in where and headers.get(shard):
                b, e = headers[shard][tensor][2]
                total += e - b
        for f in named:
            for key in headers.get(f) or {}:
                if key not in weight_map:
                    problems.append("%s: %s not in index" % (f, key))
        declared = index.get("metadata", {}).get("total_size")
        if declared is not None and declared != total:
            problems.append("total_size %s != %d" % (declared, total))
    elif len(files) > 1:
        problems.append("several shards and no index")
    if not structure_only:
        side_files(root, problems)
    for p in problems:
        print(p)
    print("%d problems, %d files, %d tensors" % (len(problems), len(files),
                                                sum(len(t or {}) for t in headers.values())))
    return 1 if problems else 0


def load_json(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as e:
        problems.append("%s: %s" % (os.path.basename(path), e))
        return None


def side_files(model_dir, problems):
    config = load_json(os.path.join(model_dir, "config.json"), problems) or {}
    load_json(os.path.join(model_dir, "generation_config.json"), problems)
    tok_cfg = load_json(os.path.join(model_dir, "tokenizer_config.json"), problems) or {}
    text = config.get("text_config") or config
    vocab_size = text.get("vocab_size", config.get("vocab_size"))
    tok = load_json(os.path.join(model_dir, "tokenizer.json"), problems)
    if isinstance(tok, dict):
        model = tok.get("model") or {}
        vocab = model.get("vocab") or {}
        if isinstance(vocab, dict):
            ids = vocab.values()
        else:  # Unigram: [[piece, score], ...]
            ids = range(len(vocab))
        if isinstance(vocab_size, int):
            over = [i for i in ids if not isinstance(i, int) or i >= vocab_size]
            if over:
                problems.append("tokenizer.json: %d ids outside the embedding (%d rows)" % (len(over), vocab_size))
            for a in tok.get("added_tokens") or []:
                if not isinstance(a.get("id"), int) or a["id"] >= vocab_size:
                    problems.append("tokenizer.json: added token %r outside the embedding" % a.get("content"))
        bad = 0
        for m in model.get("merges") or []:
            parts = m.split(" ") if isinstance(m, str) else m
            if len(parts) != 2 or parts[0] not in vocab or parts[1] not in vocab or parts[0] + parts[1] not in vocab:
                bad += 1
        if bad:
            problems.append("tokenizer.json: %d malformed merges" % bad)
    template = tok_cfg.get("chat_template")
    path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            template = f.read()
    if isinstance(template, list):
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    if isinstance(template, str):
        render_probe(template, tok_cfg, problems)


def render_probe(template, tok_cfg, problems):
    # As transformers' _compile_jinja_template configures it.
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def token(v):
        return v.get("content") if isinstance(v, dict) else v

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    try:
        compiled = env.from_string(template)
        compiled.render(messages=[{"role": "user", "content": "Hello"}], add_generation_prompt=True,
                        bos_token=token(tok_cfg.get("bos_token")) or "", eos_token=token(tok_cfg.get("eos_token")) or "",
                        tools=None, documents=None)
    except Exception as e:  # a template error of any kind is a finding, as for ckpt
        problems.append("chat template: %s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    structure_only = "--structure-only" in sys.argv[2:]
    sys.exit(main(sys.argv[1]))
