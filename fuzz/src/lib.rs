//! What the fuzz targets share: a reader that turns the fuzzer's bytes into arguments, a type
//! table of the core's outside an engine, and a model of MPI datatypes for the datatype targets.
//!
//! The model ([`Model`]) is the reference the core's constructors are checked against. It
//! computes every bound the way the standard's rules (and the core's comments) state them, in
//! `i128`, where nothing can wrap: per block of `count` instances at `disp`, `stride` bytes apart,
//! the lower and upper bounds, the true bounds and the size; sticky bounds from `MPI_LB`/`MPI_UB`
//! and resized types; a struct padded to its largest alignment. A value the core stores in an
//! `isize` (or a size in an `MPI_Count`) that does not fit there makes the model *too large*: the
//! core must then refuse the type. For small types the model also keeps the type map itself
//! (each basic element's displacement and size, in order), which the convertor target packs by
//! hand.

use std::cell::RefCell;
use std::mem::MaybeUninit;

use stormpi_core::datatype::table::TypeTable;
use stormpi_core::datatype::Datatype;
use stormpi_core::memory::{Memory, GRANT_ALIGN};
use stormpi_core::params::Params;
use stormpi_core::platform::{Level, Platform};

/// Reads arguments from the fuzzer's bytes; past the end every read is 0.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        let b = self.bytes(N);
        a[..b.len()].copy_from_slice(b);
        a
    }

    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// A number below `n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.u16() as usize % n
    }

    /// A count or length: mostly small, sometimes one of the extremes of an `i32`.
    pub fn int(&mut self, small: i32) -> i32 {
        match self.u8() % 16 {
            0 => i32::MAX,
            1 => i32::MIN,
            2 => -1,
            3 => self.u32() as i32,
            4 => 1 << (self.u8() % 31),
            5 => -(self.u8() as i32),
            _ => self.u8() as i32 % (small + 1),
        }
    }

    /// A displacement or stride in bytes: mostly small, sometimes huge or at the extremes.
    pub fn aint(&mut self, small: isize) -> isize {
        match self.u8() % 16 {
            0 => isize::MAX,
            1 => isize::MIN,
            2 => isize::MAX - self.u8() as isize,
            3 => isize::MIN + self.u8() as isize,
            4 => self.u64() as isize,
            5 => 1 << (self.u8() % 63),
            6 => -(1 << (self.u8() % 63)),
            _ => (self.u16() as i16 as isize) % (small + 1),
        }
    }
}

/// Grants from the heap, given back to it (AddressSanitizer sees every byte the table uses).
struct HeapPlatform;

impl Platform for HeapPlatform {
    fn now_ns(&self) -> u64 {
        0
    }
    fn relax(&self, _idle: u32) {}
    fn log(&self, _level: Level, _args: std::fmt::Arguments<'_>) {}
    fn grant(&self, bytes: usize) -> Option<&'static mut [MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), GRANT_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is a fresh allocation of `bytes` (or 1) bytes, owned by the core from now.
        Some(unsafe { std::slice::from_raw_parts_mut(p.cast(), bytes) })
    }
    unsafe fn release(&self, region: &'static mut [MaybeUninit<u8>]) -> bool {
        let layout = std::alloc::Layout::from_size_align(region.len().max(1), GRANT_ALIGN)
            .expect("granted with this layout");
        // SAFETY: the caller hands back exactly one grant, allocated with this layout.
        unsafe { std::alloc::dealloc(region.as_mut_ptr().cast(), layout) };
        true
    }
}

static HEAP: HeapPlatform = HeapPlatform;

thread_local! {
    static TABLE: RefCell<TypeTable> = RefCell::new(new_table());
}

fn new_table() -> TypeTable {
    let params = Params::new(&[]);
    let mut sizer = stormpi_core::arena::Sizer::default();
    TypeTable::size(&params, &mut sizer);
    let account: &'static Memory = Box::leak(Box::new(Memory::new(&HEAP, 1 << 30, 0)));
    let region = account.take(sizer.bytes()).expect("the initial table");
    let mut arena = stormpi_core::arena::Arena::new(region);
    arena.set_account(account);
    TypeTable::new(&params, &mut arena).expect("a type table")
}

