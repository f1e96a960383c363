#!/usr/bin/python3
"""An independent GPT-2 forward pass in NumPy, to check vkgraph against.

It shares no code with the C library: it reads the safetensors file and config.json itself and
computes in float64, then writes float32 .npy files:

    logits     [T, V]                          for every position
    attention  [n_layer, n_head, T, T]         softmax probabilities (optional)

Usage:
    /usr/bin/python3 tools/gpt2_reference.py MODEL_DIR --ids 1,2,3 --logits OUT.npy [--attention OUT.npy]

MODEL_DIR holds config.json and model.safetensors in Hugging Face's GPT-2 layout (names with or
without "transformer.", head tied to wte unless lm_head.weight is present; F32, F16 or BF16).
config.json is read as transformers' GPT2Config reads it: n_inner (null: 4 * n_embd),
activation_function by its ACT2FN name, layer_norm_epsilon, scale_attn_weights and
scale_attn_by_inverse_layer_idx.  Needs only Python 3 and NumPy (Debian's python3-numpy).
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

MAX_HEADER_BYTES = 100_000_000
DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": (None, 2), "F64": ("<f8", 8)}


class ModelError(Exception):
    """A problem with the model files, reported as one line."""


def read_safetensors(path):
    """Returns {name: float64 array} for every floating-point tensor in the file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ModelError(f"{path}: {len(blob)} bytes, too short for safetensors")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > MAX_HEADER_BYTES or 8 + header_len > len(blob):
        raise ModelError(f"{path}: header length {header_len} does not fit the file ({len(blob)} bytes)")
    try:
        header = json.loads(blob[8 : 8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{path}: header is not valid JSON: {e}") from e
    data = memoryview(blob)[8 + header_len :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            continue  # integer buffers are not used by the forward pass
        numel = math.prod(shape)
        if not 0 <= begin <= end <= len(data) or end - begin != numel * DTYPES[dtype][1]:
            raise ModelError(f"{path}: tensor {name}: data_offsets {begin, end} do not fit shape {shape} {dtype}")
        raw = data[begin:end]
        if dtype == "BF16":
            # bfloat16 is the top half of a float32: widen the bits and reinterpret.
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[dtype][0])
        tensors[name] = array.astype(np.float64).reshape(shape)
    return tensors


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


def forward(cfg, w, ids):
    """ids [T] -> (logits [T, V], attention [n_layer, n_head, T, T])."""
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
    head = w.get("lm_head.weight", w["wte.weight"])  # [V, C]; tied to wte when absent
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
    if "lm_head.weight" in w:
        expected["lm_head.weight"] = (V, C)
    for name, shape in expected.items():
        if name not in w:
            raise ModelError(f"{model_dir}: tensor {name} is missing")
        if w[name].shape != shape:
            raise ModelError(f"{model_dir}: tensor {name} has shape {list(w[name].shape)}, expected {list(shape)}")
    return cfg, w


def main(argv):
    ap = argparse.ArgumentParser(description="Reference GPT-2 forward pass (NumPy, float64).")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated token ids, e.g. 15496,11,995")
    ap.add_argument("--logits", required=True, help="output .npy for logits [T, V] (float32)")
    ap.add_argument("--attention", help="output .npy for attention [n_layer, n_head, T, T] (float32)")
    args = ap.parse_args(argv)
    try:
        ids = [int(s) for s in args.ids.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--ids must be comma-separated integers, got {args.ids!r}")
    try:
        cfg, w = load_model(args.model_dir)
        if not ids:
            raise ModelError("--ids is empty")
        if len(ids) > cfg["n_positions"]:
            raise ModelError(f"{len(ids)} ids but the model has only {cfg['n_positions']} positions")
        bad = [i for i in ids if not 0 <= i < cfg["vocab_size"]]
        if bad:
            raise ModelError(f"ids {bad} are outside the vocabulary [0, {cfg['vocab_size']})")
        logits, attention = forward(cfg, w, np.array(ids))
    except (ModelError, OSError, json.JSONDecodeError) as e:
        print(f"gpt2_reference: {e}", file=sys.stderr)
        return 1
    np.save(args.logits, logits.astype(np.float32))
    if args.attention:
        np.save(args.attention, attention.astype(np.float32))
    print(f"T={len(ids)} V={cfg['vocab_size']}: next token after the last id is {int(logits[-1].argmax())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
