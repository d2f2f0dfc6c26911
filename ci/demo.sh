#!/usr/bin/env bash
# demo.sh - builds stormpi and runs a real MPI job: the 2-D heat-diffusion stencil in
# examples/heat2d, statically linked with libmpi.a, on 4 local ranks.
#
# usage: ci/demo.sh [RANKS] [heat2d options, e.g. -n 2048 -i 2000]
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh
cargo build --release -p stormpi-linux -p stormpi-bootstrap
ranks=${1:-4}
shift || true

out=target/demo
mkdir -p "$out"
target/release/stormcc -O2 -o "$out/heat2d" examples/heat2d/heat2d.c -lm
echo "running: stormrun -n $ranks --oversubscribe $out/heat2d $*"
target/release/stormrun -n "$ranks" --oversubscribe --timeout 300 "$out/heat2d" "$@"
