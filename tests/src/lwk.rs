//! Node-build jobs: programs linked statically against the lightweight-kernel library
//! (`libstormpi_lwk.a`) and started the way a vendor launcher starts them — only environment
//! variables (`STORMPI_RANK`, `STORMPI_SIZE`, `STORMPI_JOBID`), no PMI server — inside the node
//! contract: each rank in an empty network namespace (`unshare(CLONE_NEWNET)`, like `unshare -n`)
//! under a seccomp filter that makes `socket()` (other than `AF_UNIX`), `fork`, `vfork` and
//! `clone` without `CLONE_THREAD` fail with `EPERM` (and `clone3` with `ENOSYS`, so threads fall
//! back to `clone`, whose flags the filter can see).
//!
//! [`LwkJob`] is the launcher: it starts the ranks, gives the job a deadline, and when a rank
//! fails (exits non-zero, is killed) or the deadline passes it kills the others; afterwards it
//! removes the job's `/dev/shm` segments of the software Portals interface.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::{build_once, workspace_dir, Output, Proc};

/// A rust target triple for the node build and how to run its programs.
#[derive(Clone, Debug)]
pub struct Target {
    /// `None`: the host (the workspace's `target/<profile>/`).
    pub triple: Option<&'static str>,
    /// C compiler and its flags for this target.
    pub cc: Vec<String>,
    /// Command prefix that runs a program of this target (`qemu-aarch64`), if any.
    pub runner: Vec<String>,
    /// Libraries after the node library.
    pub libs: Vec<String>,
}

impl Target {
    /// The host build.
    pub fn host() -> Target {
        Target {
            triple: None,
            cc: vec!["cc".into()],
            runner: Vec::new(),
            libs: LIBS.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A musl target (`x86_64-unknown-linux-musl`: `musl-gcc`; `aarch64-unknown-linux-musl`:
    /// the aarch64 cross compiler with Debian's musl specs, programs run under `qemu-aarch64`),
    /// with the unwinder Rust ships for it; `None` (after saying why) when its library or
    /// compiler is missing and `STORMPI_REQUIRE_CROSS` is not set.
    pub fn musl(triple: &'static str) -> Option<Target> {
        let (cc, runner): (Vec<String>, Vec<String>) = match triple {
            "x86_64-unknown-linux-musl" => (vec!["musl-gcc".into()], vec![]),
            "aarch64-unknown-linux-musl" => (
                vec![
                    "aarch64-linux-gnu-gcc".into(),
                    "-specs".into(),
                    "/usr/lib/aarch64-linux-musl/musl-gcc.specs".into(),
                ],
                vec!["qemu-aarch64".into()],
            ),
            _ => panic!("no recipe for {triple}"),
        };
        let lib = workspace_dir().join(format!("target/lwk/{triple}/lib/libmpi.a"));
        let sysroot = Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let unwind = PathBuf::from(sysroot).join(format!(
            "lib/rustlib/{triple}/lib/self-contained/libunwind.a"
        ));
        let tools = cc
            .iter()
            .take(1)
            .chain(runner.iter())
            .all(|t| crate::in_path(t));
        let specs = !cc
            .iter()
            .any(|a| a.ends_with(".specs") && !Path::new(a).exists());
        if !(lib.exists() && unwind.exists() && tools && specs) {
            let why = format!(
                "SKIPPED: {triple}: needs {} (bash ci/lwk-build.sh {triple}), {} (rustup target add {triple}) and {:?} (bash ci/setup.sh)",
                lib.display(),
                unwind.display(),
                cc.iter().take(1).chain(runner.iter()).collect::<Vec<_>>()
            );
            assert!(std::env::var_os("STORMPI_REQUIRE_CROSS").is_none(), "{why}");
            eprintln!("{why}");
            return None;
        }
        Some(Target {
            triple: Some(triple),
            cc,
            runner,
            libs: vec![unwind.display().to_string()],
        })
    }

    /// The node library for this target: the host's as cargo built it; a cross target's as
    /// `ci/lwk-build.sh` installs it (localized: only MPI's symbols global).
    pub fn library(&self) -> PathBuf {
        match self.triple {
            None => crate::artifact("libstormpi_lwk.a"),
            Some(t) => {
                let p = workspace_dir().join(format!("target/lwk/{t}/lib/libmpi.a"));
                assert!(
                    p.exists(),
                    "{} does not exist: build it with `bash ci/lwk-build.sh {t}`",
                    p.display()
                );
                p
            }
        }
    }

    fn name(&self) -> &str {
        self.triple.unwrap_or("host")
    }
}

/// Native libraries a static program linking the Rust library needs (glibc or musl).
const LIBS: &[&str] = &["-lgcc_eh", "-lpthread", "-lm", "-ldl", "-lc"];

/// `src` (a C file) built statically against the node library of `target`, cached per test binary.
pub fn node_program(target: &Target, src: &Path, extra: &[&str]) -> PathBuf {
    let name = src.file_stem().expect("a C file name").to_string_lossy();
    let out = format!("lwk-{}-{name}", target.name());
    let lib = target.library();
    let cc = target.cc.clone();
    let libs = target.libs.clone();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    build_once(&out, |path| {
        let mut cmd = Command::new(&cc[0]);
        cmd.args(&cc[1..])
            .args(crate::C_FLAGS)
            .arg("-static")
            .arg("-I")
            .arg(workspace_dir().join("core/include"))
            .arg("-o")
            .arg(path)
            .arg(src)
            .arg(&lib)
            .args(&extra)
            .args(&libs);
        cmd
    })
}

/// Which transport a job uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pml {
    /// The Portals MTL (the node default).
    Cm,
    /// The ordinary PML over the Portals BTL.
    Ob1,
}

impl Pml {
    /// The value of the `pml` parameter.
    pub fn name(self) -> &'static str {
        match self {
            Pml::Cm => "cm",
            Pml::Ob1 => "ob1",
        }
    }
}

/// How each rank is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// An empty network namespace.
    pub netns: bool,
    /// The seccomp filter.
    pub seccomp: bool,
}

