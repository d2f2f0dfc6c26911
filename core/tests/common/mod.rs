//! Test kit: several engines in one process, joined by an in-process BTL.
//!
//! The `fabric` BTL implements the real [`Btl`] trait, so the production PML runs over it; it can
//! reorder fragments on purpose, hold only a few fragments per destination (back-pressure),
//! rewrite headers into the other byte order, and accept injected (corrupt) fragments. Engines are
//! either stepped by hand from one thread (deterministic) or each run on its own thread behind the
//! Rust API.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use stormpi_core::api::{EngineLock, Universe};
use stormpi_core::btl::{
    AmTag, Btl, BtlAttrs, BtlFlags, DataRef, Delivery, DestRef, Endpoint, Modex, PeerInfo,
    RemoteKey, Sink, Token, PLACE_HEAD,
};
use stormpi_core::engine::{Engine, Init};
use stormpi_core::params::Params;
use stormpi_core::platform::{Level, Platform};
use stormpi_core::pml::request::{ReqId, Status};
use stormpi_core::rte::{ProcId, Rte};
use stormpi_core::Result;

/// A platform for tests: real clock, yields, records warnings.
pub struct TestPlatform {
    start: Instant,
    pub warnings: Mutex<Vec<String>>,
}

impl TestPlatform {
    pub fn leak() -> &'static TestPlatform {
        Box::leak(Box::new(TestPlatform {
            start: Instant::now(),
            warnings: Mutex::new(Vec::new()),
        }))
    }

    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap().clone()
    }
}

impl Platform for TestPlatform {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn relax(&self, _idle: u32) {
        std::thread::yield_now();
    }
    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        let line = format!("{}: {}", level.name(), args);
        if std::env::var_os("STORMPI_TEST_LOG").is_some() {
            eprintln!("{line}");
        }
        self.warnings.lock().unwrap().push(line);
    }
    fn thread_id(&self) -> u64 {
        let id = format!("{:?}", std::thread::current().id());
        id.bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
    }
    fn alloc_mem(&self, bytes: usize) -> Option<*mut u8> {
        // A header before the block keeps its size for `free_mem`.
        let layout = std::alloc::Layout::from_size_align(bytes + 16, 16).ok()?;
        // SAFETY: the layout is not zero-sized.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return None;
        }
        // SAFETY: the block holds 16 + `bytes` bytes, aligned to 16.
        unsafe {
            p.cast::<usize>().write(bytes);
            Some(p.add(16))
        }
    }
    unsafe fn free_mem(&self, ptr: *mut u8) {
        // SAFETY: `ptr` came from `alloc_mem`, 16 bytes after its block and size.
        unsafe {
            let p = ptr.sub(16);
            let bytes = p.cast::<usize>().read();
            std::alloc::dealloc(
                p,
                std::alloc::Layout::from_size_align_unchecked(bytes + 16, 16),
            );
        }
    }
    fn grant(&self, bytes: usize) -> Option<&'static mut [std::mem::MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 64).ok()?;
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(layout) };
        // SAFETY: `p` (checked) points at `bytes` freshly allocated bytes, never freed: the
        // core's for the rest of the process.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p.cast(), bytes) })
    }
    unsafe fn release(&self, region: &'static mut [std::mem::MaybeUninit<u8>]) -> bool {
        let layout = std::alloc::Layout::from_size_align(region.len().max(1), 64).unwrap();
        // SAFETY: the core's contract: one whole grant of this platform, no longer used.
        unsafe { std::alloc::dealloc(region.as_mut_ptr().cast(), layout) };
        true
    }
}

/// How the fabric behaves.
#[derive(Clone, Debug)]
pub struct FabricConfig {
    pub eager_limit: usize,
    pub max_send_size: usize,
    /// Fragments queued per destination before `reserve` refuses.
    pub capacity: usize,
    /// Deliver queued fragments in a random order.
    pub reorder: bool,
    pub seed: u64,
    /// Rewrite every header into the other byte order on the way.
    pub foreign_headers: bool,
    /// Advertised bandwidth (Mbit/s) and latency (ns) of the module.
    pub bandwidth_mbps: u32,
    pub latency_ns: u32,
    /// Take zero-copy sends, reporting them complete at the sender's next progress call.
    pub send_ref: bool,
    /// Advertise `BtlFlags::SEND_INLINE` (with the trait's own `send_inline`).
    pub send_inline: bool,
    /// Offer every fragment to `Sink::place` first: a placed payload is written at once and
    /// reported at the receiver's next progress call — as failed, with only half of it
    /// written, if `place_fails`.
    pub place: bool,
    pub place_fails: bool,
    /// Advertise `BtlFlags::GET` for messages of at least this many bytes (`None`: no get).
    /// A get copies at once and is reported at the reader's next progress call — as failed,
    /// with nothing written, if `get_fails`.
    pub get_min: Option<usize>,
    pub get_fails: bool,
}

