#!/usr/bin/python3
"""`vkgraph serve` at the scale users run, against the float64 NumPy reference
(tools/llama_reference.py): Qwen2.5-0.5B's shapes (896 wide, 14 query heads over 2, biases, the
largest vocabulary of the family, 151936; 4 of its 24 layers), BF16 as published, a context of
2048, on the CPU executor and on Vulkan.

Usage: serve_scale_test.py VKGRAPH.  For each device a server answers two turns of a conversation:
  1. a 2030-token prompt with echo, logprobs 1 and one greedy token: every prompt token's logprob
     and the most likely alternative at every position, computed in the prompt's own prefill
     passes with the LM head over every row (what evaluation harnesses ask);
  2. the same prompt, the token generated and 10 new ones: the slot's cache serves the first 2030
     (usage's cached_tokens), and the token chosen after the 10 run is the reference's.
The logprobs must be within 1e-4 of the reference's, relative to their size (float32 logits of
magnitude 20 to 50 after 2048 positions carry about 1e-5), and the argmax the reference's at
every position whose two best logits are apart by more than that."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(REPO, "tools"))
import serve_client  # noqa: E402  (tools/serve_client.py)
from serve_client import check, failures  # noqa: E402

VKG = sys.argv[1]
N_PROMPT, N_NEW, CTX = 2030, 10, 2048
TOLERANCE = 1e-4


def post(port, body):
    status, text = serve_client.request("127.0.0.1", port, "POST", "/v1/completions", body, timeout=1200)
    if status != 200:
        raise RuntimeError(f"POST /v1/completions answered {status}: {text[:300]}")
    answer = json.loads(text)
    return answer["choices"][0], answer["usage"]


def two_turns(model, device, prompt, new):
    """(first turn's choice, second turn's choice and usage) from a server on device."""
    srv = serve_client.ServeProcess(VKG, model, "--device", device, "--ctx-size", CTX, "--parallel", 2,
                                    ready_timeout=600)
    try:
        first, _ = post(srv.port, {"prompt": prompt, "max_tokens": 1, "echo": True, "logprobs": 1,
                                   "temperature": 0})
        second, usage = post(srv.port, {"prompt": prompt + first["tokens"] + new, "max_tokens": 1,
                                        "logprobs": 0, "temperature": 0})
    finally:
        srv.stop()
    return first, second, usage


def token_id(name):
    return int(name.removeprefix("token_id:"))


def main():
    rng = np.random.default_rng(2048)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "qwen")
        subprocess.run([VKG, "random", model, "--shape", "qwen2.5-0.5b", "--layers", "4", "--dtype", "bf16"],
                       check=True, stdout=subprocess.DEVNULL)
        vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
        prompt = [int(i) for i in rng.integers(0, vocab, N_PROMPT)]
        new = [int(i) for i in rng.integers(0, vocab, N_NEW)]
        answers = {device: two_turns(model, device, prompt, new) for device in ("cpu", "vulkan")}
        # One reference for both devices: it needs the token generated, which both must agree on.
        generated = {device: a[0]["tokens"] for device, a in answers.items()}
        check(generated["cpu"] == generated["vulkan"], f"the devices generated {generated}")
        ids = prompt + generated["cpu"] + new
        out = os.path.join(tmp, "logits.npy")
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tools", "llama_reference.py"), model, "--ids",
                        ",".join(map(str, ids)), "--logits", out], check=True, stdout=subprocess.DEVNULL)
        logits = np.load(out).astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    logprobs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    top2 = np.sort(logits, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > TOLERANCE * np.maximum(np.abs(top2[:, 1]), 1)

    for device, (first, second, usage) in answers.items():
        lp = first["logprobs"]
        check(len(lp["token_logprobs"]) == N_PROMPT + 1 and lp["token_logprobs"][0] is None,
              f"{device}: {len(lp['token_logprobs'])} echoed logprobs, the first {lp['token_logprobs'][0]}")
        # Row p of the reference predicts token p + 1: the prompt's tokens 1.. and the generated one.
        got = np.array(lp["token_logprobs"][1:], dtype=np.float64)
        want = logprobs[np.arange(N_PROMPT), ids[1:N_PROMPT + 1]]
        err = np.abs(got - want) / np.maximum(np.abs(want), 1)
        check(err.max() <= TOLERANCE, f"{device}: echoed logprob {int(err.argmax()) + 1} off by {err.max():.3g}")
        best = [token_id(max(alts, key=alts.get)) for alts in lp["top_logprobs"][1:]]
        wrong = [p for p in range(N_PROMPT) if clear[p] and best[p] != int(logits[p].argmax())]
        check(not wrong, f"{device}: the most likely token differs from the reference's at positions {wrong[:10]}")
        check(first["tokens"] == [int(logits[N_PROMPT - 1].argmax())], f"{device}: generated {first['tokens']}")
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens")
        check(usage["prompt_tokens"] == N_PROMPT + 1 + N_NEW and cached == N_PROMPT,
              f"{device}: second turn's usage {usage}")
        check(second["tokens"] == [int(logits[-1].argmax())],
              f"{device}: second turn chose {second['tokens']}, the reference {int(logits[-1].argmax())}")
        last = second["logprobs"]["token_logprobs"][0]
        check(abs(last - logprobs[-1, second["tokens"][0]]) <= TOLERANCE * max(abs(last), 1),
              f"{device}: second turn's logprob {last}")
        print(f"{device}: {N_PROMPT} echoed logprobs within {err.max():.2g} (relative) of the reference; "
              f"second turn {cached} tokens cached, the reference's token", flush=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
