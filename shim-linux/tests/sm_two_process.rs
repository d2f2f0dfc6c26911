//! Two real processes exchanging fragments through the `sm` BTL.
//!
//! The test process is rank 0; it re-runs this test binary as rank 1 (the `peer_process` test,
//! selected with an environment variable; without it that test does nothing). Both build `Sm`
//! with the same job id and a two-process node table and talk only through the `Btl` trait:
//! ping-pong of every interesting size up to `max_send_size`, 10,000 fragments each way at once
//! with content checks and checksums, back-pressure while rank 1 deliberately stops consuming,
//! and a throughput figure. Every wait has a deadline; the segment files are removed however the
//! test ends.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use mpi::sm::{Sm, PARAMS};
use stormpi_core::arch::Arch;
use stormpi_core::btl::{AmTag, Btl, Delivery, Endpoint, Modex, PeerInfo, Sink};
use stormpi_core::params::Params;
use stormpi_core::rte::ProcId;
use stormpi_core::Result;

const ROLE_VAR: &str = "STORMPI_SM_TEST_ROLE";
const JOB_VAR: &str = "STORMPI_SM_TEST_JOB";
/// The whole exchange must finish well within this.
const LIMIT: Duration = Duration::from_secs(60);
const MAX: usize = 64 << 10;
const STREAM: u32 = 10_000;
const BULK: u32 = 16384;
/// Round trips of 8 bytes for the latency figure.
const LAT: u32 = if cfg!(debug_assertions) {
    2_000
} else {
    20_000
};

// Active-message tags double as message kinds.
const PING: u8 = 10;
const PONG: u8 = 11;
const DATA: u8 = 12;
const SUM: u8 = 13;
const PAUSED: u8 = 14;
const FILL: u8 = 15;
const FILLED: u8 = 16;
const BULKDATA: u8 = 17;
const DONE: u8 = 18;

fn segment(job: &str, rank: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/stormpi-{job}-sm-{rank}"))
}

/// xorshift64*: reproducible sizes and contents on both sides.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn fill(seed: u64, buf: &mut [u8]) {
    let mut r = Rng::new(seed);
    for chunk in buf.chunks_mut(8) {
        let w = r.next().to_ne_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(seed, &mut v);
    v
}

/// FNV-1a over 8-byte words (the tail zero-padded) and the length, folded over a stream of
/// fragments.
fn fnv(mut h: u64, data: &[u8]) -> u64 {
    let words = data.chunks_exact(8);
    let rest = words.remainder();
    for w in words {
        h = (h ^ u64::from_ne_bytes(w.try_into().unwrap())).wrapping_mul(0x100_0000_01b3);
    }
    let mut w = [0u8; 8];
    w[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_ne_bytes(w)).wrapping_mul(0x100_0000_01b3);
    (h ^ data.len() as u64).wrapping_mul(0x100_0000_01b3)
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

/// Size of stream fragment `seq` from `rank`: mostly small, one in eight up to the maximum.
fn stream_size(r: &mut Rng) -> usize {
    let x = r.next();
    if x & 7 == 0 {
        (x >> 8) as usize % (MAX + 1)
    } else {
        (x >> 8) as usize % 513
    }
}

fn ping_sizes() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=64).collect();
    for k in 7..=16 {
        for s in [(1usize << k) - 1, 1 << k, (1 << k) + 1] {
            if s <= MAX && !v.contains(&s) {
                v.push(s);
            }
        }
    }
    v
}

struct NoModex;
impl Modex for NoModex {
    fn get(&mut self, _: ProcId, _: &str, _: &mut [u8]) -> Result<Option<usize>> {
        Ok(None)
    }
}

/// The test's engine: queues what arrives, or (for bulk data) copies it out and counts it.
struct Inbox {
    peer: ProcId,
    queue: VecDeque<(u8, Vec<u8>)>,
    /// Copy bulk fragments here instead of queueing them.
    bulk: Option<Vec<u8>>,
    bulk_frags: u32,
    bulk_bytes: u64,
}