/// Runs `f` on this thread's type table, and checks that every derived type `f` made was freed
/// again (no reference leaked, none dropped twice).
pub fn with_table<R>(f: impl FnOnce(&mut TypeTable) -> R) -> R {
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let before = t.derived_in_use();
        let r = f(&mut t);
        assert_eq!(t.derived_in_use(), before, "derived types left behind");
        r
    })
}

/// How a basic element of the type map converts to `external32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv {
    /// Bytes as they are.
    Bytes,
    /// The bytes reversed (an integer or IEEE float on a little-endian machine).
    Reverse,
    /// Anything else (`long double`): no reference here.
    Other,
}

/// One basic element of a type map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Elem {
    pub disp: i128,
    pub size: u8,
    pub conv: Conv,
}

/// The type maps kept are at most this long.
pub const MAP_MAX: i128 = 4096;

/// A datatype as the reference sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    pub size: i128,
    pub lb: i128,
    pub extent: i128,
    pub true_lb: i128,
    pub true_extent: i128,
    pub elems: i128,
    pub explicit_lb: bool,
    pub explicit_ub: bool,
    pub align: i128,
    /// Loop levels the core's description may need (an upper bound; it refuses more than 16).
    pub levels: u32,
    /// The type map, when at most [`MAP_MAX`] elements long.
    pub map: Option<Vec<Elem>>,
}

/// Why the model refuses a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A bound, extent or displacement does not fit an `isize`, or the size an `MPI_Count`.
    TooLarge,
    /// Arguments the standard does not allow (negative counts, a subarray outside its array...).
    Invalid,
}

fn fits(v: i128) -> Result<i128, Refusal> {
    if v >= isize::MIN as i128 && v <= isize::MAX as i128 {
        Ok(v)
    } else {
        Err(Refusal::TooLarge)
    }
}

fn add(a: i128, b: i128) -> Result<i128, Refusal> {
    fits(a.checked_add(b).ok_or(Refusal::TooLarge)?)
}

fn mul(a: i128, b: i128) -> Result<i128, Refusal> {
    fits(a.checked_mul(b).ok_or(Refusal::TooLarge)?)
}

/// The predefined types the targets build from, with their type maps here (x86_64 and other
/// LP64 machines with 16-byte `long double` storage).
pub const PREDEFINED: &[Datatype] = &[
    Datatype::BYTE,
    Datatype::CHAR,
    Datatype::SHORT,
    Datatype::INT,
    Datatype::FLOAT,
    Datatype::DOUBLE,
    Datatype::LONG_LONG,
    Datatype::C_DOUBLE_COMPLEX,
    Datatype::DOUBLE_INT,
    Datatype::SHORT_INT,
    Datatype::TWO_INT,
    Datatype::LONG_DOUBLE,
    Datatype::LB,
    Datatype::UB,
];

impl Model {
    /// One of [`PREDEFINED`].
    pub fn predefined(d: Datatype) -> Model {
        use Conv::*;
        let e = |disp, size, conv| Elem { disp, size, conv };
        let (map, extent): (Vec<Elem>, i128) = match d {
            Datatype::BYTE | Datatype::CHAR => (vec![e(0, 1, Bytes)], 1),
            Datatype::SHORT => (vec![e(0, 2, Reverse)], 2),
            Datatype::INT | Datatype::FLOAT => (vec![e(0, 4, Reverse)], 4),
            Datatype::DOUBLE | Datatype::LONG_LONG => (vec![e(0, 8, Reverse)], 8),
            Datatype::C_DOUBLE_COMPLEX => (vec![e(0, 8, Reverse), e(8, 8, Reverse)], 16),
            Datatype::DOUBLE_INT => (vec![e(0, 8, Reverse), e(8, 4, Reverse)], 16),
            Datatype::SHORT_INT => (vec![e(0, 2, Reverse), e(4, 4, Reverse)], 8),
            Datatype::TWO_INT => (vec![e(0, 4, Reverse), e(4, 4, Reverse)], 8),
            Datatype::LONG_DOUBLE => (vec![e(0, 16, Other)], 16),
            Datatype::LB | Datatype::UB => (vec![], 0),
            _ => panic!("no model of {}", d.name()),
        };
        let align = map
            .iter()
            .map(|e| if e.size > 8 { 16 } else { e.size as i128 })
            .max()
            .unwrap_or(1);
        Model {
            size: map.iter().map(|e| e.size as i128).sum(),
            lb: 0,
            extent,
            true_lb: 0,
            true_extent: map
                .iter()
                .map(|e| e.disp + e.size as i128)
                .max()
                .unwrap_or(0),
            elems: map.len() as i128,
            explicit_lb: d == Datatype::LB,
            explicit_ub: d == Datatype::UB,
            align,
            levels: 0,
            map: Some(map),
        }
    }

