#!/usr/bin/python3
"""An independent forward pass of the Llama family (Llama, Mistral, Qwen2, Qwen3) in NumPy.

Written from transformers' modeling_llama.py / modeling_mistral.py / modeling_qwen2.py /
modeling_qwen3.py and their configuration classes, sharing no code with the C library: it reads
config.json and the safetensors files (one model.safetensors, or the shards an index lists) itself
and computes in float64, then writes float32 .npy files:

    logits     [T, V]                          for every position
    attention  [n_layer, n_head, T, T]         softmax probabilities (optional)

Usage:
    /usr/bin/python3 tools/llama_reference.py MODEL_DIR --ids 1,2,3 --logits OUT.npy [--attention OUT.npy]

What it computes, per transformers:
    RMSNorm:  w * x / sqrt(mean(x^2) + eps)                                (LlamaRMSNorm)
    rope:     inv_freq = 1 / theta^(2i/D), scaled for rope_scaling (or transformers 5's
              rope_parameters) "linear" (/ factor), "llama3" (_compute_llama3_parameters) or
              "yarn" (transformers 5's _compute_yarn_parameters, its attention_factor scaling cos
              and sin); x * cos + rotate_half(x) * sin with rotate_half(x) = [-x2, x1], cos/sin
              of [freqs, freqs]                                            (apply_rotary_pos_emb)
    attention: q, k, v projections (biases: Qwen2's q/k/v, attention_bias for Llama/Qwen3),
              Qwen3's q_norm/k_norm per head before rope, key/value heads repeated for the
              groups (repeat_kv), scores / sqrt(D), causal mask, and the sliding window
              (key j visible to query i when i - j < sliding_window) on the layers that have one
    MLP:      down(silu(gate(x)) * up(x))
    head:     lm_head.weight, or the embedding when tie_word_embeddings
Needs only Python 3 and NumPy (Debian's python3-numpy).
"""

import json
import math
import os
import sys

import numpy as np

from reference_io import ModelError, check_shapes, main, read_safetensors

DEFAULTS = {  # the configuration classes' defaults that matter here
    "llama": dict(num_key_value_heads=None, head_dim=None, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False, max_position_embeddings=2048),
    "mistral": dict(num_key_value_heads=8, head_dim=None, rms_norm_eps=1e-6, rope_theta=10000.0,
                    tie_word_embeddings=False, sliding_window=4096, max_position_embeddings=131072),
    "qwen2": dict(num_key_value_heads=32, head_dim=None, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=28, max_position_embeddings=32768),
    "qwen3": dict(num_key_value_heads=32, head_dim=128, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False, attention_bias=False, use_sliding_window=False,
                  sliding_window=4096, max_window_layers=28, max_position_embeddings=32768),
}
CLASSES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
           "Qwen3ForCausalLM": "qwen3"}


def read_config(path):
    with open(path, "r", encoding="utf-8") as f:
        raw = json.load(f)
    arch = raw.get("model_type") or CLASSES.get((raw.get("architectures") or [""])[0])
    if arch not in DEFAULTS:
        raise ModelError(f"{path}: model_type {arch!r} is not llama, mistral, qwen2 or qwen3")
    c = dict(DEFAULTS[arch])
    c.update({k: v for k, v in raw.items() if v is not None or k in ("sliding_window", "rope_scaling")})
    c["arch"] = arch
    if c.get("hidden_act", "silu") not in ("silu", "swish"):
        raise ModelError(f"hidden_act {c['hidden_act']!r} is not silu")
    if c.get("num_key_value_heads") is None:
        c["num_key_value_heads"] = c["num_attention_heads"]
    if c.get("head_dim") is None:
        c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    n = c["num_hidden_layers"]
    window = c.get("sliding_window")
    if arch == "mistral":
        c["windowed"] = [bool(window)] * n
    elif arch in ("qwen2", "qwen3") and c.get("use_sliding_window") and window:
        types = c.get("layer_types")
        if types:
            c["windowed"] = [t == "sliding_attention" for t in types]
        else:
            c["windowed"] = [i >= c["max_window_layers"] for i in range(n)]
    else:
        c["windowed"] = [False] * n
    c["qkv_bias"] = True if arch == "qwen2" else bool(c.get("attention_bias", False)) if arch != "mistral" else False
    c["o_bias"] = bool(c.get("attention_bias", False)) if arch in ("llama", "qwen3") else False
    c["mlp_bias"] = bool(c.get("mlp_bias", False)) if arch == "llama" else False
    c["qk_norm"] = arch == "qwen3"
    return c


