//! The datatype engine: constructors and their bounds, envelope and contents, life cycle, and
//! the convertors (pack, unpack, conversion, `prefix`) checked against an independent reference
//! model of the standard's type maps (`datatype_ref`).

mod datatype_ref;

use std::mem::MaybeUninit;

use datatype_ref::*;
use stormpi_core::arch::{Arch, ArchInfo, Endian};
use stormpi_core::arena::{Arena, Sizer};
use stormpi_core::datatype::convertor::{prefix, ConvError, Packer, Unpacker};
use stormpi_core::datatype::desc::{Combiner, TypeInfo};
use stormpi_core::datatype::repr::Repr;
use stormpi_core::datatype::table::{Distrib, Order, TypeTable, DFLT_DARG};
use stormpi_core::datatype::Datatype;
use stormpi_core::params::Params;
use stormpi_core::ErrorClass;

// ---- fixtures ----------------------------------------------------------------------------------

/// A type table with the default capacities, in leaked memory (as a platform would give it).
fn table() -> TypeTable {
    let params = Params::new(&[]);
    let mut sizer = Sizer::default();
    TypeTable::size(&params, &mut sizer);
    let memory = Box::leak(vec![MaybeUninit::<u8>::uninit(); sizer.bytes()].into_boxed_slice());
    TypeTable::new(&params, &mut Arena::new(memory)).expect("sized by TypeTable::size")
}

/// What MPI's queries answer about a type, in one comparable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bounds {
    size: u64,
    lb: isize,
    extent: isize,
    true_lb: isize,
    true_extent: isize,
    elems: u64,
}

fn bounds_of(info: &TypeInfo) -> Bounds {
    Bounds {
        size: info.size,
        lb: info.lb,
        extent: info.extent,
        true_lb: info.true_lb,
        true_extent: info.true_extent,
        elems: info.elems,
    }
}

/// The expected answers: size, lb, extent, true lb, true extent, basic elements.
fn bounds(
    size: u64,
    lb: isize,
    extent: isize,
    true_lb: isize,
    true_extent: isize,
    elems: u64,
) -> Bounds {
    Bounds {
        size,
        lb,
        extent,
        true_lb,
        true_extent,
        elems,
    }
}

/// The bounds the model computes.
fn model_bounds(m: &Model) -> Bounds {
    let (true_lb, true_extent) = m.true_bounds();
    bounds(
        m.size() as u64,
        m.lb,
        m.extent(),
        true_lb,
        true_extent,
        m.map.len() as u64,
    )
}

/// Builds and commits `tree`.
fn make(types: &mut TypeTable, tree: &Tree) -> Datatype {
    let t = tree
        .build(types)
        .unwrap_or_else(|e| panic!("{tree}: {e:?}"));
    types.commit(t).unwrap();
    t
}

/// The engine's bounds of `tree`, which is freed again.
fn engine_bounds(types: &mut TypeTable, tree: &Tree) -> Bounds {
    let t = make(types, tree);
    let b = bounds_of(types.info(t).unwrap());
    free(types, t);
    b
}

/// Frees derived type `t`.
fn free(types: &mut TypeTable, t: Datatype) {
    if !t.is_predefined() {
        types.free(t).unwrap();
    }
}

/// Bytes of memory covering displacements `lo..hi` (and 0), addressed by displacement.
struct Mem {
    bytes: Vec<u8>,
    /// Index of displacement 0 (the buffer address a convertor is given).
    origin: usize,
}

impl Mem {
    /// Memory covering every element of `map`, byte `i` filled with `fill(i)`.
    fn covering(map: &[Elem], fill: impl FnMut(usize) -> u8) -> Mem {
        let lo = map.iter().map(|e| e.disp).min().unwrap_or(0).min(0);
        let hi = map
            .iter()
            .map(|e| e.disp + e.size() as isize)
            .max()
            .unwrap_or(0)
            .max(0);
        Mem {
            bytes: (0..(hi - lo) as usize).map(fill).collect(),
            origin: (-lo) as usize,
        }
    }

    /// The bytes of the element at `e`.
    fn elem(&self, e: &Elem) -> &[u8] {
        let at = (self.origin as isize + e.disp) as usize;
        &self.bytes[at..at + e.size()]
    }

    fn elem_mut(&mut self, e: &Elem) -> &mut [u8] {
        let at = (self.origin as isize + e.disp) as usize;
        &mut self.bytes[at..at + e.size()]
    }

    /// A packer over `count` instances of `ty` at the origin.
    fn packer(&self, types: &TypeTable, count: usize, ty: Datatype) -> Packer {
        // SAFETY: the memory covers every byte of the type map of `count` instances (it was
        // sized from that map), and every caller drops the packer before it changes `self`.
        unsafe { Packer::new(self.ptr(), count as u64, ty, types) }.expect("committed type")
    }

    /// A packer converting `count` instances of `ty` into representation `repr`.
    fn external(&self, types: &TypeTable, count: usize, ty: Datatype, repr: Repr) -> Packer {
        // SAFETY: as for `packer`.
        unsafe { Packer::external(self.ptr(), count as u64, ty, types, repr) }.expect("committed")
    }

    /// An unpacker into `count` instances of `ty` at the origin.
    fn unpacker(&mut self, types: &TypeTable, count: usize, ty: Datatype) -> Unpacker {
        let base = self.bytes.as_mut_ptr().wrapping_add(self.origin);
        // SAFETY: the memory covers every byte of the type map of `count` instances, and every
        // caller drops the unpacker before it reads `self` again.
        unsafe { Unpacker::new(base, count as u64, ty, types) }.expect("committed type")
    }

    fn ptr(&self) -> *const u8 {
        self.bytes.as_ptr().wrapping_add(self.origin)
    }
}

/// The reference packing: the bytes of each element of `map`, in order.
fn ref_pack(map: &[Elem], mem: &Mem) -> Vec<u8> {
    map.iter().flat_map(|e| mem.elem(e).to_vec()).collect()
}

/// The reference unpacking: `before` with the elements of `map` taken from `stream` in order.
fn ref_unpack(map: &[Elem], before: &Mem, stream: &[u8]) -> Vec<u8> {
    let mut after = Mem {
        bytes: before.bytes.clone(),
        origin: before.origin,
    };
    let mut at = 0;
    for e in map {
        after
            .elem_mut(e)
            .copy_from_slice(&stream[at..at + e.size()]);
        at += e.size();
    }
    after.bytes
}

/// Whether two elements of `map` share a byte (unpacking such a map in pieces out of order
/// has no single right answer).
fn overlaps(map: &[Elem]) -> bool {
    let mut spans: Vec<(isize, isize)> = map
        .iter()
        .map(|e| (e.disp, e.disp + e.size() as isize))
        .collect();
    spans.sort();
    spans.windows(2).any(|w| w[1].0 < w[0].1)
}

/// Stream offsets where elements start, and the end (`sizes` are the elements' stream bytes).
fn boundaries(sizes: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut b = vec![0];
    for s in sizes {
        b.push(b.last().unwrap() + s);
    }
    b
}

/// Random bytes.
fn noise(rng: &mut Rng) -> impl FnMut(usize) -> u8 + '_ {
    |_| rng.next_u64() as u8
}

/// A sentinel pattern that differs from every fill the tests pack.
fn sentinel(i: usize) -> u8 {
    (i as u8).wrapping_mul(29) ^ 0xa5
}

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}

// ---- the round trip every reference test runs ----------------------------------------------------

/// How many split positions a round trip tries.
#[derive(Clone, Copy)]
enum Splits {
    /// Every position, and `pairs` random pairs.
    Every { pairs: usize },
    /// `n` random positions and `n` random pairs.
    Random(usize),
}

impl Splits {
    fn positions(self, len: usize, rng: &mut Rng) -> Vec<usize> {
        match self {
            Splits::Every { .. } => (0..=len).collect(),
            Splits::Random(n) => (0..n).map(|_| rng.below(len as u64 + 1) as usize).collect(),
        }
    }

    fn pairs(self, len: usize, rng: &mut Rng) -> Vec<(usize, usize)> {
        let n = match self {
            Splits::Every { pairs } => pairs,
            Splits::Random(n) => n,
        };
        (0..n)
            .map(|_| {
                let a = rng.below(len as u64 + 1) as usize;
                let b = rng.below(len as u64 + 1) as usize;
                (a.min(b), a.max(b))
            })
            .collect()
    }
}

/// Builds `tree`, checks its bounds against the model, then packs and unpacks `count` instances
/// (whole, split, converted) against the reference. Frees the type again.
fn round_trip(
    types: &mut TypeTable,
    tree: &Tree,
    count: usize,
    splits: Splits,
    rng: &mut Rng,
) -> Result<(), String> {
    let model = tree.model();
    let ty = tree.build(types).map_err(|e| format!("build: {e:?}"))?;
    types.commit(ty).unwrap();
    let r = round_trip_of(types, ty, &model, count, splits, rng);
    free(types, ty);
    r
}

