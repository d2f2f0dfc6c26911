//! The algorithms, each a small state struct that yields one step's actions at a time.
//!
//! Ranks are communicator ranks; trees are rooted at `root` through virtual ranks
//! `vr = (rank - root) mod size`. Reductions work on the working form ([`Red`]): `n` elements
//! `ext` bytes apart, through pointers to element bases; `Reduce { inout, input }` computes
//! `inout = input op inout`, so an algorithm that keeps rank order puts the lower ranks' data on
//! the left. Algorithms marked commutative-only are never chosen for other operations.
//!
//! Every rank computes the same message boundaries from the same arguments, so a send always
//! meets a receive of the same size; messages between one pair of ranks within one collective are
//! matched in order (one tag per collective, non-overtaking).

use super::exec::{Acts, Red, Span, BATCH, MAX_ACTS};
use super::ints::Ints;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;

/// My rank and the communicator's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grp {
    pub rank: u32,
    pub size: u32,
}

impl Grp {
    /// My virtual rank in a tree rooted at `root`.
    fn vr(&self, root: u32) -> u32 {
        (self.rank + self.size - root) % self.size
    }

    /// The rank of virtual rank `v` in a tree rooted at `root`.
    fn real(&self, v: u32, root: u32) -> u32 {
        (v + root) % self.size
    }

    /// `rank + d` around the ring (`d` may be negative).
    fn ring(&self, d: i64) -> u32 {
        (self.rank as i64 + d).rem_euclid(self.size as i64) as u32
    }
}

fn lowbit(v: u32) -> u32 {
    v & v.wrapping_neg()
}

/// The smallest power of two `>= p`.
fn pow2_above(p: u32) -> u32 {
    p.next_power_of_two()
}

/// Subtree size of virtual rank `v` in a binomial tree of `p`.
fn subtree(v: u32, p: u32) -> u32 {
    if v == 0 {
        p
    } else {
        lowbit(v).min(p - v)
    }
}

/// The peers of batch `k` of `total`, `BATCH` at a time (batch 0 exists even if empty).
fn batch(k: u32, total: u32, per: u32) -> Option<core::ops::Range<u32>> {
    let lo = k.checked_mul(per)?;
    if k > 0 && lo >= total {
        return None;
    }
    Some(lo.min(total)..(lo + per).min(total))
}

/// Non-power-of-two handling of recursive doubling: the first `2 * rem` ranks pair up (even
/// into odd), leaving `pof2` participants with new ranks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fold {
    pub pof2: u32,
    pub rem: u32,
    pub levels: u32,
}

impl Fold {
    pub(crate) fn new(p: u32) -> Fold {
        let pof2 = if p <= 1 {
            1
        } else {
            1 << (31 - p.leading_zeros())
        };
        Fold {
            pof2,
            rem: p - pof2,
            levels: pof2.trailing_zeros(),
        }
    }

    /// Whether rank `r` is in a pair.
    fn folded(&self, r: u32) -> bool {
        r < 2 * self.rem
    }

    /// The new rank of `r`, `None` for the even member of a pair.
    fn new_rank(&self, r: u32) -> Option<u32> {
        if self.folded(r) {
            (r % 2 == 1).then_some(r / 2)
        } else {
            Some(r - self.rem)
        }
    }

    /// The rank of new rank `nr`.
    fn real(&self, nr: u32) -> u32 {
        if nr < self.rem {
            2 * nr + 1
        } else {
            nr + self.rem
        }
    }

    /// The first rank whose data new rank `nr` stands for.
    fn first(&self, nr: u32) -> u32 {
        if nr < self.rem {
            2 * nr
        } else {
            nr + self.rem
        }
    }
}

/// Typed blocks of a buffer, one per rank.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Blocks {
    /// Block `i`: `count` instances of `dt` at `base + i * count * ext`.
    Uniform {
        base: *mut u8,
        count: u64,
        dt: Datatype,
        ext: isize,
    },
    /// Block `i`: `counts[i]` instances of `dt` at `base + displs[i] * ext`.
    V {
        base: *mut u8,
        counts: Ints,
        displs: Ints,
        dt: Datatype,
        ext: isize,
    },
    /// Block `i`: `counts[i]` instances of `types[i]` at `base + displs[i]` bytes.
    W {
        base: *mut u8,
        counts: Ints,
        displs: Ints,
        types: *const i32,
        map: fn(i32) -> Datatype,
    },
}

/// Element `i` of a user's array.
///
/// # Safety
/// The array has more than `i` elements (the collective's contract: arrays of the communicator's
/// size, valid until it completes).
unsafe fn at(p: *const i32, i: u32) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { *p.add(i as usize) }
}

impl Blocks {
    /// Block `i`.
    pub(crate) fn block(&self, i: u32) -> Span {
        // SAFETY (all arms): the arrays have an entry per rank, checked non-null and
        // non-negative when the collective started.
        match *self {
            Blocks::Uniform {
                base,
                count,
                dt,
                ext,
            } => Span::new(
                base.wrapping_offset(i as isize * count as isize * ext),
                count,
                dt,
            ),
            Blocks::V {
                base,
                counts,
                displs,
                dt,
                ext,
            } => unsafe {
                Span::new(
                    base.wrapping_offset(displs.get(i as usize) as isize * ext),
                    counts.get(i as usize) as u64,
                    dt,
                )
            },
            Blocks::W {
                base,
                counts,
                displs,
                types,
                map,
            } => unsafe {
                Span::new(
                    base.wrapping_offset(displs.get(i as usize) as isize),
                    counts.get(i as usize) as u64,
                    map(at(types, i)),
                )
            },
        }
    }

    /// Blocks `i..i + n` as one span (uniform blocks only).
    fn run(&self, i: u32, n: u32) -> Span {
        let mut s = self.block(i);
        s.count *= n as u64;
        s
    }
}

/// Where the blocks of a reduce-scatter fall in one segment `a..b` of the whole vector.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counts {
    /// Every rank gets `n` elements.
    Block(u64),
    /// Rank `i` gets `counts[i]` times the multiplier (working elements per instance).
    V(Ints, u64),
}

impl Counts {
    /// Start of rank `i`'s block in the whole vector (`i` may be the size: the total).
    pub(crate) fn disp(&self, i: u32) -> u64 {
        match *self {
            Counts::Block(n) => i as u64 * n,
            // SAFETY: an entry per rank, checked when the collective started.
            Counts::V(c, m) => (0..i)
                .map(|j| unsafe { c.get(j as usize) } as u64 * m)
                .sum(),
        }
    }

    pub(crate) fn count(&self, i: u32) -> u64 {
        match *self {
            Counts::Block(n) => n,
            // SAFETY: as above.
            Counts::V(c, m) => unsafe { c.get(i as usize) as u64 * m },
        }
    }
}

/// Blocks of a reduce-scatter within segment `a..b`, relative to `a`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegBlocks {
    pub counts: Counts,
    pub a: u64,
    pub b: u64,
}

impl SegBlocks {
    /// Start of block `i` in the segment (`i` may be the size: the segment's end).
    fn lo(&self, i: u32) -> u64 {
        self.counts.disp(i).clamp(self.a, self.b) - self.a
    }

