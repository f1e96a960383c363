#!/usr/bin/python3
"""Writes the seed corpora of fuzz/corpus/<target>/: small valid inputs of each format (and a few
near misses) for the fuzzer to mutate.  Run from anywhere; it rewrites only the seed_* files,
leaving reproducers (other names) alone.  Uses numpy (Debian's python3-numpy) for the .npy seeds."""
import io
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\n#####\n"  # FUZZ_SEPARATOR in fuzz.h


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed_" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True):
    header, blobs, offset = {}, [], 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def seeds_safetensors():
    f32 = np.arange(6, dtype="<f4").tobytes()
    put("safetensors", "two.safetensors", safetensors([("a", "F32", [2, 3], f32), ("b.weight", "F16", [2], np.array([1, -2], "<f2").tobytes())],
                                                      {"format": "pt"}))
    put("safetensors", "dtypes.safetensors", safetensors([
        ("bf16", "BF16", [3], b"\x80\x3f\x00\x40\xc0\x7f"), ("i64", "I64", [1], struct.pack("<q", -5)),
        ("u8", "U8", [2, 2], b"\x01\x02\x03\x04"), ("bool", "BOOL", [1], b"\x01"), ("scalar", "F32", [], struct.pack("<f", 3.5)),
        ("empty", "F32", [0, 4], b""), ("f64", "F64", [1], struct.pack("<d", 1.0)), ("i8", "I8", [1], b"\xff"),
        ("i16", "I16", [1], b"\x01\x00"), ("i32", "I32", [1], b"\x01\x00\x00\x00")]))
    put("safetensors", "empty_header.safetensors", safetensors([]))
    put("safetensors", "nan.safetensors", safetensors([("x", "F32", [2], struct.pack("<ff", float("nan"), float("inf")))], pad=False))
    put("safetensors", "overlap.safetensors", struct.pack("<Q", 96) + json.dumps(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode().ljust(96) + b"\0" * 4)
    put("safetensors", "too_long.safetensors", struct.pack("<Q", 1 << 40) + b"{}")


def seeds_config():
    base = json.load(open(os.path.join(HERE, "..", "tests", "data", "configs", "gpt2.json")))
    put("config", "gpt2.json", json.dumps(base, indent=2))
    put("config", "tiny.json", open(os.path.join(HERE, "..", "tests", "data", "gpt2-tiny", "config.json")).read())
    put("config", "minimal.json", json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 8, "n_positions": 16, "vocab_size": 300}))
    put("config", "variants.json", json.dumps({"n_layer": 1, "n_head": 1, "n_embd": 4, "n_ctx": 8, "vocab_size": 260, "n_inner": 24,
                                               "activation_function": "quick_gelu", "layer_norm_epsilon": 1e-6,
                                               "scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True,
                                               "reorder_and_upcast_attn": True, "bos_token_id": None, "eos_token_id": 7,
                                               "model_type": "gpt2", "pruned_heads": {}, "add_cross_attention": False}))
    put("config", "hostile_huge.json", json.dumps({"n_layer": 4096, "n_head": 16, "n_embd": 1024, "n_positions": 1048576, "vocab_size": 1 << 30}))
    put("config", "hostile_heads.json", json.dumps({"n_layer": 1, "n_head": 3, "n_embd": 8, "n_positions": 8, "vocab_size": 300}))


