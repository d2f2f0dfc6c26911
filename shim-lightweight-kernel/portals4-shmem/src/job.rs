//! Where this process stands in its job, from the launcher's environment only (no PMI server,
//! no socket): rank and size from `STORMPI_RANK`/`STORMPI_SIZE`, `PMI_RANK`/`PMI_SIZE` or
//! `SLURM_PROCID`/`SLURM_NTASKS`; the job id that names the segments from `STORMPI_JOBID`,
//! `SLURM_JOB_ID` (with `SLURM_STEP_ID`) or `PMI_JOBID`, else the parent's process id (ranks a
//! launcher starts share it). No variables at all: a job of one.

use std::env;

/// This process in its job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub rank: u32,
    pub size: u32,
    /// Safe for a file name: `[A-Za-z0-9._-]` only.
    pub id: String,
}

/// Tuning read from the environment.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes of each inbound ring (power of two).
    pub ring_bytes: usize,
    /// Use cross-memory attach for large transfers (if the kernel allows it).
    pub cma: bool,
    /// Transfers of at least this many bytes use cross-memory attach.
    pub cma_threshold: usize,
    /// Polls before a waiting call starts yielding the processor.
    pub spin: u32,
}

fn var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn num(name: &str) -> Option<u64> {
    var(name).and_then(|v| v.trim().parse().ok())
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Job {
    /// Reads the environment. `Err` names what is inconsistent.
    pub fn from_env() -> Result<Job, String> {
        let pairs = [
            ("STORMPI_RANK", "STORMPI_SIZE"),
            ("PMI_RANK", "PMI_SIZE"),
            ("SLURM_PROCID", "SLURM_NTASKS"),
        ];
        let mut found = None;
        for (r, s) in pairs {
            match (num(r), num(s)) {
                (Some(rank), Some(size)) => {
                    found = Some((rank, size, r, s));
                    break;
                }
                (Some(_), None) => return Err(format!("{r} is set but {s} is not")),
                _ => {}
            }
        }
        let (rank, size) = match found {
            Some((rank, size, r, s)) => {
                if size == 0 || rank >= size || size > 65_000 {
                    return Err(format!("{r}={rank} and {s}={size} do not describe a job"));
                }
                (rank as u32, size as u32)
            }
            None => (0, 1),
        };
        let id = if let Some(id) = var("STORMPI_JOBID") {
            id
        } else if let Some(id) = var("SLURM_JOB_ID") {
            match var("SLURM_STEP_ID") {
                Some(step) => format!("slurm{id}.{step}"),
                None => format!("slurm{id}"),
            }
        } else if let Some(id) = var("PMI_JOBID") {
            format!("pmi{id}")
        } else if size == 1 {
            format!("pid{}", std::process::id())
        } else {
            // SAFETY: getppid cannot fail.
            format!("ppid{}", unsafe { libc::getppid() })
        };
        Ok(Job {
            rank,
            size,
            id: sanitize(&id),
        })
    }
}

impl Config {
    pub fn from_env(job: &Job) -> Config {
        let ring = num("STORMPI_PTL_RING_BYTES")
            .map(|b| (b as usize).clamp(16 << 10, 64 << 20).next_power_of_two())
            .unwrap_or(256 << 10);
        let cma = match var("STORMPI_PTL_CMA").as_deref() {
            Some("0") | Some("no") | Some("off") | Some("false") => false,
            _ => cma_allowed(),
        };
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let spin = num("STORMPI_PTL_SPIN")
            .map(|n| n.min(u32::MAX as u64) as u32)
            .unwrap_or(if job.size as usize > cores { 0 } else { 2000 });
        Config {
            ring_bytes: ring,
            cma,
            cma_threshold: num("STORMPI_PTL_CMA_THRESHOLD")
                .map(|n| n as usize)
                .unwrap_or(4 << 20),
            spin,
        }
    }
}

/// Whether `process_vm_readv` works here: not blocked by Yama's ptrace scope, and a probe on
/// ourselves succeeds (seccomp or a container may forbid the call).
fn cma_allowed() -> bool {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        if s.trim() != "0" {
            return false;
        }
    }
    let src = [0x5au8; 8];
    let mut dst = [0u8; 8];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: 8,
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr() as *mut _,
        iov_len: 8,
    };
    // SAFETY: both iovecs describe live buffers of this process.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    n == 8 && dst == src
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwk_job_sanitizes_ids() {
        assert_eq!(sanitize("12/3 x.y-z_"), "12_3_x.y-z_");
    }
}
