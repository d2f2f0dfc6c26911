//! Jobs that the ranks of a job start with `MPI_Comm_spawn(_multiple)`.
//!
//! A spawn request ([`crate::pmi::spawn`]) becomes a job of its own, run by a second stormrun
//! this one starts: it has its own world, job id, key and key-value space, places its ranks on
//! this host, forwards their output to the same terminal (through its own stdout and stderr,
//! which it inherits), and handles their failure as any job does. The children learn the port
//! their parents wait at from `STORMPI_PARENT_PORT`, which only their environment carries
//! (command lines are readable by anyone on the host).
//!
//! This stormrun checks the request before starting anything, so that a program that does not
//! exist, or a host or directory it cannot use, is a refusal the parent gets at once
//! (`MPI_ERR_SPAWN`) rather than a failed job. Once started, the spawned job is tied to its
//! parents' as Open MPI ties them: the parents' stormrun waits for it before it exits, ends it
//! when the parents' job fails, and ends the parents' job when it fails.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::hosts;
use crate::pmi::spawn::{SpawnCommand, PARENT_PORT_ENV, PARENT_PORT_KEY};
use crate::sys::Exit;

/// A spawned job: the stormrun running it.
#[derive(Debug)]
pub struct Spawned {
    /// Its stormrun's pid (the leader of its own process group).
    pub pid: i32,
    /// What it runs, for messages.
    pub what: String,
    /// Its stormrun's exit, once reaped.
    pub exit: Option<Exit>,
}

impl Spawned {
    /// Whether its stormrun has not been reaped yet.
    pub fn running(&self) -> bool {
        self.exit.is_none()
    }
}

/// What a spawned job inherits from its parents' job.
#[derive(Debug, Clone, Default)]
pub struct Inherited {
    /// `-x` and `--mca` settings of the parents' job.
    pub env: Vec<(OsString, OsString)>,
    /// `--tag-output`.
    pub tag_output: bool,
    /// The parents' working directory (`--wdir`), where relative programs are found.
    pub wdir: Option<PathBuf>,
}

/// Starts the job `cmds` describe with the stormrun at `stormrun`; a refusal says why.
pub fn start(stormrun: &Path, cmds: &[SpawnCommand], from: &Inherited) -> Result<Spawned, String> {
    let wdir = working_dir(cmds)?;
    let here = hosts::local_hostname();
    let mut args: Vec<OsString> = vec!["--bind-to".into(), "none".into(), "--oversubscribe".into()];
    if from.tag_output {
        args.push("--tag-output".into());
    }
    if let Some(w) = &wdir {
        args.push("--wdir".into());
        args.push(w.clone().into_os_string());
    }
    let mut what = Vec::new();
    for (i, c) in cmds.iter().enumerate() {
        if let Some(h) = c.info("host") {
            if !hosts::is_local(h.trim(), &here) {
                return Err(format!(
                    "host `{h}` (info key host) is not this host; spawned processes run on \
                     the host of the launcher only"
                ));
            }
        }
        let base = wdir.as_deref().or(from.wdir.as_deref());
        let program = resolve(&c.command, c.info("path"), base)?;
        if i > 0 {
            args.push(":".into());
        }
        args.push("-n".into());
        args.push(c.maxprocs.to_string().into());
        args.push(program.into_os_string());
        for a in &c.args {
            if a == ":" {
                return Err("an argument `:` cannot be passed to a spawned program".into());
            }
            args.push(a.into());
        }
        what.push(format!("{} x {}", c.maxprocs, c.command));
    }
    let port = cmds
        .iter()
        .flat_map(|c| &c.preput)
        .find(|(k, _)| k == PARENT_PORT_KEY)
        .map(|(_, v)| v.clone());
    let mut cmd = Command::new(stormrun);
    cmd.args(&args)
        .envs(from.env.iter().map(|(k, v)| (k, v)))
        .env_remove(PARENT_PORT_ENV)
        .stdin(Stdio::null())
        // Its own group, signalled as the ranks' are.
        .process_group(0);
    if let Some(p) = port {
        cmd.env(PARENT_PORT_ENV, p);
    }
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    let launcher_pid = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system
    // calls (prctl, getppid); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            // A spawned job ends with the launcher of its parents, however that ends.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != launcher_pid {
                return Err(std::io::Error::other("launcher exited during spawn"));
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start stormrun for the spawned job: {e}"))?;
    Ok(Spawned {
        pid: child.id() as i32,
        what: what.join(" : "),
        exit: None,
    })
}

