//! Where this process sits on the fabric, from the environment.

use crate::ring::Geometry;

/// Where this process sits on the fabric.
pub struct Config {
    /// Names the segments: processes see each other only within one fabric.
    pub fabric: String,
    /// A LID asked for (from `STORMPI_VERBS_LID` or the job rank + 1), else the first free one.
    pub lid: Option<u16>,
    pub geo: Geometry,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_num(name: &str) -> Result<Option<u64>, String> {
    match env(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}={v} is not a number")),
    }
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Config {
    /// Reads the environment: `STORMPI_VERBS_FABRIC` (else the launcher's job id, else one
    /// fabric per user), `STORMPI_VERBS_LID` (else rank + 1 from `STORMPI_RANK`, `PMI_RANK` or
    /// `SLURM_PROCID`, else the first free LID), `STORMPI_VERBS_LIDS` (LIDs per fabric, default
    /// 64) and `STORMPI_VERBS_RING_BYTES` (bytes of each inbound ring, default 256 KiB).
    pub fn from_env() -> Result<Config, String> {
        let fabric = env("STORMPI_VERBS_FABRIC")
            .or_else(|| env("STORMPI_JOBID"))
            .or_else(|| env("SLURM_JOB_ID").map(|j| format!("slurm{j}")))
            .or_else(|| env("PMI_JOBID").map(|j| format!("pmi{j}")))
            // SAFETY: getuid cannot fail.
            .unwrap_or_else(|| format!("uid{}", unsafe { libc::getuid() }));
        let lids = env_num("STORMPI_VERBS_LIDS")?.unwrap_or(64);
        if !(2..=65_535).contains(&lids) {
            return Err(format!("STORMPI_VERBS_LIDS={lids} is outside 2..=65535"));
        }
        let ring = env_num("STORMPI_VERBS_RING_BYTES")?.unwrap_or(256 << 10);
        if !(16 << 10..=64 << 20).contains(&ring) || !ring.is_power_of_two() {
            return Err(format!(
                "STORMPI_VERBS_RING_BYTES={ring} is not a power of two from 16 KiB to 64 MiB"
            ));
        }
        let mut lid = env_num("STORMPI_VERBS_LID")?;
        let mut from = "STORMPI_VERBS_LID";
        if lid.is_none() {
            for r in ["STORMPI_RANK", "PMI_RANK", "SLURM_PROCID"] {
                if let Some(rank) = env_num(r)? {
                    lid = Some(rank + 1);
                    from = r;
                    break;
                }
            }
        }
        if let Some(l) = lid {
            if l == 0 || l >= lids {
                return Err(format!(
                    "LID {l} (from {from}) is outside 1..{lids}: raise STORMPI_VERBS_LIDS"
                ));
            }
        }
        Ok(Config {
            fabric: sanitize(&fabric),
            lid: lid.map(|l| l as u16),
            geo: Geometry {
                lids: lids as usize,
                ring_bytes: ring as usize,
            },
        })
    }
}
