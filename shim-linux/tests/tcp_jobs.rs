//! MPI jobs over the tcp BTL: the self-checking C programs of `tests/c`, built with stormcc and
//! run under stormrun with `--mca btl tcp,self`, so every byte between ranks goes through TCP
//! (over whatever interface the default selection takes on this machine, and once over `lo`
//! explicitly).
//!
//! The tests use the built tools in `target/<profile>/` (two levels above this test executable,
//! or `STORMPI_BIN_DIR`): `stormrun`, `stormcc` and `libmpi.a`. `cargo test` does not build
//! another package's binaries, so build them first (`cargo build --release -p stormpi-linux -p
//! stormpi-bootstrap`, and the same without `--release` for debug test runs); a missing tool
//! fails the test with that command.
//!
//! Jobs run one at a time (a 4-rank job on a 2-core machine is oversubscribed already), each
//! under stormrun's `--timeout` and a watchdog of this test's own.
//!
//! `p2p_figures` (ignored by default; `cargo test --release --test tcp_jobs -- --ignored
//! --nocapture`) prints `bench/p2p.c`'s latency and bandwidth over tcp next to Open MPI's tcp
//! BTL when `mpicc.openmpi` is installed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BUILD: &str = "cargo build --release -p stormpi-linux -p stormpi-bootstrap";
/// stormrun's own deadline for a job.
const JOB_TIMEOUT_S: u32 = 60;
/// How long past that the watchdog waits before killing stormrun.
const GRACE: Duration = Duration::from_secs(20);

fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("STORMPI_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps/")
        .to_path_buf()
}

fn tool(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the tools first with `{BUILD}` (without --release for a debug \
         test run), or set STORMPI_BIN_DIR to a directory holding stormrun, stormcc and libmpi.a",
        p.display()
    );
    p
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("shim-linux is inside the workspace")
        .to_path_buf()
}

/// A directory of one test's own, removed when the test ends (however it ends).
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let d =
            std::env::temp_dir().join(format!("stormpi-tcp-jobs-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Jobs run one at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Builds `src` with `cc` (stormcc, or another MPI's wrapper) into `dir`.
fn build(cc: &Path, src: &Path, dir: &Scratch, out: &str) -> PathBuf {
    let exe = dir.0.join(out);
    let o = Command::new(cc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", cc.display()));
    assert!(
        o.status.success(),
        "building {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

fn c_program(name: &str, dir: &Scratch) -> PathBuf {
    tool("libmpi.a");
    build(
        &tool("stormcc"),
        &workspace().join("tests/c").join(format!("{name}.c")),
        dir,
        name,
    )
}

/// Runs `cmd` to completion under a watchdog; SIGTERM then SIGKILL past the deadline.
fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the job");
    // Readers on threads, so a chatty job cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let mut termed = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit && !termed {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            termed = true;
        }
        if start.elapsed() > limit + Duration::from_secs(2) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

fn stormrun(np: u32, mca: &[(&str, &str)], prog: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(tool("stormrun"));
    cmd.args(["-n", &np.to_string(), "--oversubscribe", "--timeout"])
        .arg(JOB_TIMEOUT_S.to_string());
    for (k, v) in mca {
        cmd.args(["--mca", k, v]);
    }
    cmd.arg(prog).args(args);
    run_bounded(cmd, Duration::from_secs(JOB_TIMEOUT_S.into()) + GRACE)
}

/// Runs `name` over tcp at 2, 3 and 4 ranks; each run must print `OK name`.
fn check(name: &str, args: &[&str]) {
    let dir = Scratch::new(name);
    let prog = c_program(name, &dir);
    for np in [2, 3, 4] {
        let _one = one_at_a_time();
        let start = Instant::now();
        let o = stormrun(np, &[("btl", "tcp,self")], &prog, args);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && stdout.lines().any(|l| l == format!("OK {name}")),
            "{name} at {np} ranks over tcp failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
            o.status
        );
        eprintln!(
            "tcp_jobs: {name} -n {np} over tcp: OK in {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn ring() {
    check("ring", &[]);
}

#[test]
fn allpairs() {
    check("allpairs", &[]);
}

#[test]
fn collectives() {
    check("collectives", &[]);
}

#[test]
fn ssend() {
    check("ssend", &[]);
}

#[test]
fn probe() {
    check("probe", &[]);
}

#[test]
fn wildcard() {
    check("wildcard", &[]);
}

#[test]
fn many_requests() {
    check("many_requests", &[]);
}

#[test]
fn sendrecv_replace() {
    check("sendrecv_replace", &[]);
}

/// Naming `lo` puts the job on loopback whatever else the machine has.
#[test]
fn loopback_by_include() {
    let dir = Scratch::new("loopback");
    let prog = c_program("allpairs", &dir);
    let _one = one_at_a_time();
    let o = stormrun(
        3,
        &[("btl", "tcp,self"), ("btl_tcp_if_include", "lo")],
        &prog,
        &["1048576"],
    );
    assert!(
        o.status.success(),
        "allpairs over lo failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// An interface list that matches nothing leaves no transport between the ranks: the job must
/// fail with a message, not hang.
#[test]
fn no_usable_interface_is_a_clear_failure() {
    let dir = Scratch::new("noif");
    let prog = c_program("ring", &dir);
    let _one = one_at_a_time();
    let o = stormrun(
        2,
        &[("btl", "tcp,self"), ("btl_tcp_if_include", "no-such-if0")],
        &prog,
        &[],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "ring ran without a transport");
    assert!(
        stderr.contains("no transport can reach process"),
        "unexpected failure:\n{stderr}"
    );
}

/// Latency and bandwidth of `bench/p2p.c` over tcp, next to Open MPI's tcp BTL (printed, not
/// asserted: the figures depend on the machine and its load).
#[test]
#[ignore]
fn p2p_figures() {
    let dir = Scratch::new("p2p");
    let src = workspace().join("bench/p2p.c");
    let ours = build(&tool("stormcc"), &src, &dir, "p2p-stormpi");
    let args = ["-m", "1048576"];
    let pick = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                matches!(
                    (f.first().copied(), f.get(1).copied()),
                    (Some("lat"), Some("0" | "8" | "1024"))
                        | (Some("bw"), Some("65536" | "1048576"))
                )
            })
            .map(str::to_string)
            .collect()
    };
    let _one = one_at_a_time();
    let o = stormrun(2, &[("btl", "tcp,self")], &ours, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("stormpi tcp:  {}", pick(&o).join("  "));
    let have_ompi = Command::new("mpicc.openmpi")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_ompi {
        eprintln!("Open MPI: mpicc.openmpi not installed; no reference figures");
        return;
    }
    let theirs = build(Path::new("mpicc.openmpi"), &src, &dir, "p2p-openmpi");
    let mut cmd = Command::new("mpirun.openmpi");
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl_base_warn_component_unused", "0")
        .args(["-n", "2", "--mca", "btl", "tcp,self"])
        .arg(&theirs)
        .args(args);
    let o = run_bounded(cmd, Duration::from_secs(300));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("Open MPI tcp: {}", pick(&o).join("  "));
}
