//! File layouts of data representations whose sizes differ from the native ones.
//!
//! In a view whose representation changes the size of a predefined type (`long` in
//! `external32` on LP64, or a user representation whose `dtype_file_extent_fn` says so), the
//! etype and filetype describe the file in the file's sizes (MPI 4.1 §14.5.1): a constructor
//! whose displacements count elements (contiguous, vector, indexed, indexed-block, subarray,
//! darray) has them scaled by the file extents of its elements, one whose displacements are bytes
//! (hvector, hindexed, hindexed-block, struct, resized) keeps them as given. [`build`] makes
//! that *layout type*: the type rebuilt from its constructors with every predefined element
//! replaced by a run of bytes of its file size. The view walks the layout type, so the view
//! stream is the file representation's bytes (the packed external32 stream of the data, or the
//! user conversion's output), and `MPI_File_get_type_extent` is the layout type's extent. Its
//! structs have no alignment padding: the file representation is packed.

use crate::datatype::desc::Combiner;
use crate::datatype::repr::Repr;
use crate::datatype::table::{
    Distrib, Order, TypeTable, DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_NONE, MAX_DEPTH,
};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::platform::Platform;

/// Distinct predefined types a user representation's size table holds.
pub const MAX_LEAVES: usize = 16;
/// Constructor nesting a layout is built through.
const MAX_NESTING: u32 = 64;

/// The file sizes of predefined types in a representation that changes some of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// `external32`'s sizes.
    External32,
    /// A user representation's: the types its extent callback was asked about, with their
    /// file extents (a type not listed is not part of the view).
    Table {
        /// Entries in use.
        n: u8,
        /// (predefined type, bytes in the file).
        of: [(Datatype, u32); MAX_LEAVES],
    },
}

impl Sizes {
    /// The file size of predefined (or Fortran 90) type `t`.
    pub fn of(&self, types: &TypeTable, t: Datatype) -> Result<u64> {
        match self {
            Sizes::External32 => types.stream_size(t, &Repr::EXTERNAL32),
            Sizes::Table { n, of } => of[..*n as usize]
                .iter()
                .find(|(d, _)| *d == t)
                .map(|&(_, s)| u64::from(s))
                .ok_or(Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "a datatype holds a predefined type that the view's etype and filetype (which fixed the user data representation's file extents) do not",
                    },
                )),
        }
    }
}

fn unsupported(what: &'static str) -> Error {
    Error::new(ErrorClass::UnsupportedDatarep, Reason::BadArgument { what })
}

/// Whether `t` is an element of the layout (a predefined type).
fn is_leaf(types: &TypeTable, t: Datatype) -> Result<bool> {
    Ok(t.is_predefined() || types.envelope(t)?.0 == Combiner::Named)
}

/// The predefined type a Fortran 90 type (`MPI_Type_create_f90_*`) copies.
fn f90_base(types: &TypeTable, t: Datatype) -> Result<Option<Datatype>> {
    match types.envelope(t)?.0 {
        Combiner::F90Integer | Combiner::F90Real | Combiner::F90Complex => {
            Ok(types.old_types(t)?.next())
        }
        _ => Ok(None),
    }
}

/// Builds the committed layout type of `t` under `sizes` (the caller releases it).
pub fn build(e: &mut Engine, t: Datatype, sizes: &Sizes) -> Result<Datatype> {
    let platform = e.platform;
    let types = &mut e.p2p.types;
    let l = rebuild(types, platform, t, sizes, MAX_NESTING)?;
    match types.commit(l) {
        Ok(()) => Ok(l),
        Err(err) => {
            types.release(l);
            Err(err)
        }
    }
}

/// The bytes `t`'s data takes in the file under `sizes`.
pub fn file_size(e: &mut Engine, t: Datatype, sizes: &Sizes) -> Result<u64> {
    if is_leaf(&e.p2p.types, t)? {
        return sizes.of(&e.p2p.types, t);
    }
    if let Sizes::External32 = sizes {
        return e.p2p.types.stream_size(t, &Repr::EXTERNAL32);
    }
    let l = build(e, t, sizes)?;
    let size = e.p2p.types.info(l).map(|i| i.size);
    e.p2p.types.release(l);
    size
}

