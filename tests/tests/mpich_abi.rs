//! The MPICH ABI: C programs compiled and linked by Debian's MPICH wrapper (`mpicc.mpich`,
//! dynamically against libmpich.so.12) run on stormpi, unchanged, when a directory holding
//! `libmpich.so.12 -> libmpi.so` comes first on LD_LIBRARY_PATH and stormrun starts the job.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use stormpi_tests::{
    artifact, build_once, c_source, in_path, run, run_stormrun, scratch_dir, stormrun_command,
    Output, C_FLAGS,
};

const MPICC: &str = "mpicc.mpich";

/// The MPICH-built program, or `None` (with a loud note) when MPICH's wrapper is not installed.
fn mpich_program(name: &str) -> Option<PathBuf> {
    if !in_path(MPICC) {
        eprintln!(
            "\n*** SKIPPED: {MPICC} is not installed (apt-get install mpich libmpich-dev); \
             the MPICH ABI was NOT tested ***\n"
        );
        return None;
    }
    let src = c_source(name);
    Some(build_once(&format!("{name}.mpich"), |out| {
        let mut cmd = Command::new(MPICC);
        cmd.args(C_FLAGS).arg("-o").arg(out).arg(&src);
        cmd
    }))
}

/// A directory holding only `libmpich.so.12`, a symlink to stormpi's libmpi.so.
fn stormpi_as_mpich() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir().join("mpich-abi-lib");
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("libmpich.so.12");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(artifact("libmpi.so"), &link).unwrap();
        dir
    })
}

/// Runs the MPICH-built `name` under stormrun with stormpi's directory first on the library
/// path. The dynamic loader's own trace (LD_DEBUG=libs) shows which file each rank loaded as
/// libmpich.so.12: it must be stormpi's, in every rank.
fn run_on_stormpi(name: &str, np: u32) -> Option<Output> {
    let exe = mpich_program(name)?;
    let lib = stormpi_as_mpich();
    let mut cmd = stormrun_command(np, &[], &exe, &[]);
    cmd.env("LD_LIBRARY_PATH", lib).env("LD_DEBUG", "libs");
    let out = run_stormrun(cmd);
    out.assert_ok(name);
    let ours = format!("calling init: {}/libmpich.so.12", lib.display());
    let inits: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("calling init: ") && l.contains("libmpich.so"))
        .collect();
    assert!(
        inits.len() == np as usize && inits.iter().all(|l| l.ends_with(&ours)),
        "expected each of the {np} ranks to load {}/libmpich.so.12; the loader says:\n{}",
        lib.display(),
        inits.join("\n")
    );
    Some(out)
}

/// hello prints the library version string: it must be stormpi's on every rank.
#[test]
fn hello() {
    let Some(out) = run_on_stormpi("hello", 3) else {
        return;
    };
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("hello from rank"))
        .collect();
    assert_eq!(lines.len(), 3, "{}", out.report());
    for l in lines {
        assert!(
            l.contains(", stormpi "),
            "not running on stormpi: {l}\n{}",
            out.report()
        );
    }
}

/// Without stormpi's directory on the library path the same binary runs on MPICH: the check
/// above tells the two apart.
#[test]
fn hello_without_the_library_path_is_mpich() {
    let Some(exe) = mpich_program("hello") else {
        return;
    };
    let mut cmd = Command::new(&exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    let out = run(cmd, Duration::from_secs(60));
    assert!(out.success(), "{}", out.report());
    assert!(
        out.stdout.contains("MPICH") && !out.stdout.contains(", stormpi "),
        "{}",
        out.report()
    );
}

#[test]
fn ring() {
    run_on_stormpi("ring", 4);
}

#[test]
fn collectives() {
    run_on_stormpi("collectives", 4);
}

/// Error classes and MPI_ERRORS_RETURN through MPICH's constants.
#[test]
fn errors() {
    run_on_stormpi("errors", 2);
}
