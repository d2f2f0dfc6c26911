#!/usr/bin/env bash
# tsan.sh - ThreadSanitizer over the core's multi-threaded tests (core/tests/threads.rs: several
# threads in one engine at once) and its unit tests, with the standard library instrumented too
# (-Zbuild-std), so a report is about stormpi's own code. Needs a nightly toolchain with rust-src
# (ci/setup.sh adds rust-src when a nightly toolchain is installed); without one it says so and
# exits 0 (the threaded behaviour itself is tested by the ordinary suite either way).
#
# usage: ci/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "tsan: SKIPPED: no nightly toolchain here (ThreadSanitizer needs -Zsanitizer)"
    exit 0
fi
if ! rustup component list --installed --toolchain nightly 2>/dev/null | grep -q '^rust-src'; then
    echo "tsan: SKIPPED: the nightly toolchain has no rust-src (rustup component add rust-src --toolchain nightly)"
    exit 0
fi
host=$(rustc -vV | sed -n 's/^host: //p')
export RUSTFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
cargo +nightly test -Zbuild-std --target "$host" --target-dir target/tsan -p stormpi-core \
    --lib --test threads