    fn range(&self, i: u32) -> (u64, u64) {
        let lo = self.lo(i);
        let hi = (self.counts.disp(i) + self.counts.count(i)).clamp(self.a, self.b) - self.a;
        (lo, hi - lo)
    }
}

// ---- barrier ------------------------------------------------------------------------------------

/// Dissemination: in round `k`, signal `rank + 2^k` and hear from `rank - 2^k`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dissemination {
    pub g: Grp,
}

impl Dissemination {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let d = 1u64 << k.min(40);
        if d >= self.g.size as u64 {
            return false;
        }
        a.recv(self.g.ring(-(d as i64)), Span::empty());
        a.send(self.g.ring(d as i64), Span::empty());
        true
    }
}

/// Recursive doubling (pairwise exchanges with `rank ^ 2^k`), folding non-powers of two.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecDblBarrier {
    pub g: Grp,
    pub fold: Fold,
}

impl RecDblBarrier {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (r, f) = (self.g.rank, self.fold);
        let e = Span::empty();
        if k == 0 {
            if f.folded(r) {
                match r % 2 {
                    0 => a.send(r + 1, e),
                    _ => a.recv(r - 1, e),
                }
            }
        } else if k <= f.levels {
            if let Some(nr) = f.new_rank(r) {
                let peer = f.real(nr ^ (1 << (k - 1)));
                a.send(peer, e);
                a.recv(peer, e);
            }
        } else if k == f.levels + 1 {
            if f.folded(r) {
                match r % 2 {
                    0 => a.recv(r + 1, e),
                    _ => a.send(r - 1, e),
                }
            }
        } else {
            return false;
        }
        true
    }
}

/// Linear (fan-in, fan-out): every rank signals rank 0, which answers each once all have come.
/// A rank other than 0 waits once; with more ranks than cores, fewer waits are fewer handoffs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LinearBarrier {
    pub g: Grp,
}

impl LinearBarrier {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (r, e) = (self.g.rank, Span::empty());
        if r != 0 {
            match k {
                0 => a.send(0, e),
                1 => a.recv(0, e),
                _ => return false,
            }
            return true;
        }
        // Rank 0: the others' signals a batch at a time, then the answers.
        let (others, per) = (self.g.size - 1, 2 * BATCH);
        let hear = others.div_ceil(per).max(1);
        if k < hear {
            for j in batch(k, others, per).into_iter().flatten() {
                a.recv(1 + j, e);
            }
            return true;
        }
        let Some(peers) = batch(k - hear, others, per) else {
            return false;
        };
        for j in peers {
            a.send(1 + j, e);
        }
        true
    }
}

// ---- broadcast ----------------------------------------------------------------------------------

/// Binomial tree: receive from the parent, then send to every child at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BcastBinomial {
    pub g: Grp,
    pub root: u32,
    pub buf: Span,
}

impl BcastBinomial {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, v) = (self.g.size, self.g.vr(self.root));
        match k {
            0 => {
                if v != 0 {
                    a.recv(self.g.real(v - lowbit(v), self.root), self.buf);
                }
            }
            1 => {
                let mut mask = if v == 0 { pow2_above(p) } else { lowbit(v) } >> 1;
                while mask > 0 {
                    if v + mask < p {
                        a.send(self.g.real(v + mask, self.root), self.buf);
                    }
                    mask >>= 1;
                }
            }
            _ => return false,
        }
        true
    }
}

/// The packed bytes of a typed buffer, addressed by stream position: a dense buffer directly, any
/// other through staging (communicators of one architecture: windows travel as raw bytes, so
/// every rank cuts them alike whatever datatype it uses).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bytes {
    /// The user's buffer.
    pub user: Span,
    /// Its packed bytes, when they lie contiguous in memory.
    pub dense: Option<*mut u8>,
}

impl Bytes {
    /// Stream bytes `lo..lo + len`, in memory or in staging at `stage`.
    fn window(&self, lo: u64, len: u64, stage: *mut u8) -> Span {
        match self.dense {
            Some(d) => Span::bytes(d.wrapping_add(lo as usize), len),
            None => Span::bytes(stage, len),
        }
    }

    /// Packs stream bytes `lo..lo + len` into `stage` (nothing when dense).
    fn pack(&self, lo: u64, len: u64, stage: *mut u8, a: &mut Acts) {
        if self.dense.is_none() {
            a.copy_range(Span::bytes(stage, len), 0, self.user, lo, len);
        }
    }

    /// Unpacks `stage` into stream bytes `lo..lo + len` (nothing when dense).
    fn unpack(&self, lo: u64, len: u64, stage: *mut u8, a: &mut Acts) {
        if self.dense.is_none() {
            a.copy_range(self.user, lo, Span::bytes(stage, len), 0, len);
        }
    }
}

/// A pipelined chain: window `k` of the packed bytes goes from each rank to the next while
/// window `k + 1` arrives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BcastChain {
    pub g: Grp,
    pub root: u32,
    pub data: Bytes,
    /// Packed bytes, and bytes per window.
    pub total: u64,
    pub sub: u64,
    /// Two staging slots of `sub` bytes (when the buffer is not dense).
    pub slots: [*mut u8; 2],
}

impl BcastChain {
    fn win(&self, i: u64) -> (u64, u64) {
        let lo = i * self.sub;
        (lo, self.sub.min(self.total - lo))
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, v) = (self.g.size, self.g.vr(self.root));
        let k = k as u64;
        let nseg = self.total.div_ceil(self.sub).max(1);
        if p == 1 || k > nseg {
            return false;
        }
        let (prev, next) = (
            self.g.real((v + p - 1) % p, self.root),
            self.g.real((v + 1) % p, self.root),
        );
        let slot = |i: u64| self.slots[(i % 2) as usize];
        if v == 0 {
            if k == nseg {
                return false;
            }
            let (lo, len) = self.win(k);
            self.data.pack(lo, len, slot(k), a);
            a.send(next, self.data.window(lo, len, slot(k)));
            return true;
        }
        if k >= 1 {
            let (lo, len) = self.win(k - 1);
            self.data.unpack(lo, len, slot(k - 1), a);
            if v != p - 1 {
                a.send(next, self.data.window(lo, len, slot(k - 1)));
            }
        }
        if k < nseg {
            let (lo, len) = self.win(k);
            a.recv(prev, self.data.window(lo, len, slot(k)));
        }
        true
    }
}

/// Scatter of `size` windows down a binomial tree, then a ring allgather of the windows (van de
/// Geijn). A buffer that is not dense is staged whole.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BcastScatterAllgather {
    pub g: Grp,
    pub root: u32,
    pub data: Bytes,
    pub total: u64,
    /// Bytes per chunk.
    pub chunk: u64,
    /// Staging of the whole message (when the buffer is not dense).
    pub stage: *mut u8,
}

