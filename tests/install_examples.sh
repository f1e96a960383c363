#!/bin/sh
# Installs the build into a temporary prefix, then compiles every example alone against the
# installed library, once through pkg-config and once through find_package(vkgraph), and runs
# the first example on the CPU, as a user would: without LD_LIBRARY_PATH (the .pc file's Libs
# carry an rpath to the installed library).  Then, as a new user of the model API would: the installed
# vkgraph writes a random GPT-2 folder, and 07_generate (a streamed generation, greedy and
# sampled) and 08_attention (one layer's probabilities) must give exactly what the installed
# CLI gives, on the CPU and on Vulkan.  Usage: install_examples.sh BUILD_DIR [EXTRA_CFLAGS]
set -eu
build=$1
extra=${2:-}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/vkg-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
passed=0
failed=0
for example in "$src"/examples/*.c; do
    name=$(basename "$example" .c)
    # shellcheck disable=SC2046,SC2086
    if cc -std=c11 -Wall -Wextra -Werror $extra "$example" $(pkg-config --cflags --libs vkgraph) -lm -o "$tmp/$name"; then
        passed=$((passed + 1))
    else
        echo "FAILED: $name does not build against the installed library"
        failed=$((failed + 1))
    fi
done
mkdir -p "$tmp/fp"
cat > "$tmp/fp/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(uses_vkgraph C)
find_package(vkgraph REQUIRED)
add_executable(attention "$src/examples/01_attention.c")
target_compile_options(attention PRIVATE $extra)
target_link_options(attention PRIVATE $extra)
target_link_libraries(attention PRIVATE vkgraph::vkgraph m)
CMAKE
if cmake -S "$tmp/fp" -B "$tmp/fp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/fp.log" 2>&1 &&
   cmake --build "$tmp/fp/build" >> "$tmp/fp.log" 2>&1; then
    passed=$((passed + 1))
else
    echo "FAILED: find_package(vkgraph)"; cat "$tmp/fp.log"
    failed=$((failed + 1))
fi
# The library found is the one just installed, through the rpath, not another copy on the system.
found=$(ldd "$tmp/01_attention" | sed -n 's/^[[:space:]]*libvkgraph\.so\.0 => \([^ ]*\) .*/\1/p')
if [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$tmp/prefix/lib/libvkgraph.so.0")" ]; then
    passed=$((passed + 1))
else
    echo "FAILED: 01_attention does not find the installed library by itself:"; ldd "$tmp/01_attention"
    failed=$((failed + 1))
fi
out=$("$tmp/01_attention" cpu)
if echo "$out" | grep -q "weights: \[\[0.434 0.214 0.351\]\]  output: \[\[6.1 3.9\]\]"; then
    passed=$((passed + 1))
else
    echo "FAILED: 01_attention printed: $out"
    failed=$((failed + 1))
fi

# The model API against the CLI, byte for byte.
vkgraph="$tmp/prefix/bin/vkgraph"
model="$tmp/model"
"$vkgraph" gpt2-random "$model" > "$tmp/random.log"
prompt="The animal didn't cross the street because it was too tired"
same() { # what, file A, file B
    if [ -s "$3" ] && cmp -s "$2" "$3"; then
        passed=$((passed + 1))
    else
        echo "FAILED: $1: the example and the CLI differ"; echo "example:"; cat "$2"; echo "cli:"; cat "$3"
        failed=$((failed + 1))
    fi
}
for device in cpu vulkan; do
    "$tmp/07_generate" "$model" "$device" "$prompt" 12 > "$tmp/ex.txt" 2> "$tmp/ex.err" || cat "$tmp/ex.err"
    "$vkgraph" generate -m "$model" -p "$prompt" -n 12 --no-prompt --device "$device" > "$tmp/cli.txt" 2> "$tmp/cli.err" ||
        cat "$tmp/cli.err"
    same "greedy generation on $device" "$tmp/ex.txt" "$tmp/cli.txt"
    "$tmp/07_generate" "$model" "$device" "$prompt" 12 7 > "$tmp/ex.txt" 2> "$tmp/ex.err" || cat "$tmp/ex.err"
    "$vkgraph" generate -m "$model" -p "$prompt" -n 12 --no-prompt --device "$device" --temperature 0.8 --top-k 40 \
        --top-p 0.95 --seed 7 > "$tmp/cli.txt" 2> "$tmp/cli.err" || cat "$tmp/cli.err"
    same "sampled generation on $device" "$tmp/ex.txt" "$tmp/cli.txt"
    "$tmp/08_attention" "$model" "$device" "$prompt" 1 "$tmp/ex.npy" > "$tmp/ex.txt" 2> "$tmp/ex.err" || cat "$tmp/ex.err"
    "$vkgraph" attention -m "$model" -p "$prompt" --layer 1 --npy "$tmp/cli.npy" --device "$device" > "$tmp/cli.txt" \
        2> "$tmp/cli.err" || cat "$tmp/cli.err"
    same "layer 1's attention on $device" "$tmp/ex.npy" "$tmp/cli.npy"
    # The example's table names the same tokens the CLI's does, head by head.
    if [ "$(grep -c '^head' "$tmp/ex.txt")" -eq 4 ] && [ "$(grep -c '^head' "$tmp/cli.txt")" -eq 4 ]; then
        passed=$((passed + 1))
    else
        echo "FAILED: the attention tables on $device:"; cat "$tmp/ex.txt" "$tmp/cli.txt"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
