#!/usr/bin/env bash
# bench-coll-hier.sh - the node-aware collectives against the flat ones on two "hosts": network
# namespaces h1 and h2 joined by one veth pair (`hl`, 10.78.1.0/24), with a bridge in the root
# namespace (a /24 in 10.200-249.x.0 chosen by process id, `eth0` in the hosts) for stormrun's
# PMI traffic only. bench/coll.c
# (osu-style latency) runs PER_HOST ranks on each host (sm inside a host, tcp across), with
# `--mca coll_hier on` and `--mca coll_hier off`, interleaved per repetition; for each
# (collective, size) the lowest latency of all repetitions is kept.
#
# Printed: `# ...` comments (machine, load) and one line per (collective, size):
#     <collective> <bytes> flat <usec> hier <usec> hier/flat <ratio>
#
# usage: sudo ci/bench-coll-hier.sh [--reps N] [--per-host K] [--sizes LIST] [--only "A B"]
#                                   [--time SECONDS] [--rate MBIT] [--round-robin]
#   --reps N       repetitions (default 3)
#   --per-host K   ranks per host (default 2)
#   --sizes LIST   message sizes in bytes, comma-separated (default 8,1048576)
#   --only "A B"   collectives (default "Barrier Bcast Allreduce Reduce")
#   --time S       time per timed batch in bench/coll.c (default 0.05)
#   --rate MBIT    shape the link with tbf at this rate, both ends (default: unshaped veth)
#   --round-robin  place ranks alternately on h1 and h2 (default: the first PER_HOST on h1)
# Needs root (namespaces), iproute2, and target/release/{stormrun,stormcc} (cargo build
# --release; or set STORMRUN and STORMCC). The namespaces and links are deleted on exit, however
# it ends. Exit status: 0 when every run passed, 2 on a setup or run failure.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
per_host=2
sizes=8,1048576
only="Barrier Bcast Allreduce Reduce"
btime=0.05
rate=
hosts_of() { echo "$1:$per_host,$2:$per_host"; }
placement="by host"
while [ $# -gt 0 ]; do
    case "$1" in
        --reps) shift; reps=$1 ;;
        --per-host) shift; per_host=$1 ;;
        --sizes) shift; sizes=$1 ;;
        --only) shift; only=$1 ;;
        --time) shift; btime=$1 ;;
        --rate) shift; rate=$1 ;;
        --round-robin) hosts_of() { echo "$1:1,$2:1"; }; placement="round robin" ;;
        -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
        *) echo "bench-coll-hier.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "bench-coll-hier.sh: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
command -v ip >/dev/null || die "iproute2 (ip) is not installed"
stormrun=${STORMRUN:-$root/target/release/stormrun}
stormcc=${STORMCC:-$root/target/release/stormcc}
[ -x "$stormrun" ] && [ -x "$stormcc" ] ||
    die "no $stormrun or $stormcc: run cargo build --release first"

tag=$$
ns1="hier-h1-$tag"
ns2="hier-h2-$tag"
br="hibr$tag"
# A management subnet of this run's own (other jobs on the machine may have bridges too).
mgmt=10.$((200 + tag % 50)).$(((tag / 50) % 256))
work=$(mktemp -d /tmp/stormpi-coll-hier.XXXXXX)
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

ip netns add "$ns1" 2>"$work/err" || die "ip netns add refused: $(cat "$work/err")"
run ip netns add "$ns2"
run ip link add "$br" type bridge
run ip addr add "$mgmt.1/24" dev "$br"
run ip link set "$br" up
i=1
for ns in "$ns1" "$ns2"; do
    v="hiv$i-$tag"
    run ip link add "$v" type veth peer name eth0 netns "$ns"
    run ip link set "$v" master "$br" up
    run ip -n "$ns" addr add "$mgmt.$((i + 1))/24" dev eth0
    run ip -n "$ns" link set eth0 up
    run ip -n "$ns" link set lo up
    i=$((i + 1))
done
run ip link add hl netns "$ns1" type veth peer name hl netns "$ns2"
run ip -n "$ns1" addr add 10.78.1.1/24 dev hl
run ip -n "$ns2" addr add 10.78.1.2/24 dev hl
run ip -n "$ns1" link set hl up
run ip -n "$ns2" link set hl up
if [ -n "$rate" ]; then
    for ns in "$ns1" "$ns2"; do
        run ip netns exec "$ns" tc qdisc add dev hl root tbf rate "${rate}mbit" burst 256kb \
            latency 10ms
    done
fi

run "$stormcc" -O2 -o "$work/coll" "$root/bench/coll.c"
np=$((2 * per_host))
echo "# bench-coll-hier: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# 2 hosts (netns) x $per_host ranks placed $placement, link hl ${rate:+tbf ${rate} Mbit/s}${rate:-unshaped veth};" \
     "$reps repetitions of (flat, hier), best kept; bench/coll.c -s $sizes -t $btime"
for rep in $(seq "$reps"); do
    for mode in off on; do
        for c in $only; do
            "$stormrun" --host "$(hosts_of "$ns1" "$ns2")" --launch-agent "ip netns exec" \
                --pmi-address "$mgmt.1" --timeout 600 --oversubscribe -n "$np" \
                --mca btl_tcp_if_exclude eth0 --mca coll_hier "$mode" \
                "$work/coll" -s "$sizes" -t "$btime" -o "$c" \
                >"$work/$mode.$c.$rep.out" 2>"$work/$mode.$c.$rep.err" &
            job=$!
            wait "$job" || die "run failed ($mode $c, repetition $rep): $(tail -5 "$work/$mode.$c.$rep.err")"
            job=
        done
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for f in "$work"/*.out; do
    mode=$(basename "$f" | cut -d. -f1)
    awk -v m="$mode" '$1 == "coll" { print m, $2, $3, $4 }' "$f"
done | awk '
    {
        key = $2 " " $3
        if (!(key in seen)) { seen[key] = 1; keys[++n] = key }
        if (!((key, $1) in best) || $4 < best[key, $1]) best[key, $1] = $4
    }
    END {
        for (i = 1; i <= n; i++) {
            k = keys[i]
            f = best[k, "off"]; h = best[k, "on"]
            printf "%s flat %.2f hier %.2f hier/flat %.2f\n", k, f, h, (f > 0 ? h / f : 0)
        }
    }'
