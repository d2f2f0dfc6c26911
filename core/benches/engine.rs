//! Micro-benchmark of the engine alone, through the `self` BTL:
//! - an 8-byte eager send and its matched receive (posted first, and unexpected);
//! - the same with 1,000 receives of other tags posted ahead of it (the matching cost).
//!
//! Run with `cargo bench -p stormpi-core --bench engine`.

use std::mem::MaybeUninit;
use std::time::Instant;

use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::engine::{Engine, Init};
use stormpi_core::params::Params;
use stormpi_core::platform::{Level, Platform};
use stormpi_core::pml::request::SendMode;
use stormpi_core::rte::Singleton;

struct BenchPlatform(Instant);

impl Platform for BenchPlatform {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    fn relax(&self, _idle: u32) {
        std::hint::spin_loop();
    }
    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        eprintln!("{}: {}", level.name(), args);
    }
    fn grant(&self, bytes: usize) -> Option<&'static mut [std::mem::MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 64).ok()?;
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(layout) };
        // SAFETY: `p` (checked) points at `bytes` freshly allocated bytes, never freed: the
        // core's for the rest of the process.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p.cast(), bytes) })
    }
}

fn abort(code: i32, msg: &str) -> ! {
    eprintln!("abort {code}: {msg}");
    std::process::exit(code)
}

fn engine() -> Engine {
    let mut params = Params::new(&[]);
    Engine::register_params(&mut params).unwrap();
    let memory = Box::leak(
        vec![MaybeUninit::uninit(); Engine::memory_needed(&params, 1)].into_boxed_slice(),
    );
    Engine::new(Init {
        memory,
        params,
        platform: Box::leak(Box::new(BenchPlatform(Instant::now()))),
        rte: Box::leak(Box::new(Singleton::<8>::new(abort))),
        btls: heapless::Vec::new(),
    })
    .unwrap()
}

const W: CommId = CommId::WORLD;

/// Best of five runs of `iters` iterations, in nanoseconds per iteration.
fn measure(iters: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::MAX, f64::min)
}

fn posted_then_send(e: &mut Engine, out: &[u8; 8], inb: &mut [u8; 8]) {
    // SAFETY: `inb` outlives the request, which is waited for before returning.
    let conv = unsafe { Unpacker::contiguous(inb.as_mut_ptr(), 8) };
    let r = e.irecv(conv, 0, 1, W, 0).unwrap();
    e.send(Packer::from_slice(out), 0, 1, W, SendMode::Standard)
        .unwrap();
    e.wait(r).unwrap();
}

fn main() {
    let mut e = engine();
    let out = *b"stormpi!";
    let mut inb = [0u8; 8];
    let iters = 200_000;

    let unexpected = measure(iters, || {
        e.send(Packer::from_slice(&out), 0, 1, W, SendMode::Standard)
            .unwrap();
        e.recv(Unpacker::from_slice(&mut inb), 0, 1, W).unwrap();
    });
    let posted = measure(iters, || posted_then_send(&mut e, &out, &mut inb));

    // 1,000 receives of other tags ahead of the one that matches.
    let mut others = vec![[0u8; 8]; 1000];
    let mut held = Vec::new();
    for (i, b) in others.iter_mut().enumerate() {
        // SAFETY: `others` outlives these requests; they are cancelled and freed below.
        let conv = unsafe { Unpacker::contiguous(b.as_mut_ptr(), 8) };
        held.push(e.irecv(conv, 0, 1000 + i as i32, W, 0).unwrap());
    }
    let behind_1000 = measure(iters / 10, || posted_then_send(&mut e, &out, &mut inb));
    let unexpected_behind_1000 = measure(iters / 10, || {
        e.send(Packer::from_slice(&out), 0, 1, W, SendMode::Standard)
            .unwrap();
        e.recv(Unpacker::from_slice(&mut inb), 0, 1, W).unwrap();
    });
    for r in held {
        e.cancel(r).unwrap();
        e.test(r).unwrap();
    }
    assert_eq!(&inb, &out);

    println!("stormpi engine micro-benchmark (self BTL, 8-byte messages, best of 5)");
    println!("  send + matched receive, receive posted first   {posted:8.1} ns/message");
    println!("  send + matched receive, message unexpected     {unexpected:8.1} ns/message");
    println!("  receive posted behind 1,000 other-tag receives {behind_1000:8.1} ns/message");
    println!(
        "  unexpected, 1,000 other-tag receives posted    {unexpected_behind_1000:8.1} ns/message"
    );
}
