//! Jobs whose ranks run on different architectures. `tests/c/hetero.c` is built for this
//! machine (x86_64) and cross-built for s390x (big-endian), i686 (32-bit `long`, 12-byte `long
//! double`) and ppc64 (big-endian, IBM double-double `long double`); the foreign builds run under
//! Debian's qemu-user, all ranks in one stormrun job in the MPMD form
//! (`stormrun -n 2 ./hetero : -n 1 qemu-s390x ./hetero-s390x`).
//!
//! The cross-built libraries come from `cargo build --release --target <triple> -p stormpi-linux
//! --lib` (ci/test.sh does it); the cross compilers, qemu-user and the targets are installed by
//! ci/setup.sh. A missing piece fails the test with the command that provides it. The foreign
//! programs are linked statically, so they need no foreign C library at run time (the i686 one
//! then runs natively; the cross C libraries are only for linking).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use stormpi_tests::{
    bin_dir, build_once, c_program, c_source, run_stormrun, workspace_dir, C_FLAGS,
};

/// A foreign architecture: its Rust target, C cross compiler and emulator.
struct Foreign {
    triple: &'static str,
    gcc: &'static str,
    /// qemu-user's emulator for it; empty when this machine runs it natively.
    qemu: &'static str,
}

const S390X: Foreign = Foreign {
    triple: "s390x-unknown-linux-gnu",
    gcc: "s390x-linux-gnu-gcc",
    qemu: "qemu-s390x",
};

const I686: Foreign = Foreign {
    triple: "i686-unknown-linux-gnu",
    gcc: "i686-linux-gnu-gcc",
    qemu: "",
};

const PPC64: Foreign = Foreign {
    triple: "powerpc64-unknown-linux-gnu",
    gcc: "powerpc64-linux-gnu-gcc",
    qemu: "qemu-ppc64",
};

/// Native libraries a statically linked program with the Rust static library needs (as
/// `stormcc -static` links).
const NATIVE_LIBS: &[&str] = &[
    "-lgcc_eh",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

fn in_path(program: &str) -> bool {
    stormpi_tests::in_path(program)
}

/// `tests/c/NAME.c` built for `arch` against its cross-built `libmpi.a`.
fn program(arch: &Foreign, name: &str) -> PathBuf {
    let lib = bin_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .join(arch.triple)
        .join("release/libmpi.a");
    assert!(
        lib.exists(),
        "{} does not exist: build it with `cargo build --release --target {} -p stormpi-linux \
         --lib` (ci/test.sh does; the linker is set in .cargo/config.toml)",
        lib.display(),
        arch.triple
    );
    assert!(
        in_path(arch.gcc),
        "{} is not installed (ci/setup.sh installs the cross compilers)",
        arch.gcc
    );
    // Localized as stormcc does before it links and as ci/install.sh installs it: cargo's
    // archive also defines the Rust runtime and libmpi.so's memory hooks (`free`, `realloc`),
    // which collide with the C library's in a static link.
    stormpi_bootstrap::cc::localize::localize(&lib, &[OsString::from(arch.gcc)])
        .unwrap_or_else(|e| panic!("localizing {}: {e}", lib.display()));
    build_once(&format!("{name}-{}", arch.triple), |out| {
        let mut cmd = Command::new(arch.gcc);
        cmd.args(C_FLAGS)
            .arg("-static")
            .arg("-I")
            .arg(workspace_dir().join("core/include"))
            .arg("-o")
            .arg(out)
            .arg(c_source(name))
            .arg(&lib)
            .args(NATIVE_LIBS);
        cmd
    })
}

/// One application context of an MPMD command line: `-n N [qemu] PROGRAM`.
fn context(n: u32, arch: Option<&Foreign>) -> Vec<OsString> {
    context_of("hetero", n, arch)
}

/// [`context`] for the test program `name`.
fn context_of(name: &str, n: u32, arch: Option<&Foreign>) -> Vec<OsString> {
    let mut words: Vec<OsString> = vec!["-n".into(), n.to_string().into()];
    match arch {
        None => words.push(c_program(name).into()),
        Some(a) => {
            let prog = program(a, name);
            if !a.qemu.is_empty() {
                assert!(
                    in_path(a.qemu),
                    "{} is not installed (ci/setup.sh installs qemu-user)",
                    a.qemu
                );
                words.push(a.qemu.into());
            }
            words.push(prog.into());
        }
    }
    words
}

/// Runs one job of the given contexts with extra stormrun options; checks `OK hetero`.
fn run(options: &[&str], contexts: &[Vec<OsString>]) -> String {
    run_of("hetero", options, contexts)
}

/// [`run`] of the test program `name`.
fn run_of(name: &str, options: &[&str], contexts: &[Vec<OsString>]) -> String {
    let mut cmd = Command::new(stormpi_tests::stormrun());
    cmd.args(["--oversubscribe", "--timeout", "60"])
        .args(options);
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        cmd.args(c);
    }
    let out = run_stormrun(cmd);
    out.assert_ok(name);
    out.stdout.clone()
}

