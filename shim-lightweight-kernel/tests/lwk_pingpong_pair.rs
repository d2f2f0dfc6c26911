//! The paired latency benchmark runs as a vendor launcher starts it (environment only) and
//! prints, for 0 and 1 bytes, both paths' figures.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn lwk_pingpong_pair_prints_both_paths_for_0_and_1_bytes() {
    let job = format!("pairtest{}", std::process::id());
    let mut kids: Vec<_> = (0..2)
        .map(|r| {
            Command::new(env!("CARGO_BIN_EXE_lwk-pingpong-pair"))
                .args(["--batches", "3", "--iters", "50"])
                .env_remove("PMI_RANK")
                .env_remove("PMI_SIZE")
                .env_remove("SLURM_PROCID")
                .env_remove("SLURM_NTASKS")
                .env("STORMPI_RANK", r.to_string())
                .env("STORMPI_SIZE", "2")
                .env("STORMPI_JOBID", &job)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start lwk-pingpong-pair")
        })
        .collect();
    // A failed rank must not leave the test waiting: both are killed at the deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    while kids
        .iter_mut()
        .any(|k| k.try_wait().expect("wait").is_none())
    {
        if Instant::now() > deadline {
            for k in kids.iter_mut() {
                let _ = k.kill();
            }
            panic!("lwk-pingpong-pair did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let outs: Vec<_> = kids
        .into_iter()
        .map(|k| k.wait_with_output().expect("output"))
        .collect();
    for (r, o) in outs.iter().enumerate() {
        assert!(
            o.status.success(),
            "rank {r}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let text = String::from_utf8_lossy(&outs[0].stdout);
    let rows: Vec<Vec<f64>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(|f| f.parse().expect(l)).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (row, bytes) in rows.iter().zip([0.0, 1.0]) {
        assert_eq!(row.len(), 7, "{text}");
        assert_eq!(row[0], bytes);
        // Latencies are positive, ratios not negative (printed to two places, a batch that the
        // scheduler delayed on a loaded machine may show 0.00); the best ratio is the best
        // figures' quotient.
        assert!(row[1..3].iter().all(|&v| v > 0.0), "{text}");
        assert!(row[3..].iter().all(|&v| v >= 0.0), "{text}");
        assert!((row[3] - row[2] / row[1]).abs() < 0.02, "{text}");
        assert!(row[5] <= row[4] && row[4] <= row[6], "{text}");
    }
}
