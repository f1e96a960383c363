#!/bin/sh
# tools/fetch-model.sh against a local stand-in for the Hugging Face hub (tests/data/fetch-fake-llama,
# a sharded Llama-like tree, file:// URLs): the files vkgraph reads and only those, each checked;
# nothing fetched again; a partial shard resumed; a shard whose hash the listing contradicts
# refused; a tree without weights and an index naming a shard outside the folder refused; the hub out of reach and VKG_OFFLINE answered with 2.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
script=$root/tools/fetch-model.sh
fake=$root/tests/data/fetch-fake-llama
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export VKG_HF_BASE_URL="file://$fake"
unset VKG_OFFLINE
fails=0
fail() { echo "fetch_model_test: FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS TEXT [ENV=VALUE] DIR: runs the script on DIR, wants that exit status and TEXT in stderr.
expect() {
    want=$1 text=$2
    shift 2
    env "$@" sh "$script" "$dir" HuggingFaceTB/Fake-Llama >"$tmp/out" 2>"$tmp/err"
    got=$?
    [ "$got" = "$want" ] || fail "exit $got, wanted $want: $(tail -n 3 "$tmp/err")"
    grep -Fq -- "$text" "$tmp/err" || fail "no '$text' in: $(tail -n 3 "$tmp/err")"
}
tree="VKG_HF_API_URL=file://$fake/tree.json"
read_files="config.json generation_config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors
model.safetensors.index.json special_tokens_map.json tokenizer.json tokenizer_config.json"

# Every file vkgraph reads arrives and matches; README.md, pytorch_model.bin and the shard the
# index does not name are left (the stand-in does not even hold them).
dir=$tmp/model
expect 0 "model-00002-of-00002.safetensors: checks out (1500 bytes, sha256" "$tree"
grep -Fq "tokenizer_config.json: checks out (77 bytes, git-sha1" "$tmp/err" || fail "tokenizer_config.json not checked"
[ "$(ls "$dir" | tr '\n' ' ')" = "$(echo $read_files) " ] || fail "fetched: $(ls "$dir" | tr '\n' ' ')"
for f in $read_files; do
    cmp -s "$fake/$f" "$dir/$f" || fail "$f differs from the stand-in's"
done

# Again: nothing to fetch.
expect 0 "model-00001-of-00002.safetensors: already there and checks out" "$tree"
grep -Fq "downloading" "$tmp/err" && fail "fetched again: $(grep -F downloading "$tmp/err")"

# A partial shard resumes to the right file.
head -c 700 "$dir/model-00001-of-00002.safetensors" >"$dir/model-00001-of-00002.safetensors.part"
rm "$dir/model-00001-of-00002.safetensors"
expect 0 "model-00001-of-00002.safetensors: checks out (2000 bytes" "$tree"
cmp -s "$fake/model-00001-of-00002.safetensors" "$dir/model-00001-of-00002.safetensors" || fail "resumed shard differs"
[ -e "$dir/model-00001-of-00002.safetensors.part" ] && fail "the .part file is still there"

# A shard that does not match the listing is refused and set aside, not put in place.
rm "$dir/model-00002-of-00002.safetensors"
expect 1 "model-00002-of-00002.safetensors does not match the hub's listing: sha256" \
    "VKG_HF_API_URL=file://$fake/tree-wrong-hash.json"
[ -e "$dir/model-00002-of-00002.safetensors" ] && fail "the wrong shard was put in place"
[ -e "$dir/model-00002-of-00002.safetensors.bad" ] || fail "the wrong shard was not kept as .bad"

# A tree without safetensors weights is refused before anything is fetched.
dir=$tmp/no-weights
expect 1 "has neither model.safetensors nor model.safetensors.index.json" \
    "VKG_HF_API_URL=file://$fake/tree-no-weights.json"
[ -e "$dir/config.json" ] && fail "fetched from a tree without weights"

# An index that names a shard outside the folder is refused, and nothing is written there.
dir=$tmp/bad-index/model
expect 1 "names a shard '../escape.safetensors' that is not a plain file name" \
    "VKG_HF_API_URL=file://$fake/bad-index/tree.json" "VKG_HF_BASE_URL=file://$fake/bad-index"
[ -e "$tmp/bad-index/escape.safetensors" ] && fail "wrote a shard outside the folder"

# The hub out of reach: 2, at once; VKG_OFFLINE=1: 2 without contacting anything.
dir=$tmp/offline
start=$(date +%s)
expect 2 "cannot reach the Hugging Face hub" "VKG_HF_API_URL=http://127.0.0.1:9/api/models/x/tree/main"
[ $(( $(date +%s) - start )) -lt 10 ] || fail "took 10 seconds or more to say the hub is out of reach"
expect 2 "VKG_OFFLINE is set: not contacting the Hugging Face hub" "VKG_OFFLINE=1"

# Usage errors: 1.
sh "$script" only-one-argument 2>"$tmp/err"
[ $? = 1 ] && grep -Fq "usage: tools/fetch-model.sh DIR OWNER/NAME" "$tmp/err" || fail "one argument not refused with the usage"

if [ $fails -ne 0 ]; then
    echo "fetch_model_test: $fails failures"
    exit 1
fi
echo "fetch_model_test: all checks pass"
