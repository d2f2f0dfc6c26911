//! Where a rank learns its place in the job: the launcher's environment, nothing else.
//!
//! A vendor launcher (yod, aprun, srun) starts every rank itself and hands it rank, size and
//! layout in environment variables; there is no PMI server to ask. Recognised, first match wins:
//!
//! | launcher | rank | size | node layout | job id |
//! | --- | --- | --- | --- | --- |
//! | stormpi's own | `STORMPI_RANK` | `STORMPI_SIZE` | `STORMPI_NIDS` (node id per rank: `0,0,1,1` or `0*2,1*2`) | `STORMPI_JOBID` |
//! | Slurm (`srun --mpi=none`) | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_TASKS_PER_NODE` (`2(x3),1`, block distribution) | `SLURM_JOB_ID`.`SLURM_STEP_ID` |
//! | PMI-style (Hydra, Cray PMI) | `PMI_RANK` | `PMI_SIZE` | one node | `PMI_JOBID` |
//! | Cray ALPS (`aprun`) | `ALPS_APP_PE` | `PMI_SIZE` or `STORMPI_SIZE` | `ALPS_APP_NIDS` if set, else one node | `ALPS_APP_ID` |
//!
//! A process with none of them is a job of one. Portals addresses follow from the rank (the
//! logical interface's rank is the job rank), so nothing else is exchanged.

/// A process's place in the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEnv {
    /// Rank in the job.
    pub rank: u32,
    /// Processes in the job.
    pub size: u32,
    /// Node id of every rank (equal ids share memory).
    pub nodes: Vec<u32>,
    /// The job's id (for names of shared resources), made of `[A-Za-z0-9-]`.
    pub job_id: String,
    /// Which variables said so.
    pub source: &'static str,
}

/// Reads the job from `get` (the process environment in [`JobEnv::from_env`]).
impl JobEnv {
    /// The job as the process environment describes it.
    pub fn from_env() -> Result<JobEnv, String> {
        JobEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// The job as `get` (a variable lookup) describes it.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<JobEnv, String> {
        let num = |k: &str| -> Result<Option<u32>, String> {
            match get(k) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map(Some)
                    .map_err(|_| format!("{k}={v} is not a number")),
            }
        };
        let (rank, size, source) = if let (Some(r), Some(s)) =
            (num("STORMPI_RANK")?, num("STORMPI_SIZE")?)
        {
            (r, s, "STORMPI_RANK/STORMPI_SIZE")
        } else if let (Some(r), Some(s)) = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
            (r, s, "SLURM_PROCID/SLURM_NTASKS")
        } else if let (Some(r), Some(s)) = (num("PMI_RANK")?, num("PMI_SIZE")?) {
            (r, s, "PMI_RANK/PMI_SIZE")
        } else if let Some(r) = num("ALPS_APP_PE")? {
            let s = match num("PMI_SIZE")?.or(num("STORMPI_SIZE")?) {
                Some(s) => s,
                None => {
                    return Err("ALPS_APP_PE is set but neither PMI_SIZE nor STORMPI_SIZE".into())
                }
            };
            (r, s, "ALPS_APP_PE")
        } else {
            (0, 1, "none (a job of one)")
        };
        if size == 0 || rank >= size {
            return Err(format!(
                "{source}: rank {rank} of {size} does not describe a job"
            ));
        }
        let nodes = match source {
            "STORMPI_RANK/STORMPI_SIZE" => match get("STORMPI_NIDS") {
                Some(l) => parse_nids(&l, size).map_err(|e| format!("STORMPI_NIDS={l}: {e}"))?,
                None => vec![0; size as usize],
            },
            "SLURM_PROCID/SLURM_NTASKS" => match get("SLURM_TASKS_PER_NODE") {
                Some(l) => parse_slurm_tasks(&l, size)
                    .map_err(|e| format!("SLURM_TASKS_PER_NODE={l}: {e}"))?,
                None => vec![0; size as usize],
            },
            "ALPS_APP_PE" => match get("ALPS_APP_NIDS") {
                Some(l) => parse_nids(&l, size).map_err(|e| format!("ALPS_APP_NIDS={l}: {e}"))?,
                None => vec![0; size as usize],
            },
            _ => vec![0; size as usize],
        };
        let raw = get("STORMPI_JOBID")
            .or_else(|| {
                let job = get("SLURM_JOB_ID")?;
                Some(format!(
                    "slurm{job}.{}",
                    get("SLURM_STEP_ID").unwrap_or_default()
                ))
            })
            .or_else(|| get("PMI_JOBID"))
            .or_else(|| get("ALPS_APP_ID").map(|a| format!("alps{a}")))
            .unwrap_or_else(|| format!("single{}", std::process::id()));
        let job_id = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .take(64)
            .collect();
        Ok(JobEnv {
            rank,
            size,
            nodes,
            job_id,
            source,
        })
    }

    /// Ranks that share this process's node.
    pub fn local_size(&self) -> usize {
        let me = self.nodes[self.rank as usize];
        self.nodes.iter().filter(|&&n| n == me).count()
    }
}