    /// Upper bound of the type.
    pub fn ub(&self) -> i128 {
        self.lb + self.extent
    }

    /// Whether any two elements of one instance overlap (then unpacking order matters).
    pub fn overlaps(&self, count: i128) -> Option<bool> {
        let map = self.map.as_ref()?;
        let mut spans: Vec<(i128, i128)> = (0..count)
            .flat_map(|i| {
                map.iter()
                    .map(move |e| (i * self.extent + e.disp, e.size as i128))
            })
            .collect();
        spans.sort();
        Some(spans.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0))
    }
}

/// One block of a type being built: `count` instances of `ty`, the first at `disp`, `stride`
/// bytes apart.
pub struct Block<'a> {
    pub ty: &'a Model,
    pub count: i128,
    pub disp: i128,
    pub stride: i128,
}

/// A type made of `blocks` (in type-map order), by the standard's bounds rules; `levels` loop
/// levels more than its deepest block's.
pub fn combine(blocks: &[Block<'_>], is_struct: bool, levels: u32) -> Result<Model, Refusal> {
    let (mut lb, mut ub) = (i128::MAX, i128::MIN);
    let (mut tlb, mut tub) = (i128::MAX, i128::MIN);
    let (mut slb, mut sub): (Option<i128>, Option<i128>) = (None, None);
    let (mut size, mut elems, mut align) = (0i128, 0i128, 1i128);
    let (mut any, mut any_data) = (false, false);
    let mut depth = 0;
    let mut map_len = 0i128;
    for b in blocks.iter().filter(|b| b.count > 0) {
        let t = b.ty;
        // Every intermediate the rules name fits an isize (the core computes them so).
        let span = mul(b.count - 1, b.stride)?;
        let (lo_s, hi_s) = (span.min(0), span.max(0));
        let base = add(b.disp, t.lb)?;
        let lo = add(base, lo_s)?;
        let hi = add(add(base, t.extent)?, hi_s)?;
        let tbase = add(b.disp, t.true_lb)?;
        let tlo = add(tbase, lo_s)?;
        let thi = add(add(tbase, t.true_extent)?, hi_s)?;
        size += b.count * t.size;
        if size > i64::MAX as i128 {
            return Err(Refusal::TooLarge);
        }
        elems += b.count * t.elems;
        any = true;
        lb = lb.min(lo);
        ub = ub.max(hi);
        if t.explicit_lb {
            slb = Some(slb.map_or(lo, |s| s.min(lo)));
        }
        if t.explicit_ub {
            sub = Some(sub.map_or(hi, |s| s.max(hi)));
        }
        if t.elems > 0 {
            any_data = true;
            tlb = tlb.min(tlo);
            tub = tub.max(thi);
        }
        align = align.max(t.align);
        depth = depth.max(t.levels);
        map_len = map_len.saturating_add(match &t.map {
            Some(m) => b.count.saturating_mul(m.len() as i128),
            None => i128::MAX,
        });
    }
    let (mut lb, mut ub) = if any { (lb, ub) } else { (0, 0) };
    if let Some(s) = slb {
        lb = s;
    }
    if let Some(s) = sub {
        ub = s;
    }
    if is_struct && sub.is_none() && any {
        let ext = fits(ub - lb)?;
        ub = add(lb, add(ext, align - 1)? / align * align)?;
    }
    let (tlb, tub) = if any_data { (tlb, tub) } else { (0, 0) };
    let map = (map_len <= MAP_MAX).then(|| {
        let mut m = Vec::new();
        for b in blocks.iter().filter(|b| b.count > 0) {
            let Some(tm) = &b.ty.map else { continue };
            for k in 0..b.count {
                for e in tm {
                    m.push(Elem {
                        disp: b.disp + k * b.stride + e.disp,
                        ..*e
                    });
                }
            }
        }
        m
    });
    Ok(Model {
        size,
        lb,
        extent: fits(ub - lb)?,
        true_lb: tlb,
        true_extent: fits(tub - tlb)?,
        elems,
        explicit_lb: slb.is_some(),
        explicit_ub: sub.is_some(),
        align,
        levels: depth + levels,
        map,
    })
}

/// `MPI_Type_create_resized`.
pub fn resized(old: &Model, lb: i128, extent: i128) -> Result<Model, Refusal> {
    add(lb, extent)?;
    Ok(Model {
        lb,
        extent,
        explicit_lb: true,
        explicit_ub: true,
        ..old.clone()
    })
}

/// `MPI_Type_contiguous`.
pub fn contiguous(count: i32, old: &Model) -> Result<Model, Refusal> {
    if count < 0 {
        return Err(Refusal::Invalid);
    }
    let b = Block {
        ty: old,
        count: count as i128,
        disp: 0,
        stride: old.extent,
    };
    combine(&[b], false, 1)
}

/// `MPI_Type_vector` (`stride` in extents) or `MPI_Type_create_hvector` (`stride_bytes`).
pub fn vector(
    count: i32,
    blocklen: i32,
    stride: Option<i32>,
    stride_bytes: Option<isize>,
    old: &Model,
) -> Result<Model, Refusal> {
    if count < 0 || blocklen < 0 {
        return Err(Refusal::Invalid);
    }
    let step = match (stride, stride_bytes) {
        (Some(s), None) => mul(s as i128, old.extent)?,
        (None, Some(b)) => b as i128,
        _ => return Err(Refusal::Invalid),
    };
    let inner = contiguous(blocklen, old)?;
    let b = Block {
        ty: &inner,
        count: count as i128,
        disp: 0,
        stride: step,
    };
    combine(&[b], false, 1)
}

/// `MPI_Type_indexed`/`MPI_Type_create_indexed_block` (`displs` in extents) or their `h`
/// forms (`displs_bytes`), `blocklens` one per block.
pub fn indexed(
    blocklens: &[i32],
    displs: Option<&[i32]>,
    displs_bytes: Option<&[isize]>,
    old: &Model,
) -> Result<Model, Refusal> {
    if blocklens.iter().any(|&c| c < 0) {
        return Err(Refusal::Invalid);
    }
    let disps: Vec<i128> = match (displs, displs_bytes) {
        (Some(d), None) => d
            .iter()
            .map(|&d| mul(d as i128, old.extent))
            .collect::<Result<_, _>>()?,
        (None, Some(d)) => d.iter().map(|&d| d as i128).collect(),
        _ => return Err(Refusal::Invalid),
    };
    if disps.len() != blocklens.len() {
        return Err(Refusal::Invalid);
    }
    let blocks: Vec<Block<'_>> = blocklens
        .iter()
        .zip(&disps)
        .map(|(&c, &d)| Block {
            ty: old,
            count: c as i128,
            disp: d,
            stride: old.extent,
        })
        .collect();
    combine(&blocks, false, 1)
}

/// `MPI_Type_create_struct`.
pub fn create_struct(
    blocklens: &[i32],
    displs: &[isize],
    types: &[&Model],
) -> Result<Model, Refusal> {
    if blocklens.iter().any(|&c| c < 0)
        || displs.len() != blocklens.len()
        || types.len() != blocklens.len()
    {
        return Err(Refusal::Invalid);
    }
    let blocks: Vec<Block<'_>> = (0..blocklens.len())
        .map(|i| Block {
            ty: types[i],
            count: blocklens[i] as i128,
            disp: displs[i] as i128,
            stride: types[i].extent,
        })
        .collect();
    combine(&blocks, true, 1)
}

/// A selection of `intervals[d]` (start, count) in each dimension `d` of an array of `gsizes`
/// elements of `old`, in storage order `c_order`: `MPI_Type_create_subarray` and
/// `MPI_Type_create_darray`. Each level spans its whole dimension (lower bound 0).
pub fn grid(
    gsizes: &[i32],
    intervals: &[Vec<(i64, i64)>],
    c_order: bool,
    old: &Model,
) -> Result<Model, Refusal> {
    let nd = gsizes.len();
    let mut t = old.clone();
    for step in 0..nd {
        let d = if c_order { nd - 1 - step } else { step };
        let ext = t.extent;
        for &(at, _) in &intervals[d] {
            mul(at as i128, ext)?;
        }
        let whole = mul(gsizes[d] as i128, ext)?;
        let blocks: Vec<Block<'_>> = intervals[d]
            .iter()
            .map(|&(at, n)| Block {
                ty: &t,
                count: n as i128,
                disp: at as i128 * ext,
                stride: ext,
            })
            .collect();
        let selected = combine(&blocks, false, 1)?;
        t = resized(&selected, 0, whole)?;
    }
    Ok(t)
}

/// `MPI_Type_create_subarray`.
pub fn subarray(
    sizes: &[i32],
    subsizes: &[i32],
    starts: &[i32],
    c_order: bool,
    old: &Model,
) -> Result<Model, Refusal> {
    let nd = sizes.len();
    if nd == 0 || nd > 16 || subsizes.len() != nd || starts.len() != nd {
        return Err(Refusal::Invalid);
    }
    for d in 0..nd {
        let (g, n, s) = (sizes[d] as i64, subsizes[d] as i64, starts[d] as i64);
        if g <= 0 || n <= 0 || s < 0 || s + n > g {
            return Err(Refusal::Invalid);
        }
    }
    let iv: Vec<Vec<(i64, i64)>> = (0..nd)
        .map(|d| vec![(starts[d] as i64, subsizes[d] as i64)])
        .collect();
    grid(sizes, &iv, c_order, old)
}

/// How `MPI_Type_create_darray` distributes a dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    None,
    Block,
    Cyclic,
}

