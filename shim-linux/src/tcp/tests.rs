//! Several `Tcp` modules in one process, over loopback, with an in-memory modex.

use super::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use stormpi_core::btl::Delivery;

/// The job's modex: what each rank published.
#[derive(Default)]
struct Kv(HashMap<(u32, String), Vec<u8>>);

struct Put<'a>(&'a mut Kv, u32);
impl ModexPut for Put<'_> {
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.0 .0.insert((self.1, key.to_string()), value.to_vec());
        Ok(())
    }
}
impl Modex for Kv {
    fn get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        Ok(self.0.get(&(proc.0, key.to_string())).map(|v| {
            let n = v.len().min(out.len());
            out[..n].copy_from_slice(&v[..n]);
            n
        }))
    }
}

#[derive(Default)]
struct Collect {
    got: Vec<(u32, u8, Vec<u8>)>,
    done: Vec<(u64, bool)>,
    refuse: bool,
    /// Refuse this fragment once when it is offered.
    refuse_once: Option<Vec<u8>>,
}

impl Sink for Collect {
    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
        if self.refuse || self.refuse_once.as_deref() == Some(frag) {
            self.refuse_once = None;
            return Delivery::Retry;
        }
        self.got.push((from.0, tag.0, frag.to_vec()));
        Delivery::Consumed
    }
    fn completed(&mut self, token: Token, result: Result<()>) {
        self.done.push((token.0, result.is_ok()));
    }
}

fn params(set: &[(&str, &str)]) -> Params {
    let mut p = Params::new(&[]);
    p.register_all(&PARAMS).unwrap();
    for (k, v) in set {
        p.set(k, v).unwrap();
    }
    p
}

fn lo() -> Interface {
    Interface {
        name: "lo".into(),
        addr: Ipv4Addr::LOCALHOST,
        prefix: 8,
        up: true,
        loopback: true,
    }
}

fn table(nodes: &[u32]) -> Vec<PeerInfo> {
    nodes
        .iter()
        .enumerate()
        .map(|(r, &node)| PeerInfo {
            proc: ProcId(r as u32),
            arch: None,
            node,
        })
        .collect()
}

/// A job of `nodes.len()` ranks with one loopback module each.
fn job(nodes: &[u32], p: &Params) -> (Vec<Tcp>, Vec<Vec<Option<Endpoint>>>, Kv) {
    let mut kv = Kv::default();
    let secret = Key::generate().unwrap();
    let mut mods: Vec<Tcp> = (0..nodes.len())
        .map(|r| {
            let s = (r == 0).then(|| secret.clone());
            Tcp::new(p, lo(), ProcId(r as u32), 0, 1, s).unwrap()
        })
        .collect();
    for (r, m) in mods.iter_mut().enumerate() {
        m.publish(&mut Put(&mut kv, r as u32)).unwrap();
    }
    let eps = mods
        .iter_mut()
        .map(|m| {
            let mut eps = vec![None; nodes.len()];
            m.add_procs(&table(nodes), &mut kv, &mut eps).unwrap();
            eps
        })
        .collect();
    (mods, eps, kv)
}

fn send(m: &mut Tcp, ep: Endpoint, tag: u8, data: &[u8]) -> bool {
    match m.reserve(ep, data.len()) {
        Some(space) => {
            space.copy_from_slice(data);
            m.commit(ep, AmTag(tag), data.len());
            true
        }
        None => false,
    }
}

