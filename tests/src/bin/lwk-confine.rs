//! `lwk-confine PROGRAM ARGS...`: runs PROGRAM inside the node contract — an empty network
//! namespace and the seccomp filter of `stormpi_tests::lwk` (no network socket, no fork, no
//! process-creating clone) — for launchers the tests do not control, such as Slurm's `srun`.

use std::os::unix::process::CommandExt;
use std::process::Command;

use stormpi_tests::lwk::{enter_netns, install_filter};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: lwk-confine PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    if let Err(e) = enter_netns().and_then(|()| install_filter()) {
        eprintln!("lwk-confine: {e}");
        std::process::exit(126);
    }
    let e = Command::new(&program).args(args).exec();
    eprintln!("lwk-confine: cannot run {}: {e}", program.to_string_lossy());
    std::process::exit(127);
}