impl BcastScatterAllgather {
    /// Chunks `i..i + n` (virtual ranks' chunks), clipped to the message.
    fn chunks(&self, i: u32, n: u32) -> Span {
        let lo = (i as u64 * self.chunk).min(self.total);
        let hi = ((i + n) as u64 * self.chunk).min(self.total);
        let base = self.data.dense.unwrap_or(self.stage);
        Span::bytes(base.wrapping_add(lo as usize), hi - lo)
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, v, root) = (self.g.size, self.g.vr(self.root), self.root);
        match k {
            0 => {
                if v == 0 {
                    self.data.pack(0, self.total, self.stage, a);
                } else {
                    let parent = self.g.real(v - lowbit(v), root);
                    a.recv(parent, self.chunks(v, subtree(v, p)));
                }
            }
            1 => {
                let mut mask = if v == 0 { pow2_above(p) } else { lowbit(v) } >> 1;
                while mask > 0 {
                    let c = v + mask;
                    if c < p {
                        a.send(self.g.real(c, root), self.chunks(c, mask.min(p - c)));
                    }
                    mask >>= 1;
                }
            }
            _ if k - 2 + 1 < p => {
                let t = k - 2;
                let right = self.g.real((v + 1) % p, root);
                let left = self.g.real((v + p - 1) % p, root);
                a.send(right, self.chunks((v + p - t % p) % p, 1));
                a.recv(left, self.chunks((v + 2 * p - t % p - 1) % p, 1));
            }
            _ if k - 2 + 1 == p => {
                if v != 0 {
                    self.data.unpack(0, self.total, self.stage, a);
                }
            }
            _ => return false,
        }
        true
    }
}

// ---- reductions ---------------------------------------------------------------------------------

/// Binomial-tree reduce. Commutative operations use the tree rooted at `root`; others the tree
/// rooted at rank 0, where every subtree is a range of ranks combined in order, and rank 0 sends
/// the result to `root`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReduceBinomial {
    g: Grp,
    red: Red,
    root: u32,
    tree_root: u32,
    commute: bool,
    /// This rank's input.
    src: *mut u8,
    /// The root's output (null elsewhere).
    out: *mut u8,
    acc: *mut u8,
    other: *mut u8,
    n: u64,
    mask: u32,
    /// A child's data is in `other`, to combine.
    received: bool,
    /// 0: tree, 1: delivery to the root, 2: done.
    stage: u8,
}

impl ReduceBinomial {
    /// `src` is this rank's input, `out` the root's output (or, with `acc`, a buffer of this
    /// rank to accumulate in); `s0`, `s1` scratch of `n` elements.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        g: Grp,
        red: Red,
        root: u32,
        src: *mut u8,
        out: Option<*mut u8>,
        acc: Option<*mut u8>,
        s0: *mut u8,
        s1: *mut u8,
        n: u64,
    ) -> ReduceBinomial {
        let commute = red.op.commutes();
        let tree_root = if commute { root } else { 0 };
        let out = out.unwrap_or(core::ptr::null_mut());
        let acc = if g.rank == root && tree_root == root {
            out
        } else {
            acc.unwrap_or(s0)
        };
        ReduceBinomial {
            g,
            red,
            root,
            tree_root,
            commute,
            src,
            out,
            acc,
            other: if core::ptr::eq(acc, s1) { s0 } else { s1 },
            n,
            mask: 1,
            received: false,
            stage: 0,
        }
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, n, red) = (self.g.size, self.n, self.red);
        if k == 0 {
            a.copy(red.span(self.acc, n), red.span(self.src, n));
        }
        if self.received {
            self.received = false;
            if self.commute {
                a.reduce(self.acc, self.other, n);
            } else {
                // The child's ranks follow ours: acc = acc op child.
                a.reduce(self.other, self.acc, n);
                core::mem::swap(&mut self.acc, &mut self.other);
            }
        }
        let v = self.g.vr(self.tree_root);
        if self.stage == 0 {
            while self.mask < p {
                let m = self.mask;
                self.mask <<= 1;
                if v & m != 0 {
                    a.send(self.g.real(v - m, self.tree_root), red.span(self.acc, n));
                    self.stage = 1;
                    return true;
                }
                if v + m < p {
                    a.recv(self.g.real(v + m, self.tree_root), red.span(self.other, n));
                    self.received = true;
                    return true;
                }
            }
            self.stage = 1;
        }
        if self.stage == 1 {
            self.stage = 2;
            let r = self.g.rank;
            if self.tree_root != self.root {
                if r == self.tree_root {
                    a.send(self.root, red.span(self.acc, n));
                }
                if r == self.root {
                    a.recv(self.tree_root, red.span(self.out, n));
                }
            } else if r == self.root {
                a.copy(red.span(self.out, n), red.span(self.acc, n));
            }
            return true;
        }
        false
    }
}

/// A pipelined chain towards the root (commutative operations): each rank combines segment `k`
/// from the next rank with its own and passes it on while segment `k + 1` arrives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReduceChain {
    pub g: Grp,
    pub red: Red,
    pub root: u32,
    pub src: *mut u8,
    pub out: *mut u8,
    pub slots: [*mut u8; 2],
    pub n: u64,
    /// Elements per pipeline segment.
    pub sub: u64,
}

impl ReduceChain {
    fn seg(&self, i: u64) -> (u64, u64) {
        let lo = i * self.sub;
        (lo, self.sub.min(self.n - lo))
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, v, red) = (self.g.size, self.g.vr(self.root), self.red);
        let k = k as u64;
        let nseg = self.n.div_ceil(self.sub).max(1);
        if p == 1 {
            if k == 0 {
                a.copy(red.span(self.out, self.n), red.span(self.src, self.n));
                return true;
            }
            return false;
        }
        let prev = self.g.real(v.wrapping_sub(1) % p, self.root);
        let next = self.g.real((v + 1) % p, self.root);
        if v == p - 1 {
            if k >= nseg {
                return false;
            }
            let (lo, len) = self.seg(k);
            a.send(prev, red.span(red.at(self.src, lo), len));
            return true;
        }
        if k > nseg {
            return false;
        }
        if v == 0 && k == 0 {
            a.copy(red.span(self.out, self.n), red.span(self.src, self.n));
        }
        if k >= 1 {
            let (lo, len) = self.seg(k - 1);
            let slot = self.slots[((k - 1) % 2) as usize];
            if v == 0 {
                a.reduce(red.at(self.out, lo), slot, len);
            } else {
                a.reduce(slot, red.at(self.src, lo), len);
                a.send(prev, red.span(slot, len));
            }
        }
        if k < nseg {
            let (_, len) = self.seg(k);
            a.recv(next, red.span(self.slots[(k % 2) as usize], len));
        }
        true
    }
}

/// Recursive doubling allreduce with the non-power-of-two fold; keeps rank order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllreduceRecDbl {
    pub g: Grp,
    pub red: Red,
    pub fold: Fold,
    pub src: *mut u8,
    pub out: *mut u8,
    pub tmp: *mut u8,
    pub n: u64,
    /// The result is in `tmp` (after a non-commutative combine).
    pub swapped: bool,
}

impl AllreduceRecDbl {
    fn bufs(&self) -> (*mut u8, *mut u8) {
        if self.swapped {
            (self.tmp, self.out)
        } else {
            (self.out, self.tmp)
        }
    }