impl Sink for Inbox {
    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
        assert_eq!(from, self.peer, "fragment from an unexpected process");
        match &mut self.bulk {
            Some(buf) if tag.0 == BULKDATA => {
                buf[..frag.len()].copy_from_slice(frag);
                self.bulk_frags += 1;
                self.bulk_bytes += frag.len() as u64;
            }
            _ => self.queue.push_back((tag.0, frag.to_vec())),
        }
        Delivery::Consumed
    }
}

struct Rank<'a> {
    me: u32,
    m: Sm,
    ep: Endpoint,
    inbox: Inbox,
    deadline: Instant,
    stalls: u64,
    /// The peer process, if we started it: its early exit fails the test at once.
    watch: Option<&'a mut Child>,
}

impl<'a> Rank<'a> {
    fn new(job: &str, me: u32) -> Rank<'a> {
        let mut params = Params::new(&[]);
        params.register_all(&PARAMS).unwrap();
        let mut m = Sm::new(&params, job, ProcId(me)).unwrap();
        assert_eq!(m.attrs().max_send_size, MAX);
        let peers = [0, 1].map(|r| PeerInfo {
            proc: ProcId(r),
            arch: Some(Arch::LOCAL),
            node: 3,
        });
        let mut eps = [None; 2];
        m.add_procs(&peers, &mut NoModex, &mut eps).unwrap();
        assert_eq!(eps[me as usize], None, "the own process is the self BTL's");
        Rank {
            me,
            m,
            ep: eps[1 - me as usize].expect("peer on the same node"),
            inbox: Inbox {
                peer: ProcId(1 - me),
                queue: VecDeque::new(),
                bulk: None,
                bulk_frags: 0,
                bulk_bytes: 0,
            },
            deadline: Instant::now() + LIMIT,
            stalls: 0,
            watch: None,
        }
    }

    /// Fails the test at the deadline, or at once if the watched peer process has exited.
    fn check_time(&mut self, what: &str) {
        assert!(
            Instant::now() < self.deadline,
            "rank {}: timed out {what}",
            self.me
        );
        if let Some(child) = &mut self.watch {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("rank {}: peer exited ({status}) while {what}", self.me);
            }
        }
    }

    fn progress(&mut self) -> usize {
        self.m.progress(&mut self.inbox)
    }

    /// Tries once to send; false on back-pressure.
    fn try_send(&mut self, tag: u8, len: usize, fill_with: impl FnOnce(&mut [u8])) -> bool {
        match self.m.reserve(self.ep, len) {
            Some(space) => {
                assert_eq!(space.len(), len);
                fill_with(space);
                self.m.commit(self.ep, AmTag(tag), len);
                true
            }
            None => {
                self.stalls += 1;
                false
            }
        }
    }

    fn send(&mut self, tag: u8, data: &[u8]) {
        while !self.try_send(tag, data.len(), |s| s.copy_from_slice(data)) {
            self.check_time("sending");
            // Keep receiving, so two senders cannot block each other.
            if self.progress() == 0 {
                std::thread::yield_now();
            }
        }
    }

    fn recv(&mut self) -> (u8, Vec<u8>) {
        let mut idle = 0u32;
        loop {
            if let Some(m) = self.inbox.queue.pop_front() {
                return m;
            }
            if self.progress() == 0 {
                // Poll hard for a while (each process has a core when the machine is quiet),
                // then let others run.
                idle += 1;
                if idle & 255 == 0 {
                    self.check_time("receiving");
                    std::thread::yield_now();
                }
            }
        }
    }

    fn expect(&mut self, tag: u8) -> Vec<u8> {
        let (t, data) = self.recv();
        assert_eq!(t, tag, "rank {}: unexpected message kind", self.me);
        data
    }

    /// Sends `STREAM` fragments while receiving as many from the peer, checking each one.
    fn stream(&mut self) {
        let peer = 1 - self.me;
        let mut out_sizes = Rng::new(100 + self.me as u64);
        let mut in_sizes = Rng::new(100 + peer as u64);
        let (mut sent, mut got) = (0u32, 0u32);
        let (mut sent_sum, mut got_sum) = (FNV0, FNV0);
        let mut next_len = stream_size(&mut out_sizes);
        while sent < STREAM || got < STREAM {
            self.check_time("streaming");
            let mut busy = false;
            if sent < STREAM {
                let seed = (self.me as u64) << 32 | sent as u64;
                let mut sum = sent_sum;
                if self.try_send(DATA, next_len, |s| {
                    fill(seed, s);
                    sum = fnv(sum, s);
                }) {
                    sent_sum = sum;
                    sent += 1;
                    next_len = stream_size(&mut out_sizes);
                    busy = true;
                }
            }
            busy |= self.progress() > 0;
            while got < STREAM {
                let Some((tag, data)) = self.inbox.queue.pop_front() else {
                    break;
                };
                assert_eq!(tag, DATA, "rank {}: stream fragment {got} kind", self.me);
                let want = pattern((peer as u64) << 32 | got as u64, stream_size(&mut in_sizes));
                assert!(
                    data == want,
                    "rank {}: stream fragment {got} differs",
                    self.me
                );
                got_sum = fnv(got_sum, &data);
                got += 1;
            }
            if !busy {
                std::thread::yield_now();
            }
        }
        self.send(SUM, &sent_sum.to_ne_bytes());
        let theirs = u64::from_ne_bytes(self.expect(SUM).try_into().unwrap());
        assert_eq!(theirs, got_sum, "rank {}: stream checksum", self.me);
    }
}

