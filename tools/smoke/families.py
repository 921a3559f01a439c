"""Torch modules for the decoder families `ckpt smoke` checks, written from the published
architecture definitions (the transformers modeling files as facts, not their code).

One CausalLM class covers every family; a family is a set of switches read from config.json
(norm convention, activation, fused projections, q/k norms, biases, soft-capping, sliding
windows, MoE routing). Module attribute names mirror transformers' so that state_dict() keys
are exactly the tensor names a Hugging Face checkpoint of that family carries.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3_text",
            "mixtral", "qwen3_moe")
GEMMA_TYPES = ("gemma", "gemma2", "gemma3_text")

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


class RMSNorm(nn.Module):
    """RMS normalisation computed in float32. Gemma stores the scale zero-centred and applies
    (1 + w); every other family stores and applies w directly."""

    def __init__(self, dim, eps, zero_centred):
        super().__init__()
        self.eps = eps
        self.zero_centred = zero_centred
        self.weight = nn.Parameter(torch.zeros(dim) if zero_centred else torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        scale = (1.0 + self.weight.float()) if self.zero_centred else self.weight.float()
        return (normed * scale).to(x.dtype)


def activation(name):
    if name == "silu":
        return F.silu
    if name in ("gelu_pytorch_tanh", "gelu_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    raise ValueError(f"unknown activation {name}")


def hidden_activation_name(cfg):
    # Gemma's MLP reads hidden_activation; a gemma config that only says hidden_act "gelu"
    # still runs the tanh approximation in transformers, so that is the fallback for gemma.
    if cfg["model_type"] in GEMMA_TYPES:
        return cfg.get("hidden_activation") or "gelu_pytorch_tanh"
    return cfg.get("hidden_act", "silu")


def llama3_scaled_inv_freq(inv_freq, scaling):
    """The llama3 rope_type: long wavelengths are divided by `factor`, short ones kept, and the
    band between them interpolated smoothly (Llama 3.1 / 3.2 rope_scaling)."""
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rope_cos_sin(head_dim, theta, positions, scaling=None):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
        inv_freq = llama3_scaled_inv_freq(inv_freq, scaling)
    elif scaling and scaling.get("rope_type", scaling.get("type")) not in (None, "default"):
        raise ValueError(f"rope scaling {scaling} is not implemented")
    freqs = positions.double()[:, None] * inv_freq.float().double()[None, :]
    # Half-rotation layout (transformers' rotate_half): the frequencies repeat over both halves.
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def layer_is_sliding(cfg, layer_index):
    model_type = cfg["model_type"]
    if "layer_types" in cfg and cfg["layer_types"]:
        return cfg["layer_types"][layer_index] == "sliding_attention"
    if model_type == "gemma2":
        return layer_index % 2 == 0
    if model_type == "gemma3_text":
        return (layer_index + 1) % cfg.get("sliding_window_pattern", 6) != 0
    if model_type == "mistral" or model_type == "mixtral":
        return cfg.get("sliding_window") is not None
    if model_type in ("qwen2", "qwen3", "qwen3_moe"):
        return bool(cfg.get("use_sliding_window")) and layer_index >= cfg.get("max_window_layers", 0)
    return False


def layer_rope_theta(cfg, layer_index):
    # Gemma 3 runs its sliding layers with a local base and its global layers with rope_theta.
    if cfg["model_type"] == "gemma3_text" and layer_is_sliding(cfg, layer_index):
        return cfg.get("rope_local_base_freq", 10000.0)
    return cfg.get("rope_theta", 10000.0)


class Attention(nn.Module):
    def __init__(self, cfg, layer_index):
        super().__init__()
        model_type = cfg["model_type"]
        hidden = cfg["hidden_size"]
        self.num_heads = cfg["num_attention_heads"]
        self.num_kv_heads = cfg.get("num_key_value_heads", self.num_heads)
        self.head_dim = cfg.get("head_dim") or hidden // self.num_heads
        self.fused_qkv = model_type == "phi3"
        q_out = self.num_heads * self.head_dim
        kv_out = self.num_kv_heads * self.head_dim
        if self.fused_qkv:
            self.qkv_proj = nn.Linear(hidden, q_out + 2 * kv_out, bias=False)
        else:
            # qwen2 always has q/k/v biases; the others follow attention_bias.
            qkv_bias = model_type == "qwen2" or bool(cfg.get("attention_bias", False))
            self.q_proj = nn.Linear(hidden, q_out, bias=qkv_bias)
            self.k_proj = nn.Linear(hidden, kv_out, bias=qkv_bias)
            self.v_proj = nn.Linear(hidden, kv_out, bias=qkv_bias)
        o_bias = model_type not in ("qwen2",) and bool(cfg.get("attention_bias", False))
        self.o_proj = nn.Linear(q_out, hidden, bias=o_bias)
        self.has_qk_norm = model_type in ("qwen3", "qwen3_moe", "gemma3_text")
        if self.has_qk_norm:
            zero_centred = model_type in GEMMA_TYPES
            self.q_norm = RMSNorm(self.head_dim, cfg["rms_norm_eps"], zero_centred)
            self.k_norm = RMSNorm(self.head_dim, cfg["rms_norm_eps"], zero_centred)
        if model_type in ("gemma2", "gemma3_text"):
            self.scaling = cfg["query_pre_attn_scalar"] ** -0.5
        else:
            self.scaling = self.head_dim ** -0.5
        self.softcap = cfg.get("attn_logit_softcapping") if model_type in ("gemma2", "gemma3_text") else None
        self.sliding_window = cfg.get("sliding_window") if layer_is_sliding(cfg, layer_index) else None
        self.rope_theta = layer_rope_theta(cfg, layer_index)
        self.rope_scaling = cfg.get("rope_scaling")

    def forward(self, x):
        seq = x.shape[0]
        if self.fused_qkv:
            qkv = self.qkv_proj(x)
            q_out = self.num_heads * self.head_dim
            kv_out = self.num_kv_heads * self.head_dim
            q, k, v = qkv.split([q_out, kv_out, kv_out], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(seq, self.num_heads, self.head_dim).transpose(0, 1)
        k = k.view(seq, self.num_kv_heads, self.head_dim).transpose(0, 1)
        v = v.view(seq, self.num_kv_heads, self.head_dim).transpose(0, 1)
        if self.has_qk_norm:  # per head, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_cos_sin(self.head_dim, self.rope_theta, torch.arange(seq), self.rope_scaling)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.num_heads // self.num_kv_heads
        k = k.repeat_interleave(group, dim=0)
        v = v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(-1, -2)).float() * self.scaling
        if self.softcap:
            scores = torch.tanh(scores / self.softcap) * self.softcap
        query_pos = torch.arange(seq)[:, None]
        key_pos = torch.arange(seq)[None, :]
        allowed = key_pos <= query_pos
        if self.sliding_window is not None:
            # A query sees the keys less than `sliding_window` positions behind it.
            allowed = allowed & (query_pos - key_pos < self.sliding_window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        out = (probs @ v).transpose(0, 1).reshape(seq, self.num_heads * self.head_dim)
        return self.o_proj(out)


class GatedMLP(nn.Module):
    """down(act(gate(x)) * up(x)); phi3 stores gate and up as one gate_up_proj, gate first."""

    def __init__(self, hidden, intermediate, act_name, fused=False):
        super().__init__()
        self.fused = fused
        if fused:
            self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        else:
            self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
            self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.act = activation(act_name)

    def forward(self, x):
        if self.fused:
            gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        return self.down_proj(self.act(gate) * up)


class MixtralExpert(nn.Module):
    """Mixtral's names: w1 gate, w3 up, w2 down."""

    def __init__(self, hidden, intermediate, act_name):
        super().__init__()
        self.w1 = nn.Linear(hidden, intermediate, bias=False)
        self.w2 = nn.Linear(intermediate, hidden, bias=False)
        self.w3 = nn.Linear(hidden, intermediate, bias=False)
        self.act = activation(act_name)

    def forward(self, x):
        return self.w2(self.act(self.w1(x)) * self.w3(x))