    /// Combines what arrived in the other buffer from a partner `lower` or not in rank order.
    fn combine(&mut self, lower: bool, a: &mut Acts) {
        let (acc, other) = self.bufs();
        if lower || self.red.op.commutes() {
            a.reduce(acc, other, self.n);
        } else {
            a.reduce(other, acc, self.n);
            self.swapped = !self.swapped;
        }
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (r, f, n, red) = (self.g.rank, self.fold, self.n, self.red);
        let nr = f.new_rank(r);
        let l = f.levels;
        if k == 0 {
            a.copy(red.span(self.out, n), red.span(self.src, n));
            if f.folded(r) {
                match r % 2 {
                    0 => a.send(r + 1, red.span(self.out, n)),
                    _ => a.recv(r - 1, red.span(self.tmp, n)),
                }
            }
            return true;
        }
        if k <= l + 1 {
            match (k, nr) {
                (1, Some(_)) if f.folded(r) => self.combine(true, a),
                (2.., Some(nr)) => {
                    let peer = nr ^ (1 << (k - 2));
                    self.combine(peer < nr, a);
                }
                _ => {}
            }
            if let (true, Some(nr)) = (k <= l, nr) {
                let peer = f.real(nr ^ (1 << (k - 1)));
                let (acc, other) = self.bufs();
                a.send(peer, red.span(acc, n));
                a.recv(peer, red.span(other, n));
            }
            if k == l + 1 && f.folded(r) {
                match r % 2 {
                    0 => a.recv(r + 1, red.span(self.out, n)),
                    _ => a.send(r - 1, red.span(self.bufs().0, n)),
                }
            }
            return true;
        }
        if k == l + 2 {
            let (acc, _) = self.bufs();
            a.copy(red.span(self.out, n), red.span(acc, n));
            return true;
        }
        false
    }
}

/// Balanced split of `n` elements into `p` blocks: block `i`'s start.
fn split(n: u64, p: u32, i: u32) -> u64 {
    let (q, r) = (n / p as u64, n % p as u64);
    i as u64 * q + (i as u64).min(r)
}

/// Ring allreduce (commutative): a ring reduce-scatter of `size` blocks, then a ring allgather.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllreduceRing {
    pub g: Grp,
    pub red: Red,
    pub src: *mut u8,
    pub out: *mut u8,
    pub tmp: *mut u8,
    pub n: u64,
}

impl AllreduceRing {
    fn block(&self, i: u32) -> (u64, u64) {
        let p = self.g.size;
        let lo = split(self.n, p, i % p);
        (lo, split(self.n, p, i % p + 1) - lo)
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, red) = (self.g.size, self.red);
        let (right, left) = (self.g.ring(1), self.g.ring(-1));
        let b = |d: i64| self.g.ring(d);
        if k == 0 {
            a.copy(red.span(self.out, self.n), red.span(self.src, self.n));
        }
        if p == 1 {
            return k == 0;
        }
        if k >= 2 * p - 2 {
            return false;
        }
        if k >= 1 && k < p {
            let (lo, len) = self.block(b(-(k as i64)));
            a.reduce(red.at(self.out, lo), self.tmp, len);
        }
        if k < p - 1 {
            let (lo, len) = self.block(b(-(k as i64)));
            a.send(right, red.span(red.at(self.out, lo), len));
            let (_, len) = self.block(b(-(k as i64) - 1));
            a.recv(left, red.span(self.tmp, len));
        } else {
            let t = (k - (p - 1)) as i64;
            let (lo, len) = self.block(b(1 - t));
            a.send(right, red.span(red.at(self.out, lo), len));
            let (lo, len) = self.block(b(-t));
            a.recv(left, red.span(red.at(self.out, lo), len));
        }
        true
    }
}

/// Rabenseifner (commutative): recursive-halving reduce-scatter and recursive-doubling
/// allgather over `pof2` blocks, with the non-power-of-two fold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rabenseifner {
    g: Grp,
    red: Red,
    fold: Fold,
    src: *mut u8,
    out: *mut u8,
    tmp: *mut u8,
    n: u64,
    mask: u32,
    send_idx: u32,
    recv_idx: u32,
    last_idx: u32,
    /// Elements received into `tmp` to reduce into `out` at this offset.
    pending: Option<(u64, u64)>,
}

impl Rabenseifner {
    pub(crate) fn new(
        g: Grp,
        red: Red,
        src: *mut u8,
        out: *mut u8,
        tmp: *mut u8,
        n: u64,
    ) -> Rabenseifner {
        let fold = Fold::new(g.size);
        Rabenseifner {
            g,
            red,
            fold,
            src,
            out,
            tmp,
            n,
            mask: 1,
            send_idx: 0,
            recv_idx: 0,
            last_idx: fold.pof2,
            pending: None,
        }
    }

    fn disp(&self, i: u32) -> u64 {
        split(self.n, self.fold.pof2, i)
    }

    fn range(&self, lo: u32, hi: u32) -> (u64, u64) {
        (self.disp(lo), self.disp(hi) - self.disp(lo))
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (r, f, n, red) = (self.g.rank, self.fold, self.n, self.red);
        let l = f.levels;
        if k == 0 {
            a.copy(red.span(self.out, n), red.span(self.src, n));
            if f.folded(r) {
                match r % 2 {
                    0 => a.send(r + 1, red.span(self.out, n)),
                    _ => a.recv(r - 1, red.span(self.tmp, n)),
                }
            }
            return true;
        }
        if k == 1 && f.folded(r) && r % 2 == 1 {
            a.reduce(self.out, self.tmp, n);
        }
        if k > 2 * l + 1 {
            return false;
        }
        let Some(nr) = f.new_rank(r) else {
            if k == 2 * l + 1 {
                a.recv(r + 1, red.span(self.out, n));
            }
            return true;
        };
        if let Some((lo, len)) = self.pending.take() {
            a.reduce(red.at(self.out, lo), self.tmp, len);
        }
        let pof2 = f.pof2;
        if k <= l {
            // Reduce-scatter level k - 1.
            let mask = self.mask;
            let peer = f.real(nr ^ mask);
            let (send, recv) = if nr < nr ^ mask {
                self.send_idx = self.recv_idx + pof2 / (mask * 2);
                (
                    self.range(self.send_idx, self.last_idx),
                    self.range(self.recv_idx, self.send_idx),
                )
            } else {
                self.recv_idx = self.send_idx + pof2 / (mask * 2);
                (
                    self.range(self.send_idx, self.recv_idx),
                    self.range(self.recv_idx, self.last_idx),
                )
            };
            a.send(peer, red.span(red.at(self.out, send.0), send.1));
            a.recv(peer, red.span(self.tmp, recv.1));
            self.pending = Some(recv);
            self.send_idx = self.recv_idx;
            self.mask <<= 1;
            if self.mask < pof2 {
                self.last_idx = self.recv_idx + pof2 / self.mask;
            }
        } else if k <= 2 * l {
            // Allgather level k - l - 1.
            if k == l + 1 {
                self.mask >>= 1;
            }
            let mask = self.mask;
            let peer = f.real(nr ^ mask);
            let (send, recv) = if nr < nr ^ mask {
                if mask != pof2 / 2 {
                    self.last_idx += pof2 / (mask * 2);
                }
                self.recv_idx = self.send_idx + pof2 / (mask * 2);
                (
                    self.range(self.send_idx, self.recv_idx),
                    self.range(self.recv_idx, self.last_idx),
                )
            } else {
                self.recv_idx = self.send_idx - pof2 / (mask * 2);
                (
                    self.range(self.send_idx, self.last_idx),
                    self.range(self.recv_idx, self.send_idx),
                )
            };
            a.send(peer, red.span(red.at(self.out, send.0), send.1));
            a.recv(peer, red.span(red.at(self.out, recv.0), recv.1));
            if nr > nr ^ mask {
                self.send_idx = self.recv_idx;
            }
            self.mask >>= 1;
        } else if f.folded(r) {
            a.send(r - 1, red.span(self.out, n));
        }
        true
    }
}