impl Sandbox {
    /// Both restrictions: the node contract.
    pub const NODE: Sandbox = Sandbox {
        netns: true,
        seccomp: true,
    };
}

/// A job started with environment variables only.
pub struct LwkJob {
    /// Ranks.
    pub np: u32,
    /// Transport.
    pub pml: Pml,
    /// Extra environment for every rank.
    pub env: Vec<(String, String)>,
    /// Confinement.
    pub sandbox: Sandbox,
    /// Deadline of the whole job.
    pub timeout: Duration,
    /// Command prefix (an emulator).
    pub runner: Vec<String>,
}

impl LwkJob {
    /// Runs the programs of `target` (through its emulator, if any).
    pub fn on(mut self, target: &Target) -> LwkJob {
        self.runner = target.runner.clone();
        self
    }
}

/// What a job did.
pub struct JobOutput {
    /// Per rank.
    pub ranks: Vec<Output>,
    /// Whether the deadline passed or a failure tore the job down.
    pub torn_down: bool,
}

impl JobOutput {
    /// Whether every rank exited 0.
    pub fn success(&self) -> bool {
        self.ranks.iter().all(Output::success)
    }

    /// Everything the ranks said, for a failure message.
    pub fn report(&self) -> String {
        let mut s = String::new();
        for (r, o) in self.ranks.iter().enumerate() {
            s += &format!("--- rank {r}:\n{}\n", o.report());
        }
        s
    }

    /// Panics with the report unless every rank exited 0 and rank 0 said `OK <name>`.
    pub fn assert_ok(&self, name: &str) {
        assert!(
            self.success() && self.ranks[0].has_line(&format!("OK {name}")),
            "{name} failed:\n{}",
            self.report()
        );
    }
}

static JOBS: AtomicU32 = AtomicU32::new(0);

impl LwkJob {
    /// A job of `np` ranks over `pml`, confined like a node, with a 60 s deadline.
    pub fn new(np: u32, pml: Pml) -> LwkJob {
        LwkJob {
            np,
            pml,
            env: Vec::new(),
            sandbox: Sandbox::NODE,
            timeout: Duration::from_secs(60),
            runner: Vec::new(),
        }
    }

    /// Adds `STORMPI_MCA_<name>=value` for every rank.
    pub fn param(mut self, name: &str, value: &str) -> LwkJob {
        self.env
            .push((format!("STORMPI_MCA_{name}"), value.to_string()));
        self
    }

