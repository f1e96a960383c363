"""What the NumPy reference forward passes (gpt2_reference.py, llama_reference.py) share: reading
safetensors files into float64 arrays, checking the tensors a model needs, and the command line
(a model folder and ids in, float32 .npy files of logits and attention out).

It shares no code with the C library.  Needs only Python 3 and NumPy (Debian's python3-numpy).
"""

import argparse
import json
import math
import struct
import sys

import numpy as np

MAX_HEADER_BYTES = 100_000_000
DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": (None, 2), "F64": ("<f8", 8)}


class ModelError(Exception):
    """A problem with the model files or the ids, reported as one line."""


def read_safetensors(path, wanted=None):
    """Returns {name: float64 array}: every floating-point tensor of the file (wanted None; integer
    buffers are passed over), or those named in `wanted` (which must then be floating point)."""
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
        if name == "__metadata__" or (wanted is not None and name not in wanted):
            continue
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            if wanted is None:
                continue  # integer buffers are not used by a forward pass
            raise ModelError(f"{path}: tensor {name} is {dtype}")
        numel = math.prod(shape)
        if not 0 <= begin <= end <= len(data) or end - begin != numel * DTYPES[dtype][1]:
            raise ModelError(f"{path}: tensor {name}: data_offsets {begin, end} do not fit shape {shape} {dtype}")
        raw = data[begin:end]
        if dtype == "BF16":
            # bfloat16 is the top half of a float32: widen the bits and reinterpret.
            array = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=DTYPES[dtype][0])
        tensors[name] = array.astype(np.float64).reshape(shape)
    return tensors


def check_shapes(model_dir, w, expected):
    """Every tensor of `expected` ({name: shape}) present in w with its shape."""
    for name, shape in expected.items():
        if name not in w:
            raise ModelError(f"{model_dir}: tensor {name} is missing")
        if w[name].shape != shape:
            raise ModelError(f"{model_dir}: tensor {name} has shape {list(w[name].shape)}, expected {list(shape)}")


def main(argv, prog, description, load_model, forward):
    """The command line of a reference: load_model(dir) -> (cfg, w) with cfg["vocab_size"] and, when
    the model has a limit, cfg["n_positions"]; forward(cfg, w, ids, want_attention) -> (logits [T, V],
    attention [n_layer, n_head, T, T] or None).  Returns the exit status (1 on bad input)."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
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
        if cfg.get("n_positions") is not None and len(ids) > cfg["n_positions"]:
            raise ModelError(f"{len(ids)} ids but the model has only {cfg['n_positions']} positions")
        bad = [i for i in ids if not 0 <= i < cfg["vocab_size"]]
        if bad:
            raise ModelError(f"ids {bad[:5]} are outside the vocabulary [0, {cfg['vocab_size']})")
        logits, attention = forward(cfg, w, np.array(ids), args.attention is not None)
    except (ModelError, OSError, KeyError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    np.save(args.logits, logits.astype(np.float32))
    if args.attention:
        np.save(args.attention, attention.astype(np.float32))
    print(f"T={len(ids)} V={cfg['vocab_size']}: next token after the last id is {int(logits[-1].argmax())}")
    return 0
