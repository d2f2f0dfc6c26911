//! Removal of a job's shared-memory files.
//!
//! Transports name every file they create in `/dev/shm` `stormpi-<JOBID>-...`
//! (see [`shm_prefix`]); whatever the ranks leave behind — because they were
//! killed, or simply forgot — the launcher deletes when the job ends.

use std::io;
use std::path::Path;

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
}
