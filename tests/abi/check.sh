#!/usr/bin/env bash
# Checks that stormpi's C interface is MPICH's ABI.
#
#   tests/abi/check.sh            check on this machine (x86_64 or any other Debian architecture)
#   tests/abi/check.sh --cross    also check i686, aarch64 and s390x (see "Cross targets" below)
#
# Needs: apt-get install mpich libmpich-dev (brings gcc, g++), python3. rustc is used when
# present (the Rust steps are skipped otherwise). Exits non-zero if any step fails, after
# printing what differs.
#
# Steps:
#   header        core/include/mpi.h compiles cleanly as C99, C11 and C++11
#   values        abi_values.c prints the same constants, handles, sizes and MPI_Status layout
#                 against stormpi's and MPICH's mpi.h
#   coverage      both headers define the same constant and type names, and abi_values.c prints
#                 all of them
#   prototypes    every function, typedef and object of MPICH's header, redeclared after
#                 stormpi's mpi.h with MPICH's exact text, compiles (a mismatch is an error)
#   functions     both headers declare the same functions; names.rs lists exactly them
#   link          every symbol stormpi's mpi.h declares is one names.rs lists
#   mangling      C++ functions taking each MPI type get the same mangled names with both headers
#   rust values   core/src/capi/abi.rs gives the values abi_values.c prints
#   rust tests    the unit tests of abi.rs and names.rs
#
# Cross targets (--cross): for i386, arm64 and s390x, MPICH's headers come from Debian's
# libmpich-dev package of that architecture (downloaded with apt-get into a private directory, or
# taken from $STORMPI_ABI_DEBS/libmpich-dev_*_<arch>.deb), programs are built with
# <triple>-gcc (Debian: gcc-i686-linux-gnu, gcc-aarch64-linux-gnu, gcc-s390x-linux-gnu) and run
# with qemu-user; the Rust printer is built when rustup has the target. A target whose tools are
# missing is skipped with a message.
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
include="$root/core/include"
abi_rs="$root/core/src/capi/abi.rs"
names_rs="$root/core/src/capi/names.rs"
values_c="$here/abi_values.c"
tool="$here/abi_tool.py"

cross=0
for arg in "$@"; do
    case "$arg" in
        --cross) cross=1 ;;
        *) echo "usage: $0 [--cross]" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/stormpi-abi.XXXXXX")
trap 'rm -rf "$work"' EXIT

failures=0
skips=0

# run NAME COMMAND...: runs a step; its output is shown on failure, its last line on success.
# Programs a step executes run under $limit, so nothing can hang.
limit="timeout 120"
run() {
    local name=$1 last
    shift
    printf '%-44s' "$name"
    if "$@" >"$work/step.log" 2>&1; then
        last=$(tail -n 1 "$work/step.log" | cut -c 1-60)
        echo "ok${last:+ ($last)}"
    else
        echo "FAIL"
        sed 's/^/    /' "$work/step.log" | head -n 200
        failures=$((failures + 1))
    fi
}

skip() {
    printf '%-44s%s\n' "$1" "SKIP ($2)"
    skips=$((skips + 1))
}

# same A B LABEL_A LABEL_B: fails, printing the differing lines, unless A and B are identical.
same() {
    if diff "$1" "$2" >"$work/diff.txt"; then
        echo "$(wc -l <"$1") lines"
    else
        sed -n -e "s/^< /$3: /p" -e "s/^> /$4: /p" "$work/diff.txt"
        return 1
    fi
}

need() {
    command -v "$1" >/dev/null 2>&1 || { echo "check.sh: $1 not found ($2)" >&2; exit 2; }
}
need mpicc.mpich "apt-get install mpich libmpich-dev"
need mpicxx.mpich "apt-get install mpich libmpich-dev"
need cc "apt-get install gcc"
need c++ "apt-get install g++"
need python3 "apt-get install python3"
need timeout "coreutils"

# ---- inputs -------------------------------------------------------------------------------------

echo '#include <mpi.h>' >"$work/inc.c"
mpicc.mpich -E -P "$work/inc.c" >"$work/mpich.i"
mpicc.mpich -E -dM "$work/inc.c" >"$work/mpich.macros"
cc -E -P -I"$include" "$work/inc.c" >"$work/ours.i"
cc -E -dM -I"$include" "$work/inc.c" >"$work/ours.macros"
python3 "$tool" stubs "$names_rs" >"$work/stubs.c"
printf 'int MPIR_Dup_fn(void) { return 0; }\n' >"$work/mpich_stubs.c"

# ---- header -------------------------------------------------------------------------------------