impl Default for FabricConfig {
    fn default() -> FabricConfig {
        FabricConfig {
            eager_limit: 4096,
            max_send_size: 16384,
            capacity: usize::MAX,
            reorder: false,
            seed: 1,
            foreign_headers: false,
            bandwidth_mbps: 10_000,
            latency_ns: 1000,
            send_ref: false,
            send_inline: false,
            place: false,
            place_fails: false,
            get_min: None,
            get_fails: false,
        }
    }
}

struct Frag {
    from: u32,
    tag: u8,
    data: Vec<u8>,
}

/// The wire between the engines.
pub struct Fabric {
    queues: Vec<Mutex<VecDeque<Frag>>>,
    cfg: FabricConfig,
    rng: Mutex<u64>,
    /// Bytes of PML fragments this fabric carried.
    pub bytes: std::sync::atomic::AtomicU64,
    /// Registrations for gets: key → (owner, reader, address, length).
    regs: Mutex<HashMap<u64, (u32, u32, usize, usize)>>,
    next_key: std::sync::atomic::AtomicU64,
    /// Bytes read by gets.
    pub got: std::sync::atomic::AtomicU64,
    /// Payload bytes the receivers placed (`FabricConfig::place`).
    pub placed: std::sync::atomic::AtomicU64,
}