/// Two algorithms one after the other (reduce then broadcast; reduce then scatter).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Then<A, B> {
    pub first: A,
    pub second: B,
    /// The step at which `second` started.
    pub switched: Option<u32>,
}

/// Reduce-scatter (ring, commutative): block `rank - s - 1` travels right in step `s`, gathering
/// each rank's contribution, so block `rank` ends at `rank`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RsRing {
    pub g: Grp,
    pub red: Red,
    pub src: *mut u8,
    pub out: *mut u8,
    pub blocks: SegBlocks,
    pub slots: [*mut u8; 2],
}

impl RsRing {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, red) = (self.g.size, self.red);
        let blk = |d: i64| self.blocks.range(self.g.ring(d));
        let k64 = k as i64;
        if p == 1 {
            if k == 0 {
                let (lo, len) = blk(0);
                a.copy(red.span(self.out, len), red.span(red.at(self.src, lo), len));
                return true;
            }
            return false;
        }
        if k >= p {
            return false;
        }
        let (right, left) = (self.g.ring(1), self.g.ring(-1));
        if k == 0 {
            let (lo, len) = blk(-1);
            a.send(right, red.span(red.at(self.src, lo), len));
        } else {
            let slot = self.slots[((k - 1) % 2) as usize];
            let (lo, len) = blk(-k64 - 1);
            a.reduce(slot, red.at(self.src, lo), len);
            if k == p - 1 {
                a.copy(red.span(self.out, len), red.span(slot, len));
                return true;
            }
            a.send(right, red.span(slot, len));
        }
        let (_, len) = blk(-k64 - 2);
        a.recv(left, red.span(self.slots[(k % 2) as usize], len));
        true
    }
}

/// Reduce-scatter by recursive halving (commutative), with the fold; the blocks of a pair are
/// handled together by its odd member.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RsHalving {
    g: Grp,
    red: Red,
    fold: Fold,
    src: *mut u8,
    out: *mut u8,
    blocks: SegBlocks,
    /// Whole segment: the running result, and what arrives.
    res: *mut u8,
    rbuf: *mut u8,
    n: u64,
    mask: u32,
    send_idx: u32,
    recv_idx: u32,
    last_idx: u32,
    pending: Option<(u64, u64)>,
}

impl RsHalving {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        g: Grp,
        red: Red,
        src: *mut u8,
        out: *mut u8,
        blocks: SegBlocks,
        res: *mut u8,
        rbuf: *mut u8,
    ) -> RsHalving {
        let fold = Fold::new(g.size);
        RsHalving {
            g,
            red,
            fold,
            src,
            out,
            blocks,
            res,
            rbuf,
            n: blocks.b - blocks.a,
            mask: fold.pof2 >> 1,
            send_idx: 0,
            recv_idx: 0,
            last_idx: fold.pof2,
            pending: None,
        }
    }

    /// Start of new rank `i`'s blocks in the segment (`pof2`: its end).
    fn ndisp(&self, i: u32) -> u64 {
        if i >= self.fold.pof2 {
            return self.n;
        }
        self.blocks.lo(self.fold.first(i))
    }

    fn range(&self, lo: u32, hi: u32) -> (u64, u64) {
        (self.ndisp(lo), self.ndisp(hi) - self.ndisp(lo))
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (r, f, n, red) = (self.g.rank, self.fold, self.n, self.red);
        let l = f.levels;
        if k == 0 {
            a.copy(red.span(self.res, n), red.span(self.src, n));
            if f.folded(r) {
                match r % 2 {
                    0 => a.send(r + 1, red.span(self.res, n)),
                    _ => a.recv(r - 1, red.span(self.rbuf, n)),
                }
            }
            return true;
        }
        if k > l + 1 {
            return false;
        }
        if k == 1 && f.folded(r) && r % 2 == 1 {
            a.reduce(self.res, self.rbuf, n);
        }
        let nr = f.new_rank(r);
        if let Some((lo, len)) = self.pending.take() {
            a.reduce(red.at(self.res, lo), red.at(self.rbuf, lo), len);
        }
        if let (true, Some(nr)) = (k <= l, nr) {
            let mask = self.mask;
            let peer = f.real(nr ^ mask);
            let (send, recv) = if nr < nr ^ mask {
                self.send_idx = self.recv_idx + mask;
                (
                    self.range(self.send_idx, self.last_idx),
                    self.range(self.recv_idx, self.send_idx),
                )
            } else {
                self.recv_idx = self.send_idx + mask;
                (
                    self.range(self.send_idx, self.recv_idx),
                    self.range(self.recv_idx, self.last_idx),
                )
            };
            a.send(peer, red.span(red.at(self.res, send.0), send.1));
            a.recv(peer, red.span(red.at(self.rbuf, recv.0), recv.1));
            self.pending = Some(recv);
            self.send_idx = self.recv_idx;
            self.last_idx = self.recv_idx + mask;
            self.mask >>= 1;
        }
        if k == l + 1 {
            let (lo, len) = self.blocks.range(r);
            if f.folded(r) && r % 2 == 0 {
                a.recv(r + 1, red.span(self.out, len));
            } else {
                a.copy(red.span(self.out, len), red.span(red.at(self.res, lo), len));
                if f.folded(r) {
                    let (lo, len) = self.blocks.range(r - 1);
                    a.send(r - 1, red.span(red.at(self.res, lo), len));
                }
            }
        }
        true
    }
}

/// The scatter of a reduce-scatter's result from rank 0 (after an ordered reduce there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RsScatter {
    pub g: Grp,
    pub red: Red,
    /// The whole segment's result at rank 0.
    pub full: *mut u8,
    pub out: *mut u8,
    pub blocks: SegBlocks,
}

impl RsScatter {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r, red) = (self.g.size, self.g.rank, self.red);
        if r != 0 {
            if k > 0 {
                return false;
            }
            let (_, len) = self.blocks.range(r);
            a.recv(0, red.span(self.out, len));
            return true;
        }
        let Some(peers) = batch(k, p, 2 * BATCH) else {
            return false;
        };
        for i in peers {
            let (lo, len) = self.blocks.range(i);
            let s = red.span(red.at(self.full, lo), len);
            if i == 0 {
                a.copy(red.span(self.out, len), s);
            } else {
                a.send(i, s);
            }
        }
        true
    }
}

