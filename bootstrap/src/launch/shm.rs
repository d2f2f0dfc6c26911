//! Removal of a job's shared-memory files.
//!
//! Transports name every file they create in `/dev/shm` `stormpi-<JOBID>-...`
//! (see [`shm_prefix`]); whatever the ranks leave behind — because they were
//! killed, or simply forgot — the launcher deletes when the job ends.
//!
//! A launcher killed with `SIGKILL` deletes nothing (and its ranks die with
//! it). So every launcher holds a lock on a mark file of its job,
//! `stormpi-<JOBID>-launcher`, for the job's life; the kernel lets go of the
//! lock however the launcher ends, and the next launcher on the host removes
//! the files of every job whose mark it can lock ([`remove_stale_jobs`]).
//! Files of jobs launched from other hosts have no mark here and are left
//! alone.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The suffix of a job's launcher mark file.
const MARK: &str = "launcher";

/// Where POSIX shared memory lives on Linux.
pub const SHM_DIR: &str = "/dev/shm";

/// The name prefix of every shared-memory file of job `jobid`.
pub fn shm_prefix(jobid: &str) -> String {
    format!("stormpi-{jobid}-")
}

/// Deletes every entry of `dir` whose name starts with the job's prefix;
/// returns the names removed. Entries that vanish meanwhile are fine.
pub fn remove_job_files(dir: &Path, jobid: &str) -> io::Result<Vec<String>> {
    let prefix = shm_prefix(jobid);
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        let path = entry.path();
        let result = if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match result {
            Ok(()) => removed.push(name.to_string()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
        }
    }
    Ok(removed)
}

/// Creates this job's mark file in `dir` and locks it; the lock lasts as long
/// as the returned file is open (or the process lives).
pub fn mark_launcher(dir: &Path, jobid: &str) -> io::Result<File> {
    let name = format!("{}{MARK}", shm_prefix(jobid));
    // Locked under another name first, so that no other launcher ever finds the
    // mark unlocked while this one lives.
    let new = dir.join(format!("{name}-new"));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&new)?;
    if !try_lock(&file)? {
        return Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{} is locked by another process", new.display()),
        ));
    }
    std::fs::rename(&new, dir.join(name))?;
    Ok(file)
}

/// Removes the files of every job in `dir` whose launcher has ended without
/// removing them (its mark is no longer locked); returns the names removed.
pub fn remove_stale_jobs(dir: &Path) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(jobid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("stormpi-"))
            .and_then(|n| n.strip_suffix(&format!("-{MARK}")))
        else {
            continue;
        };
        let Ok(mark) = File::open(entry.path()) else {
            continue;
        };
        if try_lock(&mark)? {
            removed.extend(remove_job_files(dir, jobid)?);
        }
    }
    Ok(removed)
}

/// Takes an exclusive lock on `file` without waiting; `false` when another
/// open file holds it.
fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor this function borrows; it touches no memory.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_this_jobs_files() {
        let dir = std::env::temp_dir().join(format!("stormpi-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "stormpi-42-ab-seg0",
            "stormpi-42-ab-rank1",
            "stormpi-42-abc-seg0",
            "stormpi-42-a",
            "other",
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        std::fs::create_dir(dir.join("stormpi-42-ab-dir")).unwrap();
        let mut removed = remove_job_files(&dir, "42-ab").unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [
                "stormpi-42-ab-dir",
                "stormpi-42-ab-rank1",
                "stormpi-42-ab-seg0"
            ]
        );
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["other", "stormpi-42-a", "stormpi-42-abc-seg0"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_jobs_go_live_ones_stay() {
        let dir = std::env::temp_dir().join(format!("stormpi-stale-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let live = mark_launcher(&dir, "7-live").unwrap();
        let dead = mark_launcher(&dir, "8-dead").unwrap();
        for name in [
            "stormpi-7-live-sm-0",
            "stormpi-8-dead-sm-0",
            "stormpi-8-dead-sm-1",
            "stormpi-9-nomark-sm-0",
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        // The launcher of job 8-dead ends: its lock goes with its file.
        drop(dead);
        let mut removed = remove_stale_jobs(&dir).unwrap();
        removed.sort();
        assert_eq!(
            removed,
            [
                "stormpi-8-dead-launcher",
                "stormpi-8-dead-sm-0",
                "stormpi-8-dead-sm-1"
            ]
        );
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "stormpi-7-live-launcher",
                "stormpi-7-live-sm-0",
                "stormpi-9-nomark-sm-0"
            ]
        );
        drop(live);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