impl Fabric {
    fn next_random(&self) -> u64 {
        let mut s = self.rng.lock().unwrap();
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Puts raw bytes on the wire to `to` as if `from` had sent them.
    pub fn inject(&self, from: u32, to: u32, data: &[u8]) {
        self.queues[to as usize].lock().unwrap().push_back(Frag {
            from,
            tag: AmTag::PML.0,
            data: data.to_vec(),
        });
    }

    /// Fragments waiting for `to`.
    pub fn queued(&self, to: u32) -> usize {
        self.queues[to as usize].lock().unwrap().len()
    }

    /// Registrations not withdrawn.
    pub fn registered(&self) -> usize {
        self.regs.lock().unwrap().len()
    }
}

/// `Ok`, or the fabric's transport error `what`.
fn fabric_result(ok: bool, what: &'static str) -> Result<()> {
    if ok {
        return Ok(());
    }
    Err(stormpi_core::error::Error::new(
        stormpi_core::error::ErrorClass::Other,
        stormpi_core::error::Reason::Transport {
            btl: "fabric",
            what,
        },
    ))
}

/// One engine's module on the fabric.
pub struct FabricBtl {
    fabric: Arc<Fabric>,
    me: u32,
    attrs: BtlAttrs,
    staging: Vec<u8>,
    /// Zero-copy sends to report complete at the next progress call.
    done: Vec<stormpi_core::btl::Token>,
    /// Placements to report at the next progress call: sender, token, length, success.
    placed: Vec<(ProcId, Token, usize, bool)>,
    /// Gets to report at the next progress call: token, success.
    gets: Vec<(Token, bool)>,
}

impl FabricBtl {
    fn push(&mut self, ep: Endpoint, tag: AmTag, mut data: Vec<u8>) {
        if self.fabric.cfg.foreign_headers {
            stormpi_core::wire::to_foreign_order(&mut data).expect("own header parses");
        }
        self.fabric
            .bytes
            .fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.fabric.queues[ep.0 as usize]
            .lock()
            .unwrap()
            .push_back(Frag {
                from: self.me,
                tag: tag.0,
                data,
            });
    }
}

impl Btl for FabricBtl {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        _m: &mut dyn Modex,
        eps: &mut [Option<Endpoint>],
    ) -> Result<()> {
        for (p, ep) in peers.iter().zip(eps.iter_mut()) {
            *ep = (p.proc.0 != self.me).then_some(Endpoint(p.proc.0));
        }
        Ok(())
    }

    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        assert!(
            len <= self.attrs.max_send_size,
            "fragment larger than max_send_size"
        );
        if self.fabric.queues[ep.0 as usize].lock().unwrap().len() >= self.fabric.cfg.capacity {
            return None;
        }
        self.staging.clear();
        self.staging.resize(len, 0);
        Some(&mut self.staging[..])
    }

    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize) {
        let data = self.staging[..len].to_vec();
        self.push(ep, tag, data);
    }

    fn send_ref(
        &mut self,
        ep: Endpoint,
        tag: AmTag,
        header: &[u8],
        data: stormpi_core::btl::DataRef,
        token: stormpi_core::btl::Token,
    ) -> Option<stormpi_core::btl::Sent> {
        assert!(
            self.fabric.cfg.send_ref,
            "send_ref on a module without SEND_REF"
        );
        if self.fabric.queues[ep.0 as usize].lock().unwrap().len() >= self.fabric.cfg.capacity {
            return None;
        }
        let mut frag = header.to_vec();
        // SAFETY: the PML lends `data` until it is reported complete, which happens later.
        frag.extend_from_slice(unsafe { std::slice::from_raw_parts(data.as_ptr(), data.len()) });
        self.push(ep, tag, frag);
        self.done.push(token);
        Some(stormpi_core::btl::Sent::Pending)
    }

    fn register(&mut self, ep: Endpoint, data: DataRef) -> Option<RemoteKey> {
        assert!(self.fabric.cfg.get_min.is_some(), "register without GET");
        let k = self
            .fabric
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.fabric
            .regs
            .lock()
            .unwrap()
            .insert(k, (self.me, ep.0, data.as_ptr() as usize, data.len()));
        Some(RemoteKey(k))
    }

    fn deregister(&mut self, key: RemoteKey) {
        let owner = self.fabric.regs.lock().unwrap().remove(&key.0).map(|r| r.0);
        assert_eq!(owner, Some(self.me), "withdrawing a registration not ours");
    }

    fn get(
        &mut self,
        ep: Endpoint,
        key: RemoteKey,
        offset: u64,
        dest: DestRef,
        token: Token,
    ) -> bool {
        let regs = self.fabric.regs.lock().unwrap();
        let ok = !self.fabric.cfg.get_fails
            && regs.get(&key.0).is_some_and(|&(owner, reader, at, len)| {
                let fits = offset as usize + dest.len() <= len;
                if owner == ep.0 && reader == self.me && fits {
                    // SAFETY: the owner lent `len` bytes at `at` until it withdraws the
                    // registration (not before our FIN); `dest` is ours to write until reported.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (at + offset as usize) as *const u8,
                            dest.as_ptr(),
                            dest.len(),
                        )
                    };
                }
                owner == ep.0 && reader == self.me && fits
            });
        if ok {
            self.fabric
                .got
                .fetch_add(dest.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        self.gets.push((token, ok));
        true
    }

    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        for token in std::mem::take(&mut self.done) {
            sink.completed(token, Ok(()));
            n += 1;
        }
        for (token, ok) in std::mem::take(&mut self.gets) {
            sink.completed(token, fabric_result(ok, "get failed"));
            n += 1;
        }
        for (from, token, len, ok) in std::mem::take(&mut self.placed) {
            sink.placed(from, token, len, fabric_result(ok, "placement lost"));
            n += 1;
        }
        loop {
            let (idx, frag) = {
                let mut q = self.fabric.queues[self.me as usize].lock().unwrap();
                if q.is_empty() {
                    break;
                }
                let idx = if self.fabric.cfg.reorder {
                    (self.fabric.next_random() % q.len() as u64) as usize
                } else {
                    0
                };
                (idx, q.remove(idx).unwrap())
            };
            if self.fabric.cfg.place {
                let head = &frag.data[..frag.data.len().min(PLACE_HEAD)];
                let (from, len) = (ProcId(frag.from), frag.data.len());
                if let Some(p) = sink.place(from, AmTag(frag.tag), head, len) {
                    assert!(p.skip <= head.len(), "placement skips more than its head");
                    let payload = &frag.data[p.skip..];
                    let ok = !self.fabric.cfg.place_fails;
                    let n_write = if ok { payload.len() } else { payload.len() / 2 };
                    // SAFETY: Sink::place's contract: `dest` is writable for the payload's
                    // length until the placement is reported.
                    unsafe {
                        std::ptr::copy_nonoverlapping(payload.as_ptr(), p.dest, n_write);
                    }
                    self.fabric
                        .placed
                        .fetch_add(payload.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    self.placed.push((from, p.token, payload.len(), ok));
                    n += 1;
                    continue;
                }
            }
            match sink.deliver(ProcId(frag.from), AmTag(frag.tag), &frag.data) {
                Delivery::Consumed | Delivery::Satisfied => n += 1,
                Delivery::Retry => {
                    let mut q = self.fabric.queues[self.me as usize].lock().unwrap();
                    let at = idx.min(q.len());
                    q.insert(at, frag);
                    break;
                }
            }
        }
        n
    }
}