class SparseMoE(nn.Module):
    """Router softmax over all experts, keep the top k, renormalise the kept weights when the
    family does (mixtral always; qwen3_moe when norm_topk_prob)."""

    def __init__(self, cfg):
        super().__init__()
        hidden = cfg["hidden_size"]
        act_name = hidden_activation_name(cfg)
        if cfg["model_type"] == "mixtral":
            num_experts = cfg["num_local_experts"]
            self.experts = nn.ModuleList(
                MixtralExpert(hidden, cfg["intermediate_size"], act_name) for _ in range(num_experts))
            self.renormalise = True
        else:
            num_experts = cfg["num_experts"]
            self.experts = nn.ModuleList(
                GatedMLP(hidden, cfg["moe_intermediate_size"], act_name) for _ in range(num_experts))
            self.renormalise = bool(cfg.get("norm_topk_prob", False))
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.top_k = cfg["num_experts_per_tok"]

    def forward(self, x):
        router_probs = torch.softmax(self.gate(x).float(), dim=-1)
        top_weights, top_experts = router_probs.topk(self.top_k, dim=-1)
        if self.renormalise:
            top_weights = top_weights / top_weights.sum(-1, keepdim=True)
        top_weights = top_weights.to(x.dtype)
        out = torch.zeros_like(x)
        # Every expert runs on every token and unselected ones get weight 0: the same sum as
        # sparse dispatch, and simpler at this size.
        for index, expert in enumerate(self.experts):
            weight = (top_weights * (top_experts == index)).sum(-1, keepdim=True)
            out = out + weight * expert(x)
        return out