/// `MPI_DISTRIBUTE_DFLT_DARG`.
pub const DFLT_DARG: i32 = -49767;

/// The selected intervals of each dimension of `MPI_Type_create_darray`, by the standard's
/// definition of each distribution (the core keeps at most 256 a dimension).
pub fn darray_intervals(
    size: i32,
    rank: i32,
    gsizes: &[i32],
    dists: &[Dist],
    dargs: &[i32],
    psizes: &[i32],
) -> Result<Vec<Vec<(i64, i64)>>, Refusal> {
    let nd = gsizes.len();
    if nd == 0 || nd > 16 || dists.len() != nd || dargs.len() != nd || psizes.len() != nd {
        return Err(Refusal::Invalid);
    }
    let procs = psizes
        .iter()
        .try_fold(1i128, |a, &p| a.checked_mul(p as i128));
    if psizes.iter().any(|&p| p <= 0) || procs != Some(size as i128) || rank < 0 || rank >= size {
        return Err(Refusal::Invalid);
    }
    // The process grid is row-major.
    let mut coords = vec![0i64; nd];
    let mut r = rank as i64;
    for d in (0..nd).rev() {
        coords[d] = r % psizes[d] as i64;
        r /= psizes[d] as i64;
    }
    let mut iv = Vec::new();
    for d in 0..nd {
        let (g, p, c, k) = (
            gsizes[d] as i64,
            psizes[d] as i64,
            coords[d],
            dargs[d] as i64,
        );
        if g <= 0 || (k != DFLT_DARG as i64 && k <= 0) {
            return Err(Refusal::Invalid);
        }
        let mut v = Vec::new();
        match dists[d] {
            Dist::None => {
                if p != 1 {
                    return Err(Refusal::Invalid);
                }
                v.push((0, g));
            }
            Dist::Block => {
                let b = if k == DFLT_DARG as i64 {
                    (g + p - 1) / p
                } else {
                    k
                };
                if b * p < g {
                    return Err(Refusal::Invalid);
                }
                let lo = (c * b).min(g);
                let hi = ((c + 1) * b).min(g);
                v.push((lo, hi - lo));
            }
            Dist::Cyclic => {
                let k = if k == DFLT_DARG as i64 { 1 } else { k };
                let mut at = c * k;
                while at < g {
                    v.push((at, k.min(g - at)));
                    if v.len() > 256 {
                        return Err(Refusal::Invalid);
                    }
                    at += k * p;
                }
            }
        }
        iv.push(v);
    }
    Ok(iv)
}