struct Shared {
    modex: Mutex<HashMap<(u32, String), Vec<u8>>>,
    barrier: Barrier,
}

/// A runtime joining the engines of one test.
pub struct TestRte {
    me: u32,
    n: u32,
    shared: Arc<Shared>,
}

impl Rte for TestRte {
    fn rank(&self) -> ProcId {
        ProcId(self.me)
    }
    fn size(&self) -> u32 {
        self.n
    }
    fn node_of(&self, _proc: ProcId) -> u32 {
        0
    }
    fn modex_put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.shared
            .modex
            .lock()
            .unwrap()
            .insert((self.me, key.to_string()), value.to_vec());
        Ok(())
    }
    fn modex_fence(&mut self) -> Result<()> {
        self.shared.barrier.wait();
        Ok(())
    }
    fn modex_get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        let m = self.shared.modex.lock().unwrap();
        Ok(m.get(&(proc.0, key.to_string())).map(|v| {
            out[..v.len()].copy_from_slice(v);
            v.len()
        }))
    }
    fn barrier(&mut self) -> Result<()> {
        self.shared.barrier.wait();
        Ok(())
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        panic!("rank {} aborted the job with code {code}: {msg}", self.me)
    }
}

fn leak_memory(bytes: usize) -> &'static mut [MaybeUninit<u8>] {
    Box::leak(vec![MaybeUninit::<u8>::uninit(); bytes].into_boxed_slice())
}

fn make_engine(
    me: u32,
    n: u32,
    shared: Arc<Shared>,
    fabrics: &[Arc<Fabric>],
    platform: &'static TestPlatform,
    overrides: &[(&str, &str)],
) -> Engine {
    let mut params = Params::new(&[]);
    Engine::register_params(&mut params).unwrap();
    for (k, v) in overrides {
        params.set(k, v).unwrap();
    }
    let memory = leak_memory(Engine::memory_needed(&params, n));
    let rte: &'static mut dyn Rte = Box::leak(Box::new(TestRte { me, n, shared }));
    let mut btls = heapless::Vec::new();
    for fabric in fabrics {
        let mut flags = BtlFlags::SEND;
        if fabric.cfg.send_ref {
            flags = flags.union(BtlFlags::SEND_REF);
        }
        if fabric.cfg.send_inline {
            flags = flags.union(BtlFlags::SEND_INLINE);
        }
        if fabric.cfg.get_min.is_some() {
            flags = flags.union(BtlFlags::GET);
        }
        let attrs = BtlAttrs {
            component: "fabric",
            eager_limit: fabric.cfg.eager_limit,
            max_send_size: fabric.cfg.max_send_size,
            latency_ns: fabric.cfg.latency_ns,
            bandwidth_mbps: fabric.cfg.bandwidth_mbps,
            exclusivity: 10,
            flags,
            get_min: fabric.cfg.get_min.unwrap_or(usize::MAX),
        };
        let btl: &'static mut dyn Btl = Box::leak(Box::new(FabricBtl {
            fabric: fabric.clone(),
            me,
            attrs,
            staging: Vec::new(),
            done: Vec::new(),
            placed: Vec::new(),
            gets: Vec::new(),
        }));
        let _ = btls.push(btl);
    }
    Engine::new(Init {
        memory,
        params,
        platform,
        rte,
        btls,
    })
    .expect("engine init")
}

fn make_fabric(n: u32, cfg: FabricConfig) -> Arc<Fabric> {
    Arc::new(Fabric {
        queues: (0..n).map(|_| Mutex::new(VecDeque::new())).collect(),
        rng: Mutex::new(cfg.seed | 1),
        cfg,
        bytes: std::sync::atomic::AtomicU64::new(0),
        placed: std::sync::atomic::AtomicU64::new(0),
        regs: Mutex::new(HashMap::new()),
        next_key: std::sync::atomic::AtomicU64::new(1),
        got: std::sync::atomic::AtomicU64::new(0),
    })
}

