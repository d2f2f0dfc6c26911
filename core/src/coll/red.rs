//! Reductions: the working form, the segment loop and the algorithm of each segment.
//!
//! A reduction over `count` instances of datatype `d` works on `total` elements of a working
//! type `w` (see [`Red`]): `d` itself for a user-defined operation (the user's function gets the
//! user's type), else the predefined type all of `d`'s elements are. When the user's buffers
//! already hold the working form (a predefined type, or a dense derived one) the algorithm works
//! in them directly; otherwise each segment's input is converted into scratch first and the
//! result converted back after ([`RedPlan::convert_in`], [`RedPlan::convert_out`]).

use super::alg::Alg;
use super::alg::{
    AllreduceRecDbl, AllreduceRing, BcastBinomial, Counts, Fold, Grp, Local, Rabenseifner,
    ReduceBinomial, ReduceChain, RsHalving, RsRing, RsScatter, ScanLinear, ScanRecDbl, SegBlocks,
    Then,
};
use super::exec::{copy_stream, Red, Span};
use crate::datatype::table::TypeTable;
use crate::error::Result;

/// Which reduction.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RedKind {
    Reduce {
        root: u32,
    },
    Allreduce,
    ReduceScatter(Counts),
    Scan,
    Exscan,
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    Local,
}

/// Reduction algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedAlg {
    Binomial,
    Chain,
    RecDbl,
    Ring,
    Rabenseifner,
    ReduceBcast,
    Halving,
    ReduceThenScatter,
    Linear,
    Local,
}

impl RedAlg {
    /// Scratch buffers of one segment this algorithm needs for `kind` (each `per` elements).
    pub(crate) fn buffers(self, kind: &RedKind) -> usize {
        match (self, kind) {
            (RedAlg::Local, _) => 0,
            (RedAlg::RecDbl, RedKind::Scan | RedKind::Exscan) => 2,
            (RedAlg::Ring, RedKind::ReduceScatter(_)) => 2,
            (RedAlg::RecDbl | RedAlg::Ring | RedAlg::Rabenseifner | RedAlg::Linear, _) => 1,
            (RedAlg::Binomial | RedAlg::Chain | RedAlg::ReduceBcast | RedAlg::Halving, _) => 2,
            (RedAlg::ReduceThenScatter, _) => 3,
        }
    }
}

/// Everything needed to build each segment's algorithm.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RedPlan {
    pub kind: RedKind,
    pub alg: RedAlg,
    pub g: Grp,
    pub red: Red,
    /// Elements of the whole vector, and per segment.
    pub total: u64,
    pub per: u64,
    /// Elements per pipeline segment (chain).
    pub pipe: u64,
    /// The user's input (`None`: in place) and output (`None`: a reduce's non-root).
    pub inp: Option<Span>,
    pub out: Option<Span>,
    /// The user's buffers are the working form from this offset.
    pub direct: Option<isize>,
    /// Conversion buffers (element bases), when not direct.
    pub conv_in: *mut u8,
    pub conv_out: *mut u8,
    /// The algorithm's scratch (element bases, `per` elements each).
    pub s: [*mut u8; 3],
}

impl RedPlan {
    /// This rank's block of a reduce-scatter within `a..b`: (offset in the segment, length,
    /// offset in the rank's block).
    fn my_block(&self, a: u64, b: u64) -> (u64, u64, u64) {
        match self.kind {
            RedKind::ReduceScatter(c) => {
                let r = self.g.rank;
                let (d, n) = (c.disp(r), c.count(r));
                let lo = d.clamp(a, b);
                let hi = (d + n).clamp(a, b);
                (lo - a, hi - lo, lo.saturating_sub(d))
            }
            _ => (0, b - a, a),
        }
    }

    /// Whether the input of a non-direct segment is converted into `conv_in` (else into
    /// `conv_out`, where the algorithm takes it as in place).
    fn separate_input(&self) -> bool {
        match self.kind {
            RedKind::Reduce { root } => self.g.rank != root,
            RedKind::ReduceScatter(_) | RedKind::Local => true,
            _ => false,
        }
    }

    /// Converts the input of segment `a..b` into the working form (non-direct plans).
    ///
    /// # Safety
    /// The plan's buffers are the user's (lent for the collective) and its scratch.
    pub(crate) unsafe fn convert_in(&self, types: &TypeTable, a: u64, b: u64) -> Result<()> {
        if self.direct.is_some() {
            return Ok(());
        }
        let red = self.red;
        let n = b - a;
        let sz = red.size;
        let src = self.inp.or(self.out);
        let Some(src) = src else { return Ok(()) };
        let dst = if self.separate_input() {
            self.conv_in
        } else {
            self.conv_out
        };
        // SAFETY: the caller's contract; scratch holds `per >= n` elements.
        unsafe { copy_stream(types, red.span(dst, n), 0, src, a * sz, n * sz)? };
        if let (RedKind::Local, Some(out)) = (self.kind, self.out) {
            // SAFETY: as above.
            unsafe { copy_stream(types, red.span(self.conv_out, n), 0, out, a * sz, n * sz)? };
        }
        Ok(())
    }

