# normal.awk - the RESP comparison's normal(reply, mark) for compat.awk:
# a reply as redis-cli printed it, sorted after "#@sort", only its type
# after "#@type".

# the elements of a reply without their indexes, sorted
function sorted(s,    a, m, i, j, t, out) {
    m = split(s, a, "\001")
    for (i = 1; i <= m; i++)
        while (sub(/^ *[0-9]+\) /, "", a[i]))
            ;
    for (i = 2; i <= m; i++)
        for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
            t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
        }
    out = a[1]
    for (i = 2; i <= m; i++)
        out = out "\001" a[i]
    return out
}
function typeof_reply(s) {
    if (s ~ /^\(integer\) /) return "(integer)"
    if (s ~ /^\(error\) /) return "(error)"
    if (s ~ /^\(nil\)/) return "(nil)"
    if (s ~ /^"/) return "(string)"
    if (s ~ /^\(empty array\)/ || s ~ /^ *1\) /) return "(array)"
    if (s ~ /^ *1# /) return "(map)"
    # redis-cli prints the replies of INFO and CLIENT LIST raw, an
    # error too: "ERR ..." without "(error)"
    if (s ~ /^[A-Z][A-Z]+ /) return "(error)"
    return "(text)"
}
# COMMAND INFO's entries, each cut after its seventh field: a field's
# index ends in the column of the first entry's "1)", nested ones further
# right
function info_head(s,    a, m, i, p, col, keep, out) {
    m = split(s, a, "\001")
    keep = 1
    col = 0
    for (i = 1; i <= m; i++) {
        p = index(a[i], ")")
        if (col && p == col) { # a field of the entry
            keep = substr(a[i], 1, p - 1) + 0 <= 7
        } else if ((!col || p < col) && a[i] ~ /^ *[0-9]+\) +1\) /) { # an entry's first field
            keep = 1
            col = p + index(substr(a[i], p + 1), ")")
        } else if (p && p < col) { # an entry of one line (nil)
            keep = 1
        }
        if (keep)
            out = out (out == "" ? "" : "\001") a[i]
    }
    return out
}
function normal(s, mark) {
    return mark == "sort" ? sorted(s) : mark == "type" ? typeof_reply(s) : \
           mark == "info" ? info_head(s) : s
}
