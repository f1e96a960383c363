#!/bin/sh
# fetch-gpt2.sh DIR [MODEL]: downloads a GPT-2 checkpoint from the Hugging Face hub into DIR:
# config.json, vocab.json, merges.txt and model.safetensors (MODEL defaults to gpt2; also
# gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, or any owner/name of a GPT-2-architecture model).
# The download, its checks (size and hash against the hub's listing), resuming, exit status
# (0 done, 1 an error, 2 the hub cannot be reached), VKG_OFFLINE and the test URLs
# (VKG_HF_API_URL, VKG_HF_BASE_URL) are tools/fetch-model.sh's; this names the four files.
set -u

usage="usage: tools/fetch-gpt2.sh DIR [MODEL]   (MODEL: gpt2 (default), gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, ...)"
if [ $# -ge 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; }; then
    echo "$usage"
    exit 0
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "$usage" >&2
    exit 1
fi
exec sh "$(dirname "$0")/fetch-model.sh" --name fetch-gpt2 \
    --files "config.json vocab.json merges.txt model.safetensors" "$1" "${2:-gpt2}"
