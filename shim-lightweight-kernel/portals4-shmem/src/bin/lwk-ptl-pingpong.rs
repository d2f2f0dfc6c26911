//! Raw Portals put ping-pong on the software NI — the baseline of the Red Storm paper's
//! Figures 4 (0- and 1-byte latency) and 5 (bandwidth by size).
//!
//! `lwk-ptl-pingpong [--reps R] [--max BYTES]` starts itself twice (ranks 0 and 1, environment
//! only, as a vendor launcher would) unless `STORMPI_RANK` is already set. Latency is half the
//! round trip of a put answered by a put, each landing in a persistent match list entry and
//! noticed through its counting event (no full events), timed in batches like bench/p2p.c's MPI
//! ping-pong (the best batch counts). Bandwidth streams 64 puts back to back
//! and waits for a 0-byte answer. Each figure is the best of R repetitions (the VM's timing is
//! noisy).
//!
//! `lwk-ptl-pingpong --instr N` runs N 0-byte round trips and nothing else, for an instruction
//! count: each one-way message is one call of `pp_put` at its sender and one of `pp_wait` at its
//! receiver (ci/bench-instr-lwk.sh counts inside those under callgrind, so the barriers and the
//! set-up stay out of the count).

mod common;

use common::*;
use std::time::Instant;

const PT: u32 = 7;
const WINDOW: u64 = 64;
/// Timed batches of each latency measurement: about 1000 round trips each for small messages,
/// the batches of bench/p2p.c at the iteration scale ci/bench-lwk.sh uses.
const BATCHES: u64 = 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, def: u64| -> u64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(def)
    };
    let reps = opt("--reps", 5).max(1);
    let max = opt("--max", 1 << 20) as usize;
    let instr = opt("--instr", 0);
    if std::env::var_os("STORMPI_RANK").is_none() {
        launch(&args);
        return;
    }
    let mut c = Ctx::new();
    let peer = 1 - c.rank;
    let ct = ct_alloc(c.ni);
    pt_alloc(c.ni, 0, PTL_EQ_NONE, PT);
    let mut rbuf = vec![0u8; max.max(1)];
    let sbuf = vec![1u8; max.max(1)];
    let mut me = me_desc(
        rbuf.as_mut_ptr(),
        rbuf.len(),
        PTL_ME_OP_PUT
            | PTL_ME_EVENT_CT_COMM
            | PTL_ME_EVENT_COMM_DISABLE
            | PTL_ME_EVENT_LINK_DISABLE,
        0,
        0,
    );
    me.ct_handle = ct;
    append(c.ni, PT, &me, PTL_PRIORITY_LIST, 0);
    let md = md_bind(
        c.ni,
        sbuf.as_ptr() as *mut u8,
        sbuf.len(),
        PTL_EQ_NONE,
        PTL_CT_NONE,
        0,
    );
    let mut seen: u64 = 0;
    let wait_ct = |target: u64| pp_wait(ct, target);
    if instr > 0 {
        c.barrier();
        for _ in 0..instr {
            if c.rank == 0 {
                pp_put(md, 0, peer);
                seen += 1;
                wait_ct(seen);
            } else {
                seen += 1;
                wait_ct(seen);
                pp_put(md, 0, peer);
            }
        }
        ok(PtlMDRelease(md));
        c.fini();
        return;
    }
    let mut sizes = vec![0usize];
    let mut s = 1;
    while s <= max {
        sizes.push(s);
        s *= 2;
    }
    c.barrier();
    if c.rank == 0 {
        let cfg = lock_cfg();
        println!(
            "raw Portals put ping-pong on portals4-shmem, 2 ranks; ring {} KiB, cross-memory attach {} (from {} bytes); best of {reps}",
            cfg.0 / 1024,
            if cfg.1 { "on" } else { "off" },
            cfg.2
        );
        println!(
            "{:>9} {:>12} {:>16}",
            "bytes", "latency_us", "bandwidth_MB/s"
        );
    }
    for &n in &sizes {
        let iters = (200_000 / (1 + n as u64 / 256)).clamp(50, 20_000);
        let mut best_lat = f64::MAX;
        let mut best_bw = 0f64;
        for _ in 0..reps {
            c.barrier();
            // Latency: the best of BATCHES timed batches, as bench/p2p.c times the MPI paths
            // (so that both sides of the comparison see the machine's noise alike).
            let warm = iters / 10 + 1;
            let batch = iters.div_ceil(BATCHES);
            let mut t0 = Instant::now();
            for i in 0..warm + batch * BATCHES {
                if i >= warm && (i - warm).is_multiple_of(batch) {
                    if i > warm {
                        best_lat =
                            best_lat.min(t0.elapsed().as_secs_f64() * 1e6 / (2.0 * batch as f64));
                    }
                    t0 = Instant::now();
                }
                if c.rank == 0 {
                    pp_put(md, n as u64, peer);
                    seen += 1;
                    wait_ct(seen);
                } else {
                    seen += 1;
                    wait_ct(seen);
                    pp_put(md, n as u64, peer);
                }
            }
            best_lat = best_lat.min(t0.elapsed().as_secs_f64() * 1e6 / (2.0 * batch as f64));
            // Bandwidth (not for 0 bytes).
            if n > 0 {
                let rounds = (iters / WINDOW).clamp(2, 200);
                c.barrier();
                let t0 = Instant::now();
                for _ in 0..rounds {
                    if c.rank == 0 {
                        for _ in 0..WINDOW {
                            put(md, 0, n as u64, PTL_NO_ACK_REQ, peer, PT, 0, 0, 0, 0);
                        }
                        seen += 1;
                        wait_ct(seen);
                    } else {
                        seen += WINDOW;
                        wait_ct(seen);
                        put(md, 0, 0, PTL_NO_ACK_REQ, peer, PT, 0, 0, 0, 0);
                    }
                }
                let secs = t0.elapsed().as_secs_f64();
                best_bw = best_bw.max((rounds * WINDOW * n as u64) as f64 / secs / 1e6);
            }
        }
        if c.rank == 0 {
            if n == 0 {
                println!("{n:>9} {best_lat:>12.3} {:>16}", "-");
            } else {
                println!("{n:>9} {best_lat:>12.3} {best_bw:>16.1}");
            }
        }
    }
    ok(PtlMDRelease(md));
    c.fini();
}

