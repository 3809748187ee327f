#!/usr/bin/env bash
# sched.sh CRASHCHECK BANK BROKEN: under --threads-sched the same seed gives
# the same run: two campaigns of txn-crashcheck on the two-thread BROKEN
# bank (BANK its correct --verify) from one seed print the same trace
# fingerprint and the same inconsistent images with the same checksums,
# and name the line that lets the lock go too early (bank.c's BANK_UNLOCK
# line) as where a transaction not ended at a crash let go of it; --replay of one of them rebuilds it (its checksum) and finds it
# inconsistent again; another seed orders the threads otherwise (another
# fingerprint: the scheduler draws from the seed).
set -uo pipefail
cc=$1 bank=$2 broken=$3
args=(--threads-sched --check "$bank --verify {pool}" -- "$broken" --transfers 40 --threads 3 {pool})
src=$(dirname "$0")/../../examples/bank.c
unlock=$(grep -n 'pthread_mutex_unlock(&bank_lock); /\* broken' "$src" | cut -d: -f1)
[ -n "$unlock" ] || { echo "FAIL: no early unlock in $src"; exit 1; }
full=$(mktemp)
trap 'rm -f "$full"' EXIT
run() { # SEED: the campaign's fingerprint and images, one a line (all in $full)
    "$cc" --images 40 --seed "$1" "${args[@]}" >"$full" 2>&1
    sed -n -e 's/.*(trace \([0-9a-f]*\)).*/trace \1/p' \
        -e 's/^inconsistent image \([0-9]*\) (--replay [0-9:]*, checksum \([0-9a-f]*\)).*/\1 \2/p' \
        "$full"
}
a=$(run 3)
grep -q "not ended at the crash, let go of a lock before its end at transfer at bank\.c:$unlock " "$full" ||
    { echo "FAIL: no report names the early unlock (bank.c:$unlock):"; cat "$full"; exit 1; }
b=$(run 3) c=$(run 4)
grep -q '^trace ' <<<"$a" || { echo "FAIL: no trace fingerprint: $a"; exit 1; }
[ "$(grep -vc '^trace ' <<<"$a")" -gt 0 ] ||
    { echo "FAIL: the campaign found no inconsistent image"; exit 1; }
[ "$a" = "$b" ] || { echo "FAIL: seed 3 twice, two runs:"; diff <(echo "$a") <(echo "$b"); exit 1; }
[ "$(head -1 <<<"$a")" != "$(head -1 <<<"$c")" ] ||
    { echo "FAIL: seeds 3 and 4 made the same trace"; exit 1; }
read -r image sum < <(grep -v '^trace ' <<<"$a" | head -1)
out=$("$cc" --replay "3:$image" "${args[@]}" 2>/dev/null)
grep -q "checksum $sum" <<<"$out" ||
    { echo "FAIL: --replay 3:$image made another image than the campaign's: $out"; exit 1; }
grep -q "crash images: 1, inconsistent: 1" <<<"$out" ||
    { echo "FAIL: --replay 3:$image did not find the image inconsistent: $out"; exit 1; }
path=$(sed -n 's/.*image (before recovery) is at \(.*\)$/\1/p' <<<"$out")
[ -n "$path" ] && rm -f "$path"
echo "ok: the early unlock at bank.c:$unlock named; seed 3 made the same trace and images twice ($(grep -vc '^trace ' <<<"$a") inconsistent), --replay 3:$image the same image"