/// A type of a target's pool: its handle and the reference's view of it.
pub struct Made {
    pub ty: Datatype,
    pub model: Model,
    /// Made here (to be freed at the end), not predefined.
    pub derived: bool,
}

/// The predefined types of [`PREDEFINED`], as a pool to build from.
pub fn predefined_pool() -> Vec<Made> {
    PREDEFINED
        .iter()
        .map(|&d| Made {
            ty: d,
            model: Model::predefined(d),
            derived: false,
        })
        .collect()
}

/// Frees the derived types of `pool`, newest first.
pub fn free_pool(t: &mut TypeTable, pool: Vec<Made>) {
    for m in pool.into_iter().rev().filter(|m| m.derived) {
        t.free(m.ty).expect("a derived type is freed once");
    }
}

/// How wild the constructor arguments are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Args {
    /// Counts, strides and displacements anywhere in their types, often at the extremes.
    Extreme,
    /// Small ones, so a few instances of the type fit a buffer of a few KiB.
    Small,
}

/// Description nodes a constructor may make at most before it is not tried (the core's cost is
/// linear in them; nesting multiplies them).
const NODE_BUDGET: usize = 4096;

struct Gen<'a, 'b> {
    inp: &'a mut Input<'b>,
    args: Args,
}

impl Gen<'_, '_> {
    fn count(&mut self) -> i32 {
        match self.args {
            Args::Extreme => self.inp.int(8),
            Args::Small => (self.inp.u8() % 4) as i32,
        }
    }
    /// A stride or displacement in extents.
    fn steps(&mut self) -> i32 {
        match self.args {
            Args::Extreme => self.inp.int(16),
            Args::Small => (self.inp.u8() % 9) as i32 - 4,
        }
    }
    fn bytes(&mut self) -> isize {
        match self.args {
            Args::Extreme => self.inp.aint(64),
            Args::Small => (self.inp.u8() % 129) as isize - 64,
        }
    }
    fn blocks(&mut self) -> usize {
        match self.args {
            Args::Extreme => self.inp.u8() as usize % 7,
            Args::Small => 1 + self.inp.u8() as usize % 4,
        }
    }
    fn dims(&mut self) -> usize {
        match self.args {
            Args::Extreme if self.inp.u8().is_multiple_of(8) => [0, 17][self.inp.below(2)],
            _ => 1 + self.inp.u8() as usize % 3,
        }
    }
    fn dim_size(&mut self) -> i32 {
        match self.args {
            Args::Extreme => self.inp.int(6),
            Args::Small => 1 + (self.inp.u8() % 4) as i32,
        }
    }
}