printf '#include <mpi.h>\nint main(void) { return 0; }\n' >"$work/empty.c"
cp "$work/empty.c" "$work/empty.cc"
warn=(-Wall -Wextra -pedantic -Werror -Wstrict-prototypes -Wundef -Wshadow)
run "header: gcc -std=c99 -pedantic" cc -std=c99 "${warn[@]}" -fsyntax-only -I"$include" "$work/empty.c"
run "header: gcc -std=c11 -pedantic" cc -std=c11 "${warn[@]}" -fsyntax-only -I"$include" "$work/empty.c"
run "header: g++ -std=c++11 -pedantic" c++ -std=c++11 -Wall -Wextra -pedantic -Werror -fsyntax-only \
    -I"$include" "$work/empty.cc"

# ---- values -------------------------------------------------------------------------------------

values() {
    mpicc.mpich -std=c11 -o "$work/values_mpich" "$values_c" &&
        cc -std=c11 -Wall -Wextra -Werror -I"$include" -o "$work/values_ours" "$values_c" "$work/stubs.c" &&
        $limit "$work/values_mpich" >"$work/values_mpich.txt" &&
        $limit "$work/values_ours" >"$work/values_ours.txt" &&
        same "$work/values_mpich.txt" "$work/values_ours.txt" MPICH stormpi
}
run "values: stormpi vs MPICH" values
run "coverage: names in both headers" python3 "$tool" coverage "$work/mpich.i" "$work/mpich.macros" \
    "$work/ours.i" "$work/ours.macros" "$values_c"

# ---- prototypes and symbols ---------------------------------------------------------------------

prototypes() {
    python3 "$tool" redecl "$work/mpich.i" >"$work/redecl.c" &&
        cc -std=c11 -pedantic-errors -Wall -Wextra -Werror -fsyntax-only -I"$include" "$work/redecl.c" &&
        echo "$(grep -c ';' "$work/redecl.c") declarations"
}
run "prototypes: MPICH's declarations" prototypes
run "functions: headers and names.rs" python3 "$tool" functions "$work/mpich.i" "$work/ours.i" "$names_rs"

link() {
    python3 "$tool" link-probe "$work/ours.i" >"$work/link.c" &&
        cc -std=c11 -Wall -Wextra -Werror -I"$include" -o "$work/link" "$work/link.c" "$work/stubs.c" &&
        $limit "$work/link" && echo "$(grep -c 'sink =' "$work/link.c") symbols"
}
run "link: mpi.h symbols are in names.rs" link

mangling() {
    python3 "$tool" cxx-probe "$work/mpich.i" >"$work/probe.cc" &&
        mpicxx.mpich -DMPICH_SKIP_MPICXX -c -o "$work/probe_mpich.o" "$work/probe.cc" &&
        c++ -c -I"$include" -o "$work/probe_ours.o" "$work/probe.cc" &&
        nm -P --defined-only "$work/probe_mpich.o" | awk '{print $1}' | sort >"$work/mangled_mpich.txt" &&
        nm -P --defined-only "$work/probe_ours.o" | awk '{print $1}' | sort >"$work/mangled_ours.txt" &&
        same "$work/mangled_mpich.txt" "$work/mangled_ours.txt" MPICH stormpi
}
run "mangling: C++ names of MPI types" mangling

# ---- Rust ---------------------------------------------------------------------------------------

rust_values() {
    local printer=$1 out=$2 ours=$3
    shift 3
    [ -s "$ours" ] || { echo "no output of the C values step to compare with"; return 1; }
    python3 "$tool" rust-printer "$values_c" "$abi_rs" >"$work/rust_values.rs" &&
        rustc --edition 2021 "$@" -o "$printer" "$work/rust_values.rs" &&
        $limit ${RUNNER:-} "$printer" >"$out" &&
        grep -v '^c:' "$ours" >"$out.expected" &&
        same "$out.expected" "$out" "mpi.h " "abi.rs"
}
rust_tests() {
    local f
    for f in "$abi_rs" "$names_rs"; do
        rustc --edition 2021 --test -o "$work/rust_tests" "$f" &&
            RUST_BACKTRACE=0 $limit "$work/rust_tests" -q || return 1
    done
}
if command -v rustc >/dev/null 2>&1; then
    run "rust values: abi.rs vs stormpi" rust_values "$work/rust_values" "$work/rust.txt" "$work/values_ours.txt"
    run "rust tests: abi.rs, names.rs" rust_tests
else
    skip "rust values: abi.rs vs stormpi" "rustc not found"
    skip "rust tests: abi.rs, names.rs" "rustc not found"
fi

