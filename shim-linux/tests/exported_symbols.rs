//! The shared library exports every function and object `mpi.h` declares, each `MPI_X` with its
//! `PMPI_X` twin, so any MPI program links and MPICH-built binaries load.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use stormpi_core::capi::names;

fn library() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/libmpi.so
    let exe = std::env::current_exe().expect("test executable path");
    let lib = exe.parent().and_then(|d| d.parent()).expect("target dir").join("libmpi.so");
    assert!(lib.exists(), "{} not built (cargo build -p stormpi-linux)", lib.display());
    lib
}

#[test]
fn every_mpi_h_symbol_is_defined() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only", "--format=posix"])
        .arg(library())
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success(), "nm failed: {}", String::from_utf8_lossy(&out.stderr));
    let defined: HashSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let mut missing = Vec::new();
    for f in names::MPI_FUNCTIONS {
        for name in [format!("MPI_{f}"), format!("PMPI_{f}")] {
            if !defined.contains(&name) {
                missing.push(name);
            }
        }
    }
    for name in names::CALLBACK_FUNCTIONS
        .iter()
        .chain(names::LIBRARY_OBJECTS)
        .chain(names::MPICH_COMPAT_FUNCTIONS)
    {
        if !defined.contains(*name) {
            missing.push(name.to_string());
        }
    }
    assert!(missing.is_empty(), "libmpi.so lacks {} symbols: {:?}", missing.len(), missing);
}
