#!/bin/sh
# fetch-model.sh DIR OWNER/NAME: downloads from the Hugging Face hub into DIR every file of the
# model's main tree that vkgraph reads: config.json, generation_config.json, tokenizer.json,
# tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt, model.safetensors,
# model.safetensors.index.json and the shards that index names (model-00001-of-00002.safetensors,
# ...).  Only the files the hub lists are fetched; config.json and the weights (model.safetensors
# or the index) must be there, and so must every shard the index names.
#
# Every file is checked against what the hub's API lists for it
# (https://huggingface.co/api/models/OWNER/NAME/tree/main): its size, and its hash: the sha256 the
# hub gives for files kept in Git LFS (lfs.oid), or, for small files kept in git itself, the git
# blob id (oid), the sha1 of "blob SIZE\0" followed by the content.  No checksum is written here.
# Downloads go to FILE.part and resume where they stopped (curl -C -); a file is renamed into
# place only once it checks out, and a file already there that checks out is not fetched again.
#
# Exit status: 0 done; 1 an error (a file that does not check out, a model the hub does not have);
# 2 the hub cannot be reached (said within seconds: the listing has 5 seconds to connect and 20 in
# all; a download that stalls, under 1 kB/s for 60 seconds, stops and resumes on the next run),
# so a caller can fall back to something else.  VKG_OFFLINE=1 gives 2 at once, contacting nothing.
#
# For tests, VKG_HF_API_URL replaces the listing's URL and VKG_HF_BASE_URL the files' base URL
# (file:// URLs work).
#
# tools/fetch-gpt2.sh runs this with --files LIST (exactly those files, all required) and
# --name (the name its messages start with).
set -u

me=fetch-model
only=
usage="usage: tools/fetch-model.sh DIR OWNER/NAME   (e.g. tools/fetch-model.sh models/smollm2-instruct HuggingFaceTB/SmolLM2-135M-Instruct)"
while [ $# -ge 2 ]; do
    case $1 in
        --files) only=$2; shift 2 ;;
        --name) me=$2; shift 2 ;;
        *) break ;;
    esac
