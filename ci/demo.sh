#!/usr/bin/env bash
# demo.sh - builds stormpi and runs a real MPI job: the 2-D heat-diffusion stencil in
# examples/heat2d, statically linked with libmpi.a, on 4 local ranks. With --fortran, its
# Fortran 2008 version (examples/heat2d-f08, `use mpi_f08`, built with stormfort) instead:
# the same options, the same answer.
#
# usage: ci/demo.sh [--fortran] [RANKS] [heat2d options, e.g. -n 2048 -i 2000]
set -euo pipefail
cd "$(dirname "$0")/.."

lang=c
if [ "${1:-}" = "--fortran" ]; then
    lang=fortran
    shift
fi

bash ci/setup.sh
cargo build --release -p stormpi-linux -p stormpi-bootstrap
ranks=${1:-4}
shift || true

out=target/demo
mkdir -p "$out"
if [ "$lang" = fortran ]; then
    command -v gfortran >/dev/null || { echo "demo.sh: --fortran needs gfortran" >&2; exit 1; }
    prog="$out/heat2d-f08"
    target/release/stormfort -O2 -o "$prog" examples/heat2d-f08/heat2d.f90
else
    prog="$out/heat2d"
    target/release/stormcc -O2 -o "$prog" examples/heat2d/heat2d.c -lm
fi
echo "running: stormrun -n $ranks --oversubscribe $prog $*"
target/release/stormrun -n "$ranks" --oversubscribe --timeout 300 "$prog" "$@"
