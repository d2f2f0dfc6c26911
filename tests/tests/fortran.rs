//! The Fortran binding: the same checks (`tests/fortran/checks.inc`: point-to-point with status
//! checks and wildcards, `MPI_STATUS_IGNORE`, reductions on Fortran types incl. `MPI_MAXLOC` on
//! `MPI_2REAL` and `MPI_2DOUBLE_PRECISION`, `MPI_IN_PLACE`, a `CHARACTER` broadcast,
//! `MPI_COMM_SPLIT`, names, attributes with Fortran callbacks, a Fortran reduction and error
//! handler, errors returned through `IERROR`, a strided type, a row of a 2-D array sent as a
//! non-contiguous section and received through a vector type, `MPI_BOTTOM` with absolute
//! addresses, `MPI_WAITSOME` indices, `LOGICAL` arrays of a Cartesian topology, a distributed
//! graph with `MPI_UNWEIGHTED`, info strings, pack/unpack, a scan, the `MPI_TYPE_CREATE_F90_*`
//! types, `MPI_WTIME`) through the `mpi` module and through `mpif.h`:
//!
//! * built with `stormfort` (statically linked) and run at 2 and 3 ranks;
//! * built with Debian's `mpif90.mpich` (dynamically linked against MPICH's
//!   `libmpichfort.so.12` and `libmpich.so.12`) and run unchanged on stormpi's libraries, put
//!   first on the library path under MPICH's names — the MPICH ABI.
//!
//! The `mpi_f08` module (`with_f08.f90`: sections, typed handles, optional `ierror`, Fortran
//! reductions, error handlers, keyval and generalized-request callbacks, `MPI_SIZEOF`) and
//! `MPI_SIZEOF` in `mpi` (`sizeof_mpi.f90`), built with stormfort; `examples/heat2d-f08`
//! against the C demo.
//!
//! MPI-IO (`io_mpi.f90` through `use mpi`, `io_f08.f90` through `use mpi_f08`) at 2 and 3
//! ranks, and `io_mpi.f90` built with `mpif90.mpich`.
//!
//! User data representations with Fortran callbacks (`datarep_mpi.f90`, `datarep_mpif.f90`
//! sharing `datarep.inc`, and `datarep_f08.f90` with the large-count form): values written
//! through a view in a registered representation read back equal, the file's bytes show the
//! conversion ran, `MPI_CONVERSION_FN_NULL` moves native bytes, a conversion's `IERROR` is the
//! access's error; the two `mpi`/`mpif.h` programs also built with `mpif90.mpich`.
//!
//! And the ABI's names: stormpi's `libmpi.so` defines every Fortran symbol MPICH's
//! `libmpichfort.so.12` defines (but the `mpi_f08` ones and MPICH's extensions).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use stormpi_tests::{
    artifact, build_once, in_path, run_job, run_stormrun, scratch_dir, stormrun_command,
    workspace_dir, Output,
};

const MPIF90: &str = "mpif90.mpich";
const MPICHFORT: &str = "/usr/lib/x86_64-linux-gnu/libmpichfort.so.12";

fn source(name: &str) -> PathBuf {
    workspace_dir()
        .join("tests/fortran")
        .join(format!("{name}.f90"))
}

fn gfortran_missing() -> bool {
    if in_path("gfortran") {
        return false;
    }
    eprintln!(
        "\n*** SKIPPED: gfortran is not installed (apt-get install gfortran); \
         the Fortran binding was NOT tested ***\n"
    );
    true
}

/// `tests/fortran/<name>.f90` built with stormfort (static libmpi), cached.
fn stormfort_program(name: &str) -> PathBuf {
    let src = source(name);
    build_once(&format!("{name}.stormfort"), |out| {
        let mut cmd = Command::new(artifact("stormfort"));
        cmd.args(["-O1", "-w", "-o"]).arg(out).arg(&src);
        cmd
    })
}

/// The same program built with MPICH's wrapper, or `None` when it is not installed.
fn mpich_program(name: &str) -> Option<PathBuf> {
    if !in_path(MPIF90) {
        eprintln!(
            "\n*** SKIPPED: {MPIF90} is not installed (apt-get install mpich libmpich-dev \
             gfortran); the MPICH Fortran ABI was NOT tested ***\n"
        );
        return None;
    }
    let src = source(name);
    Some(build_once(&format!("{name}.mpich"), |out| {
        let mut cmd = Command::new(MPIF90);
        cmd.args(["-O1", "-w", "-o"]).arg(out).arg(&src);
        cmd
    }))
}

