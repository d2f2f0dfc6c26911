//! Two real processes exchanging fragments through the `tcp` BTL over loopback.
//!
//! The test process is rank 0; it re-runs this test binary as rank 1 (the `peer_process` test,
//! selected with an environment variable; without it that test does nothing). Both open their tcp
//! modules with `btl_tcp_if_include=lo`, publish into a modex kept as files in a scratch
//! directory, and talk only through the `Btl` trait: ping-pong of every interesting size up to
//! `max_send_size` (copied and zero-copy, in both directions, with completions), connections from
//! strangers (wrong proof of the secret, unknown rank, garbage, silence) turned away while the job goes on,
//! 10,000 fragments each way at once with content checks and checksums, back-pressure while rank
//! 1 stops reading, and a throughput figure. Every wait has a deadline.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpi::tcp::wire::{AddrRecord, Challenge, Handshake, CHALLENGE_LEN, CONNECT};
use mpi::tcp::{modules, Tcp, PARAMS};
use stormpi_bootstrap::auth::{Key, Nonce};
use stormpi_core::btl::{
    AmTag, Btl, DataRef, Delivery, Endpoint, Modex, ModexPut, PeerInfo, Sent, Sink, Token,
};
use stormpi_core::params::Params;
use stormpi_core::rte::ProcId;
use stormpi_core::Result;

const ROLE_VAR: &str = "STORMPI_TCP_TEST_ROLE";
const DIR_VAR: &str = "STORMPI_TCP_TEST_DIR";
/// The whole exchange must finish well within this.
const LIMIT: Duration = Duration::from_secs(90);
const MAX: usize = 128 << 10;
/// Fragments from this size on go zero-copy (as the PML does).
const ZERO_COPY: usize = 4096;
/// Header bytes a zero-copy fragment carries inline (the PML's fragment header is 24).
const HDR: usize = 24;
const STREAM: u32 = 10_000;
const BULK: u32 = 8192;
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
const FILLREF: u8 = 20;
const FILLED: u8 = 16;
const BULKDATA: u8 = 17;
const DONE: u8 = 18;
const STRANGERS: u8 = 19;

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

/// FNV-1a over the bytes and the length, folded over a stream of fragments.
fn fnv(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    (h ^ data.len() as u64).wrapping_mul(0x100_0000_01b3)
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

/// Size of the next stream fragment: mostly small, one in eight up to the maximum.
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
    for k in 7..=17 {
        for s in [(1usize << k) - 1, 1 << k, (1 << k) + 1] {
            if s <= MAX && !v.contains(&s) {
                v.push(s);
            }
        }
    }
    v
}

/// The modex as files `<rank>.<key>` in a directory both processes see.
struct FileModex {
    dir: PathBuf,
    me: u32,
}

impl FileModex {
    fn path(&self, rank: u32, key: &str) -> PathBuf {
        self.dir.join(format!("{rank}.{key}"))
    }

    /// Marks our puts complete and waits for the peer's.
    fn fence(&self, peer: u32, deadline: Instant) {
        std::fs::write(self.path(self.me, "ready"), b"").unwrap();
        while !self.path(peer, "ready").exists() {
            assert!(Instant::now() < deadline, "rank {peer} never published");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl ModexPut for FileModex {
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        // Written under another name and renamed, so the peer never reads half a value.
        let tmp = self.path(self.me, &format!("{key}.tmp"));
        std::fs::write(&tmp, value).unwrap();
        std::fs::rename(&tmp, self.path(self.me, key)).unwrap();
        Ok(())
    }
}

impl Modex for FileModex {
    fn get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        Ok(std::fs::read(self.path(proc.0, key)).ok().map(|v| {
            let n = v.len().min(out.len());
            out[..n].copy_from_slice(&v[..n]);
            n
        }))
    }
}

/// The test's engine: queues what arrives (or, for bulk data, counts it) and records
/// completions.
struct Inbox {
    peer: ProcId,
    queue: VecDeque<(u8, Vec<u8>)>,
    completed: Vec<u64>,
    bulk: bool,
    bulk_frags: u32,
    bulk_bytes: u64,
}

impl Sink for Inbox {
    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
        assert_eq!(from, self.peer, "fragment from an unexpected process");
        if self.bulk && tag.0 == BULKDATA {
            // Every byte of some, the ends of all (a full check of each would cost more than
            // the transfer).
            let body = &frag[HDR..];
            let whole = self.bulk_frags.is_multiple_of(64);
            assert!(
                body.len() == MAX - HDR
                    && body[0] == 0x5a
                    && body[body.len() - 1] == 0x5a
                    && (!whole || body.iter().all(|&b| b == 0x5a)),
                "bulk fragment {} differs",
                self.bulk_frags
            );
            self.bulk_frags += 1;
            self.bulk_bytes += frag.len() as u64;
        } else {
            self.queue.push_back((tag.0, frag.to_vec()));
        }
        Delivery::Consumed
    }

