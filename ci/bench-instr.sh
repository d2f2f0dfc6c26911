#!/usr/bin/env bash
# bench-instr.sh - instructions per small message on the shared-memory path, stormpi against
# Open MPI, counted by callgrind (noise-free: a rerun gives the same counts to within a few
# instructions, whatever else the machine does).
#
# usage: ci/bench-instr.sh [--n N] [--only stormpi|openmpi] [--hints|--dup|--rma|--coll]
#                         [--np N] [--keep DIR]
#   --keep    leave callgrind's files in DIR (for callgrind_annotate: where the counts go);
#   --hints   run on a dup of MPI_COMM_WORLD carrying the four mpi_assert_* hints (instr.c's
#             "hints" argument), to compare the matching path with and without them;
#   --dup     run on a plain dup of MPI_COMM_WORLD (the baseline for --hints)
#   --rma     count the 8-byte one-sided operations instead (bench/instr-rma.c, see below)
#   --coll    count the one-double collectives instead (bench/instr-coll.c, see below), on
#             --np ranks (default 2; all on one core)
#
# bench/instr.c is built against both libraries and run with both ranks on one core, yielding
# at once when idle (stormpi: --mca mpi_yield_when_idle 1; Open MPI the same), so every receive
# finds nothing once, yields to its peer and finds its message in the next round; callgrind
# counts only inside the MPI calls the program makes (--toggle-collect on their PMPI_ names):
#   pp    0-byte MPI_Send/MPI_Recv ping-pong: per one-way message, (both ranks' counts) / 2 / the
#         round trips, i.e. one send and one receive; and each call's share;
#   win   windows of 64 one-byte MPI_Isend (rank 0) / MPI_Irecv (rank 1) + MPI_Waitall and a
#         0-byte acknowledgement: per message at the sender and at the receiver;
#   sr    MPI_Sendrecv of one double both ways: per call and rank;
#   early 32 doubles sent before a barrier and received after it (the unexpected path): per
#         message inside the receiver's MPI_Recv;
#   wait, test, probe, persist  an exchange of one double per round (MPI_Irecv + MPI_Send +
#         MPI_Wait, the same with an MPI_Test loop, MPI_Probe + MPI_Recv, persistent requests by
#         MPI_Startall + MPI_Waitall): per round and rank.
# With --rma, bench/instr-rma.c: rank 0 under MPI_Win_lock_all on an MPI_Win_allocate window does
# 8-byte put, get, accumulate (one double), fetch-and-op and compare-and-swap (one long), each
# followed by MPI_Win_flush; per operation with its flush (the phase_* functions counted whole)
# and the MPI call's own share. Open MPI runs --mca osc sm,pt2pt (as ci/bench-rma.sh).
# With --coll, bench/instr-coll.c: Barrier and Bcast, Allreduce, Reduce, Gather, Scatter,
# Allgather, Alltoall, Reduce_scatter_block of one double; per call and rank (N/10 rounds after
# 100 warm-up ones: a round is nine calls).
# MPICH is not measured: it polls without yielding, so two ranks on one core count its spinning.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
n=2000
only=""
hints=""
keep=""
rma=0
coll=0
np=2
while [ $# -gt 0 ]; do
    case "$1" in
        --n) shift; n=$1 ;;
        --only) shift; only=$1 ;;
        --hints) hints=hints ;;
        --dup) hints=dup ;;
        --rma) rma=1 ;;
        --coll) coll=1 ;;
        --np) shift; np=$1 ;;
        --keep) shift; keep=$1 ;;
        -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
        *) echo "bench-instr.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
command -v valgrind >/dev/null || { echo "bench-instr.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-instr.XXXXXX)
trap '[ -n "$keep" ] && mkdir -p "$keep" && cp "$work"/*.[0-9]* "$keep"/; rm -rf "$work"' EXIT
stormcc=${STORMCC:-$root/target/release/stormcc}
stormrun=${STORMRUN:-$root/target/release/stormrun}

pp_toggles="--toggle-collect=PMPI_Send --toggle-collect=PMPI_Recv"
win_toggles="--toggle-collect=PMPI_Isend --toggle-collect=PMPI_Irecv --toggle-collect=PMPI_Waitall $pp_toggles"

# build LIB SOURCE: bench/SOURCE built against LIB as $work/instr.LIB; fails without Open MPI
build() {
    case $1 in
        stormpi)
            [ -x "$stormcc" ] || { echo "bench-instr.sh: build stormpi first (cargo build --release)" >&2; exit 1; }
            "$stormcc" -O2 -o "$work/instr.stormpi" "$root/bench/$2" || exit 1 ;;
        openmpi)
            mpicc.openmpi -O2 -o "$work/instr.openmpi" "$root/bench/$2" || { echo "no Open MPI" >&2; return 1; } ;;
    esac
}

