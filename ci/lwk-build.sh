#!/usr/bin/env bash
# lwk-build.sh - the lightweight-kernel node library (crate stormpi-lwk), built and installed as
# libmpi.a with mpi.h:
#   target/lwk/<triple>/lib/libmpi.a, target/lwk/<triple>/include/mpi.h
# for each TRIPLE given (default: the host, x86_64-unknown-linux-musl, aarch64-unknown-linux-musl);
# with --defmt, the host library logging through defmt (DEFMT_LOG=debug) in target/lwk/defmt/lib
# with defmt-host.x, defmt's linker script made to extend (INSERT AFTER .comment) the default one,
# so a Linux link takes it: cc -static -no-pie prog.c libmpi.a -Wl,-T,defmt-host.x -lgcc_eh ...
# The cargo output keeps its crate's name (libstormpi_lwk.a) because shim-linux's library is
# already called mpi in the same workspace.
#
# Link a C program for a musl target with the musl C compiler and the unwinder Rust ships:
#   musl-gcc -static -Wl,--gc-sections -I target/lwk/x86_64-unknown-linux-musl/include prog.c \
#       target/lwk/x86_64-unknown-linux-musl/lib/libmpi.a target/lwk/x86_64-unknown-linux-musl/lib/libunwind.a
#   aarch64-linux-gnu-gcc -specs /usr/lib/aarch64-linux-musl/musl-gcc.specs -static ... (same)
# and for the host (glibc): cc -static prog.c libmpi.a -lgcc_eh -lpthread -lm -ldl -lc
#
# The installed libmpi.a defines only MPI's symbols (stormcc --localize-library, with the
# target's binutils): cargo's would bring the Rust runtime and compiler_builtins' libm (cbrt,
# fmod, ...) into the program's namespace. The defmt library keeps defmt's link-time symbols
# (_defmt_*, __defmt_*) too: defmt's linker script names them.
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(rustc -vV | sed -n 's/^host: //p')
if [ "${1:-}" = "--defmt" ]; then
    # A target directory of its own: the feature would otherwise rebuild the plain library.
    DEFMT_LOG=debug CARGO_TARGET_DIR=target/lwk-defmt cargo build --release -p stormpi-lwk --lib --features defmt
    dest=target/lwk/defmt
    mkdir -p "$dest/lib" "$dest/include"
    cp target/lwk-defmt/release/libstormpi_lwk.a "$dest/lib/libmpi.a"
    cargo build --release -p stormpi-bootstrap --bin stormcc
    target/release/stormcc --localize-library "$dest/lib/libmpi.a"
    cp core/include/mpi.h "$dest/include/"
    script=$(ls -t target/lwk-defmt/release/build/defmt-*/out/defmt.x | head -1)
    python3 - "$script" "$dest/lib/defmt-host.x" <<'PY'
import sys
s = open(sys.argv[1]).read()
i = s.index("ASSERT(")
head = s[:i].rstrip()
assert head.endswith("}"), "defmt.x: SECTIONS does not end where expected"
open(sys.argv[2], "w").write(head[:-1] + "} INSERT AFTER .comment;\n\n" + s[i:])
PY
    echo "lwk-build: $dest/lib/libmpi.a, $dest/lib/defmt-host.x"
    exit 0
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("$host" x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
cargo build --release -p stormpi-bootstrap --bin stormcc
# A C compiler whose binutils (ld, objcopy, ar) handle the target's objects.
compiler_for() {
    local arch=${1%%-*}
    if [ "$arch" = "${host%%-*}" ]; then echo cc; else echo "$arch-linux-gnu-gcc"; fi
}
for t in "${targets[@]}"; do
    if [ "$t" = "$host" ]; then
        cargo build --release -p stormpi-lwk --lib
        lib=target/release/libstormpi_lwk.a
    else
        cargo build --release -p stormpi-lwk --lib --target "$t"
        lib=target/$t/release/libstormpi_lwk.a
    fi
    dest=target/lwk/$t
    mkdir -p "$dest/lib" "$dest/include"
    cp "$lib" "$dest/lib/libmpi.a"
    STORMPI_CC=$(compiler_for "$t") target/release/stormcc --localize-library "$dest/lib/libmpi.a"
    cp core/include/mpi.h "$dest/include/"
    unwind=$(rustc --print sysroot)/lib/rustlib/$t/lib/self-contained/libunwind.a
    [ ! -f "$unwind" ] || cp "$unwind" "$dest/lib/"
    echo "lwk-build: $dest/lib/libmpi.a"
done
