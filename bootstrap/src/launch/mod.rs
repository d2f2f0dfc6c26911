//! `stormrun`, the job launcher.
//!
//! # What a rank gets
//!
//! Every rank inherits stormrun's environment (minus any `PMI_*` variables
//! of a launcher above it), then `-x` and `--mca` settings, then:
//!
//! | variable | value |
//! |---|---|
//! | `PMI_FD` | descriptor of the rank's PMI-1 socket (see [`crate::pmi`]) |
//! | `PMI_RANK`, `PMI_SIZE` | rank in the job, number of ranks |
//! | `STORMPI_JOBID` | job id: `<stormrun pid>-<8 hex digits>`, only `[0-9a-f-]` |
//! | `STORMPI_LOCAL_RANK`, `STORMPI_LOCAL_SIZE` | rank and rank count on this node (all ranks are local for now) |
//! | `STORMPI_NUM_CORES` | cores usable on this node |
//! | `STORMPI_MCA_<NAME>` | value of `--mca NAME VALUE` |
//!
//! Each rank runs in its own process group; stdin is `/dev/null` except for
//! rank 0, which inherits stormrun's stdin when that is not a terminal.
//!
//! # Shared memory
//!
//! Every file a job creates in `/dev/shm` must be named
//! `stormpi-<STORMPI_JOBID>-<anything>`. stormrun deletes all such files
//! when the job ends, however it ends (short of stormrun itself being
//! SIGKILLed).
//!
//! # Output and failure
//!
//! Output is forwarded a whole line at a time (`--tag-output` prefixes
//! `[1,RANK]<stdout>:` / `[1,RANK]<stderr>:` as Open MPI does). The first
//! rank to exit non-zero, die of a signal or call abort through PMI ends the
//! job: the others get SIGTERM, then SIGKILL after one second, stormrun
//! prints one line naming the rank and the cause, and exits with that
//! rank's status (128+N for signal N, the abort code for an abort — 1 if
//! that code is 0 mod 256). `--timeout` ends a job with status 124.

pub mod args;
pub mod job;
pub mod shm;
pub mod signals;
pub mod stdio;

use std::ffi::OsString;
use std::hash::{BuildHasher, Hasher};

use args::{Command, Export, LaunchSpec};

/// Exit status for command-line errors.
pub const USAGE_EXIT: i32 = 2;

/// Runs stormrun with the given arguments (without the program name) and
/// returns its exit status. Installs signal handlers: call it once, from the
/// process's main thread.
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    let spec = match args::parse(argv) {
        Ok(Command::Run(spec)) => spec,
        Ok(Command::Help) => {
            print!("{}", args::help_text());
            return 0;
        }
        Ok(Command::Version) => {
            println!("stormrun (stormpi) {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("stormrun: {e}");
            eprintln!("Usage: stormrun [options] [-n N] PROGRAM [ARGS...]  (see stormrun --help)");
            return USAGE_EXIT;
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let config = match configure(&spec, cores, new_jobid()) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("stormrun: {msg}");
            return USAGE_EXIT;
        }
    };
    let signals = match signals::SignalPipe::install(&[
        libc::SIGCHLD,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stormrun: cannot set up signal handling: {e}");
            return 1;
        }
    };
    // The launcher holds three descriptors per rank (PMI socket, stdout and
    // stderr pipes) plus a few of its own.
    let ranks: u64 = config.apps.iter().map(|a| u64::from(a.np)).sum();
    crate::sys::ensure_fd_limit(3 * ranks + 64);
    job::run(config, signals)
}

/// Turns a parsed command line into a job: rank counts, the oversubscription
/// check, and the environment for the ranks.
pub fn configure(spec: &LaunchSpec, cores: u32, jobid: String) -> Result<job::JobConfig, String> {
    let counts = spec.rank_counts(cores).map_err(|e| e.0)?;
    let total: u64 = counts.iter().map(|&n| u64::from(n)).sum();
    if total > u64::from(u32::MAX) {
        return Err(format!("{total} ranks are too many"));
    }
    if total > u64::from(cores) && !spec.options.oversubscribe {
        return Err(format!(
            "{total} ranks requested but this node has only {cores} core(s); \
             pass --oversubscribe to run more ranks than cores"
        ));
    }
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for export in &spec.options.exports {
        match export {
            Export::Set(var, value) => env.push((var.into(), value.clone())),
            Export::Inherit(var) => match std::env::var_os(var) {
                Some(value) => env.push((var.into(), value)),
                None => eprintln!("stormrun: warning: -x {var}: {var} is not set; not exported"),
            },
        }
    }
    for (name, value) in &spec.options.mca {
        env.push((format!("STORMPI_MCA_{name}").into(), value.clone()));
    }
    let apps = spec
        .apps
        .iter()
        .zip(&counts)
        .map(|(app, &np)| job::App {
            program: app.program.clone(),
            args: app.args.clone(),
            np,
        })
        .collect();
    Ok(job::JobConfig {
        jobid,
        apps,
        env,
        tag_output: spec.options.tag_output,
        timeout: spec.options.timeout,
        cores,
        shm_dir: shm::SHM_DIR.into(),
    })
}

/// `<pid>-<8 hex digits>`: unique among concurrent jobs (pid) and across
/// pid reuse (random part), short, and safe in file names.
pub fn new_jobid() -> String {
    // RandomState is seeded from the OS's randomness for each process.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:08x}", std::process::id(), h.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(args: &[&str]) -> LaunchSpec {
        match args::parse(args.iter().map(OsString::from)).unwrap() {
            Command::Run(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jobids_are_short_and_safe() {
        let a = new_jobid();
        let b = new_jobid();
        assert_ne!(a, b);
        assert!(a.len() <= 20, "{a}");
        assert!(
            a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{a}"
        );
        assert!(a.starts_with(&format!("{}-", std::process::id())));
    }

    #[test]
    fn oversubscription_is_refused_unless_asked() {
        let e = configure(&spec(&["-n", "3", "a"]), 2, "j".into()).unwrap_err();
        assert!(
            e.contains("3 ranks requested") && e.contains("--oversubscribe"),
            "{e}"
        );
        let e = configure(&spec(&["-n", "2", "a", ":", "-n", "1", "b"]), 2, "j".into());
        assert!(e.is_err());
        assert!(configure(&spec(&["--oversubscribe", "-n", "3", "a"]), 2, "j".into()).is_ok());
        let c = configure(&spec(&["a"]), 2, "j".into()).unwrap();
        assert_eq!(c.apps[0].np, 2, "default is one rank per core");
    }

    #[test]
    fn mca_and_exports_become_environment() {
        let c = configure(
            &spec(&[
                "-x",
                "A=1",
                "--mca",
                "btl",
                "sm,self",
                "-x",
                "STORMPI_SURELY_UNSET_VAR",
                "p",
            ]),
            4,
            "j".into(),
        )
        .unwrap();
        assert_eq!(
            c.env,
            vec![
                (OsString::from("A"), OsString::from("1")),
                (OsString::from("STORMPI_MCA_btl"), OsString::from("sm,self")),
            ]
        );
    }
}
