#!/usr/bin/python3
"""Train a tiny model of one decoder family on src/smoke/reference.txt and write it as a
Hugging Face checkpoint (config.json, model.safetensors, tokenizer files, generation_config.json)
plus smoke_tokens.json, the token ids it was trained on.

usage: train_tiny.py FAMILY OUT_DIR [--dtype bf16|f16|f32] [--steps N] [--seed S]

Deterministic: one thread, torch.use_deterministic_algorithms, a fixed seed; the model
memorises the text, so the saved checkpoint has a low perplexity on it and a numeric defect
shows up as a large perplexity change."""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import baseline  # noqa: E402
import families  # noqa: E402
import safetensors_io  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE_TEXT = os.path.join(REPO, "src", "smoke", "reference.txt")
FAMILY_NAMES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3",
                "mixtral", "qwen3_moe")
DTYPE_ARGS = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
DTYPE_CONFIG = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}

# Tiny dimensions shared by every family: q_proj and o_proj are square (4 heads x 16 = 64), so
# a transposed projection keeps its shape; two kv heads make the attention grouped.
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 16
INTERMEDIATE = 160
LAYERS = 3
VOCAB_TARGET = 448  # bytes + merges + special tokens for the byte-level BPE families

# Tokenizer styles, as the real families ship them.
BPE_STYLES = {
    # Llama 3: Split on its pattern, then ByteLevel without its own regex; BOS added by the
    # post-processor.
    "llama3": {"pattern": bpe.LLAMA3_PATTERN, "split": True, "nfc": False,
               "specials": ["<|begin_of_text|>", "<|end_of_text|>"], "bos": "<|begin_of_text|>",
               "eos": "<|end_of_text|>", "tokenizer_class": "PreTrainedTokenizerFast"},
    # Qwen2/Qwen3: NFC, Split on Qwen's pattern (single digits), ByteLevel; no BOS.
    "qwen": {"pattern": bpe.QWEN2_PATTERN, "split": True, "nfc": True,
             "specials": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "bos": None,
             "eos": "<|im_end|>", "tokenizer_class": "Qwen2Tokenizer"},
    # GPT-2 style: ByteLevel with its own regex; used for the mistral, mixtral and phi3 stand-ins.
    "gpt2_bos": {"pattern": bpe.GPT2_PATTERN, "split": False, "nfc": False,
                 "specials": ["<s>", "</s>"], "bos": "<s>", "eos": "</s>",
                 "tokenizer_class": "PreTrainedTokenizerFast"},
    "gpt2": {"pattern": bpe.GPT2_PATTERN, "split": False, "nfc": False,
             "specials": ["<|endoftext|>", "<|end|>"], "bos": None, "eos": "<|endoftext|>",
             "tokenizer_class": "PreTrainedTokenizerFast"},
}
FAMILY_TOKENIZER = {"llama": "llama3", "qwen2": "qwen", "qwen3": "qwen", "qwen3_moe": "qwen",
                    "mistral": "gpt2_bos", "mixtral": "gpt2_bos", "phi3": "gpt2",
                    "gemma": "sentencepiece", "gemma2": "sentencepiece", "gemma3": "sentencepiece"}
SENTENCEPIECE_VOCAB = 400


