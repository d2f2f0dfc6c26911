#!/usr/bin/env bash
# mpi4py.sh - mpi4py's own test suite on stormpi, against the same suite on Debian's MPICH in
# the same run, as a new user builds it: mpi4py's source from PyPI, built with `pip install
# --no-binary mpi4py` and MPICC set to stormpi's installed mpicc (and, for the reference, to
# mpicc.mpich), then `python test/main.py` under stormrun (mpiexec.mpich) at each rank count.
#
# usage: ci/mpi4py.sh [--np "1 2 4"] [--ref-np "1"] [--work DIR] [--version V]
#
# stormpi's release build (the workspace's, or cargo build --release -p stormpi-linux -p
# stormpi-bootstrap) is installed (ci/install.sh --no-build) into WORK/prefix; the sdist and the
# two virtual environments live in WORK (default target/mpi4py) and are reused by later runs of
# the same version (delete WORK/venv-stormpi after changing the library: the extension links
# libmpi.so, so a rebuilt library is picked up at run time without it, but a new header is not).
# The extension is compiled with -O0 -g0: the suite checks behaviour, not speed, and its one large
# C file compiles much sooner so on CI's two cores.
#
# Excluded from both runs (-e): the tests of dynamic processes (spawn, dynproc, mpi4py.futures
# and mpi4py.util.pool, which spawn their workers), which the suite runs at every rank count
# with many workers; mpi4py.futures is run on its own afterwards (tests/mpi4py/futures_map.py),
# and so are the spawn tests (test/test_spawn.py, at 1 and 2 ranks).
# The run fails when stormpi shows a failing or erroring test that the reference does not show
# at the same rank count (or, for a count the reference does not run, at none of its counts).
# The reference runs at one rank by default: Debian's MPICH 4.0.2 passes the whole suite there,
# but at two ranks on this two-core machine it stopped after an error and hung (seen 2026-11-28,
# killed after 5 minutes), so its multi-rank runs are opt-in (--ref-np "1 2"); stormpi's runs at 2
# and 4 ranks are then held to the one-rank reference.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
nps="1 2 4"
ref_nps="1"
work=$root/target/mpi4py
version=4.1.2
exclude="futures|util_pool|spawn|dynproc"
while [ $# -gt 0 ]; do
    case "$1" in
        --np) shift; nps=$1 ;;
        --ref-np) shift; ref_nps=$1 ;;
        --work) shift; work=$1 ;;
        --version) shift; version=$1 ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "mpi4py.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

mkdir -p "$work"
work=$(cd "$work" && pwd)
log() { printf 'mpi4py.sh: %s\n' "$*"; }

bash "$root/ci/install.sh" --no-build "$work/prefix" >/dev/null || { log "install failed"; exit 1; }

sdist=$work/mpi4py-$version.tar.gz
if [ ! -f "$sdist" ]; then
    python3 -m pip download --quiet --no-binary :all: --no-deps -d "$work" "mpi4py==$version" ||
        { log "could not fetch mpi4py $version from PyPI"; exit 1; }
fi
src=$work/mpi4py-$version
[ -d "$src" ] || tar xzf "$sdist" -C "$work"

build() { # NAME MPICC
    local venv=$work/venv-$1
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mpi4py' 2>/dev/null; then
        log "building mpi4py $version with $2"
        rm -rf "$venv"
        python3 -m venv "$venv" &&
            CFLAGS="-O0 -g0" MPICC=$2 "$venv/bin/pip" install --quiet --no-cache-dir "$sdist" \
                >"$work/build-$1.log" 2>&1 ||
            { log "building against $1 failed:"; tail -20 "$work/build-$1.log"; exit 1; }
    fi
}
build stormpi "$work/prefix/bin/mpicc"
build mpich mpicc.mpich

# Runs the suite: NAME NP LAUNCHER...; the log is WORK/NAME-npNP.log, the failing tests' ids
# WORK/NAME-npNP.failed.
suite() {
    local name=$1 np=$2
    shift 2
    local out=$work/$name-np$np.log
    (cd "$src" && timeout 900 "$@" "$work/venv-$name/bin/python" test/main.py -e "$exclude") \
        >"$out" 2>&1
    echo $? >"$out.rc"
    grep -E '^(ERROR|FAIL): ' "$out" | sed -E 's/^[A-Z]+: [^ ]+ \(([^)]*)\).*/\1/' | sort -u \
        >"$work/$name-np$np.failed"
}

