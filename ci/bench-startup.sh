#!/usr/bin/env bash
# bench-startup.sh - start-up cost of a job: the wall time of bench/startup.c (MPI_Init and
# MPI_Finalize only) from launch to exit, at 2, 8 and 32 ranks (oversubscribed on this machine),
# under stormrun, a one-node Slurm's srun --mpi=pmi2 and --mpi=pmix (stormpi), Open MPI's mpirun
# and MPICH's mpiexec, in one run; best of --reps runs each.
#
# usage: ci/bench-startup.sh [--np "2 8 32"] [--reps N]
# Needs root for the Slurm columns (the test Slurm of tests/src/slurm.rs); without it they are
# left out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
np="2 8 32"
reps=3
while [ $# -gt 0 ]; do
    case "$1" in
        --np) np=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        *) echo "usage: $0 [--np LIST] [--reps N]" >&2; exit 2 ;;
    esac
done
cargo build --release -q -p stormpi-linux -p stormpi-bootstrap -p stormpi-tests --bin bench-startup
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
target/release/stormcc -O2 -o "$out/storm" bench/startup.c
args=(--storm "$out/storm")
if command -v mpicc.openmpi >/dev/null; then
    mpicc.openmpi -O2 -o "$out/ompi" bench/startup.c && args+=(--ompi "$out/ompi")
fi
if command -v mpicc.mpich >/dev/null; then
    mpicc.mpich -O2 -o "$out/mpich" bench/startup.c && args+=(--mpich "$out/mpich")
fi
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
STORMRUN="$root/target/release/stormrun" target/release/bench-startup "${args[@]}" --np "$np" --reps "$reps"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