/// The constructor arguments of one type, copied out of the type table (which the rebuild
/// changes) into memory from the platform: the integers (as `i64` and as `i32`), the addresses
/// and the types.
struct Args {
    platform: &'static dyn Platform,
    mem: *mut u8,
    ints: usize,
    aints: usize,
    types: usize,
}

/// Slices of an [`Args`]: integers, the same as `i32`, addresses, types.
type Parts<'a> = (
    &'a mut [i64],
    &'a mut [i32],
    &'a mut [isize],
    &'a mut [Datatype],
);

impl Args {
    /// Where the types start: after the 8-byte integers and addresses and the 4-byte integers.
    fn types_at(ints: usize, aints: usize) -> usize {
        (ints * 12 + aints * 8).next_multiple_of(core::mem::align_of::<Datatype>())
    }

    fn get(table: &mut TypeTable, platform: &'static dyn Platform, t: Datatype) -> Result<Args> {
        let (_, ints, aints, types) = table.envelope(t)?;
        let bytes = Self::types_at(ints, aints) + types * core::mem::size_of::<Datatype>();
        let Some(mem) = platform.alloc_mem(bytes) else {
            return Err(Error::new(
                ErrorClass::NoMem,
                Reason::PlatformOutOfMemory {
                    what: "the constructor arguments of a datatype rebuilt in a file representation's sizes",
                },
            ));
        };
        // SAFETY: `mem` holds `bytes` bytes, ours until `drop`; zero is a valid i64, i32 and
        // isize, and the types are written before any is read.
        unsafe { core::ptr::write_bytes(mem, 0, bytes) };
        let mut a = Args {
            platform,
            mem,
            ints,
            aints,
            types,
        };
        let tys_at = Self::types_at(ints, aints);
        for k in 0..types {
            // SAFETY: slot `k` of the types array, within the allocation and aligned.
            unsafe {
                mem.add(tys_at)
                    .cast::<Datatype>()
                    .add(k)
                    .write(Datatype::BYTE)
            };
        }
        let (large, small, addrs, tys) = a.parts();
        table.contents_large(t, large, addrs, |k, d| tys[k] = d)?;
        for (s, &l) in small.iter_mut().zip(large.iter()) {
            *s = i32::try_from(l).map_err(|_| {
                unsupported("a datatype with a count beyond an int in a view whose file representation changes sizes")
            })?;
        }
        Ok(a)
    }

    fn parts(&mut self) -> Parts<'_> {
        let base = self.mem;
        let (i, a) = (self.ints, self.aints);
        // SAFETY: the four arrays lie one after another within the allocation, each aligned
        // (alloc_mem aligns for any C type, the 8-byte arrays come first, `types_at` aligns
        // the types), initialized in `get`; borrowing `self` mutably keeps them exclusive.
        unsafe {
            (
                core::slice::from_raw_parts_mut(base.cast::<i64>(), i),
                core::slice::from_raw_parts_mut(base.add(i * 8 + a * 8).cast::<i32>(), i),
                core::slice::from_raw_parts_mut(base.add(i * 8).cast::<isize>(), a),
                core::slice::from_raw_parts_mut(
                    base.add(Self::types_at(i, a)).cast::<Datatype>(),
                    self.types,
                ),
            )
        }
    }
}

impl Drop for Args {
    fn drop(&mut self) {
        // SAFETY: `mem` came from this platform's alloc_mem and is given back once.
        unsafe { self.platform.free_mem(self.mem) };
    }
}

/// The layout of `t` (a new reference the caller releases).
fn rebuild(
    table: &mut TypeTable,
    platform: &'static dyn Platform,
    t: Datatype,
    sizes: &Sizes,
    depth: u32,
) -> Result<Datatype> {
    if is_leaf(table, t)? {
        let n = sizes.of(table, t)?;
        let n = i64::try_from(n).map_err(|_| unsupported("a file extent beyond 2^63 bytes"))?;
        return table.contiguous(n, Datatype::BYTE);
    }
    if depth == 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "a datatype nested too deeply",
            },
        ));
    }
    if let Some(base) = f90_base(table, t)? {
        return rebuild(table, platform, base, sizes, depth - 1);
    }
    let combiner = table.envelope(t)?.0;
    let mut args = Args::get(table, platform, t)?;
    // The old types' layouts; every type `contents` handed out is released below.
    let mut made = 0;
    let mut r = Ok(Datatype::BYTE);
    for k in 0..args.types {
        let old = args.parts().3[k];
        r = rebuild(table, platform, old, sizes, depth - 1);
        table.release(old);
        match r {
            Ok(l) => {
                args.parts().3[k] = l;
                made = k + 1;
            }
            Err(_) => {
                for &rest in &args.parts().3[k + 1..] {
                    table.release(rest);
                }
                break;
            }
        }
    }
    if r.is_ok() {
        r = construct(table, combiner, &mut args);
    }
    for &l in &args.parts().3[..made] {
        table.release(l);
    }
    r
}

