//! Two or three `Sm` modules in one process, talking through real segment files.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};
use stormpi_core::arch::{ArchInfo, Endian};
use stormpi_core::btl::Delivery;

struct NoModex;
impl Modex for NoModex {
    fn get(&mut self, _: ProcId, _: &str, _: &mut [u8]) -> Result<Option<usize>> {
        Ok(None)
    }
}

#[derive(Default)]
struct Collect {
    got: Vec<(u32, u8, Vec<u8>)>,
    refuse: bool,
}

impl Sink for Collect {
    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
        if self.refuse {
            return Delivery::Retry;
        }
        self.got.push((from.0, tag.0, frag.to_vec()));
        Delivery::Consumed
    }
}

/// A job id unique to this test, and removal of its files however the test ends.
struct Job(String);

impl Job {
    fn new() -> Job {
        static N: AtomicU32 = AtomicU32::new(0);
        Job(format!(
            "unit{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn path(&self, rank: u32) -> PathBuf {
        PathBuf::from(format!("/dev/shm/stormpi-{}-sm-{rank}", self.0))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let prefix = format!("stormpi-{}-", self.0);
        if let Ok(dir) = std::fs::read_dir("/dev/shm") {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
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

fn table(nodes: &[u32]) -> Vec<PeerInfo> {
    nodes
        .iter()
        .enumerate()
        .map(|(r, &node)| PeerInfo {
            proc: ProcId(r as u32),
            arch: Some(Arch::LOCAL),
            node,
        })
        .collect()
}

fn module(job: &Job, me: u32, nodes: &[u32], p: &Params) -> (Sm, Vec<Option<Endpoint>>) {
    let mut m = Sm::new(p, &job.0, ProcId(me)).unwrap();
    let mut eps = vec![None; nodes.len()];
    m.add_procs(&table(nodes), &mut NoModex, &mut eps).unwrap();
    (m, eps)
}

fn send(m: &mut Sm, ep: Endpoint, tag: u8, data: &[u8]) -> bool {
    match m.reserve(ep, data.len()) {
        Some(space) => {
            space.copy_from_slice(data);
            m.commit(ep, AmTag(tag), data.len());
            true
        }
        None => false,
    }
}

#[test]
fn attrs_and_endpoints_follow_the_node_table() {
    let job = Job::new();
    let p = params(&[]);
    // Ranks 0, 2, 3 on node 5; rank 1 elsewhere. Rank 2 is local index 1.
    let (m, eps) = module(&job, 2, &[5, 9, 5, 5], &p);
    let a = m.attrs();
    assert_eq!(
        (a.component, a.eager_limit, a.max_send_size),
        ("sm", 4096, 65536)
    );
    assert!(a.flags.contains(BtlFlags::SEND) && a.exclusivity > 100 && a.exclusivity < u32::MAX);
    assert_eq!(eps, [Some(Endpoint(0)), None, None, Some(Endpoint(2))]);
    let meta = std::fs::metadata(job.path(2)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Two inbound rings of 1 MiB.
    assert!(meta.len() >= 2 << 20);
}

#[test]
fn alone_on_a_node_creates_nothing() {
    let job = Job::new();
    let (mut m, eps) = module(&job, 1, &[0, 1, 2], &params(&[]));
    assert_eq!(eps, [None, None, None]);
    assert!(!job.path(1).exists());
    assert_eq!(m.progress(&mut Collect::default()), 0);
    m.finalize();
}

#[test]
fn two_modules_exchange_and_clean_up() {
    let job = Job::new();
    let p = params(&[("btl_sm_ring_bytes", "8k"), ("btl_sm_max_send_size", "1k")]);
    let (mut a, ea) = module(&job, 0, &[0, 0], &p);
    let ep_b = ea[1].unwrap();
    // b has not created its segment yet: back-pressure, not an error.
    assert!(a.reserve(ep_b, 10).is_none());
    let (mut b, eb) = module(&job, 1, &[0, 0], &p);
    let ep_a = eb[0].unwrap();
    assert!(send(&mut a, ep_b, 1, b"to b"));
    assert!(send(&mut b, ep_a, 2, b"to a"));
    assert!(send(&mut b, ep_a, 3, &[7; 1024]));
    let mut sa = Collect::default();
    let mut sb = Collect::default();
    assert_eq!(a.progress(&mut sa), 2);
    assert_eq!(b.progress(&mut sb), 1);
    assert_eq!(sb.got, vec![(0, 1, b"to b".to_vec())]);
    assert_eq!(sa.got[0], (1, 2, b"to a".to_vec()));
    assert_eq!(sa.got[1], (1, 3, vec![7; 1024]));

    // Fill a's ring at b until back-pressure; a refusing sink keeps everything in place.
    let mut sent = 0;
    while send(&mut a, ep_b, 4, &[sent as u8; 1000]) {
        sent += 1;
        assert!(sent < 100);
    }
    assert_eq!(sent, 8192 / 1008);
    sb.refuse = true;
    assert_eq!(b.progress(&mut sb), 0);
    assert!(a.reserve(ep_b, 1000).is_none());
    sb.refuse = false;
    sb.got.clear();
    assert_eq!(b.progress(&mut sb), sent);
    assert!(sb
        .got
        .iter()
        .enumerate()
        .all(|(i, g)| g.2 == vec![i as u8; 1000]));
    assert!(send(&mut a, ep_b, 4, &[0; 1000]));

    a.finalize();
    assert!(!job.path(0).exists());
    assert!(job.path(1).exists());
    // After finalize the module is inert.
    assert!(a.reserve(ep_b, 1).is_none());
    assert_eq!(a.progress(&mut sa), 0);
    drop(b);
    // Dropped without finalize: unmapped, file left (the launcher or the test removes it).
    assert!(job.path(1).exists());
}

#[test]
fn a_forged_peer_segment_is_refused_without_harm() {
    let job = Job::new();
    let p = params(&[]);
    // A file where rank 1's segment should be, private and big enough, but not a segment.
    std::fs::write(job.path(1), vec![0xa5u8; 8192]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(job.path(1), std::fs::Permissions::from_mode(0o600)).unwrap();
    let (mut m, eps) = module(&job, 0, &[0, 0], &p);
    let ep = eps[1].unwrap();
    // Not ready (its ready word is not the ready value): back-pressure.
    assert!(m.reserve(ep, 8).is_none());
    // Now it claims to be ready, with garbage everywhere else.
    let mut bytes = vec![0xa5u8; 8192];
    bytes[64..68].copy_from_slice(&0x5245_4459u32.to_ne_bytes());
    std::fs::write(job.path(1), &bytes).unwrap();
    assert!(m.reserve(ep, 8).is_none());
    assert!(matches!(m.peers[1].tx, Tx::Failed { .. }));
    assert!(m.reserve(ep, 8).is_none());
    m.finalize();
}

#[test]
fn a_corrupt_record_stops_that_ring_only() {
    let job = Job::new();
    let p = params(&[("btl_sm_ring_bytes", "8k"), ("btl_sm_max_send_size", "1k")]);
    let (mut a, _) = module(&job, 0, &[0, 0, 0], &p);
    let (mut b, eb) = module(&job, 1, &[0, 0, 0], &p);
    let (mut c, ec) = module(&job, 2, &[0, 0, 0], &p);
    assert!(send(&mut b, eb[0].unwrap(), 1, b"from b"));
    assert!(send(&mut c, ec[0].unwrap(), 1, b"from c"));
    // Rank 1's record in rank 0's segment (ring 0: the data areas, then the collective area,
    // end the file) gets an impossible length, written through the file as a corrupt peer could.
    let geo = a.own.as_ref().unwrap().0.geometry();
    let rec = std::fs::metadata(job.path(0)).unwrap().len()
        - 2 * geo.ring_bytes as u64
        - geo.coll_bytes as u64;
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(job.path(0))
            .unwrap();
        f.write_all_at(&5000u32.to_ne_bytes(), rec).unwrap();
    }
    let mut s = Collect::default();
    assert_eq!(a.progress(&mut s), 1);
    assert_eq!(s.got, vec![(2, 1, b"from c".to_vec())]);
    assert!(send(&mut c, ec[0].unwrap(), 1, b"again"));
    assert_eq!(a.progress(&mut s), 1);
    assert!(a.inbound[0].1.is_broken() && !a.inbound[1].1.is_broken());
    for m in [&mut a, &mut b, &mut c] {
        m.finalize();
    }
}

#[test]
fn bad_arguments_are_errors() {
    let p = params(&[]);
    for job in ["", "a/b", "a b", "..", &"x".repeat(65)] {
        assert!(Sm::new(&p, job, ProcId(0)).is_err(), "{job:?}");
    }
    let small = params(&[
        ("btl_sm_ring_bytes", "64k"),
        ("btl_sm_max_send_size", "64k"),
    ]);
    assert!(Sm::new(&small, "j", ProcId(0)).is_err());
    let job = Job::new();
    let mut m = Sm::new(&p, &job.0, ProcId(5)).unwrap();
    let mut eps = [None; 2];
    assert!(m
        .add_procs(&table(&[0, 0]), &mut NoModex, &mut eps)
        .is_err());
    let mut m = Sm::new(&p, &job.0, ProcId(0)).unwrap();
    assert!(m
        .add_procs(&table(&[0, 0]), &mut NoModex, &mut [None])
        .is_err());
    // A stale file of the same name is a clear error, and is left alone.
    std::fs::write(job.path(0), b"stale").unwrap();
    let e = m
        .add_procs(&table(&[0, 0]), &mut NoModex, &mut eps)
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Other);
    assert_eq!(std::fs::read(job.path(0)).unwrap(), b"stale");
}

#[test]
fn a_peer_of_another_architecture_on_the_node_gets_no_ring() {
    let job = Job::new();
    let p = params(&[]);
    let mut peers = table(&[0, 0, 0]);
    let mut big = ArchInfo::LOCAL;
    big.endian = Endian::Big;
    peers[2].arch = Arch::encode(&big);
    let mut m = Sm::new(&p, &job.0, ProcId(0)).unwrap();
    let mut eps = vec![None; 3];
    m.add_procs(&peers, &mut NoModex, &mut eps).unwrap();
    assert!(eps[1].is_some(), "same architecture: a ring");
    assert!(eps[2].is_none(), "other byte order: left to a network BTL");
}

/// Records completions of gets.
#[derive(Default)]
struct Completions(Vec<(u64, Result<()>)>);

impl Sink for Completions {
    fn deliver(&mut self, _: ProcId, _: AmTag, _: &[u8]) -> Delivery {
        Delivery::Consumed
    }
    fn completed(&mut self, token: Token, result: Result<()>) {
        self.0.push((token.0, result));
    }
}

/// Two modules of one node (in this process, which may read itself with process_vm_readv).
fn pair(job: &Job, p: &Params) -> (Sm, Endpoint, Sm, Endpoint) {
    let (a, ea) = module(job, 0, &[0, 0], p);
    let (b, eb) = module(job, 1, &[0, 0], p);
    (a, ea[1].unwrap(), b, eb[0].unwrap())
}

#[test]
fn a_registered_buffer_is_read_by_single_copy() {
    if cma::probe_self().is_err() {
        eprintln!("SKIPPED: process_vm_readv is not permitted on this machine");
        return;
    }
    let job = Job::new();
    let (mut a, ep_b, mut b, ep_a) = pair(&job, &params(&[("btl_sm_single_copy", "on")]));
    assert!(a.attrs().flags.contains(BtlFlags::GET));
    assert_eq!(a.attrs().get_min, 32 << 10);
    let src: Vec<u8> = (0..3 << 20)
        .map(|i: usize| (i * 7 + i / 251) as u8)
        .collect();
    // SAFETY: `src` outlives the registration and is not written meanwhile.
    let key = a
        .register(ep_b, unsafe { DataRef::new(src.as_ptr(), src.len()) })
        .unwrap();
    let mut dest = vec![0u8; src.len() - 1000];
    // SAFETY: `dest` is ours until the completion is reported.
    let d = unsafe { DestRef::new(dest.as_mut_ptr(), dest.len()) };
    assert!(b.get(ep_a, key, 1000, d, Token(42)));
    let mut sink = Completions::default();
    assert_eq!(b.progress(&mut sink), 1);
    assert_eq!(sink.0.len(), 1);
    assert_eq!(sink.0[0].0, 42);
    assert!(sink.0[0].1.is_ok(), "{:?}", sink.0[0].1);
    assert!(dest == src[1000..]);
    a.deregister(key);
    a.finalize();
    b.finalize();
}

#[test]
fn a_read_of_an_unreadable_address_completes_with_an_error_naming_the_cause() {
    if cma::probe_self().is_err() {
        eprintln!("SKIPPED: process_vm_readv is not permitted on this machine");
        return;
    }
    let job = Job::new();
    let (mut a, _, mut b, ep_a) = pair(&job, &params(&[("btl_sm_single_copy", "on")]));
    let mut dest = vec![0u8; 4096];
    // SAFETY: `dest` is ours until the completion is reported.
    let d = unsafe { DestRef::new(dest.as_mut_ptr(), dest.len()) };
    // Page 1 is never mapped.
    assert!(b.get(ep_a, RemoteKey(4096), 0, d, Token(7)));
    let mut sink = Completions::default();
    b.progress(&mut sink);
    let err = sink.0[0].1.unwrap_err();
    assert!(format!("{err}").contains("EFAULT"), "{err}");
    // A fault is the sender's buffer's, not the kernel's policy: single copy stays on.
    assert!(b.attrs().flags.contains(BtlFlags::GET));
    a.finalize();
    b.finalize();
}

#[test]
fn single_copy_off_neither_offers_nor_reads() {
    let job = Job::new();
    let (mut a, ep_b, mut b, _) = pair(&job, &params(&[("btl_sm_single_copy", "0")]));
    assert!(!a.attrs().flags.contains(BtlFlags::GET));
    let src = [1u8; 64];
    // SAFETY: `src` outlives the call.
    assert!(a
        .register(ep_b, unsafe { DataRef::new(src.as_ptr(), src.len()) })
        .is_none());
    a.finalize();
    b.finalize();
}

#[test]
fn single_copy_values_are_checked() {
    for v in ["auto", "on", "off", "1", "0", "AUTO"] {
        assert!(cma::Mode::parse("btl_sm_single_copy", v).is_ok(), "{v}");
    }
    let job = Job::new();
    let p = params(&[("btl_sm_single_copy", "maybe")]);
    let e = Sm::new(&p, &job.0, ProcId(0)).err().unwrap();
    assert!(format!("{e}").contains("btl_sm_single_copy"), "{e}");
}

#[test]
fn single_copy_is_off_by_default_and_auto_follows_the_kernel() {
    let job = Job::new();
    let (mut a, _, mut b, _) = pair(&job, &params(&[]));
    assert!(!a.attrs().flags.contains(BtlFlags::GET));
    a.finalize();
    b.finalize();
    let job = Job::new();
    let (mut a, _, mut b, _) = pair(&job, &params(&[("btl_sm_single_copy", "auto")]));
    assert_eq!(
        a.attrs().flags.contains(BtlFlags::GET),
        cma::probe_self().is_ok()
    );
    a.finalize();
    b.finalize();
}