/// A directory holding only `libmpich.so.12` and `libmpichfort.so.12`, symlinks to stormpi's
/// libmpi.so (which holds the C and the Fortran binding).
fn stormpi_as_mpich() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch_dir().join("mpich-fortran-abi-lib");
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["libmpich.so.12", "libmpichfort.so.12"] {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(artifact("libmpi.so"), &link).unwrap();
        }
        dir
    })
}

fn assert_all_passed(out: &Output, name: &str, np: u32) {
    out.assert_ok(name);
    let passed = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("fortran checks passed on rank "))
        .count();
    assert_eq!(passed, np as usize, "{}", out.report());
}

fn run_stormfort(name: &str, np: u32) {
    run_stormfort_with(name, np, &[]);
}

fn run_stormfort_with(name: &str, np: u32, args: &[&str]) {
    if gfortran_missing() {
        return;
    }
    let exe = stormfort_program(name);
    let out = run_job(np, &[], &exe, args);
    assert_all_passed(&out, name, np);
}

/// A fresh path for the file an MPI-IO test program writes (its first argument).
fn io_file(tag: &str) -> String {
    let dir = scratch_dir().join("fortran-io");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}.dat"));
    let _ = std::fs::remove_file(&path);
    path.to_string_lossy().into_owned()
}

/// An MPI-IO test program at `np` ranks: it passes, and deletes its file (rank 0 calls
/// `MPI_FILE_DELETE` last).
fn run_io(name: &str, np: u32, mpich_built: bool) {
    let path = io_file(&format!(
        "{name}-{np}-{}",
        if mpich_built { "mpich" } else { "stormfort" }
    ));
    if mpich_built {
        run_mpich_built_with(name, np, &[&path]);
    } else {
        run_stormfort_with(name, np, &[&path]);
    }
    if !gfortran_missing() && (!mpich_built || in_path(MPIF90)) {
        assert!(!Path::new(&path).exists(), "{path} was not deleted");
    }
}

/// Runs the MPICH-built `name` under stormrun with stormpi's directory first on the library
/// path; the loader's trace (LD_DEBUG=libs) must show every rank initializing stormpi's
/// `libmpichfort.so.12`, not MPICH's.
fn run_mpich_built(name: &str, np: u32) {
    run_mpich_built_with(name, np, &[]);
}

fn run_mpich_built_with(name: &str, np: u32, args: &[&str]) {
    let Some(exe) = mpich_program(name) else {
        return;
    };
    let lib = stormpi_as_mpich();
    let mut cmd = stormrun_command(np, &[], &exe, args);
    cmd.env("LD_LIBRARY_PATH", lib).env("LD_DEBUG", "libs");
    let out = run_stormrun(cmd);
    assert_all_passed(&out, name, np);
    let ours = format!("calling init: {}/libmpichfort.so.12", lib.display());
    let inits: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("calling init: ") && l.contains("libmpichfort.so"))
        .collect();
    assert!(
        inits.len() == np as usize && inits.iter().all(|l| l.ends_with(&ours)),
        "expected each of the {np} ranks to load {}/libmpichfort.so.12; the loader says:\n{}",
        lib.display(),
        inits.join("\n")
    );
}

#[test]
fn use_mpi_two_ranks() {
    run_stormfort("with_module", 2);
}

#[test]
fn use_mpi_three_ranks() {
    run_stormfort("with_module", 3);
}

/// `stormfort -static`: fully static programs, `use mpi` and `use mpi_f08` (libgfortran's weak
/// thread functions linked in).
#[test]
fn use_mpi_fully_static() {
    if gfortran_missing() {
        return;
    }
    for name in ["with_module", "with_f08"] {
        let src = source(name);
        let exe = build_once(&format!("{name}.static"), |out| {
            let mut cmd = Command::new(artifact("stormfort"));
            cmd.args(["-static", "-O1", "-w", "-o"]).arg(out).arg(&src);
            cmd
        });
        let out = run_job(2, &[], &exe, &[]);
        assert_all_passed(&out, name, 2);
    }
}

#[test]
fn mpif_h_two_ranks() {
    run_stormfort("with_mpif", 2);
}

#[test]
fn mpif_h_three_ranks() {
    run_stormfort("with_mpif", 3);
}

/// `use mpi_f08` (`tests/fortran/with_f08.f90`): derived-type handles and their comparisons,
/// `TYPE(MPI_Status)`, optional `ierror`, non-contiguous sections in point-to-point and
/// collectives, `MPI_ERR_BUFFER` where a section cannot be described, `MPI_SIZEOF`.
#[test]
fn use_mpi_f08_two_ranks() {
    run_stormfort("with_f08", 2);
}

