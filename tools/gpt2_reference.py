#!/usr/bin/python3
"""An independent GPT-2 forward pass in NumPy, to check vkgraph against.

It shares no code with the C library: it reads the safetensors file and config.json itself and
computes in float64, then writes float32 .npy files:

    logits     [T, V]                          for every position
    attention  [n_layer, n_head, T, T]         softmax probabilities (optional)

Usage:
    /usr/bin/python3 tools/gpt2_reference.py MODEL_DIR --ids 1,2,3 --logits OUT.npy [--attention OUT.npy]

MODEL_DIR holds config.json and model.safetensors in Hugging Face's GPT-2 layout (names with or
without "transformer.", the head tied to wte unless config.json's tie_word_embeddings is false,
as transformers ties it over any stored lm_head.weight; F32, F16 or BF16).
config.json is read as transformers' GPT2Config reads it: n_inner (null: 4 * n_embd),
activation_function by its ACT2FN name, layer_norm_epsilon, scale_attn_weights and
scale_attn_by_inverse_layer_idx.  Needs only Python 3 and NumPy (Debian's python3-numpy).
"""

import json
import math
import os
import sys

import numpy as np

from reference_io import ModelError, check_shapes, main, read_safetensors


def read_config(path):
    with open(path, "r", encoding="utf-8") as f:
        c = json.load(f)
    try:
        cfg = {
            "n_layer": int(c["n_layer"]),
            "n_head": int(c["n_head"]),
            "n_embd": int(c["n_embd"]),
            "vocab_size": int(c["vocab_size"]),
            "n_positions": int(c["n_positions"] if c.get("n_positions") is not None else c["n_ctx"]),
            "eps": float(c["layer_norm_epsilon"] if c.get("layer_norm_epsilon") is not None else 1e-5),
            "activation": c.get("activation_function") or "gelu_new",
            "scale_attn_weights": c.get("scale_attn_weights") is not False,  # null or absent: True
            "scale_by_layer": bool(c.get("scale_attn_by_inverse_layer_idx")),
            "tied": c.get("tie_word_embeddings", True) is not False,
        }
        cfg["n_inner"] = int(c["n_inner"]) if c.get("n_inner") is not None else 4 * cfg["n_embd"]
    except KeyError as e:
        raise ModelError(f"{path}: missing {e}") from e
    if cfg["n_embd"] % cfg["n_head"]:
        raise ModelError(f"{path}: n_embd {cfg['n_embd']} is not divisible by n_head {cfg['n_head']}")
    return cfg


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def activation(name):
    """transformers' ACT2FN entry of that name, in float64."""
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate"):
        return lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    if name in ("gelu", "gelu_python"):
        erf = np.frompyfunc(math.erf, 1, 1)
        return lambda x: 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)).astype(np.float64))
    if name == "quick_gelu":
        return lambda x: x * sigmoid(1.702 * x)
    if name in ("silu", "swish"):
        return lambda x: x * sigmoid(x)
    if name == "relu":
        return lambda x: np.maximum(x, 0.0)
    raise ModelError(f"activation_function {name!r} is not supported")


def layer_norm(x, weight, bias, eps):
    """Over the last axis, with the population variance, as torch.nn.LayerNorm."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def forward(cfg, w, ids, want_attention=True):
    """ids [T] -> (logits [T, V], attention [n_layer, n_head, T, T]); the attention is kept whatever
    want_attention says (GPT-2's small models afford it)."""
    T, C, H = len(ids), cfg["n_embd"], cfg["n_head"]
    d = C // H
    act = activation(cfg["activation"])
    x = w["wte.weight"][ids] + w["wpe.weight"][np.arange(T)]  # [T, C]
    causal = np.tril(np.ones((T, T), dtype=bool))
    attention = np.zeros((cfg["n_layer"], H, T, T))
    for layer in range(cfg["n_layer"]):
        p = f"h.{layer}."
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], cfg["eps"])
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # [T, 3C]; Conv1D is x @ W
        q, k, v = (qkv[:, i * C : (i + 1) * C].reshape(T, H, d).transpose(1, 0, 2) for i in range(3))  # [H, T, d]
        scores = q @ k.transpose(0, 2, 1)  # [H, T, T]
        if cfg["scale_attn_weights"]:
            scores = scores / math.sqrt(d)
        if cfg["scale_by_layer"]:
            scores = scores / float(layer + 1)
        scores = np.where(causal, scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        attention[layer] = probs
        heads = (probs @ v).transpose(1, 0, 2).reshape(T, C)  # merge heads: [T, H*d]
        x = x + heads @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], cfg["eps"])
        hidden = act(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])  # [T, n_inner]
        x = x + hidden @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], cfg["eps"])
    head = w["wte.weight"] if cfg["tied"] else w["lm_head.weight"]  # [V, C]
    return x @ head.T, attention


def load_model(model_dir):
    cfg = read_config(os.path.join(model_dir, "config.json"))
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    # Checkpoints saved from GPT2LMHeadModel prefix the body with "transformer."; GPT2Model does not.
    w = {(k[len("transformer.") :] if k.startswith("transformer.") else k): v for k, v in raw.items()}
    C, V, P, I = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_inner"]
    expected = {"wte.weight": (V, C), "wpe.weight": (P, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        expected.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,), p + "ln_2.weight": (C,),
                         p + "ln_2.bias": (C,), p + "attn.c_attn.weight": (C, 3 * C),
                         p + "attn.c_attn.bias": (3 * C,), p + "attn.c_proj.weight": (C, C),
                         p + "attn.c_proj.bias": (C,), p + "mlp.c_fc.weight": (C, I),
                         p + "mlp.c_fc.bias": (I,), p + "mlp.c_proj.weight": (I, C),
                         p + "mlp.c_proj.bias": (C,)})
    if not cfg["tied"]:
        expected["lm_head.weight"] = (V, C)
    check_shapes(model_dir, w, expected)
    return cfg, w


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], "gpt2_reference", "Reference GPT-2 forward pass (NumPy, float64).", load_model,
                  forward))
