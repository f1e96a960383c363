#!/bin/sh
# Runs every fuzz target (or those named) for SECONDS each, one after the other, and prints the
# executions each reached and its findings.
#
#   fuzz/run.sh SECONDS [TARGET...]
#
# Builds the targets first (clang, -DVKG_FUZZ=ON) in $FUZZ_BUILD (default build-fuzz).  Each
# target starts from its seeds (fuzz/corpus/TARGET/) plus what earlier runs found
# ($FUZZ_LOGS/TARGET.corpus/, kept between runs); a finding (a crash, a failed invariant, a leak,
# a hang over 25 s, an allocation over 2 GiB) is written to $FUZZ_LOGS/TARGET-crash-... and the
# like, the log to $FUZZ_LOGS/TARGET.log.  To keep a finding as a test once it is fixed, copy
# the file into fuzz/corpus/TARGET/ (the test suite replays that folder).  Exit 1 when any target
# had a finding.
set -eu
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "usage: fuzz/run.sh SECONDS [TARGET...]" >&2
    exit 2
fi
seconds=$1
shift
build=${FUZZ_BUILD:-build-fuzz}
logs=${FUZZ_LOGS:-${TMPDIR:-/tmp}/vkgraph-fuzz}
targets=${*:-$(sed -n 's/^set(VKG_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)}

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DVKG_FUZZ=ON -DVKG_BUILD_TESTS=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target fuzz >/dev/null
mkdir -p "$logs/bin"

status=0
for t in $targets; do
    # A copy of the program runs, so that a rebuild meanwhile does not meet a busy file.
    cp "$build/fuzz/fuzz_$t" "$logs/bin/fuzz_$t"
    mkdir -p "$logs/$t.corpus"
    rc=0
    start=$(date +%s)
    "$logs/bin/fuzz_$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -close_fd_mask=3 \
        -print_final_stats=1 -artifact_prefix="$logs/$t-" "$logs/$t.corpus" "fuzz/corpus/$t" \
        >"$logs/$t.log" 2>&1 || rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -n 1)
    findings=$(find "$logs" -maxdepth 1 -name "$t-*" -type f | wc -l)
    echo "$t: ${runs:-?} executions in $(($(date +%s) - start)) s, $findings finding(s), exit $rc, corpus $(ls "$logs/$t.corpus" | wc -l) files"
    if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then status=1; fi
done
exit $status
