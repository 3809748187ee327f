# compat.awk - the comparison behind compat/run.sh (RESP, with
# redis-server) and mc_compat/run.sh (memcached's protocol, with
# memcached): one script's replies from the reference server and from
# kvstore, compared request by request against the list of known
# differences.
#
#   awk -v cmds=F -v ref=F -v ours=F -v known=F -v refname=NAME -v unit=WORD
#       -v min=N [-v fold=1] -f compat.awk -f SUITE/normal.awk
#
# cmds: "LINE<TAB>MARK<TAB>TEXT" for each request of the script; ref, ours:
# their replies, one a line (a "\001" between a reply's lines), compared as
# the suite's normal(reply, mark) returns them (mark: what the script's
# marker line before the request says, or "-"). known: one entry a line,
# '#' comments: a single word names a command (every request that starts
# with it; case-blind with fold=1), more words are one exact line of the
# script (spaces collapsed).
#
# Prints each request whose replies differ (the listed ones on one line
# each), then "N <unit> identical, M differ as listed, K differ
# unexpectedly". Exits 1 when K > 0, when a listed request now gets the
# reference's reply, when an entry names nothing in the script, when a
# reply is missing, or when the script has fewer than `min` requests.
function norm(s) {
    gsub(/[ \t]+/, " ", s)
    sub(/^ /, "", s)
    sub(/ $/, "", s)
    return s
}
function show(s) {
    gsub(/\001/, "\n      ", s)
    return s
}
function flat(s) {
    gsub(/\001/, " | ", s)
    return length(s) > 100 ? substr(s, 1, 97) "..." : s
}
function list_name(    s) {
    s = known
    sub(/.*\//, "", s)
    return s
}
BEGIN {
    while ((getline e < known) > 0) {
        if (e ~ /^[ \t]*(#|$)/)
            continue
        e = norm(e)
        if (e ~ / /) exact[e] = 0
        else name[fold ? toupper(e) : e] = 0
    }
    while ((getline c < cmds) > 0) {
        n++
        split(c, f, "\t")
        line = f[1]; cmd = norm(f[3])
        from = (getline r < ref) <= 0 ? refname : (getline k < ours) <= 0 ? "kvstore" : ""
        if (from != "") {
            printf "FAIL: no reply from %s to line %d: %s\n", from, line, cmd
            missing = 1
            break
        }
        r = normal(r, f[2])
        k = normal(k, f[2])
        w = cmd
        sub(/ .*/, "", w)
        if (fold) w = toupper(w)
        listed = 0
        if (cmd in exact) { exact[cmd]++; listed = 1 }
        if (w in name) { name[w]++; listed = 1 }
        if (r == k && !listed) {
            same++
        } else if (r == k) {
            stale++
            printf "NOW IDENTICAL, remove it from %s (or narrow the entry): line %d: %s\n", list_name(), line, cmd
        } else if (listed) {
            as_listed++
            printf "listed      line %d: %s\n    %s: %s\n    kvstore: %s\n", line, flat(cmd), refname, flat(r), flat(k)
        } else {
            bad++
            # joined, not sprintf'd: mawk's sprintf stops at 8 KiB, and a
            # reply (COMMAND INFO's) may be longer
            unexpected = unexpected "DIFFERS     line " line ": " cmd "\n  " refname ":\n      " \
                         show(r) "\n  kvstore:\n      " show(k) "\n"
        }
    }
    if (!missing && ((getline r < ref) > 0 || (getline k < ours) > 0)) {
        printf "FAIL: more replies than the %d %s\n", n, unit
        missing = 1
    }
    if (!missing) {
        for (e in exact)
            if (!exact[e]) { printf "%s: no such line in the script: %s\n", list_name(), e; unused++ }
        for (e in name)
            if (!name[e]) { printf "%s: no such command in the script: %s\n", list_name(), e; unused++ }
    }
    printf "%s", unexpected
    printf "%d %s identical, %d differ as listed, %d differ unexpectedly\n", same, unit, as_listed, bad
    if (stale) printf "FAIL: %d listed %s now get %s's reply: remove them from %s\n", stale, unit, refname, list_name()
    if (unused) printf "FAIL: %d entries of %s match nothing in the script\n", unused, list_name()
    if (bad) printf "FAIL: %d %s differ from %s and are not listed in %s\n", bad, unit, refname, list_name()
    if (n < min) printf "FAIL: the script has %d %s, fewer than %d\n", n, unit, min
    exit (bad || stale || unused || missing || n < min) ? 1 : 0
}