done
say() { printf '%s: %s\n' "$me" "$*" >&2; }
if [ $# -ge 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; }; then
    echo "$usage"
    exit 0
fi
if [ $# -ne 2 ]; then
    echo "$usage" >&2
    exit 1
fi
dir=$1
model=$2
if [ -n "${VKG_OFFLINE:-}" ] && [ "$VKG_OFFLINE" != 0 ]; then
    say "VKG_OFFLINE is set: not contacting the Hugging Face hub"
    exit 2
fi
api=${VKG_HF_API_URL:-https://huggingface.co/api/models/$model/tree/main}
base=${VKG_HF_BASE_URL:-https://huggingface.co/$model/resolve/main}
# What vkgraph reads from a model folder (src/models/checkpoint.h, the tokenizer and chat loaders).
wanted="config.json generation_config.json tokenizer.json tokenizer_config.json special_tokens_map.json
vocab.json merges.txt model.safetensors model.safetensors.index.json"
index=model.safetensors.index.json

for tool in curl awk sha256sum sha1sum; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        say "needs $tool, which is not installed"
        exit 1
    fi
done

# curl's exit codes that mean "no connection": resolving, connecting, TLS, timeouts, resets.
unreachable() {
    case $1 in 5|6|7|28|35|52|55|56|60) return 0 ;; *) return 1 ;; esac
}

# The listing's entry for path $2 in the JSON array $1, as "SIZE OID LFS_OID LFS_SIZE" ("-" where
# absent); with $2 empty, the paths of all its entries of type "file", one a line.  Objects are split by brace depth outside strings; the nested "lfs" object is read
# separately so that its oid and size are not taken for the file's own.
entry_of() {
    printf '%s' "$1" | awk -v want="$2" '
        function str(o, k,   m) {
            if (!match(o, "\"" k "\"[ \t\r\n]*:[ \t\r\n]*\"[^\"]*\"")) return "-"
            m = substr(o, RSTART, RLENGTH); sub(/^"[^"]*"[ \t\r\n]*:[ \t\r\n]*"/, "", m); sub(/"$/, "", m)
            return m
        }
        function num(o, k,   m) {
            if (!match(o, "\"" k "\"[ \t\r\n]*:[ \t\r\n]*[0-9]+")) return "-"
            m = substr(o, RSTART, RLENGTH); sub(/^"[^"]*"[ \t\r\n]*:[ \t\r\n]*/, "", m)
            return m
        }
        function entry(o,   lfs) {
            lfs = ""
            if (match(o, /"lfs"[ \t\r\n]*:[ \t\r\n]*[{][^}]*[}]/)) {
                lfs = substr(o, RSTART, RLENGTH)
                o = substr(o, 1, RSTART - 1) substr(o, RSTART + RLENGTH)
            }
            if (want == "") { if (str(o, "type") == "file") { print str(o, "path"); found = 1 } return }
            if (str(o, "path") != want) return
            print num(o, "size"), str(o, "oid"), (lfs == "" ? "-" : str(lfs, "oid")), (lfs == "" ? "-" : num(lfs, "size"))
            found = 1
        }
        { text = text $0 "\n" }
        END {
            n = length(text); depth = 0; instr = 0; esc = 0
            for (i = 1; i <= n; i++) {
                c = substr(text, i, 1)
                if (instr) { if (esc) esc = 0; else if (c == "\\") esc = 1; else if (c == "\"") instr = 0; continue }
                if (c == "\"") instr = 1
                else if (c == "{") { if (++depth == 1) start = i }
                else if (c == "}") { if (depth-- == 1) entry(substr(text, start, i - start + 1)) }
            }
            exit found ? 0 : 1
        }'
}

# check FILE SIZE KIND HASH: 0 when FILE has SIZE bytes and the hash (KIND sha256 or git-sha1).
check() {
    actual=$(wc -c <"$1" | tr -d ' ')
    if [ "$actual" != "$2" ]; then
        why="$actual bytes, but the hub lists $2"
        return 1
    fi
    if [ "$3" = sha256 ]; then
        got=$(sha256sum <"$1" | cut -d' ' -f1)
    else
        got=$( { printf 'blob %s\0' "$2"; cat "$1"; } | sha1sum | cut -d' ' -f1)
    fi
    if [ "$got" != "$4" ]; then
        why="$3 $got, but the hub lists $4"
        return 1
    fi
    return 0
}

# fetch FILE: downloads FILE into $dir unless a copy that checks out is there; exits on failure.
fetch() {
    f=$1
    if ! info=$(entry_of "$listing" "$f"); then
        say "the hub's listing of '$model' has no $f"
        exit 1
    fi
    set -- $info
    size=$1 kind=git-sha1 hash=$2
    if [ "$3" != "-" ]; then
        kind=sha256 hash=$3
        [ "$4" != "-" ] && size=$4
    fi
    if [ "$size" = "-" ] || [ "$hash" = "-" ]; then
        say "the hub's listing gives no size or hash for $f; refusing to use it unchecked"
        exit 1
    fi
    target=$dir/$f
    if [ -f "$target" ] && check "$target" "$size" "$kind" "$hash"; then
        say "$f: already there and checks out ($size bytes, $kind)"
        return 0
    fi
    part=$target.part
    # A part as long as the file (or longer) cannot be resumed: check it or start over.
    if [ -f "$part" ] && [ "$(wc -c <"$part" | tr -d ' ')" -ge "$size" ]; then
        check "$part" "$size" "$kind" "$hash" || rm -f "$part"
    fi
    if [ ! -f "$part" ] || [ "$(wc -c <"$part" | tr -d ' ')" -lt "$size" ]; then
        say "$f: downloading $size bytes from $base/$f"
        curl -f -L -C - --connect-timeout 10 --retry 3 --speed-limit 1024 --speed-time 60 --progress-bar \
            -o "$part" "$base/$f"
        rc=$?
        if [ $rc -ne 0 ]; then
            if unreachable $rc; then
                say "$f: the download stopped (curl exit status $rc); run again to resume from $part"
                exit 2
            fi
            say "$f: the download failed (curl exit status $rc)"
            exit 1
        fi
    fi
    if ! check "$part" "$size" "$kind" "$hash"; then
        mv -f "$part" "$target.bad"
        say "$f does not match the hub's listing: $why; kept as $target.bad"
        exit 1
    fi
    mv -f "$part" "$target" || exit 1
    say "$f: checks out ($size bytes, $kind $hash)"
}

# -sS: nothing on stderr unless it fails, so on failure $listing holds curl's message.
listing=$(curl -sS -f -L --connect-timeout 5 --max-time 20 "$api" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    curl_msg=$(printf '%s' "$listing" | tail -n 1)
    if [ $rc -eq 22 ]; then
        say "the hub has no model '$model' (or refuses to list it): $curl_msg"
        exit 1
    fi
    say "cannot reach the Hugging Face hub ($api): ${curl_msg:-curl exit status $rc}"
    exit 2
fi

mkdir -p "$dir" || exit 1

# The shards model.safetensors.index.json names: the distinct values of its weight_map, one a line.
shards_of() {
    awk '{ text = text $0 "\n" }
        END {
            i = index(text, "\"weight_map\""); if (!i) exit 1
            text = substr(text, i + 12)
            while (match(text, /"[ \t\r\n]*:[ \t\r\n]*"[^"]*"/)) {
                v = substr(text, RSTART, RLENGTH); sub(/^"[ \t\r\n]*:[ \t\r\n]*"/, "", v); sub(/"$/, "", v)
                if (!(v in seen)) { seen[v] = 1; print v }
                text = substr(text, RSTART + RLENGTH)
            }
        }' "$1"
}

if [ -n "$only" ]; then
    files=$only
else
    present=$(entry_of "$listing" "") || present=
    files=
    for f in $wanted; do
        if printf '%s\n' "$present" | grep -Fxq -- "$f"; then files="$files $f"; fi
    done
    case " $files " in *" config.json "*) ;; *)
        say "the hub's listing of '$model' has no config.json"; exit 1 ;;
    esac
    case " $files " in *" model.safetensors "*|*" $index "*) ;; *)
        say "the hub's listing of '$model' has neither model.safetensors nor $index (vkgraph reads safetensors weights only)"
        exit 1 ;;
    esac
fi
for f in $files; do
    fetch "$f"
done
if [ -z "$only" ] && [ -f "$dir/$index" ]; then
    if ! shards=$(shards_of "$dir/$index") || [ -z "$shards" ]; then
        say "$index names no shards (it has no weight_map)"
        exit 1
    fi
    for f in $shards; do
        # A plain file name in the folder, as vkgraph's loader demands: nothing written outside DIR.
        case $f in
            */*|.*|*[!A-Za-z0-9._-]*|"") say "$index names a shard '$f' that is not a plain file name"; exit 1 ;;
        esac
        fetch "$f"
    done
fi
say "'$model' is in $dir"
exit 0
