#!/usr/bin/env bash
# bench-verbs-rma.sh - one-sided latency over the verbs BTL on the software verbs device
# (target/release/libverbs_shmem.so, btl=self,verbs, 2 ranks, each told it is on a node of its own
# with STORMPI_NODE so MPI_Win_allocate's window is reached through the network rather than the
# node's shared memory): windows moving data by RDMA writes, reads and verbs atomics
# (osc_verbs=on) against the same windows by active messages over the same BTL (osc_verbs=off),
# and Open MPI and MPICH (each library's default on one node; Open MPI --mca osc sm,pt2pt as in
# ci/bench-rma.sh; neither can use this device) in the same invocation, reported with ratios.
#
# usage: ci/bench-verbs-rma.sh [--quick] [--reps N] [--max BYTES] [--scale S]
#   --quick     one repetition, 64 KiB max, iteration counts x0.2 (a smoke test)
#   --reps N    repetitions, interleaved; the lowest time is kept; default 3
#   --max BYTES largest transfer (default 1048576)
#   --scale S   multiply bench/rma.c's iteration counts by S (default 1)
# Exit status 1 if stormpi's runs failed.
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
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "bench-verbs-rma.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-verbs-rma.XXXXXX)
trap 'rm -rf "$work"' EXIT
args="-m $max -i $scale"
run_timeout=${BENCH_TIMEOUT:-900}

cargo build --release -q -p stormpi-linux -p stormpi-bootstrap -p verbs-shmem || exit 1
lib="$root/target/release/libverbs_shmem.so"
target/release/stormcc -O2 -o "$work/rma-stormpi" bench/rma.c || exit 1
impls=(verbs am) notes=() status=0
for ref in openmpi mpich; do
    if command -v "mpicc.$ref" >/dev/null && "mpicc.$ref" -O2 -o "$work/rma-$ref" bench/rma.c >/dev/null 2>&1; then
        impls+=("$ref")
    else
        notes+=("$ref: not installed or its build failed")
    fi
done

stormpi() { # stormpi MODE: 2 ranks over verbs with osc_verbs=MODE, each on a node of its own
    "$root/target/release/stormrun" -n 2 --mca btl self,verbs --mca btl_verbs_library "$lib" \
        --mca osc_verbs "$1" /bin/sh -c 'STORMPI_NODE=bench-node-$PMI_RANK exec "$0" "$@"' \
        "$work/rma-stormpi" $args
}

launch() { # launch IMPL
    case "$1" in
        verbs) stormpi on ;;
        am) stormpi off ;;
        openmpi) mpirun.openmpi -n 2 --mca osc sm,pt2pt "$work/rma-openmpi" $args ;;
        mpich) mpiexec.mpich -n 2 "$work/rma-mpich" $args ;;
    esac
}

declare -A failed
for rep in $(seq 1 "$reps"); do
    for impl in "${impls[@]}"; do
        [ -n "${failed[$impl]:-}" ] && continue
        echo "# rep $rep/$reps: $impl" >&2
        if ! timeout "$run_timeout" bash -c "$(declare -f stormpi launch); root='$root'; lib='$lib'; work='$work'; args='$args'; launch $impl" \
                >"$work/$impl.$rep.out" 2>"$work/$impl.$rep.err" </dev/null \
            || ! grep -q '^put_flush ' "$work/$impl.$rep.out"; then
            failed[$impl]=1
            notes+=("$impl: run $rep failed: $(tail -n 3 "$work/$impl.$rep.out" "$work/$impl.$rep.err" | tr '\n' ' ')")
            case "$impl" in verbs|am) status=1 ;; esac
            rm -f "$work/$impl".*.out
        fi
    done
done

echo "One-sided latency over the software verbs device, usec per operation with its synchronisation (best of runs)"
rma_table verbs:verbs:vrb am:AM:AM openmpi:"Open MPI":OMPI mpich:MPICH:MPICH
echo
echo "runs: $reps repetition(s), interleaved; rma args: $args; stormpi: btl self,verbs over $lib, a node per rank"
for n in "${notes[@]}"; do echo "note: $n"; done
exit $status
