//! Two-process checks of the software verbs device: `tests/c/swverbs_check.c`, written against
//! rdma-core's `<infiniband/verbs.h>`, is compiled and linked against `libverbs_shmem.a`, and
//! two copies run each scenario with a time limit (both are killed and the test fails with their
//! output if one fails or time runs out). Each run has a fabric of its own, and the processes
//! take their LIDs as unrelated processes do (the first free ones).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The C program, built once per test binary.
fn program() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        // target/<profile>/deps/<this test> -> target/<profile>/libverbs_shmem.a
        let me = std::env::current_exe().unwrap();
        let profile_dir = me.parent().unwrap().parent().unwrap();
        let lib = profile_dir.join("libverbs_shmem.a");
        // `cargo test` builds the library as an rlib only; the static library (brought up to
        // date here, never a stale one) comes from a build of the library target itself, in the
        // same profile.
        let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cargo.args(["build", "-q", "-p", "verbs-shmem", "--lib"]);
        if profile_dir.ends_with("release") {
            cargo.arg("--release");
        }
        let st = cargo.status().expect("run cargo");
        assert!(
            st.success() && lib.exists(),
            "{} was not built",
            lib.display()
        );
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/swverbs_check.c");
        let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("swverbs_check");
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-O1", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg(&lib)
            .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"])
            .output()
            .expect("run the C compiler");
        assert!(
            out.status.success(),
            "building swverbs_check.c against <infiniband/verbs.h> failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    })
}

/// Runs a scenario. `launched`: the processes get `STORMPI_RANK`/`STORMPI_SIZE` as a launcher
/// would give them (LID = rank + 1); `env`: more settings for both.
fn run_with(scenario: &str, launched: bool, env: &[(&str, &str)]) {
    let exe = program();
    let fabric = format!(
        "t{}-{}-{scenario}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(&fabric);
    std::fs::create_dir_all(&dir).unwrap();
    let mut kids: Vec<Child> = (0..2)
        .map(|r| {
            Command::new(exe)
                .arg(scenario)
                .arg(r.to_string())
                .arg(&dir)
                .env("STORMPI_VERBS_FABRIC", &fabric)
                .env_remove("STORMPI_VERBS_LID")
                .env_remove("STORMPI_RANK")
                .env_remove("PMI_RANK")
                .env_remove("SLURM_PROCID")
                .envs(env.iter().copied())
                .envs(
                    launched
                        .then(|| {
                            [
                                ("STORMPI_RANK", r.to_string()),
                                ("STORMPI_SIZE", "2".into()),
                            ]
                        })
                        .into_iter()
                        .flatten(),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start swverbs_check")
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = [None, None];
    let mut failed = None;
    while status.iter().any(|s| s.is_none()) && failed.is_none() {
        for (r, k) in kids.iter_mut().enumerate() {
            if status[r].is_none() {
                if let Some(s) = k.try_wait().expect("wait") {
                    if !s.success() {
                        failed = Some(format!("rank {r} exited with {s}"));
                    }
                    status[r] = Some(s);
                }
            }
        }
        if failed.is_none() && Instant::now() > deadline {
            failed = Some("time limit of 60 s reached".into());
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
    let _ = std::fs::remove_dir_all(&dir);
    for lid in 1..4 {
        let _ = std::fs::remove_file(format!("/dev/shm/stormpi-verbs-{fabric}-{lid}"));
    }
    if let Some(why) = failed {
        panic!("{scenario}: {why}\n{report}");
    }
    assert!(
        report.contains(&format!("rank 0: {scenario} passed"))
            && report.contains(&format!("rank 1: {scenario} passed")),
        "{report}"
    );
}

fn run(scenario: &str) {
    run_with(scenario, false, &[]);
}

#[test]
fn inline_sends_ping_pong_with_immediate_data_and_large_and_gathered_sends_arrive_intact() {
    run("pingpong");
}

#[test]
fn rdma_write_and_read_of_one_mebibyte_move_every_byte() {
    run("rdma");
}

#[test]
fn bad_rkey_out_of_bounds_and_deregistered_region_complete_with_remote_access_error() {
    run("badkey");
}

#[test]
fn receiver_not_ready_retries_rnr_retry_times_and_a_full_srq_refuses_receives() {
    run("rnr");
}

#[test]
fn qp_in_error_flushes_its_requests_and_its_peer_exhausts_its_retries() {
    run("flush");
}

#[test]
fn launched_ranks_take_lid_rank_plus_one_and_small_rings_wrap_and_fill_without_loss() {
    let small = [("STORMPI_VERBS_RING_BYTES", "16384")];
    run_with("pingpong", true, &small);
    run_with("rdma", true, &small);
    run_with("burst", true, &small);
}

#[test]
fn fetch_and_add_and_compare_and_swap_with_alignment_and_access_checks() {
    run("atomics");
}

#[test]
fn a_burst_of_sends_arrives_complete_and_in_order() {
    run("burst");
}
