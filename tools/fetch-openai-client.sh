#!/bin/sh
# fetch-openai-client.sh [DIR]: installs OpenAI's official JavaScript client (the npm package
# `openai`, pinned below) into DIR (default models/openai-client), with npm's own client, for the
# test server_openai (tests/server_openai_test.mjs), which drives `vkgraph serve` with it as a
# user's program would.  VKG_OPENAI_CLIENT points that test at another DIR.  Building vkgraph
# never needs it.  5.23.2 is pinned because it has no dependencies and runs on Debian 12's Node
# 18 (the 6.x and later releases want Node 20 or 22).
#
# Exit status: 0 done; 1 an error; 2 npm is missing or cannot reach its registry, so a caller can
# go on without it.
set -u
say() { printf 'fetch-openai-client: %s\n' "$*" >&2; }
version=5.23.2
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/models/openai-client}
command -v npm >/dev/null 2>&1 || { say "npm is not installed (apt-get install npm)"; exit 2; }
have=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/openai/package.json" 2>/dev/null | head -n 1)
if [ "$have" = "$version" ]; then
    say "openai $version: already in $dir"
    exit 0
fi
mkdir -p "$dir" || exit 1
if ! npm install --silent --no-audit --no-fund --no-save --prefix "$dir" "openai@$version" >"$dir/npm.log" 2>&1; then
    say "npm install openai@$version failed: $(tail -n 1 "$dir/npm.log")"
    exit 2
fi
say "openai $version: $dir/node_modules/openai"
