//! Rust MPI programs on the `mpi` crate (tests/examples/rust_ring.rs, rust_coll.rs) under
//! stormrun, as a singleton, and under MPICH's Hydra launcher (PMI-1 over PMI_FD).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use stormpi_tests::{artifact, in_path, run, run_job, shm_files, SHM_DIR};

fn rust_ring() -> PathBuf {
    artifact("examples/rust_ring")
}

fn rust_coll() -> PathBuf {
    artifact("examples/rust_coll")
}

/// Held by every test here: the Hydra test tells its job's shared-memory files from others' by
/// listing /dev/shm before and after, so no other job of this binary may run meanwhile.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn under_stormrun() {
    let _serial = serial();
    for np in [2, 3, 4] {
        let out = run_job(np, &[], &rust_ring(), &[]);
        assert!(
            out.success() && out.has_line(&format!("OK rust_ring {np}")),
            "{}",
            out.report()
        );
        assert!(out.leftover_shm.is_empty(), "{}", out.report());
    }
}

/// Every collective of the Rust API on world, a duplicate and a split, 1 to 8 ranks
/// (oversubscribed from 3), against locally computed values (tests/examples/rust_coll.rs).
#[test]
fn collectives_under_stormrun() {
    let _serial = serial();
    for np in [1, 2, 3, 5, 8] {
        let out = run_job(np, &[], &rust_coll(), &[]);
        assert!(
            out.success() && out.has_line(&format!("OK rust_coll {np}")),
            "{}",
            out.report()
        );
        assert!(out.leftover_shm.is_empty(), "{}", out.report());
    }
}

#[test]
fn singleton() {
    let _serial = serial();
    let out = run(Command::new(rust_ring()), Duration::from_secs(30));
    assert!(
        out.success() && out.has_line("OK rust_ring 1"),
        "{}",
        out.report()
    );
}

#[test]
fn under_hydra() {
    const MPIEXEC: &str = "mpiexec.mpich";
    if !in_path(MPIEXEC) {
        eprintln!("\n*** SKIPPED: {MPIEXEC} is not installed (apt-get install mpich) ***\n");
        return;
    }
    let _serial = serial();
    // Hydra serves PMI-1 (what the library chooses there) and PMI-2 (forced).
    for protocol in ["auto", "pmi2"] {
        let before = shm_files("stormpi-");
        let mut cmd = Command::new(MPIEXEC);
        cmd.args(["-n", "3"])
            .arg(rust_ring())
            .arg("1000")
            .env("STORMPI_PMI", protocol);
        // The program takes well under a second; a hang is killed after 30 s.
        let out = run(cmd, Duration::from_secs(30));
        // Hydra does not know stormpi's files: the library must remove them itself.
        let left: Vec<String> = shm_files("stormpi-").difference(&before).cloned().collect();
        for f in &left {
            let _ = std::fs::remove_file(std::path::Path::new(SHM_DIR).join(f));
        }
        assert!(
            out.success() && out.has_line("OK rust_ring 3"),
            "STORMPI_PMI={protocol}: {}",
            out.report()
        );
        assert!(left.is_empty(), "left in {SHM_DIR}: {left:?}");
    }
}