#[test]
fn use_mpi_f08_four_ranks() {
    run_stormfort("with_f08", 4);
}

/// `MPI_COMM_SPAWN` and `MPI_COMM_SPAWN_MULTIPLE` through `use mpi`, `mpif.h` and `use mpi_f08`
/// (`spawn.inc`): blank-padded `ARGV` rows ending at a blank one, a 2-D `ARRAY_OF_ARGV`,
/// `MPI_ARGV_NULL` and `MPI_ERRCODES_IGNORE`; the children check their arguments and send data
/// back; every pair disconnects.
#[test]
fn spawn_from_fortran() {
    if gfortran_missing() {
        return;
    }
    for name in ["spawn_mpi", "spawn_mpif", "spawn_f08"] {
        let exe = stormfort_program(name);
        let out = run_job(2, &["--mca", "btl_tcp_if_include", "lo"], &exe, &[]);
        out.assert_ok(name);
    }
}

/// examples/heat2d-f08 (`use mpi_f08`, strided column sections as halo buffers) computes what
/// examples/heat2d computes: the same iteration count, residual and fixed-point checksum, on 1
/// and 4 ranks (2-D blocks) and 3 ranks in strips.
#[test]
fn heat2d_f08_gives_the_same_answer_as_the_c_one() {
    if gfortran_missing() {
        return;
    }
    let c = stormpi_tests::c_program_from(&workspace_dir().join("examples/heat2d/heat2d.c"));
    let src = workspace_dir().join("examples/heat2d-f08/heat2d.f90");
    let f = build_once("heat2d-f08", |out| {
        let mut cmd = Command::new(artifact("stormfort"));
        cmd.args(["-O2", "-o"]).arg(out).arg(&src);
        cmd
    });
    // The numbers of the lines both print alike.
    let answer = |prog: &Path, np: u32, extra: &[&str]| {
        let mut args = vec!["-n", "64", "-i", "20000", "-t", "1e-4"];
        args.extend(extra);
        let out = run_job(np, &[], prog, &args);
        assert!(out.success(), "{}", out.report());
        let get = |prefix: &str| {
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(|r| r.split_whitespace().next().unwrap_or("").to_string())
                .unwrap_or_else(|| panic!("no {prefix} line:\n{}", out.report()))
        };
        [
            get("iterations: "),
            get("residual: "),
            get("checksum (fixed-point): "),
        ]
    };
    for (np, extra) in [(1, &[][..]), (4, &[][..]), (3, &["-d", "1"][..])] {
        let want = answer(&c, np, extra);
        assert_eq!(want[0], "1690", "the C run should converge in 1690 sweeps");
        assert_eq!(answer(&f, np, extra), want, "{np} ranks {extra:?}");
    }
}

/// MPI-IO through the `mpi` module (`io_mpi.f90`): a view by rank written collectively, the
/// file read back whole at an explicit offset and in part through the view (individual
/// pointer, nonblocking), `INTEGER` file handles, `MPI_OFFSET_KIND` offsets, statuses, the
/// blank-padded datarep of `MPI_FILE_GET_VIEW`, errors through `IERROR`.
#[test]
fn io_use_mpi_two_ranks() {
    run_io("io_mpi", 2, false);
}

#[test]
fn io_use_mpi_three_ranks() {
    run_io("io_mpi", 3, false);
}

/// MPI-IO through `mpi_f08` (`io_f08.f90`): `TYPE(MPI_File)`, sections written and read
/// through a view, split-collective and nonblocking reads.
#[test]
fn io_use_mpi_f08_two_ranks() {
    run_io("io_f08", 2, false);
}

#[test]
fn io_use_mpi_f08_three_ranks() {
    run_io("io_f08", 3, false);
}

/// `MPI_REGISTER_DATAREP` through the `mpi` module: Fortran conversion and extent callbacks
/// (file bytes are the values plus one), `MPI_CONVERSION_FN_NULL` (native bytes).
#[test]
fn datarep_use_mpi_two_ranks() {
    run_io("datarep_mpi", 2, false);
}

/// The same through `mpif.h`.
#[test]
fn datarep_mpif_h_two_ranks() {
    run_io("datarep_mpif", 2, false);
}

/// `MPI_Register_datarep` and `MPI_Register_datarep_c` of `mpi_f08`, with
/// `MPI_CONVERSION_FN_NULL` and `MPI_CONVERSION_FN_NULL_C`.
#[test]
fn datarep_mpi_f08_two_ranks() {
    run_io("datarep_f08", 2, false);
}