fn round_trip_of(
    types: &mut TypeTable,
    ty: Datatype,
    model: &Model,
    count: usize,
    splits: Splits,
    rng: &mut Rng,
) -> Result<(), String> {
    let got = bounds_of(types.info(ty).unwrap());
    ensure!(
        got == model_bounds(model),
        "bounds: engine {got:?}, model {:?}",
        model_bounds(model)
    );
    let map = model.map_of(count);
    let src = Mem::covering(&map, noise(rng));
    let stream = ref_pack(&map, &src);
    let len = stream.len();

    // One pack of the whole message.
    {
        let mut p = src.packer(types, count, ty);
        ensure!(
            p.packed_len() == len,
            "packed_len {} != {len}",
            p.packed_len()
        );
        let mut out = vec![0u8; len + 8];
        let n = p.pack(types, 0, &mut out);
        ensure!(n == len, "pack returned {n} of {len}");
        ensure!(out[..len] == stream[..], "pack differs from the reference");
        ensure!(!p.overflowed(), "native packing overflowed");
        ensure!(p.pack(types, len, &mut out) == 0, "pack at the end");
        ensure!(p.pack(types, len + 5, &mut out) == 0, "pack past the end");
    }

    // One unpack of the whole message: exactly the type map's bytes change.
    let dst = Mem::covering(&map, sentinel);
    let expected = ref_unpack(&map, &dst, &stream);
    {
        let mut d = Mem {
            bytes: dst.bytes.clone(),
            origin: dst.origin,
        };
        let mut u = d.unpacker(types, count, ty);
        ensure!(u.capacity() == len, "capacity {} != {len}", u.capacity());
        // A longer message is truncated: the bytes beyond the capacity are dropped.
        let mut longer = stream.clone();
        longer.extend_from_slice(&[0x3c; 7]);
        let n = u.unpack(types, 0, &longer);
        ensure!(n == len, "unpack took {n} of {len}");
        ensure!(
            u.unpack(types, len, &[1, 2]) == 0,
            "unpack past the capacity"
        );
        ensure!(
            u.unpack(types, len + 3, &[1]) == 0,
            "unpack of a fragment past the capacity"
        );
        ensure!(u.local_len() == len as u64, "local_len {}", u.local_len());
        ensure!(u.error().is_none(), "unpack error {:?}", u.error());
        drop(u);
        ensure!(
            d.bytes == expected,
            "unpack wrote other bytes than the type map's"
        );
    }

    check_splits(
        types,
        ty,
        count,
        &src,
        &stream,
        &dst,
        &expected,
        !overlaps(&map),
        splits,
        rng,
    )?;
    check_prefix(types, ty, model, count, splits, rng)?;
    if !overlaps(&map) && model.map.iter().all(|e| e.kind != Kind::LongDouble) {
        for (repr, target) in [
            (Repr::EXTERNAL32, EXTERNAL32),
            (
                Repr {
                    endian: Endian::Big,
                    ..Repr::NATIVE
                },
                BIG_NATIVE_SIZES,
            ),
        ] {
            check_conversion(types, ty, model, count, repr, &target, rng)
                .map_err(|e| format!("{repr:?}: {e}"))?;
        }
    }
    Ok(())
}

/// Packing and unpacking in pieces gives what one call gives: split at each position (one packer
/// resuming its cursor, and a fresh one seeking), at pairs of positions, and out of order.
#[allow(clippy::too_many_arguments)]
fn check_splits(
    types: &TypeTable,
    ty: Datatype,
    count: usize,
    src: &Mem,
    stream: &[u8],
    dst: &Mem,
    expected: &[u8],
    disjoint: bool,
    splits: Splits,
    rng: &mut Rng,
) -> Result<(), String> {
    let len = stream.len();
    let pack_pieces = |order: &[(usize, usize)]| -> Result<Vec<u8>, String> {
        let mut p = src.packer(types, count, ty);
        let mut out = vec![0u8; len];
        for &(a, b) in order {
            let n = p.pack(types, a, &mut out[a..b]);
            ensure!(n == b - a, "pack({a}..{b}) returned {n}");
        }
        Ok(out)
    };
    let unpack_pieces = |order: &[(usize, usize)]| -> Result<Vec<u8>, String> {
        let mut d = Mem {
            bytes: dst.bytes.clone(),
            origin: dst.origin,
        };
        let mut u = d.unpacker(types, count, ty);
        for &(a, b) in order {
            let n = u.unpack(types, a, &stream[a..b]);
            ensure!(n == b - a, "unpack({a}..{b}) took {n}");
        }
        drop(u);
        Ok(d.bytes)
    };
    for p in splits.positions(len, rng) {
        let (first, second) = ((0, p), (p, len));
        // In order on one packer: the second call resumes the cursor.
        ensure!(
            pack_pieces(&[first, second])? == stream,
            "pack split at {p}"
        );
        // Second half first: a fresh packer seeks, then seeks back.
        ensure!(
            pack_pieces(&[second, first])? == stream,
            "pack split at {p}, reversed"
        );
        ensure!(
            unpack_pieces(&[first, second])? == expected,
            "unpack split at {p}"
        );
        if disjoint {
            ensure!(
                unpack_pieces(&[second, first])? == expected,
                "unpack split at {p}, second half first"
            );
        }
    }
    for (p, q) in splits.pairs(len, rng) {
        let (a, b, c) = ((0, p), (p, q), (q, len));
        ensure!(pack_pieces(&[a, b, c])? == stream, "pack split at {p}, {q}");
        ensure!(
            pack_pieces(&[b, c, a])? == stream,
            "pack split at {p}, {q}, rotated"
        );
        ensure!(
            unpack_pieces(&[a, b, c])? == expected,
            "unpack split at {p}, {q}"
        );
        if disjoint {
            ensure!(
                unpack_pieces(&[c, a, b])? == expected,
                "unpack split at {p}, {q}, last piece first"
            );
        }
    }
    Ok(())
}

/// `prefix` of the native stream of `count` instances: a byte count (every one, or random ones)
/// gives those native bytes, and the whole elements before it (none when it ends inside one).
fn check_prefix(
    types: &TypeTable,
    ty: Datatype,
    model: &Model,
    count: usize,
    splits: Splits,
    rng: &mut Rng,
) -> Result<(), String> {
    let map = model.map_of(count);
    let ends = boundaries(map.iter().map(Elem::size));
    for b in splits.positions(*ends.last().unwrap(), rng) {
        let whole = ends.iter().position(|&e| e == b);
        let got = prefix(types, ty, &Repr::NATIVE, b as u64).map_err(|e| format!("{e:?}"))?;
        ensure!(
            got == (b as u64, whole.map(|w| w as u64)),
            "prefix({b}) = {got:?}, expected ({b}, {whole:?})"
        );
    }
    Ok(())
}

/// Converting packs and unpacks: `Packer::external` gives the model's encoding of each element
/// (cut only between elements), an unpacker told the stream's representation restores the
/// values, also from pieces that split elements, and a native packer for a converting peer
/// never splits an element.
fn check_conversion(
    types: &TypeTable,
    ty: Datatype,
    model: &Model,
    count: usize,
    repr: Repr,
    target: &Target,
    rng: &mut Rng,
) -> Result<(), String> {
    let map = model.map_of(count);
    // Values every representation can hold: `long`s within 32 bits, booleans 0 or 1.
    let mut src = Mem::covering(&map, noise(rng));
    for e in &map {
        match e.kind {
            Kind::Long => {
                let v = rng.range(i32::MIN as i64, i32::MAX as i64) as std::ffi::c_long;
                src.elem_mut(e).copy_from_slice(&v.to_ne_bytes());
            }
            Kind::Bool => src.elem_mut(e)[0] = rng.below(2) as u8,
            _ => {}
        }
    }
    let mut stream = Vec::new();
    for e in &map {
        ensure!(
            !encode(e.kind, src.elem(e), target, &mut stream),
            "model overflow"
        );
    }
    let ends = boundaries(map.iter().map(|e| e.kind.size_in(target)));
    let len = stream.len();
    ensure!(
        types.stream_size(ty, &repr).unwrap() * count as u64 == len as u64,
        "stream_size"
    );
    let biggest = map
        .iter()
        .map(|e| e.kind.size_in(target))
        .max()
        .unwrap_or(1);

    // Whole, then in pieces of random sizes: each piece ends between elements.
    {
        let mut p = src.external(types, count, ty, repr);
        ensure!(
            p.packed_len() == len,
            "packed_len {} != {len}",
            p.packed_len()
        );
        let mut out = vec![0u8; len];
        ensure!(
            p.pack(types, 0, &mut out) == len,
            "converting pack cut short"
        );
        ensure!(out == stream, "converted stream differs from the model's");
        ensure!(!p.overflowed(), "values in range overflowed");
        let mut out = vec![0u8; len];
        let mut pos = 0;
        while pos < len {
            let want = (biggest + rng.below(24) as usize).min(len - pos);
            let n = p.pack(types, pos, &mut out[pos..pos + want]);
            ensure!(n > 0 && n <= want, "pack({pos}, {want}) = {n}");
            ensure!(
                ends.contains(&(pos + n)),
                "converting pack at {pos} cut an element ({n})"
            );
            pos += n;
        }
        ensure!(out == stream, "converted stream in pieces differs");
    }

    // prefix of the converted stream: native bytes and elements at every element boundary.
    let native_ends = boundaries(map.iter().map(Elem::size));
    for (k, &b) in ends.iter().enumerate() {
        let got = prefix(types, ty, &repr, b as u64).map_err(|e| format!("{e:?}"))?;
        ensure!(
            got == (native_ends[k] as u64, Some(k as u64)),
            "converted prefix({b}) = {got:?}, expected ({}, Some({k}))",
            native_ends[k]
        );
        let size = ends.get(k + 1).map_or(0, |next| next - b);
        if size > 1 {
            let inside = prefix(types, ty, &repr, (b + 1) as u64).unwrap();
            ensure!(
                inside.1.is_none(),
                "converted prefix({}) = {inside:?}",
                b + 1
            );
        }
    }

    // Back to native: whole, and in pieces that split elements (the carry path).
    let before = Mem::covering(&map, sentinel);
    let native: Vec<u8> = map.iter().flat_map(|e| src.elem(e).to_vec()).collect();
    let expected = ref_unpack(&map, &before, &native);
    for piecewise in [false, true] {
        let mut d = Mem {
            bytes: before.bytes.clone(),
            origin: before.origin,
        };
        let mut u = d.unpacker(types, count, ty);
        u.set_source(types, &repr).unwrap();
        ensure!(
            u.capacity() == len,
            "converting capacity {} != {len}",
            u.capacity()
        );
        let mut pos = 0;
        while pos < len {
            let n = if piecewise {
                (1 + rng.below(13) as usize).min(len - pos)
            } else {
                len
            };
            let took = u.unpack(types, pos, &stream[pos..pos + n]);
            ensure!(took == n, "unpack({pos}, {n}) took {took}");
            pos += n;
        }
        ensure!(u.error().is_none(), "unpack error {:?}", u.error());
        ensure!(
            u.local_len() == native.len() as u64,
            "local_len {} != {}",
            u.local_len(),
            native.len()
        );
        drop(u);
        ensure!(
            d.bytes == expected,
            "converted unpack (piecewise: {piecewise}) differs"
        );
    }

    // A native packer for a converting peer: no fragment ends inside an element.
    let dense = types.info(ty).unwrap().dense_at.is_some();
    let mut p = src.packer(types, count, ty);
    p.whole_elements();
    let big = map.iter().map(Elem::size).max().unwrap_or(1);
    let mut out = vec![0u8; native.len()];
    let mut pos = 0;
    while pos < native.len() {
        let want = big + rng.below(20) as usize;
        let f = p.fragment_len(pos, want);
        let n = p.pack(types, pos, &mut out[pos..(pos + want).min(native.len())]);
        // Room for what pack writes; exactly that when the message is one dense run.
        ensure!(
            n <= f && f <= want && (f == n || !dense),
            "fragment_len({pos}, {want}) = {f} but pack wrote {n}"
        );
        ensure!(
            n > 0 && n <= want,
            "whole-element pack({pos}, {want}) = {n}"
        );
        ensure!(
            native_ends.contains(&(pos + n)),
            "whole-element pack at {pos} cut an element ({n})"
        );
        pos += n;
    }
    ensure!(out == native, "whole-element packing differs");
    Ok(())
}

