#!/bin/sh
# The README's two commands for a fresh machine are the ones .ci/run runs, character for
# character: each command string of .ci/run must appear in the README as a line of its own.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
for name in main_job test_job; do
    cmd=$(sed -n "s/^$name='\(.*\)'\$/\1/p" "$root/.ci/run")
    if [ -z "$cmd" ]; then
        echo "readme_commands: .ci/run has no $name='...' line"
        exit 1
    fi
    if ! grep -Fxq -- "$cmd" "$root/README.md"; then
        echo "readme_commands: the README does not hold .ci/run's $name verbatim:"
        echo "  $cmd"
        exit 1
    fi
done
echo "readme_commands: both commands match"
