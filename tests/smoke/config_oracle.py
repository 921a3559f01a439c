#!/usr/bin/python3
"""The smoke pass's hyperparameters of a config.json, read independently of ckpt's C++: what the
transformers modelling code of each family takes from the config (and the defaults of its config
class where a field is absent), as the smoke forward pass needs it.

usage: config_oracle.py CONFIG.json...   -> one JSON object per line: {"config": path, ...}

Families: llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3_text (also inside a gemma3
wrapper's text_config), mixtral, qwen3_moe. Anything else prints {"config": path, "family": null}."""
import json
import math
import sys

FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text", "mixtral", "qwen3_moe"}

# The config classes' defaults for the fields the forward pass reads (transformers 4.5x).
DEFAULTS = {
    "llama": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "mistral": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "qwen2": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "qwen3": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "qwen3_moe": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "phi3": dict(rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False),
    "mixtral": dict(rms_norm_eps=1e-5, rope_theta=1e6, hidden_act="silu", tie_word_embeddings=False),
    "gemma": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="gelu_pytorch_tanh", tie_word_embeddings=True,
                  head_dim=256),
    "gemma2": dict(rms_norm_eps=1e-6, rope_theta=10000.0, hidden_activation="gelu_pytorch_tanh",
                   tie_word_embeddings=True, head_dim=256, query_pre_attn_scalar=256,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0, sliding_window=4096),
    "gemma3_text": dict(rms_norm_eps=1e-6, rope_theta=1e6, hidden_activation="gelu_pytorch_tanh",
                        tie_word_embeddings=True, head_dim=256, query_pre_attn_scalar=256,
                        rope_local_base_freq=10000.0, sliding_window=4096, sliding_window_pattern=6),
}


def hyper(path):
    with open(path) as f:
        cfg = json.load(f)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    family = text.get("model_type", cfg.get("model_type"))
    if family == "gemma3":
        family = "gemma3_text"
    if family not in FAMILIES:
        return {"config": path, "family": None}
    d = DEFAULTS[family]

    def get(key, default=None):
        if key in text and text[key] is not None:
            return text[key]
        if key in d:
            return d[key]
        return default

    H, L, nh = text["hidden_size"], text["num_hidden_layers"], text["num_attention_heads"]
    nkv = get("num_key_value_heads") or nh
    hd = get("head_dim") or H // nh
    tied = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", d["tie_word_embeddings"]))
    if tied is None:
        tied = d["tie_word_embeddings"]
    gemma = family.startswith("gemma")
    act = text.get("hidden_activation") or text.get("hidden_act") or d.get("hidden_act") or d.get("hidden_activation")
    if gemma and act == "gelu":
        act = "gelu_pytorch_tanh"  # GemmaMLP: the exact gelu is replaced by the tanh approximation
    rope_parameters = text.get("rope_parameters") if isinstance(text.get("rope_parameters"), dict) else {}
    theta = text.get("rope_theta", rope_parameters.get("rope_theta", d["rope_theta"]))
    rot = int(hd * (text.get("partial_rotary_factor") or 1.0))
    rot -= rot % 2
    scaling = text.get("rope_scaling") if isinstance(text.get("rope_scaling"), dict) else None
    kind = ""
    if scaling:
        kind = scaling.get("rope_type", scaling.get("type", ""))
        if kind == "default":
            kind = ""
        if kind == "su":
            kind = "longrope"
    window = get("sliding_window") or 0
    sliding = [False] * L
    if window:
        if isinstance(text.get("layer_types"), list) and len(text["layer_types"]) == L:
            sliding = [t == "sliding_attention" for t in text["layer_types"]]
        elif family == "gemma2":
            sliding = [i % 2 == 0 for i in range(L)]
        elif family == "gemma3_text":
            pattern = get("sliding_window_pattern")
            sliding = [bool(pattern) and (i + 1) % pattern != 0 for i in range(L)]
        elif family in ("mistral", "mixtral", "phi3"):
            sliding = [True] * L
        elif family in ("qwen2", "qwen3", "qwen3_moe"):
            maxw = text.get("max_window_layers", L)
            sliding = [bool(text.get("use_sliding_window", False)) and i >= maxw for i in range(L)]
    out = {
        "config": path, "family": family, "H": H, "L": L, "nh": nh, "nkv": nkv, "hd": hd,
        "I": text.get("intermediate_size", 0), "V": text["vocab_size"], "eps": get("rms_norm_eps"),
        "act": "gelu_tanh" if act.startswith("gelu") else "silu", "norm_plus_one": gemma, "embed_scale": gemma,
        "sandwich_norms": family in ("gemma2", "gemma3_text"),
        "qk_norm": family in ("qwen3", "qwen3_moe", "gemma3_text"), "fused": family == "phi3",
        "attn_scale": 1 / math.sqrt(get("query_pre_attn_scalar") if family in ("gemma2", "gemma3_text") else hd),
        "attn_softcap": get("attn_logit_softcapping") or 0, "final_softcap": get("final_logit_softcapping") or 0,
        "sliding_window": window if any(sliding) else 0, "sliding": sliding, "theta": theta, "rot_dim": rot,
        "scaling": kind, "tied": bool(tied),
        "local_theta": get("rope_local_base_freq") if family == "gemma3_text" else theta,
    }
    if kind in ("linear", "llama3"):
        out["factor"] = scaling.get("factor")
    if family in ("mixtral", "qwen3_moe"):
        E = text.get("num_local_experts") if family == "mixtral" else text.get("num_experts")
        out["experts"] = E
        out["top_k"] = text.get("num_experts_per_tok", 2)
        out["moe_I"] = text.get("moe_intermediate_size", out["I"])
        out["norm_topk"] = True if family == "mixtral" else bool(text.get("norm_topk_prob", False))
        step = text.get("decoder_sparse_step", 1) if family == "qwen3_moe" else 1
        only = set(text.get("mlp_only_layers", []) or []) if family == "qwen3_moe" else set()
        out["moe_layer"] = [E > 0 and (i + 1) % step == 0 and i not in only for i in range(L)]
    return out


for p in sys.argv[1:]:
    print(json.dumps(hyper(p)))
