#!/usr/bin/env bash
# bench-instr-lwk.sh - instructions per one-way 0-byte message on the node build: MPI over the
# Portals MTL (pml cm, the offload path) against raw Portals puts on the same software NI,
# counted by callgrind (noise-free: a rerun gives the same counts to within a few instructions,
# whatever else the machine does — the VM's wall-clock speed modes cannot show a difference of a
# few hundred instructions, this can).
#
# usage: ci/bench-instr-lwk.sh [--n N] [--keep DIR]
#   --n N       round trips of each ping-pong (default 2000; MPI runs N + 100 with its warm-up)
#   --keep DIR  keep the callgrind files and the MPI program there (for callgrind_annotate)
#   BENCH_VG_OPTS (environment): more callgrind options, e.g. --dump-instr=yes
#
# Both programs are started with environment variables only (STORMPI_RANK/SIZE/JOBID, as
# ci/bench-lwk.sh starts them), both ranks pinned to one core (taskset -c 0), waits yielding at
# once (MPI: mpi_yield_when_idle 1; the NI's own waits yield at once when ranks outnumber cores),
# so every receive finds nothing once, yields to its peer and finds its message in the next
# round:
#   raw      lwk-ptl-pingpong --instr N: a put into a persistent entry noticed through its
#            counting event; counted inside pp_put (PtlPut) and pp_wait (PtlCTWait);
#   offload  bench/instr.c pp, linked statically against the node library, pml cm; counted
#            inside PMPI_Send and PMPI_Recv.
# Per one-way message = (rank 0's + rank 1's count) / 2 / round trips: one send at one side and
# one receive at the other. Raw is PtlPut + PtlCTWait; offload is MPI_Send + the receive's wait
# (Inside::wait_blocking) — issue 17's accounting: posting the next receive overlaps the peer's
# work in a ping-pong, so it is printed apart, with the whole calls. Below them, the calls into
# the NI (Portals functions, inclusive) per message, and what is MPI's own (the rest). Last, the
# windowed 1-byte stream of bench/instr.c's `win` mode (64 MPI_Isend at rank 0, 64 MPI_Irecv at
# rank 1, MPI_Waitall, a 0-byte answer; N/10 windows after 10 warm-up ones): per message at each;
# then its `sr` mode (MPI_Sendrecv of one double both ways, per call and rank), `early` mode
# (32 doubles sent before a barrier and received after it, per message inside MPI_Recv) and the
# exchanges of one double per round of its `wait`, `test`, `probe` and `persist` modes (per
# round and rank).
set -euo pipefail
cd "$(dirname "$0")/.."

