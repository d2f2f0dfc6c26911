#!/usr/bin/env bash
# setup.sh - installs what building and testing stormpi needs on a fresh Debian machine.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
#
#   Debian packages: C, C++ and Fortran compilers (gfortran: the Fortran binding's tests), binutils, pkg-config, MPICH (its header and launcher for the ABI and Hydra tests),
#                    Open MPI (the reference for benchmarks), iproute2 (network namespaces),
#                    cross compilers for s390x, i686 and ppc64 and qemu-user (heterogeneous jobs);
#                    for the lightweight-kernel node build: musl-tools, gcc-aarch64-linux-gnu and
#                    musl-dev:arm64 (static musl programs, aarch64 ones under qemu-aarch64),
#                    slurm-wlm and munge (a one-host Slurm starts node jobs with srun);
#                    libpmix-dev (PMIx's header: a test checks the client's struct layouts; the
#                    library itself loads libpmix2 at run time under srun --mpi=pmix and mpirun);
#                    scalapack-mpi-test (ScaLAPACK's test programs built against MPICH and Open
#                    MPI: tests/tests/scalapack.rs runs them on stormpi, Open MPI the reference),
#                    libclang-dev (bindgen, for rsmpi's mpi-sys in ci/rsmpi.sh);
#                    libhdf5-mpich-dev and hdf5-tools (parallel HDF5 built against MPICH, h5pcc
#                    and h5dump: tests/tests/hdf5.rs runs it on stormpi's MPI-IO);
#                    python3-venv and python3-dev (ci/mpi4py.sh builds mpi4py from its source
#                    from PyPI in a virtual environment);
#                    libibverbs-dev (rdma-core's verbs header, checked against verbs-sys's
#                    structs, and libibverbs, which the `vendor` build of verbs-sys links)
#   Rust:            rustfmt, clippy, the x86_64-unknown-none target (proves the core is no_std),
#                    the s390x, i686 and powerpc64 Linux targets (heterogeneous jobs), and the
#                    x86_64 and aarch64 musl targets (the node library); rust-src for the nightly
#                    toolchain where one is installed (ThreadSanitizer, ci/tsan.sh), and
#                    cargo-fuzz from crates.io with it (ci/fuzz.sh)
set -euo pipefail

need_pkgs=()
for p in gcc g++ gfortran libc6-dev make binutils pkg-config mpich libmpich-dev openmpi-bin libopenmpi-dev python3 \
    iproute2 qemu-user gcc-s390x-linux-gnu libc6-dev-s390x-cross gcc-i686-linux-gnu libc6-dev-i386-cross \
    gcc-powerpc64-linux-gnu libc6-dev-ppc64-cross musl-tools gcc-aarch64-linux-gnu slurm-wlm munge \
    scalapack-mpi-test libclang-dev libpmix-dev libhdf5-mpich-dev hdf5-tools python3-venv python3-dev \
    libibverbs-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${need_pkgs[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
fi

# musl's aarch64 headers and C library (the node build's C programs), from Debian's arm64 archive.
if ! dpkg-query -W -f='${Status}' musl-dev:arm64 2>/dev/null | grep -q "install ok installed"; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing musl-dev:arm64"
    $sudo dpkg --add-architecture arm64
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends musl-dev:arm64
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
# ThreadSanitizer (ci/tsan.sh) instruments the standard library too: the nightly toolchain's
# sources, where a nightly toolchain is installed.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    rustup component add rust-src --toolchain nightly >/dev/null 2>&1 || true
    # The fuzz targets (ci/fuzz.sh) run under cargo-fuzz, from crates.io.
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
fi
for t in x86_64-unknown-none s390x-unknown-linux-gnu i686-unknown-linux-gnu powerpc64-unknown-linux-gnu \
    x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    rustup target list --installed | grep -q "^$t\$" || rustup target add "$t"
done
