#!/usr/bin/env bash
# bench-datatype.sh - the datatype engine of stormpi against Open MPI and MPICH, measured on this
# machine in the same invocation: non-contiguous transfers (a strided matrix column, faces of a
# 3-D array) and MPI_INT against MPI_BYTE streaming bandwidth; tables with ratios.
#
# usage: ci/bench-datatype.sh [--quick] [--reps N] [--time S] [--max BYTES] [--modes LIST]
#                             [--hetero] [--hetero-only] [--arches LIST]
#   --quick        one repetition, 0.05 s per case, intbyte up to 1 MiB (options after it override);
#                  heterogeneous sizes up to 64 KiB (a smoke test, noisy numbers)
#   --reps N       repetitions; the runs of the three libraries are interleaved per repetition and
#                  the best figure of each is kept (lowest time); default 5 (this VM's memory speed
#                  switches between two modes, ~3x apart, for seconds at a time, for any library)
#   --time S       target seconds per case in bench/datatype.c (default 0.5)
#   --max BYTES    largest intbyte message (default 4194304)
#   --modes LIST   comma-separated modes of bench/datatype.c to run (default vector,halo,intbyte)
#   --hetero       also run intbyte with stormpi only, over TCP (--mca btl tcp,self), between one
#                  x86_64 rank and one rank of each of --arches (and an x86_64 pair for
#                  comparison), both directions; cross-builds libmpi.a for those targets with
#                  cargo (needs the rustup targets and Debian's gcc-<arch>-linux-gnu,
#                  libc6-dev-<arch>-cross; s390x runs under qemu-user)
#   --hetero-only  only the heterogeneous runs
#   --arches LIST  comma-separated foreign architectures: i686, s390x (default i686,s390x)
#
# bench/datatype.c is built three ways:
#   stormpi   $STORMCC (default target/release/stormcc, else stormcc on PATH), run with
#             $STORMRUN -n 2 (default target/release/stormrun, else stormrun on PATH);
#             skipped, with a message, when those tools are not there yet;
#   Open MPI  mpicc.openmpi, run with mpirun.openmpi -n 2 (root is allowed through the
#             OMPI_ALLOW_RUN_AS_ROOT variables);
#   MPICH     mpicc.mpich, run with mpiexec.mpich -n 2.
# Every run is under `timeout` ($BENCH_TIMEOUT seconds; default 300, 60 with --quick, 120 for a
# heterogeneous run).
# Exit status: 0 when everything asked for ran; 1 if stormpi's tools exist but its build or a run
# failed (a heterogeneous build or run included), or if nothing could run; 2 for a bad option.
# A reference library that fails is reported and left out.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=5
time_per_case=0.5
max=4194304
modes=vector,halo,intbyte
hetero=0
local_runs=1
arches=i686,s390x
quick=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; reps=1; time_per_case=0.05; max=1048576 ;;
        --reps) shift; reps=${1:-} ;;
        --time) shift; time_per_case=${1:-} ;;
        --max) shift; max=${1:-} ;;
        --modes) shift; modes=${1:-} ;;
        --hetero) hetero=1 ;;
        --hetero-only) hetero=1; local_runs=0 ;;
        --arches) shift; arches=${1:-} ;;
        -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
        *) echo "bench-datatype.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case "$reps" in ''|*[!0-9]*|0) echo "bench-datatype.sh: --reps wants a positive integer" >&2; exit 2 ;; esac
case "$max" in ''|*[!0-9]*) echo "bench-datatype.sh: --max wants a number of bytes" >&2; exit 2 ;; esac
case "$time_per_case" in ''|*[!0-9.]*|*.*.*) echo "bench-datatype.sh: --time wants seconds, e.g. 0.5" >&2; exit 2 ;; esac
for m in ${modes//,/ }; do
    case "$m" in vector|halo|intbyte) ;; *) echo "bench-datatype.sh: unknown mode $m" >&2; exit 2 ;; esac
done
for a in ${arches//,/ }; do
    case "$a" in i686|s390x) ;; *) echo "bench-datatype.sh: unknown architecture $a (i686, s390x)" >&2; exit 2 ;; esac
