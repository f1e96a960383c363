#!/bin/sh
# bench/compare-pytorch on a random gpt2-tiny and a llama-tiny at 1 thread: it must find that vkgraph and PyTorch
# computed the same logits (every forward pass and every decode step) and report ratios that are
# the quotients of the figures it prints.  Skipped (exit 77) where python3-torch is not installed:
# the README says how to install it.
set -eu
vkgraph=$1
here=$(dirname "$0")
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "compare_pytorch: skipped: /usr/bin/python3 has no torch (apt-get install python3-torch libopenblas0-openmp)"
    exit 77
fi
out=$(/usr/bin/python3 "$here/../bench/compare-pytorch" --vkgraph "$vkgraph" --size gpt2-tiny -T 4,9 --decode 5 \
      --threads 1 --repeat 1 --json)
printf '%s\n' "$out" | /usr/bin/python3 -c '
import json, math, sys
r = json.load(sys.stdin)
assert r["logits_agree"] is True, r
assert [f["tokens"] for f in r["forward"]] == [4, 9], r["forward"]
for f in r["forward"]:
    assert f["vkgraph_ms"] > 0 and f["pytorch_ms"] > 0, f
    assert math.isclose(f["ratio"], f["pytorch_ms"] / f["vkgraph_ms"], rel_tol=1e-9), f
    assert 0 <= f["logits_relative_error"] <= r["tolerance"], f
d = r["decode"]
assert d["prompt_tokens"] == 4 and d["steps"] == 5, d
assert math.isclose(d["ratio"], d["vkgraph_tokens_per_s"] / d["pytorch_tokens_per_s"], rel_tol=1e-9), d
assert 1 <= d["same_tokens"] <= 6 and d["logits_relative_error"] <= r["tolerance"], d
assert r["pytorch"]["threads"] == 1 and r["vkgraph"]["threads"] == 1, r["pytorch"]
print("compare_pytorch: logits agree; forward ratios", [round(f["ratio"], 2) for f in r["forward"]],
      "decode ratio", round(d["ratio"], 2), "with", r["pytorch"]["blas"])
'
# The Llama workload: llama-tiny (grouped-query attention, rotary embeddings, the gated MLP),
# the same checks.
out=$(/usr/bin/python3 "$here/../bench/compare-pytorch" --vkgraph "$vkgraph" --size llama-tiny -T 4,9 --decode 5 \
      --threads 1 --repeat 1 --json)
printf '%s\n' "$out" | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["logits_agree"] is True, r
m = r["vkgraph"]["model"]
assert m["architecture"] == "llama" and m["kv_heads"] == 2 and m["heads"] == 4, m
assert all(0 <= f["logits_relative_error"] <= r["tolerance"] for f in r["forward"]), r["forward"]
assert r["decode"]["same_tokens"] >= 1, r["decode"]
print("compare_pytorch: llama-tiny logits agree; forward ratios", [round(f["ratio"], 2) for f in r["forward"]])
'