/// Runs the round trip for each (name, tree) with `counts`, panicking with the tree on failure.
fn round_trip_all(cases: &[(&str, Tree)], counts: &[usize], splits: Splits) {
    let mut types = table();
    let mut rng = Rng::new(7);
    for (name, tree) in cases {
        for &count in counts {
            if let Err(e) = round_trip(&mut types, tree, count, splits, &mut rng) {
                panic!("{name} = {tree}, count {count}: {e}");
            }
        }
    }
    assert_eq!(types.derived_in_use(), 0, "types leaked");
}

/// Types covering every constructor, negative strides and displacements, markers, resizes,
/// padding, overlap, and nesting.
fn zoo() -> Vec<(&'static str, Tree)> {
    use Prim::*;
    let small_struct = || structure(vec![(1, 0, prim(Char)), (1, 4, prim(Int))]);
    let mut z = vec![
        ("int", prim(Int)),
        ("double_int (padded predefined)", prim(DoubleInt)),
        ("contiguous of int (dense)", contiguous(7, prim(Int))),
        ("contiguous of short_int", contiguous(5, prim(ShortInt))),
        ("contiguous of nothing", contiguous(0, prim(Int))),
        ("vector", vector(4, 3, 5, prim(Int))),
        (
            "vector filling its stride (dense)",
            vector(3, 4, 4, prim(Short)),
        ),
        ("vector, negative stride", vector(3, 2, -4, prim(Double))),
        ("vector of nothing", vector(0, 2, 3, prim(Int))),
        (
            "hvector, negative odd stride",
            hvector(4, 1, -13, prim(Short)),
        ),
        (
            "hvector, zero stride (overlap)",
            hvector(3, 2, 0, prim(Int)),
        ),
        ("hvector of pairs", hvector(3, 2, 40, prim(TwoInt))),
        (
            "indexed, unordered, a zero block",
            indexed(&[2, 0, 3, 1], &[5, 100, -3, 0], prim(Int)),
        ),
        (
            "hindexed of double_int",
            hindexed(&[1, 2], &[-7, 9], prim(DoubleInt)),
        ),
        (
            "indexed_block of char",
            indexed_block(2, &[3, -1, 1], prim(Char)),
        ),
        (
            "hindexed_block",
            hindexed_block(3, &[0, 40, -20], prim(Short)),
        ),
        (
            "struct char, double",
            structure(vec![(1, 0, prim(Char)), (1, 8, prim(Double))]),
        ),
        (
            "struct, negative displacement",
            structure(vec![
                (1, -6, prim(Int)),
                (1, 0, prim(Char)),
                (2, 8, prim(ShortInt)),
            ]),
        ),
        (
            "struct with LB and UB",
            structure(vec![
                (1, -4, prim(Lb)),
                (1, 0, prim(Int)),
                (1, 12, prim(Ub)),
            ]),
        ),
        (
            "contiguous of marked struct",
            contiguous(
                3,
                structure(vec![
                    (1, -4, prim(Lb)),
                    (1, 0, prim(Int)),
                    (1, 12, prim(Ub)),
                ]),
            ),
        ),
        (
            "struct with a resized field",
            structure(vec![(1, 0, prim(Int)), (1, 8, resized(-2, 10, prim(Int)))]),
        ),
        ("resized int", contiguous(3, resized(-4, 16, prim(Int)))),
        (
            "resized below its data (overlap)",
            resized(0, 4, contiguous(4, prim(Int))),
        ),
        (
            "resized with a gap",
            contiguous(3, resized(0, 12, prim(Double))),
        ),
        (
            "resized to zero extent (instances coincide)",
            resized(-2, 0, contiguous(2, prim(Int))),
        ),
        ("dup of vector", dup(vector(2, 2, 3, prim(DoubleComplex)))),
        (
            "subarray C",
            subarray(&[4, 5], &[2, 3], &[1, 2], Order::C, prim(Int)),
        ),
        (
            "subarray Fortran 3-D",
            subarray(
                &[3, 2, 4],
                &[2, 1, 2],
                &[1, 1, 1],
                Order::Fortran,
                prim(DoubleInt),
            ),
        ),
        (
            "darray block x cyclic",
            darray(
                4,
                &[4, 6],
                &[Distrib::Block, Distrib::Cyclic],
                &[DFLT_DARG, DFLT_DARG],
                &[2, 3],
                Order::C,
                prim(Double),
            ),
        ),
        (
            "darray cyclic(2) x none, Fortran",
            darray(
                1,
                &[7, 3],
                &[Distrib::Cyclic, Distrib::None],
                &[2, DFLT_DARG],
                &[3, 1],
                Order::Fortran,
                prim(Short),
            ),
        ),
        (
            "vector of negative vector",
            vector(3, 1, 2, vector(2, 2, -3, prim(Short))),
        ),
        (
            "struct of vector, chars and a double",
            structure(vec![
                (2, 0, vector(2, 1, 3, prim(Int))),
                (3, -5, prim(Char)),
                (1, 40, prim(Double)),
            ]),
        ),
        (
            "hvector of indexed of struct",
            hvector(2, 1, 100, indexed(&[1, 1], &[0, 2], small_struct())),
        ),
        (
            "struct of longs and bools",
            structure(vec![
                (2, 0, prim(Long)),
                (3, 16, prim(Bool)),
                (1, 20, prim(Float)),
            ]),
        ),
    ];
    if cfg!(target_arch = "x86_64") {
        z.push((
            "struct with long double",
            structure(vec![(1, 0, prim(Char)), (2, 16, prim(LongDouble))]),
        ));
    }
    z
}

// ---- 1. constructors: bounds by hand -----------------------------------------------------------

#[test]
fn contiguous_multiplies_size_and_strides_by_extent() {
    let mut t = table();
    use Prim::*;
    assert_eq!(
        engine_bounds(&mut t, &contiguous(3, prim(Int))),
        bounds(12, 0, 12, 0, 12, 3)
    );
    assert_eq!(
        engine_bounds(&mut t, &contiguous(0, prim(Int))),
        bounds(0, 0, 0, 0, 0, 0)
    );
    // The second pair starts at the pair's extent (16), not its size (12).
    assert_eq!(
        engine_bounds(&mut t, &contiguous(2, prim(DoubleInt))),
        bounds(24, 0, 32, 0, 28, 4)
    );
}

#[test]
fn a_predefined_pair_has_its_padding_in_the_extent_but_not_the_true_extent() {
    let t = table();
    let long = std::mem::size_of::<std::ffi::c_long>() as u64;
    let b = |d| bounds_of(t.info(d).unwrap());
    // struct { double; int; }: 12 bytes of data, sizeof 16.
    assert_eq!(b(Datatype::DOUBLE_INT), bounds(12, 0, 16, 0, 12, 2));
    // struct { short; int; }: the padding is inside, so the data spans all 8 bytes.
    assert_eq!(b(Datatype::SHORT_INT), bounds(6, 0, 8, 0, 8, 2));
    // struct { long; int; }.
    let l = long as isize;
    assert_eq!(
        b(Datatype::LONG_INT),
        bounds(long + 4, 0, 2 * l, 0, l + 4, 2)
    );
    assert_eq!(b(Datatype::TWO_INT), bounds(8, 0, 8, 0, 8, 2));
    assert_eq!(b(Datatype::INT), bounds(4, 0, 4, 0, 4, 1));
    assert_eq!(b(Datatype::UB), bounds(0, 0, 0, 0, 0, 0));
}

#[test]
fn vector_bounds_follow_count_blocklen_and_stride() {
    let mut t = table();
    use Prim::*;
    // Blocks of 8 bytes at 0, 16, 32.
    assert_eq!(
        engine_bounds(&mut t, &vector(3, 2, 4, prim(Int))),
        bounds(24, 0, 40, 0, 40, 6)
    );
    // Negative stride: blocks at 0, -16, -32.
    assert_eq!(
        engine_bounds(&mut t, &vector(3, 2, -4, prim(Int))),
        bounds(24, -32, 40, -32, 40, 6)
    );
    // hvector: doubles at 0, -10, -20 bytes.
    assert_eq!(
        engine_bounds(&mut t, &hvector(3, 1, -10, prim(Double))),
        bounds(24, -20, 28, -20, 28, 3)
    );
    // A stride in extents of a padded pair: 16 bytes.
    assert_eq!(
        engine_bounds(&mut t, &vector(2, 1, 1, prim(DoubleInt))),
        bounds(24, 0, 32, 0, 28, 4)
    );
    assert_eq!(
        engine_bounds(&mut t, &vector(0, 2, 4, prim(Int))),
        bounds(0, 0, 0, 0, 0, 0)
    );
    // No elements; the bounds of an empty type map are the implementation's choice.
    let empty = engine_bounds(&mut t, &vector(3, 0, 4, prim(Int)));
    assert_eq!((empty.size, empty.elems), (0, 0));
}

