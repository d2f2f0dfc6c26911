//! A one-host Slurm brought up for a test: `munged`, `slurmctld` and `slurmd` in a scratch
//! directory with a minimal configuration (the recipe of the machine notes), torn down when the
//! [`Slurm`] is dropped. [`Slurm::start`] says why when Slurm cannot run here, so a test can skip
//! loudly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::in_path;

/// A running one-host Slurm.
pub struct Slurm {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
    /// Step daemons that existed before this Slurm started (not ours to end).
    steps_before: Vec<i32>,
}

/// Process ids of the running `slurmstepd`s (they detach from slurmd).
fn step_daemons() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|c| c.trim() == "slurmstepd")
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
        let mut slurm = Slurm {
            conf: dir.join("slurm.conf"),
            dir: dir.clone(),
            daemons: Vec::new(),
            steps_before: step_daemons(),
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
        let base = 20000 + (std::process::id() % 20000) as u16;
        let d = dir.display();
        let conf = format!(
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
             PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n",
            socket.display(),
            base,
            base + 1
        );
        std::fs::write(&slurm.conf, conf).map_err(|e| e.to_string())?;
        slurm.daemons.push(spawn(
            Command::new("slurmctld")
                .args(["-D", "-i", "-f"])
                .arg(&slurm.conf),
        )?);
        slurm.daemons.push(spawn(
            Command::new("slurmd")
                .args(["-D", "-f"])
                .arg(&slurm.conf)
                .args(["-N", "localhost"]),
        )?);
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new("sinfo")
                .args(["-h", "-o", "%t"])
                .env("SLURM_CONF", &slurm.conf)
                .output()
                .map_err(|e| e.to_string())?;
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if state == "idle" {
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

    /// The scratch directory (logs).
    pub fn dir(&self) -> &Path {
        &self.dir
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
        // Step daemons this Slurm started and that outlived it.
        for pid in step_daemons() {
            if !self.steps_before.contains(&pid) {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
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