# launch LIB NAME RANKS OMPI_OPTS TOGGLES ARGS...: $work/instr.LIB with ARGS on RANKS ranks, all
# on core 0 under callgrind; its files are $work/LIB.NAME.<pid> (a failed run ends the script)
launch() {
    local lib=$1 name=$2 ranks=$3 ompi_opts=$4 toggles=$5
    shift 5
    local vg="valgrind --tool=callgrind ${BENCH_VG_OPTS:-} --callgrind-out-file=$work/$lib.$name.%p $toggles"
    case $lib in
        stormpi)
            taskset -c 0 "$stormrun" -n "$ranks" --oversubscribe --bind-to none --timeout 900 --mca mpi_yield_when_idle 1 \
                $vg "$work/instr.stormpi" "$@" ;;
        openmpi)
            timeout 900 mpirun.openmpi -n "$ranks" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 $ompi_opts \
                taskset -c 0 $vg "$work/instr.openmpi" "$@" ;;
    esac > "$work/$lib.$name.log" 2>&1 || { echo "$lib $name failed:"; cat "$work/$lib.$name.log"; exit 1; }
}

# total FILE: the instructions callgrind counted in FILE
total() { sed -n 's/^totals: *\([0-9]*\).*/\1/p; s/^summary: *\([0-9]*\).*/\1/p' "$1" | head -1; }

# inclusive FILE FUNC: the inclusive count of FUNC in FILE (callgrind lists an inlined-into
# function once per source file; the largest line is the function's own total), 0 if absent
inclusive() {
    callgrind_annotate --inclusive=yes --threshold=100 --show-percs=no "$1" 2>/dev/null |
        awk -v f="$2" '{ c = $1; gsub(",", "", c) } c ~ /^[0-9]+$/ && ($0 ~ (":" f " ") || $0 ~ (":" f "$")) { if (c + 0 > m) m = c + 0 } END { print m + 0 }'
}

libs="stormpi openmpi"
[ -n "$only" ] && libs=$only

if [ "$rma" = 1 ]; then
    rma_toggles=""
    for p in put get acc fop cas; do rma_toggles="$rma_toggles --toggle-collect=phase_$p*"; done
    declare -A phase call flush
    for lib in $libs; do
        build "$lib" instr-rma.c || continue
        launch "$lib" rma 2 "--mca osc sm,pt2pt" "$rma_toggles" "$n"
        ops=$((n + 100))
        for f in "$work/$lib".rma.[0-9]*; do
            # Rank 0's file is the one with the phases in it.
            [ "$(inclusive "$f" phase_put)" -gt 0 ] || continue
            for p in put get acc fop cas; do
                case $p in
                    put) c=PMPI_Put ;; get) c=PMPI_Get ;; acc) c=PMPI_Accumulate ;;
                    fop) c=PMPI_Fetch_and_op ;; cas) c=PMPI_Compare_and_swap ;;
                esac
                phase[$lib.$p]=$(( $(inclusive "$f" "phase_$p") / ops ))
                call[$lib.$p]=$(( $(inclusive "$f" "$c") / ops ))
            done
            flush[$lib]=$(( $(inclusive "$f" PMPI_Win_flush) / (5 * ops) ))
        done
    done
    ratio() { [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "-"; }
    printf '%-44s %10s %10s %8s\n' "instructions per 8-byte operation" "stormpi" "Open MPI" "ratio"
    row() { printf '%-44s %10s %10s %8s\n' "$1" "${2:--}" "${3:--}" "$(ratio "${2:-0}" "${3:-}")"; }
    for p in put get acc fop cas; do
        case $p in
            put) name="MPI_Put + MPI_Win_flush" c=MPI_Put ;;
            get) name="MPI_Get + MPI_Win_flush" c=MPI_Get ;;
            acc) name="MPI_Accumulate + MPI_Win_flush" c=MPI_Accumulate ;;
            fop) name="MPI_Fetch_and_op + MPI_Win_flush" c=MPI_Fetch_and_op ;;
            cas) name="MPI_Compare_and_swap + MPI_Win_flush" c=MPI_Compare_and_swap ;;
        esac
        row "$name" "${phase[stormpi.$p]:-}" "${phase[openmpi.$p]:-}"
        row "  of it $c" "${call[stormpi.$p]:-}" "${call[openmpi.$p]:-}"
    done
    row "MPI_Win_flush (mean over the phases)" "${flush[stormpi]:-}" "${flush[openmpi]:-}"
    exit 0
