#!/usr/bin/env bash
# bench-coll.sh - collective latency of stormpi against Open MPI and MPICH, measured on this
# machine in the same invocation, at 2 ranks and at 4 ranks (oversubscribed on 2 cores),
# reported as one table per rank count with ratios.
#
# usage: ci/bench-coll.sh [--quick] [--reps N] [--max BYTES] [--time SECONDS] [--np "2 4"]
#                         [--only NAME]
#   --quick        one repetition, 64 KiB max, 0.01 s batches (a smoke test, noisy numbers)
#   --reps N       repetitions; the runs of the three libraries are interleaved per repetition
#                  and the lowest latency of each is kept; default 3
#   --max BYTES    largest message (default 1048576)
#   --time SECONDS time per timed batch in bench/coll.c (default 0.05)
#   --np LIST      rank counts (default "2 4"); more ranks than cores run oversubscribed
#   --only NAME    one collective (Barrier, Bcast, Allreduce, Reduce, Allgather, Alltoall, Gather,
#                  Scatter, Reduce_scatter_block)
#
# bench/coll.c is built three ways:
#   stormpi   $STORMCC (default target/release/stormcc, else stormcc on PATH), run with
#             $STORMRUN -n N --oversubscribe (default target/release/stormrun); skipped, with a
#             message, when those tools are not there yet;
#   Open MPI  mpicc.openmpi, run with mpirun.openmpi -n N --oversubscribe (root is allowed
#             through the OMPI_ALLOW_RUN_AS_ROOT variables);
#   MPICH     mpicc.mpich, run with mpiexec.mpich -n N.
# Each library runs with its defaults (shared memory on one node). The machine's load average
# is printed before and after: other work on the machine makes every figure worse.
# Exit status: 1 if stormpi's tools exist but its build or run failed, or if nothing could run;
# a reference library that fails is reported and left out.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
max=1048576
btime=0.05
nps="2 4"
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; max=65536; btime=0.01 ;;
        --reps) shift; reps=$1 ;;
        --max) shift; max=$1 ;;
        --time) shift; btime=$1 ;;
        --np) shift; nps=$1 ;;
        --only) shift; only=$1 ;;
        -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "bench-coll.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-coll.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$root/bench/coll.c"
args="-m $max -t $btime"
[ -n "$only" ] && args="$args -o $only"
run_timeout=${BENCH_TIMEOUT:-1200}

find_tool() { # find_tool ENVVALUE NAME
    if [ -n "$1" ]; then echo "$1"; return; fi
    if [ -x "$root/target/release/$2" ]; then echo "$root/target/release/$2"; return; fi
    command -v "$2" 2>/dev/null || true
}
stormcc=$(find_tool "${STORMCC:-}" stormcc)
stormrun=$(find_tool "${STORMRUN:-}" stormrun)

impls=()
status=0
notes=()

# --- build ---
if [ -n "$stormcc" ] && [ -n "$stormrun" ] && [ -x "$stormcc" ] && [ -x "$stormrun" ]; then
    if "$stormcc" -O2 -o "$work/coll-stormpi" "$src" >"$work/build-stormpi.log" 2>&1; then
        impls+=(stormpi)
    else
        notes+=("stormpi: build with $stormcc failed: $(head -n 3 "$work/build-stormpi.log" | tr '\n' ' ')")
        status=1
    fi
else
    notes+=("stormpi: skipped (stormcc/stormrun not found; set STORMCC and STORMRUN or build target/release)")
fi
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$work/coll-openmpi" "$src" >"$work/build-openmpi.log" 2>&1; then
    impls+=(openmpi)
else
    notes+=("Open MPI: build with mpicc.openmpi failed or not installed")
fi
if command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$work/coll-mpich" "$src" >"$work/build-mpich.log" 2>&1; then
    impls+=(mpich)
else
    notes+=("MPICH: build with mpicc.mpich failed or not installed")
fi

launch() { # launch IMPL NP
    case "$1" in
        stormpi) "$stormrun" -n "$2" --oversubscribe "$work/coll-stormpi" $args ;;
        openmpi) mpirun.openmpi -n "$2" --oversubscribe "$work/coll-openmpi" $args ;;
        mpich) mpiexec.mpich -n "$2" "$work/coll-mpich" $args ;;
    esac
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

# --- run, interleaved per repetition ---
declare -A failed
for np in $nps; do
    for rep in $(seq 1 "$reps"); do
        for impl in "${impls[@]}"; do
            [ -n "${failed[$impl.$np]:-}" ] && continue
            echo "# np $np rep $rep/$reps: $impl" >&2
            if ! timeout "$run_timeout" bash -c "$(declare -f launch); work='$work'; stormrun='$stormrun'; args='$args'; launch $impl $np" \
                    >"$work/$impl.$np.$rep.out" 2>"$work/$impl.$np.$rep.err" </dev/null \
                || ! grep -q '^coll ' "$work/$impl.$np.$rep.out"; then
                failed[$impl.$np]=1
                notes+=("$impl at $np ranks: run $rep failed: $(tail -n 3 "$work/$impl.$np.$rep.err" | tr '\n' ' ')")
                [ "$impl" = stormpi ] && status=1
                rm -f "$work/$impl.$np".*.out
            fi
        done
    done
done

echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

# --- tables ---
any=0
for np in $nps; do
    ls "$work"/*."$np".*.out >/dev/null 2>&1 || continue
    any=1
    echo
    echo "Collective latency at $np ranks, usec per call (best of runs; lower is better)"
    for impl in stormpi openmpi mpich; do
        cat "$work/$impl.$np".*.out 2>/dev/null | awk -v impl="$impl" '$1 == "coll" { print impl, $2, $3, $4 }'
    done | awk '
        { key = $1 " " $2 " " $3
          if (!(key in best) || $4 < best[key]) best[key] = $4
          row = $2 " " $3
          if (!(row in seen)) { seen[row] = 1; rows[++n] = row } }
        function fig(impl, row,   k) { k = impl " " row; return (k in best) ? best[k] : "" }
        function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
        function show(v) { return v == "" ? "-" : (v < 10 ? sprintf("%.2f", v) : v < 1000 ? sprintf("%.1f", v) : sprintf("%.0f", v)) }
        function lesser(a, b) { return a == "" ? b : b == "" ? a : (a < b ? a : b) }
        END {
            printf "%-21s %8s %10s %10s %10s %11s %11s\n", "collective", "bytes", "stormpi", "Open MPI", "MPICH", "storm/OMPI", "storm/best"
            for (i = 1; i <= n; i++) {
                split(rows[i], p, " ")
                s = fig("stormpi", rows[i]); o = fig("openmpi", rows[i]); m = fig("mpich", rows[i])
                printf "%-21s %8s %10s %10s %10s %11s %11s\n", p[1], p[2], show(s), show(o), show(m), ratio(s, o), ratio(s, lesser(o, m))
            }
        }'
done
if [ "$any" = 0 ]; then
    printf '%s\n' "${notes[@]}"
    echo "bench-coll.sh: nothing ran" >&2
    exit 1
fi
echo
echo "runs: $reps repetition(s), interleaved; max $max bytes; batches of ~$btime s; rank counts: $nps on $(nproc) cores; libraries: ${impls[*]}"
for impl in "${impls[@]}"; do
    echo "  $impl: $(grep -h '^# library:' "$work/$impl".*.out 2>/dev/null | head -n 1 | sed 's/^# library: //')"
done
for n in "${notes[@]}"; do echo "note: $n"; done
exit $status