    fn completed(&mut self, token: Token, result: Result<()>) {
        assert!(result.is_ok(), "zero-copy send {} failed", token.0);
        self.completed.push(token.0);
    }
}

struct Rank<'a> {
    me: u32,
    m: Tcp,
    ep: Endpoint,
    inbox: Inbox,
    deadline: Instant,
    /// Buffers lent to zero-copy sends not reported complete yet, by token.
    lent: HashMap<u64, Vec<u8>>,
    next_token: u64,
    stalls: u64,
    /// The peer process, if we started it: its early exit fails the test at once.
    watch: Option<&'a mut Child>,
}

fn params() -> Params {
    let mut p = Params::new(&[]);
    p.register_all(&PARAMS).unwrap();
    p.set("btl_tcp_if_include", "lo").unwrap();
    // Smaller than the default fragment, so the stream of 10,000 stays quick in a debug build.
    p.set("btl_tcp_max_send_size", "128k").unwrap();
    // Short, so the silent stranger is dropped quickly.
    p.set("btl_tcp_connect_timeout", "500").unwrap();
    // Fixed socket buffers (no automatic tuning), so the fill takes a bounded, steady amount.
    p.set("btl_tcp_sndbuf", "256k").unwrap();
    p.set("btl_tcp_rcvbuf", "256k").unwrap();
    p
}

