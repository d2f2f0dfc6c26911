//! Issue 23: the verbs BTL over the software verbs device (`libverbs_shmem.so`, loaded at run
//! time through `btl_verbs_library`), with `btl=self,verbs` so every message between ranks goes
//! through it: self-checking C programs at 2 and 3 ranks (ping-pong around a ring, every pair
//! with messages up to 1 MiB so the RDMA-read rendezvous runs, many small messages against few
//! credits, the collectives); the finalize counters prove the reads and credit returns happened.
//! A peer that stops answering is reported by rank and completion status; a missing library
//! is quiet unless verbs was asked for by name; too few receive buffers name the parameter.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use stormpi_tests::{
    artifact, build_once, c_extra_source, c_program, run_job, stormcc, stormrun_command,
    workspace_dir, Output, Proc, C_FLAGS, JOB_TIMEOUT,
};

/// `--mca` options selecting the verbs BTL over the software device, logging at level 2.
fn verbs_options(extra: &[&str]) -> Vec<String> {
    let lib = artifact("libverbs_shmem.so");
    let mut o: Vec<String> = [
        "--mca",
        "btl",
        "self,verbs",
        "--mca",
        "btl_verbs_library",
        &lib.to_string_lossy(),
        "--mca",
        "mpi_log_level",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    o.extend(extra.iter().map(|s| s.to_string()));
    o
}

fn job(np: u32, name: &str, args: &[&str], extra: &[&str]) -> Output {
    let o = verbs_options(extra);
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    run_job(np, &o, &c_program(name), args)
}

/// The numbers of every rank's finalize line `verbs BTL: N fragments sent (...), ...`, as
/// (fragments, credit writes, RDMA reads).
fn counters(out: &Output) -> Vec<(u64, u64, u64)> {
    let num = |line: &str, before: &str| -> u64 {
        let at = line.find(before).expect("a counter");
        let head = line[..at].trim_end();
        let start = head
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        head[start..].parse().expect("a number")
    };
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs BTL: ") && l.contains(" fragments sent"))
        .map(|l| {
            (
                num(l, " fragments sent"),
                num(l, " credit writes"),
                num(l, " RDMA reads"),
            )
        })
        .collect()
}

#[test]
fn ring_ping_pong_runs_over_verbs() {
    for np in [2, 3] {
        let out = job(np, "ring", &[], &[]);
        out.assert_ok("ring");
        let c = counters(&out);
        assert_eq!(
            c.len(),
            np as usize,
            "a counter line per rank\n{}",
            out.report()
        );
        assert!(
            c.iter().all(|&(f, _, _)| f > 0),
            "fragments went over verbs\n{}",
            out.report()
        );
    }
}

#[test]
fn large_messages_are_read_by_rdma() {
    for np in [2, 3] {
        let out = job(np, "allpairs", &["1048576"], &[]);
        out.assert_ok("allpairs");
        let c = counters(&out);
        assert_eq!(c.len(), np as usize, "{}", out.report());
        assert!(
            c.iter().all(|&(_, _, reads)| reads > 0),
            "every rank read messages by RDMA\n{}",
            out.report()
        );
    }
}

#[test]
fn without_reads_large_messages_go_in_fragments() {
    let out = job(
        2,
        "allpairs",
        &["1048576"],
        &["--mca", "btl_verbs_get_min", "0"],
    );
    out.assert_ok("allpairs");
    let c = counters(&out);
    assert_eq!(c.len(), 2, "{}", out.report());
    assert!(
        c.iter().all(|&(_, _, reads)| reads == 0),
        "{}",
        out.report()
    );
}

#[test]
fn many_small_messages_against_few_credits() {
    for np in [2, 3] {
        let out = job(
            np,
            "many_outstanding",
            &[],
            &[
                "--mca",
                "btl_verbs_credits",
                "4",
                "--mca",
                "btl_verbs_send_slots",
                "4",
            ],
        );
        out.assert_ok("many_outstanding");
        let c = counters(&out);
        assert_eq!(c.len(), np as usize, "{}", out.report());
        assert!(
            c.iter()
                .all(|&(f, credit_writes, _)| f > 1000 && credit_writes > 0),
            "credits came back through the mailbox\n{}",
            out.report()
        );
    }
}

/// One credit per peer and a shared receive queue of exactly one buffer per peer: every
/// fragment waits for the previous one's credit, and the queue never overflows.
#[test]
fn one_credit_per_peer_fills_the_shared_receive_queue_exactly() {
    let out = job(
        3,
        "many_outstanding",
        &[],
        &[
            "--mca",
            "btl_verbs_credits",
            "1",
            "--mca",
            "btl_verbs_receive_buffers",
            "2",
        ],
    );
    out.assert_ok("many_outstanding");
    assert_eq!(counters(&out).len(), 3, "{}", out.report());
}

#[test]
fn collectives_run_over_verbs() {
    for np in [2, 3] {
        job(np, "collectives", &[], &[]).assert_ok("collectives");
    }
}

#[test]
fn too_few_receive_buffers_name_the_parameter() {
    let out = job(
        3,
        "ring",
        &[],
        &[
            "--mca",
            "btl_verbs_receive_buffers",
            "8",
            "--mca",
            "btl_verbs_credits",
            "8",
        ],
    );
    out.assert_failed_with(&["btl_verbs_receive_buffers=8", "btl_verbs_credits"]);
}

#[test]
fn a_missing_library_is_an_error_only_when_verbs_is_named() {
    let missing = ["--mca", "btl_verbs_library", "/nonexistent/libibverbs.so.1"];
    let out = run_job(
        2,
        &[&["--mca", "btl", "self,verbs"], &missing[..]].concat(),
        &c_program("ring"),
        &[],
    );
    out.assert_failed_with(&["verbs BTL cannot start", "/nonexistent/libibverbs.so.1"]);
    run_job(2, &missing, &c_program("ring"), &[]).assert_ok("ring");
}

#[test]
fn a_device_asked_for_by_name_must_exist() {
    let out = job(2, "ring", &[], &["--mca", "btl_verbs_device", "mlx5_9"]);
    out.assert_failed_with(&["no device mlx5_9", "btl_verbs_device"]);
    let out = job(2, "ring", &[], &["--mca", "btl_verbs_device", "swverbs0"]);
    out.assert_ok("ring");
}

/// Parses the `READY <rank> <pid>` lines of kill_victim.
fn ready_pids(stdout: &str) -> Vec<(u32, i32)> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("READY ")?.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

/// Starts kill_victim at 3 ranks over verbs (short ACK timeout) and sends `signal` to rank 2
/// once every rank is in its loop; the job's output.
fn victim_job(signal: i32) -> (Output, u32) {
    let o = verbs_options(&["--mca", "btl_verbs_timeout", "12"]);
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    let mut job = Proc::spawn(
        stormrun_command(3, &o, &c_program("kill_victim"), &[]),
        JOB_TIMEOUT + Duration::from_secs(20),
    );
    assert!(
        job.wait_for_stdout(Duration::from_secs(30), |s| ready_pids(s).len() == 3),
        "not every rank printed READY\n{}",
        job.stderr()
    );
    let victim = ready_pids(&job.stdout())
        .into_iter()
        .find(|(r, _)| *r == 2)
        .expect("rank 2")
        .1;
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(victim, signal) }, 0);
    let ended = job.wait_timeout(Duration::from_secs(30)).is_some();
    let out = job.wait();
    assert!(
        ended,
        "the job still ran 30 s after rank 2 got signal {signal}\n{}",
        out.report()
    );
    (out, 2)
}

