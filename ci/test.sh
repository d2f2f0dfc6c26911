#!/usr/bin/env bash
# test.sh - the whole test suite, as CI runs it: set-up, formatting, lints, the no_std build of
# the core, the ABI check against MPICH's header, and every unit and multi-process test.
set -euo pipefail
cd "$(dirname "$0")/.."

bash ci/setup.sh

step() { printf '\n== %s\n' "$*"; }

step "format"
cargo fmt --all -- --check

step "lints"
cargo clippy --workspace --all-targets -- -D warnings

step "core builds for x86_64-unknown-none (no_std, no heap)"
cargo build -p stormpi-core --target x86_64-unknown-none

step "build (release)"
cargo build --workspace --release --all-targets

step "verbs-sys linked against rdma-core's libibverbs (the tests link the software device)"
cargo build --release -p verbs-sys --features vendor --examples

step "cross builds of the library for the heterogeneous jobs (s390x, i686, ppc64)"
for t in s390x-unknown-linux-gnu i686-unknown-linux-gnu powerpc64-unknown-linux-gnu; do
    cargo build --release --target "$t" -p stormpi-linux --lib
done

step "node library (stormpi-lwk) for x86_64 and aarch64 musl, installed as libmpi.a"
bash ci/lwk-build.sh x86_64-unknown-linux-musl aarch64-unknown-linux-musl
bash ci/lwk-build.sh --defmt
export STORMPI_REQUIRE_CROSS=1

step "C ABI: mpi.h against MPICH's, and the libraries define all of it"
bash tests/abi/check.sh
target/release/stormcc --localize-library target/release/libmpi.a
bash ci/check-symbols.sh target/release
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    bash ci/check-symbols.sh "target/lwk/$t/lib" --static
done

step "ThreadSanitizer over the core's threaded and unit tests"
bash ci/tsan.sh

# Ten targets at 12 s each: about 2 min of fuzzing (plus the build) in every run.
step "fuzzing: each target of fuzz/ for 12 s"
bash ci/fuzz.sh 12

step "unit and multi-process tests"
STORMPI_BIN_DIR="$PWD/target/release" cargo test --workspace --release --no-fail-fast -- --test-threads=2

step "rsmpi (the mpi crate 0.8.2 from crates.io): its examples through MPICC and pkg-config, 2 and 4 ranks"
bash ci/rsmpi.sh

step "mpi4py 4.1.2's own test suite (from PyPI, built with mpicc) at 1, 2 and 4 ranks, against MPICH's"
bash ci/mpi4py.sh

step "all tests passed"
