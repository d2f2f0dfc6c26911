#!/usr/bin/env bash
# bench-striping.sh - Figure 2 of Open MPI's heterogeneity paper with real links: one message
# striped over two networks of different speed.
#
# Two network namespaces (the hosts h1, h2) are joined by two veth pairs: link A (`lka`,
# 10.77.1.0/24, 400 Mbit/s, shaped with tbf) and link B (`lkb`, 10.77.2.0/24, 200 Mbit/s, shaped
# with htb), both ends of each link shaped; a bridge in the root namespace (10.77.0.0/24, `eth0`
# in the hosts) carries stormrun's PMI traffic only (the management network). bench/striping.c
# (ping-pong, NetPIPE style) runs as a 2-rank job, one rank per host, started by stormrun with
# the launch agent `ip netns exec`, in three configurations, interleaved per repetition:
#   A      --mca btl tcp,self --mca btl_tcp_if_include lka
#   B      --mca btl tcp,self --mca btl_tcp_if_include lkb
#   both   --mca btl tcp,self --mca btl_tcp_if_include lka,lkb
# each with --mca btl_tcp_bandwidth lka:400,lkb:200 (the links' rates, for the BML). For each
# size the best figure of all repetitions is kept (lowest one-way time). A raw TCP stream over
# each shaped link (python3) is measured in each repetition too, for reference.
#
# Printed: a table per size (latency and bandwidth over A, B, both; ratio both/A) and the
# targets:
#   1. sizes >= 1 MiB: bandwidth over both >= 85% of A's + B's;
#   2. sizes <= 4 KiB: latency over both within 5% of A's;
#   3. every size: over both no more than 5% slower than over A.
# Written: OUT/striping.tsv (per size: the three configurations' latency and bandwidth), the
# raw outputs under OUT/raw/, and the plot (ci/plot-striping.py) to docs/striping.svg.
#
# usage: sudo ci/bench-striping.sh [--quick] [--reps N] [--max BYTES] [--batches B]
#            [--target SECONDS] [--out DIR] [--svg FILE] [--no-plot] [--idle-wait SECONDS]
#   --quick        1 repetition, 2 MiB max, 3 batches of 10 ms, no waiting for idle CPUs
#                  (a smoke test: noisy numbers)
#   --reps N       repetitions of the three configurations (default 8)
#   --max BYTES    largest message (default 8388608); sizes are the powers of 2 from 1
#   --batches B    timed batches per size in each run (default 5)
#   --target S     least duration of a batch in seconds (default 0.03)
#   --out DIR      where the TSV and raw outputs go (default target/striping)
#   --svg FILE     where the plot goes (default docs/striping.svg)
#   --no-plot      write no plot
#   --idle-wait S  before each run, wait up to S seconds (default 600) until the CPUs are at
#                  most 10% busy: on a shared machine, other work would decide the figures
# Needs root (namespaces, tc), iproute2, python3, and target/release/{stormrun,stormcc} (cargo
# build --release; or set STORMRUN and STORMCC). The namespaces, bridge and links are deleted on
# exit, however it ends. One run at a time (a lock in /run).
# Exit status: 0 if every target holds, 1 if one fails, 2 on a setup or run failure.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=8
max=8388608
batches=5
target=0.03
out="$root/target/striping"
svg="$root/docs/striping.svg"
plot=1
idle_wait=600
idle_busy=10
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) reps=1; max=2097152; batches=3; target=0.01; idle_wait=0 ;;
        --reps) shift; reps=$1 ;;
        --max) shift; max=$1 ;;
        --batches) shift; batches=$1 ;;
        --target) shift; target=$1 ;;
        --out) shift; out=$1 ;;
        --svg) shift; svg=$1 ;;
        --no-plot) plot=0 ;;
        --idle-wait) shift; idle_wait=$1 ;;
        -h|--help) sed -n '2,42p' "$0"; exit 0 ;;
        *) echo "bench-striping.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "bench-striping.sh: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces and tc)"
command -v ip >/dev/null || die "iproute2 (ip) is not installed"
command -v tc >/dev/null || die "iproute2 (tc) is not installed"
command -v python3 >/dev/null || die "python3 is not installed"
stormrun=${STORMRUN:-$root/target/release/stormrun}
stormcc=${STORMCC:-$root/target/release/stormcc}
[ -x "$stormrun" ] && [ -x "$stormcc" ] ||
    die "no $stormrun or $stormcc: run cargo build --release first"

exec 9>/run/stormpi-bench-striping.lock
flock -n 9 || die "another bench-striping.sh is running (the addresses are fixed)"