/// The ping-pong's put of `len` bytes to `peer` (out of line: `--instr` counts inside it).
#[inline(never)]
fn pp_put(md: ptl_handle_md_t, len: u64, peer: u32) {
    put(md, 0, len, PTL_NO_ACK_REQ, peer, PT, 0, 0, 0, 0);
}

/// The ping-pong's wait until the counting event reaches `target` (out of line, as `pp_put`).
#[inline(never)]
fn pp_wait(ct: ptl_handle_ct_t, target: u64) {
    let mut v = ptl_ct_event_t::default();
    // SAFETY: a counting event of this interface and a valid out-pointer.
    unsafe { ok(PtlCTWait(ct, target, &mut v)) };
    assert_eq!(v.failure, 0);
}

/// (ring bytes, cross-memory attach on, its threshold) as the NI sees them.
fn lock_cfg() -> (usize, bool, usize) {
    let job = portals4_shmem::job::Job::from_env().expect("job");
    let cfg = portals4_shmem::job::Config::from_env(&job);
    (cfg.ring_bytes, cfg.cma, cfg.cma_threshold)
}

/// Starts ranks 0 and 1 of this program and waits for both.
fn launch(args: &[String]) {
    let exe = std::env::current_exe().expect("own path");
    let job = format!("bench{}", std::process::id());
    let mut kids: Vec<_> = (0..2)
        .map(|r| {
            std::process::Command::new(&exe)
                .args(&args[1..])
                .env("STORMPI_RANK", r.to_string())
                .env("STORMPI_SIZE", "2")
                .env("STORMPI_JOBID", &job)
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let mut ok_all = true;
    for k in kids.iter_mut() {
        ok_all &= k.wait().map(|s| s.success()).unwrap_or(false);
    }
    for r in 0..2 {
        let _ = std::fs::remove_file(format!("/dev/shm/stormpi-{job}-ptl-{r}"));
    }
    if !ok_all {
        std::process::exit(1);
    }
}