done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_base_warn_component_unused=0
work=$(mktemp -d /tmp/stormpi-bench-datatype.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$root/bench/datatype.c"
args=(-t "$time_per_case" -m "$max")
if [ "$quick" = 1 ]; then run_timeout=${BENCH_TIMEOUT:-60}; else run_timeout=${BENCH_TIMEOUT:-300}; fi
# heterogeneous runs: small (s390x is emulated), the same for every pair
if [ "$quick" = 1 ]; then het_max=65536; het_time=0.05; else het_max=1048576; het_time=0.2; fi
het_timeout=${BENCH_TIMEOUT:-120}
het_args=(intbyte -t "$het_time" -m "$het_max" -w 4 -d both)

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
have_storm=0

# --- build ---
if [ -n "$stormcc" ] && [ -n "$stormrun" ] && [ -x "$stormcc" ] && [ -x "$stormrun" ]; then
    if "$stormcc" -O2 -o "$work/datatype-stormpi" "$src" >"$work/build-stormpi.log" 2>&1; then
        impls+=(stormpi)
        have_storm=1
    else
        notes+=("stormpi: build with $stormcc failed: $(head -n 3 "$work/build-stormpi.log" | tr '\n' ' ')")
        status=1
    fi
else
    notes+=("stormpi: skipped (stormcc/stormrun not found; set STORMCC and STORMRUN or build target/release)")
fi
if [ "$local_runs" = 1 ]; then
    if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$work/datatype-openmpi" "$src" >"$work/build-openmpi.log" 2>&1; then
        impls+=(openmpi)
    else
        notes+=("Open MPI: build with mpicc.openmpi failed or not installed")
    fi
    if command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$work/datatype-mpich" "$src" >"$work/build-mpich.log" 2>&1; then
        impls+=(mpich)
    else
        notes+=("MPICH: build with mpicc.mpich failed or not installed")
    fi
else
    impls=()
fi

# heterogeneous builds: libmpi.a for each foreign target, then the program against it
het_pairs=()
het_prefix_s390x=()
if [ "$hetero" = 1 ]; then
    if [ "$have_storm" = 1 ]; then
        het_pairs+=(x86_64)
    else
        notes+=("hetero: skipped (no native stormpi build)")
    fi
    for arch in ${arches//,/ }; do
        [ "$have_storm" = 1 ] || break
        case "$arch" in
            i686) triple=i686-unknown-linux-gnu; cc=i686-linux-gnu-gcc; sysroot=/usr/i686-linux-gnu ;;
            s390x) triple=s390x-unknown-linux-gnu; cc=s390x-linux-gnu-gcc; sysroot=/usr/s390x-linux-gnu ;;
        esac
        if ! command -v "$cc" >/dev/null || ! command -v cargo >/dev/null; then
            notes+=("hetero $arch: $cc or cargo not found (install gcc-$arch-linux-gnu and the rustup target $triple)")
            status=1
            continue
        fi
        linker_var="CARGO_TARGET_$(echo "$triple" | tr 'a-z-' 'A-Z_')_LINKER"
        echo "# building libmpi.a for $triple" >&2
        if ! (cd "$root" && env "$linker_var=$cc" timeout 1800 cargo build --release --target "$triple" -p stormpi-linux --lib) \
                >"$work/build-lib-$arch.log" 2>&1; then
            notes+=("hetero $arch: cargo build --release --target $triple -p stormpi-linux --lib failed: $(grep -m 1 -A 1 '^error' "$work/build-lib-$arch.log" | tr -s ' \n' ' ')")
            status=1
            continue
        fi
        extra=()
        # the target's loader and libraries, where the host has no multiarch copies
        if [ "$arch" = i686 ] && [ ! -e /lib/ld-linux.so.2 ] && [ -e "$sysroot/lib/ld-linux.so.2" ]; then
            extra=("-Wl,--dynamic-linker=$sysroot/lib/ld-linux.so.2" "-Wl,-rpath,$sysroot/lib")
        fi
        if ! "$cc" -O2 -I "$root/core/include" -o "$work/datatype-$arch" "$src" \
                "$root/target/$triple/release/libmpi.a" "${extra[@]}" \
                -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc >"$work/build-$arch.log" 2>&1; then
            notes+=("hetero $arch: $cc failed: $(head -n 3 "$work/build-$arch.log" | tr '\n' ' ')")
            status=1
            continue
        fi
        if [ "$arch" = s390x ]; then
            export QEMU_LD_PREFIX=$sysroot
            # run the binary directly when binfmt_misc hands it to qemu; else start qemu
            if ! grep -qx enabled /proc/sys/fs/binfmt_misc/qemu-s390x 2>/dev/null; then
                if command -v qemu-s390x >/dev/null; then
                    het_prefix_s390x=("$(command -v qemu-s390x)")
                    notes+=("hetero s390x: binfmt_misc not enabled for qemu-s390x; ran it as qemu-s390x PROGRAM")
                else
                    notes+=("hetero s390x: neither binfmt_misc for qemu-s390x nor qemu-s390x (install qemu-user)")
                    status=1
                    continue
                fi
            fi
        fi
        het_pairs+=("$arch")
    done
