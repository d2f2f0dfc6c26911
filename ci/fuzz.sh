#!/usr/bin/env bash
# fuzz.sh - every cargo-fuzz target in fuzz/ for a bounded time each, from the committed seeds
# (fuzz/seeds/<target>), with AddressSanitizer:
#   pml_header     the PML's wire headers (parse, write back, the eager fast path)
#   tcp_wire       the TCP BTL's frame, handshake and address record
#   pmi_line       PMI-1 lines (parse and write back)
#   pmi2_command   PMI-2 length prefixes, commands (parse and write back) and process mappings
#   pmi_server     stormrun's PMI server fed any bytes by a rank
#   datatype_ctor  the datatype constructors with extreme arguments, against a model of the
#                  bounds rules in i128 (fuzz/src/lib.rs)
#   convertor      random type trees packed and unpacked (whole, in fragments, seeking, external32)
#                  against a packer written in the target
#   portals_ring   the software Portals NI's inbound ring fed any bytes, consumed by State::progress
#   osc_wire       the one-sided active messages (parse, write back)
#   part_handshake the partitioned handshake record (parse, write back)
#   dpm_card       business cards of another job's processes (parse, read every entry, write back)
# A crash fails the run and leaves its input in fuzz/artifacts/<target>/; make it a unit test
# beside the code it broke. Seeds of datatype_ctor, convertor and portals_ring come from fuzz/seeds/make-seeds.py. To hunt
# rather than check, run a target longer with overflow checks on:
#   cd fuzz && cargo +nightly fuzz run -O -a <target> -- -max_total_time=600
# Needs the nightly toolchain and cargo-fuzz (ci/setup.sh installs cargo-fuzz where a nightly
# toolchain is installed); without them it says so and exits 0.
#
# usage: ci/fuzz.sh [SECONDS per target, default 30; ci/test.sh gives 20]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-30}

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz: SKIPPED: no nightly toolchain here (cargo-fuzz needs -Zsanitizer)"
    exit 0
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz: SKIPPED: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo +nightly fuzz build -O
for t in $(cargo +nightly fuzz list); do
    mkdir -p "$work/$t"
    echo "fuzz: $t for ${secs}s"
    cargo +nightly fuzz run -O "$t" "$work/$t" "seeds/$t" -- -max_total_time="$secs" \
        -rss_limit_mb=2048 -print_final_stats=1 2>&1 | grep -E '^(Done|stat::number_of_executed_runs)|panicked|ERROR|SUMMARY|artifact' || true
    # grep ate the status: a crash leaves its input behind.
    if compgen -G "artifacts/$t/*" >/dev/null; then
        echo "fuzz: $t crashed; inputs in fuzz/artifacts/$t/" >&2
        exit 1
    fi
done
