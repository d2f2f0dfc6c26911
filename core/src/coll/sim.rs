//! Unit tests of the algorithms' step logic: every rank's algorithm runs in one process over an
//! in-memory network (sends are buffered, receives match per sender in order and must have the
//! exact size), and the results are compared with references computed directly.

#![allow(clippy::needless_range_loop)]

extern crate std;

use std::collections::{HashMap, VecDeque};
use std::vec;
use std::vec::Vec;

use super::alg::*;
use super::exec::{copy_stream, type_size, Act, Acts, ROp, Red, Segs, Span, UserOp};
use super::red::{RedAlg, RedKind, RedPlan};
use crate::datatype::table::tests::table;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::op::Op;

struct Rank {
    alg: Alg,
    step: u32,
    waiting: VecDeque<(u32, Span)>,
    segs: Option<Segs>,
    red: Option<Red>,
    done: bool,
}

impl Rank {
    fn new(alg: Alg) -> Rank {
        Rank {
            alg,
            step: 0,
            waiting: VecDeque::new(),
            segs: None,
            red: None,
            done: false,
        }
    }

    fn reduction(plan: RedPlan) -> Rank {
        Rank::reduction_in(plan, types())
    }

    fn reduction_in(plan: RedPlan, t: &TypeTable) -> Rank {
        let b = plan.per.min(plan.total);
        // SAFETY: the test's buffers.
        unsafe { plan.convert_in(t, 0, b) }.unwrap();
        let mut r = Rank::new(plan.segment(0, b));
        r.segs = Some(Segs { plan, a: 0, b });
        r.red = Some(plan.red);
        r
    }
}

std::thread_local! {
    static TYPES: &'static TypeTable = std::boxed::Box::leak(std::boxed::Box::new(table()));
}

fn types() -> &'static TypeTable {
    TYPES.with(|t| *t)
}

/// Runs every rank to completion; panics on a deadlock, a size mismatch or a stray message.
fn run(ranks: &mut [Rank]) {
    run_in(ranks, types())
}

fn run_in(ranks: &mut [Rank], t: &TypeTable) {
    let packed_len = |s: &Span| (s.count * type_size(t, s.dt)) as usize;
    let mut q: HashMap<(u32, u32), VecDeque<Vec<u8>>> = HashMap::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        assert!(rounds < 1_000_000, "no end");
        let mut progressed = false;
        let mut all_done = true;
        for (me, st) in ranks.iter_mut().enumerate() {
            let me = me as u32;
            if st.done {
                continue;
            }
            all_done = false;
            while let Some(&(from, span)) = st.waiting.front() {
                let Some(msg) = q.get_mut(&(from, me)).and_then(|d| d.pop_front()) else {
                    break;
                };
                assert_eq!(
                    msg.len(),
                    packed_len(&span),
                    "rank {me}: message from {from} of the wrong size (step {})",
                    st.step
                );
                let mut m = msg;
                let src = Span::bytes(m.as_mut_ptr(), m.len() as u64);
                // SAFETY: the test's buffers.
                unsafe { copy_stream(t, span, 0, src, 0, m.len() as u64).unwrap() };
                st.waiting.pop_front();
                progressed = true;
            }
            if !st.waiting.is_empty() {
                continue;
            }
            loop {
                let mut acts = Acts::new();
                let more = st.alg.step(st.step, &mut acts, t);
                st.step += 1;
                assert!(!acts.overflow, "rank {me}: too many actions");
                progressed = true;
                if !more {
                    if let Some(mut s) = st.segs {
                        // SAFETY: the test's buffers.
                        unsafe { s.plan.convert_out(t, s.a, s.b).unwrap() };
                        if s.b < s.plan.total {
                            s.a = s.b;
                            s.b = (s.a + s.plan.per).min(s.plan.total);
                            st.segs = Some(s);
                            // SAFETY: as above.
                            unsafe { s.plan.convert_in(t, s.a, s.b).unwrap() };
                            st.alg = s.plan.segment(s.a, s.b);
                            st.step = 0;
                            continue;
                        }
                    }
                    st.done = true;
                    break;
                }
                for a in acts.list().iter() {
                    match *a {
                        // SAFETY: the test's buffers.
                        Act::Copy { dst, src } => unsafe {
                            copy_stream(t, dst, 0, src, 0, packed_len(&src) as u64).unwrap()
                        },
                        // SAFETY: as above.
                        Act::CopyRange {
                            dst,
                            dp,
                            src,
                            sp,
                            len,
                        } => unsafe { copy_stream(t, dst, dp, src, sp, len).unwrap() },
                        // SAFETY: as above.
                        Act::Reduce { inout, input, n } => unsafe {
                            st.red.unwrap().apply(inout, input, n).unwrap()
                        },
                        _ => {}
                    }
                }
                for a in acts.list().iter() {
                    match *a {
                        Act::Send(to, s) => {
                            let mut m = vec![0u8; packed_len(&s)];
                            let dst = Span::bytes(m.as_mut_ptr(), m.len() as u64);
                            // SAFETY: as above.
                            unsafe { copy_stream(t, dst, 0, s, 0, m.len() as u64).unwrap() };
                            q.entry((me, to)).or_default().push_back(m);
                        }
                        Act::Recv(from, s) => st.waiting.push_back((from, s)),
                        _ => {}
                    }
                }
                if !st.waiting.is_empty() {
                    break;
                }
            }
        }
        if all_done {
            break;
        }
        assert!(progressed, "deadlock");
    }
    for ((from, to), d) in q {
        assert!(
            d.is_empty(),
            "{} stray messages from {from} to {to}",
            d.len()
        );
    }
}