fn nodes_of(t: &TypeTable, d: Datatype) -> usize {
    t.nodes(d).map_or(0, |n| n.len())
}

/// Checks that the core and the reference agree on a constructor's outcome: both refuse, or
/// both make the type and its size, bounds, extents and element count are equal (the core's
/// description packs that size too); the core may refuse a type the reference makes only for
/// want of memory or for nesting deeper than 16 loop levels. Returns the type both made.
pub fn agree(
    made: stormpi_core::Result<Datatype>,
    model: Result<Model, Refusal>,
    t: &TypeTable,
    what: &str,
) -> Option<(Datatype, Model)> {
    use stormpi_core::datatype::desc::stream_size;
    use stormpi_core::datatype::repr::Repr;
    use stormpi_core::ErrorClass;
    match (made, model) {
        (Ok(d), Ok(m)) => {
            let i = t.info(d).expect("a made type has an entry");
            let got = (
                i.size as i128,
                i.lb as i128,
                i.extent as i128,
                i.true_lb as i128,
                i.true_extent as i128,
                i.elems as i128,
                i.explicit_lb,
                i.explicit_ub,
            );
            let want = (
                m.size,
                m.lb,
                m.extent,
                m.true_lb,
                m.true_extent,
                m.elems,
                m.explicit_lb,
                m.explicit_ub,
            );
            assert_eq!(
                got, want,
                "{what}: (size, lb, extent, true lb, true extent, elements, sticky lb, sticky ub)"
            );
            let nodes = t.nodes(d).expect("a made type has nodes");
            assert_eq!(
                stream_size(nodes, &Repr::NATIVE) as i128,
                m.size,
                "{what}: the description's packed size"
            );
            Some((d, m))
        }
        (Ok(d), Err(r)) => panic!(
            "{what}: the core made a type the reference refuses ({r:?}): {:?}",
            t.info(d)
        ),
        (Err(e), Ok(m)) => {
            let deep = m.levels > 16 && e.class == ErrorClass::Arg;
            assert!(
                e.class == ErrorClass::NoMem || deep,
                "{what}: the core refused ({e:?}) a type whose every bound fits: size {} lb {} \
                 extent {} true lb {} true extent {}",
                m.size,
                m.lb,
                m.extent,
                m.true_lb,
                m.true_extent
            );
            None
        }
        (Err(_), Err(_)) => None,
    }
}

