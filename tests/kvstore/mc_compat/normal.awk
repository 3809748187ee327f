# normal.awk - the memcached comparison's normal(reply, mark) for
# compat.awk: a reply as kvclient mc-replay printed it, without its line
# number; after "#@stats FIELD...", only its shape (STAT lines, then END)
# and the fields named.

function stats_shape(s, mark,    m, a, i, f, want, out, ok, v) {
    m = split(s, a, /\\r\\n/)
    ok = m >= 2 && a[m] == "" && a[m - 1] == "END"
    for (i = 1; i < m - 1 && ok; i++)
        ok = a[i] ~ /^STAT [^ ]+ /
    if (!ok)
        return s
    out = "STAT lines, END"
    split(mark, want, " ")
    for (f = 2; f in want; f++) {
        v = "(none)"
        for (i = 1; i < m - 1; i++)
            if (index(a[i], "STAT " want[f] " ") == 1)
                v = substr(a[i], length(want[f]) + 7)
        out = out ", " want[f] "=" v
    }
    return out
}
function normal(s, mark) {
    sub(/^[0-9]+\t/, "", s)
    return mark ~ /^stats/ ? stats_shape(s, mark) : s
}
