//! stormcc: the command it shows, the native libraries it adds (checked against rustc), compile
//! and link as separate steps, shared and fully static linking, the C++ names, its errors, the
//! program's libm untouched by libmpi.a, and the installed tree that ci/install.sh lays out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stormpi_tests::{
    artifact, bin_dir, c_extra_source, c_source, in_path, run, run_job, run_stormrun,
    scratch_subdir, stormcc, workspace_dir, Output, C_FLAGS, JOB_TIMEOUT,
};

const COMPILE_TIMEOUT: Duration = Duration::from_secs(300);

/// What stormcc adds after libmpi.a (checked against rustc by
/// `native_libraries_are_what_rustc_says`).
const NATIVE_LIBS: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

/// What stormcc adds after the Linux libmpi.a in a static link against the shared C library:
/// the C library's `free`, `munmap`, ... defined as the library's memory hooks.
const MEMHOOKS: &str = stormpi_bootstrap::cc::MEMHOOK_DEFSYMS;

/// stormcc without the user's overrides, so that its output is predictable.
fn wrapper(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for var in [
        "STORMPI_CC",
        "STORMPI_CXX",
        "STORMPI_INCLUDEDIR",
        "STORMPI_LIBDIR",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn stormcc_with(args: &[&str]) -> Output {
    let mut cmd = wrapper(&stormcc());
    cmd.args(args);
    run(cmd, COMPILE_TIMEOUT)
}

fn shown(args: &[&str]) -> String {
    let out = stormcc_with(args);
    assert!(out.success(), "{}", out.report());
    out.stdout.trim_end().to_string()
}

fn canonical(p: PathBuf) -> String {
    p.canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .display()
        .to_string()
}

/// The native libraries rustc says a static library built on the workspace's `mpi` crate
/// needs: rustc builds one (a re-export is enough) against the rlib the build left beside
/// libmpi.a, with the release profile's panic strategy.
fn rustc_native_static_libs() -> String {
    let dir = scratch_subdir("native-libs");
    let src = dir.join("probe.rs");
    std::fs::write(&src, "pub use mpi::initialize;\n").unwrap();
    let mut cmd = Command::new(std::env::var_os("RUSTC").unwrap_or("rustc".into()));
    cmd.args(["--edition", "2021", "--crate-type", "staticlib"])
        .args(["-C", "panic=abort", "--crate-name", "probe"])
        .arg("--extern")
        .arg(format!("mpi={}", artifact("libmpi.rlib").display()))
        .arg("-L")
        .arg(format!("dependency={}", bin_dir().join("deps").display()))
        .args(["--print", "native-static-libs", "-o"])
        .arg(dir.join("libprobe.a"))
        .arg(&src);
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(out.success(), "{}", out.report());
    out.stderr
        .lines()
        .find_map(|l| l.split("native-static-libs: ").nth(1))
        .unwrap_or_else(|| panic!("no native-static-libs line\n{}", out.report()))
        .trim()
        .to_string()
}

#[test]
fn show_prints_the_whole_command() {
    let inc = canonical(workspace_dir().join("core/include"));
    // The library directory of a wrapper in target/<profile>/ is its own directory (where the
    // executable really is, symlinks resolved).
    let exe = canonical(stormcc());
    let lib = Path::new(&exe).parent().unwrap().display();
    assert_eq!(
        shown(&["-show", "-O2", "-o", "prog", "prog.c"]),
        format!("cc -I{inc} -O2 -o prog prog.c {lib}/libmpi.a {MEMHOOKS} {NATIVE_LIBS}")
    );
    assert_eq!(
        shown(&["-c", "-show", "prog.c"]),
        format!("cc -I{inc} -c prog.c")
    );
    assert_eq!(
        shown(&["--dynamic", "-show", "prog.c"]),
        format!("cc -I{inc} prog.c -L{lib} -lmpi -Wl,-rpath,{lib}")
    );
    // Issue 27: alone, each spelling of -show describes the build in flags tools can parse.
    for flag in ["-show", "-showme", "-link_info"] {
        assert_eq!(
            shown(&[flag]),
            format!("cc -I{inc} -L{lib} -lmpi -Wl,-rpath,{lib}"),
            "{flag}"
        );
    }
    assert_eq!(shown(&["-compile_info"]), format!("cc -I{inc}"));
    let mut cmd = wrapper(&stormcc());
    cmd.env("STORMPI_CC", "gcc -m64")
        .args(["-show", "-E", "prog.c"]);
    let out = run(cmd, COMPILE_TIMEOUT);
    assert_eq!(out.stdout.trim_end(), format!("gcc -m64 -I{inc} -E prog.c"));
}

/// The libraries stormcc adds after libmpi.a are exactly those rustc names for it (after the
/// memory hooks' aliases, which define the C library's `free` and kin as the hooks of issue 23's
/// registration cache when the archive has them).
#[test]
fn native_libraries_are_what_rustc_says() {
    let show = shown(&["-show", "prog.c"]);
    let ours = show
        .split_once("/libmpi.a ")
        .unwrap_or_else(|| panic!("no libmpi.a in {show:?}"))
        .1;
    let libs = match ours.split_once(' ') {
        Some((hooks, rest)) if hooks.starts_with("-Wl,--undefined=stormpi_memhook_") => {
            for alias in hooks.trim_start_matches("-Wl,").split(',') {
                if let Some(hook) = alias.strip_prefix("--undefined=") {
                    assert!(hook.starts_with("stormpi_memhook_"), "{show:?}");
                    continue;
                }
                let (name, target) = alias
                    .trim_start_matches("--defsym=")
                    .split_once('=')
                    .unwrap_or_else(|| panic!("not an alias: {alias:?}"));
                assert_eq!(target, format!("stormpi_memhook_{name}"), "{show:?}");
            }
            rest
        }
        _ => ours,
    };
    assert_eq!(libs, rustc_native_static_libs());
}

/// ELF header field e_type: 1 relocatable, 2 executable, 3 shared object or PIE.
fn elf_type(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", path.display());
    u16::from_le_bytes([bytes[16], bytes[17]])
}

fn ldd(path: &Path) -> String {
    let mut cmd = Command::new("ldd");
    cmd.arg(path).env_remove("LD_LIBRARY_PATH");
    let out = run(cmd, Duration::from_secs(30));
    out.stdout + &out.stderr
}

#[test]
fn compile_then_link_in_two_steps() {
    let dir = scratch_subdir("two-steps");
    let obj = dir.join("ring.o");
    let exe = dir.join("ring");
    let out = stormcc_with(&[
        "-O2",
        "-c",
        "-o",
        obj.to_str().unwrap(),
        c_source("ring").to_str().unwrap(),
    ]);
    assert!(out.success(), "{}", out.report());
    assert_eq!(elf_type(&obj), 1, "-c must not link");
    let out = stormcc_with(&["-o", exe.to_str().unwrap(), obj.to_str().unwrap()]);
    assert!(out.success(), "{}", out.report());
    assert!(
        !ldd(&exe).contains("libmpi"),
        "static by default:\n{}",
        ldd(&exe)
    );
    run_job(2, &[], &exe, &[]).assert_ok("ring");
}

#[test]
fn dynamic_linking_uses_the_shared_library() {
    let dir = scratch_subdir("dynamic");
    let exe = dir.join("ring");
    let mut args = vec!["--dynamic", "-o", exe.to_str().unwrap()];
    args.extend(C_FLAGS);
    let src = c_source("ring");
    args.push(src.to_str().unwrap());
    let out = stormcc_with(&args);
    assert!(out.success(), "{}", out.report());
    // Found through the rpath, without LD_LIBRARY_PATH.
    let deps = ldd(&exe);
    let so = canonical(artifact("libmpi.so"));
    assert!(
        deps.contains(&format!("libmpi.so => {so}")),
        "libmpi.so not resolved to {so}:\n{deps}"
    );
    let mut cmd = stormpi_tests::stormrun_command(3, &[], &exe, &[]);
    cmd.env_remove("LD_LIBRARY_PATH");
    run_stormrun(cmd).assert_ok("ring");
}

#[test]
fn fully_static_program_runs() {
    let dir = scratch_subdir("static");
    let exe = dir.join("ring");
    let src = c_source("ring");
    let out = stormcc_with(&[
        "-static",
        "-O2",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert!(out.success(), "{}", out.report());
    assert!(
        ldd(&exe).contains("not a dynamic executable"),
        "{}",
        ldd(&exe)
    );
    run_job(2, &[], &exe, &[]).assert_ok("ring");
}

const CXX_PROGRAM: &str = r#"
#include <mpi.h>
#include <cstdio>
#include <vector>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = -1, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<long> mine(3, rank), sum(3, 0);
    MPI_Allreduce(mine.data(), sum.data(), 3, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (long s : sum)
        if (s != (long)size * (size - 1) / 2) {
            std::fprintf(stderr, "FAIL cxx: rank %d: sum %ld\n", rank, s);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("OK cxx\n");
    MPI_Finalize();
    return 0;
}
"#;

/// Called as mpicc the wrapper is stormcc; as stormcxx, mpicxx or mpic++ it drives the C++
/// compiler, and a C++ program using mpi.h links and runs.
#[test]
fn program_names_choose_the_language() {
    let dir = scratch_subdir("names");
    let real = stormcc();
    for name in ["mpicc", "stormcxx", "mpicxx", "mpic++"] {
        std::os::unix::fs::symlink(&real, dir.join(name)).unwrap();
    }
    let first_word = |name: &str| {
        let mut cmd = wrapper(&dir.join(name));
        cmd.args(["-show", "x.c"]);
        let out = run(cmd, COMPILE_TIMEOUT);
        assert!(out.success(), "{}", out.report());
        out.stdout
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(first_word("mpicc"), "cc");
    for name in ["stormcxx", "mpicxx", "mpic++"] {
        assert_eq!(first_word(name), "c++", "{name}");
    }
    let src = dir.join("cxx.cc");
    std::fs::write(&src, CXX_PROGRAM).unwrap();
    let exe = dir.join("cxx");
    let mut cmd = wrapper(&dir.join("mpicxx"));
    cmd.args(["-O2", "-Wall", "-o"]).arg(&exe).arg(&src);
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(out.success(), "{}", out.report());
    run_job(3, &[], &exe, &[]).assert_ok("cxx");
}

/// What `c-extra/libm_results.c` prints (its libm results' hash) when `compiler` builds it with
/// `flags` and links it `-lm`, without MPI: the reference for the stormpi builds.
fn libm_reference(dir: &Path, compiler: &str, flags: &[&str]) -> String {
    let exe = dir.join(format!("reference-{compiler}"));
    let mut cmd = Command::new(compiler);
    cmd.args(flags)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(c_extra_source("libm_results"))
        .arg("-lm");
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(out.success(), "{}", out.report());
    let out = run(Command::new(&exe), JOB_TIMEOUT);
    assert!(
        out.success() && out.stdout.contains("hash "),
        "{}",
        out.report()
    );
    out.stdout
}

/// The program's own `cbrt`, `fmod`, `fma`, `floor` and `sqrt` stay the C library's when it
/// links libmpi.a: `c-extra/libm_results.c` prints the same hash of 1.5 million results linked
/// with stormcc as without MPI — with stormcc's `-lm` only (after libmpi.a), in LULESH's order
/// (objects, flags, `-lm`), fully static, and as C++ through stormcxx, whose `g++` moves the
/// user's `-lm` behind libmpi.a. (cargo's libmpi.a carries compiler_builtins' libm as weak
/// symbols: Rust's `cbrt(2)` is 1.2599210498948732, glibc's 1.2599210498948734.)
#[test]
fn libmpi_leaves_the_programs_math_alone() {
    let dir = scratch_subdir("libm");
    let src = c_extra_source("libm_results");
    let src = src.to_str().unwrap();
    let stormcxx = dir.join("stormcxx");
    std::os::unix::fs::symlink(stormcc(), &stormcxx).unwrap();
    let reference_c = libm_reference(&dir, "cc", &[]);
    let reference_cxx = libm_reference(&dir, "c++", &["-x", "c++"]);
    let build = |program: &Path, args: &[&str]| {
        let mut cmd = wrapper(program);
        cmd.args(args);
        let out = run(cmd, COMPILE_TIMEOUT);
        assert!(out.success(), "{}", out.report());
    };
    let path = |name: &str| dir.join(name).display().to_string();
    let (c_obj, cxx_obj) = (path("libm_results.o"), path("libm_results_cxx.o"));
    build(&stormcc(), &["-O2", "-DUSE_MPI", "-c", "-o", &c_obj, src]);
    build(
        &stormcxx,
        &["-x", "c++", "-O2", "-DUSE_MPI", "-c", "-o", &cxx_obj, src],
    );
    let cases: [(&str, &Path, Vec<&str>, &str); 4] = [
        ("c", &stormcc(), vec![&c_obj], &reference_c),
        (
            "c-lulesh",
            &stormcc(),
            vec![&c_obj, "-O2", "-lm"],
            &reference_c,
        ),
        (
            "c-static",
            &stormcc(),
            vec!["-static", &c_obj, "-lm"],
            &reference_c,
        ),
        (
            "cxx-lulesh",
            &stormcxx,
            vec![&cxx_obj, "-O2", "-lm"],
            &reference_cxx,
        ),
    ];
    let mut differ = Vec::new();
    for (name, wrapper, args, reference) in cases {
        let exe = path(name);
        build(wrapper, &[args.as_slice(), &["-o", &exe]].concat());
        let out = run_job(1, &[], Path::new(&exe), &[]);
        assert!(out.success(), "{name}: {}", out.report());
        if out.stdout != reference {
            differ.push(format!("{name}:\n{}without MPI:\n{reference}", out.stdout));
        }
    }
    assert!(
        differ.is_empty(),
        "linked with libmpi.a the program computes other math than without MPI:\n{}",
        differ.join("\n")
    );
}

#[test]
fn missing_library_is_reported() {
    let empty = scratch_subdir("empty-libdir");
    let mut cmd = wrapper(&stormcc());
    cmd.env("STORMPI_LIBDIR", &empty).args(["-show", "prog.c"]);
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(!out.success(), "{}", out.report());
    assert!(
        out.stderr
            .contains(&format!("{}/libmpi.a not found", empty.display())),
        "{}",
        out.report()
    );
    let out = stormcc_with(&[]);
    assert!(
        !out.success() && out.stderr.contains("Usage: stormcc"),
        "{}",
        out.report()
    );
}

/// Issue 27: a program built with `pkg-config --cflags --libs stormpi` loads stormpi's library
/// whatever else the dynamic linker could find under the name `libmpi.so` (Debian's Open MPI
/// installs one in the default search path; here its directory is even put first with
/// LD_LIBRARY_PATH): it records a library name no other MPI uses, and a run path to it.
fn pkg_config_build_runs_on_stormpi(prefix: &Path) {
    let mut cmd = Command::new("pkg-config");
    cmd.env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .args(["--cflags", "--libs", "stormpi"]);
    let out = run(cmd, Duration::from_secs(30));
    assert!(out.success(), "{}", out.report());
    let exe = prefix.join("hello.pc");
    let mut cmd = Command::new("cc");
    cmd.args(C_FLAGS)
        .arg("-o")
        .arg(&exe)
        .arg(c_source("hello"))
        .args(out.stdout.split_whitespace());
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(out.success(), "{}", out.report());
    let mut cmd = Command::new(prefix.join("bin/mpirun"));
    cmd.args(["-n", "2", "--timeout"])
        .arg(JOB_TIMEOUT.as_secs().to_string())
        .arg(&exe);
    let ompi = Path::new("/usr/lib/x86_64-linux-gnu/openmpi/lib");
    if ompi.is_dir() {
        cmd.env("LD_LIBRARY_PATH", ompi);
    }
    let out = run_stormrun(cmd);
    out.assert_ok("hello");
    assert!(
        out.stdout.matches(", stormpi ").count() == 2,
        "not running on stormpi\n{}",
        out.report()
    );
}

fn link_target(path: &Path) -> String {
    std::fs::read_link(path)
        .unwrap_or_else(|e| panic!("{} is not a symlink: {e}", path.display()))
        .display()
        .to_string()
}

/// ci/install.sh lays out the build (`--no-build`: the tests check the artifacts the workspace
/// build made, and a cargo run here would re-link them under the other tests' feet, as its
/// smaller package selection unifies features differently); the installed wrappers find the
/// installed header and libraries, which define MPI's symbols and no others, pkg-config
/// describes them, and installing again works.
#[test]
fn install_script_lays_out_a_working_tree() {
    let prefix = scratch_subdir("install").join("prefix");
    let install = || {
        let mut cmd = Command::new(workspace_dir().join("ci/install.sh"));
        cmd.arg("--no-build").arg(&prefix);
        let target = bin_dir().parent().unwrap().to_path_buf();
        cmd.env("CARGO_TARGET_DIR", target);
        let out = run(cmd, Duration::from_secs(60));
        assert!(out.success(), "{}", out.report());
    };
    install();
    install();

    let p = |rel: &str| prefix.join(rel);
    for f in [
        "bin/stormrun",
        "bin/stormcc",
        "include/mpi.h",
        "lib/libmpi.a",
        "lib/libmpi.so",
        "lib/pkgconfig/stormpi.pc",
    ] {
        assert!(p(f).is_file(), "{f} not installed");
    }
    // The installed libraries define all of MPI and nothing else globally (libmpi.a localized).
    let mut cmd = Command::new("bash");
    cmd.arg(workspace_dir().join("ci/check-symbols.sh"))
        .arg(p("lib"));
    let out = run(cmd, Duration::from_secs(60));
    assert!(out.success(), "{}", out.report());
    for (link, to) in [
        ("bin/stormcxx", "stormcc"),
        ("bin/mpicc", "stormcc"),
        ("bin/mpicxx", "stormcxx"),
        ("bin/mpic++", "stormcxx"),
        ("bin/mpirun", "stormrun"),
        ("bin/mpiexec", "stormrun"),
        ("lib/libmpich.so.12", "libmpi.so"),
        ("lib/libstormpi.so", "libmpi.so"),
        ("lib/pkgconfig/mpi.pc", "stormpi.pc"),
    ] {
        assert_eq!(link_target(&p(link)), to, "{link}");
    }

    let prefix_s = prefix.display().to_string();
    let mut cmd = wrapper(&p("bin/mpicc"));
    cmd.args(["-show", "x.c"]);
    let out = run(cmd, COMPILE_TIMEOUT);
    assert_eq!(
        out.stdout.trim_end(),
        format!("cc -I{prefix_s}/include x.c {prefix_s}/lib/libmpi.a {MEMHOOKS} {NATIVE_LIBS}")
    );

    // Build and run with the installed tree only.
    let exe = p("ring");
    let mut cmd = wrapper(&p("bin/mpicc"));
    cmd.arg("-o").arg(&exe).arg(c_source("ring"));
    let out = run(cmd, COMPILE_TIMEOUT);
    assert!(out.success(), "{}", out.report());
    let mut cmd = Command::new(p("bin/mpirun"));
    cmd.args(["-n", "2", "--timeout"])
        .arg(JOB_TIMEOUT.as_secs().to_string())
        .arg(&exe);
    run_stormrun(cmd).assert_ok("ring");

    // A program built by MPICH's wrapper runs on the installed stormpi through lib/libmpich.so.12.
    if in_path("mpicc.mpich") {
        let exe = p("hello.mpich");
        let mut cmd = Command::new("mpicc.mpich");
        cmd.args(C_FLAGS).arg("-o").arg(&exe).arg(c_source("hello"));
        let out = run(cmd, COMPILE_TIMEOUT);
        assert!(out.success(), "{}", out.report());
        let mut cmd = Command::new(p("bin/mpiexec"));
        cmd.args(["-n", "2", "--timeout"])
            .arg(JOB_TIMEOUT.as_secs().to_string())
            .arg(&exe)
            .env("LD_LIBRARY_PATH", p("lib"));
        let out = run_stormrun(cmd);
        out.assert_ok("hello");
        assert!(
            out.stdout.matches(", stormpi ").count() == 2,
            "not running on stormpi\n{}",
            out.report()
        );
    } else {
        eprintln!("NOTE: mpicc.mpich is not installed; lib/libmpich.so.12 was not tried");
    }

    if in_path("pkg-config") {
        for pc in ["stormpi", "mpi"] {
            let mut cmd = Command::new("pkg-config");
            cmd.env("PKG_CONFIG_PATH", p("lib/pkgconfig"))
                .args(["--cflags", "--libs", "--static", pc]);
            let out = run(cmd, Duration::from_secs(30));
            assert_eq!(
                out.stdout.trim_end(),
                format!(
                    "-I{prefix_s}/include -L{prefix_s}/lib -lstormpi -Wl,-rpath,{prefix_s}/lib \
                     {NATIVE_LIBS}"
                ),
                "{}",
                out.report()
            );
        }
        pkg_config_build_runs_on_stormpi(&prefix);
    } else {
        eprintln!("NOTE: pkg-config is not installed; the .pc file was not checked by it");
    }
}