/// Rank 1: answers what rank 0 drives. `control` is the pipe rank 0 uses to release it from
/// its pause (EOF means rank 0 is gone).
fn rank1(job: &str, control: &mut dyn BufRead) {
    let mut r = Rank::new(job, 1);
    // Ping-pong: echo each fragment after checking it.
    for &len in &ping_sizes() {
        let data = r.expect(PING);
        assert_eq!(data.len(), len);
        assert!(
            data == pattern(len as u64, len),
            "ping of {len} bytes differs"
        );
        r.send(PONG, &data);
    }
    for _ in 0..LAT {
        let data = r.expect(PING);
        r.send(PONG, &data);
    }
    r.stream();
    // Stop consuming until rank 0 has seen the ring to us fill up.
    r.send(PAUSED, &[]);
    let mut line = String::new();
    control.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "go", "rank 0 went away during the pause");
    let mut n = 0u32;
    loop {
        let (tag, data) = r.recv();
        if tag == FILLED {
            assert_eq!(u32::from_ne_bytes(data.try_into().unwrap()), n);
            break;
        }
        assert_eq!(tag, FILL);
        assert!(data == pattern(1000 + n as u64, MAX), "fill fragment {n}");
        n += 1;
    }
    // Bulk: count and copy out, then report.
    r.inbox.bulk = Some(vec![0; MAX]);
    // The progress call that brought FILLED may have queued the first bulk fragments.
    while let Some((tag, data)) = r.inbox.queue.pop_front() {
        assert_eq!((tag, data.len()), (BULKDATA, MAX));
        r.inbox.bulk_frags += 1;
        r.inbox.bulk_bytes += MAX as u64;
    }
    while r.inbox.bulk_frags < BULK {
        r.check_time("receiving bulk data");
        if r.progress() == 0 {
            std::thread::yield_now();
        }
    }
    assert_eq!(r.inbox.bulk_bytes, BULK as u64 * MAX as u64);
    r.send(DONE, &[]);
    r.m.finalize();
}