fn grp(rank: u32, size: u32) -> Grp {
    Grp { rank, size }
}

const SIZES: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 31, 32, 33];

fn pattern(r: u32, i: usize) -> i32 {
    (r as i32 + 1) * 1000 + i as i32
}

// ---- barrier and broadcast ----------------------------------------------------------------------

#[test]
fn barriers_complete_and_leave_no_messages() {
    for &p in SIZES {
        let mut d: Vec<_> = (0..p)
            .map(|r| Rank::new(Alg::Dissemination(Dissemination { g: grp(r, p) })))
            .collect();
        run(&mut d);
        let mut rd: Vec<_> = (0..p)
            .map(|r| {
                Rank::new(Alg::RecDblBarrier(RecDblBarrier {
                    g: grp(r, p),
                    fold: Fold::new(p),
                }))
            })
            .collect();
        run(&mut rd);
        let mut lin: Vec<_> = (0..p)
            .map(|r| Rank::new(Alg::LinearBarrier(LinearBarrier { g: grp(r, p) })))
            .collect();
        run(&mut lin);
    }
}

#[test]
fn broadcasts_deliver_the_root_buffer() {
    for &p in SIZES {
        for root in [0, p / 2, p - 1] {
            for count in [1u64, 7, 64, 1001] {
                for kind in 0..3 {
                    let mut bufs: Vec<Vec<i32>> = (0..p)
                        .map(|r| {
                            (0..count as usize)
                                .map(|i| if r == root { pattern(root, i) } else { -1 })
                                .collect()
                        })
                        .collect();
                    let mut slots: Vec<Vec<u8>> =
                        (0..p).map(|_| vec![0u8; 4 * count as usize + 80]).collect();
                    let mut ranks: Vec<_> = bufs
                        .iter_mut()
                        .zip(slots.iter_mut())
                        .enumerate()
                        .map(|(r, (b, sl))| {
                            let g = grp(r as u32, p);
                            let base = b.as_mut_ptr().cast::<u8>();
                            let user = Span::new(base, count, Datatype::INT);
                            // Odd ranks stage their bytes as a rank with a sparse type would.
                            let data = Bytes {
                                user,
                                dense: (r % 2 == 0).then_some(base),
                            };
                            let st = sl.as_mut_ptr();
                            let total = count * 4;
                            Rank::new(match kind {
                                0 => Alg::BcastBinomial(BcastBinomial { g, root, buf: user }),
                                1 => Alg::BcastChain(BcastChain {
                                    g,
                                    root,
                                    data,
                                    total,
                                    sub: 40,
                                    slots: [st, st.wrapping_add(40)],
                                }),
                                _ => Alg::BcastScatterAllgather(BcastScatterAllgather {
                                    g,
                                    root,
                                    data,
                                    total,
                                    chunk: total.div_ceil(p as u64),
                                    stage: st,
                                }),
                            })
                        })
                        .collect();
                    run(&mut ranks);
                    for (r, b) in bufs.iter().enumerate() {
                        for (i, v) in b.iter().enumerate() {
                            assert_eq!(
                                *v,
                                pattern(root, i),
                                "p {p} root {root} kind {kind} rank {r}"
                            );
                        }
                    }
                }
            }
        }
    }
}