#[test]
fn indexed_bounds_come_from_the_extreme_blocks_in_any_order() {
    let mut t = table();
    use Prim::*;
    // Two ints at 20, one at 0, three at -12.
    assert_eq!(
        engine_bounds(&mut t, &indexed(&[2, 1, 3], &[5, 0, -3], prim(Int))),
        bounds(24, -12, 40, -12, 40, 6)
    );
    // A block of length 0 holds nothing and sets no bound.
    assert_eq!(
        engine_bounds(&mut t, &indexed(&[0, 2], &[100, 1], prim(Int))),
        bounds(8, 4, 8, 4, 8, 2)
    );
    // hindexed: displacements in bytes.
    assert_eq!(
        engine_bounds(&mut t, &hindexed(&[1, 2], &[-7, 9], prim(Double))),
        bounds(24, -7, 32, -7, 32, 3)
    );
    assert_eq!(
        engine_bounds(&mut t, &indexed_block(2, &[3, -1], prim(Int))),
        bounds(16, -4, 24, -4, 24, 4)
    );
    assert_eq!(
        engine_bounds(&mut t, &hindexed_block(1, &[0, 6], prim(Short))),
        bounds(4, 0, 8, 0, 8, 2)
    );
}

#[test]
fn struct_extent_is_padded_to_the_largest_alignment_like_c() {
    let mut t = table();
    use Prim::*;
    let mut s = |fields| engine_bounds(&mut t, &structure(fields));
    // struct { double; char; }: 9 bytes of data, sizeof 16.
    assert_eq!(
        s(vec![(1, 0, prim(Double)), (1, 8, prim(Char))]),
        bounds(9, 0, 16, 0, 9, 2)
    );
    // struct { int; char; }: sizeof 8.
    assert_eq!(
        s(vec![(1, 0, prim(Int)), (1, 4, prim(Char))]),
        bounds(5, 0, 8, 0, 5, 2)
    );
    // struct { char; short; char; }: sizeof 6.
    assert_eq!(
        s(vec![
            (1, 0, prim(Char)),
            (1, 2, prim(Short)),
            (1, 4, prim(Char))
        ]),
        bounds(4, 0, 6, 0, 5, 3)
    );
    assert_eq!(
        s(vec![(1, 0, prim(Char)), (1, 1, prim(Char))]),
        bounds(2, 0, 2, 0, 2, 2)
    );
    // A nested struct brings its alignment (4) and its padded extent (8): 1 + 8 = 9 -> 12.
    let inner = structure(vec![(1, 0, prim(Int)), (1, 4, prim(Char))]);
    assert_eq!(
        s(vec![(1, 0, prim(Char)), (1, 1, inner.clone())]),
        bounds(6, 0, 12, 0, 6, 3)
    );
    assert_eq!(
        s(vec![(1, 0, prim(Char)), (1, 4, inner)]),
        bounds(6, 0, 12, 0, 9, 3)
    );
    // Padding counts from the lower bound: data -6..1 (7 bytes) -> extent 8.
    assert_eq!(
        s(vec![(1, -6, prim(Int)), (1, 0, prim(Char))]),
        bounds(5, -6, 8, -6, 7, 2)
    );
    if cfg!(target_arch = "x86_64") {
        // long double is aligned to 16 on x86-64: 17 -> 32.
        assert_eq!(
            s(vec![(1, 0, prim(LongDouble)), (1, 16, prim(Char))]),
            bounds(17, 0, 32, 0, 17, 2)
        );
    }
}

#[test]
fn lb_and_ub_markers_in_a_struct_are_sticky() {
    let mut t = table();
    use Prim::*;
    let marked = structure(vec![
        (1, -4, prim(Lb)),
        (1, 0, prim(Int)),
        (1, 12, prim(Ub)),
    ]);
    assert_eq!(engine_bounds(&mut t, &marked), bounds(4, -4, 16, 0, 4, 1));
    // Copies sit an extent (16) apart; the markers of the first and last bound the whole.
    assert_eq!(
        engine_bounds(&mut t, &contiguous(2, marked.clone())),
        bounds(8, -4, 32, 0, 20, 2)
    );
    assert_eq!(
        engine_bounds(&mut t, &vector(2, 1, 3, marked)),
        bounds(8, -4, 64, 0, 52, 2)
    );
    // A sticky lower bound wins even above data that lies lower: the resized field's bounds
    // (8 - 2 = 6 and 8 + 8 = 16) are the struct's, though an int sits at 0.
    assert_eq!(
        engine_bounds(
            &mut t,
            &structure(vec![(1, 0, prim(Int)), (1, 8, resized(-2, 10, prim(Int)))])
        ),
        bounds(8, 6, 10, 0, 12, 2)
    );
    // Only an LB: the upper bound is the data's, padded from the sticky lb (6 -> 8).
    assert_eq!(
        engine_bounds(
            &mut t,
            &structure(vec![(1, 2, prim(Lb)), (1, 0, prim(Double))])
        ),
        bounds(8, 2, 8, 0, 8, 1)
    );
    // Only a UB, below the end of the data: it still wins, and nothing is padded.
    assert_eq!(
        engine_bounds(
            &mut t,
            &structure(vec![(1, 0, prim(Double)), (1, 4, prim(Ub))])
        ),
        bounds(8, 0, 4, 0, 8, 1)
    );
    assert_eq!(
        engine_bounds(
            &mut t,
            &structure(vec![(1, 4, prim(Int)), (1, 20, prim(Ub))])
        ),
        bounds(4, 4, 16, 4, 4, 1)
    );
}

#[test]
fn resized_sets_the_bounds_and_keeps_the_true_extent() {
    let mut t = table();
    use Prim::*;
    assert_eq!(
        engine_bounds(&mut t, &resized(-4, 16, prim(Int))),
        bounds(4, -4, 16, 0, 4, 1)
    );
    // Instances at 0, 16, 32.
    assert_eq!(
        engine_bounds(&mut t, &contiguous(3, resized(-4, 16, prim(Int)))),
        bounds(12, -4, 48, 0, 36, 3)
    );
    // An extent smaller than the data: instances overlap.
    assert_eq!(
        engine_bounds(
            &mut t,
            &contiguous(2, resized(0, 4, contiguous(4, prim(Int))))
        ),
        bounds(32, 0, 8, 0, 20, 8)
    );
    // A resized field's sticky ub keeps a struct from padding, even with data beyond it.
    assert_eq!(
        engine_bounds(
            &mut t,
            &structure(vec![
                (1, 0, resized(0, 12, prim(Double))),
                (1, 12, prim(Char))
            ])
        ),
        bounds(9, 0, 12, 0, 13, 2)
    );
}

#[test]
fn dup_keeps_the_bounds_and_the_commit_state() {
    let mut t = table();
    let v = vector(3, 2, -4, prim(Prim::Int)).build(&mut t).unwrap();
    let uncommitted = t.dup(v).unwrap();
    assert_eq!(t.info(uncommitted).unwrap(), t.info(v).unwrap());
    assert!(t.check_committed(uncommitted).is_err());
    t.commit(v).unwrap();
    let committed = t.dup(v).unwrap();
    assert!(t.check_committed(committed).is_ok());
    assert_eq!(t.envelope(committed).unwrap(), (Combiner::Dup, 0, 0, 1));
    // A dup of a predefined type is a derived type, committed like its original.
    let d = t.dup(Datatype::DOUBLE).unwrap();
    assert!(t.check_committed(d).is_ok());
    assert_eq!(bounds_of(t.info(d).unwrap()), bounds(8, 0, 8, 0, 8, 1));
    for x in [v, uncommitted, committed, d] {
        t.free(x).unwrap();
    }
    assert_eq!(t.derived_in_use(), 0);
}

