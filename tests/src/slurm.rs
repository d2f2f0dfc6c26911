//! A one-host Slurm brought up for a test: `munged`, `slurmctld` and `slurmd` in a scratch
//! directory with a minimal configuration (the recipe of the machine notes), torn down when the
//! [`Slurm`] is dropped. [`Slurm::start`] says why when Slurm cannot run here, so a test can skip
//! loudly. [`Slurm::start_nodes`] runs one `slurmd -N NAME` per node instead, each a node of its
//! own on this host (Debian's slurmd supports several per host), for jobs over several "nodes".

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::in_path;

/// A running one-host Slurm.
pub struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
    /// The nodes' names (`localhost` for the one-node form).
    nodes: Vec<String>,
}

/// The variable every daemon of one test Slurm carries (its scratch directory), so that its step
/// daemons — which slurmd starts and which detach from it — can be told from other Slurms' on
/// this host.
const MARK_ENV: &str = "STORMPI_TEST_SLURM";

/// Process ids of the running `slurmstepd`s whose environment carries `mark` (they detach from
/// slurmd and inherit its environment).
fn step_daemons(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK_ENV}={mark}");
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "slurmstepd")
                        && std::fs::read(format!("/proc/{pid}/environ"))
                            .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn spawn(cmd: &mut Command) -> Result<Child, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))
}

impl Slurm {
    /// Starts munge and Slurm in a fresh directory and waits until the node is idle.
    pub fn start() -> Result<Slurm, String> {
        Self::start_with(&[])
    }

    /// Starts a Slurm of several nodes on this host, one slurmd per name (each with its own
    /// port and spool directory), in a partition that may oversubscribe them; waits until all
    /// are idle.
    pub fn start_nodes(names: &[&str]) -> Result<Slurm, String> {
        if names.is_empty() {
            return Err("a Slurm needs a node".into());
        }
        Self::start_with(names)
    }