/// A peer that stops answering (stopped, so the launcher sees nothing): its neighbours' sends
/// exhaust their retries, and the BTL names the peer and the completion status; the job ends.
#[test]
fn a_silent_peer_is_reported_by_rank_and_status() {
    let (out, victim) = victim_job(libc::SIGSTOP);
    let named = format!("verbs BTL: the connection to rank {victim}");
    out.assert_failed_with(&[&named, "retry counter exceeded"]);
}

/// A peer killed mid-job ends the job promptly, never a hang.
#[test]
fn a_killed_peer_ends_the_job() {
    let (out, victim) = victim_job(libc::SIGKILL);
    out.assert_failed_with(&[&format!("rank {victim}")]);
}

/// `tests/c-extra/<name>.c` (with `tests/c/stormtest.h`) linked with `libmpi.a`, or with
/// `libmpi.so` (`stormcc -dynamic-mpi`): the library's memory hooks are then the program's `free`
/// and `munmap`.
fn extra_program(name: &str, dynamic: bool) -> PathBuf {
    linked(&c_extra_source(name), dynamic)
}

/// A C program linked with `libmpi.a` or `libmpi.so`.
fn linked(src: &std::path::Path, dynamic: bool) -> PathBuf {
    let name = src.file_stem().expect("a C file").to_string_lossy();
    let how = if dynamic { "dynamic" } else { "static" };
    build_once(&format!("{name}_{how}"), |out| {
        let mut cmd = Command::new(stormcc());
        cmd.args(C_FLAGS)
            .arg(format!("-I{}", workspace_dir().join("tests/c").display()))
            .arg(format!("-{how}-mpi"))
            .arg("-o")
            .arg(out)
            .arg(src);
        cmd
    })
}