fi
if [ "$coll" = 1 ]; then
    colls="Barrier Bcast Allreduce Reduce Gather Scatter Allgather Alltoall Reduce_scatter_block"
    coll_toggles=""
    for c in $colls; do coll_toggles="$coll_toggles --toggle-collect=PMPI_$c"; done
    rounds=$((n / 10))
    declare -A per
    for lib in $libs; do
        build "$lib" instr-coll.c || continue
        launch "$lib" coll "$np" "" "$coll_toggles" "$rounds"
        for c in $colls; do
            s=0
            for f in "$work/$lib".coll.[0-9]*; do s=$((s + $(inclusive "$f" "PMPI_$c"))); done
            per[$lib.$c]=$((s / np / (rounds + 100)))
        done
    done
    ratio() { [ "${1:-0}" -gt 0 ] && [ "${2:-0}" -gt 0 ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "-"; }
    printf '%-44s %10s %10s %8s\n' "instructions per call and rank, $np ranks" "stormpi" "Open MPI" "ratio"
    for c in $colls; do
        printf '%-44s %10s %10s %8s\n' "MPI_$c" "${per[stormpi.$c]:--}" "${per[openmpi.$c]:--}" \
            "$(ratio "${per[stormpi.$c]:-0}" "${per[openmpi.$c]:-}")"
    done
    exit 0
fi
declare -A pp_total pp_send pp_recv win_tx win_rx sr early xwait xtest xprobe xpersist
x_toggles="--toggle-collect=PMPI_Irecv --toggle-collect=PMPI_Send --toggle-collect=PMPI_Wait
    --toggle-collect=PMPI_Test --toggle-collect=PMPI_Probe --toggle-collect=PMPI_Recv
    --toggle-collect=PMPI_Startall --toggle-collect=PMPI_Waitall"
for lib in $libs; do
    build "$lib" instr.c || continue
    launch "$lib" pp 2 "" "$pp_toggles" pp "$n" $hints
    files=( "$work/$lib".pp.[0-9]* )
    sum=0; send=0; recv=0
    for f in "${files[@]}"; do
        sum=$((sum + $(total "$f")))
        send=$((send + $(inclusive "$f" PMPI_Send)))
        recv=$((recv + $(inclusive "$f" PMPI_Recv)))
    done
    msgs=$((2 * (n + 100)))
    pp_total[$lib]=$((sum / msgs)); pp_send[$lib]=$((send / msgs)); pp_recv[$lib]=$((recv / msgs))
    wn=$((n / 10))
    launch "$lib" win 2 "" "$win_toggles" win "$wn" $hints
    per=$((64 * (wn + 10)))
    for f in "$work/$lib".win.[0-9]*; do
        c=$(total "$f")
        # Rank 0 is the sender: its file has PMPI_Isend.
        if [ "$(inclusive "$f" PMPI_Isend)" -gt 0 ]; then win_tx[$lib]=$((c / per)); else win_rx[$lib]=$((c / per)); fi
    done
    launch "$lib" sr 2 "" "--toggle-collect=PMPI_Sendrecv" sr "$n" $hints
    s=0
    for f in "$work/$lib".sr.[0-9]*; do s=$((s + $(total "$f"))); done
    sr[$lib]=$((s / 2 / (n + 100)))
    launch "$lib" early 2 "" "--toggle-collect=PMPI_Recv" early "$wn" $hints
    s=0
    for f in "$work/$lib".early.[0-9]*; do s=$((s + $(total "$f"))); done
    early[$lib]=$((s / (32 * (wn + 10))))
    for m in wait test probe persist; do
        launch "$lib" "$m" 2 "" "$x_toggles" "$m" "$n" $hints
        s=0
        for f in "$work/$lib.$m".[0-9]*; do s=$((s + $(total "$f"))); done
        declare -n into=x$m
        into[$lib]=$((s / 2 / (n + 100)))
        unset -n into
    done
done

ratio() { [ -n "${2:-}" ] && [ "${2:-0}" -gt 0 ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "-"; }
printf '%-44s %10s %10s %8s\n' "instructions per message" "stormpi" "Open MPI" "ratio"
row() { printf '%-44s %10s %10s %8s\n' "$1" "${2:--}" "${3:--}" "$(ratio "${2:-0}" "${3:-}")"; }
row "0-byte one-way (MPI_Send + MPI_Recv)" "${pp_total[stormpi]:-}" "${pp_total[openmpi]:-}"
row "  of it MPI_Send" "${pp_send[stormpi]:-}" "${pp_send[openmpi]:-}"
row "  of it MPI_Recv" "${pp_recv[stormpi]:-}" "${pp_recv[openmpi]:-}"
row "1-byte windowed, sender (Isend+Waitall+ack)" "${win_tx[stormpi]:-}" "${win_tx[openmpi]:-}"
row "1-byte windowed, receiver (Irecv+Waitall+ack)" "${win_rx[stormpi]:-}" "${win_rx[openmpi]:-}"
row "MPI_Sendrecv of one double (per call, rank)" "${sr[stormpi]:-}" "${sr[openmpi]:-}"
row "MPI_Recv of a message there first (8 bytes)" "${early[stormpi]:-}" "${early[openmpi]:-}"
row "Irecv+Send+Wait of one double (per rank)" "${xwait[stormpi]:-}" "${xwait[openmpi]:-}"
row "Irecv+Send+Test loop of one double (per rank)" "${xtest[stormpi]:-}" "${xtest[openmpi]:-}"
row "Probe+Recv (+Send) of one double (per rank)" "${xprobe[stormpi]:-}" "${xprobe[openmpi]:-}"
row "Startall+Waitall, persistent (per rank)" "${xpersist[stormpi]:-}" "${xpersist[openmpi]:-}"
