#!/usr/bin/env bash
# bench-p2p.sh - point-to-point latency and bandwidth of stormpi against Open MPI and MPICH,
# measured on this machine in the same invocation, reported as a table with ratios.
#
# usage: ci/bench-p2p.sh [--quick] [--tcp] [--reps N] [--min BYTES] [--max BYTES] [--scale S] [--threads "T..."] [--hints] [--cma]
#                        [--queue "DEPTH..."]
#   --queue "64 1024"
#               instead of the tables above, bench/p2p.c's deep-queue mode (-q DEPTH) for each
#               DEPTH, each library once on MPI_COMM_WORLD and once with --hints: messages/s with
#               DEPTH receives of distinct tags posted first (messages in reverse tag order) and
#               with DEPTH messages queued unexpected first; runs interleaved per repetition,
#               best of the repetitions; the last column is stormpi with hints / without
#   --hints     bench/p2p.c --hints: every library runs on a dup of MPI_COMM_WORLD carrying the four
#               mpi_assert_* hints (not with --threads)
#   --quick     one repetition, 1 MiB max, iteration counts x0.2 (a smoke test, noisy numbers)
#   --threads "1 2 4"
#               instead of the tables above, bench/p2p.c's multi-threaded mode (-t T,
#               MPI_THREAD_MULTIPLE) for each T: T thread pairs between the 2 ranks, each pair on
#               its own communicator, all at once; one-way latency while all pairs run for
#               0 B .. --max (default here 4096) and the message rate of all pairs together
#               (windows of 64 messages of 1 .. 32 B); runs interleaved per repetition over T and
#               library, best of the repetitions. A library that does not provide
#               MPI_THREAD_MULTIPLE (p2p exits with status 3 and says so) gets "no MULTIPLE" in
#               its column and the others go on; that is a note, not a failure
#   --tcp       every library over TCP only, on the loopback interface (one interface, so
#               nobody stripes over whatever other interfaces happen to be up; $BENCH_TCP_IF
#               names another): stormpi with --mca btl tcp,self; Open MPI with --mca pml ob1
#               --mca btl tcp,self; MPICH (Debian's is ch4:ucx, whose default on one node is
#               shared memory) with UCX_TLS=tcp,self, UCX's TCP transport
#   --reps N    repetitions; the runs of the three libraries are interleaved per repetition and
#               the best figure of each is kept (lowest latency, highest bandwidth); default 3
#   --min BYTES smallest message size (bench/p2p.c -s; default 0 B for latency, 1 B for bandwidth)
#   --max BYTES largest message size (default 4194304)
#   --cma       also bench/cma_raw.c, built with cc: the bandwidth of process_vm_readv itself
#               between two processes at the same sizes (from --min, default 1 MiB), run
#               interleaved with the libraries, best of the repetitions; a third table puts
#               stormpi's bandwidth beside it (the ceiling of a single-copy transport).
#               Single copy in sm for large messages: --min 65536 --max 16777216 --cma
#   --scale S   multiply bench/p2p.c's iteration counts by S (default 1)
#
# bench/p2p.c is built three ways:
#   stormpi   $STORMCC (default target/release/stormcc, else stormcc on PATH), run with
#             $STORMRUN -n 2 (default target/release/stormrun, else stormrun on PATH);
#             skipped, with a message, when those tools are not there yet;
#   Open MPI  mpicc.openmpi, run with mpirun.openmpi -n 2 (root is allowed through the
#             OMPI_ALLOW_RUN_AS_ROOT variables);
#   MPICH     mpicc.mpich, run with mpiexec.mpich -n 2.
# Exit status: 1 if stormpi's tools exist but its build or run failed, or if nothing could run;
# a reference library that fails is reported and left out.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
max=4194304
scale=1
tcp=0
threads=""
max_set=0
hints=""
queue=""
min=""
cma=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; max=1048576; scale=0.2 ;;
        --tcp) tcp=1 ;;
        --reps) shift; reps=$1 ;;
        --min) shift; min=$1 ;;
        --max) shift; max=$1; max_set=1 ;;
        --cma) cma=1 ;;
        --scale) shift; scale=$1 ;;
        --threads) shift; threads=$1 ;;
        --hints) hints=" --hints" ;;
        --queue) shift; queue=$1 ;;
        -h|--help) sed -n '2,49p' "$0"; exit 0 ;;
        *) echo "bench-p2p.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$root/bench/p2p.c"