fi

launch_cmd() { # launch_cmd IMPL MODE: the command line of one run, in the array cmd
    case "$1" in
        stormpi) cmd=("$stormrun" -n 2 "$work/datatype-stormpi" "$2" "${args[@]}") ;;
        openmpi) cmd=(mpirun.openmpi -n 2 "$work/datatype-openmpi" "$2" "${args[@]}") ;;
        mpich) cmd=(mpiexec.mpich -n 2 "$work/datatype-mpich" "$2" "${args[@]}") ;;
        het-*)
            local arch=${1#het-} prog
            prog=("$work/datatype-$arch")
            [ "$arch" = x86_64 ] && prog=("$work/datatype-stormpi")
            [ "$arch" = s390x ] && prog=(${het_prefix_s390x[@]+"${het_prefix_s390x[@]}"} "$work/datatype-s390x")
            cmd=("$stormrun" --mca btl "tcp,self")
            [ "$arch" = s390x ] && cmd+=(-x QEMU_LD_PREFIX)
            cmd+=(-n 1 "$work/datatype-stormpi" "${het_args[@]}" : -n 1 "${prog[@]}" "${het_args[@]}") ;;
    esac
}

# run IMPL MODE REP: one run under the timeout; its output is kept only when it succeeded
declare -A failed
run() {
    local impl=$1 mode=$2 rep=$3 out="$work/$1.$2.$3"
    [ -n "${failed[$impl.$mode]:-}" ] && return
    echo "# rep $rep/$reps: $impl $mode" >&2
    local limit=$run_timeout
    case "$impl" in het-*) limit=$het_timeout ;; esac
    launch_cmd "$impl" "$mode"
    if ! timeout -k 10 "$limit" "${cmd[@]}" >"$out.out" 2>"$out.err" </dev/null \
        || ! grep -q '^res ' "$out.out"; then
        failed[$impl.$mode]=1
        notes+=("$impl $mode: run $rep failed (exit status, or timeout of ${limit}s): $(tail -n 3 "$out.err" | tr '\n' ' ')")
        case "$impl" in stormpi|het-*) status=1 ;; esac
        rm -f "$work/$impl.$mode".*.out
    fi
}

