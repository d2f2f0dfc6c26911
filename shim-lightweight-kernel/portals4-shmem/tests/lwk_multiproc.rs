//! Multi-process tests of the software Portals NI: each starts N processes of `lwk-ptl-check`
//! the way a vendor launcher would (only `STORMPI_RANK`, `STORMPI_SIZE`, `STORMPI_JOBID` in the
//! environment), with a time limit; if one fails or the time runs out, all are killed and the
//! test fails with every rank's output. Variants run with cross-memory attach turned off and
//! small rings, so large messages go through staged fragments and the rings wrap.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn run(scenario: &str, n: u32, env: &[(&str, &str)]) {
    run_args(scenario, &[], n, env);
}

/// [`run`] with arguments after the scenario's name.
fn run_args(scenario: &str, args: &[&str], n: u32, env: &[(&str, &str)]) {
    let job = format!(
        "t{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        scenario
    );
    let mut kids: Vec<Child> = (0..n)
        .map(|r| {
            let mut c = Command::new(env!("CARGO_BIN_EXE_lwk-ptl-check"));
            c.arg(scenario)
                .args(args)
                .env_remove("PMI_RANK")
                .env_remove("PMI_SIZE")
                .env_remove("SLURM_PROCID")
                .env_remove("SLURM_NTASKS")
                .env("STORMPI_RANK", r.to_string())
                .env("STORMPI_SIZE", n.to_string())
                .env("STORMPI_JOBID", &job)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            for (k, v) in env {
                c.env(k, v);
            }
            c.spawn().expect("start lwk-ptl-check")
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = vec![None; n as usize];
    let mut failed = None;
    while status.iter().any(|s| s.is_none()) {
        for (r, k) in kids.iter_mut().enumerate() {
            if status[r].is_none() {
                if let Some(s) = k.try_wait().expect("wait") {
                    if !s.success() && failed.is_none() {
                        failed = Some(format!("rank {r} exited with {s}"));
                    }
                    status[r] = Some(s);
                }
            }
        }
        if failed.is_none() && Instant::now() > deadline {
            failed = Some("time limit of 60 s reached".into());
        }
        if failed.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut report = String::new();
    for (r, mut k) in kids.into_iter().enumerate() {
        if status[r].is_none() {
            let _ = k.kill();
        }
        let out = k.wait_with_output().expect("collect output");
        report += &format!(
            "--- rank {r}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for r in 0..n {
        let _ = std::fs::remove_file(format!("/dev/shm/stormpi-{job}-ptl-{r}"));
    }
    if let Some(why) = failed {
        panic!("{scenario} on {n} ranks: {why}\n{report}");
    }
}

const STAGED: &[(&str, &str)] = &[
    ("STORMPI_PTL_CMA", "0"),
    ("STORMPI_PTL_RING_BYTES", "16384"),
];

#[test]
fn lwk_pingpong_match_bits() {
    run("pingpong", 2, &[]);
}

#[test]
fn lwk_pingpong_staged_fragments() {
    run("pingpong", 2, STAGED);
}

#[test]
fn lwk_pingpong_bystanders() {
    run("pingpong", 4, &[]);
}

#[test]
fn lwk_get_rendezvous() {
    run("get", 2, &[]);
}

#[test]
fn lwk_get_rendezvous_staged() {
    run("get", 2, STAGED);
}

#[test]
fn lwk_overflow_list_put_overflow_search() {
    run("overflow", 2, &[]);
}

#[test]
fn lwk_use_once_manage_local_min_free() {
    run("use-once-manage-local", 2, &[]);
}

#[test]
fn lwk_truncation_and_reject_entry() {
    run("truncate", 2, &[]);
}

#[test]
fn lwk_flow_control_disable_enable() {
    run("flow-control", 2, &[]);
}

#[test]
fn lwk_flow_control_staged() {
    run("flow-control", 3, STAGED);
}

#[test]
fn lwk_counting_events() {
    run("counting", 2, &[]);
}

#[test]
fn lwk_atomics() {
    run("atomic", 3, &[]);
}

/// The offload thread (`STORMPI_PTL_OFFLOAD`) completes puts, atomics, fetching atomics and swaps
/// counted on a counting event while the target sleeps; without it they wait for the target.
#[test]
fn lwk_offload_serves_a_sleeping_target() {
    run("offload", 2, &[("STORMPI_PTL_OFFLOAD", "50")]);
}

#[test]
fn lwk_without_offload_a_sleeping_target_holds_operations() {
    run_args("offload", &["stalls"], 2, &[]);
}

#[test]
fn lwk_all_to_all_wildcards() {
    run("all-to-all", 4, &[]);
}

#[test]
fn lwk_all_to_all_staged() {
    run("all-to-all", 4, STAGED);
}

#[test]
fn lwk_physical_non_matching() {
    run("physical", 3, &[]);
}
