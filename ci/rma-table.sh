# rma-table.sh - sourced by the one-sided benchmarks that compare a stormpi network path with
# its active messages (bench-lwk-rma.sh: Portals; bench-verbs-rma.sh: verbs): prints the best of
# the runs of bench/rma.c kept as $work/IMPL.REP.out, one row per metric and size, with the
# network path against active messages, Open MPI and MPICH.
#
# usage: rma_table IMPL HEAD SHORT
#   IMPL   the network path's run name (its files $work/IMPL.*.out), e.g. portals
#   HEAD   its column heading, e.g. portals
#   SHORT  its name in the ratio headings, e.g. ptl (ptl/AM, ptl/OMPI, ptl/MPICH)
rma_table() {
    local net=$1 head=$2 short=$3 impl
    for impl in "$net" am openmpi mpich; do
        cat "$work/$impl".*.out 2>/dev/null | awk -v impl="$impl" '$1 !~ /^#/ && NF == 3 { print $1, impl, $2, $3 }'
    done | awk -v net="$net" -v head="$head" -v short="$short" '
        { key = $1 " " $2 " " $3
          if (!(key in best) || $4 < best[key]) best[key] = $4
          if (!(($1 " " $3) in seen)) { seen[$1 " " $3] = 1; order[++n] = $1 " " $3 } }
        function fig(m, impl, s,   k) { k = m " " impl " " s; return (k in best) ? best[k] : "" }
        function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
        function show(v) { return v == "" ? "-" : sprintf("%.3f", v) }
        END {
            printf "%-10s %8s %9s %9s %9s %9s %8s %9s %9s\n", "metric", "bytes", head, "AM", "Open MPI", "MPICH", short "/AM", short "/OMPI", short "/MPICH"
            for (i = 1; i <= n; i++) {
                split(order[i], p, " ")
                a = fig(p[1], net, p[2]); b = fig(p[1], "am", p[2])
                o = fig(p[1], "openmpi", p[2]); m = fig(p[1], "mpich", p[2])
                printf "%-10s %8d %9s %9s %9s %9s %8s %9s %9s\n", p[1], p[2], show(a), show(b), show(o), show(m), ratio(a, b), ratio(a, o), ratio(a, m)
            }
        }'
}
