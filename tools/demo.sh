#!/bin/sh
# The main job: look inside GPT-2's attention for the lesson's sentence.  Fetches GPT-2 124M from
# the Hugging Face hub (verified against the hub's sizes and hashes); where the hub cannot be
# reached, runs the same pipeline on a small model with random weights, and says so.  In CI
# (CI=true), where the hub is out of reach, and wherever VKG_OFFLINE=1 is set, the hub is not
# contacted at all (VKG_OFFLINE=0 contacts it in CI too).
set -u
cd "$(dirname "$0")/.."
if [ "${CI:-}" = true ] && [ -z "${VKG_OFFLINE:-}" ]; then
    VKG_OFFLINE=1
    export VKG_OFFLINE
    echo "demo: CI=true: the offline path, without contacting the Hugging Face hub"
fi
bin=${VKGRAPH:-build/vkgraph}
model=models/gpt2
sentence="The animal didn't cross the street because it was too tired"

if ./tools/fetch-gpt2.sh "$model" gpt2; then
    echo "demo: GPT-2 124M (pretrained weights) in $model"
else
    status=$?
    if [ "$status" -ne 2 ]; then
        echo "demo: fetching GPT-2 failed (status $status)" >&2
        exit 1
    fi
    model=models/gpt2-random
    echo "demo: the Hugging Face hub cannot be reached (or VKG_OFFLINE is set); using a small GPT-2-shaped model with RANDOM weights"
    echo "demo: (its attention patterns mean nothing; the pipeline is the same)"
    "$bin" gpt2-random "$model" --layers 6 --heads 12 --embd 192 --ctx 128 --seed 1 || exit 1
fi
"$bin" attention -m "$model" -p "$sentence" --layer 4 --token " it" --png attention-layer4-head3.png --head 3 || exit 1
echo "demo: heatmap of layer 4, head 3 written to attention-layer4-head3.png"
