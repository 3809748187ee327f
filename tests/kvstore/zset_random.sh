#!/usr/bin/env bash
# zset_random.sh SERVER [SEED] - random sorted set commands
# (ZSET_RANDOM_N, 3000) on two keys of mixed scores and one of equal
# scores (the only one asked BYLEX: over mixed scores Redis's skip list
# answers by its random levels), growing to about 1,800 members with the
# packed form's thresholds lowered by CONFIG SET, so that most commands
# meet the large form (zbtree.c): every range command with edge bounds,
# REV, LIMIT, WITHSCORES, the ZREMRANGEBY* and ZRANGESTORE, through
# redis-server 7.0 and SERVER, the replies compared command by command
# (compat/run.sh reading the commands from a pipe, with no known
# differences). SEED (default 1) picks the
# commands; other seeds are for runs by hand.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
seed=${2:-1}
n=${ZSET_RANDOM_N:-3000}
echo "zset_random: seed $seed, $n commands"
awk -v seed="$seed" -v n="$n" '
    function r(k) { return int(rand() * k) }
    function key() { return "z:" substr("ab", 1 + r(2), 1) }
    function mem(   s, len) {
        if (r(7)) return "m" r(2500)
        # longer than an entry holds inline (28 bytes) and than the value limit
        len = 29 + r(40); s = "long" r(300) "-"
        while (length(s) < len) s = s "x"
        return s
    }
    function score() { return r(4) ? r(80) - 20 : (r(320) - 80) / 4 }
    function bound(   x) {
        x = r(10)
        if (x == 0) return "-inf"
        if (x == 1) return "+inf"
        if (x < 5) return "(" score()
        return score()
    }
    function lexb(   x) {
        x = r(10)
        if (x == 0) return "-"
        if (x == 1) return "+"
        return (r(2) ? "[" : "(") "m" r(2500)
    }
    function rank() { return r(3) ? r(40) - 20 : r(4000) - 2000 }
    function limit() {
        if (r(3)) return ""
        return " LIMIT " (r(6) ? r(30) : -r(3)) " " (r(5) ? r(40) : -1 - r(2))
    }
    function ws() { return r(2) ? " WITHSCORES" : "" }
    BEGIN {
        srand(seed)
        split("4 16 128", entries, " ")
        split("10 64", values, " ")
        print "FLUSHALL"
        print "CONFIG SET zset-max-listpack-entries 4"
        print "CONFIG SET zset-max-listpack-value 64"
        for (i = 0; i < n; i++) {
            d = r(100); k = key()
            if (d < 22) {
                line = "ZADD " k
                f = r(12)
                if (f == 0) line = line " NX"
                else if (f == 1) line = line " XX CH"
                else if (f == 2) line = line " GT CH"
                else if (f == 3) line = line " LT"
                m = r(3) ? 1 + r(160) : 1 + r(5)
                for (j = 0; j < m; j++) line = line " " score() " " mem()
                print line
            } else if (d < 27) {
                line = "ZADD z:lex"
                m = 1 + r(50)
                for (j = 0; j < m; j++) line = line " 0 m" r(2500)
                print line
            } else if (d < 30) print "ZREM " k " " mem() " " mem() " " mem()
            else if (d < 32) print "ZINCRBY " k " " score() " " mem()
            else if (d < 38) print "ZRANGE " k " " rank() " " rank() (r(3) ? "" : " REV") ws()
            else if (d < 42) print "ZREVRANGE " k " " rank() " " rank() ws()
            else if (d < 49) print "ZRANGE " k " " bound() " " bound() " BYSCORE" (r(2) ? " REV" : "") limit() ws()
            else if (d < 53) print "ZRANGEBYSCORE " k " " bound() " " bound() ws() limit()
            else if (d < 57) print "ZREVRANGEBYSCORE " k " " bound() " " bound() ws() limit()
            else if (d < 62) print "ZRANGE z:lex " lexb() " " lexb() " BYLEX" (r(2) ? " REV" : "") limit()
            else if (d < 64) print "ZRANGEBYLEX z:lex " lexb() " " lexb() limit()
            else if (d < 66) print "ZREVRANGEBYLEX z:lex " lexb() " " lexb() limit()
            else if (d < 71) print "ZCOUNT " k " " bound() " " bound()
            else if (d < 74) print "ZLEXCOUNT z:lex " lexb() " " lexb()
            else if (d < 76) print "ZRANGESTORE z:dst " k " " bound() " " bound() " BYSCORE" (r(2) ? " REV" : "") limit()
            else if (d < 77) print "ZRANGESTORE z:dst " k " " rank() " " rank()
            else if (d < 78) print "ZRANGE z:dst 0 -1 WITHSCORES"
            else if (d < 80) print "ZREMRANGEBYRANK " k " " r(30) - 15 " " r(30) - 15
            else if (d < 81) print "ZREMRANGEBYSCORE " k " " (r(4) ? "(" score() " " score() : bound() " " bound())
            else if (d < 82) { x = score(); print "ZREMRANGEBYSCORE " k " " (r(2) ? "(" : "") x " " x + r(2) }
            else if (d < 84) print "ZREMRANGEBYLEX z:lex " lexb() " " lexb()
            else if (d < 87) print "ZRANK " k " " mem()
            else if (d < 89) print "ZSCORE " k " " mem()
            else if (d < 91) print "ZCARD " k
            else if (d < 92) print "ZPOPMIN " k " " r(3)
            else if (d < 93) print "OBJECT ENCODING " k
            else if (d < 94) print "CONFIG SET zset-max-listpack-entries " entries[1 + r(3)]
            else if (d < 95) print "CONFIG SET zset-max-listpack-value " values[1 + r(2)]
            else if (d < 96) print "ZCOUNT " k " -inf +inf"
            else print "ZRANGE " k " 0 -1 WITHSCORES"
        }
        print "ZCARD z:a"
        print "ZCARD z:b"
        print "ZCARD z:lex"
        print "FLUSHALL"
        print "CONFIG SET zset-max-listpack-entries 128"
        print "CONFIG SET zset-max-listpack-value 64"
    }' | COMPAT_SCRIPT=/dev/stdin COMPAT_KNOWN=/dev/null bash "$here/compat/run.sh" "$1"
