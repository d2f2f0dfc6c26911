#!/usr/bin/env bash
# check-symbols.sh - the built libmpi.so and libmpi.a define every function and object mpi.h
# declares (each MPI_X with its PMPI_X twin), so any MPI program links and MPICH-built binaries
# load; and they define no other global or weak symbol than those and names beginning MPI_,
# PMPI_, mpi_, pmpi_ (Fortran), the Fortran binding's common blocks (mpipriv1_, mpifcmb5_, ...) or
# stormpi_, so that nothing in them (compiler_builtins' cbrt, the
# Rust runtime) takes the place of the program's own symbols — but for libmpi.so's memory hooks
# (free, realloc, munmap, mremap, madvise: shim-linux/src/memhooks.rs), which take the place of
# the C library's on purpose so the verbs registration cache sees freed memory. Run after
# `cargo build --release -p stormpi-linux` and `target/release/stormcc --localize-library
# target/release/libmpi.a` (cargo's own libmpi.a defines the whole Rust runtime; stormcc localizes
# it before it links). With a second argument `--static`, only DIR/libmpi.a is checked (the node
# build of ci/lwk-build.sh has no shared library).
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
    if [[ $lib == *.so ]]; then table=--dyn-syms; else table=--syms; fi
    # Global, weak and unique definitions (Ndx not UND), without a version suffix. readelf rather
    # than nm: nm hands objects that embed LLVM bitcode (Rust's std) to the LLVM linker plugin,
    # which lists none of their symbols.
    have=$(readelf -W "$table" "$lib" |
        awk 'NF >= 8 && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") {
                 sub(/@.*/, "", $8); print $8 }' | sort -u)
    missing=$(comm -23 <(echo "$want") <(echo "$have"))
    extra=$(comm -13 <(echo "$want") <(echo "$have") | grep -Ev '^(MPI_|PMPI_|mpi_|pmpi_|stormpi_|mpipriv[12c]_$|mpifcmb[59]_$)' |
        { if [[ $lib == *.so ]]; then grep -Ev '^(free|realloc|munmap|mremap|madvise)$'; else cat; fi; } || true)
    if [ -n "$missing" ]; then
        echo "check-symbols: $lib lacks $(echo "$missing" | wc -l) symbols:" >&2
        echo "$missing" | head -20 >&2
        status=1
    else
        echo "check-symbols: $lib defines all $(echo "$want" | wc -l) symbols"
    fi
    if [ -n "$extra" ]; then
        echo "check-symbols: $lib defines $(echo "$extra" | wc -l) global symbols that are not MPI's" \
            "(localize it: stormcc --localize-library $lib):" >&2
        # C names (cbrt, memcpy, rust_eh_personality) first, Rust's mangled ones after.
        { echo "$extra" | grep -Ev '^(_R|_ZN)' || true; echo "$extra" | grep -E '^(_R|_ZN)' || true; } |
            head -20 >&2
        status=1
    else
        echo "check-symbols: $lib defines no other global symbols"
    fi
done
exit $status
