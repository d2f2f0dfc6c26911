//! A reference model of MPI datatypes, independent of the engine under test.
//!
//! A [`Tree`] mirrors the constructor calls that made a type. [`Tree::model`] computes its type
//! map (every basic element's displacement, size and kind, in type-map order) and its bounds
//! straight from the constructors' definitions in the MPI standard — never from the engine's
//! flattened description. [`Tree::build`] makes the same type in an engine [`TypeTable`], so a
//! test can compare the two.
//!
//! Bounds follow the constructors' definitions in terms of the old type's lower bound and extent
//! (`MPI_LB`/`MPI_UB` markers and resizes are sticky), with the alignment padding ε applied by
//! `MPI_Type_create_struct` only, as MPICH and Open MPI do and as a C compiler pads a struct.

#![allow(dead_code)]

use std::ffi::c_long;
use std::fmt;
use std::mem::size_of;

use stormpi_core::datatype::table::{Distrib, Order, TypeTable, DFLT_DARG};
use stormpi_core::datatype::Datatype;
use stormpi_core::Result;

/// Bytes of C `long` here.
pub const LONG: usize = size_of::<c_long>();

/// What a basic element is, as far as packing and conversion care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bytes never converted (`char`).
    Byte,
    /// C `bool` (one byte).
    Bool,
    /// A signed integer of this many bytes everywhere.
    Int(usize),
    /// C `long`: its width depends on the representation.
    Long,
    /// An IEEE float of this many bytes.
    Float(usize),
    /// x87 `long double` in 16 bytes of storage (only packed natively here).
    LongDouble,
}

impl Kind {
    /// Bytes in native memory.
    pub fn native_size(self) -> usize {
        match self {
            Kind::Byte | Kind::Bool => 1,
            Kind::Int(n) | Kind::Float(n) => n,
            Kind::Long => LONG,
            Kind::LongDouble => 16,
        }
    }

    /// Bytes in a stream of representation `t`.
    pub fn size_in(self, t: &Target) -> usize {
        match self {
            Kind::Long => t.long,
            k => k.native_size(),
        }
    }
}

/// A stream representation, as far as the model converts: byte order and the width of `long`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Big-endian.
    pub big: bool,
    /// Bytes of `long`.
    pub long: usize,
}

/// `external32` (MPI-4.1 §14.5.2): big-endian, `long` of 4 bytes.
pub const EXTERNAL32: Target = Target { big: true, long: 4 };

/// A big-endian machine with this machine's type sizes (LP64 here: s390x-like).
pub const BIG_NATIVE_SIZES: Target = Target {
    big: true,
    long: LONG,
};

const NATIVE_BIG: bool = cfg!(target_endian = "big");

/// Reads a native signed integer of `b.len()` bytes.
fn read_native(b: &[u8]) -> i128 {
    let mut le = [0u8; 16];
    for (i, x) in b.iter().enumerate() {
        le[if NATIVE_BIG { b.len() - 1 - i } else { i }] = *x;
    }
    // Sign-extend from the top byte.
    if b.len() < 16 && le[b.len() - 1] & 0x80 != 0 {
        le[b.len()..].fill(0xff);
    }
    i128::from_le_bytes(le)
}

/// Writes the low `w` bytes of `v` in the given byte order.
fn write_int(v: i128, w: usize, big: bool, out: &mut Vec<u8>) {
    let le = v.to_le_bytes();
    for i in 0..w {
        out.push(if big { le[w - 1 - i] } else { le[i] });
    }
}

/// Converts one element from native bytes to representation `t`, appending it to `out`;
/// returns whether the value did not fit.
pub fn encode(kind: Kind, native: &[u8], t: &Target, out: &mut Vec<u8>) -> bool {
    match kind {
        Kind::Byte | Kind::Bool => {
            out.extend_from_slice(native);
            false
        }
        Kind::Int(_) | Kind::Float(_) | Kind::LongDouble => {
            let start = out.len();
            out.extend_from_slice(native);
            if t.big != NATIVE_BIG {
                out[start..].reverse();
            }
            false
        }
        Kind::Long => {
            let v = read_native(native);
            let bits = 8 * t.long as u32;
            let fits = bits >= 128 || (-(1i128 << (bits - 1))..1i128 << (bits - 1)).contains(&v);
            write_int(v, t.long, t.big, out);
            !fits
        }
    }
}

