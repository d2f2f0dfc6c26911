# rma-table.sh - sourced by the one-sided benchmarks (bench-rma.sh: stormpi against Open MPI and
# MPICH; bench-lwk-rma.sh and bench-verbs-rma.sh: a stormpi network path against its active
# messages and both): prints the best of the runs of bench/rma.c kept as $work/IMPL.REP.out, one
# row per metric and size, the first run's figure against each of the others'.
#
# usage: rma_table IMPL:HEAD:SHORT...
#   IMPL   a run's name (its files $work/IMPL.*.out), e.g. portals; the first is compared
#   HEAD   its column heading, e.g. "Open MPI"
#   SHORT  its name in the ratio headings, e.g. OMPI (the first's: ptl/OMPI)
rma_table() {
    local spec impls=()
    for spec in "$@"; do impls+=("${spec%%:*}"); done
    for spec in "${impls[@]}"; do
        cat "$work/$spec".*.out 2>/dev/null | awk -v impl="$spec" '$1 !~ /^#/ && NF == 3 { print $1, impl, $2, $3 }'
    done | awk -v specs="$(printf '%s\n' "$@")" '
        BEGIN {
            k = split(specs, lines, "\n")
            for (j = 1; j <= k; j++) { split(lines[j], f, ":"); impl[j] = f[1]; head[j] = f[2]; short[j] = f[3] }
        }
        { key = $1 " " $2 " " $3
          if (!(key in best) || $4 < best[key]) best[key] = $4
          if (!(($1 " " $3) in seen)) { seen[$1 " " $3] = 1; order[++n] = $1 " " $3 } }
        function fig(m, im, s,   key) { key = m " " im " " s; return (key in best) ? best[key] : "" }
        function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
        function show(v) { return v == "" ? "-" : sprintf("%.3f", v) }
        END {
            printf "%-10s %8s", "metric", "bytes"
            for (j = 1; j <= k; j++) printf " %9s", head[j]
            for (j = 2; j <= k; j++) printf " %11s", short[1] "/" short[j]
            printf "\n"
            for (i = 1; i <= n; i++) {
                split(order[i], p, " ")
                printf "%-10s %8d", p[1], p[2]
                for (j = 1; j <= k; j++) printf " %9s", show(fig(p[1], impl[j], p[2]))
                for (j = 2; j <= k; j++) printf " %11s", ratio(fig(p[1], impl[1], p[2]), fig(p[1], impl[j], p[2]))
                printf "\n"
            }
        }'
}
