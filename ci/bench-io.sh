#!/usr/bin/env bash
# bench-io.sh - MPI-IO bandwidth of stormpi against Open MPI (OMPIO) and MPICH (ROMIO), measured
# on this machine in one invocation, reported as MB/s with stormpi's ratio to the best of the two.
#
# usage: ci/bench-io.sh [-n RANKS] [--dir DIR] [--bytes BYTES_PER_RANK] [--block S] [--reps R]
#                       [--own-sessions]
#   -n          ranks (default 4; oversubscribed where the machine has fewer cores)
#   --dir       where the file goes (default /dev/shm, a tmpfs; give a disk directory too)
#   --bytes     bytes per rank (default 16 MiB), --block the strided view's block (default 64 KiB)
#   --own-sessions  put stormpi's ranks (stormrun --own-sessions) and Open MPI's (`setsid -w`)
#                   in sessions of their own
# Each library's ranks run as its launcher starts them: MPICH's mpiexec gives every rank a
# session of its own, stormrun too unless the ranks outnumber the cores (then, as Open MPI's
# mpirun always does, they stay in its session, where `sched_yield` hands a core to a peer;
# with --own-sessions their idle waits sleep instead, mpi_idle_sleep).
# With the kernel's autogroup scheduling, CPU time is shared between sessions first, so on a
# machine loaded by other jobs the ranks of one session get one share between them;
# --own-sessions gives stormpi's and Open MPI's ranks MPICH's share.
# iwrite_overlap and iwrite_all_overlap are not MB/s but the percentage of a non-blocking
# (independent; collective with collective buffering) write's time hidden behind computation
# (see bench/io.c); iwrite_all_compute is MB/s of that collective write beside a computation of
# the same length for every library (10 ms per MB of the rank's bytes; ceiling: ranks x 100 MB/s).
# bench/io.c is built with stormcc (target/release or PATH), mpicc.openmpi and mpicc.mpich; a
# library whose tools are missing is left out. Each library runs R times interleaved; best kept.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
np=4; dir=/dev/shm; bytes=$((16 << 20)); block=65536; reps=3
own_session=(); stormrun_sessions=()
while [ $# -gt 0 ]; do
    case "$1" in
        -n) shift; np=$1 ;;
        --dir) shift; dir=$1 ;;
        --bytes) shift; bytes=$1 ;;
        --block) shift; block=$1 ;;
        --reps) shift; reps=$1 ;;
        --own-sessions) own_session=(setsid -w); stormrun_sessions=(--own-sessions) ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "bench-io.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-io.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$root/bench/io.c"
stormcc=${STORMCC:-$root/target/release/stormcc}; [ -x "$stormcc" ] || stormcc=$(command -v stormcc || true)
stormrun=${STORMRUN:-$root/target/release/stormrun}; [ -x "$stormrun" ] || stormrun=$(command -v stormrun || true)
impls=()
[ -n "$stormcc" ] && "$stormcc" -O2 -o "$work/io-stormpi" "$src" && impls+=(stormpi)
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$work/io-openmpi" "$src" && impls+=(openmpi)
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$work/io-mpich" "$src" && impls+=(mpich)
args=("$dir" -b "$bytes" -s "$block" -r 1)
for r in $(seq "$reps"); do
    for i in "${impls[@]}"; do
        case $i in
            stormpi) timeout 600 "$stormrun" -n "$np" --oversubscribe "${stormrun_sessions[@]}" "$work/io-stormpi" "${args[@]}" ;;
            openmpi) timeout 600 mpirun.openmpi -n "$np" --oversubscribe "${own_session[@]}" "$work/io-openmpi" "${args[@]}" ;;
            mpich) timeout 600 mpiexec.mpich -n "$np" "$work/io-mpich" "${args[@]}" ;;
        esac >>"$work/$i.out" 2>>"$work/$i.err" || echo "bench-io.sh: $i failed (see its stderr)" >&2
    done
done
printf "MPI-IO, %d ranks, %d bytes per rank, strided block %d, file in %s (MB/s, best of %d; ranks in %s)\n" "$np" "$bytes" "$block" "$dir" "$reps" "$([ ${#own_session[@]} -gt 0 ] && echo "sessions of their own" || echo "sessions as launched")"
printf "%-20s %10s %10s %10s %8s\n" pattern stormpi openmpi mpich ratio
for pat in contig_write_all contig_read_all strided_write_all strided_read_all block3d_write_all block3d_read_all iwrite_overlap iwrite_all_overlap iwrite_all_compute; do
    vals=()
    for i in stormpi openmpi mpich; do
        v=$(awk -v p="$pat" '$1==p && (!s || $2>m) {m=$2; s=1} END {if (s) print m; else print "-"}' "$work/$i.out" 2>/dev/null || echo -)
        vals+=("${v:--}")
    done
    ratio=$(awk -v s="${vals[0]}" -v o="${vals[1]}" -v m="${vals[2]}" 'BEGIN {b=o+0; if (m+0>b) b=m+0; if (s+0>0 && b>0) printf "%.2f", s/b; else print "-"}')
    printf "%-20s %10s %10s %10s %8s\n" "$pat" "${vals[@]}" "$ratio"
done