args="-m $max -i $scale$hints"
[ -n "$min" ] && args="-s $min $args"
run_timeout=${BENCH_TIMEOUT:-900}

find_tool() { # find_tool ENVVALUE NAME
    if [ -n "$1" ]; then echo "$1"; return; fi
    if [ -x "$root/target/release/$2" ]; then echo "$root/target/release/$2"; return; fi
    command -v "$2" 2>/dev/null || true
}
stormcc=$(find_tool "${STORMCC:-}" stormcc)
stormrun=$(find_tool "${STORMRUN:-}" stormrun)

impls=()
status=0
notes=()

# --- build ---
if [ -n "$stormcc" ] && [ -n "$stormrun" ] && [ -x "$stormcc" ] && [ -x "$stormrun" ]; then
    if "$stormcc" -O2 -o "$work/p2p-stormpi" "$src" >"$work/build-stormpi.log" 2>&1; then
        impls+=(stormpi)
    else
        notes+=("stormpi: build with $stormcc failed: $(head -n 3 "$work/build-stormpi.log" | tr '\n' ' ')")
        status=1
    fi
else
    notes+=("stormpi: skipped (stormcc/stormrun not found; set STORMCC and STORMRUN or build target/release)")
fi
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$work/p2p-openmpi" "$src" >"$work/build-openmpi.log" 2>&1; then
    impls+=(openmpi)
else
    notes+=("Open MPI: build with mpicc.openmpi failed or not installed")
fi
if command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$work/p2p-mpich" "$src" >"$work/build-mpich.log" 2>&1; then
    impls+=(mpich)
else
    notes+=("MPICH: build with mpicc.mpich failed or not installed")
fi
if [ "$cma" = 1 ]; then
    if ! cc -O2 -o "$work/cma_raw" "$root/bench/cma_raw.c" >"$work/build-cma.log" 2>&1; then
        notes+=("cma_raw: build failed: $(head -n 3 "$work/build-cma.log" | tr '\n' ' ')")
        cma=0
    fi
fi

# Transport selection per library (empty: each library's default, shared memory on one node).
storm_opts=() ompi_opts=() mpich_opts=()
transports="each library's default (shared memory)"
if [ "$tcp" = 1 ]; then
    tcp_if=${BENCH_TCP_IF:-lo}
    storm_opts=(--mca btl tcp,self --mca btl_tcp_if_include "$tcp_if")
    ompi_opts=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$tcp_if")
    mpich_opts=(-genv UCX_TLS tcp,self -genv UCX_NET_DEVICES "$tcp_if")
    transports="TCP only, interface $tcp_if: stormpi ${storm_opts[*]}; Open MPI ${ompi_opts[*]}; MPICH (ch4:ucx) UCX_TLS=tcp,self UCX_NET_DEVICES=$tcp_if"
fi

launch() { # launch IMPL
    case "$1" in
        stormpi) "$stormrun" -n 2 "${storm_opts[@]}" "$work/p2p-stormpi" $args ;;
        openmpi) mpirun.openmpi -n 2 "${ompi_opts[@]}" "$work/p2p-openmpi" $args ;;
        mpich) mpiexec.mpich -n 2 "${mpich_opts[@]}" "$work/p2p-mpich" $args ;;
    esac
}

