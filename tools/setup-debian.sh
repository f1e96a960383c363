#!/bin/sh
# Installs the Debian 12 packages vkgraph needs, skipping those present.
#
#   tools/setup-debian.sh          what building vkgraph and running it (the main job) need
#   tools/setup-debian.sh --test   also what the test suite needs (the README's test command)
#
# Why each package is there: the README's table "What the setup script installs, and why".
# The test packages: the Khronos validation layer (every Vulkan test runs under it); NumPy with
# OpenBLAS, for the independent reference tools/gpt2_reference.py; and PyTorch on OpenBLAS's
# OpenMP build, the peer bench/compare-pytorch measures against and its test checks (177
# packages, 142 MB to download and about 640 MB installed, which no user of vkgraph needs).
set -eu
usage="usage: tools/setup-debian.sh [--test]"
packages="cmake make gcc pkg-config libvulkan-dev libvulkan-volk-dev glslang-tools libcmocka-dev
mesa-vulkan-drivers libcairo2-dev libpcre2-dev fonts-dejavu-core curl ca-certificates"
test_packages="vulkan-validationlayers python3-numpy libopenblas0-pthread python3-torch libopenblas0-openmp"
for arg in "$@"; do
    case "$arg" in
    --test) packages="$packages $test_packages" ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "setup: unknown option '$arg'; $usage" >&2; exit 1 ;;
    esac
done
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "setup: every package is installed"
    exit 0
fi
echo "setup: installing$missing"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
