#!/usr/bin/env bash
# check-symbols.sh - the built libmpi.so and libmpi.a define every function and object mpi.h
# declares (each MPI_X with its PMPI_X twin), so any MPI program links and MPICH-built binaries
# load. Run after `cargo build --release -p stormpi-linux`. With a second argument `--static`, only
# DIR/libmpi.a is checked (the node build of ci/lwk-build.sh has no shared library).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/release}

# The names the header declares, from core/src/capi/names.rs (checked against mpi.h by
# tests/abi/check.sh).
want=$(python3 - <<'PY'
import re
src = open("core/src/capi/names.rs").read()
def block(name):
    start = src.index(f"pub const {name}")
    return re.findall(r'"([A-Za-z0-9_]+)"', src[start:src.index("];", start)])
names = [p + f for f in block("MPI_FUNCTIONS") for p in ("MPI_", "PMPI_")]
for b in ("CALLBACK_FUNCTIONS", "LIBRARY_OBJECTS", "MPICH_COMPAT_FUNCTIONS"):
    names += block(b)
print("\n".join(sorted(names)))
PY
)
status=0
libs=("$dir/libmpi.so" "$dir/libmpi.a")
[ "${2:-}" != "--static" ] || libs=("$dir/libmpi.a")
for lib in "${libs[@]}"; do
    [ -f "$lib" ] || { echo "check-symbols: $lib not built" >&2; exit 1; }
    if [[ $lib == *.so ]]; then flags=(-D --defined-only); else flags=(--defined-only); fi
    have=$(nm "${flags[@]}" --format=posix "$lib" 2>/dev/null | awk '{print $1}' | sort -u)
    missing=$(comm -23 <(echo "$want") <(echo "$have"))
    if [ -n "$missing" ]; then
        echo "check-symbols: $lib lacks $(echo "$missing" | wc -l) symbols:" >&2
        echo "$missing" | head -20 >&2
        status=1
    else
        echo "check-symbols: $lib defines all $(echo "$want" | wc -l) symbols"
    fi
done
exit $status