def seeds_llama_config():
    base = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 4096, "rope_theta": 10000.0,
            "rms_norm_eps": 1e-6, "bos_token_id": 1, "eos_token_id": [2, 3], "tie_word_embeddings": True}

    def config(name, model_type, **extra):
        put("llama_config", name + ".json", json.dumps(dict(base, model_type=model_type, **extra), indent=2))

    config("llama3", "llama", rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
           attention_bias=True, mlp_bias=True)
    config("linear", "llama", rope_scaling={"type": "linear", "factor": 4.0}, head_dim=32)
    config("dynamic", "llama", rope_scaling={"type": "dynamic", "factor": 2.0})
    config("yarn_qwen", "qwen2", rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024})
    config("yarn_all", "qwen3", rope_scaling={"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512,
                                              "beta_fast": 16, "beta_slow": 2, "mscale": 0.707, "mscale_all_dim": 1.0,
                                              "attention_factor": None, "truncate": False})
    config("yarn_no_factor", "qwen3", rope_parameters={"rope_type": "yarn", "rope_theta": 1e6,
                                                       "original_max_position_embeddings": 1024})
    config("rope_parameters", "qwen3", rope_parameters={"rope_type": "default", "rope_theta": 5e5}, dtype="bfloat16")
    config("mistral_window", "mistral", sliding_window=16)
    config("qwen2_layers", "qwen2", use_sliding_window=True, sliding_window=8,
           layer_types=["full_attention", "sliding_attention", "full_attention"])
    config("qwen2_window_from", "qwen2", use_sliding_window=True, sliding_window=8, max_window_layers=1)
    config("hostile_heads", "llama", num_key_value_heads=3)
    config("hostile_yarn", "qwen2", rope_scaling={"type": "yarn", "factor": 4.0, "mscale": -20, "mscale_all_dim": 1})
    config("hostile_rope", "llama", rope_scaling={"type": "longrope", "factor": 4.0, "short_factor": [1.0]})


def byte_alphabet():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cps, extra = {}, 0
    for b in range(256):
        if b in keep:
            cps[b] = chr(b)
        else:
            cps[b] = chr(256 + extra)
            extra += 1
    return cps


def small_bpe():
    a = byte_alphabet()
    vocab = {a[b]: b for b in range(256)}
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a")]
    for l, r in merges:
        vocab[l + r] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, merges


def seeds_tokenizers():
    vocab, merges = small_bpe()
    vj = json.dumps(vocab).encode()
    mt = ("#version: 0.2\n" + "".join(f"{l} {r}\n" for l, r in merges)).encode()
    put("tokenizer_files", "hf_pair", b"\x00" + vj + SEP + mt)
    put("tokenizer_files", "openai_pair", b"\x01" + vj + SEP + mt)
    put("tokenizer_files", "no_merges", b"\x00" + vj + SEP)
    put("tokenizer_files", "missing_byte", b"\x01" + json.dumps({"a": 0, "b": 1}).encode() + SEP + b"a b\n")
    tj = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": True, "special": True}],
          "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
          "post_processor": None, "decoder": {"type": "ByteLevel"},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                    "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": [f"{l} {r}" for l, r in merges]}}
    put("tokenizer_json", "strings.json", json.dumps(tj))
    tj["model"]["merges"] = [[l, r] for l, r in merges]
    tj["added_tokens"].append({"id": len(vocab), "content": "<|new|>", "special": True})
    put("tokenizer_json", "pairs.json", json.dumps(tj))
    tj["model"]["type"] = "WordPiece"
    put("tokenizer_json", "wordpiece.json", json.dumps(tj))
    # every family's components: the test tokenizers of tests/data/tokenizers/
    families = os.path.join(HERE, "..", "tests", "data", "tokenizers")
    for name in sorted(os.listdir(families)):
        with open(os.path.join(families, name, "tokenizer.json"), "rb") as f:
            put("tokenizer_json", "family_" + name + ".json", f.read())


def seeds_prompt():
    path = os.path.join(HERE, "..", "tests", "data", "tokenizer_cases.txt")
    n = 0
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name, text_hex = line.rstrip("\n").split("\t")[:2]
        put("prompt", name, bytes.fromhex(text_hex))
        n += 1
        if n == 12:
            break
    put("prompt", "invalid_utf8", b"abc \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80")
    put("prompt", "ids", struct.pack("<4i", 464, 5044, 50256, 50257))


def seeds_ids():
    for name, text in [("plain", "464,5044,1422"), ("brackets", "[464, 5044, 1422]"), ("one", "0"), ("max", "2147483647"),
                       ("over", "2147483648"), ("trailing", "1,2,"), ("empty_item", "1,,2"), ("open", "[1,2"),
                       ("spaces", "1 2"), ("sign", "+1"), ("empty", "[]")]:
        put("ids", name, text)


