//! Shared helpers of stormpi's multi-process tests (the integration tests in `tests/tests/`).
//!
//! # Where the artifacts come from
//!
//! The tests use what the workspace build produced: `stormrun`, `stormcc`, `libmpi.a`,
//! `libmpi.so` and the example programs, all in `target/<profile>/`. That directory is
//! `STORMPI_BIN_DIR` if set, else two levels above the test executable
//! (`target/<profile>/deps/<test>-<hash>`). `cargo test` does not build other packages' binaries
//! for this crate, so the test command builds first ([`BUILD_COMMAND`]); a missing artifact fails
//! the test with that command.
//!
//! # Nothing may hang, nothing may stay behind
//!
//! Every process runs under a deadline ([`Proc`]): past it, the process gets SIGTERM (stormrun
//! then tears its job down and removes its shared-memory files), and two seconds later its whole
//! process tree — found through `/proc`, since stormrun puts each rank in its own process group —
//! gets SIGKILL. The same happens to a process still running when its [`Proc`] is dropped, so a
//! failing assertion does not leave a job behind. Jobs started by [`run_job`] are also checked
//! for leftover `/dev/shm/stormpi-<stormrun pid>-*` files.
//!
//! Programs are built once per test binary into a scratch directory that is removed when the
//! test binary exits.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub mod lwk;
pub mod netns;
pub mod slurm;
/// The command that builds everything the tests use.
pub const BUILD_COMMAND: &str = "cargo build --workspace --release --all-targets";

/// `--timeout` given to stormrun for an ordinary job: generous, since a run of the slowest
/// program takes a few seconds at 8 ranks on 2 cores.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// How much longer than stormrun's own timeout the test waits before killing it.
const GRACE: Duration = Duration::from_secs(20);

/// The directory holding the built artifacts (see the crate documentation).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STORMPI_BIN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in target/<profile>/deps/")
        .to_path_buf()
}

/// `bin_dir()/relative`, which must exist.
///
/// # Panics
/// If it does not, naming the command that builds it.
pub fn artifact(relative: &str) -> PathBuf {
    let path = bin_dir().join(relative);
    assert!(
        path.exists(),
        "{} does not exist: build the workspace first with `{BUILD_COMMAND}` \
         (or point STORMPI_BIN_DIR at a directory holding the build)",
        path.display()
    );
    path
}

/// The launcher.
pub fn stormrun() -> PathBuf {
    artifact("stormrun")
}

/// The compiler wrapper; also checks that the static library it links is there.
pub fn stormcc() -> PathBuf {
    artifact("libmpi.a");
    artifact("stormcc")
}

/// The workspace's root directory (the sources of the C programs are below it).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// The source of the test program `name` in `tests/c/`.
pub fn c_source(name: &str) -> PathBuf {
    workspace_dir().join("tests/c").join(format!("{name}.c"))
}

/// The source of the test program `name` in `tests/c-extra/`.
pub fn c_extra_source(name: &str) -> PathBuf {
    workspace_dir()
        .join("tests/c-extra")
        .join(format!("{name}.c"))
}

static SCRATCH: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_scratch() {
    if let Some(dir) = SCRATCH.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A directory of this test binary's own, removed when the process exits.
pub fn scratch_dir() -> &'static Path {
    SCRATCH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        let stem = exe
            .file_stem()
            .unwrap_or(OsStr::new("test"))
            .to_string_lossy();
        let dir = std::env::temp_dir().join(format!("stormpi-{stem}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the scratch directory");
        // SAFETY: `remove_scratch` is an `extern "C" fn()` that only touches a OnceLock that is
        // set by now; registering it has no other precondition.
        unsafe { libc::atexit(remove_scratch) };
        dir
    })
}

/// A fresh, empty subdirectory of the scratch directory.
pub fn scratch_subdir(name: &str) -> PathBuf {
    let dir = scratch_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch subdirectory");
    dir
}

type Built = Arc<OnceLock<Result<PathBuf, String>>>;

/// Builds `scratch/<out>` once per test binary with `build` (which gets the output path);
/// later calls return the cached result. Different programs build in parallel.
///
/// # Panics
/// If the build fails, with its output.
pub fn build_once(out: &str, build: impl FnOnce(&Path) -> Command) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, Built>>> = OnceLock::new();
    let cell = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(out.to_string())
        .or_default()
        .clone();
    let result = cell.get_or_init(|| {
        let path = scratch_dir().join(out);
        let result = run(build(&path), Duration::from_secs(300));
        if result.success() && path.exists() {
            Ok(path)
        } else {
            Err(result.report())
        }
    });
    match result {
        Ok(p) => p.clone(),
        Err(report) => panic!("building {out} failed:\n{report}"),
    }
}