// ---- reductions ---------------------------------------------------------------------------------

/// An associative, non-commutative operation on `u64` elements holding affine maps
/// `x -> m x + c` (m low, c high 32 bits): `a op b` applies `a` then `b`.
unsafe fn affine(_f: usize, input: *const u8, inout: *mut u8, len: i32, _dt: Datatype) {
    for i in 0..len as usize {
        // SAFETY: the executor passes `len` elements.
        unsafe {
            let a = input.cast::<u64>().add(i).read_unaligned();
            let b = inout.cast::<u64>().add(i).read_unaligned();
            inout.cast::<u64>().add(i).write_unaligned(compose(a, b));
        }
    }
}

fn compose(a: u64, b: u64) -> u64 {
    let (am, ac) = (a as u32, (a >> 32) as u32);
    let (bm, bc) = (b as u32, (b >> 32) as u32);
    let m = am.wrapping_mul(bm);
    let c = ac.wrapping_mul(bm).wrapping_add(bc);
    m as u64 | (c as u64) << 32
}

fn affine_input(r: u32, i: usize) -> u64 {
    let m = 3 + 2 * ((r as u64 * 7 + i as u64) % 5) as u32;
    let c = (r * 31 + i as u32 * 17) % 1000;
    m as u64 | (c as u64) << 32
}

fn red_of(commute: bool) -> Red {
    if commute {
        Red {
            op: ROp::Predef(Op::Sum),
            w: Datatype::INT64_T,
            ext: 8,
            true_lb: 0,
            true_ext: 8,
            size: 8,
        }
    } else {
        Red {
            op: ROp::User(UserOp {
                call: affine,
                func: 0,
                commute: false,
            }),
            w: Datatype::UINT64_T,
            ext: 8,
            true_lb: 0,
            true_ext: 8,
            size: 8,
        }
    }
}

fn combine(commute: bool, a: u64, b: u64) -> u64 {
    if commute {
        (a as i64).wrapping_add(b as i64) as u64
    } else {
        compose(a, b)
    }
}

fn input(commute: bool, r: u32, i: usize) -> u64 {
    if commute {
        (r as u64 + 1) * 100_000 + i as u64
    } else {
        affine_input(r, i)
    }
}

/// Buffers of one reduction test: inputs, outputs and scratch per rank.
struct Bufs {
    inp: Vec<Vec<u64>>,
    out: Vec<Vec<u64>>,
    scratch: Vec<Vec<u64>>,
}

impl Bufs {
    fn new(commute: bool, p: u32, n_in: usize, n_out: usize, scratch: usize) -> Bufs {
        Bufs {
            inp: (0..p)
                .map(|r| (0..n_in).map(|i| input(commute, r, i)).collect())
                .collect(),
            out: (0..p).map(|_| vec![u64::MAX; n_out.max(n_in)]).collect(),
            scratch: (0..p).map(|_| vec![0u64; scratch]).collect(),
        }
    }
}

const CANARY: u64 = 0x5a5a_1234_dead_beef;

/// A plan over `scratch`: conversion buffers, then exactly the buffers the algorithm says it
/// needs; the rest of `scratch` is a canary the algorithm must not touch (unused buffer
/// pointers aim at it), checked by [`canaries`].
#[allow(clippy::too_many_arguments)]
fn plan(
    kind: RedKind,
    alg: RedAlg,
    g: Grp,
    red: Red,
    total: u64,
    per: u64,
    inp: Option<*mut u64>,
    out: Option<*mut u64>,
    n_in: u64,
    n_out: u64,
    scratch: &mut [u64],
) -> RedPlan {
    let used = 2 + alg.buffers(&kind);
    for w in scratch[used * per as usize..].iter_mut() {
        *w = CANARY;
    }
    let b = scratch.as_mut_ptr().cast::<u8>();
    let unit = per as usize * 8;
    let buf = |i: usize| b.wrapping_add(i.min(used) * unit);
    RedPlan {
        kind,
        alg,
        g,
        red,
        total,
        per,
        pipe: 3,
        inp: inp.map(|i| Span::new(i.cast(), n_in, red.w)),
        out: out.map(|o| Span::new(o.cast(), n_out, red.w)),
        direct: Some(0),
        conv_in: buf(0),
        conv_out: buf(1),
        s: [buf(2), buf(3), buf(4)],
    }
}