/// Rank 0: drives the exchange; returns the measured half round-trip time of 8 bytes in ns and
/// the bulk throughput in MB/s.
fn rank0(job: &str, child: &mut Child, control: &mut ChildStdin) -> (f64, f64) {
    let t0 = Instant::now();
    let mut r = Rank::new(job, 0);
    r.watch = Some(child);
    let own = std::fs::metadata(segment(job, 0)).unwrap();
    assert_eq!(own.permissions().mode() & 0o777, 0o600);

    for &len in &ping_sizes() {
        let data = pattern(len as u64, len);
        r.send(PING, &data);
        assert!(r.expect(PONG) == data, "pong of {len} bytes differs");
        if len == 0 {
            // Rank 1 exists by now: its segment is private too.
            let peer = std::fs::metadata(segment(job, 1)).unwrap();
            assert_eq!(peer.permissions().mode() & 0o777, 0o600);
        }
    }
    eprintln!(
        "sm_two_process: size sweep done after {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    for i in 0..LAT {
        r.send(PING, &(i as u64).to_ne_bytes());
        assert_eq!(r.expect(PONG), (i as u64).to_ne_bytes());
    }
    let half_rtt_ns = start.elapsed().as_nanos() as f64 / LAT as f64 / 2.0;
    let stalls_before = r.stalls;
    r.stream();
    eprintln!(
        "sm_two_process: ping-pong and stream done after {:.2} s, {} reserve stalls in the stream",
        t0.elapsed().as_secs_f64(),
        r.stalls - stalls_before
    );

    // Back-pressure: rank 1 is not consuming; fill its ring until reserve says no.
    r.expect(PAUSED);
    let mut filled = 0u32;
    while r.try_send(FILL, MAX, |s| fill(1000 + filled as u64, s)) {
        filled += 1;
        assert!(filled <= 64, "the ring never filled up");
    }
    // A 1 MiB ring takes 15 records of 64 KiB + 8.
    assert_eq!(filled, 15, "fragments the ring took before pushing back");
    let until = Instant::now() + Duration::from_millis(50);
    while Instant::now() < until {
        r.progress();
        assert!(
            r.m.reserve(r.ep, MAX).is_none(),
            "ring has room although nobody consumes"
        );
    }
    r.check_time("filling the ring");
    control.write_all(b"go\n").unwrap();
    control.flush().unwrap();
    r.send(FILLED, &filled.to_ne_bytes());

    // Throughput of 64 KiB fragments, one way.
    let src = pattern(7, MAX);
    let start = Instant::now();
    let mut sent = 0;
    while sent < BULK {
        if r.try_send(BULKDATA, MAX, |s| s.copy_from_slice(&src)) {
            sent += 1;
        } else {
            r.check_time("sending bulk data");
            std::thread::yield_now();
        }
    }
    // Rank 1 exits right after DONE: stop watching it, or its exit could beat our next look.
    r.watch = None;
    r.expect(DONE);
    let secs = start.elapsed().as_secs_f64();
    r.m.finalize();
    (half_rtt_ns, BULK as f64 * MAX as f64 / secs / 1e6)
}

/// Removes the job's segment files and kills rank 1 however the test ends.
struct Cleanup {
    job: String,
    child: Option<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        let prefix = format!("stormpi-{}-", self.job);
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

#[test]
fn two_processes_through_sm() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let job = format!("smtest-{}-{nanos}", std::process::id());
    let mut guard = Cleanup {
        job: job.clone(),
        child: None,
    };
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["peer_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_VAR, "1")
        .env(JOB_VAR, &job)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let child = guard.child.insert(child);
    let mut control = child.stdin.take().unwrap();
    let started = Instant::now();
    let (lat, mbps) = rank0(&job, child, &mut control);
    drop(control);
    // Rank 1 finalizes and exits right after DONE.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < LIMIT, "rank 1 did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    guard.child = None;
    assert!(status.success(), "rank 1 failed: {status}");
    assert!(
        !segment(&job, 0).exists(),
        "rank 0's segment outlived finalize"
    );
    assert!(
        !segment(&job, 1).exists(),
        "rank 1's segment outlived finalize"
    );
    eprintln!(
        "sm_two_process: 8-byte ping-pong {lat:.0} ns one way (half round trip, test sink with \
         allocation); {BULK} fragments of 64 KiB one way: {mbps:.0} MB/s ({} build); whole test \
         {:.2} s",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        started.elapsed().as_secs_f64()
    );
}

/// Rank 1 of `two_processes_through_sm` when started by it; does nothing otherwise.
#[test]
fn peer_process() {
    if std::env::var(ROLE_VAR).as_deref() != Ok("1") {
        return;
    }
    let job = std::env::var(JOB_VAR).expect("job id");
    let mut control = BufReader::new(std::io::stdin());
    rank1(&job, &mut control);
}
