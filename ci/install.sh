#!/usr/bin/env bash
# install.sh - build stormpi (release) and install it under PREFIX.
#
# usage: ci/install.sh [--no-build] [PREFIX]        default PREFIX: $HOME/.local/stormpi
#
# It runs `cargo build --release -p stormpi-linux -p stormpi-bootstrap` first; --no-build installs
# what target/release (or $CARGO_TARGET_DIR/release) already holds.
#
# Layout:
#   PREFIX/bin/            stormrun, stormcc, stormcxx (-> stormcc), stormfort, stormpi-info;
#                          mpicc -> stormcc, mpicxx and mpic++ -> stormcxx,
#                          mpifort, mpif90 and mpif77 -> stormfort,
#                          mpirun and mpiexec -> stormrun
#   PREFIX/include/        mpi.h; mpif.h, mpi(_f08).f90 and .mod (the Fortran modules, compiled
#                          here by $STORMPI_FC or gfortran; skipped with a note when there is none)
#   PREFIX/lib/            libmpi.a (localized: only MPI's symbols global), libmpi.so,
#                          libmpich.so.12 -> libmpi.so (so that programs
#                          built with MPICH's mpicc run on stormpi with
#                          LD_LIBRARY_PATH=PREFIX/lib), libstormpi.so -> libmpi.so (the name
#                          pkg-config and stormcc --dynamic link: a program records it, and no
#                          other MPI has a library of that name to be loaded instead);
#                          the Fortran binding is part of libmpi: libmpifort.a -> libmpi.a,
#                          libmpifort.so -> libmpi.so, and libmpichfort.so.12 -> libmpi.so (so that
#                          programs built with MPICH's mpif90 run on stormpi too)
#   PREFIX/lib/pkgconfig/  stormpi.pc, mpi.pc -> stormpi.pc
#
# stormcc finds PREFIX/include and PREFIX/lib from its own location, so the tree can be moved
# (only stormpi.pc records PREFIX). Running the script again replaces an earlier installation.
set -euo pipefail

build=1
case "${1:-}" in
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    --no-build)
        build=0
        shift
        ;;
esac
if [ $# -gt 1 ] || [ "${1:-}" != "${1#-}" ]; then
    echo "usage: $0 [--no-build] [PREFIX]" >&2
    exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$HOME/.local/stormpi}
cargo=${CARGO:-cargo}
target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
rel=$target/release

if [ $build -eq 1 ]; then
    (cd "$root" && "$cargo" build --release -p stormpi-linux -p stormpi-bootstrap)
fi
for f in stormrun stormcc stormfort stormpi-info libmpi.a libmpi.so; do
    if [ ! -f "$rel/$f" ]; then
        echo "install.sh: $rel/$f is missing (cargo build --release -p stormpi-linux -p stormpi-bootstrap)" >&2
        exit 1
    fi
done

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd) # stormpi.pc needs an absolute path
bin=$prefix/bin inc=$prefix/include lib=$prefix/lib pc=$prefix/lib/pkgconfig
install -d "$bin" "$inc" "$lib" "$pc"

# install(1) replaces files by unlink + create, so a running stormrun or a program using the old
# libmpi.so keeps its copy.
install -m 755 "$rel/stormrun" "$rel/stormcc" "$rel/stormfort" "$rel/stormpi-info" "$bin/"
install -m 644 "$root/core/include/mpi.h" "$root/fortran/include/mpif.h" "$root/fortran/include/mpi.f90" \
    "$root/fortran/include/mpi_f08.f90" "$inc/"
install -m 644 "$rel/libmpi.a" "$lib/"
install -m 755 "$rel/libmpi.so" "$lib/"
# cargo's libmpi.a defines the Rust runtime and compiler_builtins' libm too; the installed one
# defines only MPI's symbols, so it cannot replace a program's own cbrt or fmod.
"$rel/stormcc" --localize-library "$lib/libmpi.a" >/dev/null

# stormcc tells C from C++ by the name it is called by.
ln -sfn stormcc "$bin/stormcxx"
ln -sfn stormcc "$bin/mpicc"
ln -sfn stormcxx "$bin/mpicxx"
ln -sfn stormcxx "$bin/mpic++"
ln -sfn stormfort "$bin/mpifort"
ln -sfn stormfort "$bin/mpif90"
ln -sfn stormfort "$bin/mpif77"
ln -sfn stormrun "$bin/mpirun"
ln -sfn stormrun "$bin/mpiexec"
ln -sfn libmpi.so "$lib/libmpich.so.12"
ln -sfn libmpi.so "$lib/libstormpi.so"
ln -sfn libmpi.a "$lib/libmpifort.a"
ln -sfn libmpi.so "$lib/libmpifort.so"
ln -sfn libmpi.so "$lib/libmpichfort.so.12"

# The mpi and mpi_f08 modules, for the Fortran compiler of this machine (a .mod file is the compiler's own).
fc=${STORMPI_FC:-gfortran}
if command -v "${fc%% *}" >/dev/null; then
    modwork=$(mktemp -d)
    for m in mpi mpi_f08; do
        # shellcheck disable=SC2086 # STORMPI_FC may hold several words
        if ! $fc -c "$inc/$m.f90" -J "$modwork" -o "$modwork/$m.o"; then
            rm -rf "$modwork"
            echo "install.sh: $fc could not compile $inc/$m.f90" >&2
            exit 1
        fi
    done
    install -m 644 "$modwork/mpi.mod" "$modwork/mpi_f08.mod" "$inc/"
    rm -rf "$modwork"
else
    echo "install.sh: note: no Fortran compiler ($fc): the mpi module is not built (mpif.h works;" \
        "rerun with gfortran installed for use mpi)" >&2
fi

# The native libraries libmpi.a needs: the ones the installed stormcc adds after it.
show=$("$bin/stormcc" -show conftest.c)
libs_private=${show#*/libmpi.a }
if [ "$libs_private" = "$show" ]; then
    echo "install.sh: cannot read the native libraries from: $show" >&2
    exit 1
fi
# Without the memory hooks' -Wl,--defsym=free=stormpi_memhook_free,... (stormcc's static link
# adds them; the .pc file's Libs link libstormpi.so, which carries the hooks itself).
libs_private=$(printf '%s\n' $libs_private | grep -v -e '--defsym=' | tr '\n' ' ')
libs_private=${libs_private% }
version=$("$bin/stormrun" --version | awk '{ print $NF }')

pcfile=$(<"$root/ci/stormpi.pc.in")
pcfile=${pcfile//@PREFIX@/$prefix}
pcfile=${pcfile//@VERSION@/$version}
pcfile=${pcfile//@LIBS_PRIVATE@/$libs_private}
printf '%s\n' "$pcfile" >"$pc/stormpi.pc.tmp"
mv -f "$pc/stormpi.pc.tmp" "$pc/stormpi.pc"
ln -sfn stormpi.pc "$pc/mpi.pc"

echo "stormpi $version installed in $prefix"
echo "  compile: $bin/mpicc prog.c -o prog   (or pkg-config: PKG_CONFIG_PATH=$pc)"
echo "           $bin/mpif90 prog.f90 -o prog (use mpi or include 'mpif.h')"
echo "  run:     $bin/mpirun -n 4 ./prog"
