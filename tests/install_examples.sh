#!/bin/sh
# Installs the build into a temporary prefix, then compiles every example alone against the
# installed library, once through pkg-config and once through find_package(vkgraph), and runs
# the first example on the CPU.  Usage: install_examples.sh BUILD_DIR [EXTRA_CFLAGS]
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
out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/01_attention" cpu)
if echo "$out" | grep -q "weights: \[\[0.434 0.214 0.351\]\]  output: \[\[6.1 3.9\]\]"; then
    passed=$((passed + 1))
else
    echo "FAILED: 01_attention printed: $out"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