/// `combiner` called again with `args` (whose types are the layouts of the old ones).
fn construct(table: &mut TypeTable, combiner: Combiner, args: &mut Args) -> Result<Datatype> {
    let (large, small, aints, tys) = args.parts();
    let (large, small, aints, tys): (&[i64], &[i32], &[isize], &[Datatype]) =
        (large, small, aints, tys);
    let old = tys.first().copied().unwrap_or(Datatype::BYTE);
    let n = |k: usize| large.get(k).copied().unwrap_or(0);
    let count = n(0).max(0) as usize;
    let short = || {
        Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "a datatype's recorded constructor arguments are short",
            },
        )
    };
    let span = |from: usize, len: usize| small.get(from..from + len).ok_or_else(short);
    match combiner {
        Combiner::Dup => table.dup(old),
        Combiner::Contiguous => table.contiguous(n(0), old),
        Combiner::Vector => table.vector(n(0), n(1), Some(n(2)), None, old),
        Combiner::Hvector => {
            table.vector(n(0), n(1), None, Some(aints.first().copied().ok_or_else(short)?), old)
        }
        Combiner::Indexed => {
            table.indexed(span(1, count)?, Some(span(1 + count, count)?), None, old)
        }
        Combiner::Hindexed => table.indexed(
            span(1, count)?,
            None,
            Some(aints.get(..count).ok_or_else(short)?),
            old,
        ),
        Combiner::IndexedBlock => {
            table.indexed_block(n(1), Some(span(2, count)?), None, old)
        }
        Combiner::HindexedBlock => {
            table.indexed_block(n(1), None, Some(aints.get(..count).ok_or_else(short)?), old)
        }
        Combiner::Struct => table.create_struct(
            span(1, count)?,
            aints.get(..count).ok_or_else(short)?,
            tys.get(..count).ok_or_else(short)?,
        ),
        Combiner::Resized => {
            table.resized(old, aints.first().copied().ok_or_else(short)?, aints.get(1).copied().ok_or_else(short)?)
        }
        Combiner::Subarray => {
            let order = match n(1 + 3 * count) {
                57 => Order::Fortran,
                _ => Order::C,
            };
            table.subarray(
                span(1, count)?,
                span(1 + count, count)?,
                span(1 + 2 * count, count)?,
                order,
                old,
            )
        }
        Combiner::Darray => {
            // size, rank, ndims, then gsizes, distribs, dargs and psizes of ndims each, then
            // the order: the same distribution of the old type's layout, whose block and
            // cyclic pieces count elements as the darray's do.
            let nd = n(2).max(0) as usize;
            let order = match n(3 + 4 * nd) {
                57 => Order::Fortran,
                _ => Order::C,
            };
            let mut distribs: heapless::Vec<Distrib, MAX_DEPTH> = heapless::Vec::new();
            for &d in span(3 + nd, nd)? {
                let d = match i64::from(d) {
                    DISTRIBUTE_BLOCK => Distrib::Block,
                    DISTRIBUTE_CYCLIC => Distrib::Cyclic,
                    DISTRIBUTE_NONE => Distrib::None,
                    _ => return Err(short()),
                };
                distribs.push(d).map_err(|_| short())?;
            }
            table.darray(
                small.first().copied().ok_or_else(short)?,
                small.get(1).copied().ok_or_else(short)?,
                span(3, nd)?,
                &distribs,
                span(3 + 2 * nd, nd)?,
                span(3 + 3 * nd, nd)?,
                order,
                old,
            )
        }
        _ => Err(unsupported(
            "an etype or filetype of a constructor not rebuilt in a data representation that changes the size of a predefined type",
        )),
    }
}