fn tcp() -> &'static [&'static str] {
    &["--mca", "btl", "tcp,self"]
}

/// Issue 20: a file written through `external32` views by x86_64 and s390x ranks of one job
/// (independently and collectively) reads back right at both, and its ints are big-endian.
#[test]
fn hetero_external32_file_x86_64_and_s390x() {
    let name = "io_external32_hetero";
    run_of(
        name,
        &[],
        &[context_of(name, 2, None), context_of(name, 1, Some(&S390X))],
    );
}

/// Issue 20: external32 filetypes with holes of a type whose size external32 changes (a struct
/// of char, long and int; a vector of longs), written and read by x86_64 and s390x ranks of one
/// job: each reads its neighbour's records, of the other architecture at one rank at least.
#[test]
fn hetero_external32_holes_x86_64_and_s390x() {
    let name = "io_external32_holes";
    run_of(
        name,
        &[],
        &[context_of(name, 2, None), context_of(name, 1, Some(&S390X))],
    );
}

/// Issue 20: darray filetypes of a type whose size external32 changes (`long`) and of a user
/// representation's 8-byte ints, written and read back in another decomposition by x86_64 and
/// s390x ranks of one job (a 3 x 1 grid: the s390x rank owns the last block of rows).
#[test]
fn hetero_external32_darray_x86_64_and_s390x() {
    let name = "io_external32_darray";
    run_of(
        name,
        &[],
        &[context_of(name, 2, None), context_of(name, 1, Some(&S390X))],
    );
}

/// Big-endian and little-endian ranks: every type converted both ways, over TCP.
#[test]
fn hetero_x86_64_and_s390x_over_tcp() {
    let out = run(tcp(), &[context(2, None), context(1, Some(&S390X))]);
    assert!(out.contains("rank 2: big-endian, 8-byte long"), "{out}");
}

/// A 32-bit rank (4-byte long, 12-byte long double) with 64-bit ones: widths change, and a long
/// that does not fit is an error at the receiver.
#[test]
fn hetero_x86_64_and_i686_over_tcp() {
    let out = run(tcp(), &[context(1, None), context(1, Some(&I686))]);
    assert!(
        out.contains("rank 1: little-endian, 4-byte long, 64-bit"),
        "{out}"
    );
}

/// Four architectures in one job; ppc64's long double cannot be converted to the others' and
/// every receive of one says so.
#[test]
fn hetero_four_architectures_in_one_job() {
    let out = run(
        tcp(),
        &[
            context(1, None),
            context(1, Some(&S390X)),
            context(1, Some(&I686)),
            context(1, Some(&PPC64)),
        ],
    );
    assert!(
        out.contains("rank 3: big-endian, 8-byte long, 106-bit"),
        "{out}"
    );
}

/// With the default transports, the two x86_64 ranks share memory and the s390x rank (whose
/// byte order the shared-memory rings do not speak) is reached over TCP.
#[test]
fn hetero_default_transports_mix_shared_memory_and_tcp() {
    run(&[], &[context(2, None), context(1, Some(&S390X))]);
}

/// Issue 19: one-sided operations between x86_64 ranks and a big-endian s390x rank over TCP —
/// puts, gets, accumulates of ints and doubles, fetch-and-op and compare-and-swap — arrive as
/// values at every target.
#[test]
fn hetero_rma_x86_64_and_s390x_over_tcp() {
    let name = "rma_hetero";
    run_of(
        name,
        tcp(),
        &[context_of(name, 2, None), context_of(name, 1, Some(&S390X))],
    );
}

/// The same with the default transports: the x86_64 ranks share a node and memory, yet the
/// window takes no shared-memory path (its members differ), and the values are right.
#[test]
fn hetero_rma_default_transports() {
    let name = "rma_hetero";
    run_of(
        name,
        &[],
        &[context_of(name, 2, None), context_of(name, 2, Some(&S390X))],
    );
}

/// The one-sided program is correct on one architecture, with the shared-memory path.
#[test]
fn hetero_rma_program_on_one_architecture() {
    let name = "rma_hetero";
    run_of(name, &[], &[context_of(name, 3, None)]);
}

/// The program itself is correct on one architecture (so a failure above is the library's).
#[test]
fn hetero_program_on_one_architecture() {
    run(&[], &[context(3, None)]);
}