fn dynamic_program(name: &str) -> PathBuf {
    extra_program(name, true)
}

/// Every rank's `verbs BTL: registration cache on|off: H hits, M misses, E evictions,
/// I invalidated, U uncached` line, as (on, [H, M, E, I, U]).
fn cache_lines(out: &Output) -> Vec<(bool, [u64; 5])> {
    out.stderr
        .lines()
        .filter_map(|l| {
            let rest = &l[l.find("verbs BTL: registration cache ")? + 30..];
            let (state, counts) = rest.split_once(": ")?;
            let mut v = [0u64; 5];
            for (i, part) in counts.split(", ").enumerate().take(5) {
                v[i] = part.split_whitespace().next()?.parse().ok()?;
            }
            Some((state == "on", v))
        })
        .collect()
}

fn reuse_job(program: &std::path::Path, extra: &[&str]) -> Output {
    let o = verbs_options(extra);
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    run_job(2, &o, program, &["1048576"])
}

/// The REUSED count buffer_reuse prints.
fn reused(out: &Output) -> u32 {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("REUSED ")?.trim().parse().ok())
        .expect("a REUSED line")
}

/// A buffer sent twice finds its registration the second time; buffers freed, unmapped or
/// dropped with madvise between two messages and allocated again at the same address carry the
/// new data (the software device fails a registration whose pages were replaced, so a cache
/// that missed the free would fail the job).
///
/// The same with the program linked with `libmpi.a` by stormcc: its static link defines `free`,
/// `munmap`, ... as the library's hooks (`-Wl,--defsym`), so the cache is on there too.
#[test]
fn the_registration_cache_reuses_registrations_and_drops_freed_ones() {
    for dynamic in [true, false] {
        cache_reuses_and_drops(&extra_program("buffer_reuse", dynamic));
    }
}

fn cache_reuses_and_drops(program: &std::path::Path) {
    let out = reuse_job(program, &[]);
    out.assert_ok("buffer_reuse");
    assert!(
        reused(&out) > 0,
        "no buffer came back at its old address: nothing was tested\n{}",
        out.report()
    );
    let lines = cache_lines(&out);
    assert_eq!(lines.len(), 2, "a cache line per rank\n{}", out.report());
    for (on, [hits, misses, _, invalidated, _]) in lines {
        assert!(
            on,
            "auto turns the cache on with the hooks in place\n{}",
            out.report()
        );
        assert!(hits > 0 && misses > 0, "{}", out.report());
        assert!(
            invalidated >= 4,
            "freed, unmapped and madvised buffers dropped their registrations\n{}",
            out.report()
        );
    }
}