#[test]
fn datarep_mpi_f08_three_ranks() {
    run_io("datarep_f08", 3, false);
}

/// The data representation programs built by `mpif90.mpich` run on stormpi's
/// `libmpichfort.so.12`: MPICH's `mpi_conversion_fn_null_` is stormpi's, so passing it is
/// recognized as the null conversion.
#[test]
fn datarep_mpich_built_runs_on_stormpi() {
    run_io("datarep_mpif", 2, true);
    run_io("datarep_mpi", 2, true);
}

/// The `use mpi` MPI-IO program built by MPICH's `mpif90.mpich` runs on stormpi's
/// `libmpichfort.so.12`: MPICH's file handles are `INTEGER`s too.
#[test]
fn io_mpich_built_use_mpi_runs_on_stormpi() {
    run_io("io_mpi", 2, true);
    run_io("io_mpi", 3, true);
}

/// `MPI_SIZEOF` through the `mpi` module.
#[test]
fn mpi_sizeof_in_the_mpi_module() {
    run_stormfort("sizeof_mpi", 1);
}

/// The `mpi_f08` procedures are exported under the standard's specific names, with their
/// profiling twins, and the large-count forms under theirs when the C library has them.
#[test]
fn libmpi_defines_the_mpi_f08_names() {
    let ours = defined_symbols(&artifact("libmpi.so"));
    for name in [
        "MPI_Send_f08ts",
        "PMPI_Send_f08ts",
        "MPI_Comm_rank_f08",
        "PMPI_Comm_rank_f08",
        "MPI_Allreduce_f08ts",
        "stormpi_f08_mpi_comm_eq",
        "stormpi_sizeof_r8",
    ] {
        assert!(ours.contains(name), "libmpi.so lacks {name}");
    }
    let coverage =
        std::fs::read_to_string(workspace_dir().join("fortran/include/coverage_f08.txt")).unwrap();
    for line in coverage.lines().filter(|l| l.starts_with("bound ")) {
        let name = line.split_whitespace().nth(1).unwrap();
        if name.ends_with("_f08") || name.ends_with("_f08ts") || name.ends_with("_f08_") {
            let pmpi = if name.starts_with("MPI_") { "P" } else { "p" };
            assert!(ours.contains(name), "libmpi.so lacks {name}");
            assert!(
                ours.contains(&format!("{pmpi}{name}")),
                "libmpi.so lacks {pmpi}{name}"
            );
        }
    }
}

/// The headline of the MPICH ABI: programs built by MPICH's Fortran wrapper run on stormpi.
#[test]
fn mpich_built_use_mpi_runs_on_stormpi() {
    run_mpich_built("with_module", 2);
}

#[test]
fn mpich_built_mpif_h_runs_on_stormpi() {
    run_mpich_built("with_mpif", 3);
}

/// `stormfort -show` names gfortran, the directories of mpif.h and mpi.mod, and libmpi.a.
#[test]
fn stormfort_show() {
    let out = Command::new(artifact("stormfort"))
        .args(["-show", "-o", "a", "a.f90"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{line}");
    let want = workspace_dir().join("fortran/include");
    let want = want.canonicalize().unwrap_or(want);
    assert!(line.starts_with("gfortran "), "{line}");
    assert!(line.contains(&format!("-I{}", want.display())), "{line}");
    assert!(line.contains("-fallow-argument-mismatch"), "{line}");
    assert!(line.contains("libmpi.a"), "{line}");
}

/// The dynamic symbols of a shared library that are defined there.
fn defined_symbols(lib: &Path) -> BTreeSet<String> {
    let out = Command::new("readelf")
        .args(["-W", "--dyn-syms"])
        .arg(lib)
        .output()
        .expect("readelf");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[6] != "UND")
                .then(|| f[7].split('@').next().unwrap_or("").to_string())
        })
        .collect()
}

