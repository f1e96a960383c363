#!/bin/sh
# tools/gpu-check.sh: the one run to make on a machine with a GPU.  It builds vkgraph (Release),
# then on every Vulkan GPU: the device's facts (vkgraph devices), every op against the CPU at
# GPT-2's real shapes (vkgraph conformance --full), a whole GPT-2 124M run step by step against
# the CPU at T = 1024 (vkgraph compare), and the model's timings with f32 and f16 weights from
# T = 8 to 4096 and decoding, after a short prompt and after the longest (vkgraph bench); beside them, where a python3 has PyTorch with CUDA,
# the same forward passes and decoding in PyTorch on the GPU (bench/compare-pytorch), checked to
# compute the same logits.  Everything runs offline on a model of GPT-2 124M's shapes with random
# weights (written once, with as many positions as the longest T).  Meant to take under 10
# minutes on a GPU machine (not yet timed on one); docs/PERFORMANCE.md says what to read in the
# output.  The test suite runs it on lavapipe at small sizes (test gpu_check).
#
# Software Vulkan devices (lavapipe) are left out unless --software is given: they are the CI's
# device, and at these sizes they take far longer than 10 minutes (use a shorter -T there).
#
# Exit status: 0 when every step passed, 1 when one failed (the others still run), 2 for bad
# options or when there is no device to check.
set -u
cd "$(dirname "$0")/.."

usage="usage: tools/gpu-check.sh [-T 8,64,256,1024,4096] [--decode N] [--repeat N] [--compare-T N]
                          [--conformance quick|default|full] [--software] [--build DIR] [--no-build]
                          [--size gpt2|gpt2-tiny|...]"
tokens=8,64,256,1024,4096
decode=64
repeat=3
compare_T=1024
level=full
software=0
build=build
no_build=0
size=gpt2
while [ $# -gt 0 ]; do
    case "$1" in
    -T) tokens=${2:?$usage}; shift ;;
    --decode) decode=${2:?$usage}; shift ;;
    --repeat) repeat=${2:?$usage}; shift ;;
    --compare-T) compare_T=${2:?$usage}; shift ;;
    --conformance) level=${2:?$usage}; shift ;;
    --software) software=1 ;;
    --build) build=${2:?$usage}; shift ;;
    --no-build) no_build=1 ;;
    --size) size=${2:?$usage}; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "gpu-check: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
case "$level" in
quick|full) level_flag=--$level ;;
default) level_flag= ;;
*) echo "gpu-check: --conformance takes quick, default or full" >&2; exit 2 ;;
esac
for n in "$repeat" "$compare_T" $(echo "$tokens" | tr ',' ' '); do
    case "$n" in
    ''|*[!0-9]*|0) echo "gpu-check: '$n' is not a count of 1 or more; $usage" >&2; exit 2 ;;
    esac
done
case "$decode" in
''|*[!0-9]*) echo "gpu-check: --decode '$decode' is not a count; $usage" >&2; exit 2 ;;
esac

start=$(date +%s)
failures=""
tmp=$(mktemp -d /tmp/vkgraph-gpu-check-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
# step NAME COMMAND...: prints the command and its output, and the time it took; a failure is
# remembered and the check goes on.
step() {
    name=$1
    shift
    cmd=$*
    [ ${#cmd} -le 160 ] || cmd="$(printf '%.160s' "$cmd") ..."
    echo
    echo "=== $name: $cmd"
    t0=$(date +%s)
    if "$@"; then
        echo "=== $name: passed in $(($(date +%s) - t0)) s"
    else
        echo "=== $name: FAILED (status $?) after $(($(date +%s) - t0)) s"
        failures="$failures
  $name"
    fi
}

echo "gpu-check: $(uname -srm), $(nproc) cores; $(git log -1 --format='%h %cd' --date=short 2>/dev/null || echo 'not a git checkout')"
build_vkgraph() {
    if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > "$tmp/build.log" 2>&1 &&
       cmake --build "$build" -j"$(nproc)" >> "$tmp/build.log" 2>&1; then
        echo "built $build/vkgraph"
    else
        tail -30 "$tmp/build.log"
        return 1
    fi
}
if [ "$no_build" = 1 ]; then
    echo "gpu-check: --no-build: $build/vkgraph as it is"
else
    step build build_vkgraph
fi
vkgraph=$build/vkgraph
[ -x "$vkgraph" ] || { echo "gpu-check: the build failed; nothing to check"; exit 1; }

step devices "$vkgraph" devices

# The devices to check: vulkan:N usable by vkgraph, software ones only with --software.
devices=$("$vkgraph" devices 2>/dev/null | awk -v software="$software" '
    /^vulkan:[0-9]+ / { dev = $1; soft = 0; next }
    /^ +type / { soft = ($0 ~ /software/) }
    /^ +usable by vkgraph +yes/ { if (dev != "" && (!soft || software == 1)) print dev; dev = "" }')
if [ -z "$devices" ]; then
    echo "gpu-check: no Vulkan GPU to check (software devices are left out; --software includes them)"
    exit 2
fi
echo "gpu-check: checking $(echo $devices)"

# The model: GPT-2 124M's shapes (--size), random weights, positions for the longest T and the
# tokens decoded after it.
longest_T=$(echo "$tokens" | tr ',' '\n' | sort -n | tail -1)
longest=$(echo "$tokens,$compare_T" | tr ',' '\n' | sort -n | tail -1)
[ "$longest" -ge 1024 ] || longest=1024
model=$tmp/gpt2
step model "$vkgraph" gpt2-random "$model" --size "$size" --ctx $((longest + decode))
# compare's prompt: compare_T ids spread over the vocabulary, the same on every machine.
ids=$(awk -v n="$compare_T" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), (i * 7919 + 13) % 50257 }')

# PyTorch with CUDA: the first python3 that has it (a virtual environment's, then Debian's).
peer=""
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import numpy, torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        peer=$py
        break
    fi
done
[ -n "$peer" ] || echo "gpu-check: no python3 with PyTorch on CUDA here: vkgraph's figures only"

for dev in $devices; do
    step "conformance $dev" "$vkgraph" conformance --device "$dev" $level_flag
    step "compare $dev, T = $compare_T" "$vkgraph" compare -m "$model" --ids "$ids" --device "$dev" -q
    for dtype in f32 f16; do
        step "bench $dev $dtype" "$vkgraph" bench -m "$model" --device "$dev" --dtype "$dtype" -T "$tokens" \
            --decode "$decode" --repeat "$repeat"
    done
    # decoding after the longest prompt: what each token's attention over a long cache costs
    # (split over workgroups on a GPU), against the short prompt's decode above
    step "bench $dev f16, decode after $longest_T tokens" "$vkgraph" bench -m "$model" --device "$dev" --dtype f16 \
        -T "$longest_T" --decode "$decode" --repeat 1
    if [ -n "$peer" ]; then
        step "PyTorch (CUDA) beside $dev, f32" "$peer" bench/compare-pytorch --vkgraph "$vkgraph" -m "$model" \
            --device "$dev" --torch-device cuda -T "$tokens" --decode "$decode" --repeat "$repeat"
    fi
done

total=$(($(date +%s) - start))
echo
if [ -n "$failures" ]; then
    echo "gpu-check: FAILED in $total s:$failures"
    exit 1
fi
echo "gpu-check: every step passed in $total s"