/// A program linked with libmpi.a by hand: stormcc's static link command without the
/// `--defsym`s that make the program's `free`, `munmap`, ... the library's hooks.
fn hand_linked(name: &str) -> PathBuf {
    // stormcc's own static link first: it localizes libmpi.a, as an installed one is.
    extra_program(name, false);
    let src = c_extra_source(name);
    build_once(&format!("{name}_hand_linked"), |out| {
        let shown = Command::new(stormcc())
            .args(C_FLAGS)
            .arg(format!("-I{}", workspace_dir().join("tests/c").display()))
            .arg("-static-mpi")
            .arg("-show")
            .arg("-o")
            .arg(out)
            .arg(&src)
            .output()
            .expect("stormcc -show");
        assert!(shown.status.success(), "stormcc -show failed");
        let line = String::from_utf8(shown.stdout).expect("a command line");
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(
            words.iter().any(|w| w.contains("--defsym=free=")),
            "stormcc's static link defines free as the hook: {line}"
        );
        let mut cmd = Command::new(words[0]);
        cmd.args(words[1..].iter().filter(|w| !w.contains("--defsym=")));
        cmd
    })
}

/// Off, or in a program linked with libmpi.a by hand (whose frees the library does not see, so
/// auto leaves the cache off), every message registers its own memory; asking for the cache
/// there is an error naming the parameter.
#[test]
fn without_the_cache_every_message_registers_its_memory() {
    let out = reuse_job(
        &dynamic_program("buffer_reuse"),
        &["--mca", "mpi_leave_pinned", "off"],
    );
    out.assert_ok("buffer_reuse");
    let static_program = hand_linked("buffer_reuse");
    let out2 = reuse_job(&static_program, &[]);
    out2.assert_ok("buffer_reuse");
    for o in [&out, &out2] {
        let lines = cache_lines(o);
        assert_eq!(lines.len(), 2, "{}", o.report());
        for (on, [hits, misses, ..]) in lines {
            assert!(!on && hits == 0 && misses > 0, "{}", o.report());
        }
    }
    let out = reuse_job(&static_program, &["--mca", "mpi_leave_pinned", "on"]);
    out.assert_failed_with(&["mpi_leave_pinned=on", "libmpi.so"]);
}

/// Bounds: one registration at most, with every size of allpairs in flight at once, so unused
/// registrations are evicted and messages past the bound register for one use; a byte bound
/// below one message caches nothing. The data stays right (allpairs checks every byte).
#[test]
fn a_bounded_cache_evicts_and_falls_back() {
    let allpairs = linked(&workspace_dir().join("tests/c/allpairs.c"), true);
    let o = verbs_options(&["--mca", "mpool_max_registrations", "1"]);
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    let out = run_job(2, &o, &allpairs, &["1048576"]);
    out.assert_ok("allpairs");
    let lines = cache_lines(&out);
    assert_eq!(lines.len(), 2, "{}", out.report());
    assert!(
        lines
            .iter()
            .all(|(on, [_, _, ev, _, unc])| *on && *ev > 0 && *unc > 0),
        "{}",
        out.report()
    );
    let out = reuse_job(
        &dynamic_program("buffer_reuse"),
        &["--mca", "mpool_max_bytes", "4096"],
    );
    out.assert_ok("buffer_reuse");
    assert!(
        cache_lines(&out)
            .iter()
            .all(|(on, [hits, _, _, _, unc])| *on && *hits == 0 && *unc > 0),
        "a bound below one message caches nothing\n{}",
        out.report()
    );
}