/// Converts one element from representation `t` to native bytes, appending them to `out`.
pub fn decode(kind: Kind, stream: &[u8], t: &Target, out: &mut Vec<u8>) {
    match kind {
        Kind::Long => {
            // Read in the stream's order, sign-extend, write natively.
            let mut le = [0u8; 16];
            for (i, x) in stream.iter().enumerate() {
                le[if t.big { stream.len() - 1 - i } else { i }] = *x;
            }
            if le[stream.len() - 1] & 0x80 != 0 {
                le[stream.len()..].fill(0xff);
            }
            write_int(i128::from_le_bytes(le), LONG, NATIVE_BIG, out);
        }
        _ => {
            // Same width on both sides: at most a byte swap, and swapping is its own inverse.
            encode(kind, stream, t, out);
        }
    }
}

/// One basic element of a type map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elem {
    /// Displacement from the buffer's origin.
    pub disp: isize,
    /// The element.
    pub kind: Kind,
}

impl Elem {
    /// Native bytes.
    pub fn size(&self) -> usize {
        self.kind.native_size()
    }
}

/// The predefined types the model knows, with their C layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prim {
    Char,
    Bool,
    Short,
    Int,
    Long,
    Float,
    Double,
    /// `MPI_2INT`: `struct { int; int; }`.
    TwoInt,
    /// `MPI_SHORT_INT`: `struct { short; int; }` (2 bytes of padding inside).
    ShortInt,
    /// `MPI_DOUBLE_INT`: `struct { double; int; }` (4 bytes of padding at the end).
    DoubleInt,
    /// `MPI_C_DOUBLE_COMPLEX`: two doubles.
    DoubleComplex,
    /// x86-64 `long double`: 16 bytes, aligned to 16.
    LongDouble,
    /// The `MPI_LB` marker.
    Lb,
    /// The `MPI_UB` marker.
    Ub,
}

impl Prim {
    /// The engine's handle.
    pub fn datatype(self) -> Datatype {
        match self {
            Prim::Char => Datatype::CHAR,
            Prim::Bool => Datatype::C_BOOL,
            Prim::Short => Datatype::SHORT,
            Prim::Int => Datatype::INT,
            Prim::Long => Datatype::LONG,
            Prim::Float => Datatype::FLOAT,
            Prim::Double => Datatype::DOUBLE,
            Prim::TwoInt => Datatype::TWO_INT,
            Prim::ShortInt => Datatype::SHORT_INT,
            Prim::DoubleInt => Datatype::DOUBLE_INT,
            Prim::DoubleComplex => Datatype::C_DOUBLE_COMPLEX,
            Prim::LongDouble => Datatype::LONG_DOUBLE,
            Prim::Lb => Datatype::LB,
            Prim::Ub => Datatype::UB,
        }
    }

    /// Its model: the fields of the C type, its size rounded to its alignment.
    pub fn model(self) -> Model {
        use Kind::*;
        let (fields, extent, align): (&[(isize, Kind)], isize, usize) = match self {
            Prim::Char => (&[(0, Byte)], 1, 1),
            Prim::Bool => (&[(0, Bool)], 1, 1),
            Prim::Short => (&[(0, Int(2))], 2, 2),
            Prim::Int => (&[(0, Int(4))], 4, 4),
            Prim::Long => (&[(0, Long)], LONG as isize, LONG),
            Prim::Float => (&[(0, Float(4))], 4, 4),
            Prim::Double => (&[(0, Float(8))], 8, 8),
            Prim::TwoInt => (&[(0, Int(4)), (4, Int(4))], 8, 4),
            Prim::ShortInt => (&[(0, Int(2)), (4, Int(4))], 8, 4),
            Prim::DoubleInt => (&[(0, Float(8)), (8, Int(4))], 16, 8),
            Prim::DoubleComplex => (&[(0, Float(8)), (8, Float(8))], 16, 8),
            Prim::LongDouble => (&[(0, LongDouble)], 16, 16),
            Prim::Lb | Prim::Ub => (&[], 0, 1),
        };
        Model {
            map: fields
                .iter()
                .map(|&(disp, kind)| Elem { disp, kind })
                .collect(),
            lb: 0,
            ub: extent,
            sticky_lb: self == Prim::Lb,
            sticky_ub: self == Prim::Ub,
            align,
        }
    }

    fn name(self) -> &'static str {
        self.datatype().name()
    }
}

/// A type as the model sees it: its type map and bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// Basic elements in type-map order.
    pub map: Vec<Elem>,
    /// Lower bound.
    pub lb: isize,
    /// Upper bound.
    pub ub: isize,
    /// The lower bound was set by an `MPI_LB` marker or a resize.
    pub sticky_lb: bool,
    /// The upper bound was set by an `MPI_UB` marker or a resize.
    pub sticky_ub: bool,
    /// Largest alignment among the basic elements.
    pub align: usize,
}

