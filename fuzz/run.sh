#!/bin/sh
# Runs every fuzz target (or those named) for SECONDS each, one after the other, and prints the
# executions each reached and its findings.
#
#   fuzz/run.sh SECONDS [TARGET...]
#   fuzz/run.sh --replay [TARGET...]
#
# Builds the targets first (clang, -DVKG_FUZZ=ON) in $FUZZ_BUILD (default build-fuzz).  Each
# target starts from its seeds (fuzz/corpus/TARGET/) plus what earlier runs found
# ($FUZZ_LOGS/TARGET.corpus/, kept between runs); a finding (a crash, a failed invariant, a leak,
# a hang over 25 s, an allocation over 2 GiB) is written to $FUZZ_LOGS/TARGET-crash-... and the
# like, the log to $FUZZ_LOGS/TARGET.log.  To keep a finding as a test once it is fixed, copy
# the file into fuzz/corpus/TARGET/ (the test suite replays that folder).  Exit 1 when any target
# had a finding.
#
# --replay builds the same way, then runs every file of fuzz/corpus/TARGET/ once through the
# libFuzzer program, fuzzing nothing and writing nothing: the test suite's check (test
# fuzz_clang) that the library builds with clang, warnings as errors, and that the clang build
# passes the corpora as the gcc build's replay_TARGET programs do.  Exit 1 when an input fails.
set -eu
cd "$(dirname "$0")/.."
case "${1:-}" in
    --replay) ;;
    ''|*[!0-9]*)
        echo "usage: fuzz/run.sh SECONDS [TARGET...] | fuzz/run.sh --replay [TARGET...]" >&2
        exit 2 ;;
esac
seconds=$1
shift
build=${FUZZ_BUILD:-build-fuzz}
logs=${FUZZ_LOGS:-${TMPDIR:-/tmp}/vkgraph-fuzz}
targets=${*:-$(sed -n 's/^set(VKG_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)}

if ! command -v clang >/dev/null; then
    echo "fuzz/run.sh: clang is not installed (tools/setup-debian.sh --test installs clang and libclang-rt-14-dev)" >&2
    exit 1
fi
# Quiet when all goes well; the compiler's messages when the build fails.
if ! out=$(cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DVKG_FUZZ=ON -DVKG_BUILD_TESTS=OFF \
                 -DVKG_FAULT_INJECTION=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo 2>&1) ||
   ! out=$(cmake --build "$build" -j2 --target fuzz 2>&1); then
    printf '%s\n' "$out" | grep -v '^\[' >&2
    echo "fuzz/run.sh: the clang build in $build failed" >&2
    exit 1
fi

if [ "$seconds" = --replay ]; then
    status=0
    for t in $targets; do
        # Files one by one (libFuzzer runs each once); a folder would make it fuzz and add to it.
        files=$(find "fuzz/corpus/$t" -type f | sort)
        if [ -z "$files" ]; then
            echo "$t: fuzz/corpus/$t holds no input" >&2
            status=1
        elif "$build/fuzz/fuzz_$t" $files >"$build/replay-$t.log" 2>&1; then
            echo "$t: $(echo "$files" | wc -l) inputs replayed"
        else
            tail -n 40 "$build/replay-$t.log" >&2
            echo "$t: FAILED (the log: $build/replay-$t.log)" >&2
            status=1
        fi
    done
    exit $status
fi

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