/// The number before `word` in every rank's finalize line of counters.
fn counter(out: &Output, word: &str) -> Vec<u64> {
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs BTL: ") && l.contains(" fragments sent"))
        .map(|l| {
            let head = l[..l.find(word).expect("a counter")].trim_end();
            let start = head
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            head[start..].parse().expect("a number")
        })
        .collect()
}

/// Each large-message protocol forced (`btl_verbs_large_protocol`): allpairs from 64 KiB to
/// 8 MiB and buffer_reuse at 16 MiB (freed and remapped buffers under the pipeline's
/// registrations too), every byte checked; the counters show what moved the data. Pipeline
/// fragments of 256 KiB, so a message is several writes.
#[test]
fn each_large_message_protocol_carries_64k_to_16m() {
    for proto in ["rget", "pipeline", "send"] {
        let extra = [
            "--mca",
            "btl_verbs_large_protocol",
            proto,
            "--mca",
            "btl_verbs_rdma_pipeline_frag_length",
            "262144",
        ];
        let out = job(2, "allpairs", &["8388608"], &extra);
        out.assert_ok("allpairs");
        let o = verbs_options(&extra);
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let out2 = run_job(2, &o, &dynamic_program("buffer_reuse"), &["16777216"]);
        out2.assert_ok("buffer_reuse");
        for out in [&out, &out2] {
            let (reads, writes) = (counter(out, " RDMA reads"), counter(out, " RDMA writes"));
            assert_eq!(reads.len(), 2, "{}", out.report());
            let ok = match proto {
                "rget" => reads.iter().any(|&r| r > 0) && writes.iter().all(|&w| w == 0),
                "pipeline" => writes.iter().any(|&w| w > 0) && reads.iter().all(|&r| r == 0),
                _ => reads.iter().chain(&writes).all(|&n| n == 0),
            };
            assert!(
                ok,
                "{proto}: reads {reads:?}, writes {writes:?}\n{}",
                out.report()
            );
        }
    }
}

#[test]
fn an_unknown_protocol_names_the_parameter() {
    let out = job(
        2,
        "ring",
        &[],
        &["--mca", "btl_verbs_large_protocol", "put"],
    );
    out.assert_failed_with(&["btl_verbs_large_protocol=put"]);
}

/// The pipeline from `btl_verbs_min_rdma_pipeline_size` on, `RGET` below it: allpairs up to
/// 8 MiB with the bound at 4 MiB uses both.
#[test]
fn below_the_pipeline_size_large_messages_are_read() {
    let extra = [
        "--mca",
        "btl_verbs_large_protocol",
        "pipeline",
        "--mca",
        "btl_verbs_min_rdma_pipeline_size",
        "4194304",
    ];
    let out = job(2, "allpairs", &["8388608"], &extra);
    out.assert_ok("allpairs");
    let (reads, writes) = (counter(&out, " RDMA reads"), counter(&out, " RDMA writes"));
    assert!(
        reads.iter().all(|&r| r > 0) && writes.iter().all(|&w| w > 0),
        "reads {reads:?}, writes {writes:?}\n{}",
        out.report()
    );
}