/// Makes one type from the fuzzer's bytes with one of the core's constructors over types of
/// `pool`, and the reference's; checks that they agree ([`agree`]). The new type when both made
/// it (`None` also when the input chose a constructor too costly to try).
pub fn grow(inp: &mut Input<'_>, t: &mut TypeTable, pool: &[Made], args: Args) -> Option<Made> {
    use stormpi_core::datatype::table::{Distrib, Order};
    let mut g = Gen { inp, args };
    let pick = |g: &mut Gen<'_, '_>| &pool[g.inp.below(pool.len())];
    let op = g.inp.u8() % 12;
    let made = match op {
        0 => {
            let (c, old) = (g.count(), pick(&mut g));
            let what = format!("contiguous({c}, {})", old.ty.index());
            agree(t.contiguous(c.into(), old.ty), contiguous(c, &old.model), t, &what)
        }
        1 | 2 => {
            let (c, bl, old) = (g.count(), g.count(), pick(&mut g));
            if 2 * (1 + nodes_of(t, old.ty)) > NODE_BUDGET {
                return None;
            }
            let (s, sb) = if op == 1 {
                (Some(g.steps()), None)
            } else {
                (None, Some(g.bytes()))
            };
            let what = format!("vector({c}, {bl}, {s:?}, {sb:?}, {})", old.ty.index());
            agree(
                t.vector(c.into(), bl.into(), s.map(i64::from), sb, old.ty),
                vector(c, bl, s, sb, &old.model),
                t,
                &what,
            )
        }
        3..=6 => {
            let old = pick(&mut g);
            let n = g.blocks();
            if n * (1 + nodes_of(t, old.ty)) > NODE_BUDGET {
                return None;
            }
            let one = g.count();
            let lens: Vec<i32> = (0..n)
                .map(|_| if op >= 5 { one } else { g.count() })
                .collect();
            let (d, db): (Option<Vec<i32>>, Option<Vec<isize>>) = if op % 2 == 1 {
                (Some((0..n).map(|_| g.steps()).collect()), None)
            } else {
                (None, Some((0..n).map(|_| g.bytes()).collect()))
            };
            let what = format!("indexed({lens:?}, {d:?}, {db:?}, {})", old.ty.index());
            let core = if op >= 5 {
                t.indexed_block(one.into(), d.as_deref(), db.as_deref(), old.ty)
            } else {
                t.indexed(&lens, d.as_deref(), db.as_deref(), old.ty)
            };
            // The one block length of an indexed-block type counts even without blocks.
            let model = match op >= 5 && one < 0 {
                true => Err(Refusal::Invalid),
                false => indexed(&lens, d.as_deref(), db.as_deref(), &old.model),
            };
            agree(core, model, t, &what)
        }
        7 => {
            let n = g.blocks();
            let olds: Vec<&Made> = (0..n).map(|_| pick(&mut g)).collect();
            if olds.iter().map(|o| 1 + nodes_of(t, o.ty)).sum::<usize>() > NODE_BUDGET {
                return None;
            }
            let lens: Vec<i32> = (0..n).map(|_| g.count()).collect();
            let displs: Vec<isize> = (0..n).map(|_| g.bytes()).collect();
            let tys: Vec<Datatype> = olds.iter().map(|o| o.ty).collect();
            let models: Vec<&Model> = olds.iter().map(|o| &o.model).collect();
            let what = format!("struct({lens:?}, {displs:?}, {tys:?})");
            agree(
                t.create_struct(&lens, &displs, &tys),
                create_struct(&lens, &displs, &models),
                t,
                &what,
            )
        }
        8 => {
            let (old, lb, ext) = (pick(&mut g), g.bytes(), g.bytes());
            let what = format!("resized({}, {lb}, {ext})", old.ty.index());
            agree(
                t.resized(old.ty, lb, ext),
                resized(&old.model, lb as i128, ext as i128),
                t,
                &what,
            )
        }
        9 | 10 => {
            let old = pick(&mut g);
            let nd = g.dims();
            let c_order = g.inp.u8().is_multiple_of(2);
            let order = if c_order { Order::C } else { Order::Fortran };
            let gs: Vec<i32> = (0..nd).map(|_| g.dim_size()).collect();
            let iv = if op == 9 {
                let sub: Vec<i32> = (0..nd).map(|_| g.dim_size()).collect();
                let st: Vec<i32> = (0..nd)
                    .map(|_| match args {
                        Args::Extreme => g.inp.int(4),
                        Args::Small => (g.inp.u8() % 4) as i32,
                    })
                    .collect();
                let model = subarray(&gs, &sub, &st, c_order, &old.model);
                let what = format!("subarray({gs:?}, {sub:?}, {st:?}, {c_order})");
                // One interval a dimension: the description grows by a node a dimension.
                return agree(t.subarray(&gs, &sub, &st, order, old.ty), model, t, &what).map(
                    |(ty, model)| Made {
                        ty,
                        model,
                        derived: true,
                    },
                );
            } else {
                let dist: Vec<Dist> = (0..nd)
                    .map(|_| [Dist::None, Dist::Block, Dist::Cyclic][g.inp.below(3)])
                    .collect();
                let dargs: Vec<i32> = (0..nd)
                    .map(|_| match g.inp.u8() % 3 {
                        0 => DFLT_DARG,
                        _ => g.dim_size(),
                    })
                    .collect();
                let ps: Vec<i32> = (0..nd).map(|_| g.dim_size()).collect();
                let size = match g.inp.u8() % 4 {
                    0 => g.inp.int(64),
                    _ => ps.iter().fold(1i32, |a, &p| a.wrapping_mul(p)),
                };
                let rank = match args {
                    Args::Extreme => g.inp.int(8),
                    Args::Small => g.inp.u8() as i32 % size.max(1),
                };
                (gs.clone(), dist, dargs, ps, size, rank)
            };
            let (gs, dist, dargs, ps, size, rank) = iv;
            let intervals = darray_intervals(size, rank, &gs, &dist, &dargs, &ps);
            // Each level holds its intervals' copies of the level below.
            if let Ok(iv) = &intervals {
                let mut n = nodes_of(t, old.ty);
                for v in iv {
                    n = n.saturating_mul(1 + v.len()).saturating_add(v.len());
                }
                if n > NODE_BUDGET {
                    return None;
                }
            }
            let model = intervals.and_then(|iv| grid(&gs, &iv, c_order, &old.model));
            let dists: Vec<Distrib> = dist
                .iter()
                .map(|d| match d {
                    Dist::None => Distrib::None,
                    Dist::Block => Distrib::Block,
                    Dist::Cyclic => Distrib::Cyclic,
                })
                .collect();
            let what = format!("darray({size}, {rank}, {gs:?}, {dist:?}, {dargs:?}, {ps:?})");
            agree(
                t.darray(size, rank, &gs, &dists, &dargs, &ps, order, old.ty),
                model,
                t,
                &what,
            )
        }
        _ => {
            let old = pick(&mut g);
            let what = format!("dup({})", old.ty.index());
            agree(t.dup(old.ty), Ok(old.model.clone()), t, &what)
        }
    };
    made.map(|(ty, model)| Made {
        ty,
        model,
        derived: true,
    })
}
