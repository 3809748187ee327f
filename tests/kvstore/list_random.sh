#!/usr/bin/env bash
# list_random.sh SERVER [SEED] - random list commands (LIST_RANDOM_N, 2000)
# on three keys, whose elements of 0 to 800 bytes take the lists past the
# limit where t_list.c changes a packed list into a big one and back (8 KB,
# and others that CONFIG SET list-max-listpack-size gives it), and
# past the 64 KiB where the store keeps a value in pieces,
# through redis-server 7.0 and SERVER, the replies compared command by
# command (compat/run.sh, with no known differences). SEED (default 1)
# picks the commands; other seeds are for runs by hand. LIST_RANDOM_ROTATE=1
# makes 4 in 10 commands rotations (RPOPLPUSH k k, LMOVE k k): a big
# list's pop whose header the push writes, the push without room at the
# head that writes the list again.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
seed=${2:-1}
n=${LIST_RANDOM_N:-2000}
rotate=${LIST_RANDOM_ROTATE:-0}
script=$(mktemp -t listrandom-XXXXXX)
known=$(mktemp -t listrandom-known-XXXXXX)
trap 'rm -f "$script" "$known"' EXIT
echo "list_random: seed $seed, $n commands"
awk -v seed="$seed" -v n="$n" -v rotate="$rotate" '
    function r(k) { return int(rand() * k) }
    function key() { return "r:" substr("abc", 1 + r(3), 1) }
    function elem(   s, len) {
        # mostly a few distinct short ones (for LREM, LPOS, LINSERT), some long
        if (r(3)) return "e" r(8)
        len = r(400); s = "v" (++made) "-"
        while (length(s) < len) s = s "xyzw"
        return s
    }
    function idx() { return r(3) ? r(20) - 10 : r(400) - 200 }
    BEGIN {
        srand(seed)
        pad = sprintf("%400s", ""); gsub(/ /, "p", pad)
        # the packed form'"'"'s limit as CONFIG SET changes it: 2 elements to 64 KB
        split("-1 -2 -5 -7 2 5 100", sizes, " ")
        print "FLUSHALL"
        print "SET r:s str"
        for (i = 0; i < n; i++) {
            d = r(100); k = key()
            if (rotate && r(10) < 4) {
                print r(2) ? "RPOPLPUSH " k " " k : "LMOVE " k " " k (r(2) ? " LEFT" : " RIGHT") (r(2) ? " LEFT" : " RIGHT")
                continue
            }
            if (d < 30) {
                line = (r(2) ? "RPUSH " : "LPUSH ") k
                m = r(4) ? 1 + r(5) : 1 + r(60)
                for (j = 0; j < m; j++) line = line " " elem()
                if (!r(15)) # past 64 KiB: a big list in pieces
                    for (j = 0; j < 150; j++) line = line " " elem() pad
                print line
            } else if (d < 33) print (r(2) ? "RPUSHX " : "LPUSHX ") k " " elem()
            else if (d < 45) print (r(2) ? "LPOP " : "RPOP ") k (r(2) ? "" : " " r(4))
            else if (d < 52) print "LRANGE " k " " idx() " " idx()
            else if (d < 58) print "LINDEX " k " " idx()
            else if (d < 62) print "LLEN " k
            else if (d < 68) print "LMOVE " k " " key() (r(2) ? " LEFT" : " RIGHT") (r(2) ? " LEFT" : " RIGHT")
            else if (d < 71) print "RPOPLPUSH " k " " key()
            else if (d < 74) print "LSET " k " " idx() " " elem()
            else if (d < 77) print "LINSERT " k (r(2) ? " BEFORE " : " AFTER ") "e" r(8) " " elem()
            else if (d < 80) print "LREM " k " " (r(5) - 2) " e" r(8)
            else if (d < 82) print "LTRIM " k " " idx() " " idx()
            else if (d < 86) print "LPOS " k " e" r(8) (r(2) ? " RANK " (r(2) ? 1 + r(3) : -1 - r(3)) : "") (r(2) ? " COUNT " r(3) : "") (r(3) ? "" : " MAXLEN " r(30))
            else if (d < 89) print "LMPOP 2 " k " " key() (r(2) ? " LEFT" : " RIGHT") (r(2) ? "" : " COUNT " 1 + r(5))
            else if (d < 91) print "LPUSH r:s x"
            else if (d < 93) print "TYPE " k
            else if (d < 94) print "OBJECT ENCODING " k
            else if (d < 95) print "CONFIG SET list-max-listpack-size " sizes[1 + r(7)]
            else print "LRANGE " k " 0 -1"
        }
        print "FLUSHALL"
    }' >"$script"
COMPAT_SCRIPT=$script COMPAT_KNOWN=$known bash "$here/compat/run.sh" "$1"