# ---- cross targets ------------------------------------------------------------------------------

# mpich_headers ARCH: prints the include directory of MPICH's headers for a Debian architecture.
# The package is downloaded with apt-get into the work directory (the system's apt state is
# neither read for the foreign architecture nor changed).
mpich_headers() {
    local arch=$1 deb dir="$work/mpich-$1"
    deb=$(ls "${STORMPI_ABI_DEBS:-/nonexistent}"/libmpich-dev_*_"$arch".deb 2>/dev/null | head -n 1)
    if [ -z "$deb" ]; then
        local apt=(apt-get -q -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache"
            -o APT::Architectures::="$arch")
        mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/debs"
        (cd "$work/debs" &&
            { timeout 300 "${apt[@]}" update >/dev/null 2>&1 || true; } &&
            timeout 300 "${apt[@]}" download "libmpich-dev:$arch" >/dev/null 2>&1) || return 1
        deb=$(ls "$work/debs"/libmpich-dev_*_"$arch".deb 2>/dev/null | head -n 1)
        [ -n "$deb" ] || return 1
    fi
    mkdir -p "$dir" && dpkg-deb -x "$deb" "$dir" || return 1
    dirname "$(find "$dir" -name mpi.h -path '*mpich*' | head -n 1)"
}

cross_values() {
    local gcc=$1 mpich_inc=$2
    "$gcc" -std=c11 -static -I"$mpich_inc" -o "$work/xv_mpich" "$values_c" "$work/mpich_stubs.c" &&
        "$gcc" -std=c11 -static -Wall -Wextra -Werror -I"$include" -o "$work/xv_ours" "$values_c" "$work/stubs.c" &&
        $limit $RUNNER "$work/xv_mpich" >"$work/xv_mpich.txt" &&
        $limit $RUNNER "$work/xv_ours" >"$work/xv_ours.txt" &&
        same "$work/xv_mpich.txt" "$work/xv_ours.txt" MPICH stormpi
}

cross_prototypes() {
    local gcc=$1 mpich_inc=$2
    "$gcc" -E -P -I"$mpich_inc" "$work/inc.c" >"$work/x_mpich.i" &&
        python3 "$tool" redecl "$work/x_mpich.i" >"$work/x_redecl.c" &&
        "$gcc" -std=c11 -pedantic-errors -Wall -Wextra -Werror -fsyntax-only -I"$include" "$work/x_redecl.c" &&
        "$gcc" -E -P -I"$include" "$work/inc.c" >"$work/x_ours.i" &&
        python3 "$tool" functions "$work/x_mpich.i" "$work/x_ours.i" "$names_rs"
}

if [ "$cross" = 1 ]; then
    # Debian architecture, GNU triple, qemu-user binary, Rust target
    for target in "i386 i686-linux-gnu qemu-i386 i686-unknown-linux-gnu" \
        "arm64 aarch64-linux-gnu qemu-aarch64 aarch64-unknown-linux-gnu" \
        "s390x s390x-linux-gnu qemu-s390x s390x-unknown-linux-gnu"; do
        set -- $target
        arch=$1 gcc="$2-gcc" qemu=$3 rust_target=$4
        if ! command -v "$gcc" >/dev/null 2>&1 || ! command -v "$qemu" >/dev/null 2>&1; then
            skip "$arch: all" "needs $gcc and $qemu"
            continue
        fi
        if ! mpich_inc=$(mpich_headers "$arch") || [ -z "$mpich_inc" ]; then
            skip "$arch: all" "could not get libmpich-dev:$arch"
            continue
        fi
        export RUNNER="$qemu"
        run "$arch: header gcc -std=c99 -pedantic" "$gcc" -std=c99 "${warn[@]}" -fsyntax-only \
            -I"$include" "$work/empty.c"
        run "$arch: values stormpi vs MPICH" cross_values "$gcc" "$mpich_inc"
        run "$arch: prototypes and functions" cross_prototypes "$gcc" "$mpich_inc"
        if command -v rustc >/dev/null 2>&1 && [ -d "$(rustc --print sysroot)/lib/rustlib/$rust_target" ]; then
            run "$arch: rust values" rust_values "$work/xrust" "$work/xrust.txt" "$work/xv_ours.txt" \
                --target "$rust_target" -C linker="$gcc" -C target-feature=+crt-static
        else
            skip "$arch: rust values" "rustup target add $rust_target"
        fi
        unset RUNNER
    done
fi

echo
if [ "$failures" -ne 0 ]; then
    echo "ABI check FAILED: $failures step(s)"
    exit 1
fi
echo "ABI check passed ($skips step(s) skipped)"