def seeds_npy():
    for name, arr in [("matrix", np.arange(6, dtype="<f4").reshape(2, 3)), ("scalar", np.array(2.5, dtype="<f4")),
                      ("empty", np.zeros((0, 3), dtype="<f4")), ("4d", np.ones((1, 2, 1, 2), dtype="<f4")),
                      ("f64", np.arange(3, dtype="<f8")), ("fortran", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))]:
        b = io.BytesIO()
        np.save(b, arr)
        put("npy", name + ".npy", b.getvalue())
    b = io.BytesIO()
    np.lib.format.write_array(b, np.arange(4, dtype="<f4"), version=(2, 0))
    put("npy", "v2.npy", b.getvalue())
    b = io.BytesIO()
    np.save(b, np.arange(8, dtype="<f4"))
    put("npy", "truncated.npy", b.getvalue()[:-5])


def fnv1a(data):
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def seeds_pipeline_cache():
    # The identity fuzz_pipeline_cache.c compares with: vendor 0x10005, device 0, this UUID.
    header = struct.pack("<IIII", 32, 1, 0x10005, 0) + b"vkgraph-fuzzuuid"
    for name, payload in [("valid", header + b"driver data"), ("header_only", header)]:
        # The first byte is the magic's 'V' (even): the hash is left as written.
        put("pipeline_cache", name, b"VKGPIPE1" + struct.pack("<QQ", len(payload), fnv1a(payload)) + payload)
    put("pipeline_cache", "foreign", b"VKGPIPE1" + struct.pack("<QQ", 32, 0) + struct.pack("<IIII", 32, 1, 0x8086, 7) + b"x" * 16)


def seeds_graph():
    # Little programs for fuzz_graph.c: each op is a code byte (mod 30) then its operands.
    I, C, MM, ADD, SM, LN, GELU, RESHAPE, OUT = 0, 2, 5, 6, 9, 12, 13, 19, 27

    def leaf(kind, nd, dims, name):
        return bytes([kind, 0, 0, nd - 1] + [d - 1 for d in dims] + [0] * (8 - len(dims)) + [name])

    mlp = (leaf(I, 2, [2, 3], 0) + leaf(C, 2, [3, 4], 1) + bytes([MM, 0, 1, 0, 0]) + bytes([GELU, 2, 0]) +
           bytes([OUT, 3, 0, 0]) + b"\x00")
    put("graph", "mlp", mlp)
    attn = (leaf(I, 3, [2, 4, 3], 0) + bytes([MM, 0, 0, 0, 2]) + bytes([8, 1, 0, 7]) + bytes([10, 2, 0, 0, 0]) +
            bytes([SM, 3, 0]) + bytes([MM, 4, 0, 0, 0]) + bytes([OUT, 5, 0, 1]) + b"\x00")
    put("graph", "attention", attn)
    ln = leaf(I, 2, [3, 4], 0) + leaf(C, 1, [4], 1) + bytes([LN, 0, 1, 1, 0, 1]) + bytes([OUT, 2, 0, 2]) + b"\x04"
    put("graph", "layernorm", ln)
    emb = (leaf(C, 2, [5, 3], 0) + leaf(1, 1, [4], 1) + bytes([18, 0, 1]) + bytes([OUT, 2, 0, 0]) + b"\x08")
    put("graph", "embedding", emb)
    state = (leaf(3, 2, [4, 3], 0) + leaf(I, 2, [1, 3], 1) + leaf(4, 1, [1], 2) + bytes([25, 0, 1, 1, 0, 0, 2]) +
             bytes([OUT, 3, 0, 0]) + b"\x00")
    put("graph", "kv_state", state)
    views = (leaf(I, 2, [2, 6], 0) + bytes([RESHAPE, 0, 0, 2, 2, 2, 2] + [0] * 5) + bytes([21, 1, 0, 1, 2]) +
             bytes([22, 2, 0, 1, 0, 0, 2]) + bytes([23, 3, 3, 1]) + bytes([24, 4, 0]) + bytes([OUT, 5, 0, 0]) + b"\x20")
    put("graph", "views", views)
    put("graph", "huge", leaf(I, 3, [1 << 8, 1, 1], 0)[:4] + bytes([0xE6, 0xE6, 0xE6, 0, 0, 0, 0, 0, 0]))
    # the Llama ops (codes 250 .. 253): rms_norm, rope over a [6, 4] table, swiglu, a windowed mask
    RMS, ROPE, SWIGLU, WINDOW = 250, 251, 252, 253
    llama = (leaf(I, 2, [3, 4], 0) + leaf(C, 1, [4], 1) + leaf(C, 2, [6, 4], 2) + bytes([RMS, 0, 1, 1, 1]) +
             bytes([ROPE, 3, 2, 1, 0]) + bytes([SWIGLU, 4, 3]) + bytes([WINDOW, 5, 0, 0, 0, 2]) +
             bytes([OUT, 6, 0, 0]) + b"\x00")
    put("graph", "llama", llama)