impl<'a> Rank<'a> {
    fn new(dir: &Path, me: u32) -> Rank<'a> {
        let deadline = Instant::now() + LIMIT;
        let mut mods = modules(&params(), ProcId(me), 8).unwrap();
        assert_eq!(mods.len(), 1, "one module, on lo");
        let mut m = mods.pop().unwrap();
        assert_eq!(m.attrs().max_send_size, MAX);
        let mut modex = FileModex {
            dir: dir.to_path_buf(),
            me,
        };
        m.publish(&mut modex).unwrap();
        modex.fence(1 - me, deadline);
        let peers = [0, 1].map(|r| PeerInfo {
            proc: ProcId(r),
            arch: None,
            node: 0,
        });
        let mut eps = [None; 2];
        m.add_procs(&peers, &mut modex, &mut eps).unwrap();
        assert_eq!(eps[me as usize], None, "the own process is the self BTL's");
        Rank {
            me,
            m,
            ep: eps[1 - me as usize].expect("peer reachable over lo"),
            inbox: Inbox {
                peer: ProcId(1 - me),
                queue: VecDeque::new(),
                completed: Vec::new(),
                bulk: false,
                bulk_frags: 0,
                bulk_bytes: 0,
            },
            deadline,
            lent: HashMap::new(),
            next_token: 1,
            stalls: 0,
            watch: None,
        }
    }

    /// Fails the test at the deadline, or at once if the watched peer process has exited.
    fn check_time(&mut self, what: &str) {
        assert!(
            Instant::now() < self.deadline,
            "rank {}: timed out {what} ({} bulk fragments, {} lent buffers, {} queued messages)",
            self.me,
            self.inbox.bulk_frags,
            self.lent.len(),
            self.inbox.queue.len()
        );
        if let Some(child) = &mut self.watch {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("rank {}: peer exited ({status}) while {what}", self.me);
            }
        }
    }

    fn progress(&mut self) -> usize {
        let n = self.m.progress(&mut self.inbox);
        for t in self.inbox.completed.drain(..) {
            assert!(
                self.lent.remove(&t).is_some(),
                "completion for no send ({t})"
            );
        }
        n
    }

    /// Tries once to send `data` (zero-copy from `ZERO_COPY` bytes on: its first `HDR` bytes
    /// as the header); false on back-pressure.
    fn try_send(&mut self, tag: u8, data: &[u8]) -> bool {
        if data.len() >= ZERO_COPY {
            let buf = data.to_vec();
            // SAFETY: `buf` is kept in `lent` until its completion is reported (or it is Done).
            let r = unsafe { DataRef::new(buf.as_ptr().add(HDR), buf.len() - HDR) };
            let token = self.next_token;
            match self
                .m
                .send_ref(self.ep, AmTag(tag), &buf[..HDR], r, Token(token))
            {
                None => {
                    self.stalls += 1;
                    false
                }
                Some(Sent::Done) => true,
                Some(Sent::Pending) => {
                    self.next_token += 1;
                    self.lent.insert(token, buf);
                    true
                }
            }
        } else {
            match self.m.reserve(self.ep, data.len()) {
                Some(space) => {
                    assert_eq!(space.len(), data.len());
                    space.copy_from_slice(data);
                    self.m.commit(self.ep, AmTag(tag), data.len());
                    true
                }
                None => {
                    self.stalls += 1;
                    false
                }
            }
        }
    }

    fn send(&mut self, tag: u8, data: &[u8]) {
        while !self.try_send(tag, data) {
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

    /// Waits until every zero-copy send is reported complete.
    fn drain_completions(&mut self) {
        while !self.lent.is_empty() {
            self.check_time("waiting for completions");
            if self.progress() == 0 {
                std::thread::yield_now();
            }
        }
    }

    /// Sends `STREAM` fragments while receiving as many from the peer, checking each one.
    fn stream(&mut self) {
        let peer = 1 - self.me;
        let mut out_sizes = Rng::new(100 + self.me as u64);
        let mut in_sizes = Rng::new(100 + peer as u64);
        let (mut sent, mut got) = (0u32, 0u32);
        let (mut sent_sum, mut got_sum) = (FNV0, FNV0);
        let mut next = pattern(self.me as u64 * 1_000_000, stream_size(&mut out_sizes));
        while sent < STREAM || got < STREAM {
            self.check_time("streaming");
            let mut busy = false;
            if sent < STREAM && self.try_send(DATA, &next) {
                sent_sum = fnv(sent_sum, &next);
                sent += 1;
                let seed = self.me as u64 * 1_000_000 + sent as u64;
                next = pattern(seed, stream_size(&mut out_sizes));
                busy = true;
            }
            busy |= self.progress() > 0;
            while got < STREAM {
                let Some((tag, data)) = self.inbox.queue.pop_front() else {
                    break;
                };
                assert_eq!(tag, DATA, "rank {}: stream fragment {got} kind", self.me);
                let want = pattern(
                    peer as u64 * 1_000_000 + got as u64,
                    stream_size(&mut in_sizes),
                );
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
        self.drain_completions();
    }
}

/// Connects to `addr`, reads the module's challenge, sends what `answer` makes of its nonce,
/// and waits (progressing `r`) until the module closes the connection.
fn stranger(r: &mut Rank, addr: SocketAddrV4, answer: impl Fn(Nonce) -> Vec<u8>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nonblocking(true).unwrap();
    let mut challenge = Vec::new();
    loop {
        r.check_time("waiting for a stranger to be turned away");
        r.progress();
        let mut b = [0u8; CHALLENGE_LEN];
        let want = (CHALLENGE_LEN - challenge.len()).max(1);
        match c.read(&mut b[..want]) {
            Ok(0) => return,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(_) => return,
            Ok(_) if challenge.len() == CHALLENGE_LEN => {
                panic!("the acceptor wrote to a stranger after its challenge")
            }
            Ok(n) => {
                challenge.extend_from_slice(&b[..n]);
                if challenge.len() == CHALLENGE_LEN {
                    let ch = Challenge::parse(&challenge.clone().try_into().unwrap()).unwrap();
                    c.write_all(&answer(ch.nonce)).unwrap();
                }
            }
        }
    }
}

/// Rank 1: answers what rank 0 drives. `control` is the pipe rank 0 uses to release it from
/// its pause (EOF means rank 0 is gone).
fn rank1(dir: &Path, control: &mut dyn BufRead) {
    let mut r = Rank::new(dir, 1);
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
    // Strangers knock while we serve; then the job goes on.
    r.expect(STRANGERS);
    r.send(PONG, b"still here");
    r.stream();
    // Stop reading until rank 0 has seen everything fill up.
    r.send(PAUSED, &[]);
    r.drain_completions();
    let mut line = String::new();
    control.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "go", "rank 0 went away during the pause");
    let (mut copies, mut refs) = (0u64, 0u64);
    loop {
        let (tag, data) = r.recv();
        match tag {
            FILLED => {
                assert_eq!(data, [copies.to_ne_bytes(), refs.to_ne_bytes()].concat());
                break;
            }
            FILL => {
                assert!(data == pattern(5000 + copies, 60_000), "fill copy {copies}");
                copies += 1;
            }
            FILLREF => {
                assert!(
                    data == pattern(900_000 + refs, MAX),
                    "fill reference {refs}"
                );
                refs += 1;
            }
            t => panic!("unexpected kind {t} while draining the fill"),
        }
    }
    // Bulk: count and check. The progress call that brought FILLED may have queued the first
    // bulk fragments already.
    r.inbox.bulk = true;
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
    r.drain_completions();
    r.m.finalize();
}

/// What rank 0 measured.
struct Figures {
    half_rtt_ns: f64,
    bulk_mbs: f64,
    filled: u32,
}

/// Rank 0: drives the exchange.
fn rank0(dir: &Path, child: &mut Child, control: &mut ChildStdin) -> Figures {
    let t0 = Instant::now();
    let mut r = Rank::new(dir, 0);
    r.watch = Some(child);

    for &len in &ping_sizes() {
        let data = pattern(len as u64, len);
        r.send(PING, &data);
        assert!(r.expect(PONG) == data, "pong of {len} bytes differs");
    }
    r.drain_completions();
    eprintln!(
        "tcp_two_process: size sweep done after {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    for i in 0..LAT {
        r.send(PING, &(i as u64).to_ne_bytes());
        assert_eq!(r.expect(PONG), (i as u64).to_ne_bytes());
    }
    let half_rtt_ns = start.elapsed().as_nanos() as f64 / LAT as f64 / 2.0;

    // Strangers at rank 1's door: its address is in the modex.
    let mut b = [0u8; 8];
    let mut modex = FileModex {
        dir: dir.to_path_buf(),
        me: 0,
    };
    let n = modex.get(ProcId(1), "btl.tcp.0", &mut b).unwrap().unwrap();
    let rec = AddrRecord::parse(&b[..n]).unwrap();
    let addr = SocketAddrV4::new(rec.addr, rec.port);
    let mut secret = [0u8; 32];
    assert_eq!(
        modex.get(ProcId(0), "btl.tcp.secret", &mut secret).unwrap(),
        Some(32)
    );
    let secret = Key::from_bytes(secret);
    let hs = |key: &Key, from, theirs: Nonce| {
        Handshake {
            nonce: Nonce([7; 16]),
            from,
            to: 1,
            max_frag: MAX as u32,
            follows: false,
            proof: [0; 32],
        }
        .sign(key, CONNECT, &theirs)
        .to_bytes()
        .to_vec()
    };
    r.send(STRANGERS, &[]);
    stranger(&mut r, addr, |n| hs(&Key::from_bytes([0xee; 32]), 0, n));
    stranger(&mut r, addr, |n| hs(&secret, 5, n));
    stranger(&mut r, addr, |_| {
        b"\x16\x03\x01 hello, is this TLS?".to_vec()
    });
    stranger(&mut r, addr, |_| Vec::new());
    assert_eq!(r.expect(PONG), b"still here");

    let stalls_before = r.stalls;
    r.stream();
    eprintln!(
        "tcp_two_process: ping-pong, strangers and stream done after {:.2} s, {} send stalls in \
         the stream",
        t0.elapsed().as_secs_f64(),
        r.stalls - stalls_before
    );

    // Back-pressure: rank 1 is not reading; send (copied and zero-copy in turn) until nothing
    // is taken for a while: the queues and the kernel's buffers are full.
    r.expect(PAUSED);
    let (mut copies, mut refs) = (0u64, 0u64);
    let mut last_taken = Instant::now();
    while last_taken.elapsed() < Duration::from_millis(300) {
        r.check_time("filling the connection");
        r.progress();
        if r.try_send(FILL, &pattern(5000 + copies, 60_000)) {
            copies += 1;
            last_taken = Instant::now();
        }
        if r.try_send(FILLREF, &pattern(900_000 + refs, MAX)) {
            refs += 1;
            last_taken = Instant::now();
        }
        assert!(copies + refs < 100_000, "no back-pressure after 6 GB");
    }
    // Nothing was taken for 300 ms of progress: both kinds were refused all along (the kernel
    // may still find a little room later, e.g. by compacting its receive queue, so a longer
    // look would be flaky).
    assert!(
        copies > 0 && refs > 0,
        "both kinds were taken before the fill"
    );
    assert!(!r.lent.is_empty(), "zero-copy sends wait for the reader");
    let filled = (copies + refs) as u32;
    eprintln!("tcp_two_process: the fill took {copies} copied and {refs} zero-copy fragments");
    control.write_all(b"go\n").unwrap();
    control.flush().unwrap();
    r.send(FILLED, &[copies.to_ne_bytes(), refs.to_ne_bytes()].concat());
    r.drain_completions();

    // Throughput of 128 KiB zero-copy fragments, one way, straight from one buffer.
    let mut src = vec![0x5a; MAX];
    src[..HDR].fill(0);
    let start = Instant::now();
    let mut sent = 0;
    let mut pending = 0u64;
    while sent < BULK {
        // SAFETY: `src` outlives the loop and every completion (awaited below).
        let data = unsafe { DataRef::new(src.as_ptr().add(HDR), MAX - HDR) };
        match r
            .m
            .send_ref(r.ep, AmTag(BULKDATA), &src[..HDR], data, Token(u64::MAX))
        {
            Some(Sent::Done) => sent += 1,
            Some(Sent::Pending) => {
                sent += 1;
                pending += 1;
            }
            None => {
                r.check_time("sending bulk data");
                let n = r.m.progress(&mut r.inbox);
                pending -= r.inbox.completed.drain(..).count() as u64;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
        }
    }
    // Rank 1 exits right after DONE: stop watching it, or its exit could beat our next look.
    r.watch = None;
    while pending > 0 || r.inbox.queue.is_empty() {
        r.check_time("waiting for the bulk data to arrive");
        r.m.progress(&mut r.inbox);
        pending -= r.inbox.completed.drain(..).count() as u64;
    }
    assert_eq!(r.expect(DONE), b"");
    let secs = start.elapsed().as_secs_f64();
    r.m.finalize();
    Figures {
        half_rtt_ns,
        bulk_mbs: BULK as f64 * MAX as f64 / secs / 1e6,
        filled,
    }
}

/// Kills rank 1 and removes the scratch directory however the test ends.
struct Cleanup {
    dir: PathBuf,
    child: Option<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn two_processes_through_tcp() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!("stormpi-tcptest-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).unwrap();
    let mut guard = Cleanup {
        dir: dir.clone(),
        child: None,
    };
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["peer_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_VAR, "1")
        .env(DIR_VAR, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = guard.child.insert(child);
    // Rank 1's log, collected (and echoed) by a thread so the pipe never fills.
    let log = Arc::new(Mutex::new(String::new()));
    let reader = {
        let log = Arc::clone(&log);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                eprintln!("[rank 1] {line}");
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        })
    };
    let mut control = child.stdin.take().unwrap();
    let started = Instant::now();
    let f = rank0(&dir, child, &mut control);
    drop(control);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < LIMIT, "rank 1 did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    guard.child = None;
    reader.join().unwrap();
    assert!(status.success(), "rank 1 failed: {status}");
    let log = log.lock().unwrap();
    for reason in [
        "wrong proof of the job secret",
        "unknown rank 5",
        "bad magic",
        "no handshake in time",
    ] {
        assert!(
            log.lines().any(|l| l.contains("stormpi: tcp")
                && l.contains("rejected")
                && l.contains(reason)),
            "rank 1 did not log a rejection for '{reason}'; its log:\n{log}"
        );
    }
    eprintln!(
        "tcp_two_process: 8-byte ping-pong {:.2} us one way (half round trip, test sink with \
         allocation); {} fragments taken before back-pressure; {BULK} zero-copy fragments of 128 \
         KiB one way: {:.0} MB/s ({} build); whole test {:.2} s",
        f.half_rtt_ns / 1e3,
        f.filled,
        f.bulk_mbs,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        started.elapsed().as_secs_f64()
    );
}

/// Rank 1 of `two_processes_through_tcp` when started by it; does nothing otherwise.
#[test]
fn peer_process() {
    if std::env::var(ROLE_VAR).as_deref() != Ok("1") {
        return;
    }
    let dir = PathBuf::from(std::env::var_os(DIR_VAR).expect("scratch directory"));
    let mut control = BufReader::new(std::io::stdin());
    rank1(&dir, &mut control);
}