    /// `names` empty: the one-node form (`NodeName=localhost`).
    fn start_with(names: &[&str]) -> Result<Slurm, String> {
        for tool in ["munged", "slurmctld", "slurmd", "srun", "sinfo", "runuser"] {
            if !in_path(tool) && !Path::new("/usr/sbin").join(tool).exists() {
                return Err(format!(
                    "{tool} is not installed (bash ci/setup.sh installs slurm-wlm and munge)"
                ));
            }
        }
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } != 0 {
            return Err("starting slurmd needs root".into());
        }
        let key = Path::new("/etc/munge/munge.key");
        if !key.exists() {
            return Err("/etc/munge/munge.key is missing (the munge package makes it)".into());
        }
        let dir = crate::scratch_subdir(&format!("slurm-{}", std::process::id()));
        let munge_dir = dir.join("munge");
        std::fs::create_dir_all(&munge_dir).map_err(|e| e.to_string())?;
        for d in ["state", "spool"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        // munged runs as its own user, with a socket directory it owns (mode 755).
        let status = Command::new("chown")
            .args(["munge:munge"])
            .arg(&munge_dir)
            .status()
            .map_err(|e| e.to_string())?;
        if !status.success() {
            return Err("cannot give the munge directory to user munge".into());
        }
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::set_permissions(&munge_dir, std::fs::Permissions::from_mode(0o755));
        let socket = munge_dir.join("munge.socket");
        let nodes: Vec<String> = if names.is_empty() {
            vec!["localhost".into()]
        } else {
            names.iter().map(|n| n.to_string()).collect()
        };
        let mut slurm = Slurm {
            conf: dir.join("slurm.conf"),
            dir: dir.clone(),
            daemons: Vec::new(),
            nodes: nodes.clone(),
        };
        slurm.daemons.push(spawn(
            Command::new("runuser")
                .args(["-u", "munge", "--", "munged", "-F", "--force"])
                .arg(format!("--socket={}", socket.display()))
                .arg(format!(
                    "--pid-file={}",
                    munge_dir.join("munged.pid").display()
                ))
                .arg(format!(
                    "--log-file={}",
                    munge_dir.join("munged.log").display()
                ))
                .arg(format!(
                    "--seed-file={}",
                    munge_dir.join("munged.seed").display()
                ))
                .arg(format!("--key-file={}", key.display())),
        )?);
        let until = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            if Instant::now() > until {
                return Err("munged did not create its socket".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let base = 20000 + (std::process::id() % 10000) as u16 * 3;
        let d = dir.display();
        // Job ids from a number of this test run's own, so that two test Slurms (or reruns
        // after a crash) do not give jobs the same id (stormpi names its files after it).
        let first_job = 1000 + (std::process::id() % 100_000) * 1000;
        let conf = if names.is_empty() {
            format!(
                "ClusterName=lwktest\nSlurmctldHost=localhost\nAuthType=auth/munge\n\
             AuthInfo=socket={}\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={}\nSlurmdPort={}\nStateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\n\
             SlurmdLogFile={d}/slurmd.log\nProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\nReturnToService=2\n\
             NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
             PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n\
             FirstJobId={first_job}\n",
                socket.display(),
                base,
                base + 1
            )
        } else {
            let mut conf = format!(
                "ClusterName=stormpitest\nSlurmctldHost=localhost\nAuthType=auth/munge\n\
                 AuthInfo=socket={}\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
                 SlurmctldPort={base}\nStateSaveLocation={d}/state\n\
                 SlurmdSpoolDir={d}/spool/slurmd-%n\nTmpFS={d}/tmpfs/%n\n\
                 SlurmctldPidFile={d}/slurmctld.pid\n\
                 SlurmdPidFile={d}/slurmd-%n.pid\nSlurmctldLogFile={d}/slurmctld.log\n\
                 SlurmdLogFile={d}/slurmd-%n.log\nProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
                 MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\nReturnToService=2\n\
                 FirstJobId={first_job}\n",
                socket.display(),
            );
            for (i, n) in names.iter().enumerate() {
                conf.push_str(&format!(
                    "NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs=2 \
                     State=UNKNOWN\n",
                    base + 1 + i as u16
                ));
                std::fs::create_dir_all(dir.join(format!("spool/slurmd-{n}")))
                    .map_err(|e| e.to_string())?;
                // Each node's own TmpFS: Slurm's PMIx plugin makes its client directory there,
                // and two slurmds of one host would otherwise both claim it in /tmp.
                std::fs::create_dir_all(dir.join(format!("tmpfs/{n}")))
                    .map_err(|e| e.to_string())?;
            }
            conf.push_str(&format!(
                "PartitionName=debug Nodes={} Default=YES MaxTime=INFINITE State=UP \
                 OverSubscribe=FORCE\n",
                names.join(",")
            ));
            conf
        };
        std::fs::write(&slurm.conf, conf).map_err(|e| e.to_string())?;
        let mark = dir.display().to_string();
        slurm.daemons.push(spawn(
            Command::new("slurmctld")
                .args(["-D", "-i", "-f"])
                .arg(&slurm.conf)
                .env(MARK_ENV, &mark),
        )?);
        for n in &nodes {
            slurm.daemons.push(spawn(
                Command::new("slurmd")
                    .args(["-D", "-f"])
                    .arg(&slurm.conf)
                    .args(["-N", n])
                    .env(MARK_ENV, &mark),
            )?);
        }
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("sinfo")
                .args(["-h", "-o", "%t"])
                .env("SLURM_CONF", &slurm.conf)
                .output()
                .map_err(|e| e.to_string())?;
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !state.is_empty() && state.lines().all(|l| l.trim() == "idle") {
                return Ok(slurm);
            }
            if Instant::now() > until {
                return Err(format!(
                    "the node did not become idle (sinfo says {state:?}); slurmctld log:\n{}",
                    std::fs::read_to_string(dir.join("slurmctld.log")).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// An `srun` command against this Slurm.
    pub fn srun(&self) -> Command {
        let mut cmd = Command::new("srun");
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// An `salloc` command for this Slurm (an allocation whose command runs steps in it).
    pub fn salloc(&self) -> Command {
        let mut cmd = Command::new("salloc");
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// The scratch directory (logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The slurmd logs, each headed by its node's name (for failure reports).
    pub fn slurmd_logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            let file = if self.nodes.len() == 1 && n == "localhost" {
                "slurmd.log".to_string()
            } else {
                format!("slurmd-{n}.log")
            };
            let log = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
            out.push_str(&format!("--- slurmd {n}:\n{log}"));
        }
        out
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Let finished steps report before their daemons go.
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            let out = Command::new("squeue")
                .arg("-h")
                .env("SLURM_CONF", &self.conf)
                .output();
            if out.map_or(true, |o| o.stdout.is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for c in self.daemons.iter_mut().rev() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        std::thread::sleep(Duration::from_millis(200));
        for c in self.daemons.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Step daemons this Slurm started and that outlived it (marked by its environment).
        for pid in step_daemons(&self.dir.display().to_string()) {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // munged runs under runuser: end it by its pid file too.
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("munge/munged.pid")) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
        }
    }
}