/// Progresses every module until `done` says so (bounded).
fn run(mods: &mut [Tcp], sinks: &mut [Collect], mut done: impl FnMut(&[Collect]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(sinks) {
        assert!(Instant::now() < deadline, "timed out");
        for (m, s) in mods.iter_mut().zip(sinks.iter_mut()) {
            m.progress(s);
        }
    }
}

fn sinks(n: usize) -> Vec<Collect> {
    (0..n).map(|_| Collect::default()).collect()
}

#[test]
fn attrs_publish_and_endpoints() {
    let p = params(&[]);
    let (mods, eps, kv) = job(&[0, 0, 0], &p);
    let a = mods[1].attrs();
    assert_eq!(
        (a.component, a.eager_limit, a.max_send_size, a.exclusivity),
        ("tcp", 64 << 10, 512 << 10, 100)
    );
    assert!(a.flags.contains(BtlFlags::SEND.union(BtlFlags::SEND_REF)));
    assert_eq!((a.latency_ns, a.bandwidth_mbps), (20_000, 10_000));
    // Rank 1: itself unreachable, ranks 0 and 2 through endpoints 0 and 1.
    assert_eq!(eps[1], [Some(Endpoint(0)), None, Some(Endpoint(1))]);
    let rec = &kv.0[&(2, "btl.tcp.0".to_string())];
    let port = mods[2].local_addr().port().to_be_bytes();
    assert_eq!(rec[..], [1, 8, port[0], port[1], 127, 0, 0, 1]);
    assert_eq!(kv.0[&(0, "btl.tcp.count".to_string())], [0, 0, 0, 1]);
    assert_eq!(kv.0[&(0, "btl.tcp.secret".to_string())].len(), 32);
    assert!(!kv.0.contains_key(&(1, "btl.tcp.secret".to_string())));
}

#[test]
fn parameters_set_limits_and_per_interface_figures() {
    let p = params(&[
        ("btl_tcp_eager_limit", "200k"),
        ("btl_tcp_max_send_size", "100k"),
        ("btl_tcp_bandwidth", "eth0:5,lo:400"),
        ("btl_tcp_latency", "777"),
    ]);
    let m = Tcp::new(&p, lo(), ProcId(0), 0, 1, None).unwrap();
    let a = m.attrs();
    assert_eq!((a.eager_limit, a.max_send_size), (100 << 10, 100 << 10));
    assert_eq!((a.bandwidth_mbps, a.latency_ns), (400, 777));
    let bad = params(&[("btl_tcp_bandwidth", "lo:fast")]);
    assert!(Tcp::new(&bad, lo(), ProcId(0), 0, 1, None).is_err());
}

#[test]
fn reachability_follows_subnets_nodes_and_the_modex() {
    let p = params(&[]);
    let (mut mods, _, mut kv) = job(&[0, 0, 0, 0, 0, 1], &p);
    // Rank 2 published an address in another subnet, rank 3 a malformed one, rank 4 nothing;
    // rank 5 is loopback on another node.
    kv.0.insert((2, "btl.tcp.0".into()), vec![1, 24, 0, 80, 10, 0, 0, 1]);
    kv.0.insert((3, "btl.tcp.0".into()), vec![9, 9, 9]);
    kv.0.remove(&(4, "btl.tcp.count".to_string()));
    let mut m = Tcp::new(&p, lo(), ProcId(1), 0, 1, None).unwrap();
    let mut eps = vec![None; 6];
    m.add_procs(&table(&[0, 0, 0, 0, 0, 1]), &mut kv, &mut eps)
        .unwrap();
    assert_eq!(eps, [Some(Endpoint(0)), None, None, None, None, None]);
    // A second address that is in the subnet is found behind the first.
    kv.0.insert((2, "btl.tcp.count".into()), vec![0, 0, 0, 2]);
    let rec = AddrRecord {
        addr: Ipv4Addr::LOCALHOST,
        prefix: 8,
        port: mods[2].local_addr().port(),
    };
    kv.0.insert((2, "btl.tcp.1".into()), rec.to_bytes().to_vec());
    let mut m = Tcp::new(&p, lo(), ProcId(1), 0, 1, None).unwrap();
    m.add_procs(&table(&[0, 0, 0, 0, 0, 1]), &mut kv, &mut eps)
        .unwrap();
    assert_eq!(
        eps,
        [Some(Endpoint(0)), None, Some(Endpoint(1)), None, None, None]
    );
    // Without rank 0's secret nobody is reachable.
    kv.0.remove(&(0, "btl.tcp.secret".to_string()));
    let mut m = Tcp::new(&p, lo(), ProcId(1), 0, 1, None).unwrap();
    m.add_procs(&table(&[0, 0, 0, 0, 0, 1]), &mut kv, &mut eps)
        .unwrap();
    assert!(eps.iter().all(Option::is_none));
    assert!(m.add_procs(&table(&[0; 6]), &mut kv, &mut eps).is_err());
    for m in &mut mods {
        m.finalize();
    }
}

#[test]
fn fragments_both_ways_with_zero_copy_completions() {
    let p = params(&[("btl_tcp_max_send_size", "64k")]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let (to1, to0) = (eps[0][1].unwrap(), eps[1][0].unwrap());
    let mut s = sinks(2);
    let big: Vec<u8> = (0..60_000u32).map(|i| (i * 31) as u8).collect();
    let sizes = [0usize, 1, 7, 8, 100, 4095, 4096, 30_000, 65536];
    for (i, &n) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..n).map(|k| (k + i) as u8).collect();
        assert!(send(&mut mods[0], to1, i as u8, &data));
        assert!(send(&mut mods[1], to0, 100 + i as u8, &data));
    }
    // SAFETY: `big` outlives the sends (their completions are awaited below).
    let r = unsafe { DataRef::new(big.as_ptr(), big.len()) };
    let mut pending = 0;
    for t in 0..5u64 {
        match mods[0].send_ref(to1, AmTag(50), &[t as u8; 24], r, Token(t)) {
            Some(Sent::Pending) => pending += 1,
            Some(Sent::Done) => {}
            None => panic!("the queue is empty enough"),
        }
    }
    run(&mut mods, &mut s, |s| {
        s[1].got.len() == sizes.len() + 5
            && s[0].got.len() == sizes.len()
            && s[0].done.len() == pending
    });
    for (i, &n) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..n).map(|k| (k + i) as u8).collect();
        assert_eq!(s[1].got[i], (0, i as u8, data.clone()));
        assert_eq!(s[0].got[i], (1, 100 + i as u8, data));
    }
    for t in 0..5usize {
        let (from, tag, f) = &s[1].got[sizes.len() + t];
        assert_eq!((*from, *tag), (0, 50));
        assert_eq!(f[..24], [t as u8; 24]);
        assert!(f[24..] == big[..], "zero-copy payload {t}");
    }
    assert!(s[0].done.iter().all(|(_, ok)| *ok));
    for m in &mut mods {
        m.finalize();
    }
}

