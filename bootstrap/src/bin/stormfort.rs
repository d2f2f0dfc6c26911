//! `stormfort` (also `mpifort`, `mpif90`, `mpif77`): compile and link
//! Fortran MPI programs against stormpi (`mpif.h` or `use mpi`). See
//! `stormfort -help` and the `stormpi_bootstrap::cc` module documentation.

fn main() {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "stormfort".into());
    std::process::exit(stormpi_bootstrap::cc::main(&argv0, args));
}