def yarn(c, rs, f, base):
    """_compute_yarn_parameters (transformers 5): the frequencies and the attention factor."""
    D = c["head_dim"]
    original = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
    factor = rs.get("factor")
    if factor is None:
        factor = c["max_position_embeddings"] / original

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = rs.get("attention_factor")
    if attention is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return D * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(D // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    return (f / factor) * (1 - extrapolation) + f * extrapolation, attention


def inv_freq(c, T):
    """transformers' ROPE_INIT_FUNCTIONS for default, linear, llama3, yarn and dynamic, in float64,
    for a pass over T tokens (dynamic's base grows past max_position_embeddings): the inverse
    frequencies and the factor that scales cos and sin."""
    D = c["head_dim"]
    rs = c.get("rope_scaling") or c.get("rope_parameters")
    base = (rs or {}).get("rope_theta", c["rope_theta"])
    f = 1.0 / (base ** (np.arange(0, D, 2, dtype=np.float64) / D))
    kind = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
    if kind == "default":
        return f, 1.0
    if kind == "dynamic":  # _compute_dynamic_ntk_parameters for a pass over T tokens
        max_pos, factor = c["max_position_embeddings"], rs["factor"]
        seq_len = max(T, max_pos)
        base = base * ((factor * seq_len / max_pos) - (factor - 1)) ** (D / (D - 2))
        return 1.0 / (base ** (np.arange(0, D, 2, dtype=np.float64) / D)), 1.0
    if kind == "linear":
        return f / rs["factor"], 1.0
    if kind == "yarn":
        return yarn(c, rs, f, base)
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / f
        g = np.where(wavelen > low_wavelen, f / factor, f)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * g / factor + smooth * g
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, g), 1.0
    raise ModelError(f"rope_scaling {kind!r} is not computed here")


def rms_norm(x, w, eps):
    return w * (x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(c, w, ids, want_attention):
    T = len(ids)
    H, Hkv, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    G = H // Hkv
    eps = c["rms_norm_eps"]
    f, attention_factor = inv_freq(c, T)
    freqs = np.outer(np.arange(T, dtype=np.float64), f)
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = attention_factor * np.cos(emb)[None], attention_factor * np.sin(emb)[None]  # [1, T, D]
    x = w["model.embed_tokens.weight"][ids]
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    attention = np.zeros((c["num_hidden_layers"], H, T, T)) if want_attention else None
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."

        def linear(v, name, bias):
            y = v @ w[p + name + ".weight"].T
            return y + w[p + name + ".bias"] if bias else y

        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(a, "self_attn.q_proj", c["qkv_bias"]).reshape(T, H, D).transpose(1, 0, 2)
        k = linear(a, "self_attn.k_proj", c["qkv_bias"]).reshape(T, Hkv, D).transpose(1, 0, 2)
        v = linear(a, "self_attn.v_proj", c["qkv_bias"]).reshape(T, Hkv, D).transpose(1, 0, 2)
        if c["qk_norm"]:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, G, axis=0)  # repeat_kv: query head h reads key/value head h // G
        v = np.repeat(v, G, axis=0)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(D)
        visible = j <= i
        if c["windowed"][layer]:
            visible = visible & (i - j < c["sliding_window"])
        scores = np.where(visible[None], scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        if want_attention:
            attention[layer] = probs
        heads = (probs @ v).transpose(1, 0, 2).reshape(T, H * D)
        x = x + linear(heads, "self_attn.o_proj", c["o_bias"])
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gated = silu(linear(m, "mlp.gate_proj", c["mlp_bias"])) * linear(m, "mlp.up_proj", c["mlp_bias"])
        x = x + linear(gated, "mlp.down_proj", c["mlp_bias"])
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    # the head in bands of rows, each rounded to float32 at once: [T, V] in float64 would need
    # 2.5 GB at T = 2048 with Qwen's 151936 tokens
    logits = np.empty((T, head.shape[0]), dtype=np.float32)
    for r in range(0, T, 256):
        logits[r : r + 256] = x[r : r + 256] @ head.T
    return logits, attention


def expected_shapes(c):
    C, H, Hkv, D, I, V = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                          c["intermediate_size"], c["vocab_size"])
    e = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    if not c["tie_word_embeddings"]:
        e["lm_head.weight"] = (V, C)
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        e.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                  p + "self_attn.q_proj.weight": (H * D, C), p + "self_attn.k_proj.weight": (Hkv * D, C),
                  p + "self_attn.v_proj.weight": (Hkv * D, C), p + "self_attn.o_proj.weight": (C, H * D),
                  p + "mlp.gate_proj.weight": (I, C), p + "mlp.up_proj.weight": (I, C),
                  p + "mlp.down_proj.weight": (C, I)})
        if c["qkv_bias"]:
            e.update({p + "self_attn.q_proj.bias": (H * D,), p + "self_attn.k_proj.bias": (Hkv * D,),
                      p + "self_attn.v_proj.bias": (Hkv * D,)})
        if c["o_bias"]:
            e[p + "self_attn.o_proj.bias"] = (C,)
        if c["mlp_bias"]:
            e.update({p + "mlp.gate_proj.bias": (I,), p + "mlp.up_proj.bias": (I,), p + "mlp.down_proj.bias": (C,)})
        if c["qk_norm"]:
            e.update({p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,)})
    return e


def load_model(model_dir):
    c = read_config(os.path.join(model_dir, "config.json"))
    expected = expected_shapes(c)
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(model_dir, "model.safetensors.index.json"), "r", encoding="utf-8") as f:
            index = json.load(f)
        files = [os.path.join(model_dir, s) for s in sorted(set(index["weight_map"].values()))]
    w = {}
    for path in files:
        w.update(read_safetensors(path, expected))
    check_shapes(model_dir, w, expected)
    return c, w


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], "llama_reference", "Reference Llama-family forward pass (NumPy, float64).",
                  load_model, forward))