summary() { # LOG: "ran N, failures F, errors E, skipped S"
    local ran res
    ran=$(grep -Eo '^Ran [0-9]+' "$1" | awk '{s+=$2} END {print s+0}')
    res=$(grep -E '^(OK|FAILED)' "$1" | head -1)
    printf 'ran %s (per rank), %s' "$((ran / ${2:-1}))" "${res:-no result}"
}

status=0
for np in $nps; do
    log "stormpi, $np rank(s)"
    suite stormpi "$np" env MPIEXEC_TIMEOUT=850 "$work/prefix/bin/stormrun" --oversubscribe -n "$np"
done
for np in $ref_nps; do
    log "MPICH, $np rank(s)"
    suite mpich "$np" mpiexec.mpich -n "$np"
done

printf '\n%-4s %-60s %s\n' np "stormpi" "MPICH"
for np in $nps; do
    ref="(not run)"
    [ -f "$work/mpich-np$np.log" ] && case " $ref_nps " in *" $np "*) ref=$(summary "$work/mpich-np$np.log" "$np") ;; esac
    printf '%-4s %-60s %s\n' "$np" "$(summary "$work/stormpi-np$np.log" "$np")" "$ref"
done

for np in $nps; do
    case " $ref_nps " in
        *" $np "*) cat "$work/mpich-np$np.failed" ;;
        *) for r in $ref_nps; do cat "$work/mpich-np$r.failed"; done ;;
    esac | sort -u >"$work/ref-np$np.failed"
    extra=$(comm -23 "$work/stormpi-np$np.failed" "$work/ref-np$np.failed")
    rc=$(cat "$work/stormpi-np$np.log.rc")
    if [ -n "$extra" ]; then
        status=1
        log "at $np rank(s) stormpi fails where MPICH does not:"
        printf '    %s\n' $extra
    elif [ "$rc" != 0 ] && [ ! -s "$work/stormpi-np$np.failed" ]; then
        status=1
        log "at $np rank(s) the stormpi run ended with status $rc and no test result:"
        tail -15 "$work/stormpi-np$np.log"
    fi
done
[ $status = 0 ] && log "stormpi fails no test that MPICH passes"

# mpi4py.futures on its own (its workers come from MPI_Comm_spawn): an MPIPoolExecutor of two
# workers maps a function over 100 inputs (tests/mpi4py/futures_map.py).
log "stormpi, mpi4py.futures: MPIPoolExecutor map over 100 inputs"
if timeout 300 env MPIEXEC_TIMEOUT=240 "$work/prefix/bin/stormrun" -n 1 \
    "$work/venv-stormpi/bin/python" "$root/tests/mpi4py/futures_map.py" >"$work/futures.log" 2>&1 &&
    grep -qx "OK futures_map" "$work/futures.log"; then
    log "mpi4py.futures: OK"
else
    status=1
    log "mpi4py.futures failed:"
    tail -15 "$work/futures.log"
fi

# mpi4py's own spawn tests (test/test_spawn.py) on their own at 1 and 2 ranks: each spawns
# children again and again with the default dpm_max_procs (a finished child job's process slots
# are given back at disconnect and reused).
for np in 1 2; do
    log "stormpi, test_spawn at $np rank(s)"
    if timeout 300 env MPIEXEC_TIMEOUT=240 "$work/prefix/bin/stormrun" --oversubscribe -n "$np" \
        "$work/venv-stormpi/bin/python" "$src/test/test_spawn.py" >"$work/spawn-np$np.log" 2>&1 &&
        grep -qx "OK" "$work/spawn-np$np.log"; then
        log "test_spawn at $np rank(s): $(grep -E '^Ran ' "$work/spawn-np$np.log" | head -1), OK"
    else
        status=1
        log "test_spawn at $np rank(s) failed:"
        tail -15 "$work/spawn-np$np.log"
    fi
done
exit $status
