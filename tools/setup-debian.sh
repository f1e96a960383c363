#!/bin/sh
# Installs the Debian 12 packages vkgraph needs to build, test and run, skipping those present.
# python3-torch and libopenblas0-openmp are the peer that bench/compare-pytorch measures against
# (its test checks that both compute the same logits): 177 packages, 142 MB to download and about
# 640 MB installed, some 40 s on a build machine.
set -eu
packages="cmake make gcc pkg-config libvulkan-dev libvulkan-volk-dev glslang-tools libcmocka-dev
mesa-vulkan-drivers vulkan-validationlayers libcairo2-dev libpcre2-dev libutf8proc-dev fonts-dejavu-core
python3-numpy libopenblas0-pthread curl ca-certificates python3-torch libopenblas0-openmp"
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