/// Inclusive or exclusive scan by recursive doubling; keeps rank order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanRecDbl {
    pub g: Grp,
    pub red: Red,
    pub src: *mut u8,
    pub out: *mut u8,
    /// Reduction over this rank's current hypercube block, and what arrives.
    pub partial: *mut u8,
    pub tmp: *mut u8,
    pub n: u64,
    pub exclusive: bool,
    /// Exclusive scan: nothing from lower ranks yet.
    pub first: bool,
    /// The partner of the last exchange was lower.
    pub pending: Option<bool>,
}

impl ScanRecDbl {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r, n, red) = (self.g.size, self.g.rank, self.n, self.red);
        if k == 0 {
            a.copy(red.span(self.partial, n), red.span(self.src, n));
            if !self.exclusive {
                a.copy(red.span(self.out, n), red.span(self.src, n));
            }
        }
        if let Some(lower) = self.pending.take() {
            if lower {
                a.reduce(self.partial, self.tmp, n);
                if self.exclusive && self.first {
                    a.copy(red.span(self.out, n), red.span(self.tmp, n));
                    self.first = false;
                } else {
                    a.reduce(self.out, self.tmp, n);
                }
            } else if red.op.commutes() {
                a.reduce(self.partial, self.tmp, n);
            } else {
                a.reduce(self.tmp, self.partial, n);
                core::mem::swap(&mut self.partial, &mut self.tmp);
            }
        }
        let mask = 1u64 << k.min(40);
        if mask >= p as u64 {
            return k == 0 || mask < 2 * p as u64;
        }
        let peer = r ^ mask as u32;
        if peer < p {
            a.send(peer, red.span(self.partial, n));
            a.recv(peer, red.span(self.tmp, n));
            self.pending = Some(peer < r);
        }
        true
    }
}

/// Scan along the chain of ranks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanLinear {
    pub g: Grp,
    pub red: Red,
    pub src: *mut u8,
    pub out: *mut u8,
    pub tmp: *mut u8,
    pub n: u64,
    pub exclusive: bool,
}

impl ScanLinear {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r, n, red) = (self.g.size, self.g.rank, self.n, self.red);
        let last = r + 1 == p;
        match (k, self.exclusive) {
            (0, false) => {
                a.copy(red.span(self.out, n), red.span(self.src, n));
                if r > 0 {
                    a.recv(r - 1, red.span(self.tmp, n));
                } else if !last {
                    a.send(1, red.span(self.out, n));
                }
            }
            (1, false) if r > 0 => {
                a.reduce(self.out, self.tmp, n);
                if !last {
                    a.send(r + 1, red.span(self.out, n));
                }
            }
            (0, true) => {
                if r > 0 {
                    a.copy(red.span(self.tmp, n), red.span(self.src, n));
                    a.recv(r - 1, red.span(self.out, n));
                } else if !last {
                    a.send(1, red.span(self.src, n));
                }
            }
            (1, true) if r > 0 && !last => {
                a.reduce(self.tmp, self.out, n);
                a.send(r + 1, red.span(self.tmp, n));
            }
            _ => return false,
        }
        true
    }
}

// ---- gather and scatter -------------------------------------------------------------------------

/// Linear gather: every rank sends to the root, which receives a batch at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GatherLinear {
    pub g: Grp,
    pub root: u32,
    /// This rank's data (`None`: in place at the root).
    pub own: Option<Span>,
    pub recv: Blocks,
}

impl GatherLinear {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r, root) = (self.g.size, self.g.rank, self.root);
        if r != root {
            if k > 0 {
                return false;
            }
            if let Some(s) = self.own {
                a.send(root, s);
            }
            return true;
        }
        if k == 0 {
            if let Some(s) = self.own {
                a.copy(self.recv.block(root), s);
            }
        }
        let Some(peers) = batch(k, p - 1, 2 * BATCH) else {
            return false;
        };
        for j in peers {
            let i = (root + 1 + j) % p;
            a.recv(i, self.recv.block(i));
        }
        true
    }
}

/// Linear scatter: the root sends every rank its block, a batch at a time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScatterLinear {
    pub g: Grp,
    pub root: u32,
    pub send: Blocks,
    /// This rank's block (`None`: in place at the root).
    pub own: Option<Span>,
}

impl ScatterLinear {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r, root) = (self.g.size, self.g.rank, self.root);
        if r != root {
            if k > 0 {
                return false;
            }
            if let Some(s) = self.own {
                a.recv(root, s);
            }
            return true;
        }
        if k == 0 {
            if let Some(s) = self.own {
                a.copy(s, self.send.block(root));
            }
        }
        let Some(peers) = batch(k, p - 1, 2 * BATCH) else {
            return false;
        };
        for j in peers {
            let i = (root + 1 + j) % p;
            a.send(i, self.send.block(i));
        }
        true
    }
}

/// Binomial gather through packed staging (communicators of one architecture): each rank
/// collects its subtree's blocks, in virtual-rank order, and passes them up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GatherBinomial {
    pub g: Grp,
    pub root: u32,
    /// This rank's data (at the root in place: its block of `recv`).
    pub own: Span,
    pub recv: Blocks,
    pub stage: *mut u8,
    /// Packed bytes of one block.
    pub bsz: u64,
}

impl GatherBinomial {
    fn staged(&self, v: u32, n: u32) -> Span {
        Span::bytes(
            self.stage.wrapping_add((v as u64 * self.bsz) as usize),
            n as u64 * self.bsz,
        )
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, root) = (self.g.size, self.root);
        let v = self.g.vr(root);
        if k == 0 {
            a.copy(self.staged(0, 1), self.own);
            let lim = if v == 0 { pow2_above(p) } else { lowbit(v) };
            let mut mask = 1;
            while mask < lim {
                let c = v + mask;
                if c < p {
                    a.recv(self.g.real(c, root), self.staged(mask, mask.min(p - c)));
                }
                mask <<= 1;
            }
            return true;
        }
        if v != 0 {
            if k == 1 {
                a.send(
                    self.g.real(v - lowbit(v), root),
                    self.staged(0, subtree(v, p)),
                );
                return true;
            }
            return false;
        }
        let Some(range) = batch(k - 1, p, (MAX_ACTS - 2) as u32) else {
            return false;
        };
        for j in range {
            a.copy(self.recv.block(self.g.real(j, root)), self.staged(j, 1));
        }
        true
    }
}

/// Binomial scatter through packed staging (communicators of one architecture).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScatterBinomial {
    pub g: Grp,
    pub root: u32,
    pub send: Blocks,
    /// This rank's block (`None`: in place at the root).
    pub own: Option<Span>,
    pub stage: *mut u8,
    pub bsz: u64,
}

impl ScatterBinomial {
    fn staged(&self, v: u32, n: u32) -> Span {
        Span::bytes(
            self.stage.wrapping_add((v as u64 * self.bsz) as usize),
            n as u64 * self.bsz,
        )
    }

