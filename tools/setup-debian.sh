#!/bin/sh
# Installs the Debian 12 packages vkgraph needs to build, test and run, skipping those present.
set -eu
packages="cmake make gcc pkg-config libvulkan-dev libvulkan-volk-dev glslang-tools libcmocka-dev
mesa-vulkan-drivers vulkan-validationlayers libcairo2-dev libpcre2-dev fonts-dejavu-core
python3-numpy libopenblas0-pthread curl ca-certificates"
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