def family_config(family, vocab_size, bos_id, eos_id, pad_id, dtype_name):
    """config.json with the key set of a real checkpoint of the family (corpus/configs) and
    tiny dimensions."""
    common = {"hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
              "num_hidden_layers": LAYERS, "intermediate_size": INTERMEDIATE, "vocab_size": vocab_size,
              "bos_token_id": bos_id, "eos_token_id": eos_id, "initializer_range": 0.02,
              "attention_dropout": 0.0, "torch_dtype": dtype_name, "use_cache": True,
              "max_position_embeddings": 2048}
    if family == "llama":  # Llama-3.2-3B
        cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False,
                   head_dim=HEAD_DIM, hidden_act="silu", mlp_bias=False, pretraining_tp=1,
                   rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
                   rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                   transformers_version="4.46.0")
    elif family == "mistral":  # Devstral-Small-2507, with a sliding window that bites
        cfg = dict(architectures=["MistralForCausalLM"], model_type="mistral", head_dim=HEAD_DIM,
                   hidden_act="silu", pad_token_id=pad_id, rms_norm_eps=1e-5, rope_theta=1000000.0,
                   sliding_window=64, tie_word_embeddings=False, transformers_version="4.53.1")
    elif family == "qwen2":  # sakura-14b-qwen2.5
        cfg = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_act="silu",
                   max_window_layers=LAYERS, rms_norm_eps=1e-6, rope_theta=1000000.0,
                   sliding_window=None, tie_word_embeddings=False, transformers_version="4.44.2",
                   use_sliding_window=False)
    elif family == "qwen3":  # Qwen3-1.7B
        cfg = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", attention_bias=False,
                   head_dim=HEAD_DIM, hidden_act="silu", max_window_layers=LAYERS, rms_norm_eps=1e-6,
                   rope_scaling=None, rope_theta=1000000, sliding_window=None, tie_word_embeddings=True,
                   transformers_version="4.51.0", use_sliding_window=False)
    elif family == "qwen3_moe":  # Qwen3-30B-A3B's key set (no corpus config uses standard naming)
        cfg = dict(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", attention_bias=False,
                   decoder_sparse_step=1, head_dim=HEAD_DIM, hidden_act="silu", max_window_layers=LAYERS,
                   mlp_only_layers=[], moe_intermediate_size=64, norm_topk_prob=True, num_experts=4,
                   num_experts_per_tok=2, output_router_logits=False, rms_norm_eps=1e-6,
                   rope_scaling=None, rope_theta=1000000.0, router_aux_loss_coef=0.001,
                   sliding_window=None, tie_word_embeddings=False, transformers_version="4.51.0",
                   use_sliding_window=False)
    elif family == "mixtral":  # dolphin-2.5-mixtral-8x7b
        cfg = dict(architectures=["MixtralForCausalLM"], model_type="mixtral", hidden_act="silu",
                   num_experts_per_tok=2, num_local_experts=4, output_router_logits=False,
                   rms_norm_eps=1e-5, rope_theta=1000000.0, router_aux_loss_coef=0.02,
                   sliding_window=None, tie_word_embeddings=False, transformers_version="4.36.0.dev0")
        common["intermediate_size"] = 128
    elif family == "phi3":  # phi-3-mini-keyformer without longrope (no long context here)
        cfg = dict(architectures=["Phi3ForCausalLM"], model_type="phi3", embd_pdrop=0.0,
                   hidden_act="silu", original_max_position_embeddings=2048, pad_token_id=pad_id,
                   resid_pdrop=0.0, rms_norm_eps=1e-5, rope_scaling=None, rope_theta=10000.0,
                   sliding_window=262144, tie_word_embeddings=False, attention_bias=False,
                   transformers_version="4.40.2")
    elif family == "gemma":  # gemma-2b; hidden_activation spelt out so no loader has to guess
        cfg = dict(architectures=["GemmaForCausalLM"], model_type="gemma", attention_bias=False,
                   head_dim=HEAD_DIM, hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh",
                   pad_token_id=pad_id, rms_norm_eps=1e-6, rope_scaling=None, rope_theta=10000.0,
                   transformers_version="4.38.0.dev0")
    elif family == "gemma2":  # gemma-2-2b; query_pre_attn_scalar differs from head_dim on purpose
        cfg = dict(architectures=["Gemma2ForCausalLM"], model_type="gemma2", attention_bias=False,
                   attn_logit_softcapping=50.0, cache_implementation="hybrid",
                   final_logit_softcapping=30.0, head_dim=HEAD_DIM, hidden_act="gelu_pytorch_tanh",
                   hidden_activation="gelu_pytorch_tanh", pad_token_id=pad_id,
                   query_pre_attn_scalar=32, rms_norm_eps=1e-6, rope_theta=10000.0,
                   sliding_window=32, transformers_version="4.46.1")
    elif family == "gemma3":  # gemma-3-1b-it (text only)
        cfg = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", attention_bias=False,
                   attn_logit_softcapping=None, cache_implementation="hybrid",
                   final_logit_softcapping=None, head_dim=HEAD_DIM, hidden_activation="gelu_pytorch_tanh",
                   pad_token_id=pad_id, query_pre_attn_scalar=32, rms_norm_eps=1e-6,
                   rope_local_base_freq=10000, rope_scaling=None, rope_theta=1000000,
                   sliding_window=32, sliding_window_pattern=2, transformers_version="4.50.0.dev0")
        # Written out as newer transformers derive it from sliding_window_pattern.
        cfg["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(LAYERS)]
    else:
        raise ValueError(family)
    cfg.update(common)
    if family in ("gemma", "gemma2", "gemma3"):
        cfg.pop("max_position_embeddings")
        cfg["max_position_embeddings"] = 8192
    return dict(sorted(cfg.items()))


def write_bpe_tokenizer(out_dir, text, style_name):
    style = BPE_STYLES[style_name]
    merges = bpe.train(text, style["pattern"], VOCAB_TARGET - 256 - len(style["specials"]))
    vocab = bpe.build_vocab(merges)
    special_ids = {token: len(vocab) + i for i, token in enumerate(style["specials"])}
    added = [{"id": special_ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in style["specials"]]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": not style["split"]}
    if style["split"]:
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": style["pattern"]}, "behavior": "Isolated", "invert": False},
            byte_level]}
    else:
        pre_tokenizer = byte_level
    if style["bos"]:
        bos = style["bos"]
        post_processor = {"type": "TemplateProcessing",
                          "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                          "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                   {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                          "special_tokens": {bos: {"id": bos, "ids": [special_ids[bos]], "tokens": [bos]}}}
    else:
        post_processor = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": {"type": "NFC"} if style["nfc"] else None,
                 "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
                 "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                 "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                           "ignore_merges": False, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
    write_json(os.path.join(out_dir, "tokenizer.json"), tokenizer)
    tokenizer_config = {
        "add_bos_token": style["bos"] is not None, "add_eos_token": False,
        "added_tokens_decoder": {str(e["id"]): {k: e[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                    "single_word", "special")} for e in added},
        "bos_token": style["bos"], "clean_up_tokenization_spaces": False, "eos_token": style["eos"],
        "model_max_length": 2048, "pad_token": None, "tokenizer_class": style["tokenizer_class"]}
    write_json(os.path.join(out_dir, "tokenizer_config.json"), tokenizer_config)
    ids = bpe.encode(text, style["pattern"], merges, vocab)
    bos_id = special_ids[style["bos"]] if style["bos"] else None
    if bos_id is not None:
        ids = [bos_id] + ids
    vocab_size = len(vocab) + len(style["specials"])
    return ids, vocab_size, bos_id, special_ids[style["eos"]], special_ids[style["eos"]]


def write_sentencepiece_tokenizer(out_dir, text):
    import sentencepiece

    # Gemma's special ids (pad 0, eos 1, bos 2, unk 3); no text normalisation and no dummy
    # prefix, whitespace kept as pieces, bytes for anything unseen (the newline among them:
    # the trainer reads the text line by line).
    lines = [line for line in text.split("\n") if line.strip()]
    prefix = os.path.join(out_dir, "tokenizer")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, model_type="bpe",
        vocab_size=SENTENCEPIECE_VOCAB, byte_fallback=True, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=False, remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True, split_digits=True, num_threads=1,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
        bos_piece="<bos>", unk_piece="<unk>", minloglevel=2)
    os.remove(prefix + ".vocab")
    processor = sentencepiece.SentencePieceProcessor(model_file=prefix + ".model")
    added = {str(i): {"content": piece, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True}
             for i, piece in enumerate(["<pad>", "<eos>", "<bos>", "<unk>"])}
    write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": True, "add_eos_token": False, "added_tokens_decoder": added,
        "bos_token": "<bos>", "clean_up_tokenization_spaces": False, "eos_token": "<eos>",
        "model_max_length": 8192, "pad_token": "<pad>", "sp_model_kwargs": {},
        "spaces_between_special_tokens": False, "tokenizer_class": "GemmaTokenizer",
        "unk_token": "<unk>", "use_default_system_prompt": False})
    ids = [2] + processor.encode(text)
    return ids, processor.get_piece_size(), 2, 1, 0


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def train(model, ids, steps, log_every=50):
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), weight_decay=0.0)
    warmup = 20

    def learning_rate_factor(step):  # linear warm-up, then cosine down to a tenth
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, learning_rate_factor)
    # The whole text is one sequence: the smoke pass runs over exactly this sequence, so every
    # position the C++ side evaluates has been trained.
    for step in range(steps):
        logits, _ = model(ids)
        loss = torch.nn.functional.cross_entropy(logits[:-1], ids[1:])
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(f"  step {step:4d} loss {loss.item():.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=FAMILY_NAMES)
    parser.add_argument("out_dir")
    parser.add_argument("--dtype", choices=sorted(DTYPE_ARGS), default="bf16")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.time()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(REFERENCE_TEXT) as f:
        text = f.read()

    style = FAMILY_TOKENIZER[args.family]
    if style == "sentencepiece":
        ids, vocab_size, bos_id, eos_id, pad_id = write_sentencepiece_tokenizer(args.out_dir, text)
    else:
        ids, vocab_size, bos_id, eos_id, pad_id = write_bpe_tokenizer(args.out_dir, text, style)
    cfg = family_config(args.family, vocab_size, bos_id, eos_id, pad_id, DTYPE_CONFIG[args.dtype])
    write_json(os.path.join(args.out_dir, "config.json"), cfg)
    generation = {"_from_model_config": True, "bos_token_id": bos_id, "eos_token_id": eos_id,
                  "transformers_version": cfg["transformers_version"]}
    if pad_id is not None and "pad_token_id" in cfg:
        generation["pad_token_id"] = pad_id
    write_json(os.path.join(args.out_dir, "generation_config.json"), generation)
    write_json(os.path.join(args.out_dir, "smoke_tokens.json"), {
        "text": "src/smoke/reference.txt", "bos_prepended": bos_id is not None, "count": len(ids), "ids": ids})

    model = families.CausalLM(cfg)
    for name, param in model.named_parameters():  # transformers' initialisation: N(0, 0.02) for matrices
        if param.dim() > 1:
            torch.nn.init.normal_(param, std=cfg["initializer_range"])
        elif name.endswith("bias"):
            torch.nn.init.zeros_(param)
    id_tensor = torch.tensor(ids)
    train(model, id_tensor, args.steps)

    tensors = {name: t.detach().to(DTYPE_ARGS[args.dtype]).contiguous() for name, t in model.state_dict().items()}
    safetensors_io.save(os.path.join(args.out_dir, "model.safetensors"), tensors)

    # The perplexity of what was saved (rounded to the saved dtype), in float32.
    saved = families.CausalLM(cfg)
    saved.load_state_dict({name: t.float() for name, t in tensors.items()})
    # The run a healthy copy of this model reproduces: `ckpt smoke` judges the directory against it.
    doc = baseline.compute(saved, ids, "tools/smoke/train_tiny.py (torch, float32)")
    baseline.write(os.path.join(args.out_dir, "ckpt-smoke-baseline.json"), doc)
    perplexity, top1 = doc["perplexity"], doc["top1_accuracy"]
    seconds = time.time() - started
    print(f"{args.family}: {len(ids)} tokens, vocab {vocab_size}, {sum(t.numel() for t in tensors.values())} "
          f"parameters, saved {args.dtype}: perplexity {perplexity:.3f}, top-1 {top1:.3f}, {seconds:.1f} s")


if __name__ == "__main__":
    main()
