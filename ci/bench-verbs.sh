#!/usr/bin/env bash
# bench-verbs.sh - the verbs BTL's three large-message protocols against each other, and the
# registration cache on and off, over the software verbs device (verbs-shmem), in one run.
#
# usage: ci/bench-verbs.sh [--quick] [--reps N] [--min BYTES] [--max BYTES] [--scale S]
#                          [--frag BYTES] [--send-length BYTES] [--rndv-eager BYTES]
#                          [--configs "rget/off pipeline/off ..."]
#   --reps N    repetitions, the configurations interleaved per repetition; best figure kept
#               (lowest latency, highest bandwidth); default 3
#   --min/--max message sizes (bench/p2p.c -s/-m; default 64 KiB .. 16 MiB)
#   --scale S   bench/p2p.c's iteration counts x S (default 1)
#   --quick     one repetition, iteration counts x0.2 (a smoke test, noisy numbers)
#   --frag B    btl_verbs_rdma_pipeline_frag_length for the pipeline (default the BTL's, 1 MiB)
#   --send-length B  btl_verbs_rdma_pipeline_send_length of the pipesend configurations
#               (default 262144: the first 256 KiB of a message through the receive queue)
#   --rndv-eager B   btl_verbs_rndv_eager_limit of every configuration (default the BTL's, 0)
#   --configs   the configurations to run (default all seven below)
#
# bench/p2p.c is built with stormcc -dynamic-mpi (linked with libmpi.so, whose memory hooks let
# the registration cache run: mpi_leave_pinned auto is off with libmpi.a) and run at 2 ranks with
# btl=self,verbs and btl_verbs_library=target/release/libverbs_shmem.so, in seven configurations:
#   rget/on  rget/off  pipeline/on  pipeline/off  pipesend/on  pipesend/off  send
# (btl_verbs_large_protocol / mpi_leave_pinned; pipesend is the pipeline with
# btl_verbs_rdma_pipeline_send_length). Tables: one-way latency (us) and bandwidth (MB/s, a
# window of 64 messages) per size, each configuration's ratio to rget/on; then, from the BTL's
# finalize lines (both ranks, whole run, best run), the time a large-message transfer was under
# way and the time spent registering memory, split into registering while a transfer was under
# way (hidden behind it: the pipeline registers fragments while earlier ones are written) and
# registering with none under way (in the message's path), beside the run's wall time. With the
# cache on registering is the first message's, off it is every message's.
# Open MPI and MPICH cannot be compared here: there is no RDMA device on this machine and they
# cannot load the software device (their verbs/UCX transports need a kernel RDMA device).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
reps=3
min=65536
max=16777216
scale=1
frag=""
send_length=262144
rndv=""
configs="rget/on rget/off pipeline/on pipeline/off pipesend/on pipesend/off send/off"
while [ $# -gt 0 ]; do
    case "$1" in
    --reps) reps=$2; shift ;;
    --min) min=$2; shift ;;
    --max) max=$2; shift ;;
    --scale) scale=$2; shift ;;
    --quick) reps=1; scale=0.2 ;;
    --frag) frag="--mca btl_verbs_rdma_pipeline_frag_length $2"; shift ;;
    --send-length) send_length=$2; shift ;;
    --rndv-eager) rndv="--mca btl_verbs_rndv_eager_limit $2"; shift ;;
    --configs) configs=$2; shift ;;
    *) echo "bench-verbs: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

bin=$root/target/release
stormcc=${STORMCC:-$bin/stormcc}
stormrun=${STORMRUN:-$bin/stormrun}
lib=$bin/libverbs_shmem.so
for f in "$stormcc" "$stormrun" "$lib"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "bench-verbs: $f is not built (cargo build --release --workspace)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$stormcc" -O2 -dynamic-mpi -o "$work/p2p" "$root/bench/p2p.c" || { echo "bench-verbs: building bench/p2p.c failed" >&2; exit 1; }

for r in $(seq 1 "$reps"); do
    for c in $configs; do
        proto=${c%/*}
        pinned=${c#*/}
        name=$c
        [ "$proto" = send ] && name=send
        sl=""
        if [ "$proto" = pipesend ]; then
            proto=pipeline
            sl="--mca btl_verbs_rdma_pipeline_send_length $send_length"
        fi
        start=$(date +%s.%N)
        if ! "$stormrun" -n 2 --timeout 600 --mca btl self,verbs --mca btl_verbs_library "$lib" \
            --mca btl_verbs_large_protocol "$proto" --mca mpi_leave_pinned "$pinned" \
            --mca mpi_log_level 2 $frag $sl $rndv "$work/p2p" -s "$min" -m "$max" -i "$scale" \
            >"$work/out" 2>"$work/err"; then
            echo "bench-verbs: $name failed:" >&2
            tail -5 "$work/err" >&2
            exit 1
        fi
        end=$(date +%s.%N)
        sed "s|^|$name $r |" "$work/out" >>"$work/all"
        reg=$(grep -o '[0-9]* us registering$' "$work/err" | awk '{s += $1} END {print s + 0}')
        times=$(grep 'us transferring large messages' "$work/err" | sed 's/.*verbs BTL: //' |
            awk '{t += $1; h += $6; e += $12} END {print t + 0, h + 0, e + 0}')
        echo "$name $r wall $(echo "$end - $start" | bc) $reg $times" >>"$work/all"
    done
done

python3 - "$work/all" <<'PY'
import sys
from collections import defaultdict
order = ["rget/on", "rget/off", "pipeline/on", "pipeline/off", "pipesend/on", "pipesend/off", "send"]
lat, bw, wall = defaultdict(dict), defaultdict(dict), defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) < 4 or w[2].startswith("#"):
        continue
    name, kind = w[0], w[2]
    if kind == "lat":
        n, v = int(w[3]), float(w[4])
        lat[n][name] = min(v, lat[n].get(name, v))
    elif kind == "bw":
        n, v = int(w[3]), float(w[4])
        bw[n][name] = max(v, bw[n].get(name, v))
    elif kind == "wall":
        wall[name].append((float(w[3]), int(w[4]), int(w[5]), int(w[6]), int(w[7])))
def table(title, data, unit, better):
    print(f"\n{title} ({unit}; ratio to rget/on, {better} is better)")
    print(f"{'bytes':>10} " + " ".join(f"{c:>19}" for c in order))
    for n in sorted(data):
        base = data[n].get("rget/on")
        cells = []
        for c in order:
            v = data[n].get(c)
            if v is None:
                cells.append(f"{'-':>19}")
            else:
                r = (v / base) if base else 0
                cells.append(f"{v:>11.1f} ({r:4.2f}x)")
        print(f"{n:>10} " + " ".join(cells))
table("one-way latency", lat, "us", "lower")
table("bandwidth", bw, "MB/s", "higher")
print("\ntransfer and registration time of a whole run (both ranks, ms) beside its wall time (best run)")
print(f"{'':>14}  {'transferring':>12} {'registering':>11} {'behind a transfer':>17} {'in the path':>11} {'hidden':>6} {'wall s':>7}")
for c in order:
    if wall[c]:
        t, reg, busy, hidden, exposed = min(wall[c])
        share = 100 * hidden / reg if reg else 0
        print(f"{c:>14}: {busy / 1000:12.1f} {reg / 1000:11.1f} {hidden / 1000:17.1f} {exposed / 1000:11.1f} {share:5.1f}% {t:7.2f}")
PY