# --- run, interleaved per repetition ---
load_before=$(cut -d ' ' -f 1-3 /proc/loadavg)
for rep in $(seq 1 "$reps"); do
    for mode in ${modes//,/ }; do
        for impl in ${impls[@]+"${impls[@]}"}; do
            run "$impl" "$mode" "$rep"
        done
    done
    for arch in ${het_pairs[@]+"${het_pairs[@]}"}; do
        run "het-$arch" intbyte "$rep"
    done
done

# --- tables ---
# data: IMPL MODE CASE DIR BYTES USEC, every successful run
for f in "$work"/*.out; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    awk -v impl="${b%%.*}" '$1 == "res" { print impl, $2, $3, $4, $5, $6 }' "$f"
done >"$work/data"
if [ ! -s "$work/data" ]; then
    printf '%s\n' "${notes[@]}"
    echo "bench-datatype.sh: nothing ran" >&2
    exit 1
fi

# shellcheck disable=SC2016 # an awk program, not shell
awk_common='
    { key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
      if (!(key in best) || $6 < best[key]) best[key] = $6 }
    function t(impl, mode, c, dir, bytes,   k) {
        k = impl SUBSEP mode SUBSEP c SUBSEP dir SUBSEP bytes; return (k in best) ? best[k] : "" }
    function bw(bytes, us) { return us == "" ? "" : bytes / us }
    function show(v, fmt) { return v == "" ? "-" : (fmt == "%.0f" && v < 10) ? sprintf("%.2f", v) : sprintf(fmt, v) }
    function ratio(a, b) { return (a != "" && b != "" && b > 0) ? sprintf("%.2f", a / b) : "-" }
    function minof(a, b) { return a == "" ? b : b == "" ? a : (a < b ? a : b) }
    function human(n) { return n >= 1048576 && n % 1048576 == 0 ? (n / 1048576) " Mi" : n >= 1024 && n % 1024 == 0 ? (n / 1024) " Ki" : n }
'

pp_table() { # pp_table MODE TITLE
    grep -q "^[a-z]* $1 " "$work/data" || return 0
    awk -v mode="$1" -v title="$2" -v reps="$reps" "$awk_common"'
    $2 == mode && !(($3 SUBSEP $5) in seen) { seen[$3 SUBSEP $5] = 1; order[++n] = $3; size[n] = $5 }
    END {
        print title
        print "one-way time, usec, and payload rate, MB/s (best of " reps " run(s)); ratios are stormpi time / other time (lower is better)"
        printf "%-11s %7s | %9s %9s %9s | %9s %9s %9s | %10s %10s %11s\n", "case", "bytes", "stormpi", "Open MPI", "MPICH", "MB/s storm", "OMPI", "MPICH", "storm/best", "storm/OMPI", "storm/MPICH"
        for (i = 1; i <= n; i++) {
            c = order[i]; b = size[i]
            s = t("stormpi", mode, c, "pp", b); o = t("openmpi", mode, c, "pp", b); m = t("mpich", mode, c, "pp", b)
            printf "%-11s %7s | %9s %9s %9s | %10s %9s %9s | %10s %10s %11s\n", c, b, show(s, "%.2f"), show(o, "%.2f"), show(m, "%.2f"),
                show(bw(b, s), "%.0f"), show(bw(b, o), "%.0f"), show(bw(b, m), "%.0f"), ratio(s, minof(o, m)), ratio(s, o), ratio(s, m)
        }
        print "cost of non-contiguity: one-way time minus that of contig, usec"
        printf "%-11s %7s | %9s %9s %9s\n", "case", "bytes", "stormpi", "Open MPI", "MPICH"
        for (i = 1; i <= n; i++) {
            c = order[i]; b = size[i]
            if (c == "contig") continue
            line = sprintf("%-11s %7s |", c, b)
            split("stormpi openmpi mpich", L, " ")
            for (j = 1; j <= 3; j++) {
                x = t(L[j], mode, c, "pp", b); y = t(L[j], mode, "contig", "pp", b)
                line = line sprintf(" %9s", (x != "" && y != "") ? sprintf("%+.2f", x - y) : "-")
            }
            print line
        }
    }' "$work/data"
    echo
}

intbyte_table() {
    grep -q "^[a-z]* intbyte " "$work/data" || return 0
    awk -v reps="$reps" "$awk_common"'
    $2 == "intbyte" && ($1 == "stormpi" || $1 == "openmpi" || $1 == "mpich") { dirs[$4] = 1; sizes[$5] = 1 }
    END {
        n = 0; for (s in sizes) list[++n] = s + 0
        for (i = 2; i <= n; i++) { v = list[i]; j = i - 1; while (j > 0 && list[j] > v) { list[j + 1] = list[j]; j-- } list[j + 1] = v }
        print "MPI_INT vs MPI_BYTE: streaming bandwidth, MB/s (best of " reps " run(s)); int/byte = int bandwidth / byte bandwidth;"
        print "storm/best = stormpi time / best other library time (lower is better)"
        for (d in dirs) {
            print "direction " d
            printf "%7s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %10s %10s\n", "bytes", "storm int", "byte", "int/byte", "OMPI int", "byte", "int/byte", "MPICH int", "byte", "int/byte", "best: int", "byte"
            for (i = 1; i <= n; i++) {
                b = list[i]; line = sprintf("%7s |", human(b))
                split("stormpi openmpi mpich", L, " ")
                for (j = 1; j <= 3; j++) {
                    ti = t(L[j], "intbyte", "int", d, b); tb = t(L[j], "intbyte", "byte", d, b)
                    line = line sprintf(" %9s %8s %8s |", show(bw(b, ti), "%.0f"), show(bw(b, tb), "%.0f"), ratio(tb, ti))
                }
                si = t("stormpi", "intbyte", "int", d, b); sb = t("stormpi", "intbyte", "byte", d, b)
                oi = minof(t("openmpi", "intbyte", "int", d, b), t("mpich", "intbyte", "int", d, b))
                ob = minof(t("openmpi", "intbyte", "byte", d, b), t("mpich", "intbyte", "byte", d, b))
                print line sprintf(" %10s %10s", ratio(si, oi), ratio(sb, ob))
            }
        }
    }' "$work/data"
    echo
}

hetero_table() {
    grep -q "^het-" "$work/data" || return 0
    echo "Heterogeneous MPI_INT vs MPI_BYTE (stormpi only, --mca btl tcp,self, rank 0 x86_64 and rank 1 as named;"
    echo "windows of 4, target ${het_time} s per case), bandwidth MB/s (best of $reps run(s)); int/byte = int bandwidth / byte bandwidth;"
    echo "vs x86_64 = this pair's int bandwidth / the x86_64 pair's"
    awk "$awk_common"'
    $1 ~ /^het-/ { pairs[$1] = 1; sizes[$5] = 1 }
    END {
        n = 0; for (s in sizes) list[++n] = s + 0
        for (i = 2; i <= n; i++) { v = list[i]; j = i - 1; while (j > 0 && list[j] > v) { list[j + 1] = list[j]; j-- } list[j + 1] = v }
        split("het-x86_64 het-i686 het-s390x", P, " ")
        for (p = 1; p <= 3; p++) {
            pr = P[p]; if (!(pr in pairs)) continue
            print "x86_64 <-> " substr(pr, 5)
            printf "%7s | %9s %9s %8s %9s | %9s %9s %8s %9s\n", "bytes", "int 0>1", "byte 0>1", "int/byte", "vs x86_64", "int 1>0", "byte 1>0", "int/byte", "vs x86_64"
            for (i = 1; i <= n; i++) {
                b = list[i]; line = sprintf("%7s |", human(b))
                split("0>1 1>0", D, " ")
                for (k = 1; k <= 2; k++) {
                    ti = t(pr, "intbyte", "int", D[k], b); tb = t(pr, "intbyte", "byte", D[k], b)
                    tx = t("het-x86_64", "intbyte", "int", D[k], b)
                    line = line sprintf(" %9s %9s %8s %9s |", show(bw(b, ti), "%.0f"), show(bw(b, tb), "%.0f"), ratio(tb, ti), ratio(tx, ti))
                }
                print substr(line, 1, length(line) - 2)
            }
        }
    }' "$work/data"
    echo
}

pp_table vector "Strided vector: one column of a 4096x4096 matrix of doubles, MPI_Type_vector(4096, 1, 4096, MPI_DOUBLE), ping-pong
(contig: the same 4096 doubles contiguous; vec-vec: column type on both sides; vec-contig: rank 1 uses 4096 contiguous doubles)"
pp_table halo "Halo faces of a 128x128x128 array of doubles (C order [x][y][z]), MPI_Type_create_subarray, ping-pong
(face-x: 1x128x128, one contiguous block; face-y: 128x1x128, 128 blocks of 128 doubles; face-z: 128x128x1, 16384 single doubles;
contig: 16384 contiguous doubles)"
intbyte_table
hetero_table

ok=()
for impl in stormpi openmpi mpich het-x86_64 het-i686 het-s390x; do
    if grep -q "^$impl " "$work/data"; then ok+=("$impl"); fi
done
summary="runs: $reps repetition(s), interleaved;"
[ "$local_runs" = 1 ] && summary+=" modes $modes, target $time_per_case s per case, intbyte up to $max bytes;"
[ "$hetero" = 1 ] && summary+=" heterogeneous intbyte up to $het_max bytes, target $het_time s per case;"
echo "$summary libraries: ${ok[*]}"
echo "load average before: $load_before; after: $(cut -d ' ' -f 1-3 /proc/loadavg) (the runs themselves add about 2; more is other work on the cores, which disturbs the figures)"
for impl in "${ok[@]}"; do
    f=$(find "$work" -maxdepth 1 -name "$impl.*.out" | head -n 1)
    echo "  $impl: $(grep -h '^# library:' "$f" | head -n 1 | sed 's/^# library: //')"
    case "$impl" in het-*) grep -h '^# rank ' "$f" | sed 's/^# /      /' ;; esac
done
for n in ${notes[@]+"${notes[@]}"}; do echo "note: $n"; done
exit $status
