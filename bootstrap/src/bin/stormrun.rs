//! `stormrun`: start an MPI job on this node. See `stormrun --help` and the
//! `stormpi_bootstrap::launch` module documentation.

use stormpi_bootstrap::launch::agent;

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    // On a remote host, between the launch agent and a rank's program.
    if args.first().is_some_and(|a| a == agent::KEY_HELPER_FLAG) {
        std::process::exit(agent::exec_with_key(&args[1..]));
    }
    let status = stormpi_bootstrap::launch::main(args);
    std::process::exit(status);
}