n=2000
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --n) n=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "bench-instr-lwk.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
command -v valgrind > /dev/null || { echo "bench-instr-lwk.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }

# Two builds: with --bin, cargo would build only that binary, not the node library.
cargo build --release -q -p stormpi-lwk
cargo build --release -q -p portals4-shmem --bin lwk-ptl-pingpong
work=$(mktemp -d /tmp/stormpi-instr-lwk.XXXXXX)
# The NI's segments are named after the job (stormpi-<job>-ptl-<rank>); ranks started without
# a launcher leave theirs.
trap 'rm -rf "$work" /dev/shm/stormpi-instrlwk$$-*' EXIT
cc -O2 -static -I core/include -o "$work/instr" bench/instr.c target/release/libstormpi_lwk.a \
    -lgcc_eh -lpthread -lm -ldl -lc 2> "$work/cc.log" || { cat "$work/cc.log"; exit 1; }

# run NAME TOGGLES -- PROGRAM ARGS...: both ranks under callgrind on core 0; files $work/NAME.<rank>
run() {
    local name=$1 toggles=$2 pids=() r
    shift 3
    for r in 0 1; do
        env STORMPI_RANK=$r STORMPI_SIZE=2 STORMPI_JOBID="instrlwk$$-$name" \
            STORMPI_MCA_pml=cm STORMPI_MCA_mpi_yield_when_idle=1 \
            taskset -c 0 timeout 600 valgrind --tool=callgrind ${BENCH_VG_OPTS:-} --callgrind-out-file="$work/$name.$r" \
            $toggles "$@" > "$work/$name.log.$r" 2>&1 &
        pids+=($!)
    done
    for r in "${pids[@]}"; do
        wait "$r" || { echo "bench-instr-lwk.sh: $name failed:" >&2; cat "$work/$name".log.* >&2; exit 1; }
    done
}

run raw "--toggle-collect=*pp_put* --toggle-collect=*pp_wait*" -- \
    target/release/lwk-ptl-pingpong --instr "$n"
run offload "--toggle-collect=PMPI_Send --toggle-collect=PMPI_Recv" -- "$work/instr" pp "$n"
wn=$((n / 10))
run win "--toggle-collect=PMPI_Isend --toggle-collect=PMPI_Irecv --toggle-collect=PMPI_Waitall
    --toggle-collect=PMPI_Send --toggle-collect=PMPI_Recv" -- "$work/instr" win "$wn"
run sr "--toggle-collect=PMPI_Sendrecv" -- "$work/instr" sr "$n"
run early "--toggle-collect=PMPI_Recv" -- "$work/instr" early "$wn"
x_toggles="--toggle-collect=PMPI_Irecv --toggle-collect=PMPI_Send --toggle-collect=PMPI_Wait
    --toggle-collect=PMPI_Test --toggle-collect=PMPI_Probe --toggle-collect=PMPI_Recv
    --toggle-collect=PMPI_Startall --toggle-collect=PMPI_Waitall"
for m in wait test probe persist; do
    run "$m" "$x_toggles" -- "$work/instr" "$m" "$n"
done

# inclusive FILE FUNC: the inclusive count of FUNC in FILE (callgrind lists an inlined-into
# function once per source file; the largest line is the function's own total), 0 if absent
inclusive() {
    callgrind_annotate --inclusive=yes --threshold=100 "$1" 2> /dev/null |
        awk -v f="$2" '{ c = $1; gsub(",", "", c) } /%\) / && ($0 ~ (":" f " ") || $0 ~ (":" f "$")) { if (c + 0 > m) m = c + 0 } END { print m + 0 }'
}

# per NAME FUNC MSGS: FUNC's inclusive count over both ranks of NAME, per message (one decimal)
per() {
    local s=0 r
    for r in 0 1; do s=$((s + $(inclusive "$work/$1.$r" "$2"))); done
    awk -v s="$s" -v m="$3" 'BEGIN { printf "%.1f", s / m }'
}

raw_msgs=$((2 * n))
mpi_msgs=$((2 * (n + 100)))
# f1 EXPR: an awk expression's value with one decimal
f1() { awk "BEGIN { printf \"%.1f\", $1 }"; }
put=$(per raw PtlPut "$raw_msgs")
ctwait=$(per raw PtlCTWait "$raw_msgs")
raw=$(f1 "$put + $ctwait")
send=$(per offload PMPI_Send "$mpi_msgs")
recv=$(per offload PMPI_Recv "$mpi_msgs")
wait=$(per offload ':wait_blocking' "$mpi_msgs")
post=$(f1 "$recv - $wait")
off=$(f1 "$send + $wait")
all=$(f1 "$send + $recv")
echo "instructions per one-way 0-byte message (callgrind, both ranks on one core, yielding at once)"
row() { printf '%-52s %8s\n' "$1" "$2"; }
row "raw Portals: PtlPut + PtlCTWait" "$raw"
row "  PtlPut" "$put"
row "  PtlCTWait" "$ctwait"
row "offload: MPI_Send + the receive's wait" "$off"
row "  MPI_Send" "$send"
row "  the receive's wait (Inside::wait_blocking)" "$wait"
row "difference (offload - raw)" "$(f1 "$off - $raw")"
row "ratio (offload / raw)" "$(awk -v a="$off" -v b="$raw" 'BEGIN { printf "%.2f", a / b }')"
# Posting the next receive overlaps the peer's work in a ping-pong (it is not on the one-way
# path), so the accounting above leaves it out; the whole calls are here too.
row "posting the receive (MPI_Recv before its wait)" "$post"
row "whole calls: MPI_Send + MPI_Recv" "$all"
row "  difference against raw" "$(f1 "$all - $raw")"
echo "in the NI (inclusive, per message; raw's share is its PtlPut and PtlCTWait):"
ni=0
for f in PtlPut PtlEQGet PtlMEAppend PtlGet PtlMEUnlink; do
    v=$(per offload "$f" "$mpi_msgs")
    row "  $f" "$v"
    ni=$(f1 "$ni + $v")
done
row "MPI's own (whole calls less the NI)" "$(f1 "$all - $ni")"
# total FILE: everything callgrind counted in FILE
total() { sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$1" | head -1; }
per_win=$((64 * (wn + 10)))
row "1-byte windowed, sender (Isend+Waitall+answer)" "$(f1 "$(total "$work/win.0") / $per_win")"
row "1-byte windowed, receiver (Irecv+Waitall+answer)" "$(f1 "$(total "$work/win.1") / $per_win")"
row "MPI_Sendrecv of one double (per call, rank)" "$(f1 "($(total "$work/sr.0") + $(total "$work/sr.1")) / 2 / ($n + 100)")"
row "MPI_Recv of a message there first (8 bytes)" "$(f1 "$(total "$work/early.1") / (32 * ($wn + 10))")"
for m in wait test probe persist; do
    row "exchange of one double: $m (per round, rank)" "$(f1 "($(total "$work/$m.0") + $(total "$work/$m.1")) / 2 / ($n + 100)")"
done
if [ -n "$keep" ]; then
    mkdir -p "$keep"
    cp "$work"/raw.[01] "$work"/offload.[01] "$work/instr" "$keep/"
    echo "callgrind files in $keep (callgrind_annotate --inclusive=yes $keep/offload.0)"
fi