/// `0,0,1,1` or `0*2,1*2`: a node id per rank.
pub fn parse_nids(list: &str, size: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::with_capacity(size as usize);
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (id, n) = match item.split_once('*') {
            Some((id, n)) => (
                id,
                n.parse::<u32>()
                    .map_err(|_| format!("bad count in {item}"))?,
            ),
            None => (item, 1),
        };
        let id = id.parse::<u32>().map_err(|_| format!("bad node id {id}"))?;
        out.extend(std::iter::repeat_n(id, n as usize));
        if out.len() > size as usize {
            break;
        }
    }
    if out.len() != size as usize {
        return Err(format!("names {} ranks, the job has {size}", out.len()));
    }
    Ok(out)
}

/// Slurm's `2(x3),1`: tasks per node, ranks distributed in blocks (Slurm's default).
pub fn parse_slurm_tasks(list: &str, size: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::with_capacity(size as usize);
    let mut node = 0u32;
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (tasks, reps) = match item.split_once("(x") {
            Some((t, r)) => (
                t,
                r.trim_end_matches(')')
                    .parse::<u32>()
                    .map_err(|_| format!("bad repetition in {item}"))?,
            ),
            None => (item, 1),
        };
        let tasks = tasks
            .parse::<u32>()
            .map_err(|_| format!("bad count in {item}"))?;
        for _ in 0..reps {
            out.extend(std::iter::repeat_n(node, tasks as usize));
            node += 1;
            if out.len() > size as usize {
                return Err(format!("names more than the job's {size} tasks"));
            }
        }
    }
    if out.len() != size as usize {
        return Err(format!("names {} tasks, the job has {size}", out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn job(vars: &[(&str, &str)]) -> Result<JobEnv, String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        JobEnv::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn lwk_env_stormpi_variables_win() {
        let j = job(&[
            ("STORMPI_RANK", "2"),
            ("STORMPI_SIZE", "4"),
            ("STORMPI_NIDS", "0*2,5,5"),
            ("STORMPI_JOBID", "j.1"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "9"),
        ])
        .unwrap();
        assert_eq!((j.rank, j.size), (2, 4));
        assert_eq!(j.nodes, vec![0, 0, 5, 5]);
        assert_eq!(j.job_id, "j-1");
        assert_eq!(j.local_size(), 2);
    }

    #[test]
    fn lwk_env_slurm_layout_is_block() {
        let j = job(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "5"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ])
        .unwrap();
        assert_eq!(j.nodes, vec![0, 0, 1, 1, 2]);
        assert_eq!(j.job_id, "slurm77-0");
        assert_eq!(j.source, "SLURM_PROCID/SLURM_NTASKS");
    }

    #[test]
    fn lwk_env_pmi_alps_and_none() {
        let j = job(&[("PMI_RANK", "1"), ("PMI_SIZE", "2"), ("PMI_JOBID", "kvs_3")]).unwrap();
        assert_eq!((j.rank, j.size, j.job_id.as_str()), (1, 2, "kvs-3"));
        let j = job(&[
            ("ALPS_APP_PE", "3"),
            ("PMI_SIZE", "8"),
            ("ALPS_APP_ID", "991"),
        ])
        .unwrap();
        assert_eq!((j.rank, j.size, j.job_id.as_str()), (3, 8, "alps991"));
        let j = job(&[]).unwrap();
        assert_eq!((j.rank, j.size), (0, 1));
    }

    #[test]
    fn lwk_env_bad_values_are_reported() {
        assert!(job(&[("STORMPI_RANK", "4"), ("STORMPI_SIZE", "4")]).is_err());
        assert!(job(&[("STORMPI_RANK", "x"), ("STORMPI_SIZE", "4")]).is_err());
        assert!(job(&[("ALPS_APP_PE", "0")]).is_err());
        assert!(job(&[
            ("STORMPI_RANK", "0"),
            ("STORMPI_SIZE", "3"),
            ("STORMPI_NIDS", "0,1")
        ])
        .is_err());
        assert!(parse_slurm_tasks("2(x2)", 3).is_err());
    }
}
