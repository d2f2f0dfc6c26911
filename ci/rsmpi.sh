#!/usr/bin/env bash
# rsmpi.sh - rsmpi (the `mpi` crate 0.8.2 from crates.io) as a new user builds it: its examples
# built against stormpi through each of rsmpi's ways of finding an MPI (MPICC=mpicc, which runs
# `mpicc -show` alone, and MPI_PKG_CONFIG, which reads stormpi.pc), each run at 2 and 4 ranks.
#
# usage: ci/rsmpi.sh [--mpi stormpi|mpich] [--discovery "mpicc pkg-config"] [--np "2 4"]
#                    [--work DIR] [example ...]
#
# stormpi's release build (cargo build --release -p stormpi-linux -p stormpi-bootstrap, or the
# workspace's) is installed (ci/install.sh --no-build) into WORK/prefix; the crate is fetched with
# cargo into
# WORK (default target/rsmpi) and built there with WORK/target, which later runs reuse. An
# example passes when it exits 0 within its time limit; the script exits non-zero if any fails.
# The default list is the 56 examples rsmpi builds by default (the derive_* and complex_numbers
# ones need optional features) but for
#   spawn, spawn_multiple  MPI_Comm_spawn, which stormpi does not have yet;
#   comm_name              reads the name through a pointer to a temporary already dropped
#                          (rsmpi's Communicator::get_name): it aborts on MPICH too.
# --mpi mpich builds with MPICH's mpicc.mpich (pkg-config: mpich.pc) and runs with mpiexec.mpich,
# the reference: MPICH 4.0.2 passes all of the list but dyn_communicator ("memcpy argument
# memory ranges overlap", an assertion in its MPI_Scan on the split communicators; it passes
# on stormpi).
#
# Needs libclang (rsmpi's bindings are made by bindgen; Debian: libclang-dev, in ci/setup.sh)
# and crates.io.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
mpi=stormpi
discovery="mpicc pkg-config"
nps="2 4"
work=$root/target/rsmpi
examples=()
while [ $# -gt 0 ]; do
    case "$1" in
        --mpi) shift; mpi=$1 ;;
        --discovery) shift; discovery=$1 ;;
        --np) shift; nps=$1 ;;
        --work) shift; work=$1 ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) examples+=("$1") ;;
    esac
    shift
done
if [ ${#examples[@]} -eq 0 ]; then
    examples=(
        all_gather all_gather_bool all_gather_varcount all_to_all attributes barrier broadcast
        buffered cartesian cartesian_map complex_datatype contiguous datatype_dup
        duplicate dyn_communicator env_inq gather gather_varcount group immediate
        immediate_all_gather immediate_all_gather_varcount immediate_all_to_all immediate_barrier
        immediate_broadcast immediate_gather immediate_gather_varcount immediate_multiple_barrier
        immediate_multiple_requests immediate_multiple_test immediate_reduce immediate_scan
        immediate_scatter immediate_scatter_varcount init_with_threading pack readme ready_send
        reduce scan scatter scatter_varcount send_receive simple split structured time vector
        wait_any
    )
fi
version=0.8.2
timeout_s=60
mkdir -p "$work"
work=$(cd "$work" && pwd)
rs_target=$work/target

step() { printf '\n== %s\n' "$*"; }

case "$mpi" in
    stormpi)
        step "install stormpi into $work/prefix"
        bash "$root/ci/install.sh" --no-build "$work/prefix" >/dev/null || exit 1
        prefix=$work/prefix
        mpicc=$prefix/bin/mpicc
        pcfile=$prefix/lib/pkgconfig/stormpi.pc
        # rsmpi passes on -L and -l but no run path: the examples find libstormpi.so here.
        launch() { LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
            "$prefix/bin/stormrun" -n "$1" --oversubscribe --timeout "$timeout_s" "${@:2}"; }
        ;;
    mpich)
        mpicc=$(command -v mpicc.mpich) || { echo "mpicc.mpich not found" >&2; exit 1; }
        pcfile=mpich
        launch() { timeout "$timeout_s" mpiexec.mpich -n "$1" "${@:2}"; }
        ;;
    *) echo "unknown --mpi $mpi" >&2; exit 2 ;;
esac

step "fetch the mpi crate $version"
fetch=$work/fetch
if [ ! -f "$fetch/Cargo.toml" ]; then
    mkdir -p "$fetch/src"
    # Its own workspace: WORK may lie inside stormpi's (target/rsmpi by default).
    printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nmpi = "=%s"\n[workspace]\n' \
        "$version" >"$fetch/Cargo.toml"
    echo 'fn main() {}' >"$fetch/src/main.rs"
fi
(cd "$fetch" && cargo fetch -q) || exit 1
src=$(cd "$fetch" && cargo metadata -q --format-version 1 |
    python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "mpi"))')
crate=$work/mpi-$version
rm -rf "$crate"
cp -r "$(dirname "$src")" "$crate"
# The copy builds alone, not as a stray member of a workspace around WORK.
grep -q '^\[workspace\]' "$crate/Cargo.toml" || printf '\n[workspace]\n' >>"$crate/Cargo.toml"

failures=0
for how in $discovery; do
    step "build rsmpi's examples against $mpi, found through $how"
    case "$how" in
        mpicc) envs=(-u MPI_PKG_CONFIG -u CRAY_MPICH_DIR MPICC="$mpicc") ;;
        # MPI_PKG_CONFIG is tried first; a wrong MPICC makes sure nothing else is used.
        pkg-config) envs=(-u CRAY_MPICH_DIR MPI_PKG_CONFIG="$pcfile" MPICC=/nonexistent) ;;
        *) echo "unknown discovery $how" >&2; exit 2 ;;
    esac
    # The probe is in mpi-sys's build script, which cargo does not rerun for a changed
    # environment: clean it (and what links it) so each way is really taken.
    (cd "$crate" && CARGO_TARGET_DIR=$rs_target cargo clean -q --release -p mpi-sys -p mpi 2>/dev/null)
    if ! (cd "$crate" && env "${envs[@]}" CARGO_TARGET_DIR="$rs_target" cargo build -q --release --examples); then
        echo "FAIL build ($how)"
        failures=$((failures + 1))
        continue
    fi
    for ex in "${examples[@]}"; do
        exe=$rs_target/release/examples/$ex
        for np in $nps; do
            out=$work/$mpi.$how.$ex.$np.log
            launch "$np" "$exe" >"$out" 2>&1 </dev/null
            rc=$?
            if [ $rc -eq 0 ]; then
                echo "PASS $mpi $how $ex np=$np"
            else
                echo "FAIL $mpi $how $ex np=$np (exit $rc): $(tail -n 3 "$out" | tr '\n' '|')"
                failures=$((failures + 1))
            fi
        done
    done
done

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all passed"