/// Flags for the C test programs, as `tests/c/run-reference.sh` uses them. (gcc 12 misreads the
/// MPI_STATUSES_IGNORE constant, a cast of 1, as a 0-byte array: -Wno-stringop-overflow.)
pub const C_FLAGS: &[&str] = &[
    "-std=c99",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Wno-stringop-overflow",
];

/// The test program `tests/c/<name>.c` built with stormcc (static libmpi), cached.
pub fn c_program(name: &str) -> PathBuf {
    c_program_from(&c_source(name))
}

/// The program `tests/c-extra/<name>.c` built with stormcc, cached.
pub fn c_extra_program(name: &str) -> PathBuf {
    c_program_from(&c_extra_source(name))
}

/// Any C program built with stormcc (named after its file), cached. Programs named
/// `threads_*` use POSIX threads and get `-pthread` too, as in `tests/c/run-reference.sh`.
pub fn c_program_from(src: &Path) -> PathBuf {
    let name = src.file_stem().expect("a C file name").to_string_lossy();
    build_once(&name, |out| {
        let mut cmd = Command::new(stormcc());
        cmd.args(C_FLAGS);
        if name.starts_with("threads_") {
            cmd.arg("-pthread");
        }
        cmd.arg("-o").arg(out).arg(src);
        cmd
    })
}

/// A stormrun command: `stormrun -n NP --oversubscribe --timeout 60 OPTIONS... PROGRAM ARGS...`.
pub fn stormrun_command(np: u32, options: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(stormrun());
    cmd.arg("-n")
        .arg(np.to_string())
        .arg("--oversubscribe")
        .arg("--timeout")
        .arg(JOB_TIMEOUT.as_secs().to_string())
        .args(options)
        .arg(program)
        .args(args);
    cmd
}

/// Runs a job under stormrun (see [`stormrun_command`]) and checks that it left no shared-memory
/// files.
pub fn run_job(np: u32, options: &[&str], program: &Path, args: &[&str]) -> Output {
    run_stormrun(stormrun_command(np, options, program, args))
}

/// Runs a stormrun command under a deadline of its `--timeout` plus a grace period, and records
/// the `/dev/shm/stormpi-<its pid>-*` files it left behind (removing them).
pub fn run_stormrun(cmd: Command) -> Output {
    let before = shm_files("stormpi-");
    let proc = Proc::spawn(cmd, JOB_TIMEOUT + GRACE);
    let prefix = format!("stormpi-{}-", proc.pid());
    let mut out = proc.wait();
    out.leftover_shm = shm_files(&prefix)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    for f in &out.leftover_shm {
        let _ = std::fs::remove_file(Path::new(SHM_DIR).join(f));
    }
    out
}

/// Where POSIX shared memory and stormpi's segment files live.
pub const SHM_DIR: &str = "/dev/shm";

