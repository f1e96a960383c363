#!/bin/sh
# Installs the build into a temporary prefix, then runs the INSTALLED vkgraph where nothing of the
# source or build tree can be reached: from an empty folder, with HOME elsewhere too and no VKG_*
# variable set.  On the CPU and on the default device (the best Vulkan device): gpt2-random writes
# a small model (copying GPT-2's tokenizer from the prefix), generate runs it, and attention
# writes a heatmap that must be a PNG.  Then generate, on a model folder without tokenizer files,
# must fall back on the installed tokenizer.  Usage: install_cli.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/vkg-install-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
failed=0
fail() {
    echo "FAILED: $*"
    failed=$((failed + 1))
}
for f in encoder.json vocab.bpe NOTICE; do
    [ -s "$tmp/prefix/share/vkgraph/gpt2-tokenizer/$f" ] || fail "share/vkgraph/gpt2-tokenizer/$f is not installed"
done

# The default device must be a Vulkan one, unless the Vulkan tests are allowed to skip.
allow_no_vulkan=${VKG_TEST_ALLOW_NO_VULKAN:-0}

# Nothing points into the source tree: no VKG_* variable, HOME and the working folder in $tmp.
# (A sanitizer build reads its leak suppressions from a copy.)
for v in $(env | sed -n 's/^\(VKG_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME
cp "$src/tests/lsan.supp" "$tmp/lsan.supp"
export LSAN_OPTIONS="suppressions=$tmp/lsan.supp:print_suppressions=0"
export HOME="$tmp/home"
mkdir "$HOME" "$tmp/work"
cd "$tmp/work"
vkgraph="$tmp/prefix/bin/vkgraph"

# run NAME COMMAND...: runs COMMAND, its output in NAME.log; a failure prints the log.
run() {
    name=$1
    shift
    status=0
    "$@" > "$name.log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        echo "ok: $*"
        return 0
    fi
    fail "$* (exit status $status):"
    sed 's/^/    /' "$name.log"
    return 1
}

for device in cpu default; do
    if [ "$device" = cpu ]; then set -- --device cpu; else set --; fi
    model=model-$device
    png=attention-$device.png
    run "gpt2-random-$device" "$vkgraph" gpt2-random "$model" || continue
    [ -s "$model/encoder.json" ] && [ -s "$model/vocab.bpe" ] || fail "gpt2-random copied no tokenizer into $model"
    run "generate-$device" "$vkgraph" generate -m "$model" -p "Hello" -n 5 "$@"
    if [ "$device" = default ] && [ "$allow_no_vulkan" = 0 ] && grep -q "no usable Vulkan device" "generate-$device.log"; then
        fail "the default device is not a Vulkan one (set VKG_TEST_ALLOW_NO_VULKAN=1 to allow that):"
        sed 's/^/    /' "generate-$device.log"
    fi
    run "attention-$device" "$vkgraph" attention -m "$model" -p "The animal didn't cross the street" \
        --layer 1 --token " street" --png "$png" "$@" || continue
    if [ ! -f "$png" ]; then
        fail "attention wrote no $png"
    elif [ "$(od -An -tx1 -N8 "$png" | tr -d ' \n')" != 89504e470d0a1a0a ]; then
        fail "$png does not start with the PNG signature: $(od -An -tx1 -N8 "$png")"
    else
        echo "ok: $png is a PNG ($(wc -c < "$png" | tr -d ' ') bytes)"
    fi
done
# A model folder without tokenizer files: generate falls back on the installed tokenizer.
if [ -d model-cpu ]; then
    mkdir model-bare
    cp model-cpu/config.json model-cpu/model.safetensors model-bare/
    if run generate-bare "$vkgraph" generate -m model-bare -p "Hello" -n 2 --device cpu &&
       ! grep -q "using GPT-2's tokenizer from $tmp/prefix/" generate-bare.log; then
        fail "generate on a folder without a tokenizer did not use the installed one:"
        sed 's/^/    /' generate-bare.log
    fi
fi
[ "$failed" -eq 0 ] && echo "every installed command worked" || echo "$failed failed"
[ "$failed" -eq 0 ]