class DecoderLayer(nn.Module):
    def __init__(self, cfg, layer_index):
        super().__init__()
        model_type = cfg["model_type"]
        hidden = cfg["hidden_size"]
        eps = cfg["rms_norm_eps"]
        zero_centred = model_type in GEMMA_TYPES
        self.self_attn = Attention(cfg, layer_index)
        self.input_layernorm = RMSNorm(hidden, eps, zero_centred)
        self.post_attention_layernorm = RMSNorm(hidden, eps, zero_centred)
        # gemma2/gemma3 normalise both the input and the output of each branch.
        self.sandwich = model_type in ("gemma2", "gemma3_text")
        if self.sandwich:
            self.pre_feedforward_layernorm = RMSNorm(hidden, eps, zero_centred)
            self.post_feedforward_layernorm = RMSNorm(hidden, eps, zero_centred)
        if model_type == "mixtral":
            self.block_sparse_moe = SparseMoE(cfg)
        elif model_type == "qwen3_moe" and qwen3_moe_layer_is_sparse(cfg, layer_index):
            self.mlp = SparseMoE(cfg)
        else:
            self.mlp = GatedMLP(hidden, cfg["intermediate_size"], hidden_activation_name(cfg),
                                fused=model_type == "phi3")

    def feed_forward(self, x):
        return self.block_sparse_moe(x) if hasattr(self, "block_sparse_moe") else self.mlp(x)

    def forward(self, x):
        if self.sandwich:
            x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x)))
            return x + self.post_feedforward_layernorm(self.feed_forward(self.pre_feedforward_layernorm(x)))
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.feed_forward(self.post_attention_layernorm(x))


def qwen3_moe_layer_is_sparse(cfg, layer_index):
    return (layer_index not in cfg.get("mlp_only_layers", [])
            and cfg.get("num_experts", 0) > 0
            and (layer_index + 1) % cfg.get("decoder_sparse_step", 1) == 0)


class DecoderModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"], cfg["model_type"] in GEMMA_TYPES)


class CausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg["model_type"] not in FAMILIES:
            raise ValueError(f"model_type {cfg['model_type']} is not a smoke family")
        self.cfg = cfg
        self.model = DecoderModel(cfg)
        self.tied = tie_word_embeddings(cfg)
        if not self.tied:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids, skip_layer=None):
        """ids: 1-D LongTensor. Returns (logits [seq, vocab], hidden states after each layer)."""
        cfg = self.cfg
        x = self.model.embed_tokens(ids)
        if cfg["model_type"] in GEMMA_TYPES:
            # Gemma multiplies the embeddings by sqrt(hidden_size) rounded to the model dtype.
            model_dtype = DTYPES.get(cfg.get("torch_dtype", "float32"), torch.float32)
            normaliser = torch.tensor(cfg["hidden_size"] ** 0.5, dtype=model_dtype).to(x.dtype)
            x = x * normaliser
        self.stage_outputs = [("embed", x)]  # every stage ckpt smoke reports, for baselines
        layer_outputs = []
        for index, layer in enumerate(self.model.layers):
            if index != skip_layer:
                x = layer(x)
            layer_outputs.append(x)
            self.stage_outputs.append((f"layer {index}", x))
        x = self.model.norm(x)
        self.stage_outputs.append(("final norm", x))
        weight = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        logits = (x @ weight.t()).float()
        cap = cfg.get("final_logit_softcapping") if cfg["model_type"] in ("gemma2", "gemma3_text") else None
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits, layer_outputs


def tie_word_embeddings(cfg):
    # transformers' defaults when the key is absent: gemma families tie, the others do not.
    return bool(cfg.get("tie_word_embeddings", cfg["model_type"] in GEMMA_TYPES))


def next_token_stats(logits, ids):
    """Mean NLL, perplexity and top-1 accuracy of tokens[1:] given their prefixes."""
    log_probs = torch.log_softmax(logits[:-1].double(), dim=-1)
    targets = ids[1:]
    nll = -log_probs.gather(1, targets[:, None]).squeeze(1)
    nll_mean = nll.mean().item()
    top1 = (logits[:-1].argmax(-1) == targets).double().mean().item()
    return nll_mean, math.exp(nll_mean), top1
