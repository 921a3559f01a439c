#!/usr/bin/env python3
"""Writes what a real download carries beside the weights of a bench stand-in: the model's real
config.json, tokenizer_config.json and generation_config.json (from ../shared/corpus/configs),
the family's real chat template, and a tokenizer.json of the real vocabulary size.

The corpus keeps configs, not tokenizers, so tokenizer.json is generated: a byte-level BPE
with the model's vocabulary size (less the added tokens), one merge per non-byte token (each
merge joins two earlier tokens into the new one, as a trained BPE's do), and as added tokens
the special tokens tokenizer_config.json, config.json and the template name. Deterministic.

    standin_sidefiles.py CONFIG_DIR OUT_DIR [--template FILE.jinja]
"""
import argparse
import json
import os
import random
import re
import shutil


def byte_alphabet():
    # GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest above 255.
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def special_tokens(tok_cfg, template):
    names = []

    def add(v):
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, str) and v and v not in names:
            names.append(v)

    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        add(tok_cfg.get(key))
    for v in (tok_cfg.get("model_specific_special_tokens") or {}).values():
        add(v)
    for v in tok_cfg.get("additional_special_tokens") or []:
        add(v)
    # Literal special tokens the template emits (<|im_start|>, <｜User｜>, ...).
    for m in re.finditer(r"<[|｜][^<>\s'\"]{1,40}?[|｜]>", template or ""):
        add(m.group(0))
    # Tag tokens the template emits as written (<think>, </tool_call>, ...): the real tokenizers
    # of the families that use them (Qwen3, Qwen3.5, DeepSeek-R1) carry each as an added token.
    for m in re.finditer(r"</?[a-z_]{3,20}>", template or ""):
        add(m.group(0))
    return names


def vocab_size_of(config):
    for c in (config, config.get("text_config") or {}):
        if isinstance(c.get("vocab_size"), int):
            return c["vocab_size"]
    raise SystemExit("config.json has no vocab_size")


def id_list(v):
    return [v] if isinstance(v, int) else [x for x in (v or []) if isinstance(x, int)]


def build_tokenizer(vocab_size, specials, pinned):
    """pinned: {token id: content} that must hold exactly (config's bos/eos ids)."""
    rng = random.Random(vocab_size)
    n_added = len(specials)
    n_base = vocab_size - n_added - 8  # a few ids left unused, as real vocabularies do
    alphabet = byte_alphabet()
    tokens = list(alphabet)
    seen = set(tokens)
    merges = []
    while len(tokens) < n_base:
        # Parts drawn mostly from the earlier (shorter) tokens, as in a trained BPE: a
        # DeepSeek-V3-sized vocabulary then takes about as many bytes as the real file's 7.8 MB.
        a = tokens[rng.randrange(min(len(tokens), 30000))]
        b = tokens[rng.randrange(min(len(tokens), 3000))]
        t = a + b
        if t in seen or len(t) > 16:
            continue
        seen.add(t)
        tokens.append(t)
        merges.append(a + " " + b)
    # Added tokens take the pinned ids, the rest the ids after the base vocabulary.
    vocab = {}
    ids = {}
    free = iter(range(n_base, vocab_size))
    pinned_ids = {c: i for i, c in pinned.items()}
    for s in specials:
        ids[s] = pinned_ids[s] if s in pinned_ids else next(free)
    used = set(ids.values())
    base_ids = (i for i in range(vocab_size) if i not in used)
    for t in tokens:
        vocab[t] = next(base_ids)
    added = [{"id": ids[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in specials]
    added.sort(key=lambda a: a["id"])
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--template", help="chat template to ship as chat_template.jinja (when tokenizer_config has none)")
    args = ap.parse_args()
    src = args.config_dir
    config = json.load(open(os.path.join(src, "config.json")))
    tok_cfg = json.load(open(os.path.join(src, "tokenizer_config.json")))
    for name in ("config.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(args.out_dir, name))
    template = tok_cfg.get("chat_template") if isinstance(tok_cfg.get("chat_template"), str) else None
    if template is None and args.template:
        template = open(args.template, encoding="utf-8").read()
        shutil.copyfile(args.template, os.path.join(args.out_dir, "chat_template.jinja"))
    if not os.path.exists(os.path.join(src, "generation_config.json")):
        gen = {k: config[k] for k in ("bos_token_id", "eos_token_id") if k in config}
        gen["transformers_version"] = config.get("transformers_version", "4.46.0")
        json.dump(gen, open(os.path.join(args.out_dir, "generation_config.json"), "w"), indent=2)
    specials = special_tokens(tok_cfg, template)
    # Pin the ids config.json and generation_config.json name to the tokens tokenizer_config names.
    pinned = {}
    gen = json.load(open(os.path.join(args.out_dir, "generation_config.json")))
    text = config.get("text_config") or config
    for key, tok_key in (("bos_token_id", "bos_token"), ("eos_token_id", "eos_token"), ("pad_token_id", "pad_token")):
        content = tok_cfg.get(tok_key)
        if isinstance(content, dict):
            content = content.get("content")
        for i in id_list(config.get(key, text.get(key))) + id_list(gen.get(key)):
            if isinstance(content, str) and i not in pinned and content not in pinned.values():
                pinned[i] = content
    # Further ids generation_config names (a second eos) get further special tokens.
    extra = 0
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        for i in id_list(gen.get(key)) + id_list(config.get(key, text.get(key))):
            if i not in pinned:
                free = [s for s in specials if s not in pinned.values()]
                content = free[0] if free else "<|extra_special_%d|>" % extra
                extra += 1
                if content not in specials:
                    specials.append(content)
                pinned[i] = content
    tok = build_tokenizer(vocab_size_of(config), specials, pinned)
    with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