    /// Converts the result of segment `a..b` back into the user's output (non-direct plans).
    ///
    /// # Safety
    /// As for [`RedPlan::convert_in`].
    pub(crate) unsafe fn convert_out(&self, types: &TypeTable, a: u64, b: u64) -> Result<()> {
        let (Some(out), None) = (self.out, self.direct) else {
            return Ok(());
        };
        let red = self.red;
        let (_, len, pos) = self.my_block(a, b);
        // SAFETY: the caller's contract.
        unsafe {
            copy_stream(
                types,
                out,
                pos * red.size,
                red.span(self.conv_out, len),
                0,
                len * red.size,
            )
        }
    }

    /// The working-form input and output of segment `a..b`.
    fn work(&self, a: u64, b: u64) -> (Option<*mut u8>, Option<*mut u8>) {
        let red = self.red;
        match self.direct {
            Some(at) => {
                let (_, _, pos) = self.my_block(a, b);
                let inp = self.inp.map(|s| red.at(s.ptr.wrapping_offset(at), a));
                let out = self.out.map(|s| red.at(s.ptr.wrapping_offset(at), pos));
                match self.kind {
                    // In place, a reduce-scatter's input is the whole output buffer.
                    RedKind::ReduceScatter(_) if inp.is_none() => {
                        let full = self.out.map(|s| red.at(s.ptr.wrapping_offset(at), a));
                        (full, out)
                    }
                    _ => (inp, out),
                }
            }
            None => {
                let out = self.out.map(|_| self.conv_out);
                if self.separate_input() {
                    (Some(self.conv_in), out)
                } else {
                    (None, out)
                }
            }
        }
    }

    /// The algorithm of segment `a..b`.
    pub(crate) fn segment(&self, a: u64, b: u64) -> Alg {
        let (g, red, n) = (self.g, self.red, b - a);
        let (win, wout) = self.work(a, b);
        let nul = core::ptr::null_mut();
        let out = wout.unwrap_or(nul);
        let src = win.or(wout).unwrap_or(nul);
        let [s0, s1, s2] = self.s;
        match self.kind {
            RedKind::Local => Alg::Local(Local {
                inout: out,
                input: src,
                n,
            }),
            RedKind::Reduce { root } => match self.alg {
                RedAlg::Chain => Alg::ReduceChain(ReduceChain {
                    g,
                    red,
                    root,
                    src,
                    out,
                    slots: [s0, s1],
                    n,
                    sub: self.pipe.min(self.per).max(1),
                }),
                _ => Alg::ReduceBinomial(ReduceBinomial::new(
                    g, red, root, src, wout, None, s0, s1, n,
                )),
            },
            RedKind::Allreduce => match self.alg {
                RedAlg::Ring => Alg::AllreduceRing(AllreduceRing {
                    g,
                    red,
                    src,
                    out,
                    tmp: s0,
                    n,
                }),
                RedAlg::Rabenseifner => {
                    Alg::Rabenseifner(Rabenseifner::new(g, red, src, out, s0, n))
                }
                RedAlg::ReduceBcast => Alg::ReduceBcast(Then {
                    first: ReduceBinomial::new(g, red, 0, src, wout, wout, s0, s1, n),
                    second: BcastBinomial {
                        g,
                        root: 0,
                        buf: red.span(out, n),
                    },
                    switched: None,
                }),
                _ => Alg::AllreduceRecDbl(AllreduceRecDbl {
                    g,
                    red,
                    fold: Fold::new(g.size),
                    src,
                    out,
                    tmp: s0,
                    n,
                    swapped: false,
                }),
            },
            RedKind::ReduceScatter(counts) => {
                let blocks = SegBlocks { counts, a, b };
                match self.alg {
                    RedAlg::Ring => Alg::RsRing(RsRing {
                        g,
                        red,
                        src,
                        out,
                        blocks,
                        slots: [s0, s1],
                    }),
                    RedAlg::Halving => {
                        Alg::RsHalving(RsHalving::new(g, red, src, out, blocks, s0, s1))
                    }
                    _ => Alg::RsReduceScatter(Then {
                        first: ReduceBinomial::new(g, red, 0, src, Some(s2), None, s0, s1, n),
                        second: RsScatter {
                            g,
                            red,
                            full: s2,
                            out,
                            blocks,
                        },
                        switched: None,
                    }),
                }
            }
            RedKind::Scan | RedKind::Exscan => {
                let exclusive = matches!(self.kind, RedKind::Exscan);
                match self.alg {
                    RedAlg::Linear => Alg::ScanLinear(ScanLinear {
                        g,
                        red,
                        src,
                        out,
                        tmp: s0,
                        n,
                        exclusive,
                    }),
                    _ => Alg::ScanRecDbl(ScanRecDbl {
                        g,
                        red,
                        src,
                        out,
                        partial: s0,
                        tmp: s1,
                        n,
                        exclusive,
                        first: true,
                        pending: None,
                    }),
                }
            }
        }
    }
}