# --- the multi-threaded mode (--threads): its own build (-pthread), runs and tables ---
if [ -n "$threads" ]; then
    targs="-i $scale"
    [ "$max_set" = 1 ] && targs="$targs -m $max"
    timpls=()
    for impl in "${impls[@]}"; do
        case "$impl" in
            stormpi) cc=$stormcc ;;
            openmpi) cc=mpicc.openmpi ;;
            mpich) cc=mpicc.mpich ;;
        esac
        if "$cc" -O2 -pthread -o "$work/p2pt-$impl" "$src" >"$work/tbuild-$impl.log" 2>&1; then
            timpls+=("$impl")
        else
            notes+=("$impl: build with -pthread failed: $(head -n 3 "$work/tbuild-$impl.log" | tr '\n' ' ')")
            [ "$impl" = stormpi ] && status=1
        fi
    done
    tlaunch() { # tlaunch IMPL T
        case "$1" in
            stormpi) "$stormrun" -n 2 "${storm_opts[@]}" "$work/p2pt-stormpi" -t "$2" $targs ;;
            openmpi) mpirun.openmpi -n 2 "${ompi_opts[@]}" "$work/p2pt-openmpi" -t "$2" $targs ;;
            mpich) mpiexec.mpich -n 2 "${mpich_opts[@]}" "$work/p2pt-mpich" -t "$2" $targs ;;
        esac
    }
    declare -A tfailed nomt
    for rep in $(seq 1 "$reps"); do
        for t in $threads; do
            for impl in "${timpls[@]}"; do
                [ -n "${tfailed[$impl]:-}" ] || [ -n "${nomt[$impl]:-}" ] && continue
                out="$work/t.$impl.$t.$rep.out"
                echo "# rep $rep/$reps: $impl -t $t" >&2
                timeout "$run_timeout" bash -c "$(declare -f tlaunch); $(declare -p storm_opts ompi_opts mpich_opts); work='$work'; stormrun='$stormrun'; targs='$targs'; tlaunch $impl $t" \
                    >"$out" 2>"$work/t.$impl.$t.$rep.err" </dev/null
                rc=$?
                if grep -q '^# p2p -t: MPI_THREAD_MULTIPLE not provided' "$out"; then
                    nomt[$impl]=1
                    notes+=("$impl: $(sed -n 's/^# p2p -t: //p' "$out" | head -n 1): no multi-threaded figures")
                    rm -f "$out"
                elif [ $rc -ne 0 ] || ! grep -q '^tlat \|^trate ' "$out"; then
                    tfailed[$impl]=1
                    notes+=("$impl: -t $t run $rep failed (exit $rc): $(tail -n 3 "$work/t.$impl.$t.$rep.err" | tr '\n' ' ')")
                    [ "$impl" = stormpi ] && status=1
                    rm -f "$work/t.$impl".*.out
                fi
            done
        done
    done
    ok=()
    for impl in stormpi openmpi mpich; do
        if ls "$work/t.$impl".*.out >/dev/null 2>&1; then ok+=("$impl"); fi
    done
    if [ ${#ok[@]} -eq 0 ]; then
        printf '%s\n' "${notes[@]}"
        echo "bench-p2p.sh: nothing ran" >&2
        exit 1
    fi
    # best figure per (kind, impl, T, size): min latency, max message rate
    for impl in stormpi openmpi mpich; do
        cat "$work/t.$impl".*.out 2>/dev/null | awk -v impl="$impl" '$1 == "tlat" || $1 == "trate" { print $1, impl, $2, $3, $4 }'
    done | awk -v storm_nomt="${nomt[stormpi]:-}" '
        { key = $1 " " $2 " " $3 " " $4
          if (!(key in best) || ($1 == "tlat" && $5 < best[key]) || ($1 == "trate" && $5 > best[key])) best[key] = $5
          rows[$1 " " $3 " " $4] = 1 }
        function fig(kind, impl, t, size,   k) { k = kind " " impl " " t " " size; return (k in best) ? best[k] : "" }
        function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
        function show(v, fmt) { return v == "" ? "-" : sprintf(fmt, v) }
        END {
            for (pass = 0; pass < 2; pass++) {
                kind = pass == 0 ? "tlat" : "trate"
                if (pass == 0) print "Multi-threaded latency, one-way, usec: T thread pairs at once, each on its own communicator; time of a round trip / 2 while all pairs run (best of runs; lower is better)"
                else           print "\nMulti-threaded message rate, messages/s, all T pairs together (best of runs; higher is better)"
                printf "%4s %8s %12s %12s %12s %12s %12s\n", "T", "bytes", "stormpi", "Open MPI", "MPICH", "storm/OMPI", "storm/MPICH"
                n = 0
                for (k in rows) { split(k, p, " "); if (p[1] == kind) { lt[++n] = p[2] + 0; ls[n] = p[3] + 0 } }
                for (i = 2; i <= n; i++) {
                    vt = lt[i]; vs = ls[i]; j = i - 1
                    while (j > 0 && (lt[j] > vt || (lt[j] == vt && ls[j] > vs))) { lt[j + 1] = lt[j]; ls[j + 1] = ls[j]; j-- }
                    lt[j + 1] = vt; ls[j + 1] = vs
                }
                fmt = kind == "tlat" ? "%.3f" : "%.0f"
                for (i = 1; i <= n; i++) {
                    s = fig(kind, "stormpi", lt[i], ls[i]); o = fig(kind, "openmpi", lt[i], ls[i]); m = fig(kind, "mpich", lt[i], ls[i])
                    sc = (s == "" && storm_nomt != "") ? "no MULTIPLE" : show(s, fmt)
                    printf "%4d %8d %12s %12s %12s %12s %12s\n", lt[i], ls[i], sc, show(o, fmt), show(m, fmt), ratio(s, o), ratio(s, m)
                }
                delete lt; delete ls
            }
        }'
    echo
    echo "runs: $reps repetition(s), interleaved over T and library; threads per rank: $threads; p2p args: $targs; libraries: ${ok[*]}"
    echo "transports: $transports"
    for impl in "${ok[@]}"; do
        echo "  $impl: $(grep -h '^# library:' "$work/t.$impl".*.out | head -n 1 | sed 's/^# library: //')"
    done
    for n in "${notes[@]}"; do echo "note: $n"; done
    exit $status
fi

# --- the deep-queue mode (--queue): its own runs and table ---
if [ -n "$queue" ]; then
    declare -A qfailed
    for rep in $(seq 1 "$reps"); do
        for d in $queue; do
            for h in "" " --hints"; do
                for impl in "${impls[@]}"; do
                    [ -n "${qfailed[$impl]:-}" ] && continue
                    tag=$([ -n "$h" ] && echo hints || echo world)
                    out="$work/q.$impl.$tag.$d.$rep.out"
                    echo "# rep $rep/$reps: $impl -q $d$h" >&2
                    if ! timeout "$run_timeout" bash -c "$(declare -f launch); $(declare -p storm_opts ompi_opts mpich_opts); work='$work'; stormrun='$stormrun'; args='-q $d -i $scale$h'; launch $impl" \
                            >"$out" 2>"${out%.out}.err" </dev/null || ! grep -q '^qpost ' "$out"; then
                        qfailed[$impl]=1
                        notes+=("$impl: -q $d$h run $rep failed: $(tail -n 3 "${out%.out}.err" | tr '\n' ' ')")
                        [ "$impl" = stormpi ] && status=1
                        rm -f "$work/q.$impl".*.out
                    fi
                done
            done
        done
    done
    ok=()
    for impl in stormpi openmpi mpich; do
        if ls "$work/q.$impl".*.out >/dev/null 2>&1; then ok+=("$impl"); fi
    done
    if [ ${#ok[@]} -eq 0 ]; then
        printf '%s\n' "${notes[@]}"
        echo "bench-p2p.sh: nothing ran" >&2
        exit 1
    fi
    # best rate per (kind, impl, hints, depth)
    for f in "$work"/q.*.out; do
        [ -e "$f" ] || continue
        b=$(basename "$f"); impl=$(echo "$b" | cut -d. -f2); h=$(echo "$b" | cut -d. -f3)
        awk -v impl="$impl" -v h="$h" '$1 == "qpost" || $1 == "qunex" { print $1, impl, h, $2, $3 }' "$f"
    done | awk '
        { key = $1 " " $2 " " $3 " " $4
          if (!(key in best) || $5 > best[key]) best[key] = $5
          rows[$4 " " $1 " " $3] = 1 }
        function fig(kind, impl, h, d,   k) { k = kind " " impl " " h " " d; return (k in best) ? best[k] : "" }
        function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
        function show(v) { return v == "" ? "-" : sprintf("%.0f", v) }
        END {
            print "Deep queues, messages/s (best of runs; higher is better): qpost = receives posted first, qunex = messages queued first"
            printf "%6s %6s %6s %11s %11s %11s %11s %12s %12s\n", "depth", "kind", "hints", "stormpi", "Open MPI", "MPICH", "storm/OMPI", "storm/MPICH", "storm h/no-h"
            n = 0
            for (k in rows) { split(k, p, " "); ld[++n] = p[1] + 0; lk[n] = p[2]; lh[n] = p[3] }
            for (i = 2; i <= n; i++) {
                vd = ld[i]; vk = lk[i]; vh = lh[i]; j = i - 1
                while (j > 0 && (ld[j] > vd || (ld[j] == vd && (lk[j] > vk || (lk[j] == vk && lh[j] < vh))))) { ld[j + 1] = ld[j]; lk[j + 1] = lk[j]; lh[j + 1] = lh[j]; j-- }
                ld[j + 1] = vd; lk[j + 1] = vk; lh[j + 1] = vh
            }
            for (i = 1; i <= n; i++) {
                s = fig(lk[i], "stormpi", lh[i], ld[i]); o = fig(lk[i], "openmpi", lh[i], ld[i]); m = fig(lk[i], "mpich", lh[i], ld[i])
                sp = lh[i] == "hints" ? ratio(s, fig(lk[i], "stormpi", "world", ld[i])) : ""
                printf "%6d %6s %6s %11s %11s %11s %11s %12s %12s\n", ld[i], lk[i], lh[i] == "hints" ? "yes" : "no", show(s), show(o), show(m), ratio(s, o), ratio(s, m), sp
            }
        }'
    echo
    echo "runs: $reps repetition(s), interleaved over depth, hints and library; depths: $queue; iteration scale $scale; libraries: ${ok[*]}"
    echo "transports: $transports"
    for impl in "${ok[@]}"; do
        echo "  $impl: $(grep -h '^# library:' "$work/q.$impl".*.out | head -n 1 | sed 's/^# library: //')"
    done
    for n in "${notes[@]}"; do echo "note: $n"; done
    exit $status
fi

# --- run, interleaved per repetition ---
declare -A failed
for rep in $(seq 1 "$reps"); do
    for impl in "${impls[@]}"; do
        [ -n "${failed[$impl]:-}" ] && continue
        echo "# rep $rep/$reps: $impl" >&2
        if ! timeout "$run_timeout" bash -c "$(declare -f launch); $(declare -p storm_opts ompi_opts mpich_opts); work='$work'; stormrun='$stormrun'; args='$args'; launch $impl" \
                >"$work/$impl.$rep.out" 2>"$work/$impl.$rep.err" </dev/null \
            || ! grep -q '^bw \|^lat ' "$work/$impl.$rep.out"; then
            failed[$impl]=1
            notes+=("$impl: run $rep failed: $(tail -n 3 "$work/$impl.$rep.err" | tr '\n' ' ')")
            [ "$impl" = stormpi ] && status=1
            rm -f "$work/$impl".*.out
        fi
    done
    if [ "$cma" = 1 ]; then
        echo "# rep $rep/$reps: cma_raw" >&2
        if ! timeout "$run_timeout" "$work/cma_raw" -s "${min:-1048576}" -m "$max" -i "$scale" \
                >"$work/cma.$rep.out" 2>"$work/cma.$rep.err" </dev/null; then
            notes+=("cma_raw: run $rep failed: $(tail -n 3 "$work/cma.$rep.err" | tr '\n' ' ')")
            cma=0
        fi
    fi
done

# --- table ---
ok=()
for impl in stormpi openmpi mpich; do
    if ls "$work/$impl".*.out >/dev/null 2>&1; then ok+=("$impl"); fi
done
if [ ${#ok[@]} -eq 0 ]; then
    printf '%s\n' "${notes[@]}"
    echo "bench-p2p.sh: nothing ran" >&2
    exit 1
fi

# best figure per (kind, impl, size): min latency, max bandwidth
for impl in stormpi openmpi mpich; do
    cat "$work/$impl".*.out 2>/dev/null | awk -v impl="$impl" '$1 == "lat" || $1 == "bw" { print $1, impl, $2, $3 }'
done | awk '
    { key = $1 " " $2 " " $3
      if (!(key in best) || ($1 == "lat" && $4 < best[key]) || ($1 == "bw" && $4 > best[key])) best[key] = $4
      sizes[$1 " " $3] = 1 }
    function fig(kind, impl, size,   k) { k = kind " " impl " " size; return (k in best) ? best[k] : "" }
    function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
    function show(v, fmt) { return v == "" ? "-" : sprintf(fmt, v) }
    END {
        for (pass = 0; pass < 2; pass++) {
            kind = pass == 0 ? "lat" : "bw"
            if (pass == 0) print "Latency, one-way, usec (best of runs; lower is better)"
            else           print "\nBandwidth, MB/s (best of runs; higher is better)"
            printf "%10s %11s %11s %11s %12s %12s\n", "bytes", "stormpi", "Open MPI", "MPICH", "storm/OMPI", "storm/MPICH"
            n = 0
            for (k in sizes) { split(k, p, " "); if (p[1] == kind) list[++n] = p[2] + 0 }
            # sort sizes numerically (insertion sort, small n)
            for (i = 2; i <= n; i++) { v = list[i]; j = i - 1; while (j > 0 && list[j] > v) { list[j + 1] = list[j]; j-- } list[j + 1] = v }
            fmt = kind == "lat" ? "%.3f" : "%.1f"
            for (i = 1; i <= n; i++) {
                s = fig(kind, "stormpi", list[i]); o = fig(kind, "openmpi", list[i]); m = fig(kind, "mpich", list[i])
                printf "%10d %11s %11s %11s %12s %12s\n", list[i], show(s, fmt), show(o, fmt), show(m, fmt), ratio(s, o), ratio(s, m)
            }
            delete list
        }
    }'
if [ "$cma" = 1 ] && [ -n "$(ls "$work"/stormpi.*.out 2>/dev/null)" ]; then
    echo
    echo "stormpi bandwidth against process_vm_readv itself (bench/cma_raw.c), MB/s (best of runs)"
    printf "%10s %11s %11s %12s\n" "bytes" "stormpi" "raw CMA" "storm/raw"
    { awk '$1 == "bw" { print "s", $2, $3 }' "$work"/stormpi.*.out
      awk '$1 == "cma" { print "c", $2, $3 }' "$work"/cma.*.out; } | awk '
        { k = $1 " " $2; if (!(k in best) || $3 > best[k]) best[k] = $3; if ($1 == "c") sz[$2] = 1 }
        END {
            n = 0; for (k in sz) list[++n] = k + 0
            for (i = 2; i <= n; i++) { v = list[i]; j = i - 1; while (j > 0 && list[j] > v) { list[j + 1] = list[j]; j-- } list[j + 1] = v }
            for (i = 1; i <= n; i++) {
                s = best["s " list[i]]; c = best["c " list[i]]
                printf "%10d %11s %11.1f %12s\n", list[i], s == "" ? "-" : sprintf("%.1f", s), c, (s != "" && c > 0) ? sprintf("%.2f", s / c) : "-"
            }
        }'
fi
echo
echo "runs: $reps repetition(s), interleaved; ${min:+min $min bytes; }max $max bytes; iteration scale $scale; libraries: ${ok[*]}"
echo "transports: $transports"
for impl in "${ok[@]}"; do
    echo "  $impl: $(grep -h '^# library:' "$work/$impl".*.out | head -n 1 | sed 's/^# library: //')"
done
for n in "${notes[@]}"; do echo "note: $n"; done
exit $status