# Hosts h1 and h2; the bridge and the hosts' ends of it; links lka and lkb, named the same at
# both ends, so that btl_tcp_if_include names one link on both hosts.
tag=$$
ns1="stripe-h1-$tag"
ns2="stripe-h2-$tag"
br="stsbr$tag"
mgmt=10.77.0
A=lka
B=lkb
rate_a=400
rate_b=200
bw_param="$A:$rate_a,$B:$rate_b"

work=$(mktemp -d /tmp/stormpi-striping.XXXXXX)
job=
cleanup() {
    [ -n "$job" ] && kill "$job" 2>/dev/null && wait "$job" 2>/dev/null
    for ns in "$ns1" "$ns2"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    ip link del "$br" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

run() { "$@" || die "failed: $*"; }

# CPU busy over one second, in percent (all cores).
busy_percent() {
    local a b total=0 idle i
    read -ra a </proc/stat
    sleep 1
    read -ra b </proc/stat
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    idle=$((b[4] - a[4] + b[5] - a[5]))
    echo $((total > 0 ? 100 * (total - idle) / total : 0))
}

# Waits up to --idle-wait seconds until the CPUs are at most $idle_busy% busy.
wait_idle() {
    local waited=0 busy
    [ "$idle_wait" -gt 0 ] || return 0
    while :; do
        busy=$(busy_percent)
        [ "$busy" -le "$idle_busy" ] && return 0
        if [ "$waited" -ge "$idle_wait" ]; then
            echo "# note: CPUs still ${busy}% busy after ${waited} s of waiting; running anyway"
            return 0
        fi
        sleep 4
        waited=$((waited + 5))
    done
}

# Bytes h1 has sent through link $1 so far.
tx_bytes() {
    ip netns exec "$ns1" cat /proc/net/dev | awk -v l="$1:" '$1 == l { print $10 }'
}

# --- hosts and networks ---
ip netns add "$ns1" 2>"$work/err" || die "ip netns add refused: $(cat "$work/err")"
run ip netns add "$ns2"
run ip link add "$br" type bridge
run ip addr add "$mgmt.1/24" dev "$br"
run ip link set "$br" up
i=1
for ns in "$ns1" "$ns2"; do
    v="sts$i-$tag"
    run ip link add "$v" type veth peer name eth0 netns "$ns"
    run ip link set "$v" master "$br" up
    run ip -n "$ns" addr add "$mgmt.$((i + 1))/24" dev eth0
    run ip -n "$ns" link set eth0 up
    run ip -n "$ns" link set lo up
    i=$((i + 1))
done
k=1
for l in "$A" "$B"; do
    run ip link add "$l" netns "$ns1" type veth peer name "$l" netns "$ns2"
    run ip -n "$ns1" addr add "10.77.$k.1/24" dev "$l"
    run ip -n "$ns2" addr add "10.77.$k.2/24" dev "$l"
    run ip -n "$ns1" link set "$l" up
    run ip -n "$ns2" link set "$l" up
    k=$((k + 1))
done

# Shaping, both directions (both ends of each link): A with a token bucket filter, B with an
# htb class. A shaper's bucket lets a burst leave at memory speed; a link does not. In a
# ping-pong each direction idles while the reply travels and its bucket refills, so with the
# plain recipes of MACHINE-NOTES.md (tbf burst 256kb; htb with its default burst and the 64 KiB
# GSO packets it lets through whole) messages of up to tens of KiB cross at twice the rate, and
# up to the bucket's 256 KiB much faster than the rate: a token bucket, not a 400 Mbit/s link.
# So bursts are kept to a couple of packets: tbf gets a peak rate just above its rate (a second
# bucket of one ~3 KB packet), htb a 1600-byte burst, and both links packets of at most 3000
# bytes (gso_max_size; tbf would split larger ones itself, htb would not). A long TCP stream
# still gets the configured rate (the raw TCP figures).
for ns in "$ns1" "$ns2"; do
    for l in "$A" "$B"; do
        run ip -n "$ns" link set dev "$l" gso_max_size 3000
    done
    run ip netns exec "$ns" tc qdisc add dev "$A" root tbf rate "${rate_a}mbit" burst 256kb \
        latency 10ms peakrate "$((rate_a + 1))mbit" mtu 3000
    run ip netns exec "$ns" tc qdisc add dev "$B" root handle 1: htb default 10
    run ip netns exec "$ns" tc class add dev "$B" parent 1: classid 1:10 htb \
        rate "${rate_b}mbit" ceil "${rate_b}mbit" burst 1600 cburst 1600 quantum 1514
done

# --- raw TCP over each link, for reference ---
cat >"$work/tcpbw.py" <<'EOF'
import socket, sys, time
mode, addr = sys.argv[1], sys.argv[2]
total = 64 << 20
if mode == "serve":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 5201))
    s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept()
    got = 0
    while got < total:
        b = c.recv(1 << 20)
        if not b:
            break
        got += len(b)
    c.sendall(b"k")
    c.close()
