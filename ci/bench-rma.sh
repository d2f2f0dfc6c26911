#!/usr/bin/env bash
# bench-rma.sh - one-sided communication latency of stormpi against Open MPI and MPICH, measured
# on this machine in the same invocation, reported as a table with ratios (bench/rma.c: put and
# get with flush and with fence, accumulate of doubles, fetch-and-op, compare-and-swap; put and
# get bandwidth as streams of 64 operations then one flush, the put_bw/get_bw rows).
#
# usage: ci/bench-rma.sh [--quick] [--tcp] [--create] [--reps N] [--max BYTES] [--scale S]
#   --quick     one repetition, 64 KiB max, iteration counts x0.2 (a smoke test, noisy numbers)
#   --tcp       every library over TCP only on the loopback interface (as ci/bench-p2p.sh --tcp)
#   --create    windows by MPI_Win_create over malloc'd memory (bench/rma.c --create), not
#               MPI_Win_allocate; stormpi with osc_sm_single_copy=on (single copy), or as
#               $BENCH_OSC_SM_SINGLE_COPY says
#   --reps N    repetitions, interleaved over the libraries; the lowest time is kept; default 3
#   --max BYTES largest transfer (default 1048576)
#   --scale S   multiply bench/rma.c's iteration counts by S (default 1)
# Libraries: stormpi (target/release/stormcc and stormrun, or $STORMCC/$STORMRUN), Open MPI
# (mpicc.openmpi, mpirun.openmpi) and MPICH (mpicc.mpich, mpiexec.mpich), 2 ranks each. A
# reference library that is missing or fails is noted and left out. Exit status 1 if stormpi's
# build or run failed, or nothing ran.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=ci/rma-table.sh
. "$root/ci/rma-table.sh"
reps=3 max=1048576 scale=1 tcp=0 create=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; max=65536; scale=0.2 ;;
        --tcp) tcp=1 ;;
        --create) create=1 ;;
        --reps) shift; reps=$1 ;;
        --max) shift; max=$1 ;;
        --scale) shift; scale=$1 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "bench-rma.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-rma.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$root/bench/rma.c"
args="-m $max -i $scale"
[ "$create" = 1 ] && args="$args --create"
run_timeout=${BENCH_TIMEOUT:-900}

find_tool() { # find_tool ENVVALUE NAME
    if [ -n "$1" ]; then echo "$1"; return; fi
    if [ -x "$root/target/release/$2" ]; then echo "$root/target/release/$2"; return; fi
    command -v "$2" 2>/dev/null || true
}
stormcc=$(find_tool "${STORMCC:-}" stormcc)
stormrun=$(find_tool "${STORMRUN:-}" stormrun)

impls=() notes=() status=0
if [ -n "$stormcc" ] && [ -n "$stormrun" ]; then
    if "$stormcc" -O2 -o "$work/rma-stormpi" "$src" >"$work/build-stormpi.log" 2>&1; then
        impls+=(stormpi)
    else
        notes+=("stormpi: build failed: $(head -n 3 "$work/build-stormpi.log" | tr '\n' ' ')")
        status=1
    fi
else
    notes+=("stormpi: skipped (stormcc/stormrun not found)")
fi
for ref in openmpi mpich; do
    if command -v "mpicc.$ref" >/dev/null && "mpicc.$ref" -O2 -o "$work/rma-$ref" "$src" >"$work/build-$ref.log" 2>&1; then
        impls+=("$ref")
    else
        notes+=("$ref: build with mpicc.$ref failed or not installed")
    fi
done

# Open MPI 4.1's default one-sided component here (osc rdm/ucx selection) crashes in
# MPI_Win_allocate on a machine without RDMA hardware; osc sm (windows on one node, loads and
# stores) with pt2pt (active messages) as the fallback is what works, so it is named.
storm_opts=() ompi_opts=(--mca osc sm,pt2pt) mpich_opts=()
transports="each library's default (shared memory); Open MPI --mca osc sm,pt2pt"
if [ "$tcp" = 1 ]; then
    tcp_if=${BENCH_TCP_IF:-lo}
    storm_opts=(--mca btl tcp,self --mca btl_tcp_if_include "$tcp_if")
    ompi_opts=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$tcp_if" --mca osc pt2pt)
    mpich_opts=(-genv UCX_TLS tcp,self -genv UCX_NET_DEVICES "$tcp_if")
    transports="TCP only, interface $tcp_if (Open MPI --mca osc pt2pt)"
fi
if [ "$create" = 1 ]; then
    # stormpi's single copy for such windows is off by default; the flag measures it
    # (BENCH_OSC_SM_SINGLE_COPY=off measures active messages instead).
    storm_opts+=(--mca osc_sm_single_copy "${BENCH_OSC_SM_SINGLE_COPY:-on}")
    transports="$transports; windows by MPI_Win_create, stormpi osc_sm_single_copy=${BENCH_OSC_SM_SINGLE_COPY:-on} (Open MPI's osc sm takes only allocated windows: pt2pt serves them)"
fi


launch() { # launch IMPL
    case "$1" in
        stormpi) "$stormrun" -n 2 "${storm_opts[@]}" "$work/rma-stormpi" $args ;;
        openmpi) mpirun.openmpi -n 2 "${ompi_opts[@]}" "$work/rma-openmpi" $args ;;
        mpich) mpiexec.mpich -n 2 "${mpich_opts[@]}" "$work/rma-mpich" $args ;;
    esac
}

declare -A failed
for rep in $(seq 1 "$reps"); do
    for impl in "${impls[@]}"; do
        [ -n "${failed[$impl]:-}" ] && continue
        echo "# rep $rep/$reps: $impl" >&2
        if ! timeout "$run_timeout" bash -c "$(declare -f launch); $(declare -p storm_opts ompi_opts mpich_opts); work='$work'; stormrun='$stormrun'; args='$args'; launch $impl" \
                >"$work/$impl.$rep.out" 2>"$work/$impl.$rep.err" </dev/null \
            || ! grep -q '^put_flush ' "$work/$impl.$rep.out"; then
            failed[$impl]=1
            notes+=("$impl: run $rep failed: $(tail -n 3 "$work/$impl.$rep.err" | tr '\n' ' ')")
            [ "$impl" = stormpi ] && status=1
            rm -f "$work/$impl".*.out
        fi
    done
done
ok=()
for impl in stormpi openmpi mpich; do
    ls "$work/$impl".*.out >/dev/null 2>&1 && ok+=("$impl")
done
if [ ${#ok[@]} -eq 0 ]; then
    printf 'note: %s\n' "${notes[@]}"
    echo "bench-rma.sh: nothing ran" >&2
    exit 1
fi

echo "One-sided latency and bandwidth (_bw: streams of 64, one flush), usec per operation with its synchronisation (best of runs; lower is better)"
rma_table stormpi:stormpi:storm openmpi:"Open MPI":OMPI mpich:MPICH:MPICH
echo
echo "runs: $reps repetition(s), interleaved; rma args: $args; transports: $transports"
for impl in "${ok[@]}"; do
    echo "  $impl: $(grep -h '^# library:' "$work/$impl".*.out | head -n 1 | sed 's/^# library: //')"
done
for n in "${notes[@]}"; do echo "note: $n"; done
exit $status
