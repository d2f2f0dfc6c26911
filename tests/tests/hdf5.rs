//! Parallel HDF5, unchanged, on stormpi's MPI-IO: Debian's MPICH-flavoured parallel HDF5
//! (`h5pcc.mpich`: HDF5 linked statically, `libmpich.so.12` dynamically) builds
//! `tests/c-extra/phdf5.c` (a 3-D dataset written collectively by hyperslabs, a 1-D dataset
//! written independently, an attribute; reopened and read back in another decomposition), which
//! runs under stormrun on stormpi's `libmpich.so.12` at 2 and 4 ranks. The file is checked with
//! `h5dump`, and where MPICH's own launcher is installed, against the file the same binary writes
//! on MPICH.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stormpi_tests::{
    artifact, build_once, c_extra_source, in_path, run, run_stormrun, scratch_subdir,
    stormrun_command,
};

const H5PCC: &str = "h5pcc.mpich";

/// The program built with parallel HDF5, or `None` (with a loud note) when it is not installed.
fn program() -> Option<PathBuf> {
    if !in_path(H5PCC) || !in_path("h5dump") {
        eprintln!(
            "\n*** SKIPPED: {H5PCC} or h5dump is not installed (apt-get install libhdf5-mpich-dev \
             hdf5-tools); parallel HDF5 was NOT tested ***\n"
        );
        return None;
    }
    let src = c_extra_source("phdf5");
    Some(build_once("phdf5.hdf5-mpich", |out| {
        let mut cmd = Command::new(H5PCC);
        cmd.arg("-O2").arg("-o").arg(out).arg(&src);
        cmd
    }))
}

/// A directory holding only `libmpich.so.12`, a symlink to stormpi's libmpi.so.
fn stormpi_as_mpich(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::os::unix::fs::symlink(artifact("libmpi.so"), lib.join("libmpich.so.12")).unwrap();
    lib
}

/// `h5dump` of `file` without its first line (which names the file).
fn dump(file: &Path) -> String {
    let mut cmd = Command::new("h5dump");
    cmd.arg(file);
    let out = run(cmd, Duration::from_secs(60));
    assert!(out.success(), "h5dump failed:\n{}", out.report());
    out.stdout.lines().skip(1).collect::<Vec<_>>().join("\n")
}

fn check(np: u32) {
    let Some(exe) = program() else {
        return;
    };
    let dir = scratch_subdir(&format!("hdf5-{np}"));
    let lib = stormpi_as_mpich(&dir);
    let file = dir.join("stormpi.h5");
    let options: &[&str] = if np > 2 { &["--oversubscribe"] } else { &[] };
    let mut cmd = stormrun_command(np, options, &exe, &[file.to_str().unwrap()]);
    cmd.env("LD_LIBRARY_PATH", &lib);
    let out = run_stormrun(cmd);
    out.assert_ok("phdf5");

    let ours = dump(&file);
    assert!(
        ours.contains("DATASET \"grid\"")
            && ours.contains("DATASPACE  SIMPLE { ( 8, 12, 5 ) / ( 8, 12, 5 ) }"),
        "h5dump does not show the 8x12x5 grid:\n{ours}"
    );
    // The last element of the grid, x*1000 + y*10 + z at (7, 11, 4), and the attribute.
    assert!(
        ours.contains("7114"),
        "h5dump lacks grid(7,11,4) = 7114:\n{ours}"
    );
    assert!(
        ours.contains("ATTRIBUTE \"ranks\"") && ours.contains(&format!("(0): {np}")),
        "h5dump lacks the attribute ranks = {np}:\n{ours}"
    );

    if in_path("mpiexec.mpich") {
        let theirs_file = dir.join("mpich.h5");
        let mut cmd = Command::new("mpiexec.mpich");
        cmd.arg("-n")
            .arg(np.to_string())
            .arg(&exe)
            .arg(&theirs_file)
            .env_remove("LD_LIBRARY_PATH");
        let out = run(cmd, Duration::from_secs(120));
        assert!(
            out.success(),
            "the same program on MPICH failed:\n{}",
            out.report()
        );
        assert_eq!(
            ours,
            dump(&theirs_file),
            "the file written on stormpi differs from the one written on MPICH"
        );
    } else {
        eprintln!("note: mpiexec.mpich not installed; the file was not compared with MPICH's");
    }
}

#[test]
fn parallel_hdf5_at_2_ranks() {
    check(2);
}

#[test]
fn parallel_hdf5_at_4_ranks() {
    check(4);
}