    /// Runs `program args` as every rank and waits for the job.
    pub fn run(&self, program: &Path, args: &[&str]) -> JobOutput {
        let job = format!(
            "lwktest{}x{}",
            std::process::id(),
            JOBS.fetch_add(1, Ordering::Relaxed)
        );
        let deadline = Instant::now() + self.timeout;
        let mut procs: Vec<Proc> = (0..self.np)
            .map(|r| {
                let mut cmd = match self.runner.split_first() {
                    Some((first, rest)) => {
                        let mut c = Command::new(first);
                        c.args(rest).arg(program);
                        c
                    }
                    None => Command::new(program),
                };
                cmd.args(args)
                    .env("STORMPI_RANK", r.to_string())
                    .env("STORMPI_SIZE", self.np.to_string())
                    .env("STORMPI_JOBID", &job)
                    .env("STORMPI_MCA_pml", self.pml.name())
                    .envs(self.env.iter().map(|(k, v)| (k, v)));
                confine(&mut cmd, self.sandbox);
                Proc::spawn(cmd, self.timeout + Duration::from_secs(5))
            })
            .collect();
        // Watch: a failed rank or the deadline ends the job.
        let mut torn_down = false;
        loop {
            let mut running = 0;
            let mut failed = false;
            for p in procs.iter_mut() {
                match p.wait_timeout(Duration::ZERO) {
                    None => running += 1,
                    Some(st) if !st.success() => failed = true,
                    Some(_) => {}
                }
            }
            if running == 0 {
                break;
            }
            if failed || Instant::now() >= deadline {
                torn_down = true;
                for p in procs.iter() {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(p.pid() as i32, libc::SIGKILL) };
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let ranks = procs.into_iter().map(Proc::wait).collect();
        remove_segments(&job);
        JobOutput { ranks, torn_down }
    }
}

/// Removes `/dev/shm/stormpi-<job>-*`.
fn remove_segments(job: &str) {
    for f in crate::shm_files(&format!("stormpi-{job}-")) {
        let _ = std::fs::remove_file(Path::new(crate::SHM_DIR).join(f));
    }
}

/// Makes `cmd`'s process enter an empty network namespace and install the seccomp filter
/// between fork and exec.
pub fn confine(cmd: &mut Command, sandbox: Sandbox) {
    // SAFETY: the closure runs in the child between fork and exec and only makes system calls
    // (unshare, prctl), which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if sandbox.netns {
                enter_netns()?;
            }
            if sandbox.seccomp {
                install_filter()?;
            }
            Ok(())
        });
    }
}

/// Moves the calling process into a new, empty network namespace (a user namespace first when
/// not root).
pub fn enter_netns() -> std::io::Result<()> {
    // SAFETY: unshare has no memory-safety preconditions.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0
            && libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// System call numbers of this machine: (audit arch, socket, clone, clone3, fork, vfork);
/// `u32::MAX` for calls the architecture does not have.
fn numbers() -> (u32, u32, u32, u32, u32, u32) {
    if cfg!(target_arch = "x86_64") {
        (AUDIT_ARCH_X86_64, 41, 56, 435, 57, 58)
    } else {
        (AUDIT_ARCH_AARCH64, 198, 220, 435, u32::MAX, u32::MAX)
    }
}

/// The filter: `socket` unless `AF_UNIX`, `fork`, `vfork`, `clone` without `CLONE_THREAD` fail
/// with `EPERM`; `clone3` with `ENOSYS`; everything else is allowed.
pub fn filter() -> Vec<libc::sock_filter> {
    let (arch, socket, clone, clone3, fork, vfork) = numbers();
    let eperm = RET_ERRNO | libc::EPERM as u32;
    let enosys = RET_ERRNO | libc::ENOSYS as u32;
    vec![
        // 0: a foreign architecture's calls are not judged.
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, RET_ALLOW),
        // 3: the call number.
        stmt(BPF_LD_W_ABS, 0),
        jump(BPF_JEQ_K, socket, 7, 0),
        jump(BPF_JEQ_K, clone, 10, 0),
        jump(BPF_JEQ_K, clone3, 3, 0),
        jump(BPF_JEQ_K, fork, 3, 0),
        jump(BPF_JEQ_K, vfork, 2, 0),
        stmt(BPF_RET_K, RET_ALLOW),
        // 10: clone3.
        stmt(BPF_RET_K, enosys),
        // 11: fork, vfork.
        stmt(BPF_RET_K, eperm),
        // 12: socket: the domain (args[0], low word).
        stmt(BPF_LD_W_ABS, 16),
        jump(BPF_JEQ_K, libc::AF_UNIX as u32, 0, 1),
        stmt(BPF_RET_K, RET_ALLOW),
        stmt(BPF_RET_K, eperm),
        // 16: clone: the flags (args[0], low word).
        stmt(BPF_LD_W_ABS, 16),
        jump(BPF_JSET_K, libc::CLONE_THREAD as u32, 0, 1),
        stmt(BPF_RET_K, RET_ALLOW),
        stmt(BPF_RET_K, eperm),
    ]
}

/// Installs [`filter`] on the calling thread (and its future children).
pub fn install_filter() -> std::io::Result<()> {
    let f = filter();
    let prog = libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut _,
    };
    // SAFETY: prctl with valid arguments; `prog` outlives the call (the kernel copies it).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