/// The type map of `ty`, an int-based type with lb >= 0, as int indices: packs memory where
/// the int at index `k` holds `k`.
fn int_map(types: &TypeTable, ty: Datatype, count: usize) -> Vec<i32> {
    let info = *types.info(ty).unwrap();
    assert!(info.true_lb >= 0);
    let ints =
        (info.true_lb + info.true_extent) as usize / 4 + (count - 1) * info.extent as usize / 4;
    let values: Vec<i32> = (0..ints as i32).collect();
    let mem = Mem {
        bytes: values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        origin: 0,
    };
    let mut p = mem.packer(types, count, ty);
    let mut out = vec![0u8; p.packed_len()];
    assert_eq!(p.pack(types, 0, &mut out), out.len());
    out.chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn subarray_selects_the_block_in_c_and_fortran_order() {
    let mut t = table();
    let int = Datatype::INT;
    // Rows 1..3, columns 2..5 of a 4x5 C array: row-major offsets.
    let c = t
        .subarray(&[4, 5], &[2, 3], &[1, 2], Order::C, int)
        .unwrap();
    t.commit(c).unwrap();
    assert_eq!(bounds_of(t.info(c).unwrap()), bounds(24, 0, 80, 28, 32, 6));
    assert_eq!(int_map(&t, c, 1), [7, 8, 9, 12, 13, 14]);
    // The same selection of a Fortran array: the first index varies fastest (offset i + 4j).
    let f = t
        .subarray(&[4, 5], &[2, 3], &[1, 2], Order::Fortran, int)
        .unwrap();
    t.commit(f).unwrap();
    assert_eq!(bounds_of(t.info(f).unwrap()), bounds(24, 0, 80, 36, 40, 6));
    assert_eq!(int_map(&t, f, 1), [9, 10, 13, 14, 17, 18]);
    // 3-D, C order: offset 12i + 4j + k.
    let d3 = t
        .subarray(&[2, 3, 4], &[1, 2, 2], &[1, 1, 2], Order::C, int)
        .unwrap();
    t.commit(d3).unwrap();
    assert_eq!(int_map(&t, d3, 1), [18, 19, 22, 23]);
    // Two instances: the second array follows the first (extent 96 bytes = 24 ints).
    assert_eq!(int_map(&t, d3, 2), [18, 19, 22, 23, 42, 43, 46, 47]);
    // The old type's extent, not its size, is the element pitch.
    let p = t
        .subarray(&[3], &[2], &[1], Order::C, Datatype::DOUBLE_INT)
        .unwrap();
    assert_eq!(bounds_of(t.info(p).unwrap()), bounds(24, 0, 48, 16, 28, 4));
    for x in [c, f, d3, p] {
        t.free(x).unwrap();
    }
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn darray_on_a_2x3_grid_matches_the_map_worked_by_hand() {
    let mut t = table();
    let int = Datatype::INT;
    let dflt = [DFLT_DARG, DFLT_DARG];
    let bc = [Distrib::Block, Distrib::Cyclic];
    // A 4x6 array on a 2x3 grid; rank 4 is at (1, 1) (the grid is row-major). Rows by blocks of
    // ceil(4/2) = 2: rows 2, 3. Columns cyclic by 1 over 3: columns 1, 4.
    let d = t
        .darray(6, 4, &[4, 6], &bc, &dflt, &[2, 3], Order::C, int)
        .unwrap();
    t.commit(d).unwrap();
    assert_eq!(int_map(&t, d, 1), [13, 16, 19, 22]);
    assert_eq!(bounds_of(t.info(d).unwrap()), bounds(16, 0, 96, 52, 40, 4));
    // Fortran order: offset row + 4 * column, columns slowest.
    let f = t
        .darray(6, 4, &[4, 6], &bc, &dflt, &[2, 3], Order::Fortran, int)
        .unwrap();
    t.commit(f).unwrap();
    assert_eq!(int_map(&t, f, 1), [6, 7, 18, 19]);
    // Rank 0 at (0, 0): rows 0, 1; columns 0, 3.
    let r0 = t
        .darray(6, 0, &[4, 6], &bc, &dflt, &[2, 3], Order::C, int)
        .unwrap();
    t.commit(r0).unwrap();
    assert_eq!(int_map(&t, r0, 1), [0, 3, 6, 9]);
    // Cyclic blocks of 2 over 3 processes of 7 elements: rank 1 has 2, 3; rank 0 has 0, 1, 6.
    let c1 = t
        .darray(3, 1, &[7], &[Distrib::Cyclic], &[2], &[3], Order::C, int)
        .unwrap();
    let c0 = t
        .darray(3, 0, &[7], &[Distrib::Cyclic], &[2], &[3], Order::C, int)
        .unwrap();
    t.commit(c1).unwrap();
    t.commit(c0).unwrap();
    assert_eq!(int_map(&t, c1, 1), [2, 3]);
    assert_eq!(int_map(&t, c0, 1), [0, 1, 6]);
    // Blocks of a given 4 over 3 processes of 10: rank 2 has the short last block 8, 9.
    let b2 = t
        .darray(3, 2, &[10], &[Distrib::Block], &[4], &[3], Order::C, int)
        .unwrap();
    t.commit(b2).unwrap();
    assert_eq!(int_map(&t, b2, 1), [8, 9]);
    // Default blocks of ceil(5/4) = 2: rank 3 owns nothing but still spans the whole array.
    let empty = t
        .darray(
            4,
            3,
            &[5],
            &[Distrib::Block],
            &[DFLT_DARG],
            &[4],
            Order::C,
            int,
        )
        .unwrap();
    assert_eq!(bounds_of(t.info(empty).unwrap()), bounds(0, 0, 20, 0, 0, 0));
    // Not distributed rows, cyclic columns over 2: rank 1 has columns 1, 3 of every row.
    let n = t
        .darray(
            2,
            1,
            &[3, 4],
            &[Distrib::None, Distrib::Cyclic],
            &dflt,
            &[1, 2],
            Order::C,
            int,
        )
        .unwrap();
    t.commit(n).unwrap();
    assert_eq!(int_map(&t, n, 1), [1, 3, 5, 7, 9, 11]);
    for x in [d, f, r0, c1, c0, b2, empty, n] {
        t.free(x).unwrap();
    }
    assert_eq!(t.derived_in_use(), 0);
}

/// A darray's global sizes, distributions, distribution arguments and process grid.
type DarrayCase<'a> = (&'a [i32], &'a [Distrib], &'a [i32], &'a [i32]);

#[test]
fn darray_pieces_of_every_rank_match_the_standard_and_partition_the_array() {
    let mut t = table();
    use Distrib::*;
    let cases: &[DarrayCase] = &[
        (&[4, 6], &[Block, Cyclic], &[DFLT_DARG, DFLT_DARG], &[2, 3]),
        (&[5, 7], &[Cyclic, Block], &[2, DFLT_DARG], &[2, 3]),
        (&[5, 7], &[Block, Block], &[3, 4], &[2, 2]),
        (&[6, 5], &[None, Cyclic], &[DFLT_DARG, 2], &[1, 3]),
        (
            &[3, 4, 5],
            &[Cyclic, None, Block],
            &[1, DFLT_DARG, DFLT_DARG],
            &[2, 1, 2],
        ),
    ];
    for &(gsizes, distribs, dargs, psizes) in cases {
        for order in [Order::C, Order::Fortran] {
            let size: i32 = psizes.iter().product();
            let total: i32 = gsizes.iter().product();
            let mut owner = vec![0u32; total as usize];
            for rank in 0..size {
                let tree = darray(
                    rank,
                    gsizes,
                    distribs,
                    dargs,
                    psizes,
                    order,
                    prim(Prim::Int),
                );
                let ty = make(&mut t, &tree);
                let model: Vec<i32> = tree.model().map.iter().map(|e| e.disp as i32 / 4).collect();
                let got = int_map(&t, ty, 1);
                assert_eq!(got, model, "{tree}");
                assert_eq!(t.info(ty).unwrap().extent, total as isize * 4, "{tree}");
                for i in got {
                    owner[i as usize] += 1;
                }
                free(&mut t, ty);
            }
            assert!(
                owner.iter().all(|&n| n == 1),
                "{gsizes:?} {distribs:?} {psizes:?}: every element once, got {owner:?}"
            );
        }
    }
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn constructors_reject_bad_arguments_with_the_standard_classes() {
    let mut t = table();
    let int = Datatype::INT;
    assert_eq!(t.contiguous(-1, int).unwrap_err().class, ErrorClass::Count);
    assert_eq!(
        t.vector(2, -1, Some(1), None, int).unwrap_err().class,
        ErrorClass::Count
    );
    assert_eq!(
        t.vector(2, 1, Some(1), Some(4), int).unwrap_err().class,
        ErrorClass::Arg
    );
    assert_eq!(
        t.indexed(&[1, 2], Some(&[0]), None, int).unwrap_err().class,
        ErrorClass::Arg
    );
    assert_eq!(
        t.indexed(&[1, -2], Some(&[0, 1]), None, int)
            .unwrap_err()
            .class,
        ErrorClass::Count
    );
    assert_eq!(
        t.subarray(&[4], &[3], &[2], Order::C, int)
            .unwrap_err()
            .class,
        ErrorClass::Arg
    );
    let dflt = [DFLT_DARG];
    // psizes do not multiply to size; NONE over 2 processes; blocks of 2 cannot cover 5 on 2.
    assert!(t
        .darray(3, 0, &[4], &[Distrib::Block], &dflt, &[2], Order::C, int)
        .is_err());
    assert!(t
        .darray(2, 0, &[4], &[Distrib::None], &dflt, &[2], Order::C, int)
        .is_err());
    assert!(t
        .darray(2, 0, &[5], &[Distrib::Block], &[2], &[2], Order::C, int)
        .is_err());
    assert!(t.free(int).is_err(), "predefined types cannot be freed");
    assert_eq!(
        t.derived_in_use(),
        0,
        "failed constructors leave nothing behind"
    );
}

// ---- 1. envelope and contents --------------------------------------------------------------------

/// `MPI_Type_get_envelope` and `MPI_Type_get_contents` of `ty`, the returned types freed again.
fn contents(t: &mut TypeTable, ty: Datatype) -> (Combiner, Vec<i32>, Vec<isize>, Vec<Datatype>) {
    let (combiner, ni, na, nt) = t.envelope(ty).unwrap();
    let mut ints = vec![0i32; ni];
    let mut aints = vec![0isize; na];
    let mut dts = vec![None; nt];
    t.contents(ty, &mut ints, &mut aints, |k, d| dts[k] = Some(d))
        .unwrap();
    let dts: Vec<Datatype> = dts
        .into_iter()
        .map(|d| d.expect("every type given"))
        .collect();
    // The caller owns the returned derived types.
    for d in &dts {
        free(t, *d);
    }
    (combiner, ints, aints, dts)
}

#[test]
fn envelope_and_contents_follow_the_standard_layout_for_every_combiner() {
    let mut t = table();
    let (int, dbl) = (Datatype::INT, Datatype::DOUBLE);
    // MPICH's mpi.h: MPI_ORDER_C 56, MPI_ORDER_FORTRAN 57, MPI_DISTRIBUTE_BLOCK 121,
    // MPI_DISTRIBUTE_CYCLIC 122, MPI_DISTRIBUTE_NONE 123, MPI_DISTRIBUTE_DFLT_DARG -49767.
    let mut made = Vec::new();
    let mut check = |t: &mut TypeTable,
                     ty: Datatype,
                     combiner: Combiner,
                     ints: &[i32],
                     aints: &[isize],
                     dts: &[Datatype]| {
        assert_eq!(
            t.envelope(ty).unwrap(),
            (combiner, ints.len(), aints.len(), dts.len())
        );
        assert_eq!(
            contents(t, ty),
            (combiner, ints.to_vec(), aints.to_vec(), dts.to_vec())
        );
        made.push(ty);
    };
    let c = t.contiguous(3, int).unwrap();
    check(&mut t, c, Combiner::Contiguous, &[3], &[], &[int]);
    let v = t.vector(3, 2, Some(-4), None, dbl).unwrap();
    check(&mut t, v, Combiner::Vector, &[3, 2, -4], &[], &[dbl]);
    let hv = t.vector(2, 3, None, Some(-24), c).unwrap();
    check(&mut t, hv, Combiner::Hvector, &[2, 3], &[-24], &[c]);
    let ix = t.indexed(&[2, 1], Some(&[5, -1]), None, int).unwrap();
    check(
        &mut t,
        ix,
        Combiner::Indexed,
        &[2, 2, 1, 5, -1],
        &[],
        &[int],
    );
    let hix = t.indexed(&[2, 1], None, Some(&[40, -8]), int).unwrap();
    check(
        &mut t,
        hix,
        Combiner::Hindexed,
        &[2, 2, 1],
        &[40, -8],
        &[int],
    );
    let ib = t.indexed_block(2, Some(&[3, -1, 7]), None, int).unwrap();
    check(
        &mut t,
        ib,
        Combiner::IndexedBlock,
        &[3, 2, 3, -1, 7],
        &[],
        &[int],
    );
    let hib = t.indexed_block(1, None, Some(&[0, 6]), v).unwrap();
    check(&mut t, hib, Combiner::HindexedBlock, &[2, 1], &[0, 6], &[v]);
    let st = t
        .create_struct(&[1, 2, 1], &[0, 8, 64], &[Datatype::CHAR, v, Datatype::UB])
        .unwrap();
    check(
        &mut t,
        st,
        Combiner::Struct,
        &[3, 1, 2, 1],
        &[0, 8, 64],
        &[Datatype::CHAR, v, Datatype::UB],
    );
    let rs = t.resized(int, -4, 16).unwrap();
    check(&mut t, rs, Combiner::Resized, &[], &[-4, 16], &[int]);
    let du = t.dup(st).unwrap();
    check(&mut t, du, Combiner::Dup, &[], &[], &[st]);
    let sa = t
        .subarray(&[4, 5], &[2, 3], &[1, 2], Order::C, dbl)
        .unwrap();
    check(
        &mut t,
        sa,
        Combiner::Subarray,
        &[2, 4, 5, 2, 3, 1, 2, 56],
        &[],
        &[dbl],
    );
    let da = t
        .darray(
            6,
            4,
            &[4, 6],
            &[Distrib::Block, Distrib::Cyclic],
            &[DFLT_DARG, 2],
            &[2, 3],
            Order::Fortran,
            rs,
        )
        .unwrap();
    check(
        &mut t,
        da,
        Combiner::Darray,
        &[6, 4, 2, 4, 6, 121, 122, DFLT_DARG, 2, 2, 3, 57],
        &[],
        &[rs],
    );
    let none = t
        .darray(
            2,
            1,
            &[3, 4],
            &[Distrib::None, Distrib::Cyclic],
            &[DFLT_DARG, 1],
            &[1, 2],
            Order::C,
            int,
        )
        .unwrap();
    check(
        &mut t,
        none,
        Combiner::Darray,
        &[2, 1, 2, 3, 4, 123, 122, DFLT_DARG, 1, 1, 2, 56],
        &[],
        &[int],
    );
    // Predefined types are "named" and have no contents.
    assert_eq!(t.envelope(int).unwrap(), (Combiner::Named, 0, 0, 0));
    assert!(t.contents(int, &mut [], &mut [], |_, _| {}).is_err());
    for ty in made.into_iter().rev() {
        t.free(ty).unwrap();
    }
    assert_eq!(t.derived_in_use(), 0, "contents' references all returned");
}

// ---- 1. life cycle ------------------------------------------------------------------------------

#[test]
fn freeing_an_inner_type_keeps_the_outer_type_and_its_contents_working() {
    let mut t = table();
    let mut rng = Rng::new(1);
    let inner_tree = indexed(&[2, 1], &[3, -1], prim(Prim::Short));
    let inner = inner_tree.build(&mut t).unwrap();
    let inner_info = *t.info(inner).unwrap();
    let outer = t.vector(3, 1, Some(2), None, inner).unwrap();
    t.free(inner).unwrap();
    t.commit(outer).unwrap();
    // Types made (and freed) since must not disturb the outer type's description.
    for k in 1..20 {
        let x = t.contiguous(k, Datatype::DOUBLE_INT).unwrap();
        t.free(x).unwrap();
    }
    let model = vector(3, 1, 2, inner_tree).model();
    round_trip_of(&mut t, outer, &model, 2, Splits::Random(4), &mut rng).unwrap();
    // The inner type comes back from the contents, alive, and must be freed by the caller.
    let (combiner, _, _, dts) = {
        let (c, ni, na, nt) = t.envelope(outer).unwrap();
        let mut dts = Vec::new();
        t.contents(outer, &mut vec![0; ni], &mut vec![0; na], |_, d| {
            dts.push(d)
        })
        .unwrap();
        assert_eq!(nt, 1);
        (c, ni, na, dts)
    };
    assert_eq!(combiner, Combiner::Vector);
    assert_eq!(dts, [inner]);
    assert_eq!(t.info(inner).unwrap(), &inner_info);
    assert_eq!(t.envelope(inner).unwrap().0, Combiner::Indexed);
    t.free(inner).unwrap();
    t.free(outer).unwrap();
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn a_type_freed_while_a_packer_holds_it_stays_valid_until_the_packer_goes() {
    let mut t = table();
    let tree = hindexed(&[2, 3, 1], &[40, -16, 8], prim(Prim::TwoInt));
    let model = tree.model();
    let ty = make(&mut t, &tree);
    let map = model.map_of(2);
    let mut rng = Rng::new(3);
    let src = Mem::covering(&map, noise(&mut rng));
    let stream = ref_pack(&map, &src);
    let mut p = src.packer(&t, 2, ty);
    let mut out = vec![0u8; stream.len()];
    assert_eq!(p.pack(&t, 0, &mut out[..5]), 5);
    t.free(ty).unwrap();
    // New types reclaim what is free; the held type's slot and nodes are not free.
    let mut others = Vec::new();
    for k in 1..40 {
        let x = t
            .indexed(&[1, k], Some(&[0, 3]), None, Datatype::DOUBLE)
            .unwrap();
        assert_ne!(x, ty, "a held type's slot was reused");
        others.push(x);
    }
    assert_eq!(
        t.derived_in_use(),
        others.len() + 1,
        "the held type is still there"
    );
    // Resume where the cursor stopped, and seek elsewhere.
    assert_eq!(p.pack(&t, 5, &mut out[5..]), stream.len() - 5);
    assert_eq!(out, stream);
    let mut again = vec![0u8; stream.len()];
    assert_eq!(p.pack(&t, 0, &mut again), stream.len());
    assert_eq!(again, stream);
    drop(p);
    // The next constructor reclaims it.
    let x = t.contiguous(1, Datatype::INT).unwrap();
    others.push(x);
    assert_eq!(t.derived_in_use(), others.len());
    for x in others {
        t.free(x).unwrap();
    }
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn a_type_freed_while_an_unpacker_holds_it_stays_valid() {
    let mut t = table();
    let tree = vector(3, 2, -3, prim(Prim::Int));
    let model = tree.model();
    let ty = make(&mut t, &tree);
    let map = model.map_of(1);
    let stream: Vec<u8> = (0..model.size() as u8).collect();
    let mut d = Mem::covering(&map, sentinel);
    let expected = ref_unpack(&map, &d, &stream);
    let mut u = d.unpacker(&t, 1, ty);
    t.free(ty).unwrap();
    let x = t.contiguous(5, Datatype::SHORT).unwrap();
    assert_eq!(u.unpack(&t, 4, &stream[4..]), stream.len() - 4);
    assert_eq!(u.unpack(&t, 0, &stream[..4]), 4);
    drop(u);
    assert_eq!(d.bytes, expected);
    t.free(x).unwrap();
    assert_eq!(
        t.derived_in_use(),
        1,
        "freed, idle, reclaimed by the next constructor"
    );
    let y = t.contiguous(2, Datatype::INT).unwrap();
    t.free(y).unwrap();
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn an_empty_message_of_a_derived_type_ignores_data_anywhere() {
    let mut t = table();
    // Zero instances of a type with gaps, and one instance of a type without data.
    for (tree, count) in [
        (vector(2, 1, 2, prim(Prim::Int)), 0),
        (contiguous(0, prim(Prim::Int)), 1),
    ] {
        let ty = make(&mut t, &tree);
        let mut mem = Mem {
            bytes: vec![7u8; 16],
            origin: 0,
        };
        let mut p = mem.packer(&t, count, ty);
        assert_eq!(p.packed_len(), 0);
        assert_eq!(p.pack(&t, 8, &mut [0u8; 4]), 0, "{tree}");
        drop(p);
        // A truncated message's later fragments arrive at offsets past the (empty) capacity.
        let mut u = mem.unpacker(&t, count, ty);
        assert_eq!(u.unpack(&t, 4096, &[1, 2, 3]), 0, "{tree}");
        assert_eq!(u.unpack(&t, 0, &[1, 2, 3]), 0, "{tree}");
        u.set_source(&t, &Repr::EXTERNAL32).unwrap();
        assert_eq!(u.unpack(&t, 12, &[1, 2, 3]), 0, "{tree}");
        drop(u);
        assert_eq!(mem.bytes, [7u8; 16]);
        free(&mut t, ty);
    }
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn uncommitted_types_cannot_be_packed() {
    let mut t = table();
    let v = t.vector(2, 1, Some(2), None, Datatype::INT).unwrap();
    let mem = [0u8; 16];
    // SAFETY: 16 bytes cover the type map (ints at 0 and 8); the packer is never used.
    let r = unsafe { Packer::new(mem.as_ptr(), 1, v, &t) };
    assert_eq!(r.err().map(|e| e.class), Some(ErrorClass::Type));
    t.commit(v).unwrap();
    // SAFETY: as above.
    assert!(unsafe { Packer::new(mem.as_ptr(), 1, v, &t) }.is_ok());
    t.free(v).unwrap();
    assert_eq!(t.derived_in_use(), 0);
}

// ---- 2. and 3. the reference packer, and splits --------------------------------------------------

#[test]
fn zoo_bounds_match_the_model() {
    let mut t = table();
    for (name, tree) in zoo() {
        assert_eq!(
            engine_bounds(&mut t, &tree),
            model_bounds(&tree.model()),
            "{name} = {tree}"
        );
    }
}

#[test]
fn zoo_packs_unpacks_and_converts_like_the_reference_split_anywhere() {
    round_trip_all(&zoo(), &[0, 1, 3], Splits::Every { pairs: 24 });
}

// ---- 4. random type trees -----------------------------------------------------------------------

/// Seeds of the randomized round trips (fixed, so a failure reproduces).
const SEEDS: [u64; 12] = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 0x5eed, 0xdead_beef];

/// Most bytes of data, and of memory span, a random type may have per instance.
const MAX_DATA: usize = 2048;
const MAX_SPAN: isize = 16 * 1024;

#[test]
fn random_type_trees_round_trip_against_the_reference() {
    let mut types = table();
    let mut trees = 0;
    for seed in SEEDS {
        let mut rng = Rng::new(seed);
        let mut made = 0;
        while made < 40 {
            let tree = random_tree(&mut rng, 4);
            let m = tree.model();
            let (_, span) = m.true_bounds();
            if m.size() > MAX_DATA || span > MAX_SPAN || m.extent().abs() > MAX_SPAN {
                continue;
            }
            let count = rng.range(1, 3) as usize;
            if let Err(e) = round_trip(&mut types, &tree, count, Splits::Random(6), &mut rng) {
                panic!("seed {seed}, tree #{made}: {tree}, count {count}: {e}");
            }
            made += 1;
        }
        trees += made;
    }
    assert_eq!(trees, SEEDS.len() * 40);
    assert_eq!(types.derived_in_use(), 0, "types leaked");
}

// ---- 5. conversion ------------------------------------------------------------------------------

/// `n` native values as bytes.
fn ne_bytes<const N: usize, T: Copy>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// Packs `count` elements of predefined `ty` from `data` into `repr`; returns the stream and
/// whether something overflowed.
fn pack_external(
    types: &TypeTable,
    data: &[u8],
    count: usize,
    ty: Datatype,
    repr: Repr,
) -> (Vec<u8>, bool) {
    // SAFETY: `data` holds `count` elements of `ty` and outlives the packer.
    let mut p = unsafe { Packer::external(data.as_ptr(), count as u64, ty, types, repr) }.unwrap();
    let mut out = vec![0u8; p.packed_len()];
    assert_eq!(p.pack(types, 0, &mut out), out.len());
    (out, p.overflowed())
}

/// Unpacks `stream` in representation `repr` into `count` elements of `ty`, feeding `piece`
/// bytes at a time; returns the native bytes and the unpacker's error.
fn unpack_external(
    types: &TypeTable,
    stream: &[u8],
    count: usize,
    ty: Datatype,
    repr: Repr,
    piece: usize,
) -> (Vec<u8>, Option<ConvError>) {
    let mut out = vec![0u8; count * types.info(ty).unwrap().extent as usize];
    // SAFETY: `out` holds `count` elements of `ty`; the unpacker is dropped before `out` is read.
    let mut u = unsafe { Unpacker::new(out.as_mut_ptr(), count as u64, ty, types) }.unwrap();
    u.set_source(types, &repr).unwrap();
    for (i, chunk) in stream.chunks(piece).enumerate() {
        assert_eq!(u.unpack(types, i * piece, chunk), chunk.len());
    }
    let err = u.error();
    drop(u);
    (out, err)
}

#[test]
fn external32_is_big_endian_with_the_standard_widths() {
    let t = table();
    let ints = [1i32, -2, 0x0102_0304];
    let (s, o) = pack_external(
        &t,
        &ne_bytes(&ints, i32::to_ne_bytes),
        3,
        Datatype::INT,
        Repr::EXTERNAL32,
    );
    assert_eq!(s, ne_bytes(&ints, i32::to_be_bytes));
    assert!(!o);
    let doubles = [1.5f64, -0.0, f64::MAX];
    let (s, _) = pack_external(
        &t,
        &ne_bytes(&doubles, f64::to_ne_bytes),
        3,
        Datatype::DOUBLE,
        Repr::EXTERNAL32,
    );
    assert_eq!(s, ne_bytes(&doubles, f64::to_be_bytes));
    // external32's long has 4 bytes, whatever this machine's has.
    let longs: [std::ffi::c_long; 3] = [7, -5, i32::MAX as _];
    let (s, o) = pack_external(
        &t,
        &ne_bytes(&longs, |v: std::ffi::c_long| v.to_ne_bytes()),
        3,
        Datatype::LONG,
        Repr::EXTERNAL32,
    );
    assert_eq!(s, ne_bytes(&[7i32, -5, i32::MAX], i32::to_be_bytes));
    assert!(!o);
    assert_eq!(t.stream_size(Datatype::LONG, &Repr::EXTERNAL32).unwrap(), 4);
    // A pair keeps its padding out of the stream: 8 + 4 bytes.
    assert_eq!(
        t.stream_size(Datatype::DOUBLE_INT, &Repr::EXTERNAL32)
            .unwrap(),
        12
    );
}

#[test]
fn external32_of_a_struct_converts_each_field() {
    let mut t = table();
    let long = std::mem::size_of::<std::ffi::c_long>();
    // struct { int i; double d; long l; } as a C compiler lays it out (LP64 or ILP32).
    let ty = t
        .create_struct(
            &[1, 1, 1],
            &[0, 8, 16],
            &[Datatype::INT, Datatype::DOUBLE, Datatype::LONG],
        )
        .unwrap();
    t.commit(ty).unwrap();
    let ext = t.info(ty).unwrap().extent as usize;
    assert_eq!(ext, 24);
    let values = [(-2i32, 1.5f64, 0x1234_5678i32), (3, -0.25, -9)];
    // Padding stays zero, as the unpacked copy's does.
    let mut mem = vec![0u8; 2 * ext];
    for (k, &(i, d, l)) in values.iter().enumerate() {
        let b = k * ext;
        mem[b..b + 4].copy_from_slice(&i.to_ne_bytes());
        mem[b + 8..b + 16].copy_from_slice(&d.to_ne_bytes());
        mem[b + 16..b + 16 + long].copy_from_slice(&(l as std::ffi::c_long).to_ne_bytes());
    }
    let (s, o) = pack_external(&t, &mem, 2, ty, Repr::EXTERNAL32);
    let mut want = Vec::new();
    for (i, d, l) in values {
        want.extend(i.to_be_bytes());
        want.extend(d.to_be_bytes());
        want.extend(l.to_be_bytes());
    }
    assert_eq!((s.clone(), o), (want, false));
    // And back, 1 to 17 bytes at a time: pieces that split elements are carried.
    for piece in 1..=17 {
        let (back, err) = unpack_external(&t, &s, 2, ty, Repr::EXTERNAL32, piece);
        assert_eq!((back, err), (mem.clone(), None), "pieces of {piece}");
    }
    t.free(ty).unwrap();
}

#[test]
fn unpacking_external32_sign_extends_longs() {
    let t = table();
    let stream = ne_bytes(&[-5i32, i32::MIN, 77], i32::to_be_bytes);
    for piece in [1, 3, 5, 12] {
        let (back, err) = unpack_external(&t, &stream, 3, Datatype::LONG, Repr::EXTERNAL32, piece);
        assert_eq!(err, None);
        let want: [std::ffi::c_long; 3] = [-5, i32::MIN as _, 77];
        assert_eq!(
            back,
            ne_bytes(&want, |v: std::ffi::c_long| v.to_ne_bytes()),
            "piece {piece}"
        );
    }
}

#[test]
fn a_long_above_2_pow_31_overflows_external32() {
    let t = table();
    if std::mem::size_of::<std::ffi::c_long>() < 8 {
        return; // Every long fits external32's 4 bytes here.
    }
    let to = |v: i64| (v as std::ffi::c_long).to_ne_bytes();
    for (v, overflows) in [
        (i32::MAX as i64, false),
        (i32::MIN as i64, false),
        (1i64 << 31, true),
        (1i64 << 33, true),
        (-(1i64 << 31) - 1, true),
    ] {
        let data = ne_bytes(&[1, v, 2], to);
        let (s, o) = pack_external(&t, &data, 3, Datatype::LONG, Repr::EXTERNAL32);
        assert_eq!(o, overflows, "{v}");
        assert_eq!(s.len(), 12);
        // The neighbours are intact, the value truncated to its low 32 bits.
        assert_eq!(s[..4], 1i32.to_be_bytes());
        assert_eq!(s[4..8], (v as i32).to_be_bytes());
        assert_eq!(s[8..], 2i32.to_be_bytes());
    }
    // Unsigned longs up to 2^32 - 1 fit; 2^32 does not.
    let data = ne_bytes(&[u32::MAX as i64], to);
    assert!(!pack_external(&t, &data, 1, Datatype::UNSIGNED_LONG, Repr::EXTERNAL32).1);
    let data = ne_bytes(&[1i64 << 32], to);
    assert!(pack_external(&t, &data, 1, Datatype::UNSIGNED_LONG, Repr::EXTERNAL32).1);
}

/// A big-endian peer with this machine's sizes, as its architecture descriptor decodes.
fn big_endian_peer() -> Repr {
    let info = ArchInfo {
        endian: Endian::Big,
        ..ArchInfo::LOCAL
    };
    Repr::of(Arch::encode(&info).expect("encodable")).expect("decodable")
}

#[test]
fn a_big_endian_peer_with_native_sizes_gets_byte_swapped_elements() {
    let t = table();
    let peer = big_endian_peer();
    assert_eq!(
        peer,
        Repr {
            endian: Endian::Big,
            ..Repr::NATIVE
        }
    );
    let longs: [std::ffi::c_long; 2] = [-3, std::ffi::c_long::MAX];
    let data = ne_bytes(&longs, |v: std::ffi::c_long| v.to_ne_bytes());
    let (s, o) = pack_external(&t, &data, 2, Datatype::LONG, peer);
    assert_eq!(s, ne_bytes(&longs, |v: std::ffi::c_long| v.to_be_bytes()));
    assert!(!o, "same width: nothing can overflow");
    for piece in [1, 3, 7, 16] {
        assert_eq!(
            unpack_external(&t, &s, 2, Datatype::LONG, peer, piece),
            (data.clone(), None)
        );
    }
}

#[test]
fn a_whole_element_packer_never_cuts_inside_an_element() {
    let mut t = table();
    // A dense type (one run of doubles) and typed ones with elements of 1, 2, 4, 8 bytes.
    let trees = [
        contiguous(6, prim(Prim::Double)),
        structure(vec![
            (1, 0, prim(Prim::Char)),
            (2, 2, prim(Prim::Short)),
            (1, 8, prim(Prim::Double)),
            (3, 16, prim(Prim::Int)),
        ]),
        vector(3, 2, -3, prim(Prim::DoubleInt)),
    ];
    for tree in &trees {
        let ty = make(&mut t, tree);
        let dense = t.info(ty).unwrap().dense_at.is_some();
        let model = tree.model();
        let map = model.map_of(2);
        let mut rng = Rng::new(11);
        let src = Mem::covering(&map, noise(&mut rng));
        let stream = ref_pack(&map, &src);
        let ends = boundaries(map.iter().map(Elem::size));
        let len = stream.len();
        let biggest = map.iter().map(Elem::size).max().unwrap();
        for &pos in &ends[..ends.len() - 1] {
            for want in 1..=len - pos {
                // Two fresh packers: one asked first, one packing cold (the seek path).
                let mut p = src.packer(&t, 2, ty);
                p.whole_elements();
                let f = p.fragment_len(pos, want);
                let mut out = vec![0u8; want];
                let n = p.pack(&t, pos, &mut out);
                // The most whole elements that fit `want`.
                let best = ends.iter().rev().find(|&&e| e <= pos + want).unwrap() - pos;
                assert_eq!(n, best, "{tree}: pack({pos}, {want})");
                assert_eq!(
                    out[..n],
                    stream[pos..pos + n],
                    "{tree}: pack({pos}, {want})"
                );
                if want >= biggest {
                    // Room for the fragment pack writes; exactly it for a dense message.
                    assert!(
                        f >= n && f <= want,
                        "{tree}: fragment_len({pos}, {want}) = {f}"
                    );
                    if dense {
                        assert_eq!(f, n, "{tree}: fragment_len({pos}, {want})");
                    }
                }
            }
        }
        // The end of the message may be any size.
        let mut p = src.packer(&t, 2, ty);
        p.whole_elements();
        assert_eq!(p.fragment_len(len - 1, 100), 1);
        drop(p);
        free(&mut t, ty);
    }
    assert_eq!(t.derived_in_use(), 0);
}

#[test]
fn a_packer_over_packed_data_cuts_between_elements_for_a_converting_peer() {
    let mut t = table();
    let tree = structure(vec![(1, 0, prim(Prim::Short)), (1, 8, prim(Prim::Double))]);
    let ty = make(&mut t, &tree);
    let packed: Vec<u8> = (0..30u8).collect(); // 3 instances of 10 packed bytes
                                               // SAFETY: `packed` holds the packed bytes of 3 instances and outlives the packer.
    let mut p = unsafe { Packer::packed(packed.as_ptr(), 3, ty, &t) }.unwrap();
    p.whole_elements();
    let mut out = vec![0u8; 30];
    let mut pos = 0;
    for (want, got) in [(9, 2), (9, 8), (11, 10), (100, 10)] {
        let n = p.pack(&t, pos, &mut out[pos..(pos + want).min(30)]);
        assert_eq!(n, got, "pack({pos}, {want})");
        pos += n;
    }
    assert_eq!(out, packed);
    drop(p);
    t.free(ty).unwrap();
}

#[test]
fn a_converted_stream_ending_inside_an_element_is_reported() {
    let t = table();
    let stream = ne_bytes(&[1i32, 2], i32::to_be_bytes);
    let mut out = [0u8; 16];
    // SAFETY: `out` holds 2 longs (or 4 on ILP32); the unpacker is dropped before `out` is read.
    let mut u = unsafe { Unpacker::new(out.as_mut_ptr(), 2, Datatype::LONG, &t) }.unwrap();
    u.set_source(&t, &Repr::EXTERNAL32).unwrap();
    assert_eq!(u.unpack(&t, 0, &stream[..6]), 6);
    assert_eq!(
        u.error(),
        Some(ConvError::Misaligned),
        "half an element pending"
    );
    assert_eq!(u.unpack(&t, 6, &stream[6..]), 2);
    assert_eq!(u.error(), None, "completed");
    drop(u);
    // A fragment that starts inside an element, with no start to continue, is refused.
    // SAFETY: as above.
    let mut u = unsafe { Unpacker::new(out.as_mut_ptr(), 2, Datatype::LONG, &t) }.unwrap();
    u.set_source(&t, &Repr::EXTERNAL32).unwrap();
    assert_eq!(u.unpack(&t, 2, &stream[2..]), 0);
    assert_eq!(u.error(), Some(ConvError::Misaligned));
}

#[test]
fn a_bool_keeps_its_truth_across_widths() {
    let t = table();
    // A big-endian peer whose C bool has 4 bytes.
    let peer = Repr {
        endian: Endian::Big,
        bool_: 4,
        ..Repr::NATIVE
    };
    let (s, o) = pack_external(&t, &[1, 0, 1], 3, Datatype::C_BOOL, peer);
    assert_eq!((s, o), (vec![0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1], false));
    // Any non-zero byte is true, wherever it is.
    let stream = [0, 0, 2, 0, 0, 0, 0, 0, 0x80, 0, 0, 0];
    for piece in [1, 5, 12] {
        assert_eq!(
            unpack_external(&t, &stream, 3, Datatype::C_BOOL, peer, piece),
            (vec![1, 0, 1], None)
        );
    }
}

#[test]
fn table_free_element_convertors_convert_and_cut_whole_elements() {
    let t = table();
    let ints = [5i32, -6, 7];
    let data = ne_bytes(&ints, i32::to_ne_bytes);
    // SAFETY: `data` holds 3 ints and outlives the packer.
    let mut p = unsafe { Packer::elements(data.as_ptr(), 3, Datatype::INT) };
    p.whole_elements();
    assert_eq!(p.packed_len(), 12);
    // Never inside an element, never 0 unless done; the end may be cut anywhere.
    assert_eq!(p.fragment_len(0, 7), 4);
    assert_eq!(p.fragment_len(4, 8), 8);
    assert_eq!(p.fragment_len(8, 100), 4);
    let mut out = [0u8; 7];
    assert_eq!(p.pack(&t, 0, &mut out), 4);
    assert_eq!(out[..4], data[..4]);
    let stream = ne_bytes(&ints, i32::to_be_bytes);
    let mut back = [0u8; 12];
    // SAFETY: `back` holds 3 ints; the unpacker is dropped before `back` is read.
    let mut u = unsafe { Unpacker::elements(back.as_mut_ptr(), 3, Datatype::INT) };
    u.set_source(&t, &Repr::EXTERNAL32).unwrap();
    assert_eq!(u.unpack(&t, 0, &stream[..6]), 6);
    assert_eq!(u.unpack(&t, 6, &stream[6..]), 6);
    assert_eq!(u.error(), None);
    drop(u);
    assert_eq!(back[..], data[..]);
}

#[test]
fn data_ref_lends_dense_messages_and_only_whole_elements() {
    let mut t = table();
    // Four ints 8 bytes from the origin, extent 16: two instances are 32 contiguous bytes.
    let ty = make(&mut t, &hindexed(&[4], &[8], prim(Prim::Int)));
    assert_eq!(t.info(ty).unwrap().dense_at, Some(8));
    let mem = Mem {
        bytes: (0..48).collect(),
        origin: 0,
    };
    let mut p = mem.packer(&t, 2, ty);
    let r = p.data_ref(0, 32).expect("dense");
    assert_eq!((r.as_ptr(), r.len()), (mem.ptr().wrapping_add(8), 32));
    let r = p.data_ref(20, 8).expect("dense");
    assert_eq!(r.as_ptr(), mem.ptr().wrapping_add(28));
    assert!(p.data_ref(30, 4).is_none(), "past the end");
    p.whole_elements();
    assert!(p.data_ref(0, 6).is_none(), "would split an int");
    assert!(p.data_ref(4, 8).is_some());
    assert!(p.data_ref(30, 2).is_some(), "the end may be any size");
    drop(p);
    // A message with gaps has no contiguous bytes to lend.
    let gaps = make(&mut t, &vector(2, 1, 2, prim(Prim::Int)));
    let p = mem.packer(&t, 1, gaps);
    assert!(p.data_ref(0, 4).is_none());
    drop(p);
    free(&mut t, ty);
    free(&mut t, gaps);
    assert_eq!(t.derived_in_use(), 0);
}

// ---- 6. prefix (MPI_Get_elements) -----------------------------------------------------------------

#[test]
fn prefix_counts_the_whole_elements_of_partial_messages() {
    let mut t = table();
    let mut rng = Rng::new(5);
    for (name, tree) in zoo() {
        let ty = make(&mut t, &tree);
        check_prefix(
            &t,
            ty,
            &tree.model(),
            2,
            Splits::Every { pairs: 0 },
            &mut rng,
        )
        .unwrap_or_else(|e| panic!("{name} = {tree}: {e}"));
        free(&mut t, ty);
    }
}

#[test]
fn prefix_of_an_external32_stream_counts_its_elements_in_native_bytes() {
    let mut t = table();
    let long = std::mem::size_of::<std::ffi::c_long>() as u64;
    // int, double, long: 4 + 8 + 4 stream bytes, 4 + 8 + long native bytes.
    let ty = t
        .create_struct(
            &[1, 1, 1],
            &[0, 8, 16],
            &[Datatype::INT, Datatype::DOUBLE, Datatype::LONG],
        )
        .unwrap();
    t.commit(ty).unwrap();
    let native = 12 + long;
    let p = |bytes| prefix(&t, ty, &Repr::EXTERNAL32, bytes).unwrap();
    assert_eq!(p(0), (0, Some(0)));
    assert_eq!(p(4), (4, Some(1)));
    assert_eq!(p(12), (12, Some(2)));
    assert_eq!(p(16), (native, Some(3)));
    assert_eq!(p(16 + 12), (native + 12, Some(5)));
    assert_eq!(p(32), (2 * native, Some(6)));
    for inside in [1, 5, 13, 16 + 2, 16 + 14] {
        assert_eq!(p(inside).1, None, "{inside} ends inside an element");
    }
    // Whole iterations of a loop count their native bytes: longs 16 bytes apart, 4 in the stream.
    let v = t.vector(3, 1, Some(2), None, Datatype::LONG).unwrap();
    t.commit(v).unwrap();
    assert_eq!(
        prefix(&t, v, &Repr::EXTERNAL32, 8).unwrap(),
        (2 * long, Some(2))
    );
    assert_eq!(prefix(&t, v, &Repr::EXTERNAL32, 10).unwrap().1, None);
    t.free(v).unwrap();
    // Native: a partial element's bytes count one for one.
    let q = |bytes| prefix(&t, ty, &Repr::NATIVE, bytes).unwrap();
    assert_eq!(q(6), (6, None));
    assert_eq!(q(12 + long), (12 + long, Some(3)));
    t.free(ty).unwrap();
}