impl Model {
    /// `ub - lb`.
    pub fn extent(&self) -> isize {
        self.ub - self.lb
    }

    /// Packed bytes of one instance.
    pub fn size(&self) -> usize {
        self.map.iter().map(Elem::size).sum()
    }

    /// (true lb, true extent): the span of the data alone; (0, 0) without data.
    pub fn true_bounds(&self) -> (isize, isize) {
        if self.map.is_empty() {
            return (0, 0);
        }
        let lo = self.map.iter().map(|e| e.disp).min().unwrap();
        let hi = self
            .map
            .iter()
            .map(|e| e.disp + e.size() as isize)
            .max()
            .unwrap();
        (lo, hi - lo)
    }

    /// The type map of `count` consecutive instances (instance `i` at `i * extent`).
    pub fn map_of(&self, count: usize) -> Vec<Elem> {
        let ext = self.extent();
        (0..count as isize)
            .flat_map(|i| {
                self.map.iter().map(move |e| Elem {
                    disp: e.disp + i * ext,
                    kind: e.kind,
                })
            })
            .collect()
    }
}

/// `count` copies of `ty`, `stride` bytes apart, the first at `disp`.
struct Block<'a> {
    disp: isize,
    count: usize,
    stride: isize,
    ty: &'a Model,
}