#[test]
fn retry_is_back_pressure_and_nothing_is_lost() {
    let p = params(&[
        ("btl_tcp_max_send_size", "16k"),
        ("btl_tcp_sndbuf", "64k"),
        ("btl_tcp_rcvbuf", "64k"),
        ("btl_tcp_send_buffer", "64k"),
        ("btl_tcp_send_queue", "4"),
    ]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let to1 = eps[0][1].unwrap();
    let mut s = sinks(2);
    s[1].refuse = true;
    let frag = |i: u32| -> Vec<u8> { (0..16_000u32).map(|k| (k ^ i) as u8).collect() };
    let payload: Vec<Vec<u8>> = (0..10_000).map(|i| frag(i + 1_000_000)).collect();
    // Copies and references in turn until neither is taken for a while: the ring, the
    // reference queue and both socket buffers are full.
    let mut order: Vec<(bool, usize)> = Vec::new();
    let (mut sent, mut refs, mut pending) = (0usize, 0usize, 0usize);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last_taken = Instant::now();
    while last_taken.elapsed() < Duration::from_millis(200) {
        assert!(Instant::now() < deadline, "never pushed back");
        assert!(order.len() < 10_000, "no back-pressure after 160 MB");
        for (m, sk) in mods.iter_mut().zip(s.iter_mut()) {
            m.progress(sk);
        }
        if send(&mut mods[0], to1, 1, &frag(sent as u32)) {
            order.push((false, sent));
            sent += 1;
            last_taken = Instant::now();
        }
        // SAFETY: `payload` outlives every send (completions are awaited below).
        let r = unsafe { DataRef::new(payload[refs].as_ptr(), payload[refs].len()) };
        if let Some(done) = mods[0].send_ref(to1, AmTag(2), &[], r, Token(refs as u64)) {
            pending += usize::from(done == Sent::Pending);
            order.push((true, refs));
            refs += 1;
            last_taken = Instant::now();
        }
    }
    assert!(sent > 0 && refs > 0);
    // Still refused while the receiver refuses.
    let until = Instant::now() + Duration::from_millis(100);
    while Instant::now() < until {
        for (m, sk) in mods.iter_mut().zip(s.iter_mut()) {
            m.progress(sk);
        }
        assert!(mods[0].reserve(to1, 16_000).is_none());
    }
    assert!(s[1].got.is_empty());
    s[1].refuse = false;
    run(&mut mods, &mut s, |s| s[1].got.len() == order.len());
    for (i, ((_, tag, f), &(is_ref, k))) in s[1].got.iter().zip(&order).enumerate() {
        if is_ref {
            assert_eq!(*tag, 2);
            assert!(*f == payload[k], "fragment {i}: zero-copy {k}");
        } else {
            assert_eq!(*tag, 1);
            assert!(*f == frag(k as u32), "fragment {i}: copy {k}");
        }
    }
    assert!(pending > 0, "the socket was full: references had to wait");
    run(&mut mods, &mut s, |s| s[0].done.len() == pending);
    assert!(s[0].done.iter().all(|(_, ok)| *ok));
    for m in &mut mods {
        m.finalize();
    }
}

/// Connects to `addr`, reads the module's challenge, and sends what `answer` makes of its nonce;
/// returns whether the module closed the connection.
fn stranger(
    addr: SocketAddrV4,
    answer: impl Fn(Nonce) -> Vec<u8>,
    mods: &mut [Tcp],
    s: &mut [Collect],
) -> bool {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut challenge = Vec::new();
    let mut answered = false;
    loop {
        for (m, sk) in mods.iter_mut().zip(s.iter_mut()) {
            m.progress(sk);
        }
        let mut b = [0u8; CHALLENGE_LEN];
        let want = CHALLENGE_LEN - challenge.len();
        match c.read(&mut b[..want.max(1)]) {
            Ok(0) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return true,
            Ok(_) if want == 0 => panic!("the module writes nothing after its challenge"),
            Ok(n) => challenge.extend_from_slice(&b[..n]),
        }
        if challenge.len() == CHALLENGE_LEN && !answered {
            let ch = Challenge::parse(&challenge.clone().try_into().unwrap()).unwrap();
            c.write_all(&answer(ch.nonce)).unwrap();
            answered = true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

#[test]
fn strangers_are_turned_away_and_the_job_goes_on() {
    let p = params(&[("btl_tcp_connect_timeout", "300")]);
    let (mut mods, eps, kv) = job(&[0, 0], &p);
    let addr1 = mods[1].local_addr();
    let secret = Key::from_bytes(
        kv.0[&(0, "btl.tcp.secret".to_string())][..]
            .try_into()
            .unwrap(),
    );
    let mut s = sinks(2);
    let mine = Nonce([5; 16]);
    // A handshake from `from` to `to` with the proof `key` gives over `their` nonce.
    let hs = |key: &Key, from, to, their: Nonce| {
        Handshake {
            nonce: mine,
            from,
            to,
            max_frag: 512 << 10,
            follows: false,
            proof: [0; 32],
        }
        .sign(key, wire::CONNECT, &their)
        .to_bytes()
        .to_vec()
    };
    let wrong = Key::from_bytes([0; 32]);
    // Wrong secret, a proof over another nonce (a replay), the acceptor's role, unknown rank,
    // addressed to another rank, garbage, too large fragments, silence: each is closed.
    assert!(stranger(addr1, |n| hs(&wrong, 0, 1, n), &mut mods, &mut s));
    assert!(stranger(
        addr1,
        |_| hs(&secret, 0, 1, Nonce([1; 16])),
        &mut mods,
        &mut s
    ));
    let as_answer = |n| {
        let mut h = Handshake::parse(&hs(&secret, 0, 1, n).try_into().unwrap()).unwrap();
        h = h.sign(&secret, wire::ANSWER, &n);
        h.to_bytes().to_vec()
    };
    assert!(stranger(addr1, as_answer, &mut mods, &mut s));
    assert!(stranger(addr1, |n| hs(&secret, 7, 1, n), &mut mods, &mut s));
    assert!(stranger(addr1, |n| hs(&secret, 0, 0, n), &mut mods, &mut s));
    assert!(stranger(
        addr1,
        |_| b"GET / HTTP/1.0\r\n\r\n".to_vec(),
        &mut mods,
        &mut s
    ));
    let big = |n| {
        let mut h = Handshake::parse(&hs(&secret, 0, 1, n).try_into().unwrap()).unwrap();
        h.max_frag = 1 << 20;
        h.sign(&secret, wire::CONNECT, &n).to_bytes().to_vec()
    };
    assert!(stranger(addr1, big, &mut mods, &mut s));
    assert!(
        stranger(addr1, |_| Vec::new(), &mut mods, &mut s),
        "silence outlives the deadline"
    );
    assert_eq!(mods[1].connections(), (0, 0));
    assert!(s[1].got.is_empty());
    // The real exchange works.
    assert!(send(&mut mods[0], eps[0][1].unwrap(), 9, b"real"));
    run(&mut mods, &mut s, |s| !s[1].got.is_empty());
    assert_eq!(s[1].got, [(0, 9, b"real".to_vec())]);
    // A second connection proving it is rank 0 is refused (it is connected already).
    assert!(stranger(addr1, |n| hs(&secret, 0, 1, n), &mut mods, &mut s));
    assert!(send(&mut mods[0], eps[0][1].unwrap(), 9, b"again"));
    run(&mut mods, &mut s, |s| s[1].got.len() == 2);
    for m in &mut mods {
        m.finalize();
    }
}

/// A sender that is not in progress while its peer challenges it loses nothing: the peer gives
/// up on the connection after `btl_tcp_connect_timeout`, and the sender, finding the challenge
/// followed by the end of the connection, opens another with the same frames.
#[test]
fn a_sender_late_for_its_handshake_connects_again() {
    let p = params(&[("btl_tcp_connect_timeout", "200")]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let mut s = sinks(2);
    assert!(send(&mut mods[0], eps[0][1].unwrap(), 9, b"patient"));
    // Rank 0 computes; rank 1 accepts, challenges, waits, gives up.
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        mods[1].progress(&mut s[1]);
    }
    assert_eq!(mods[1].connections(), (0, 0));
    run(&mut mods, &mut s, |s| !s[1].got.is_empty());
    assert_eq!(s[1].got, [(0, 9, b"patient".to_vec())]);
    assert_eq!(mods[0].peers[0].reopens, 1);
    for m in &mut mods {
        m.finalize();
    }
}

/// 200 connections that send nothing, held open to a rank's listener, do not delay its peer's
/// first contact: with the handshake deadline at a minute, the peer used to wait in the listen
/// backlog behind them until the deadline (the test's 20 s bound fails then).
#[test]
fn idle_connections_do_not_delay_real_peers() {
    let p = params(&[("btl_tcp_connect_timeout", "60000")]);
    let (mut mods, eps, _kv) = job(&[0, 0], &p);
    let addr1 = mods[1].local_addr();
    let mut s = sinks(2);
    let idle: Vec<_> = (0..200)
        .map(|_| std::net::TcpStream::connect(addr1).unwrap())
        .collect();
    for _ in 0..50 {
        mods[1].progress(&mut s[1]);
    }
    assert!(send(&mut mods[0], eps[0][1].unwrap(), 9, b"real"));
    run(&mut mods, &mut s, |s| !s[1].got.is_empty());
    assert_eq!(s[1].got, [(0, 9, b"real".to_vec())]);
    drop(idle);
    for m in &mut mods {
        m.finalize();
    }
}

#[test]
fn finalize_flushes_what_is_queued() {
    let p = params(&[("btl_tcp_sndbuf", "16k"), ("btl_tcp_rcvbuf", "16k")]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let to1 = eps[0][1].unwrap();
    let mut m0 = mods.remove(0);
    let mut m1 = mods.remove(0);
    // More than the socket buffers hold, then finalize at once (before any progress of ours).
    let mut n = 0u32;
    while n < 20 && send(&mut m0, to1, 1, &[n as u8; 60_000]) {
        n += 1;
    }
    assert!(n >= 4);
    let reader = std::thread::spawn(move || {
        let mut s = Collect::default();
        let deadline = Instant::now() + Duration::from_secs(20);
        while (s.got.len() as u32) < n {
            assert!(Instant::now() < deadline, "fragments lost at finalize");
            m1.progress(&mut s);
        }
        m1.finalize();
        s
    });
    m0.finalize();
    let s = reader.join().unwrap();
    for (i, (_, _, f)) in s.got.iter().enumerate() {
        assert!(*f == [i as u8; 60_000], "fragment {i}");
    }
}

#[test]
fn modules_follow_the_include_list() {
    let p = params(&[("btl_tcp_if_include", "lo")]);
    let mods = modules(&p, ProcId(0), 8).unwrap();
    assert_eq!(mods.len(), 1);
    assert_eq!(mods[0].interface().name, "lo");
    assert!(mods[0].own_secret.is_some());
    let mods = modules(&p, ProcId(3), 8).unwrap();
    assert!(mods[0].own_secret.is_none());
    let none = params(&[("btl_tcp_if_include", "no-such-if")]);
    assert!(modules(&none, ProcId(0), 8).unwrap().is_empty());
    let bad = params(&[("btl_tcp_if_exclude", "10.0.0.0/40")]);
    assert!(modules(&bad, ProcId(0), 8).is_err());
    assert!(modules(&p, ProcId(0), 0).unwrap().is_empty());
}

#[test]
fn an_answer_rides_on_the_peer_connection() {
    let p = params(&[]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let (to1, to0) = (eps[0][1].unwrap(), eps[1][0].unwrap());
    let mut s = sinks(2);
    assert!(send(&mut mods[0], to1, 1, b"ping"));
    run(&mut mods, &mut s, |s| !s[1].got.is_empty());
    for i in 0..50u8 {
        assert!(send(&mut mods[1], to0, 2, &[i; 3000]));
        assert!(send(&mut mods[0], to1, 1, &[i; 10]));
    }
    run(&mut mods, &mut s, |s| {
        s[0].got.len() == 50 && s[1].got.len() == 51
    });
    for i in 0..50usize {
        assert_eq!(s[0].got[i], (1, 2, vec![i as u8; 3000]));
        assert_eq!(s[1].got[i + 1], (0, 1, vec![i as u8; 10]));
    }
    // One connection in all, used both ways.
    assert_eq!(mods[0].connections(), (1, 0));
    assert_eq!(mods[1].connections(), (0, 1));
    for m in &mut mods {
        m.finalize();
    }
}

#[test]
fn two_that_start_at_once_settle_on_one_connection_in_order() {
    let p = params(&[]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let (to1, to0) = (eps[0][1].unwrap(), eps[1][0].unwrap());
    let mut s = sinks(2);
    // Both send before either has seen the other's connection: a connection each.
    for i in 0..20u8 {
        assert!(send(&mut mods[0], to1, 1, &[i; 1000]));
        assert!(send(&mut mods[1], to0, 2, &[i; 1000]));
    }
    // Each challenges the other's connection, and each proves itself on its own. Rank 0 takes
    // no frame yet. Rank 1 accepts rank 0's connection, moves over to it (the lower rank's) and
    // retires its own once that is written.
    s[0].refuse = true;
    let deadline = Instant::now() + Duration::from_secs(20);
    while mods[1].connections() != (0, 1) || s[1].got.len() < 20 {
        assert!(Instant::now() < deadline, "rank 1 kept its own connection");
        mods[1].progress(&mut s[1]);
        mods[0].progress(&mut s[0]);
    }
    assert!(s[0].got.is_empty());
    for i in 20..40u8 {
        assert!(send(&mut mods[1], to0, 2, &[i; 1000]));
    }
    // Rank 0 now takes both: the old connection (20 frames and its end) and rank 1's answer on
    // its own with 20 more. The first frame of the old one is refused once, so whichever
    // connection rank 0 looks at first, the new path is seen while the old one still holds
    // frames: they must wait.
    s[0].refuse = false;
    s[0].refuse_once = Some(vec![0; 1000]);
    run(&mut mods, &mut s, |s| s[0].got.len() == 40);
    // (sender, tag, the byte the frame is filled with) in arrival order.
    let seen = |got: &[(u32, u8, Vec<u8>)]| -> Vec<(u32, u8, u8)> {
        got.iter().map(|(f, t, d)| (*f, *t, d[0])).collect()
    };
    let want =
        |from, tag, n: u8| -> Vec<(u32, u8, u8)> { (0..n).map(|i| (from, tag, i)).collect() };
    assert_eq!(
        seen(&s[0].got),
        want(1, 2, 40),
        "frames to rank 0 out of order"
    );
    assert_eq!(
        seen(&s[1].got),
        want(0, 1, 20),
        "frames to rank 1 out of order"
    );
    assert!(s[0]
        .got
        .iter()
        .chain(&s[1].got)
        .all(|(_, _, d)| d.len() == 1000));
    let deadline = Instant::now() + Duration::from_secs(10);
    while mods[0].connections() != (1, 0) {
        assert!(
            Instant::now() < deadline,
            "rank 0 still has rank 1's old connection"
        );
        for (m, sk) in mods.iter_mut().zip(s.iter_mut()) {
            m.progress(sk);
        }
    }
    // Both ways on one connection from now on.
    assert!(send(&mut mods[0], to1, 1, b"after"));
    assert!(send(&mut mods[1], to0, 2, b"after"));
    run(&mut mods, &mut s, |s| {
        s[0].got.len() == 41 && s[1].got.len() == 21
    });
    assert_eq!(mods[0].connections(), (1, 0));
    assert_eq!(mods[1].connections(), (0, 1));
    for m in &mut mods {
        m.finalize();
    }
}

#[test]
fn an_answer_with_a_wrong_handshake_ends_the_connection() {
    let p = params(&[]);
    let (mut mods, eps, _) = job(&[0, 0], &p);
    let mut s = sinks(2);
    // A fake rank 1: a listener that accepts rank 0's connection and answers as rank 5.
    let fake = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let std::net::SocketAddr::V4(fake_addr) = fake.local_addr().unwrap() else {
        unreachable!()
    };
    mods[0].peers[0].addr = fake_addr;
    let to1 = eps[0][1].unwrap();
    assert!(send(&mut mods[0], to1, 1, b"hello"));
    let (mut c, _) = fake.accept().unwrap();
    c.write_all(
        &Challenge {
            nonce: Nonce([4; 16]),
        }
        .to_bytes(),
    )
    .unwrap();
    let mut hs = [0u8; HANDSHAKE_LEN];
    let deadline = Instant::now() + Duration::from_secs(10);
    c.set_nonblocking(true).unwrap();
    let mut got = 0;
    while got < HANDSHAKE_LEN {
        assert!(
            Instant::now() < deadline,
            "no handshake after the challenge"
        );
        mods[0].progress(&mut s[0]);
        match c.read(&mut hs[got..]) {
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    let mine = Handshake::parse(&hs).unwrap();
    assert_eq!((mine.from, mine.to), (0, 1));
    let answer = Handshake {
        from: 5,
        to: 0,
        ..mine
    };
    c.write_all(&answer.to_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mods[0].connections() != (0, 0) {
        assert!(Instant::now() < deadline, "the bad answer was accepted");
        mods[0].progress(&mut s[0]);
    }
    assert!(s[0].got.is_empty());
    // Sending to rank 1 now fails (the connection ended), without a panic.
    assert!(mods[0].reserve(to1, 10).is_none());
    for m in &mut mods {
        m.finalize();
    }
}