/// Names of the files in `/dev/shm` that start with `prefix`.
pub fn shm_files(prefix: &str) -> HashSet<String> {
    std::fs::read_dir(SHM_DIR)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `cmd` to completion under `timeout`, collecting its output.
pub fn run(cmd: Command, timeout: Duration) -> Output {
    Proc::spawn(cmd, timeout).wait()
}

/// The outcome of a process.
#[derive(Debug)]
pub struct Output {
    /// The command line, for messages.
    pub command: String,
    /// How it ended (after SIGTERM/SIGKILL if it timed out).
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// From start to exit.
    pub elapsed: Duration,
    /// Whether the test's deadline killed it.
    pub timed_out: bool,
    /// `/dev/shm` files of its job that were still there after it ended (stormrun jobs only).
    pub leftover_shm: Vec<String>,
}

impl Output {
    /// Exit status, if it exited.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Exited with status 0 (in time).
    pub fn success(&self) -> bool {
        self.status.success() && !self.timed_out
    }

    /// Everything known about the run, for assertion messages.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let how = match (self.status.code(), self.status.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => format!("{:?}", self.status),
        };
        let _ = writeln!(s, "command: {}", self.command);
        let _ = writeln!(
            s,
            "ended: {how} after {:.2} s{}",
            self.elapsed.as_secs_f64(),
            if self.timed_out {
                " (killed by the test's deadline)"
            } else {
                ""
            }
        );
        if !self.leftover_shm.is_empty() {
            let _ = writeln!(s, "left in {SHM_DIR}: {:?}", self.leftover_shm);
        }
        let _ = writeln!(s, "--- stdout ---\n{}", tail(&self.stdout, 8000));
        let _ = write!(s, "--- stderr ---\n{}", tail(&self.stderr, 8000));
        s
    }

    /// Whether stdout has exactly this line.
    pub fn has_line(&self, line: &str) -> bool {
        self.stdout.lines().any(|l| l == line)
    }

    /// Asserts success: exit status 0, the `OK <name>` line, no leftover files.
    ///
    /// # Panics
    /// Otherwise, with the whole report.
    #[track_caller]
    pub fn assert_ok(&self, name: &str) {
        assert!(
            self.success() && self.has_line(&format!("OK {name}")) && self.leftover_shm.is_empty(),
            "expected exit 0, a line `OK {name}` and no leftover shared memory\n{}",
            self.report()
        );
    }

    /// Asserts that the job failed by itself: a non-zero status, not the test's deadline, no
    /// leftover files; and that stderr contains every one of `needles`.
    ///
    /// # Panics
    /// Otherwise, with the whole report.
    #[track_caller]
    pub fn assert_failed_with(&self, needles: &[&str]) {
        assert!(
            !self.timed_out && !self.status.success() && self.leftover_shm.is_empty(),
            "expected a prompt non-zero exit and no leftover shared memory\n{}",
            self.report()
        );
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "expected stderr to contain {n:?}\n{}",
                self.report()
            );
        }
    }
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// One output stream of a child, filled by a reader thread.
#[derive(Default)]
struct Stream {
    state: Mutex<(Vec<u8>, bool)>,
    changed: Condvar,
}

impl Stream {
    fn start(mut pipe: impl Read + Send + 'static) -> Arc<Stream> {
        let stream = Arc::new(Stream::default());
        let s = stream.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                let n = pipe.read(&mut buf).unwrap_or(0);
                let mut st = s.state.lock().unwrap();
                if n == 0 {
                    st.1 = true;
                } else {
                    st.0.extend_from_slice(&buf[..n]);
                }
                s.changed.notify_all();
                if n == 0 {
                    break;
                }
            }
        });
        stream
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.state.lock().unwrap().0).into_owned()
    }

    /// Waits until `done(text so far)` holds or the stream ends or `deadline` passes; returns
    /// whether `done` held.
    fn wait_until(&self, deadline: Instant, done: impl Fn(&str) -> bool) -> bool {
        let mut st = self.state.lock().unwrap();
        loop {
            if done(&String::from_utf8_lossy(&st.0)) {
                return true;
            }
            let now = Instant::now();
            if st.1 || now >= deadline {
                return false;
            }
            st = self.changed.wait_timeout(st, deadline - now).unwrap().0;
        }
    }

    fn wait_eof(&self, deadline: Instant) -> bool {
        let mut st = self.state.lock().unwrap();
        while !st.1 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self.changed.wait_timeout(st, deadline - now).unwrap().0;
        }
        true
    }
}

/// A running child process with a deadline; see the crate documentation.
pub struct Proc {
    child: Child,
    command: String,
    stdout: Arc<Stream>,
    stderr: Arc<Stream>,
    started: Instant,
    deadline: Instant,
    status: Option<ExitStatus>,
    timed_out: bool,
}