/// Every rank's RDMA-read bytes (`R RDMA reads (B bytes)` of the finalize line).
fn read_bytes(out: &Output) -> Vec<u64> {
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs BTL: ") && l.contains(" RDMA reads ("))
        .map(|l| {
            let at = l.find(" RDMA reads (").expect("reads") + " RDMA reads (".len();
            let rest = &l[at..];
            rest[..rest.find(' ').expect("a number")]
                .parse()
                .expect("a number")
        })
        .collect()
}

/// The number before `word` in every rank's finalize line of transfer and registration times
/// (`verbs BTL: T us transferring large messages, ...`).
fn timing(out: &Output, word: &str) -> Vec<u64> {
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs BTL: ") && l.contains(" us transferring"))
        .map(|l| {
            let head = l[..l.find(word).expect("a counter")].trim_end();
            let start = head
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            head[start..].parse().expect("a number")
        })
        .collect()
}

/// `btl_verbs_rndv_eager_limit`: the `RGET` offer carries the message's first 8 KiB. The
/// receiver reads exactly that much less per message than without it (rget_head's three
/// messages read whole, at 1 MiB); a receive into a strided buffer asks for the rest in
/// fragments after the carried bytes; an odd-length message and a late receive; every byte
/// checked, and allpairs up to 8 MiB.
#[test]
fn rget_offers_carry_their_first_bytes() {
    let n = 1 << 20;
    let prog = dynamic_program("rget_head");
    let run = |extra: &[&str]| {
        let o = verbs_options(extra);
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let out = run_job(2, &o, &prog, &[&n.to_string()]);
        out.assert_ok("rget_head");
        out
    };
    let plain = run(&[]);
    let head = run(&["--mca", "btl_verbs_rndv_eager_limit", "8192"]);
    let (r0, r1) = (read_bytes(&plain), read_bytes(&head));
    // The receiving rank read 3 messages (contiguous twice, odd length), 8 KiB fewer each.
    for out in [&plain, &head] {
        let reads = counter(out, " RDMA reads");
        assert_eq!(reads.iter().sum::<u64>(), 3, "{}", out.report());
    }
    let (sum0, sum1): (u64, u64) = (r0.iter().sum(), r1.iter().sum());
    assert_eq!(sum0, 3 * n as u64 + 3, "{}", plain.report());
    assert_eq!(sum1, sum0 - 3 * 8192, "{}", head.report());
    let out = job(
        2,
        "allpairs",
        &["8388608"],
        &["--mca", "btl_verbs_rndv_eager_limit", "12000"],
    );
    out.assert_ok("allpairs");
}

/// `btl_verbs_rdma_pipeline_send_length`: the first 200 KiB of every pipelined message go
/// through the receive queue, the rest by RDMA write (256 KiB fragments), with the offer
/// carrying 4 KiB too: allpairs up to 8 MiB, buffer_reuse at 16 MiB and rget_head, every byte
/// checked; the counters show both paths moved data, and the sender registered fragments while
/// a transfer was under way (the pipeline's overlap).
#[test]
fn the_pipeline_sends_its_first_bytes_through_the_receive_queue() {
    let extra = [
        "--mca",
        "btl_verbs_large_protocol",
        "pipeline",
        "--mca",
        "btl_verbs_rdma_pipeline_frag_length",
        "262144",
        "--mca",
        "btl_verbs_rdma_pipeline_send_length",
        "204800",
        "--mca",
        "btl_verbs_rndv_eager_limit",
        "4096",
    ];
    let out = job(2, "allpairs", &["8388608"], &extra);
    out.assert_ok("allpairs");
    let o = verbs_options(&extra);
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    let out2 = run_job(2, &o, &dynamic_program("buffer_reuse"), &["16777216"]);
    out2.assert_ok("buffer_reuse");
    let out3 = run_job(2, &o, &dynamic_program("rget_head"), &["1048576"]);
    out3.assert_ok("rget_head");
    for out in [&out, &out2, &out3] {
        let pushes = timing(out, " pipeline sends");
        let writes = counter(out, " RDMA writes");
        assert_eq!(pushes.len(), 2, "{}", out.report());
        assert!(
            pushes.iter().any(|&p| p > 0) && writes.iter().any(|&w| w > 0),
            "pushes {pushes:?}, writes {writes:?}\n{}",
            out.report()
        );
        assert!(
            counter(out, " RDMA reads").iter().all(|&r| r == 0),
            "{}",
            out.report()
        );
    }
    // 16 MiB messages in 64 fragments: the sender registers most of them behind writes.
    let hidden = timing(&out2, " us registering behind");
    assert!(hidden.iter().any(|&h| h > 0), "{}", out2.report());
}
