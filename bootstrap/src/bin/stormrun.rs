//! `stormrun`: start an MPI job on this node. See `stormrun --help` and the
//! `stormpi_bootstrap::launch` module documentation.

fn main() {
    let status = stormpi_bootstrap::launch::main(std::env::args_os().skip(1));
    std::process::exit(status);
}