impl Proc {
    /// Starts `cmd` (stdin from /dev/null, stdout and stderr captured) in a process group of its
    /// own; it must end within `timeout`.
    ///
    /// # Panics
    /// If it cannot be started.
    pub fn spawn(mut cmd: Command, timeout: Duration) -> Proc {
        let command = describe(&cmd);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command}: {e}"));
        let stdout = Stream::start(child.stdout.take().expect("piped stdout"));
        let stderr = Stream::start(child.stderr.take().expect("piped stderr"));
        let started = Instant::now();
        Proc {
            child,
            command,
            stdout,
            stderr,
            started,
            deadline: started + timeout,
            status: None,
            timed_out: false,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.text()
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Waits up to `timeout` until `done(stdout so far)` holds; returns whether it did.
    pub fn wait_for_stdout(&self, timeout: Duration, done: impl Fn(&str) -> bool) -> bool {
        self.stdout.wait_until(Instant::now() + timeout, done)
    }

    /// Waits up to `timeout` for the child to exit; returns its status if it did.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(st) = self.status {
                return Some(st);
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st);
                return Some(st);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the child until its deadline, kills it (and its whole process tree) past that,
    /// and returns everything it did.
    pub fn wait(mut self) -> Output {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if self.wait_timeout(left).is_none() {
            self.timed_out = true;
            self.kill_tree();
        }
        let elapsed = self.started.elapsed();
        // The pipes may outlive the child only if it handed them to a descendant that is still
        // running; do not wait for such a one for long.
        let eof = Instant::now() + Duration::from_secs(5);
        self.stdout.wait_eof(eof);
        self.stderr.wait_eof(eof);
        Output {
            command: self.command.clone(),
            status: self.status.expect("waited for above"),
            stdout: self.stdout.text(),
            stderr: self.stderr.text(),
            elapsed,
            timed_out: self.timed_out,
            leftover_shm: Vec::new(),
        }
    }

    /// SIGTERM first, so that a launcher can tear its job down and clean up; SIGKILL to the
    /// whole tree two seconds later.
    fn kill_tree(&mut self) {
        let pid = self.child.id() as i32;
        let mut tree = descendants(pid);
        signal(pid, libc::SIGTERM);
        if self.wait_timeout(Duration::from_secs(2)).is_none() {
            // Taken again: the launcher may have started more since.
            tree.extend(descendants(pid));
            signal(-pid, libc::SIGKILL);
            signal(pid, libc::SIGKILL);
            let st = self.child.wait().expect("waiting for a killed child");
            self.status = Some(st);
        }
        for p in tree {
            signal(p, libc::SIGKILL);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() && !matches!(self.child.try_wait(), Ok(Some(_))) {
            self.kill_tree();
        }
    }
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; failure (no such process) is fine.
    unsafe { libc::kill(pid, sig) };
}

/// All descendants of `pid` now, from `/proc/*/stat`.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_of(p) {
                children.entry(ppid).or_default().push(p);
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the parenthesised command name,
/// which may itself hold spaces and parentheses, and the state).
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether a process with this id exists (and is not a zombie).
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The value of `var` in the environment of process `pid`.
pub fn environment_of(pid: i32, var: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{var}=");
    env.split(|&b| b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string))
}

/// A command as a readable line.
pub fn describe(cmd: &Command) -> String {
    let mut words: Vec<OsString> = cmd
        .get_envs()
        .filter_map(|(k, v)| {
            let mut kv = k.to_os_string();
            kv.push("=");
            kv.push(v?);
            Some(kv)
        })
        .collect();
    words.push(cmd.get_program().to_os_string());
    words.extend(cmd.get_args().map(OsStr::to_os_string));
    words
        .iter()
        .map(|w| w.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `program` is found in `PATH`.
pub fn in_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_past_its_deadline_is_killed_with_its_children() {
        let mut cmd = Command::new("sh");
        // A child that ignores SIGTERM, in a process group of its own (like a rank), and a
        // parent that ignores it too.
        cmd.args([
            "-c",
            "trap '' TERM; set -m; sh -c 'trap \"\" TERM; echo child $$; sleep 60' & wait",
        ]);
        let proc = Proc::spawn(cmd, Duration::from_millis(300));
        assert!(proc.wait_for_stdout(Duration::from_secs(5), |s| s.contains("child ")));
        let child: i32 = proc
            .stdout()
            .trim()
            .strip_prefix("child ")
            .unwrap()
            .parse()
            .unwrap();
        let out = proc.wait();
        assert!(out.timed_out, "{}", out.report());
        assert!(out.elapsed < Duration::from_secs(10), "{}", out.report());
        std::thread::sleep(Duration::from_millis(100));
        assert!(!is_alive(child), "child {child} survived");
    }

    #[test]
    fn output_and_status_are_collected() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo OK x; echo err >&2; exit 3"]);
        let out = run(cmd, Duration::from_secs(10));
        assert_eq!(out.code(), Some(3));
        assert!(out.has_line("OK x") && !out.success());
        assert_eq!(out.stderr, "err\n");
    }

    #[test]
    fn parent_of_parses_proc_stat() {
        let me = std::process::id() as i32;
        // SAFETY: getppid has no preconditions.
        assert_eq!(parent_of(me), Some(unsafe { libc::getppid() }));
        assert!(is_alive(me));
    }
}
