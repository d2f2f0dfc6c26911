//! `stormcc` (also `mpicc`; `stormcxx`, `mpicxx`, `mpic++` for C++): compile
//! and link MPI programs against stormpi. See `stormcc -help` and the
//! `stormpi_bootstrap::cc` module documentation.

fn main() {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "stormcc".into());
    std::process::exit(stormpi_bootstrap::cc::main(&argv0, args));
}
