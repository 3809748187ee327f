#!/usr/bin/env bash
# replay.sh CRASHCHECK BANK BROKEN: a campaign of txn-crashcheck on the
# BROKEN bank (BANK its correct --verify) finds an inconsistent image; its
# --replay S:N, run twice, rebuilds that image byte for byte (the kept
# files compared, and their checksum with the campaign's) and finds it
# inconsistent again.
set -uo pipefail
cc=$1 bank=$2 broken=$3
args=(--check "$bank --verify {pool}" -- "$broken" --transfers 40 {pool})
line=$("$cc" --images 40 --seed 3 "${args[@]}" 2>&1 >/dev/null | grep -m 1 '^inconsistent image')
first=$(sed -n 's/.*(--replay \([0-9]*:[0-9]*\), checksum \([0-9a-f]*\)).*/\1/p' <<<"$line")
sum=$(sed -n 's/.*(--replay \([0-9]*:[0-9]*\), checksum \([0-9a-f]*\)).*/\2/p' <<<"$line")
[ -n "$first" ] && [ -n "$sum" ] ||
    { echo "FAIL: the campaign found no inconsistent image"; exit 1; }
one() { # the kept image's path, a copy of it in $1
    local out path
    out=$("$cc" --replay "$first" "${args[@]}" 2>/dev/null)
    grep -q "checksum $sum" <<<"$out" ||
        { echo "FAIL: --replay $first made another image than the campaign's" >&2; return 1; }
    grep -q "crash images: 1, inconsistent: 1" <<<"$out" ||
        { echo "FAIL: --replay $first did not find the image inconsistent: $out" >&2; return 1; }
    path=$(sed -n 's/.*image (before recovery) is at \(.*\)$/\1/p' <<<"$out")
    [ -f "$path" ] || { echo "FAIL: --replay $first kept no image" >&2; return 1; }
    mv "$path" "$1"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one "$tmp/a" && one "$tmp/b" || exit 1
cmp "$tmp/a" "$tmp/b" || { echo "FAIL: --replay $first made two different images"; exit 1; }
echo "ok: --replay $first made the same image twice, inconsistent both times"