    fn send_down(&self, v: u32, a: &mut Acts) {
        let p = self.g.size;
        let mut mask = if v == 0 { pow2_above(p) } else { lowbit(v) } >> 1;
        while mask > 0 {
            let c = v + mask;
            if c < p {
                a.send(
                    self.g.real(c, self.root),
                    self.staged(mask, mask.min(p - c)),
                );
            }
            mask >>= 1;
        }
        if let Some(s) = self.own {
            a.copy(s, self.staged(0, 1));
        }
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, root) = (self.g.size, self.root);
        let v = self.g.vr(root);
        if v != 0 {
            match k {
                0 => a.recv(
                    self.g.real(v - lowbit(v), root),
                    self.staged(0, subtree(v, p)),
                ),
                1 => self.send_down(v, a),
                _ => return false,
            }
            return true;
        }
        let per = (MAX_ACTS - 2) as u32;
        let nb = p.div_ceil(per);
        if k < nb {
            for j in batch(k, p, per).unwrap_or(0..0) {
                a.copy(self.staged(j, 1), self.send.block(self.g.real(j, root)));
            }
            return true;
        }
        if k == nb {
            self.send_down(0, a);
            return true;
        }
        false
    }
}

// ---- allgather ----------------------------------------------------------------------------------

/// How an allgather moves the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AgKind {
    /// Exchange with `rank ^ 2^k` the blocks held so far (powers of two, uniform blocks).
    RecDbl,
    /// Send the blocks held to `rank - 2^k`, receive from `rank + 2^k` (uniform blocks).
    Bruck,
    /// Pass blocks to the right `size - 1` times.
    Ring,
    /// Everyone sends its block to everyone, a batch at a time.
    Linear,
}

/// Allgather(v) into the user's receive buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Allgather {
    pub g: Grp,
    pub kind: AgKind,
    /// This rank's data (`None`: in place).
    pub own: Option<Span>,
    pub recv: Blocks,
}

impl Allgather {
    /// Blocks `i..i + n` around the ring as at most two runs.
    fn runs(&self, i: u32, n: u32, a: &mut Acts, to: Option<u32>, from: Option<u32>) {
        let p = self.g.size;
        let first = n.min(p - i);
        for (lo, len) in [(i, first), (0, n - first)] {
            if len == 0 {
                continue;
            }
            let s = self.recv.run(lo, len);
            if let Some(t) = to {
                a.send(t, s);
            }
            if let Some(f) = from {
                a.recv(f, s);
            }
        }
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r) = (self.g.size, self.g.rank);
        if k == 0 {
            if let Some(s) = self.own {
                a.copy(self.recv.block(r), s);
            }
        }
        match self.kind {
            AgKind::RecDbl => {
                let mask = 1u64 << k.min(40);
                if mask >= p as u64 {
                    return k == 0;
                }
                let m = mask as u32;
                let peer = r ^ m;
                a.send(peer, self.recv.run(r & !(m - 1), m));
                a.recv(peer, self.recv.run(peer & !(m - 1), m));
            }
            AgKind::Bruck => {
                let d = 1u64 << k.min(40);
                if d >= p as u64 {
                    return k == 0;
                }
                let d = d as u32;
                let cnt = d.min(p - d);
                self.runs(r, cnt, a, Some(self.g.ring(-(d as i64))), None);
                let from = self.g.ring(d as i64);
                self.runs(from, cnt, a, None, Some(from));
            }
            AgKind::Ring => {
                if k + 1 >= p {
                    return k == 0;
                }
                let t = k as i64;
                a.send(self.g.ring(1), self.recv.block(self.g.ring(-t)));
                a.recv(self.g.ring(-1), self.recv.block(self.g.ring(-t - 1)));
            }
            AgKind::Linear => {
                let Some(offs) = batch(k, p - 1, BATCH) else {
                    return false;
                };
                for i in offs {
                    let d = i as i64 + 1;
                    a.send(self.g.ring(d), self.recv.block(r));
                    let from = self.g.ring(-d);
                    a.recv(from, self.recv.block(from));
                }
            }
        }
        true
    }
}

// ---- all-to-all ---------------------------------------------------------------------------------

/// How an all-to-all moves the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AaKind {
    /// Step `i`: send to `rank + i`, receive from `rank - i`.
    Pairwise,
    /// Every exchange posted at once, a batch at a time.
    Linear,
}

/// All-to-all(v/w) between the user's buffers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Alltoall {
    pub g: Grp,
    pub kind: AaKind,
    pub send: Blocks,
    pub recv: Blocks,
}

impl Alltoall {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let (p, r) = (self.g.size, self.g.rank);
        if k == 0 {
            a.copy(self.recv.block(r), self.send.block(r));
        }
        let offs = match self.kind {
            AaKind::Pairwise => {
                if k + 1 >= p {
                    return k == 0;
                }
                k + 1..k + 2
            }
            AaKind::Linear => match batch(k, p - 1, BATCH) {
                Some(b) => b.start + 1..b.end + 1,
                None => return false,
            },
        };
        for i in offs {
            let (to, from) = (self.g.ring(i as i64), self.g.ring(-(i as i64)));
            a.recv(from, self.recv.block(from));
            a.send(to, self.send.block(to));
        }
        true
    }
}

/// Bruck's all-to-all for small blocks (uniform blocks, one architecture, at most
/// `2 * BATCH` ranks): rotate, exchange the blocks whose index has bit `k` with `rank + 2^k`,
/// rotate back. Packed staging: `tmp` holds `size` blocks, `sb` and `rb` half of them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AlltoallBruck {
    pub g: Grp,
    pub send: Blocks,
    pub recv: Blocks,
    pub tmp: *mut u8,
    pub sb: *mut u8,
    pub rb: *mut u8,
    pub bsz: u64,
}

impl AlltoallBruck {
    fn blk(&self, base: *mut u8, i: u32) -> Span {
        Span::bytes(base.wrapping_add((i as u64 * self.bsz) as usize), self.bsz)
    }

    /// Indices with bit `d` set, in order.
    fn with_bit(&self, d: u32) -> impl Iterator<Item = u32> {
        (0..self.g.size).filter(move |i| i & d != 0)
    }

    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        let p = self.g.size;
        let levels = 32 - (p - 1).leading_zeros();
        let (tmp, sb, rb) = (self.tmp, self.sb, self.rb);
        if k == 0 {
            for i in 0..p {
                a.copy(self.blk(tmp, i), self.send.block(self.g.ring(i as i64)));
            }
            return true;
        }
        let j = k - 1;
        if j > 0 && j <= levels {
            for (c, i) in self.with_bit(1 << (j - 1)).enumerate() {
                a.copy(self.blk(tmp, i), self.blk(rb, c as u32));
            }
        }
        if j < levels {
            let d = 1 << j;
            let mut cnt = 0;
            for (c, i) in self.with_bit(d).enumerate() {
                a.copy(self.blk(sb, c as u32), self.blk(tmp, i));
                cnt += 1;
            }
            let bytes = cnt as u64 * self.bsz;
            a.send(self.g.ring(d as i64), Span::bytes(sb, bytes));
            a.recv(self.g.ring(-(d as i64)), Span::bytes(rb, bytes));
            return true;
        }
        if j == levels {
            return true;
        }
        if j == levels + 1 {
            for i in 0..p {
                a.copy(self.recv.block(self.g.ring(-(i as i64))), self.blk(tmp, i));
            }
            return true;
        }
        false
    }
}