/// Checks that no rank's algorithm wrote beyond the scratch it asked for.
fn canaries(b: &Bufs, kind: RedKind, alg: RedAlg, per: u64) {
    let used = (2 + alg.buffers(&kind)) * per as usize;
    for (r, s) in b.scratch.iter().enumerate() {
        assert!(
            s[used..].iter().all(|&w| w == CANARY),
            "rank {r}: {alg:?} wrote beyond its scratch"
        );
    }
}

fn reference(commute: bool, p: u32, lo: u32, hi: u32, i: usize) -> u64 {
    let mut acc = input(commute, lo, i);
    for r in lo + 1..hi {
        acc = combine(commute, acc, input(commute, r, i));
    }
    let _ = p;
    acc
}

#[test]
fn reduce_algorithms_at_every_root() {
    for &p in SIZES {
        for commute in [true, false] {
            for alg in [RedAlg::Binomial, RedAlg::Chain] {
                if alg == RedAlg::Chain && !commute {
                    continue;
                }
                for root in [0, p / 2, p - 1] {
                    for (n, per) in [(1u64, 4u64), (10, 4), (37, 37)] {
                        for in_place in [false, true] {
                            let mut b =
                                Bufs::new(commute, p, n as usize, n as usize, 8 * per as usize);
                            if in_place {
                                b.out[root as usize] = b.inp[root as usize].clone();
                            }
                            let red = red_of(commute);
                            let mut ranks: Vec<_> = (0..p)
                                .map(|r| {
                                    let ru = r as usize;
                                    let inp = (!(in_place && r == root))
                                        .then_some(b.inp[ru].as_mut_ptr());
                                    let out = (r == root).then_some(b.out[ru].as_mut_ptr());
                                    Rank::reduction(plan(
                                        RedKind::Reduce { root },
                                        alg,
                                        grp(r, p),
                                        red,
                                        n,
                                        per,
                                        inp,
                                        out,
                                        n,
                                        n,
                                        &mut b.scratch[ru],
                                    ))
                                })
                                .collect();
                            run(&mut ranks);
                            canaries(&b, RedKind::Reduce { root }, alg, per);
                            for i in 0..n as usize {
                                assert_eq!(
                                    b.out[root as usize][i],
                                    reference(commute, p, 0, p, i),
                                    "p {p} {alg:?} commute {commute} root {root} n {n} elem {i}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn allreduce_algorithms() {
    for &p in SIZES {
        for commute in [true, false] {
            for alg in [
                RedAlg::RecDbl,
                RedAlg::Ring,
                RedAlg::Rabenseifner,
                RedAlg::ReduceBcast,
            ] {
                if !commute && matches!(alg, RedAlg::Ring | RedAlg::Rabenseifner) {
                    continue;
                }
                for (n, per) in [(1u64, 1u64), (7, 7), (40, 16), (101, 101)] {
                    for in_place in [false, true] {
                        let mut b = Bufs::new(commute, p, n as usize, n as usize, 8 * per as usize);
                        if in_place {
                            b.out = b.inp.clone();
                        }
                        let red = red_of(commute);
                        let mut ranks: Vec<_> = (0..p)
                            .map(|r| {
                                let ru = r as usize;
                                let inp = (!in_place).then_some(b.inp[ru].as_mut_ptr());
                                Rank::reduction(plan(
                                    RedKind::Allreduce,
                                    alg,
                                    grp(r, p),
                                    red,
                                    n,
                                    per,
                                    inp,
                                    Some(b.out[ru].as_mut_ptr()),
                                    n,
                                    n,
                                    &mut b.scratch[ru],
                                ))
                            })
                            .collect();
                        run(&mut ranks);
                        canaries(&b, RedKind::Allreduce, alg, per);
                        for r in 0..p as usize {
                            for i in 0..n as usize {
                                assert_eq!(
                                    b.out[r][i],
                                    reference(commute, p, 0, p, i),
                                    "p {p} {alg:?} commute {commute} n {n} rank {r} elem {i}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn reduce_scatter_algorithms() {
    for &p in SIZES {
        for commute in [true, false] {
            for alg in [RedAlg::Ring, RedAlg::Halving, RedAlg::ReduceThenScatter] {
                if !commute && alg != RedAlg::ReduceThenScatter {
                    continue;
                }
                for v in [false, true] {
                    let counts: Vec<i32> = (0..p)
                        .map(|i| if v { ((i * 7 + 3) % 5) as i32 } else { 3 })
                        .collect();
                    // The same counts as the large-count forms pass them (odd sizes).
                    let wide: Vec<i64> = counts.iter().map(|&c| c as i64).collect();
                    let disp = |i: u32| counts[..i as usize].iter().map(|&c| c as u64).sum::<u64>();
                    let total = disp(p);
                    for per in [total.max(1), 4] {
                        for in_place in [false, true] {
                            let mut b = Bufs::new(
                                commute,
                                p,
                                total as usize,
                                total as usize,
                                8 * per as usize,
                            );
                            if in_place {
                                b.out = b.inp.clone();
                            }
                            let red = red_of(commute);
                            let c = if v {
                                match p % 2 {
                                    0 => Counts::V(super::ints::Ints::Int(counts.as_ptr()), 1),
                                    _ => Counts::V(super::ints::Ints::Wide(wide.as_ptr()), 1),
                                }
                            } else {
                                Counts::Block(3)
                            };
                            let mut ranks: Vec<_> = (0..p)
                                .map(|r| {
                                    let ru = r as usize;
                                    let inp = (!in_place).then_some(b.inp[ru].as_mut_ptr());
                                    Rank::reduction(plan(
                                        RedKind::ReduceScatter(c),
                                        alg,
                                        grp(r, p),
                                        red,
                                        total,
                                        per,
                                        inp,
                                        Some(b.out[ru].as_mut_ptr()),
                                        total,
                                        counts[ru] as u64,
                                        &mut b.scratch[ru],
                                    ))
                                })
                                .collect();
                            if total == 0 {
                                continue;
                            }
                            run(&mut ranks);
                            canaries(&b, RedKind::ReduceScatter(c), alg, per);
                            for r in 0..p {
                                for j in 0..counts[r as usize] as usize {
                                    let i = disp(r) as usize + j;
                                    assert_eq!(
                                        b.out[r as usize][j],
                                        reference(commute, p, 0, p, i),
                                        "p {p} {alg:?} commute {commute} v {v} per {per} in_place {in_place} rank {r} elem {j}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn scan_algorithms() {
    for &p in SIZES {
        for commute in [true, false] {
            for alg in [RedAlg::RecDbl, RedAlg::Linear] {
                for exclusive in [false, true] {
                    for (n, per) in [(1u64, 1u64), (9, 4)] {
                        for in_place in [false, true] {
                            let mut b =
                                Bufs::new(commute, p, n as usize, n as usize, 8 * per as usize);
                            if in_place {
                                b.out = b.inp.clone();
                            }
                            let red = red_of(commute);
                            let kind = if exclusive {
                                RedKind::Exscan
                            } else {
                                RedKind::Scan
                            };
                            let mut ranks: Vec<_> = (0..p)
                                .map(|r| {
                                    let ru = r as usize;
                                    let inp = (!in_place).then_some(b.inp[ru].as_mut_ptr());
                                    Rank::reduction(plan(
                                        kind,
                                        alg,
                                        grp(r, p),
                                        red,
                                        n,
                                        per,
                                        inp,
                                        Some(b.out[ru].as_mut_ptr()),
                                        n,
                                        n,
                                        &mut b.scratch[ru],
                                    ))
                                })
                                .collect();
                            run(&mut ranks);
                            canaries(&b, kind, alg, per);
                            for r in 0..p {
                                if exclusive && r == 0 {
                                    continue;
                                }
                                let hi = if exclusive { r } else { r + 1 };
                                for i in 0..n as usize {
                                    assert_eq!(
                                        b.out[r as usize][i],
                                        reference(commute, p, 0, hi, i),
                                        "p {p} {alg:?} commute {commute} exclusive {exclusive} rank {r} elem {i}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// MINLOC over the padded pair type (16-byte extent, 12 packed bytes) and a reduction over a
/// strided derived type, converted to the packed working form in segments.
#[test]
fn padded_pairs_and_strided_types_reduce() {
    let p = 5;
    // MPI_DOUBLE_INT: value, index, padding.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Di(f64, i32, i32);
    let red = Red {
        op: ROp::Predef(Op::Minloc),
        w: Datatype::DOUBLE_INT,
        ext: 16,
        true_lb: 0,
        true_ext: 12,
        size: 12,
    };
    let n = 9usize;
    let val = |r: u32, i: usize| ((r as usize * 3 + i * 5) % 4) as f64;
    let mut inp: Vec<Vec<Di>> = (0..p)
        .map(|r| (0..n).map(|i| Di(val(r, i), r as i32, -7)).collect())
        .collect();
    let mut out: Vec<Vec<Di>> = (0..p).map(|_| vec![Di(0.0, 0, 0); n]).collect();
    let mut scratch: Vec<Vec<u64>> = (0..p).map(|_| vec![0u64; 64]).collect();
    let mut ranks: Vec<_> = (0..p)
        .map(|r| {
            let ru = r as usize;
            let b = scratch[ru].as_mut_ptr().cast::<u8>();
            Rank::reduction(RedPlan {
                kind: RedKind::Allreduce,
                alg: RedAlg::RecDbl,
                g: grp(r, p),
                red,
                total: n as u64,
                per: 4,
                pipe: 4,
                inp: Some(Span::new(inp[ru].as_mut_ptr().cast(), n as u64, red.w)),
                out: Some(Span::new(out[ru].as_mut_ptr().cast(), n as u64, red.w)),
                direct: Some(0),
                conv_in: b,
                conv_out: b.wrapping_add(64),
                s: [
                    b.wrapping_add(128),
                    b.wrapping_add(256),
                    b.wrapping_add(384),
                ],
            })
        })
        .collect();
    run(&mut ranks);
    for (r, o) in out.iter().enumerate() {
        for (i, d) in o.iter().enumerate() {
            let min = (0..p).map(|q| val(q, i)).fold(f64::MAX, f64::min);
            let idx = (0..p).find(|&q| val(q, i) == min).unwrap() as i32;
            assert_eq!((d.0, d.1), (min, idx), "rank {r} elem {i}");
        }
    }

    // A vector of 3 blocks of 2 ints, stride 4 (extent 10 ints): the working form is 6 packed
    // ints per instance.
    let mut t = table();
    let vec_t = t.vector(3, 2, Some(4), None, Datatype::INT).unwrap();
    t.commit(vec_t).unwrap();
    let t: &'static TypeTable = std::boxed::Box::leak(std::boxed::Box::new(t));
    let count = 5u64;
    let ints = count as usize * 10;
    let red = Red {
        op: ROp::Predef(Op::Sum),
        w: Datatype::INT,
        ext: 4,
        true_lb: 0,
        true_ext: 4,
        size: 4,
    };
    let mut inp: Vec<Vec<i32>> = (0..p)
        .map(|r| (0..ints).map(|i| r as i32 * 100 + i as i32).collect())
        .collect();
    let mut out: Vec<Vec<i32>> = (0..p).map(|_| vec![-1; ints]).collect();
    let mut scratch: Vec<Vec<u64>> = (0..p).map(|_| vec![0u64; 64]).collect();
    let mut ranks: Vec<Rank> = (0..p)
        .map(|r| {
            let ru = r as usize;
            let b = scratch[ru].as_mut_ptr().cast::<u8>();
            Rank::reduction_in(
                RedPlan {
                    kind: RedKind::Allreduce,
                    alg: RedAlg::RecDbl,
                    g: grp(r, p),
                    red,
                    total: count * 6,
                    per: 7,
                    pipe: 7,
                    inp: Some(Span::new(inp[ru].as_mut_ptr().cast(), count, vec_t)),
                    out: Some(Span::new(out[ru].as_mut_ptr().cast(), count, vec_t)),
                    direct: None,
                    conv_in: b,
                    conv_out: b.wrapping_add(64),
                    s: [
                        b.wrapping_add(128),
                        b.wrapping_add(256),
                        b.wrapping_add(384),
                    ],
                },
                t,
            )
        })
        .collect();
    run_in(&mut ranks, t);
    for (r, o) in out.iter().enumerate() {
        for (i, v) in o.iter().enumerate() {
            let in_map = matches!(i % 10, 0 | 1 | 4 | 5 | 8 | 9);
            let want = if in_map {
                (0..p as i32).map(|q| q * 100 + i as i32).sum()
            } else {
                -1
            };
            assert_eq!(*v, want, "rank {r} int {i}");
        }
    }
}

// ---- gather, scatter, allgather, all-to-all -----------------------------------------------------

fn uniform_blocks(b: &mut [i32], count: u64) -> Blocks {
    Blocks::Uniform {
        base: b.as_mut_ptr().cast(),
        count,
        dt: Datatype::INT,
        ext: 4,
    }
}

#[test]
fn gathers_and_scatters() {
    for &p in SIZES {
        for root in [0, p - 1, p / 2] {
            for count in [1u64, 3] {
                for binomial in [false, true] {
                    for in_place in [false, true] {
                        let c = count as usize;
                        // Gather.
                        let mut send: Vec<Vec<i32>> = (0..p)
                            .map(|r| (0..c).map(|i| pattern(r, i)).collect())
                            .collect();
                        let mut recv = vec![-1i32; c * p as usize];
                        if in_place {
                            recv[root as usize * c..(root as usize + 1) * c]
                                .copy_from_slice(&send[root as usize]);
                        }
                        let mut stage: Vec<Vec<u8>> =
                            (0..p).map(|_| vec![0u8; c * 4 * p as usize]).collect();
                        let rb = uniform_blocks(&mut recv, count);
                        let mut ranks: Vec<_> = (0..p)
                            .map(|r| {
                                let ru = r as usize;
                                let own = (!(in_place && r == root)).then_some(Span::new(
                                    send[ru].as_mut_ptr().cast(),
                                    count,
                                    Datatype::INT,
                                ));
                                let g = grp(r, p);
                                Rank::new(if binomial {
                                    Alg::GatherBinomial(GatherBinomial {
                                        g,
                                        root,
                                        own: own.unwrap_or(rb.block(root)),
                                        recv: rb,
                                        stage: stage[ru].as_mut_ptr(),
                                        bsz: count * 4,
                                    })
                                } else {
                                    Alg::GatherLinear(GatherLinear {
                                        g,
                                        root,
                                        own,
                                        recv: rb,
                                    })
                                })
                            })
                            .collect();
                        run(&mut ranks);
                        for r in 0..p {
                            for i in 0..c {
                                assert_eq!(
                                    recv[r as usize * c + i],
                                    pattern(r, i),
                                    "gather p {p} root {root} binomial {binomial}"
                                );
                            }
                        }
                        // Scatter.
                        let mut all: Vec<i32> = (0..p)
                            .flat_map(|r| (0..c).map(move |i| pattern(r, i)))
                            .collect();
                        let mut got: Vec<Vec<i32>> = (0..p).map(|_| vec![-1; c]).collect();
                        let sb = uniform_blocks(&mut all, count);
                        let mut ranks: Vec<_> = (0..p)
                            .map(|r| {
                                let ru = r as usize;
                                let own = (!(in_place && r == root)).then_some(Span::new(
                                    got[ru].as_mut_ptr().cast(),
                                    count,
                                    Datatype::INT,
                                ));
                                let g = grp(r, p);
                                Rank::new(if binomial {
                                    Alg::ScatterBinomial(ScatterBinomial {
                                        g,
                                        root,
                                        send: sb,
                                        own,
                                        stage: stage[ru].as_mut_ptr(),
                                        bsz: count * 4,
                                    })
                                } else {
                                    Alg::ScatterLinear(ScatterLinear {
                                        g,
                                        root,
                                        send: sb,
                                        own,
                                    })
                                })
                            })
                            .collect();
                        run(&mut ranks);
                        for r in 0..p {
                            if in_place && r == root {
                                continue;
                            }
                            for i in 0..c {
                                assert_eq!(
                                    got[r as usize][i],
                                    pattern(r, i),
                                    "scatter p {p} root {root} binomial {binomial}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn allgathers() {
    for &p in SIZES {
        for kind in [AgKind::RecDbl, AgKind::Bruck, AgKind::Ring, AgKind::Linear] {
            if kind == AgKind::RecDbl && !p.is_power_of_two() {
                continue;
            }
            for count in [1u64, 2] {
                for in_place in [false, true] {
                    let c = count as usize;
                    let mut send: Vec<Vec<i32>> = (0..p)
                        .map(|r| (0..c).map(|i| pattern(r, i)).collect())
                        .collect();
                    let mut recv: Vec<Vec<i32>> = (0..p)
                        .map(|r| {
                            let mut v = vec![-1; c * p as usize];
                            if in_place {
                                v[r as usize * c..(r as usize + 1) * c]
                                    .copy_from_slice(&send[r as usize]);
                            }
                            v
                        })
                        .collect();
                    let mut ranks: Vec<_> = (0..p)
                        .map(|r| {
                            let ru = r as usize;
                            Rank::new(Alg::Allgather(Allgather {
                                g: grp(r, p),
                                kind,
                                own: (!in_place).then_some(Span::new(
                                    send[ru].as_mut_ptr().cast(),
                                    count,
                                    Datatype::INT,
                                )),
                                recv: uniform_blocks(&mut recv[ru], count),
                            }))
                        })
                        .collect();
                    run(&mut ranks);
                    for r in 0..p as usize {
                        for q in 0..p {
                            for i in 0..c {
                                assert_eq!(
                                    recv[r][q as usize * c + i],
                                    pattern(q, i),
                                    "{kind:?} p {p} rank {r}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn alltoalls() {
    for &p in SIZES {
        for variant in 0..4 {
            for count in [1u64, 3] {
                let c = count as usize;
                let val = |from: u32, to: u32, i: usize| (from * 100 + to) as i32 * 10 + i as i32;
                let mut send: Vec<Vec<i32>> = (0..p)
                    .map(|r| {
                        (0..p)
                            .flat_map(|t| (0..c).map(move |i| val(r, t, i)))
                            .collect()
                    })
                    .collect();
                let in_place = variant == 3;
                let mut recv: Vec<Vec<i32>> = if in_place {
                    send.clone()
                } else {
                    (0..p).map(|_| vec![-1; c * p as usize]).collect()
                };
                let mut tmp: Vec<Vec<u8>> = (0..p)
                    .map(|_| vec![0u8; 4 * c * 2 * p as usize + 64])
                    .collect();
                let mut ranks: Vec<_> = (0..p)
                    .map(|r| {
                        let ru = r as usize;
                        let g = grp(r, p);
                        let sb = uniform_blocks(&mut send[ru], count);
                        let rb = uniform_blocks(&mut recv[ru], count);
                        let t = tmp[ru].as_mut_ptr();
                        Rank::new(match variant {
                            0 => Alg::Alltoall(Alltoall {
                                g,
                                kind: AaKind::Pairwise,
                                send: sb,
                                recv: rb,
                            }),
                            1 => Alg::Alltoall(Alltoall {
                                g,
                                kind: AaKind::Linear,
                                send: sb,
                                recv: rb,
                            }),
                            2 => {
                                let half = p.div_ceil(2) as usize;
                                let b = c * 4;
                                Alg::AlltoallBruck(AlltoallBruck {
                                    g,
                                    send: sb,
                                    recv: rb,
                                    tmp: t,
                                    sb: t.wrapping_add(b * p as usize),
                                    rb: t.wrapping_add(b * (p as usize + half)),
                                    bsz: b as u64,
                                })
                            }
                            _ => Alg::AlltoallInPlace(AlltoallInPlace {
                                g,
                                recv: rb,
                                tmp: t,
                            }),
                        })
                    })
                    .collect();
                run(&mut ranks);
                for r in 0..p {
                    for q in 0..p {
                        for i in 0..c {
                            assert_eq!(
                                recv[r as usize][q as usize * c + i],
                                val(q, r, i),
                                "variant {variant} p {p} rank {r} from {q}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn tournament_pairs_everyone_once() {
    for p in 1..20u32 {
        let rounds = p - 1 + p % 2;
        let mut met = vec![vec![false; p as usize]; p as usize];
        for t in 0..rounds {
            for r in 0..p {
                let j = tournament(p, t, r);
                if j < p {
                    assert_ne!(j, r);
                    assert_eq!(tournament(p, t, j), r, "p {p} round {t}");
                    assert!(!met[r as usize][j as usize]);
                    met[r as usize][j as usize] = true;
                }
            }
        }
        for r in 0..p as usize {
            for j in 0..p as usize {
                assert_eq!(met[r][j], r != j, "p {p}: {r} and {j}");
            }
        }
    }
}