/// Every Fortran link name and common block of MPICH's libmpichfort.so.12 (`mpi_send_`,
/// `mpi_send__`, `mpi_send`, `MPI_SEND`, the `pmpi_` forms, `mpipriv1_`, ...) is defined by
/// stormpi's libmpi.so, but the `mpi_f08` procedures (`*_f08*`), MPICH's `MPIX_` extensions and
/// the C objects `MPI_F_*` that C code uses.
#[test]
fn libmpi_defines_the_fortran_names_of_libmpichfort() {
    if !Path::new(MPICHFORT).exists() {
        eprintln!("\n*** SKIPPED: {MPICHFORT} is not installed (apt-get install libmpich12) ***\n");
        return;
    }
    let mpich: BTreeSet<String> = defined_symbols(Path::new(MPICHFORT))
        .into_iter()
        .filter(|s| {
            let l = s.to_lowercase();
            (l.starts_with("mpi_")
                || l.starts_with("pmpi_")
                || l.starts_with("mpipriv")
                || l.starts_with("mpifcmb"))
                && !l.contains("f08")
                && !s.starts_with("MPI_F_")
        })
        .collect();
    assert!(mpich.len() > 3000, "{} names in {MPICHFORT}", mpich.len());
    let ours = defined_symbols(&artifact("libmpi.so"));
    let missing: Vec<&String> = mpich.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "libmpi.so lacks {} of libmpichfort.so.12's Fortran names: {:?}",
        missing.len(),
        &missing[..missing.len().min(30)]
    );
}

/// ci/install.sh installs the Fortran side (`--no-build`, as in compiler_wrapper.rs): stormfort
/// and its names, mpif.h, the mpi module compiled for this gfortran, the library's Fortran
/// names; a program built with the installed mpif90 runs, and so does one built with MPICH's
/// mpif90 with only `LD_LIBRARY_PATH=PREFIX/lib`.
#[test]
fn installed_tree_builds_and_runs_fortran() {
    if gfortran_missing() {
        return;
    }
    let prefix = stormpi_tests::scratch_subdir("fortran-install").join("prefix");
    let mut cmd = Command::new(workspace_dir().join("ci/install.sh"));
    cmd.arg("--no-build").arg(&prefix);
    cmd.env(
        "CARGO_TARGET_DIR",
        stormpi_tests::bin_dir().parent().unwrap(),
    );
    let out = stormpi_tests::run(cmd, std::time::Duration::from_secs(120));
    assert!(out.success(), "{}", out.report());
    let p = |rel: &str| prefix.join(rel);
    for f in [
        "bin/stormfort",
        "include/mpif.h",
        "include/mpi.f90",
        "include/mpi.mod",
        "include/mpi_f08.f90",
        "include/mpi_f08.mod",
    ] {
        assert!(p(f).is_file(), "{f} not installed");
    }
    for (link, to) in [
        ("bin/mpifort", "stormfort"),
        ("bin/mpif90", "stormfort"),
        ("bin/mpif77", "stormfort"),
        ("lib/libmpifort.a", "libmpi.a"),
        ("lib/libmpifort.so", "libmpi.so"),
        ("lib/libmpichfort.so.12", "libmpi.so"),
    ] {
        let target = std::fs::read_link(p(link)).unwrap_or_else(|e| panic!("{link}: {e}"));
        assert_eq!(target, Path::new(to), "{link}");
    }
    let mut cmd = Command::new(p("bin/mpif90"));
    cmd.args(["-show", "x.f90"]);
    let out = stormpi_tests::run(cmd, std::time::Duration::from_secs(30));
    let inc = p("include");
    assert_eq!(
        out.stdout.split_whitespace().take(3).collect::<Vec<_>>(),
        [
            "gfortran",
            &format!("-I{}", inc.display()),
            "-fallow-argument-mismatch"
        ],
        "{}",
        out.report()
    );

    let exe = p("with_module");
    let mut cmd = Command::new(p("bin/mpif90"));
    cmd.args(["-O1", "-o"]).arg(&exe).arg(source("with_module"));
    let out = stormpi_tests::run(cmd, std::time::Duration::from_secs(300));
    assert!(out.success(), "{}", out.report());
    let mut cmd = Command::new(p("bin/mpirun"));
    cmd.args(["-n", "2", "--timeout", "60"]).arg(&exe);
    assert_all_passed(&run_stormrun(cmd), "with_module", 2);

    let exe = p("with_f08");
    let mut cmd = Command::new(p("bin/mpif90"));
    cmd.args(["-O1", "-o"]).arg(&exe).arg(source("with_f08"));
    let out = stormpi_tests::run(cmd, std::time::Duration::from_secs(300));
    assert!(out.success(), "{}", out.report());
    let mut cmd = Command::new(p("bin/mpirun"));
    cmd.args(["-n", "2", "--timeout", "60"]).arg(&exe);
    assert_all_passed(&run_stormrun(cmd), "with_f08", 2);

    if let Some(exe) = mpich_program("with_mpif") {
        let mut cmd = Command::new(p("bin/mpirun"));
        cmd.args(["-n", "2", "--timeout", "60"])
            .arg(&exe)
            .env("LD_LIBRARY_PATH", p("lib"));
        assert_all_passed(&run_stormrun(cmd), "with_mpif", 2);
    }
}