/// In-place all-to-all(v/w): in round `t` of a round-robin tournament each rank swaps one block
/// with its partner, through a temporary copy of that block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AlltoallInPlace {
    pub g: Grp,
    pub recv: Blocks,
    /// Scratch for the largest block (its data starts here).
    pub tmp: *mut u8,
}

/// The partner of `r` in round `t` of a round-robin tournament of `p` (`p` itself: a bye).
pub(crate) fn tournament(p: u32, t: u32, r: u32) -> u32 {
    let n = p + p % 2;
    if r == n - 1 {
        return t;
    }
    let q = (2 * t as i64 - r as i64).rem_euclid(n as i64 - 1) as u32;
    if q == r {
        n - 1
    } else {
        q
    }
}

impl AlltoallInPlace {
    fn step(&mut self, k: u32, a: &mut Acts, types: &TypeTable) -> bool {
        let p = self.g.size;
        let rounds = p - 1 + p % 2;
        if k >= rounds {
            return false;
        }
        let j = tournament(p, k, self.g.rank);
        if j < p {
            let b = self.recv.block(j);
            let lb = types.info(b.dt).map_or(0, |i| i.true_lb);
            let t = Span::new(self.tmp.wrapping_offset(-lb), b.count, b.dt);
            a.copy(t, b);
            a.send(j, t);
            a.recv(j, b);
        }
        true
    }
}

// ---- the algorithm of a collective --------------------------------------------------------------

/// `Reduce_local`: one local step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Local {
    pub inout: *mut u8,
    pub input: *mut u8,
    pub n: u64,
}

/// Every algorithm.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Alg {
    Nothing,
    Local(Local),
    Dissemination(Dissemination),
    RecDblBarrier(RecDblBarrier),
    LinearBarrier(LinearBarrier),
    BcastBinomial(BcastBinomial),
    BcastChain(BcastChain),
    BcastScatterAllgather(BcastScatterAllgather),
    ReduceBinomial(ReduceBinomial),
    ReduceChain(ReduceChain),
    AllreduceRecDbl(AllreduceRecDbl),
    AllreduceRing(AllreduceRing),
    Rabenseifner(Rabenseifner),
    ReduceBcast(Then<ReduceBinomial, BcastBinomial>),
    RsRing(RsRing),
    RsHalving(RsHalving),
    RsReduceScatter(Then<ReduceBinomial, RsScatter>),
    ScanRecDbl(ScanRecDbl),
    ScanLinear(ScanLinear),
    GatherLinear(GatherLinear),
    GatherBinomial(GatherBinomial),
    ScatterLinear(ScatterLinear),
    ScatterBinomial(ScatterBinomial),
    Allgather(Allgather),
    Alltoall(Alltoall),
    AlltoallBruck(AlltoallBruck),
    AlltoallInPlace(AlltoallInPlace),
    /// Point-to-point with the remote group of an intercommunicator.
    Inter(super::inter::Exchange),
    /// A neighbourhood collective.
    Neighbor(Neighbor),
}

macro_rules! then {
    ($t:expr, $k:expr, $a:expr) => {{
        let t = $t;
        match t.switched {
            Some(s) => t.second.step($k - s, $a),
            None => {
                if t.first.step($k, $a) {
                    true
                } else {
                    t.switched = Some($k);
                    t.second.step(0, $a)
                }
            }
        }
    }};
}

// ---- neighbourhood collectives -----------------------------------------------------------------

/// A neighbourhood collective (`MPI_Ineighbor_alltoall`, ...) in one step: a receive of block
/// `slot` of `recv` from each in-neighbour, a send of block `slot` of `send` to each
/// out-neighbour. The peers are `(rank, slot)` pairs in scratch, in the order they are posted
/// (`MPI_PROC_NULL` left out when planned): every message of the collective travels under its
/// one tag, so a peer met twice (both neighbours of a periodic dimension of size 1 or 2) gets
/// its blocks in posting order, and the planner orders the pairs so that this is right.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neighbor {
    pub ins: *const [u32; 2],
    pub ni: u32,
    pub outs: *const [u32; 2],
    pub no: u32,
    pub send: Blocks,
    pub recv: Blocks,
}

impl Neighbor {
    fn step(&mut self, k: u32, a: &mut Acts) -> bool {
        if k > 0 {
            return false;
        }
        for j in 0..self.ni as usize {
            // SAFETY: the planner wrote `ni` pairs there, in scratch held until completion.
            let [r, slot] = unsafe { *self.ins.add(j) };
            a.recv(r, self.recv.block(slot));
        }
        for i in 0..self.no as usize {
            // SAFETY: as above, `no` pairs.
            let [r, slot] = unsafe { *self.outs.add(i) };
            a.send(r, self.send.block(slot));
        }
        true
    }
}

impl Alg {
    /// Yields step `k`'s actions into `a`; false when there is no step `k` (the algorithm is
    /// finished). Steps are asked for in order, once each.
    pub(crate) fn step(&mut self, k: u32, a: &mut Acts, types: &TypeTable) -> bool {
        match self {
            Alg::Nothing => false,
            Alg::Local(l) => {
                if k == 0 {
                    a.reduce(l.inout, l.input, l.n);
                }
                k == 0
            }
            Alg::Dissemination(x) => x.step(k, a),
            Alg::RecDblBarrier(x) => x.step(k, a),
            Alg::LinearBarrier(x) => x.step(k, a),
            Alg::BcastBinomial(x) => x.step(k, a),
            Alg::BcastChain(x) => x.step(k, a),
            Alg::BcastScatterAllgather(x) => x.step(k, a),
            Alg::ReduceBinomial(x) => x.step(k, a),
            Alg::ReduceChain(x) => x.step(k, a),
            Alg::AllreduceRecDbl(x) => x.step(k, a),
            Alg::AllreduceRing(x) => x.step(k, a),
            Alg::Rabenseifner(x) => x.step(k, a),
            Alg::ReduceBcast(t) => then!(t, k, a),
            Alg::RsRing(x) => x.step(k, a),
            Alg::RsHalving(x) => x.step(k, a),
            Alg::RsReduceScatter(t) => then!(t, k, a),
            Alg::ScanRecDbl(x) => x.step(k, a),
            Alg::ScanLinear(x) => x.step(k, a),
            Alg::GatherLinear(x) => x.step(k, a),
            Alg::GatherBinomial(x) => x.step(k, a),
            Alg::ScatterLinear(x) => x.step(k, a),
            Alg::ScatterBinomial(x) => x.step(k, a),
            Alg::Allgather(x) => x.step(k, a),
            Alg::Alltoall(x) => x.step(k, a),
            Alg::AlltoallBruck(x) => x.step(k, a),
            Alg::AlltoallInPlace(x) => x.step(k, a, types),
            Alg::Inter(x) => x.step(k, a),
            Alg::Neighbor(x) => x.step(k, a),
        }
    }
}