/// The spawned job's working directory: the `wdir` the commands give (one for all of them),
/// checked to be a directory.
fn working_dir(cmds: &[SpawnCommand]) -> Result<Option<PathBuf>, String> {
    let mut wdir: Option<&str> = None;
    for c in cmds {
        match (wdir, c.info("wdir")) {
            (_, None) => {}
            (None, Some(w)) => wdir = Some(w),
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                return Err(format!(
                    "the commands ask for different working directories (`{a}`, `{b}`, info key \
                     wdir); a spawned job runs in one"
                ))
            }
        }
    }
    match wdir {
        None => Ok(None),
        Some(w) if Path::new(w).is_dir() => Ok(Some(PathBuf::from(w))),
        Some(w) => Err(format!(
            "working directory `{w}` (info key wdir) is not a directory"
        )),
    }
}

/// The program `command` names: a path with a `/` (relative to `base` or this process's
/// directory), else the first executable of that name in `path` (the info key's directories,
/// `:`-separated), then in `PATH`.
pub fn resolve(command: &str, path: Option<&str>, base: Option<&Path>) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = Path::new(command);
        let full = match (p.is_relative(), base) {
            (true, Some(b)) => b.join(p),
            (true, None) => std::env::current_dir()
                .map_err(|e| format!("no working directory to find `{command}` in: {e}"))?
                .join(p),
            (false, _) => p.to_path_buf(),
        };
        return if executable(&full) {
            Ok(full)
        } else {
            Err(format!(
                "program `{}` does not exist or is not executable",
                full.display()
            ))
        };
    }
    let system = std::env::var_os("PATH").unwrap_or_default();
    let dirs = path
        .map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(std::env::split_paths(&system));
    for d in dirs {
        let d = match (d.is_relative(), base) {
            (true, Some(b)) => b.join(d),
            _ => d,
        };
        let full = d.join(command);
        if executable(&full) {
            return Ok(full);
        }
    }
    Err(format!(
        "program `{command}` not found in {}PATH",
        if path.is_some() {
            "the info key path nor in "
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_or_refused_with_a_reason() {
        let sh = resolve("sh", None, None).unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(
            resolve("/bin/sh", None, None).unwrap(),
            PathBuf::from("/bin/sh")
        );
        let e = resolve("no-such-program-here", Some("/nonexistent"), None).unwrap_err();
        assert!(e.contains("not found in the info key path"), "{e}");
        let e = resolve("./no-such", None, Some(Path::new("/tmp"))).unwrap_err();
        assert!(e.contains("/tmp/./no-such"), "{e}");
        // A directory on `path` is searched before PATH.
        let dir = std::env::temp_dir().join(format!("stormpi-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prog = dir.join("sh");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve("sh", dir.to_str(), None).unwrap(), prog);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_working_directory_per_job() {
        let with = |w: &str| SpawnCommand {
            command: "p".into(),
            maxprocs: 1,
            info: vec![("wdir".into(), w.into())],
            ..SpawnCommand::default()
        };
        assert_eq!(
            working_dir(&[with("/tmp"), with("/tmp")]).unwrap(),
            Some("/tmp".into())
        );
        assert!(working_dir(&[with("/tmp"), with("/")])
            .unwrap_err()
            .contains("different"));
        assert!(working_dir(&[with("/nonexistent-dir")])
            .unwrap_err()
            .contains("not a directory"));
    }
}