else:
    c = socket.create_connection((addr, 5201))
    buf = b"x" * (1 << 20)
    t0 = time.time()
    for _ in range(total >> 20):
        c.sendall(buf)
    c.recv(1)
    print("%.1f" % (total / (time.time() - t0) / 1e6))
EOF
raw_bw() { # raw_bw K: MB/s of a 64 MiB TCP stream from h1 to h2 over 10.77.K.0/24
    ip netns exec "$ns2" timeout 60 python3 "$work/tcpbw.py" serve "10.77.$1.2" >"$work/serve.out" 2>&1 &
    local spid=$!
    for _ in $(seq 50); do grep -q ready "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
    ip netns exec "$ns1" timeout 60 python3 "$work/tcpbw.py" send "10.77.$1.2" 2>/dev/null
    wait "$spid" 2>/dev/null
}
best_of() { # best_of OLD NEW: the larger, either may be empty
    awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { print (b + 0 > a + 0) ? b : a }'
}
raw_a=
raw_b=

# --- the program ---
run "$stormcc" -O2 -o "$work/striping" "$root/bench/striping.c"

mkdir -p "$out/raw" || die "cannot create $out"
rm -f "$out"/raw/*.out "$out"/raw/*.err "$out/verdict"
job_timeout=600
configs=(A B both)
declare -A include=([A]="$A" [B]="$B" [both]="$A,$B")
echo "# bench-striping: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# link A: $A 10.77.1.0/24, tbf ${rate_a} Mbit/s; link B: $B 10.77.2.0/24, htb ${rate_b}" \
     "Mbit/s (both ends)"
echo "# $reps repetitions of (A, B, both), sizes 1..$max, best of $batches batches of >= $target s;" \
     "btl_tcp_bandwidth $bw_param"
for rep in $(seq "$reps"); do
    # The raw TCP rates too, best of the repetitions.
    wait_idle
    raw_a=$(best_of "$raw_a" "$(raw_bw 1)")
    raw_b=$(best_of "$raw_b" "$(raw_bw 2)")
    for c in "${configs[@]}"; do
        wait_idle
        ta=$(tx_bytes "$A")
        tb=$(tx_bytes "$B")
        t0=$(date +%s.%N)
        # In the background, so that a signal reaches the trap at once (cleanup ends the job).
        "$stormrun" --host "$ns1:1,$ns2:1" --launch-agent "ip netns exec" \
            --pmi-address "$mgmt.1" --timeout "$job_timeout" -n 2 \
            --mca btl tcp,self --mca btl_tcp_if_include "${include[$c]}" \
            --mca btl_tcp_bandwidth "$bw_param" \
            "$work/striping" -m "$max" -b "$batches" -t "$target" \
            >"$out/raw/$c.$rep.out" 2>"$out/raw/$c.$rep.err" &
        job=$!
        wait "$job"
        st=$?
        job=
        t1=$(date +%s.%N)
        if [ $st -ne 0 ] || ! grep -q '^pp ' "$out/raw/$c.$rep.out"; then
            echo "bench-striping.sh: run $rep of $c failed (exit $st):" >&2
            tail -n 20 "$out/raw/$c.$rep.err" "$out/raw/$c.$rep.out" >&2
            exit 2
        fi
        if [ -s "$out/raw/$c.$rep.err" ]; then
            echo "# note: run $rep of $c wrote to stderr: $(head -c 300 "$out/raw/$c.$rep.err" | tr '\n' ' ')"
        fi
        printf '# run %d/%d %-4s %5.1f s; h1 sent %6.1f MB on A, %6.1f MB on B; load %s\n' \
            "$rep" "$reps" "$c" "$(awk "BEGIN { print $t1 - $t0 }")" \
            "$(awk "BEGIN { print ($(tx_bytes "$A") - $ta) / 1e6 }")" \
            "$(awk "BEGIN { print ($(tx_bytes "$B") - $tb) / 1e6 }")" \
            "$(cut -d' ' -f1 /proc/loadavg)"
    done
done

echo "# raw TCP h1->h2 (64 MiB stream, best of $reps): A ${raw_a:-?} MB/s, B ${raw_b:-?} MB/s"

# --- table and targets ---
python3 - "$out" "$reps" "${raw_a:-0}" "${raw_b:-0}" <<'EOF'
import os
import sys

out, reps = sys.argv[1], int(sys.argv[2])
raw_a, raw_b = float(sys.argv[3] or 0), float(sys.argv[4] or 0)
cfgs = ["A", "B", "both"]
best = {c: {} for c in cfgs}  # size -> lowest one-way time in usec
for c in cfgs:
    for r in range(1, reps + 1):
        with open(os.path.join(out, "raw", "%s.%d.out" % (c, r))) as f:
            for line in f:
                p = line.split()
                if len(p) == 4 and p[0] == "pp":
                    size, us = int(p[1]), float(p[2])
                    best[c][size] = min(us, best[c].get(size, float("inf")))
sizes = sorted(set(best["A"]) & set(best["B"]) & set(best["both"]))


def bw(c, s):  # MB/s = bytes per usec
    return s / best[c][s]


def human(n):
    for unit, k in (("Mi", 20), ("Ki", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return "%d %s" % (n >> k, unit)
    return str(n)


def fmt_bw(x):
    return "%.3f" % x if x < 1 else "%.2f" % x if x < 100 else "%.1f" % x


with open(os.path.join(out, "striping.tsv"), "w") as f:
    f.write("# bytes\tlat_A_us\tlat_B_us\tlat_both_us\tbw_A_MBps\tbw_B_MBps\tbw_both_MBps\n")
    f.write("# raw TCP: A %.1f MB/s, B %.1f MB/s\n" % (raw_a, raw_b))
    for s in sizes:
        f.write("%d\t%.3f\t%.3f\t%.3f\t%.4f\t%.4f\t%.4f\n" % (
            s, best["A"][s], best["B"][s], best["both"][s], bw("A", s), bw("B", s), bw("both", s)))

fails = {1: [], 2: [], 3: []}
print()
print("%8s | %10s %10s %10s | %9s %9s %9s | %6s | %s" % (
    "bytes", "A usec", "B usec", "both usec", "A MB/s", "B MB/s", "both MB/s", "both/A", "check"))
print("-" * 9 + "+" + "-" * 34 + "+" + "-" * 31 + "+" + "-" * 8 + "+" + "-" * 24)
for s in sizes:
    notes = []
    slower = best["both"][s] / best["A"][s] - 1
    if s <= 4096:
        ok = slower <= 0.05
        notes.append("latency %+.1f%%%s" % (100 * slower, "" if ok else " FAIL"))
        if not ok:
            fails[2].append(s)
    if s >= 1 << 20:
        share = bw("both", s) / (bw("A", s) + bw("B", s))
        ok = share >= 0.85
        notes.append("%.1f%% of A+B%s" % (100 * share, "" if ok else " FAIL"))
        if not ok:
            fails[1].append(s)
    if slower > 0.05:
        fails[3].append(s)
        if s > 4096:
            notes.append("%+.1f%% slower FAIL" % (100 * slower))
    print("%8s | %10.2f %10.2f %10.2f | %9s %9s %9s | %6.2f | %s" % (
        human(s), best["A"][s], best["B"][s], best["both"][s],
        fmt_bw(bw("A", s)), fmt_bw(bw("B", s)), fmt_bw(bw("both", s)),
        bw("both", s) / bw("A", s), ", ".join(notes)))
print()
big = [s for s in sizes if s >= 1 << 20]
small = [s for s in sizes if s <= 4096]


def verdict(n, text, detail):
    at = " at " + ", ".join(map(human, fails[n])) if fails[n] else ""
    print("target %d: %-55s %s%s%s" % (n, text, "FAIL" if fails[n] else "holds", detail, at))


verdict(1, "sizes >= 1 MiB: bandwidth over both >= 85% of A + B",
        " (lowest %.1f%%)" % (100 * min(bw("both", s) / (bw("A", s) + bw("B", s)) for s in big))
        if big else " (no such sizes)")
verdict(2, "sizes <= 4 KiB: latency over both within 5% of A",
        " (worst %+.1f%%)" % (100 * max(best["both"][s] / best["A"][s] - 1 for s in small))
        if small else " (no such sizes)")
verdict(3, "every size: both at most 5% slower than A",
        " (worst %+.1f%%)" % (100 * max(best["both"][s] / best["A"][s] - 1 for s in sizes)))
with open(os.path.join(out, "verdict"), "w") as f:
    f.write("fail\n" if any(fails.values()) else "ok\n")
EOF
[ -f "$out/verdict" ] || die "no table (see $out/raw)"
echo "# data: $out/striping.tsv"
if [ "$plot" = 1 ]; then
    python3 "$root/ci/plot-striping.py" "$out/striping.tsv" "$svg" && echo "# plot: $svg"
fi
[ "$(cat "$out/verdict")" = ok ]
