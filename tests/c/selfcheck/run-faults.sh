#!/usr/bin/env bash
# run-faults.sh - show that the tests in tests/c can fail: each run preloads fault-shim.so,
# which breaks one MPI behaviour (see fault-shim.c), under MPICH, and the targeted test program
# must then fail (non-zero exit or no "OK" line; for abort: "FAIL abort" on stderr).
# Prints CAUGHT or MISSED per (fault, program); exits non-zero if anything was missed.
#
# The threads_* programs (MPI_THREAD_MULTIPLE) run at 2 ranks with a 20 s limit; for big_lock
# (one lock held across every call, blocking ones included) the expected failure is a hang that
# the limit ends, so those pairs take 20 s each.
#
# usage: tests/c/selfcheck/run-faults.sh [--np N] [--threads-only]
set -u
here=$(cd "$(dirname "$0")" && pwd)
tc=$(cd "$here/.." && pwd)
np=3
threads_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --np) shift; np=$1 ;;
        --threads-only) threads_only=1 ;;
        *) echo "usage: $0 [--np N] [--threads-only]" >&2; exit 2 ;;
    esac
    shift
done
work=$(mktemp -d /tmp/stormpi-faults.XXXXXX)
trap 'rm -rf "$work"' EXIT

pairs="
recv_corrupt:ring recv_corrupt:probe recv_corrupt:bsend
sendrecv_corrupt:allpairs replace_corrupt:sendrecv_replace
ssend_is_send:ssend
recv_tag:wildcard recv_tag:ring
get_count_off:many_requests get_count_off:persistent get_count_off:probe
allreduce_off:collectives allreduce_off:dup barrier_noop:collectives
truncate_ok:truncate errclass_other:errors errclass_other:truncate tag_ub_small:errors
dup_is_parent:dup cancel_lies:cancel testany_true:waitsome
waitall_tag:rsend waitall_tag:many_requests waitall_tag:persistent
type_size_off:hello bsend_is_ssend:bsend abort_returns:abort
"
[ $threads_only = 1 ] && pairs=""
thread_pairs="
thread_serialized:threads_init thread_serialized:threads_pingpong thread_serialized:threads_anysource
thread_serialized:threads_comm thread_serialized:threads_coll thread_serialized:threads_waittest
thread_serialized:threads_probe every_thread_main:threads_init
big_lock:threads_anysource big_lock:threads_coll big_lock:threads_waittest big_lock:threads_probe
big_lock:threads_pingpong big_lock:threads_comm
recv_corrupt:threads_pingpong sendrecv_corrupt:threads_init sendrecv_corrupt:threads_anysource
waitall_tag:threads_anysource allreduce_off:threads_coll dup_is_parent:threads_comm
get_count_off:threads_probe get_count_off:threads_waittest testany_true:threads_waittest
"

mpicc.mpich -shared -fPIC -pthread -o "$work/fault-shim.so" "$here/fault-shim.c" || exit 1
missed=0
for pair in $pairs $thread_pairs; do
    f=${pair%%:*}; prog=${pair#*:}
    case "$prog" in
        threads_*) flags=-pthread; n=2; limit=20 ;;
        *) flags=; n=$np; limit=30 ;;
    esac
    if [ ! -x "$work/$prog" ]; then
        mpicc.mpich -std=c99 -O2 -Wno-stringop-overflow $flags -o "$work/$prog" "$tc/$prog.c" || exit 1
    fi
    timeout $limit mpiexec.mpich -n "$n" env LD_PRELOAD="$work/fault-shim.so" STORMTEST_FAULT="$f" \
        "$work/$prog" >"$work/out" 2>"$work/err" </dev/null
    rc=$?
    if [ "$prog" = abort ]; then
        grep -q "FAIL abort" "$work/err" && caught=1 || caught=0
    elif [ $rc -ne 0 ] || ! grep -qx "OK $prog" "$work/out"; then
        caught=1
    else
        caught=0
    fi
    why=$(grep -h -m1 '^FAIL' "$work/err" | cut -c1-150)
    [ $rc -eq 124 ] && why="(timeout)"
    if [ $caught -eq 1 ]; then
        echo "CAUGHT $f -> $prog: ${why:-exit $rc}"
    else
        echo "MISSED $f -> $prog (exit $rc)"
        missed=$((missed + 1))
    fi
done
[ $missed -eq 0 ] && echo "all faults caught" || { echo "$missed fault(s) missed"; exit 1; }