def seeds_generation_config():
    """generation_config.json as Llama 3.2 Instruct, Qwen2.5 Instruct and TinyLlama ship it (ids
    scaled into the target's vocabulary of 300), each with a config.json after the separator, and
    near misses."""
    llama = {"bos_token_id": 1, "do_sample": True, "eos_token_id": [2, 8, 9], "temperature": 0.6, "top_p": 0.9,
             "transformers_version": "4.45.0.dev0"}
    qwen = {"bos_token_id": 5, "pad_token_id": 5, "do_sample": True, "eos_token_id": [6, 5], "repetition_penalty": 1.05,
            "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"}
    tiny = {"eos_token_id": 2, "max_length": 2048, "pad_token_id": 0, "num_beams": 4, "no_repeat_ngram_size": 3}
    config = {"model_type": "llama", "eos_token_id": [2, 299, 300]}
    for name, g in (("llama3.json", llama), ("qwen2.5.json", qwen), ("tinyllama.json", tiny)):
        put("generation_config", name, json.dumps(g, indent=2).encode() + SEP + json.dumps(config).encode())
    put("generation_config", "no_eos.json", json.dumps({"do_sample": False}).encode() + SEP + json.dumps(config).encode())
    put("generation_config", "bad_top_p.json", json.dumps({"top_p": 1.5}))
    put("generation_config", "bad_eos.json", json.dumps({"eos_token_id": ["</s>"]}))
    put("generation_config", "many_eos.json", json.dumps({"eos_token_id": list(range(40))}))


def seeds_template():
    """Each chat template of tests/data/templates/ with one of its conversations, and a few small
    templates that reach the refusals and the bounds."""
    tdir = os.path.join(HERE, "..", "tests", "data", "templates")
    with open(os.path.join(tdir, "conversations.json"), encoding="utf-8") as f:
        convs = json.load(f)
    names = sorted(n for n in os.listdir(tdir) if n.endswith(".json") and n not in ("conversations.json", "golden.json"))
    conv_names = sorted(convs)
    for i, name in enumerate(names):
        with open(os.path.join(tdir, name), encoding="utf-8") as f:
            tpl = json.load(f)["chat_template"]
        conv = convs[conv_names[i % len(conv_names)]]
        put("template", name[:-5], tpl.encode() + SEP + json.dumps(conv, ensure_ascii=False).encode())
    small = {
        "loop_vars": "{% for m in messages %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{% endfor %}",
        "namespace": "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
        "macro": "{% macro f(x, y='d') %}[{{ x }}{{ y }}]{% endmacro %}{{ f(1) }}{{ f(2, y=3) }}",
        "filters": "{{ messages | map(attribute='role') | join(', ') | upper }}{{ messages | tojson(indent=2) }}",
        "slices": "{{ 'héllo'[::-1] }}{{ messages[1:] | length }}{{ 'a b'.split() }}",
        "refused_filter": "{{ x | wordwrap }}",
        "refused_statement": "{% include 'x' %}",
        "raise": "{{ raise_exception('no') }}",
        "loop_bound": "{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
        "output_bound": "{% for i in range(100000) %}{{ 'xxxxxxxxxx' }}{% endfor %}",
        "whitespace": "  {%- if true -%}\n  a  {# c #}\n  {%+ if 1 %}b{% endif %}\n{{- ' c ' -}}\n{% endif %}\n",
    }
    for name, tpl in small.items():
        put("template", name, tpl.encode() + SEP + b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]')


if __name__ == "__main__":
    seeds_safetensors()
    seeds_config()
    seeds_llama_config()
    seeds_generation_config()
    seeds_tokenizers()
    seeds_prompt()
    seeds_ids()
    seeds_npy()
    seeds_pipeline_cache()
    seeds_graph()
    seeds_template()
