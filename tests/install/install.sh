#!/usr/bin/env bash
# install.sh BUILD_DIR SOURCE_DIR [SANITIZERS]: install the build into a
# temporary prefix, then build the README's first program (its first C
# block) against every engine there, through pkg-config and through
# CMake's find_package(pmtx), and run it twice: the counter must persist.
# A sanitizer build's libraries want programs built with the same
# sanitizers (the runtime must be loaded first).
set -euo pipefail
build=$1 src=$2 san=${3:-}
flags=()
[ -n "$san" ] && flags=(-fsanitize="$san" -fno-omit-frame-pointer)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
awk '/^```c$/ {on = 1; next} on && /^```$/ {exit} on' "$src/README.md" > "$tmp/first.c"
grep -q 'int main' "$tmp/first.c" || { echo "FAIL: no first program in README.md"; exit 1; }
libdir=$(dirname "$(find "$prefix" -name 'pkgconfig' -type d | head -n 1)")
export TXN_POOL_DIR=$tmp LD_LIBRARY_PATH=$libdir PKG_CONFIG_PATH=$libdir/pkgconfig

runs_twice() { # NAME BINARY ENGINE
    rm -f "$tmp/counter.pool"
    local out1 out2
    out1=$("$2") && out2=$("$2") || { echo "FAIL: $1 exited nonzero"; exit 1; }
    [ "$out1" = "run 1 on $3" ] && [ "$out2" = "run 2 on $3" ] ||
        { echo "FAIL: $1 printed '$out1' then '$out2'"; exit 1; }
    echo "ok: $1"
}

mkdir -p "$tmp/cm"
cat > "$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(first C)
find_package(pmtx REQUIRED)
foreach(engine IN LISTS pmtx_ENGINES)
  add_executable(first-${engine} ../first.c)
  target_link_libraries(first-${engine} PRIVATE pmtx::${engine})
endforeach()
CM
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${flags[*]}" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
while read -r engine; do
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Werror "${flags[@]}" -o "$tmp/first-$engine" "$tmp/first.c" \
        $(pkg-config --cflags --libs "txn-$engine")
    runs_twice "pkg-config txn-$engine" "$tmp/first-$engine" "$engine"
    runs_twice "find_package pmtx::$engine" "$tmp/cm/build/first-$engine" "$engine"
done < "$build/engines.txt"

# txn-crashcheck from the install (docs/crashcheck.md): the bank example
# (examples/bank.c) built outside the repository against txn-undo-check,
# through pkg-config and through find_package's pmtx::undo-check, checked
# by the installed txn-crashcheck: 0 inconsistent
if [ -x "$prefix/bin/txn-crashcheck" ]; then
    pkg-config --exists txn-undo-check || { echo "FAIL: no txn-undo-check.pc installed"; exit 1; }
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Werror "${flags[@]}" -o "$tmp/bank" "$src/examples/bank.c" \
        $(pkg-config --cflags --libs txn-undo-check)
    mkdir -p "$tmp/cmb"
    cat > "$tmp/cmb/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(bank C)
find_package(pmtx REQUIRED)
add_executable(bank $src/examples/bank.c)
target_link_libraries(bank PRIVATE pmtx::undo-check)
CM
    cmake -S "$tmp/cmb" -B "$tmp/cmb/build" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${flags[*]}" >/dev/null
    cmake --build "$tmp/cmb/build" >/dev/null
    for b in "$tmp/bank" "$tmp/cmb/build/bank"; do
        out=$("$prefix/bin/txn-crashcheck" --images 10 --check "$b --verify {pool}" -- \
              "$b" --transfers 10 {pool}) ||
            { echo "FAIL: txn-crashcheck on $b: $out"; exit 1; }
        grep -q "crash images: 10, inconsistent: 0, untraced stores: 0" <<<"$out" ||
            { echo "FAIL: txn-crashcheck on $b: $out"; exit 1; }
        # the leak check through the installed txn_check.h's txn_check_reach
        grep -q "leak check: made on 10 of 10 images" <<<"$out" ||
            { echo "FAIL: no leak check on $b: $out"; exit 1; }
        echo "ok: txn-crashcheck on the bank built against txn-undo-check ($b)"
    done
    # its threads under the seeded scheduler: the library's pthread calls
    # come before libc's in the installed program too
    out=$("$prefix/bin/txn-crashcheck" --images 10 --threads-sched --check \
          "$tmp/bank --verify {pool}" -- "$tmp/bank" --transfers 10 --threads 2 {pool}) ||
        { echo "FAIL: txn-crashcheck --threads-sched on $tmp/bank: $out"; exit 1; }
    grep -q "crash images: 10, inconsistent: 0, untraced stores: 0" <<<"$out" ||
        { echo "FAIL: txn-crashcheck --threads-sched on $tmp/bank: $out"; exit 1; }
    echo "ok: txn-crashcheck --threads-sched on the bank with two threads"
    # the README's own example: its first program, checked as it says
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Werror "${flags[@]}" -o "$tmp/counter-check" "$tmp/first.c" \
        $(pkg-config --cflags --libs txn-undo-check)
    out=$("$prefix/bin/txn-crashcheck" --images 10 --check "$tmp/counter-check {pool}" -- \
          "$tmp/counter-check" {pool}) && grep -q "inconsistent: 0, untraced stores: 0" <<<"$out" ||
        { echo "FAIL: txn-crashcheck on the README's counter: $out"; exit 1; }
    echo "ok: txn-crashcheck on the README's counter"
fi