/// Engines stepped by hand from the test's thread.
pub struct Cluster {
    pub e: Vec<Engine>,
    /// The first fabric.
    pub fabric: Arc<Fabric>,
    /// Every fabric, in the order given.
    pub fabrics: Vec<Arc<Fabric>>,
    pub platform: &'static TestPlatform,
}

impl Cluster {
    pub fn new(n: u32, cfg: FabricConfig) -> Cluster {
        Cluster::with_params(n, cfg, &[])
    }

    pub fn with_params(n: u32, cfg: FabricConfig, overrides: &[(&str, &str)]) -> Cluster {
        Cluster::with_fabrics(n, vec![cfg], overrides)
    }

    /// Engines joined by several fabrics at once (one BTL module each).
    pub fn with_fabrics(n: u32, cfgs: Vec<FabricConfig>, overrides: &[(&str, &str)]) -> Cluster {
        let fabrics: Vec<Arc<Fabric>> = cfgs.into_iter().map(|c| make_fabric(n, c)).collect();
        let platform = TestPlatform::leak();
        let shared = Arc::new(Shared {
            modex: Mutex::new(HashMap::new()),
            barrier: Barrier::new(n as usize),
        });
        let overrides: Vec<(String, String)> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // Engines exchange business cards at init, so they are built concurrently.
        let handles: Vec<_> = (0..n)
            .map(|me| {
                let (shared, fabrics, ov) = (shared.clone(), fabrics.clone(), overrides.clone());
                std::thread::spawn(move || {
                    let ov: Vec<(&str, &str)> =
                        ov.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    make_engine(me, n, shared, &fabrics, platform, &ov)
                })
            })
            .collect();
        let e = handles.into_iter().map(|h| h.join().unwrap()).collect();
        Cluster {
            e,
            fabric: fabrics[0].clone(),
            fabrics,
            platform,
        }
    }

    /// One progress call on every engine.
    pub fn step(&mut self) -> usize {
        self.e.iter_mut().map(|e| e.progress()).sum()
    }

    /// Steps until `done`, failing the test if that takes absurdly long.
    pub fn run_until(&mut self, mut done: impl FnMut(&mut Cluster) -> bool) {
        for _ in 0..200_000 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("no completion after 200000 progress rounds: a hang");
    }

    /// Steps until request `id` of rank `r` completes; returns its status.
    pub fn wait(&mut self, r: usize, id: ReqId) -> Status {
        self.run_until(|c| c.e[r].is_complete(id).unwrap());
        self.e[r].test(id).unwrap().unwrap()
    }
}

/// Runs `f` on `n` ranks, each on its own thread behind the Rust API; fails after `timeout`.
pub fn spawn_ranks<F>(
    n: u32,
    cfg: FabricConfig,
    overrides: &[(&str, &str)],
    timeout: Duration,
    f: F,
) where
    F: Fn(Universe) + Send + Sync + 'static,
{
    let fabric = make_fabric(n, cfg);
    let platform = TestPlatform::leak();
    let shared = Arc::new(Shared {
        modex: Mutex::new(HashMap::new()),
        barrier: Barrier::new(n as usize),
    });
    let f = Arc::new(f);
    let overrides: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let (tx, rx) = mpsc::channel();
    for me in 0..n {
        let (shared, fabric, f, tx, ov) = (
            shared.clone(),
            fabric.clone(),
            f.clone(),
            tx.clone(),
            overrides.clone(),
        );
        std::thread::spawn(move || {
            let ov: Vec<(&str, &str)> = ov.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let engine = make_engine(me, n, shared, &[fabric], platform, &ov);
                let lock: &'static EngineLock = Box::leak(Box::new(EngineLock::with(engine, true)));
                f(Universe::new(lock).unwrap());
            }));
            let _ = tx.send((me, result.is_ok()));
        });
    }
    let deadline = Instant::now() + timeout;
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((_, true)) => {}
            Ok((me, false)) => panic!("rank {me} failed"),
            Err(_) => panic!("ranks did not finish within {timeout:?}: a hang"),
        }
    }
}

/// A leaked buffer, so a request may hold it for as long as the test likes.
pub fn leak_buf(len: usize, fill: impl Fn(usize) -> u8) -> &'static mut [u8] {
    Box::leak((0..len).map(fill).collect::<Vec<u8>>().into_boxed_slice())
}

/// Deterministic payload for (sender, message number, byte index).
pub fn pattern(from: u32, n: u32, i: usize) -> u8 {
    (from as usize * 131 + n as usize * 31 + i * 7 + (i >> 8)) as u8
}