/// The type made of `blocks` in order. Each block contributes its instances' elements and the
/// bounds of its first and last instance; sticky bounds win over data bounds; a struct pads its
/// extent to its alignment unless its upper bound is sticky.
fn from_blocks(blocks: &[Block<'_>], is_struct: bool) -> Model {
    let mut map = Vec::new();
    let (mut lb, mut ub) = (None::<isize>, None::<isize>);
    let (mut slb, mut sub) = (None::<isize>, None::<isize>);
    let mut align = 1;
    for b in blocks.iter().filter(|b| b.count > 0) {
        for i in 0..b.count as isize {
            for e in &b.ty.map {
                map.push(Elem {
                    disp: b.disp + i * b.stride + e.disp,
                    kind: e.kind,
                });
            }
        }
        let last = (b.count as isize - 1) * b.stride;
        let lo = b.disp + b.ty.lb + last.min(0);
        let hi = b.disp + b.ty.ub + last.max(0);
        lb = Some(lb.map_or(lo, |v| v.min(lo)));
        ub = Some(ub.map_or(hi, |v| v.max(hi)));
        if b.ty.sticky_lb {
            slb = Some(slb.map_or(lo, |v| v.min(lo)));
        }
        if b.ty.sticky_ub {
            sub = Some(sub.map_or(hi, |v| v.max(hi)));
        }
        align = align.max(b.ty.align);
    }
    let lb_v = slb.or(lb).unwrap_or(0);
    let mut ub_v = sub.or(ub).unwrap_or(0);
    if is_struct && sub.is_none() && ub.is_some() {
        let a = align as isize;
        let ext = ub_v - lb_v;
        ub_v = lb_v + (ext + a - 1).div_euclid(a) * a;
    }
    Model {
        map,
        lb: lb_v,
        ub: ub_v,
        sticky_lb: slb.is_some(),
        sticky_ub: sub.is_some(),
        align,
    }
}

/// The indices of one dimension of `MPI_Type_create_darray` that process coordinate `c` of `p`
/// owns (MPI-4.1 §5.1.4): a block of `darg` (default ⌈g/p⌉) elements, or round-robin blocks of
/// `darg` (default 1), or the whole dimension.
pub fn darray_indices(g: i64, p: i64, c: i64, distrib: Distrib, darg: i32) -> Vec<i64> {
    match distrib {
        Distrib::None => (0..g).collect(),
        Distrib::Block => {
            let b = if darg == DFLT_DARG {
                (g + p - 1) / p
            } else {
                darg as i64
            };
            (c * b..((c + 1) * b).min(g)).collect()
        }
        Distrib::Cyclic => {
            let k = if darg == DFLT_DARG { 1 } else { darg as i64 };
            let mut v = Vec::new();
            let mut start = c * k;
            while start < g {
                v.extend(start..(start + k).min(g));
                start += k * p;
            }
            v
        }
    }
}

/// Every multi-index of the per-dimension index lists `dims`, in the storage order of `order`
/// (C: the last dimension varies fastest), as linear offsets into an array of `sizes`.
fn grid_offsets(sizes: &[i32], dims: &[Vec<i64>], order: Order) -> Vec<i64> {
    let nd = sizes.len();
    // Element strides of each dimension.
    let mut step = vec![1i64; nd];
    match order {
        Order::C => {
            for d in (0..nd.saturating_sub(1)).rev() {
                step[d] = step[d + 1] * sizes[d + 1] as i64;
            }
        }
        Order::Fortran => {
            for d in 1..nd {
                step[d] = step[d - 1] * sizes[d - 1] as i64;
            }
        }
    }
    // Visit dimensions from slowest to fastest.
    let slow_to_fast: Vec<usize> = match order {
        Order::C => (0..nd).collect(),
        Order::Fortran => (0..nd).rev().collect(),
    };
    let mut out = vec![0i64];
    for &d in &slow_to_fast {
        let mut next = Vec::with_capacity(out.len() * dims[d].len());
        for base in &out {
            for i in &dims[d] {
                next.push(base + i * step[d]);
            }
        }
        out = next;
    }
    out
}

/// A whole array of `sizes` elements of `old` with only the elements at `offsets` (in order):
/// lower bound 0 and the array's extent, both sticky (the standard ends both constructors with
/// a resize).
fn array_selection(old: &Model, sizes: &[i32], offsets: &[i64]) -> Model {
    let ext = old.extent();
    let mut map = Vec::new();
    for &o in offsets {
        for e in &old.map {
            map.push(Elem {
                disp: o as isize * ext + e.disp,
                kind: e.kind,
            });
        }
    }
    let total: i64 = sizes.iter().map(|&s| s as i64).product();
    Model {
        map,
        lb: 0,
        ub: total as isize * ext,
        sticky_lb: true,
        sticky_ub: true,
        align: old.align,
    }
}

/// A type as the constructor calls that make it.
#[derive(Clone, Debug)]
pub enum Tree {
    Prim(Prim),
    Contiguous {
        count: i32,
        old: Box<Tree>,
    },
    Vector {
        count: i32,
        blocklen: i32,
        stride: i32,
        old: Box<Tree>,
    },
    Hvector {
        count: i32,
        blocklen: i32,
        stride: isize,
        old: Box<Tree>,
    },
    Indexed {
        blocklens: Vec<i32>,
        displs: Vec<i32>,
        old: Box<Tree>,
    },
    Hindexed {
        blocklens: Vec<i32>,
        displs: Vec<isize>,
        old: Box<Tree>,
    },
    IndexedBlock {
        blocklen: i32,
        displs: Vec<i32>,
        old: Box<Tree>,
    },
    HindexedBlock {
        blocklen: i32,
        displs: Vec<isize>,
        old: Box<Tree>,
    },
    Struct {
        blocklens: Vec<i32>,
        displs: Vec<isize>,
        types: Vec<Tree>,
    },
    Resized {
        lb: isize,
        extent: isize,
        old: Box<Tree>,
    },
    Dup(Box<Tree>),
    Subarray {
        sizes: Vec<i32>,
        subsizes: Vec<i32>,
        starts: Vec<i32>,
        order: Order,
        old: Box<Tree>,
    },
    Darray {
        size: i32,
        rank: i32,
        gsizes: Vec<i32>,
        distribs: Vec<Distrib>,
        dargs: Vec<i32>,
        psizes: Vec<i32>,
        order: Order,
        old: Box<Tree>,
    },
}

impl Tree {
    /// The model of this type, from the standard's definition of each constructor.
    pub fn model(&self) -> Model {
        match self {
            Tree::Prim(p) => p.model(),
            Tree::Contiguous { count, old } => {
                let m = old.model();
                from_blocks(&[block(0, *count, m.extent(), &m)], false)
            }
            Tree::Vector {
                count,
                blocklen,
                stride,
                old,
            } => {
                let m = old.model();
                let ext = m.extent();
                let blocks: Vec<_> = (0..*count as isize)
                    .map(|j| block(j * *stride as isize * ext, *blocklen, ext, &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::Hvector {
                count,
                blocklen,
                stride,
                old,
            } => {
                let m = old.model();
                let blocks: Vec<_> = (0..*count as isize)
                    .map(|j| block(j * *stride, *blocklen, m.extent(), &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::Indexed {
                blocklens,
                displs,
                old,
            } => {
                let m = old.model();
                let ext = m.extent();
                let blocks: Vec<_> = blocklens
                    .iter()
                    .zip(displs)
                    .map(|(&n, &d)| block(d as isize * ext, n, ext, &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::Hindexed {
                blocklens,
                displs,
                old,
            } => {
                let m = old.model();
                let blocks: Vec<_> = blocklens
                    .iter()
                    .zip(displs)
                    .map(|(&n, &d)| block(d, n, m.extent(), &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::IndexedBlock {
                blocklen,
                displs,
                old,
            } => {
                let m = old.model();
                let ext = m.extent();
                let blocks: Vec<_> = displs
                    .iter()
                    .map(|&d| block(d as isize * ext, *blocklen, ext, &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::HindexedBlock {
                blocklen,
                displs,
                old,
            } => {
                let m = old.model();
                let blocks: Vec<_> = displs
                    .iter()
                    .map(|&d| block(d, *blocklen, m.extent(), &m))
                    .collect();
                from_blocks(&blocks, false)
            }
            Tree::Struct {
                blocklens,
                displs,
                types,
            } => {
                let models: Vec<Model> = types.iter().map(Tree::model).collect();
                let blocks: Vec<_> = models
                    .iter()
                    .zip(blocklens.iter().zip(displs))
                    .map(|(m, (&n, &d))| block(d, n, m.extent(), m))
                    .collect();
                from_blocks(&blocks, true)
            }
            Tree::Resized { lb, extent, old } => {
                let m = old.model();
                Model {
                    lb: *lb,
                    ub: lb + extent,
                    sticky_lb: true,
                    sticky_ub: true,
                    ..m
                }
            }
            Tree::Dup(old) => old.model(),
            Tree::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => {
                let dims: Vec<Vec<i64>> = (0..sizes.len())
                    .map(|d| (starts[d] as i64..(starts[d] + subsizes[d]) as i64).collect())
                    .collect();
                array_selection(&old.model(), sizes, &grid_offsets(sizes, &dims, *order))
            }
            Tree::Darray {
                rank,
                gsizes,
                distribs,
                dargs,
                psizes,
                order,
                old,
                ..
            } => {
                let coords = grid_coords(*rank, psizes);
                let dims: Vec<Vec<i64>> = (0..gsizes.len())
                    .map(|d| {
                        darray_indices(
                            gsizes[d] as i64,
                            psizes[d] as i64,
                            coords[d],
                            distribs[d],
                            dargs[d],
                        )
                    })
                    .collect();
                array_selection(&old.model(), gsizes, &grid_offsets(gsizes, &dims, *order))
            }
        }
    }

    /// Makes this type in `types` (not committed). Inner derived types are freed as soon as the
    /// outer one exists: the outer type must keep what it needs.
    pub fn build(&self, types: &mut TypeTable) -> Result<Datatype> {
        match self {
            Tree::Prim(p) => Ok(p.datatype()),
            Tree::Contiguous { count, old } => {
                with_old(types, old, |t, o| t.contiguous((*count).into(), o))
            }
            Tree::Vector {
                count,
                blocklen,
                stride,
                old,
            } => with_old(types, old, |t, o| {
                t.vector(
                    (*count).into(),
                    (*blocklen).into(),
                    Some((*stride).into()),
                    None,
                    o,
                )
            }),
            Tree::Hvector {
                count,
                blocklen,
                stride,
                old,
            } => with_old(types, old, |t, o| {
                t.vector((*count).into(), (*blocklen).into(), None, Some(*stride), o)
            }),
            Tree::Indexed {
                blocklens,
                displs,
                old,
            } => with_old(types, old, |t, o| {
                t.indexed(blocklens, Some(displs), None, o)
            }),
            Tree::Hindexed {
                blocklens,
                displs,
                old,
            } => with_old(types, old, |t, o| {
                t.indexed(blocklens, None, Some(displs), o)
            }),
            Tree::IndexedBlock {
                blocklen,
                displs,
                old,
            } => with_old(types, old, |t, o| {
                t.indexed_block((*blocklen).into(), Some(displs), None, o)
            }),
            Tree::HindexedBlock {
                blocklen,
                displs,
                old,
            } => with_old(types, old, |t, o| {
                t.indexed_block((*blocklen).into(), None, Some(displs), o)
            }),
            Tree::Struct {
                blocklens,
                displs,
                types: fields,
            } => {
                let mut made = Vec::new();
                for f in fields {
                    match f.build(types) {
                        Ok(t) => made.push(t),
                        Err(e) => {
                            free_all(types, &made);
                            return Err(e);
                        }
                    }
                }
                let r = types.create_struct(blocklens, displs, &made);
                free_all(types, &made);
                r
            }
            Tree::Resized { lb, extent, old } => {
                with_old(types, old, |t, o| t.resized(o, *lb, *extent))
            }
            Tree::Dup(old) => with_old(types, old, |t, o| t.dup(o)),
            Tree::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => with_old(types, old, |t, o| {
                t.subarray(sizes, subsizes, starts, *order, o)
            }),
            Tree::Darray {
                size,
                rank,
                gsizes,
                distribs,
                dargs,
                psizes,
                order,
                old,
            } => with_old(types, old, |t, o| {
                t.darray(*size, *rank, gsizes, distribs, dargs, psizes, *order, o)
            }),
        }
    }

    /// Whether every basic element can be converted by the model (no `long double`).
    pub fn convertible(&self) -> bool {
        self.model().map.iter().all(|e| e.kind != Kind::LongDouble)
    }
}

/// Process coordinates of `rank` in a row-major grid of `psizes` (the standard's rule for darray,
/// whatever the array's order).
pub fn grid_coords(rank: i32, psizes: &[i32]) -> Vec<i64> {
    let mut c = vec![0i64; psizes.len()];
    let mut r = rank as i64;
    for d in (0..psizes.len()).rev() {
        c[d] = r % psizes[d] as i64;
        r /= psizes[d] as i64;
    }
    c
}

fn block(disp: isize, count: i32, stride: isize, ty: &Model) -> Block<'_> {
    Block {
        disp,
        count: count as usize,
        stride,
        ty,
    }
}

fn free_all(types: &mut TypeTable, made: &[Datatype]) {
    for t in made {
        if !t.is_predefined() {
            types.free(*t).expect("inner type is live");
        }
    }
}

/// Builds `old`, makes the outer type with `make`, then frees `old`'s handle.
fn with_old(
    types: &mut TypeTable,
    old: &Tree,
    make: impl FnOnce(&mut TypeTable, Datatype) -> Result<Datatype>,
) -> Result<Datatype> {
    let o = old.build(types)?;
    let r = make(types, o);
    free_all(types, &[o]);
    r
}

// ---- shorthand constructors for tests ----------------------------------------------------------

/// A predefined type.
pub fn prim(p: Prim) -> Tree {
    Tree::Prim(p)
}

/// `MPI_Type_contiguous`.
pub fn contiguous(count: i32, old: Tree) -> Tree {
    Tree::Contiguous {
        count,
        old: Box::new(old),
    }
}

/// `MPI_Type_vector` (stride in extents).
pub fn vector(count: i32, blocklen: i32, stride: i32, old: Tree) -> Tree {
    Tree::Vector {
        count,
        blocklen,
        stride,
        old: Box::new(old),
    }
}

/// `MPI_Type_create_hvector` (stride in bytes).
pub fn hvector(count: i32, blocklen: i32, stride: isize, old: Tree) -> Tree {
    Tree::Hvector {
        count,
        blocklen,
        stride,
        old: Box::new(old),
    }
}

/// `MPI_Type_indexed`.
pub fn indexed(blocklens: &[i32], displs: &[i32], old: Tree) -> Tree {
    Tree::Indexed {
        blocklens: blocklens.to_vec(),
        displs: displs.to_vec(),
        old: Box::new(old),
    }
}

/// `MPI_Type_create_hindexed`.
pub fn hindexed(blocklens: &[i32], displs: &[isize], old: Tree) -> Tree {
    Tree::Hindexed {
        blocklens: blocklens.to_vec(),
        displs: displs.to_vec(),
        old: Box::new(old),
    }
}

/// `MPI_Type_create_indexed_block`.
pub fn indexed_block(blocklen: i32, displs: &[i32], old: Tree) -> Tree {
    Tree::IndexedBlock {
        blocklen,
        displs: displs.to_vec(),
        old: Box::new(old),
    }
}

/// `MPI_Type_create_hindexed_block`.
pub fn hindexed_block(blocklen: i32, displs: &[isize], old: Tree) -> Tree {
    Tree::HindexedBlock {
        blocklen,
        displs: displs.to_vec(),
        old: Box::new(old),
    }
}

/// `MPI_Type_create_struct` from (blocklen, displacement, type) fields.
pub fn structure(fields: Vec<(i32, isize, Tree)>) -> Tree {
    let mut blocklens = Vec::new();
    let mut displs = Vec::new();
    let mut types = Vec::new();
    for (n, d, t) in fields {
        blocklens.push(n);
        displs.push(d);
        types.push(t);
    }
    Tree::Struct {
        blocklens,
        displs,
        types,
    }
}

/// `MPI_Type_create_resized`.
pub fn resized(lb: isize, extent: isize, old: Tree) -> Tree {
    Tree::Resized {
        lb,
        extent,
        old: Box::new(old),
    }
}

/// `MPI_Type_dup`.
pub fn dup(old: Tree) -> Tree {
    Tree::Dup(Box::new(old))
}

/// `MPI_Type_create_subarray`.
pub fn subarray(sizes: &[i32], subsizes: &[i32], starts: &[i32], order: Order, old: Tree) -> Tree {
    Tree::Subarray {
        sizes: sizes.to_vec(),
        subsizes: subsizes.to_vec(),
        starts: starts.to_vec(),
        order,
        old: Box::new(old),
    }
}

/// `MPI_Type_create_darray` (the communicator size is the product of `psizes`).
pub fn darray(
    rank: i32,
    gsizes: &[i32],
    distribs: &[Distrib],
    dargs: &[i32],
    psizes: &[i32],
    order: Order,
    old: Tree,
) -> Tree {
    Tree::Darray {
        size: psizes.iter().product(),
        rank,
        gsizes: gsizes.to_vec(),
        distribs: distribs.to_vec(),
        dargs: dargs.to_vec(),
        psizes: psizes.to_vec(),
        order,
        old: Box::new(old),
    }
}

// ---- printing, so a failing random tree can be rebuilt by hand ----------------------------------

impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tree::Prim(p) => write!(f, "{}", p.name()),
            Tree::Contiguous { count, old } => write!(f, "contiguous({count}, {old})"),
            Tree::Vector {
                count,
                blocklen,
                stride,
                old,
            } => write!(f, "vector({count}, {blocklen}, {stride}, {old})"),
            Tree::Hvector {
                count,
                blocklen,
                stride,
                old,
            } => write!(f, "hvector({count}, {blocklen}, {stride}B, {old})"),
            Tree::Indexed {
                blocklens,
                displs,
                old,
            } => write!(f, "indexed({blocklens:?}, {displs:?}, {old})"),
            Tree::Hindexed {
                blocklens,
                displs,
                old,
            } => write!(f, "hindexed({blocklens:?}, {displs:?}B, {old})"),
            Tree::IndexedBlock {
                blocklen,
                displs,
                old,
            } => write!(f, "indexed_block({blocklen}, {displs:?}, {old})"),
            Tree::HindexedBlock {
                blocklen,
                displs,
                old,
            } => write!(f, "hindexed_block({blocklen}, {displs:?}B, {old})"),
            Tree::Struct {
                blocklens,
                displs,
                types,
            } => {
                write!(f, "struct{{")?;
                for (i, t) in types.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{}x{t}@{}", blocklens[i], displs[i])?;
                }
                write!(f, "}}")
            }
            Tree::Resized { lb, extent, old } => write!(f, "resized({lb}, {extent}, {old})"),
            Tree::Dup(old) => write!(f, "dup({old})"),
            Tree::Subarray {
                sizes,
                subsizes,
                starts,
                order,
                old,
            } => write!(
                f,
                "subarray({sizes:?}, {subsizes:?}, {starts:?}, {order:?}, {old})"
            ),
            Tree::Darray {
                size,
                rank,
                gsizes,
                distribs,
                dargs,
                psizes,
                order,
                old,
            } => write!(
                f,
                "darray({size}, {rank}, {gsizes:?}, {distribs:?}, {dargs:?}, {psizes:?}, {order:?}, {old})"
            ),
        }
    }
}

// ---- randomness --------------------------------------------------------------------------------

/// xorshift64*: small, deterministic, good enough to pick test cases.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng((seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// The predefined types random trees are made of (all convertible by the model).
pub const LEAVES: &[Prim] = &[
    Prim::Char,
    Prim::Bool,
    Prim::Short,
    Prim::Int,
    Prim::Long,
    Prim::Float,
    Prim::Double,
    Prim::TwoInt,
    Prim::ShortInt,
    Prim::DoubleInt,
    Prim::DoubleComplex,
];

/// A random tree at most `depth` constructors deep. Strides and displacements may be negative;
/// every constructor selects at least one element (an empty type's bounds are left to the
/// implementation by the standard, so the model does not guess them).
pub fn random_tree(rng: &mut Rng, depth: usize) -> Tree {
    if depth == 0 || rng.chance(15) {
        return prim(rng.pick(LEAVES));
    }
    let old = random_tree(rng, depth - 1);
    match rng.below(12) {
        0 => contiguous(rng.range(1, 4) as i32, old),
        1 => vector(
            rng.range(1, 4) as i32,
            rng.range(1, 3) as i32,
            rng.range(-4, 4) as i32,
            old,
        ),
        2 => hvector(
            rng.range(1, 4) as i32,
            rng.range(1, 3) as i32,
            rng.range(-64, 64) as isize,
            old,
        ),
        3 => {
            let (lens, _) = random_blocklens(rng);
            let displs: Vec<i32> = lens.iter().map(|_| rng.range(-6, 6) as i32).collect();
            indexed(&lens, &displs, old)
        }
        4 => {
            let (lens, _) = random_blocklens(rng);
            let displs: Vec<isize> = lens.iter().map(|_| rng.range(-48, 48) as isize).collect();
            hindexed(&lens, &displs, old)
        }
        5 => {
            let n = rng.range(1, 4);
            let displs: Vec<i32> = (0..n).map(|_| rng.range(-6, 6) as i32).collect();
            indexed_block(rng.range(1, 3) as i32, &displs, old)
        }
        6 => {
            let n = rng.range(1, 4);
            let displs: Vec<isize> = (0..n).map(|_| rng.range(-48, 48) as isize).collect();
            hindexed_block(rng.range(1, 3) as i32, &displs, old)
        }
        7 => {
            let (lens, at) = random_blocklens(rng);
            let mut fields = Vec::new();
            for (i, &n) in lens.iter().enumerate() {
                // Field `at` holds `old`; the others are fresh (shallower) trees or markers.
                let t = if i == at {
                    old.clone()
                } else if rng.chance(15) {
                    prim(rng.pick(&[Prim::Lb, Prim::Ub]))
                } else {
                    random_tree(rng, depth.saturating_sub(2))
                };
                fields.push((n, rng.range(-32, 32) as isize, t));
            }
            structure(fields)
        }
        8 => resized(rng.range(-16, 16) as isize, rng.range(1, 48) as isize, old),
        9 => dup(old),
        10 => {
            let nd = rng.range(1, 3) as usize;
            let sizes: Vec<i32> = (0..nd).map(|_| rng.range(1, 4) as i32).collect();
            let subsizes: Vec<i32> = sizes
                .iter()
                .map(|&s| rng.range(1, s as i64) as i32)
                .collect();
            let starts: Vec<i32> = sizes
                .iter()
                .zip(&subsizes)
                .map(|(&s, &sub)| rng.range(0, (s - sub) as i64) as i32)
                .collect();
            let order = rng.pick(&[Order::C, Order::Fortran]);
            subarray(&sizes, &subsizes, &starts, order, old)
        }
        _ => random_darray(rng, old),
    }
}

/// 1 to 4 block lengths in 0..=3, at least one of them (the returned index) non-zero.
fn random_blocklens(rng: &mut Rng) -> (Vec<i32>, usize) {
    let n = rng.range(1, 4) as usize;
    let mut lens: Vec<i32> = (0..n).map(|_| rng.range(0, 3) as i32).collect();
    let at = rng.below(n as u64) as usize;
    lens[at] = lens[at].max(1);
    (lens, at)
}

/// A random darray of 1 or 2 dimensions over a grid of up to 6 processes whose chosen rank owns
/// at least one element.
fn random_darray(rng: &mut Rng, old: Tree) -> Tree {
    loop {
        let nd = rng.range(1, 2) as usize;
        let mut gsizes = Vec::new();
        let mut distribs = Vec::new();
        let mut dargs = Vec::new();
        let mut psizes = Vec::new();
        for _ in 0..nd {
            let g = rng.range(1, 6) as i32;
            let d = rng.pick(&[Distrib::None, Distrib::Block, Distrib::Cyclic]);
            let p = if d == Distrib::None {
                1
            } else {
                rng.range(1, 3) as i32
            };
            let darg = match d {
                Distrib::None => DFLT_DARG,
                _ if rng.chance(50) => DFLT_DARG,
                // A block must cover the dimension: darg * p >= g.
                Distrib::Block => rng.range(((g + p - 1) / p) as i64, g as i64) as i32,
                Distrib::Cyclic => rng.range(1, 3) as i32,
            };
            gsizes.push(g);
            distribs.push(d);
            dargs.push(darg);
            psizes.push(p);
        }
        let size: i32 = psizes.iter().product();
        let rank = rng.below(size as u64) as i32;
        let order = rng.pick(&[Order::C, Order::Fortran]);
        let t = darray(
            rank,
            &gsizes,
            &distribs,
            &dargs,
            &psizes,
            order,
            old.clone(),
        );
        let coords = grid_coords(rank, &psizes);
        let owns = (0..nd).all(|d| {
            !darray_indices(
                gsizes[d] as i64,
                psizes[d] as i64,
                coords[d],
                distribs[d],
                dargs[d],
            )
            .is_empty()
        });
        if owns {
            return t;
        }
    }
}
