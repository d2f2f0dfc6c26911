#!/usr/bin/env bash
# bench-lwk-rma.sh - one-sided latency on the node build (bench/rma.c linked statically against
# target/release/libstormpi_lwk.a, 2 ranks started with environment variables only, pml cm over
# the software Portals NI): windows moving data by Portals puts, gets and atomics
# (osc_portals=on) against the same windows by active messages (osc_portals=off), and Open MPI
# and MPICH (each library's default on one node; Open MPI --mca osc sm,pt2pt as in
# ci/bench-rma.sh) in the same invocation, reported with ratios.
#
# usage: ci/bench-lwk-rma.sh [--quick] [--reps N] [--max BYTES] [--scale S]
#   --quick     one repetition, 64 KiB max, iteration counts x0.2 (a smoke test)
#   --reps N    repetitions, interleaved; the lowest time is kept; default 3
#   --max BYTES largest transfer (default 1048576)
#   --scale S   multiply bench/rma.c's iteration counts by S (default 1)
# Exit status 1 if the node build's runs failed.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ci/rma-table.sh
. "$root/ci/rma-table.sh"
cd "$root"
reps=3 max=1048576 scale=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; max=65536; scale=0.2 ;;
        --reps) shift; reps=$1 ;;
        --max) shift; max=$1 ;;
        --scale) shift; scale=$1 ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "bench-lwk-rma.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-lwk-rma.XXXXXX)
trap 'rm -rf "$work"' EXIT
args="-m $max -i $scale"
run_timeout=${BENCH_TIMEOUT:-900}

cargo build --release -q -p stormpi-lwk || exit 1
cc -O2 -static -I core/include -o "$work/rma-node" bench/rma.c target/release/libstormpi_lwk.a \
    -lgcc_eh -lpthread -lm -ldl -lc || exit 1
impls=(portals am) notes=() status=0
for ref in openmpi mpich; do
    if command -v "mpicc.$ref" >/dev/null && "mpicc.$ref" -O2 -o "$work/rma-$ref" bench/rma.c >/dev/null 2>&1; then
        impls+=("$ref")
    else
        notes+=("$ref: not installed or its build failed")
    fi
done

node() { # node MODE TAG: both ranks of the node build with osc_portals=MODE
    for r in 0 1; do
        env STORMPI_RANK=$r STORMPI_SIZE=2 STORMPI_JOBID="benchlwkrma$$-$2" STORMPI_MCA_pml=cm \
            STORMPI_MCA_osc_portals="$1" "$work/rma-node" $args > "$work/node.$2.$r" 2>&1 &
    done
    wait
    cat "$work/node.$2.0"
}

launch() { # launch IMPL REP
    case "$1" in
        portals) node on "p$2" ;;
        am) node off "a$2" ;;
        openmpi) mpirun.openmpi -n 2 --mca osc sm,pt2pt "$work/rma-openmpi" $args ;;
        mpich) mpiexec.mpich -n 2 "$work/rma-mpich" $args ;;
    esac
}

declare -A failed
for rep in $(seq 1 "$reps"); do
    for impl in "${impls[@]}"; do
        [ -n "${failed[$impl]:-}" ] && continue
        echo "# rep $rep/$reps: $impl" >&2
        if ! timeout "$run_timeout" bash -c "$(declare -f node launch); work='$work'; args='$args'; launch $impl $rep" \
                >"$work/$impl.$rep.out" 2>"$work/$impl.$rep.err" </dev/null \
            || ! grep -q '^put_flush ' "$work/$impl.$rep.out"; then
            failed[$impl]=1
            notes+=("$impl: run $rep failed: $(tail -n 3 "$work/$impl.$rep.out" "$work/$impl.$rep.err" | tr '\n' ' ')")
            case "$impl" in portals|am) status=1 ;; esac
            rm -f "$work/$impl".*.out
        fi
    done
done

echo "One-sided latency on the node build, usec per operation with its synchronisation (best of runs)"
rma_table portals:portals:ptl am:AM:AM openmpi:"Open MPI":OMPI mpich:MPICH:MPICH
echo
echo "runs: $reps repetition(s), interleaved; rma args: $args; node build: pml cm, software Portals NI"
for n in "${notes[@]}"; do echo "note: $n"; done
exit $status
