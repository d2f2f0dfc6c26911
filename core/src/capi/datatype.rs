//! Datatypes: constructors, queries, commit and free, `MPI_Pack`/`MPI_Unpack` and their
//! `external32` forms, and the element counts of a status.

use core::ffi::{c_char, c_int, c_void, CStr};

use super::abi;
use super::env::{code, run};
use super::handles::{self, datatype, datatype_handle, out};
use crate::datatype::convertor::{prefix, Packer, Unpacker};
use crate::datatype::desc::Combiner;
use crate::datatype::repr::Repr;
use crate::datatype::table::{Distrib, Order};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};

/// A C array of `n` values (NULL is fine when `n` is 0).
pub(super) unsafe fn array<'a, T>(p: *const T, n: c_int, what: &'static str) -> Result<&'a [T]> {
    if n < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            Reason::NegativeCount { count: n as i64 },
        ));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::bad_arg(what));
    }
    // SAFETY: MPI requires the array to hold `n` values.
    Ok(unsafe { core::slice::from_raw_parts(p, n as usize) })
}

// `MPI_Aint` (`long`, or `int` on 32-bit MPICH) is pointer-sized like `isize`.
const _: () = assert!(core::mem::size_of::<abi::MPI_Aint>() == core::mem::size_of::<isize>());

/// A C array of addresses, as the table takes them.
unsafe fn addrs<'a>(p: *const abi::MPI_Aint, n: c_int, what: &'static str) -> Result<&'a [isize]> {
    // SAFETY: MPI requires the array to hold `n` values; `MPI_Aint` and `isize` have one size
    // and both are plain integers.
    let a = unsafe { array(p, n, what)? };
    Ok(unsafe { core::slice::from_raw_parts(a.as_ptr().cast::<isize>(), a.len()) })
}

/// Most blocks of a struct type (its types are translated on the stack).
const MAX_STRUCT_BLOCKS: usize = 4096;

/// Runs a constructor and writes the new type's handle.
unsafe fn construct(
    func: &'static str,
    newtype: *mut abi::MPI_Datatype,
    f: impl FnOnce(&mut Engine) -> Result<Datatype>,
) -> c_int {
    code(run(func, None, |e| {
        if newtype.is_null() {
            return Err(Error::bad_arg("newtype is NULL"));
        }
        let t = f(e)?;
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Datatype.
        unsafe { out(newtype, datatype_handle(t)) }
    }))
}

fn order(o: c_int) -> Result<Order> {
    match o {
        abi::MPI_ORDER_C => Ok(Order::C),
        abi::MPI_ORDER_FORTRAN => Ok(Order::Fortran),
        _ => Err(Error::bad_arg(
            "order is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN",
        )),
    }
}

fn combiner_code(c: Combiner) -> c_int {
    match c {
        Combiner::Named => abi::MPI_COMBINER_NAMED,
        Combiner::Dup => abi::MPI_COMBINER_DUP,
        Combiner::Contiguous => abi::MPI_COMBINER_CONTIGUOUS,
        Combiner::Vector => abi::MPI_COMBINER_VECTOR,
        Combiner::Hvector => abi::MPI_COMBINER_HVECTOR,
        Combiner::Indexed => abi::MPI_COMBINER_INDEXED,
        Combiner::Hindexed => abi::MPI_COMBINER_HINDEXED,
        Combiner::IndexedBlock => abi::MPI_COMBINER_INDEXED_BLOCK,
        Combiner::HindexedBlock => abi::MPI_COMBINER_HINDEXED_BLOCK,
        Combiner::Struct => abi::MPI_COMBINER_STRUCT,
        Combiner::Subarray => abi::MPI_COMBINER_SUBARRAY,
        Combiner::Darray => abi::MPI_COMBINER_DARRAY,
        Combiner::Resized => abi::MPI_COMBINER_RESIZED,
        Combiner::F90Integer => abi::MPI_COMBINER_F90_INTEGER,
        Combiner::F90Real => abi::MPI_COMBINER_F90_REAL,
        Combiner::F90Complex => abi::MPI_COMBINER_F90_COMPLEX,
    }
}

/// The one data representation `MPI_Pack_external` knows.
unsafe fn external32(datarep: *const c_char) -> Result<Repr> {
    if datarep.is_null() {
        return Err(Error::bad_arg("datarep is NULL"));
    }
    // SAFETY: MPI requires a NUL-terminated string.
    match unsafe { CStr::from_ptr(datarep) }.to_bytes() {
        b"external32" => Ok(Repr::EXTERNAL32),
        _ => Err(Error::bad_arg(
            "the only data representation is \"external32\"",
        )),
    }
}

/// The form `MPI_Pack` data takes on `comm`: native among processes of one architecture,
/// `external32` (which every member reads) otherwise.
fn form(e: &Engine, comm: crate::comm::CommId) -> Result<Option<Repr>> {
    Ok((!e.comm_homogeneous(comm)?).then_some(Repr::EXTERNAL32))
}

/// The packed-buffer position a pack or unpack starts at: never negative.
fn start<P: TryInto<usize>>(position: P) -> Result<usize> {
    position
        .try_into()
        .map_err(|_| Error::bad_arg("position is negative"))
}

fn too_small(what: &'static str) -> Error {
    Error::new(ErrorClass::Truncate, Reason::BadArgument { what })
}

/// Packs `count` instances of `dt` from `inbuf` into `outbuf[*position..size]` in `repr`.
unsafe fn pack(
    e: &mut Engine,
    inbuf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    outbuf: *mut c_void,
    size: usize,
    position: usize,
    repr: Option<Repr>,
) -> Result<usize> {
    let (d, n) = handles::typed(e.types(), inbuf, count, dt)?;
    let types = e.types();
    // SAFETY: MPI requires `inbuf` to hold the instances; the packer lives only in this call.
    let mut p = unsafe {
        match repr {
            None => Packer::new(inbuf.cast(), n, d, types)?,
            Some(r) => Packer::external(inbuf.cast(), n, d, types, r)?,
        }
    };
    let len = p.packed_len();
    if position > size || size - position < len {
        return Err(too_small(
            "the output buffer has no room for the packed data",
        ));
    }
    if len > 0 && outbuf.is_null() {
        return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer));
    }
    // SAFETY: `position + len <= size`, the output buffer's size by MPI's rules.
    let dst = unsafe { core::slice::from_raw_parts_mut(outbuf.cast::<u8>().add(position), len) };
    p.pack(types, 0, dst);
    if p.overflowed() {
        return Err(Error::new(
            ErrorClass::ValueTooLarge,
            Reason::BadArgument {
                what: "a value does not fit its external32 representation",
            },
        ));
    }
    Ok(position + len)
}

/// Unpacks `count` instances of `dt` into `outbuf` from `inbuf[position..size]` in `repr`.
unsafe fn unpack(
    e: &mut Engine,
    inbuf: *const c_void,
    size: usize,
    position: usize,
    outbuf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    repr: Option<Repr>,
) -> Result<usize> {
    let (d, n) = handles::typed(e.types(), outbuf, count, dt)?;
    let types = e.types();
    // SAFETY: MPI requires `outbuf` to hold the instances; the unpacker lives only in this call.
    let mut u = unsafe { Unpacker::new(outbuf.cast(), n, d, types)? };
    if let Some(r) = repr {
        u.set_source(types, &r)?;
    }
    let len = u.capacity();
    if position > size || size - position < len {
        return Err(too_small(
            "the input buffer holds less than the data to unpack",
        ));
    }
    if len > 0 && inbuf.is_null() {
        return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer));
    }
    // SAFETY: `position + len <= size`, the input buffer's size by MPI's rules.
    let src = unsafe { core::slice::from_raw_parts(inbuf.cast::<u8>().add(position), len) };
    u.unpack(types, 0, src);
    if let Some(err) = u.error() {
        return Err(err.to_error());
    }
    Ok(position + len)
}

/// `(lb, extent)` or `(true_lb, true_extent)` of a type.
fn extent_of(e: &Engine, dt: abi::MPI_Datatype, true_extent: bool) -> Result<(isize, isize)> {
    let info = e.types().info(datatype(dt)?)?;
    Ok(if true_extent {
        (info.true_lb, info.true_extent)
    } else {
        (info.lb, info.extent)
    })
}

unsafe fn put_extent<T: TryFrom<isize>>(
    lb: *mut T,
    extent: *mut T,
    v: (isize, isize),
) -> Result<()> {
    let conv =
        |x: isize| T::try_from(x).map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge));
    // SAFETY: MPI requires both to point to a `T`.
    unsafe {
        out(lb, conv(v.0)?)?;
        out(extent, conv(v.1)?)
    }
}

/// Elements of `dt` (or basic elements, `basic`) in the bytes a status reports: `None` for
/// `MPI_UNDEFINED`.
pub(crate) fn counted(
    status: *const abi::MPI_Status,
    dt: abi::MPI_Datatype,
    basic: bool,
) -> Result<Option<u64>> {
    if status.is_null() || core::ptr::eq(status, abi::MPI_STATUS_IGNORE) {
        return Err(Error::bad_arg("status is NULL or MPI_STATUS_IGNORE"));
    }
    // SAFETY: checked; MPI requires it to point to an MPI_Status.
    let bytes = unsafe { (*status).count_bytes() } as u64;
    let d = datatype(dt)?;
    run_quiet(|e| {
        let info = *e.types().info(d)?;
        if basic {
            return Ok(prefix(e.types(), d, &Repr::NATIVE, bytes)?.1);
        }
        Ok(match info.size {
            0 => Some(0),
            s if bytes.is_multiple_of(s) => Some(bytes / s),
            _ => None,
        })
    })
}

/// `MPI_Status_set_elements(_x)`: `status` says `count` basic elements of `dt` arrived, so that
/// `MPI_Get_elements` gives `count` back (and `MPI_Get_count` the matching whole instances).
pub(crate) unsafe fn set_elements(
    func: &'static str,
    status: *mut abi::MPI_Status,
    dt: abi::MPI_Datatype,
    count: abi::MPI_Count,
) -> c_int {
    let r = (|| {
        if status.is_null() || core::ptr::eq(status, abi::MPI_STATUS_IGNORE) {
            return Err(Error::bad_arg("status is NULL or MPI_STATUS_IGNORE"));
        }
        if count < 0 {
            return Err(Error::new(
                ErrorClass::Count,
                Reason::NegativeCount { count },
            ));
        }
        let d = datatype(dt)?;
        let bytes = run_quiet(|e| elements_bytes(e.types(), d, count as u64))?;
        // SAFETY: checked; MPI requires it to point to an MPI_Status.
        unsafe { (*status).set_count_bytes(bytes as abi::MPI_Count) };
        Ok(())
    })();
    code(r.map_err(|e| super::errors::report(func, None, e)))
}

/// The bytes of the first `count` basic elements of a sequence of `dt`.
fn elements_bytes(
    types: &crate::datatype::table::TypeTable,
    dt: Datatype,
    count: u64,
) -> Result<u64> {
    let size = types.info(dt)?.size;
    if size == 0 || count == 0 {
        return Ok(0);
    }
    let per = prefix(types, dt, &Repr::NATIVE, size)?
        .1
        .unwrap_or(1)
        .max(1);
    let base = count / per * size;
    let rest = count % per;
    if rest == 0 {
        return Ok(base);
    }
    // Within one instance: the first stream length that ends after `rest` elements.
    for b in 1..size {
        if prefix(types, dt, &Repr::NATIVE, base + b)?.1 == Some(count) {
            return Ok(base + b);
        }
    }
    Err(Error::bad_arg(
        "the count does not end at an element of the datatype",
    ))
}

/// Runs `f` on the engine without reporting (the caller reports).
fn run_quiet<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    match crate::api::ENGINE.enter() {
        Some(mut cx) if super::state::active() => f(cx.e()),
        _ => Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
    }
}

unsafe fn get_count(
    func: &'static str,
    status: *const abi::MPI_Status,
    dt: abi::MPI_Datatype,
    count: *mut c_int,
    basic: bool,
) -> c_int {
    let r = counted(status, dt, basic).and_then(|n| {
        let v = match n {
            Some(n) if n <= c_int::MAX as u64 => n as c_int,
            _ => abi::MPI_UNDEFINED,
        };
        // SAFETY: MPI requires `count` to point to an int.
        unsafe { out(count, v) }
    });
    code(r.map_err(|e| super::errors::report(func, None, e)))
}

unsafe fn get_count_x(
    func: &'static str,
    status: *const abi::MPI_Status,
    dt: abi::MPI_Datatype,
    count: *mut abi::MPI_Count,
    basic: bool,
) -> c_int {
    let r = counted(status, dt, basic).and_then(|n| {
        let v = n.map_or(abi::MPI_UNDEFINED as abi::MPI_Count, |n| {
            n as abi::MPI_Count
        });
        // SAFETY: MPI requires `count` to point to an MPI_Count.
        unsafe { out(count, v) }
    });
    code(r.map_err(|e| super::errors::report(func, None, e)))
}

unsafe fn hvector(
    func: &'static str,
    count: c_int,
    blocklength: c_int,
    stride: abi::MPI_Aint,
    oldtype: abi::MPI_Datatype,
    newtype: *mut abi::MPI_Datatype,
) -> c_int {
    construct(func, newtype, |e| {
        let old = datatype(oldtype)?;
        e.types_mut().vector(
            count.into(),
            blocklength.into(),
            None,
            Some(stride as isize),
            old,
        )
    })
}

unsafe fn hindexed(
    func: &'static str,
    count: c_int,
    blocklens: *const c_int,
    displs: *const abi::MPI_Aint,
    oldtype: abi::MPI_Datatype,
    newtype: *mut abi::MPI_Datatype,
) -> c_int {
    construct(func, newtype, |e| {
        let old = datatype(oldtype)?;
        // SAFETY: MPI requires both arrays to hold `count` values.
        let (b, d) = unsafe {
            (
                array(blocklens, count, "blocklengths is NULL")?,
                addrs(displs, count, "displacements is NULL")?,
            )
        };
        e.types_mut().indexed(b, None, Some(d), old)
    })
}

unsafe fn create_struct(
    func: &'static str,
    count: c_int,
    blocklens: *const c_int,
    displs: *const abi::MPI_Aint,
    types: *const abi::MPI_Datatype,
    newtype: *mut abi::MPI_Datatype,
) -> c_int {
    construct(func, newtype, |e| {
        // SAFETY: MPI requires the arrays to hold `count` values.
        let (b, d, t) = unsafe {
            (
                array(blocklens, count, "blocklengths is NULL")?,
                addrs(displs, count, "displacements is NULL")?,
                array(types, count, "types is NULL")?,
            )
        };
        let mut ts: heapless::Vec<Datatype, MAX_STRUCT_BLOCKS> = heapless::Vec::new();
        for h in t {
            ts.push(datatype(*h)?)
                .map_err(|_| Error::bad_arg("a struct type of more than 4096 blocks"))?;
        }
        e.types_mut().create_struct(b, d, &ts)
    })
}

unsafe fn extent_fn(
    func: &'static str,
    dt: abi::MPI_Datatype,
    pick: impl FnOnce((isize, isize)) -> isize,
    result: *mut abi::MPI_Aint,
) -> c_int {
    code(run(func, None, |e| {
        let v = pick(extent_of(e, dt, false)?);
        // SAFETY: MPI requires `result` to point to an MPI_Aint.
        unsafe { out(result, v as abi::MPI_Aint) }
    }))
}

/// `MPI_Type_create_darray(_c)` (the `_c` form's sizes narrowed).
#[allow(clippy::too_many_arguments)]
unsafe fn darray(
    func: &'static str,
    size: c_int,
    rank: c_int,
    ndims: c_int,
    gsizes: *const c_int,
    distribs: *const c_int,
    dargs: *const c_int,
    psizes: *const c_int,
    order_: c_int,
    oldtype: abi::MPI_Datatype,
    newtype: *mut abi::MPI_Datatype,
) -> c_int {
    construct(func, newtype, |e| {
        let old = datatype(oldtype)?;
        // SAFETY: MPI requires the arrays to hold `ndims` values.
        let (g, d, a, p) = unsafe {
            (
                array(gsizes, ndims, "gsizes is NULL")?,
                array(distribs, ndims, "distribs is NULL")?,
                array(dargs, ndims, "dargs is NULL")?,
                array(psizes, ndims, "psizes is NULL")?,
            )
        };
        let mut ds: heapless::Vec<Distrib, { crate::datatype::table::MAX_DEPTH }> =
            heapless::Vec::new();
        for x in d {
            let v = match *x {
                abi::MPI_DISTRIBUTE_NONE => Distrib::None,
                abi::MPI_DISTRIBUTE_BLOCK => Distrib::Block,
                abi::MPI_DISTRIBUTE_CYCLIC => Distrib::Cyclic,
                _ => {
                    return Err(Error::bad_arg(
                        "a distribution is not MPI_DISTRIBUTE_NONE, _BLOCK or _CYCLIC",
                    ))
                }
            };
            ds.push(v)
                .map_err(|_| Error::bad_arg("darray of more than 16 dimensions"))?;
        }
        e.types_mut()
            .darray(size, rank, g, &ds, a, p, order(order_)?, old)
    })
}

/// `MPI_Type_get_contents(_c)`.
#[allow(clippy::too_many_arguments)]
unsafe fn contents(
    func: &'static str,
    datatype_: abi::MPI_Datatype,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    integers: *mut c_int,
    addresses: *mut abi::MPI_Aint,
    datatypes: *mut abi::MPI_Datatype,
    large: Option<(abi::MPI_Count, *mut abi::MPI_Count)>,
) -> c_int {
    code(run(func, None, |e| {
        let d = datatype(datatype_)?;
        let (_, ni, na, nt) = e.types().envelope(d)?;
        // A `_c` query lists the integers of a large-count type as large counts.
        let wide = large.is_some() && e.types().wide_args(d)?;
        let (max_ints, int_out) = match large {
            Some((max, out)) if wide => (max, out.is_null()),
            _ => (max_integers as abi::MPI_Count, integers.is_null()),
        };
        if max_ints < ni as abi::MPI_Count
            || (max_addresses as i64) < na as i64
            || (max_datatypes as i64) < nt as i64
        {
            return Err(Error::bad_arg(
                "arrays shorter than MPI_Type_get_envelope says",
            ));
        }
        if (ni > 0 && int_out) || (na > 0 && addresses.is_null()) || (nt > 0 && datatypes.is_null())
        {
            return Err(Error::bad_arg("an output array is NULL"));
        }
        // SAFETY: MPI requires the arrays to hold their maxima, which are at least the
        // envelope's counts (checked above); `MPI_Aint` is `isize`-sized.
        unsafe {
            let addrs = core::slice::from_raw_parts_mut(addresses.cast::<isize>(), na);
            let types = |k, t| *datatypes.add(k) = datatype_handle(t);
            match large {
                Some((_, out)) if wide => {
                    let ints = core::slice::from_raw_parts_mut(out, ni);
                    e.types_mut().contents_large(d, ints, addrs, types)
                }
                _ => {
                    let ints = core::slice::from_raw_parts_mut(integers, ni);
                    e.types_mut().contents(d, ints, addrs, types)
                }
            }
        }
    }))
}

super::mpi! {
    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_contiguous", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().contiguous(count.into(), old)
        })
    }

    fn MPI_Type_vector / PMPI_Type_vector(count: c_int, blocklength: c_int, stride: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_vector", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().vector(count.into(), blocklength.into(), Some(stride.into()), None, old)
        })
    }

    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(count: c_int, blocklength: c_int, stride: abi::MPI_Aint, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        hvector("MPI_Type_create_hvector", count, blocklength, stride, oldtype, newtype)
    }

    fn MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklength: c_int, stride: abi::MPI_Aint, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        hvector("MPI_Type_hvector", count, blocklength, stride, oldtype, newtype)
    }

    fn MPI_Type_indexed / PMPI_Type_indexed(count: c_int, blocklens: *const c_int, displs: *const c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_indexed", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires both arrays to hold `count` values.
            let (b, d) = unsafe { (array(blocklens, count, "blocklengths is NULL")?, array(displs, count, "displacements is NULL")?) };
            e.types_mut().indexed(b, Some(d), None, old)
        })
    }

    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(count: c_int, blocklens: *const c_int, displs: *const abi::MPI_Aint, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        hindexed("MPI_Type_create_hindexed", count, blocklens, displs, oldtype, newtype)
    }

    fn MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklens: *const c_int, displs: *const abi::MPI_Aint, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        hindexed("MPI_Type_hindexed", count, blocklens, displs, oldtype, newtype)
    }

    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(count: c_int, blocklength: c_int, displs: *const c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_indexed_block", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires the array to hold `count` values.
            let d = unsafe { array(displs, count, "displacements is NULL")? };
            e.types_mut().indexed_block(blocklength.into(), Some(d), None, old)
        })
    }

    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(count: c_int, blocklength: c_int, displs: *const abi::MPI_Aint, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_hindexed_block", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires the array to hold `count` values.
            let d = unsafe { addrs(displs, count, "displacements is NULL")? };
            e.types_mut().indexed_block(blocklength.into(), None, Some(d), old)
        })
    }

    fn MPI_Type_create_struct / PMPI_Type_create_struct(count: c_int, blocklens: *const c_int, displs: *const abi::MPI_Aint, types: *const abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        create_struct("MPI_Type_create_struct", count, blocklens, displs, types, newtype)
    }

    fn MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklens: *const c_int, displs: *const abi::MPI_Aint, types: *const abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        create_struct("MPI_Type_struct", count, blocklens, displs, types, newtype)
    }

    fn MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: abi::MPI_Datatype, lb: abi::MPI_Aint, extent: abi::MPI_Aint, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_resized", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().resized(old, lb as isize, extent as isize)
        })
    }

    fn MPI_Type_dup / PMPI_Type_dup(oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        let rc = construct("MPI_Type_dup", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().dup(old)
        });
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        // Attributes are copied by their copy callbacks, with no lock held.
        // SAFETY: `construct` wrote the new handle there.
        unsafe { super::attr::type_duplicated("MPI_Type_dup", oldtype, newtype) }
    }

    fn MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, sizes: *const c_int, subsizes: *const c_int, starts: *const c_int, order_: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_subarray", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires the arrays to hold `ndims` values.
            let (a, b, c) = unsafe { (array(sizes, ndims, "sizes is NULL")?, array(subsizes, ndims, "subsizes is NULL")?, array(starts, ndims, "starts is NULL")?) };
            e.types_mut().subarray(a, b, c, order(order_)?, old)
        })
    }

    fn MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, ndims: c_int, gsizes: *const c_int, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order_: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        darray("MPI_Type_create_darray", size, rank, ndims, gsizes, distribs, dargs, psizes, order_, oldtype, newtype)
    }

    fn MPI_Type_commit / PMPI_Type_commit(datatype_: *mut abi::MPI_Datatype) {
        code(run("MPI_Type_commit", None, |e| {
            if datatype_.is_null() {
                return Err(Error::bad_arg("datatype is NULL"));
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Datatype.
            let d = datatype(unsafe { *datatype_ })?;
            e.types_mut().commit(d)
        }))
    }

    fn MPI_Type_free / PMPI_Type_free(datatype_: *mut abi::MPI_Datatype) {
        // Attribute delete callbacks run first, with no lock held; one that fails fails the free.
        if !datatype_.is_null() {
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Datatype.
            if let Err(code) = super::attr::type_freeing("MPI_Type_free", unsafe { *datatype_ }) {
                return code;
            }
        }
        code(run("MPI_Type_free", None, |e| {
            if datatype_.is_null() {
                return Err(Error::bad_arg("datatype is NULL"));
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Datatype.
            let d = datatype(unsafe { *datatype_ })?;
            e.types_mut().free(d)?;
            super::attr::type_freed(e, d);
            // SAFETY: as above.
            unsafe { *datatype_ = abi::MPI_DATATYPE_NULL };
            Ok(())
        }))
    }

    fn MPI_Type_size / PMPI_Type_size(datatype_: abi::MPI_Datatype, size: *mut c_int) {
        code(run("MPI_Type_size", None, |e| {
            let s = e.types().info(datatype(datatype_)?)?.size;
            let s = c_int::try_from(s).unwrap_or(abi::MPI_UNDEFINED);
            // SAFETY: MPI requires `size` to point to an int.
            unsafe { out(size, s) }
        }))
    }

    fn MPI_Type_size_x / PMPI_Type_size_x(datatype_: abi::MPI_Datatype, size: *mut abi::MPI_Count) {
        code(run("MPI_Type_size_x", None, |e| {
            let s = e.types().info(datatype(datatype_)?)?.size;
            // SAFETY: MPI requires `size` to point to an MPI_Count.
            unsafe { out(size, s as abi::MPI_Count) }
        }))
    }

    fn MPI_Type_get_extent / PMPI_Type_get_extent(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Aint, extent: *mut abi::MPI_Aint) {
        code(run("MPI_Type_get_extent", None, |e| {
            let v = extent_of(e, datatype_, false)?;
            // SAFETY: MPI requires both to point to an MPI_Aint.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Count, extent: *mut abi::MPI_Count) {
        code(run("MPI_Type_get_extent_x", None, |e| {
            let v = extent_of(e, datatype_, false)?;
            // SAFETY: MPI requires both to point to an MPI_Count.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Aint, extent: *mut abi::MPI_Aint) {
        code(run("MPI_Type_get_true_extent", None, |e| {
            let v = extent_of(e, datatype_, true)?;
            // SAFETY: MPI requires both to point to an MPI_Aint.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Count, extent: *mut abi::MPI_Count) {
        code(run("MPI_Type_get_true_extent_x", None, |e| {
            let v = extent_of(e, datatype_, true)?;
            // SAFETY: MPI requires both to point to an MPI_Count.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_extent / PMPI_Type_extent(datatype_: abi::MPI_Datatype, extent: *mut abi::MPI_Aint) {
        extent_fn("MPI_Type_extent", datatype_, |(_, x)| x, extent)
    }

    fn MPI_Type_lb / PMPI_Type_lb(datatype_: abi::MPI_Datatype, displacement: *mut abi::MPI_Aint) {
        extent_fn("MPI_Type_lb", datatype_, |(lb, _)| lb, displacement)
    }

    fn MPI_Type_ub / PMPI_Type_ub(datatype_: abi::MPI_Datatype, displacement: *mut abi::MPI_Aint) {
        extent_fn("MPI_Type_ub", datatype_, |(lb, x)| lb + x, displacement)
    }

    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(datatype_: abi::MPI_Datatype, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) {
        code(run("MPI_Type_get_envelope", None, |e| {
            let d = datatype(datatype_)?;
            let (c, ni, na, nt) = e.types().envelope(d)?;
            if e.types().wide_args(d)? {
                return Err(Error::new(ErrorClass::Count, Reason::BadArgument {
                    what: "a count of this datatype does not fit an int: MPI_Type_get_envelope_c describes it",
                }));
            }
            // SAFETY: MPI requires each to point to an int.
            unsafe {
                out(num_integers, ni as c_int)?;
                out(num_addresses, na as c_int)?;
                out(num_datatypes, nt as c_int)?;
                out(combiner, combiner_code(c))
            }
        }))
    }

    fn MPI_Type_get_contents / PMPI_Type_get_contents(datatype_: abi::MPI_Datatype, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, integers: *mut c_int, addresses: *mut abi::MPI_Aint, datatypes: *mut abi::MPI_Datatype) {
        contents("MPI_Type_get_contents", datatype_, max_integers, max_addresses, max_datatypes, integers, addresses, datatypes, None)
    }

    fn MPI_Type_get_name / PMPI_Type_get_name(datatype_: abi::MPI_Datatype, type_name: *mut c_char, resultlen: *mut c_int) {
        code(run("MPI_Type_get_name", None, |e| {
            let d = datatype(datatype_)?;
            e.types().info(d)?;
            let mut set = [0u8; abi::MPI_MAX_OBJECT_NAME as usize];
            let given = super::attr::type_name(e, d, &mut set);
            let name: &[u8] = if let Some(n) = given {
                // A name given with MPI_Type_set_name.
                &set[..n]
            } else if d.is_predefined() {
                abi::PREDEFINED_DATATYPES.iter().find(|(h, _)| *h == datatype_).map_or(d.name(), |(_, n)| *n).as_bytes()
            } else {
                b""
            };
            if type_name.is_null() {
                return Err(Error::bad_arg("type_name is NULL"));
            }
            let n = name.len().min(abi::MPI_MAX_OBJECT_NAME as usize - 1);
            // SAFETY: MPI requires `type_name` to hold MPI_MAX_OBJECT_NAME chars.
            unsafe {
                core::ptr::copy_nonoverlapping(name.as_ptr(), type_name.cast::<u8>(), n);
                *type_name.add(n) = 0;
                out(resultlen, n as c_int)
            }
        }))
    }

    fn MPI_Type_match_size / PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype_: *mut abi::MPI_Datatype) {
        code(run("MPI_Type_match_size", None, |_| {
            let h = match (typeclass, size) {
                (abi::MPI_TYPECLASS_INTEGER, 1) => abi::MPI_INTEGER1,
                (abi::MPI_TYPECLASS_INTEGER, 2) => abi::MPI_INTEGER2,
                (abi::MPI_TYPECLASS_INTEGER, 4) => abi::MPI_INTEGER4,
                (abi::MPI_TYPECLASS_INTEGER, 8) => abi::MPI_INTEGER8,
                (abi::MPI_TYPECLASS_REAL, 4) => abi::MPI_REAL4,
                (abi::MPI_TYPECLASS_REAL, 8) => abi::MPI_REAL8,
                (abi::MPI_TYPECLASS_REAL, 16) => abi::MPI_REAL16,
                (abi::MPI_TYPECLASS_COMPLEX, 8) => abi::MPI_COMPLEX8,
                (abi::MPI_TYPECLASS_COMPLEX, 16) => abi::MPI_COMPLEX16,
                (abi::MPI_TYPECLASS_COMPLEX, 32) => abi::MPI_COMPLEX32,
                _ => return Err(Error::bad_arg("no predefined type of that class and size")),
            };
            // SAFETY: MPI requires `datatype` to point to an MPI_Datatype.
            unsafe { out(datatype_, h) }
        }))
    }

    fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, newtype: *mut abi::MPI_Datatype) {
        code(run("MPI_Type_create_f90_integer", None, |e| {
            let h = f90_integer(r).ok_or(Error::bad_arg("no integer type has that decimal range"))?;
            let t = e.types_mut().f90(Combiner::F90Integer, datatype(h)?, &[r.into()])?;
            // SAFETY: MPI requires `newtype` to point to an MPI_Datatype.
            unsafe { out(newtype, handles::datatype_handle(t)) }
        }))
    }

    fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut abi::MPI_Datatype) {
        code(run("MPI_Type_create_f90_real", None, |e| {
            let h = f90_real(p, r, [abi::MPI_REAL4, abi::MPI_REAL8, abi::MPI_REAL16])
                .ok_or(Error::bad_arg("no real type has that precision and range"))?;
            let t = e.types_mut().f90(Combiner::F90Real, datatype(h)?, &[p.into(), r.into()])?;
            // SAFETY: MPI requires `newtype` to point to an MPI_Datatype.
            unsafe { out(newtype, handles::datatype_handle(t)) }
        }))
    }

    fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut abi::MPI_Datatype) {
        code(run("MPI_Type_create_f90_complex", None, |e| {
            let h = f90_real(p, r, [abi::MPI_COMPLEX8, abi::MPI_COMPLEX16, abi::MPI_COMPLEX32])
                .ok_or(Error::bad_arg("no complex type has that precision and range"))?;
            let t = e.types_mut().f90(Combiner::F90Complex, datatype(h)?, &[p.into(), r.into()])?;
            // SAFETY: MPI requires `newtype` to point to an MPI_Datatype.
            unsafe { out(newtype, handles::datatype_handle(t)) }
        }))
    }

    fn MPI_Pack / PMPI_Pack(inbuf: *const c_void, incount: c_int, datatype_: abi::MPI_Datatype, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: abi::MPI_Comm) {
        code(super::env::run_comm("MPI_Pack", comm, |e, c| {
            if position.is_null() || outsize < 0 {
                return Err(Error::bad_arg("position is NULL or outsize is negative"));
            }
            let repr = form(e, c)?;
            // SAFETY: checked non-null; MPI's rules for the buffers.
            unsafe {
                let p = pack(e, inbuf, incount.into(), datatype_, outbuf, outsize as usize, start(*position)?, repr)?;
                *position = p as c_int;
            }
            Ok(())
        }))
    }

    fn MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, outcount: c_int, datatype_: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(super::env::run_comm("MPI_Unpack", comm, |e, c| {
            if position.is_null() || insize < 0 {
                return Err(Error::bad_arg("position is NULL or insize is negative"));
            }
            let repr = form(e, c)?;
            // SAFETY: checked non-null; MPI's rules for the buffers.
            unsafe {
                let p = unpack(e, inbuf, insize as usize, start(*position)?, outbuf, outcount.into(), datatype_, repr)?;
                *position = p as c_int;
            }
            Ok(())
        }))
    }

    fn MPI_Pack_size / PMPI_Pack_size(incount: c_int, datatype_: abi::MPI_Datatype, comm: abi::MPI_Comm, size: *mut c_int) {
        code(super::env::run_comm("MPI_Pack_size", comm, |e, c| {
            if incount < 0 {
                return Err(Error::new(ErrorClass::Count, Reason::NegativeCount { count: incount as i64 }));
            }
            let d = datatype(datatype_)?;
            let s = match form(e, c)? {
                None => e.types().info(d)?.size,
                Some(r) => e.types().stream_size(d, &r)?,
            }
            .checked_mul(incount as u64)
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            let s = c_int::try_from(s).map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            // SAFETY: MPI requires `size` to point to an int.
            unsafe { out(size, s) }
        }))
    }

    fn MPI_Pack_external / PMPI_Pack_external(datarep: *const c_char, inbuf: *const c_void, incount: c_int, datatype_: abi::MPI_Datatype, outbuf: *mut c_void, outsize: abi::MPI_Aint, position: *mut abi::MPI_Aint) {
        code(run("MPI_Pack_external", None, |e| {
            if position.is_null() || outsize < 0 {
                return Err(Error::bad_arg("position is NULL or outsize is negative"));
            }
            // SAFETY: checked non-null; MPI's rules for the buffers and the string.
            unsafe {
                let r = external32(datarep)?;
                let p = pack(e, inbuf, incount.into(), datatype_, outbuf, outsize as usize, start(*position)?, Some(r))?;
                *position = p as abi::MPI_Aint;
            }
            Ok(())
        }))
    }

    fn MPI_Unpack_external / PMPI_Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: abi::MPI_Aint, position: *mut abi::MPI_Aint, outbuf: *mut c_void, outcount: c_int, datatype_: abi::MPI_Datatype) {
        code(run("MPI_Unpack_external", None, |e| {
            if position.is_null() || insize < 0 {
                return Err(Error::bad_arg("position is NULL or insize is negative"));
            }
            // SAFETY: checked non-null; MPI's rules for the buffers and the string.
            unsafe {
                let r = external32(datarep)?;
                let p = unpack(e, inbuf, insize as usize, start(*position)?, outbuf, outcount.into(), datatype_, Some(r))?;
                *position = p as abi::MPI_Aint;
            }
            Ok(())
        }))
    }

    fn MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, incount: c_int, datatype_: abi::MPI_Datatype, size: *mut abi::MPI_Aint) {
        code(run("MPI_Pack_external_size", None, |e| {
            // SAFETY: MPI requires a NUL-terminated string.
            let r = unsafe { external32(datarep)? };
            if incount < 0 {
                return Err(Error::new(ErrorClass::Count, Reason::NegativeCount { count: incount as i64 }));
            }
            let s = e.types().stream_size(datatype(datatype_)?, &r)? * incount as u64;
            // SAFETY: MPI requires `size` to point to an MPI_Aint.
            unsafe { out(size, s as abi::MPI_Aint) }
        }))
    }

    fn MPI_Get_count / PMPI_Get_count(status: *const abi::MPI_Status, datatype_: abi::MPI_Datatype, count: *mut c_int) {
        get_count("MPI_Get_count", status, datatype_, count, false)
    }

    fn MPI_Get_elements / PMPI_Get_elements(status: *const abi::MPI_Status, datatype_: abi::MPI_Datatype, count: *mut c_int) {
        get_count("MPI_Get_elements", status, datatype_, count, true)
    }

    fn MPI_Get_elements_x / PMPI_Get_elements_x(status: *const abi::MPI_Status, datatype_: abi::MPI_Datatype, count: *mut abi::MPI_Count) {
        get_count_x("MPI_Get_elements_x", status, datatype_, count, true)
    }
}

/// `MPI_Type_create_f90_integer`: the smallest of `INTEGER1`, `2`, `4`, `8` holding every integer
/// of `r` decimal digits (gfortran's `SELECTED_INT_KIND`). The type returned is a copy of it
/// whose envelope says `MPI_COMBINER_F90_INTEGER` ([`crate::datatype::table::TypeTable::f90`]).
fn f90_integer(r: c_int) -> Option<abi::MPI_Datatype> {
    match r {
        0..=2 => Some(abi::MPI_INTEGER1),
        3..=4 => Some(abi::MPI_INTEGER2),
        5..=9 => Some(abi::MPI_INTEGER4),
        10..=18 => Some(abi::MPI_INTEGER8),
        _ => None,
    }
}

/// `MPI_Type_create_f90_real`/`_complex`: the first of the 4-, 8- and 16-byte kinds (`types`)
/// with at least `p` decimal digits of precision and a decimal exponent range of at least `r`,
/// as gfortran's `SELECTED_REAL_KIND` chooses (`MPI_UNDEFINED` leaves one unconstrained, not
/// both); copied as for integers.
fn f90_real(p: c_int, r: c_int, types: [abi::MPI_Datatype; 3]) -> Option<abi::MPI_Datatype> {
    if p == abi::MPI_UNDEFINED && r == abi::MPI_UNDEFINED {
        return None;
    }
    let p = if p == abi::MPI_UNDEFINED { 0 } else { p };
    let r = if r == abi::MPI_UNDEFINED { 0 } else { r };
    if p < 0 || r < 0 {
        return None;
    }
    // (precision, range) of IEEE single, double and quad precision.
    const KINDS: [(c_int, c_int); 3] = [(6, 37), (15, 307), (33, 4931)];
    KINDS
        .iter()
        .zip(types)
        .find(|((kp, kr), _)| p <= *kp && r <= *kr)
        .map(|(_, t)| t)
}

#[cfg(test)]
mod f90_tests {
    use super::*;

    #[test]
    fn f90_types_follow_selected_kinds() {
        assert_eq!(f90_integer(2), Some(abi::MPI_INTEGER1));
        assert_eq!(f90_integer(9), Some(abi::MPI_INTEGER4));
        assert_eq!(f90_integer(18), Some(abi::MPI_INTEGER8));
        assert_eq!(f90_integer(19), None);
        let reals = [abi::MPI_REAL4, abi::MPI_REAL8, abi::MPI_REAL16];
        assert_eq!(f90_real(6, 37, reals), Some(abi::MPI_REAL4));
        assert_eq!(f90_real(7, abi::MPI_UNDEFINED, reals), Some(abi::MPI_REAL8));
        assert_eq!(
            f90_real(abi::MPI_UNDEFINED, 400, reals),
            Some(abi::MPI_REAL16)
        );
        assert_eq!(f90_real(34, 0, reals), None);
        assert_eq!(
            f90_real(abi::MPI_UNDEFINED, abi::MPI_UNDEFINED, reals),
            None
        );
    }
}

/// An array of `MPI_Count`s narrowed to `int`s (or to addresses, `isize`) for the type table's
/// array constructors, in temporary memory given back on drop. The table keeps layouts in 64
/// bits (sizes, extents, displacements, the counts of its nodes) and its scalar counts too; its
/// array arguments are `int`s, so an entry of a `_c` constructor's array beyond `int` is
/// `MPI_ERR_COUNT` (a displacement beyond the address space too, on a 32-bit target).
struct Narrowed<T: Copy = i32> {
    p: *mut T,
    n: usize,
}

impl<T: Copy + TryFrom<i64>> Narrowed<T> {
    /// Narrows `n` values at `p`.
    ///
    /// # Safety
    /// MPI's rule: `p` holds `n` values (unless `n` is 0).
    unsafe fn new(
        p: *const abi::MPI_Count,
        n: abi::MPI_Count,
        what: &'static str,
    ) -> Result<Narrowed<T>> {
        let n = usize::try_from(n)
            .map_err(|_| Error::new(ErrorClass::Count, Reason::NegativeCount { count: n }))?;
        if n == 0 {
            return Ok(Narrowed {
                p: core::ptr::NonNull::dangling().as_ptr(),
                n: 0,
            });
        }
        if p.is_null() {
            return Err(Error::bad_arg(what));
        }
        let bytes = n
            .checked_mul(size_of::<T>())
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
        let q = super::state::hooks()
            .and_then(|h| (h.temp_alloc)(bytes))
            .ok_or(Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument {
                    what: "no temporary memory for a datatype constructor's arguments",
                },
            ))?
            .cast::<T>();
        let out = Narrowed { p: q, n };
        for i in 0..n {
            // SAFETY: the caller's contract for `p`; `q` holds `n` values (the allocation is
            // aligned for any scalar).
            unsafe {
                let v = *p.add(i);
                let v = T::try_from(v).map_err(|_| {
                    Error::new(ErrorClass::Count, Reason::BadArgument { what: "an array entry of a large-count datatype constructor beyond 2^31 - 1 (not supported yet)" })
                })?;
                q.add(i).write(v);
            }
        }
        Ok(out)
    }

    fn get(&self) -> &[T] {
        // SAFETY: `p` holds `n` initialised values (or is dangling with `n` 0).
        unsafe { core::slice::from_raw_parts(self.p, self.n) }
    }
}

impl<T: Copy> Drop for Narrowed<T> {
    fn drop(&mut self) {
        if self.n > 0 {
            if let Some(h) = super::state::hooks() {
                (h.temp_free)(self.p.cast(), self.n * size_of::<T>());
            }
        }
    }
}

/// A `_c` constructor's count of blocks, as the `int` forms' helpers take it.
fn blocks(count: abi::MPI_Count) -> Result<c_int> {
    c_int::try_from(count).map_err(|_| {
        if count < 0 {
            Error::new(ErrorClass::Count, Reason::NegativeCount { count })
        } else {
            Error::new(
                ErrorClass::Count,
                Reason::BadArgument {
                    what: "more than 2^31 - 1 blocks in a datatype constructor (not supported yet)",
                },
            )
        }
    })
}

/// A `_c` query's `int`-sized output from a 64-bit value.
fn wide_out<T: TryFrom<usize>>(v: usize) -> Result<T> {
    T::try_from(v).map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))
}

super::mpi! {
    fn MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count: abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_contiguous_c", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().contiguous(count, old)
        })
    }

    fn MPI_Type_vector_c / PMPI_Type_vector_c(count: abi::MPI_Count, blocklength: abi::MPI_Count, stride: abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_vector_c", newtype, |e| {
            let old = datatype(oldtype)?;
            e.types_mut().vector(count, blocklength, Some(stride), None, old)
        })
    }

    fn MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count: abi::MPI_Count, blocklength: abi::MPI_Count, stride: abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_hvector_c", newtype, |e| {
            let old = datatype(oldtype)?;
            let stride = isize::try_from(stride).map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            e.types_mut().vector(count, blocklength, None, Some(stride), old)
        })
    }

    fn MPI_Type_indexed_c / PMPI_Type_indexed_c(count: abi::MPI_Count, blocklens: *const abi::MPI_Count, displs: *const abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_indexed_c", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires both arrays to hold `count` values.
            let (b, d) = unsafe { (Narrowed::new(blocklens, count, "blocklengths is NULL")?, Narrowed::new(displs, count, "displacements is NULL")?) };
            e.types_mut().indexed(b.get(), Some(d.get()), None, old)
        })
    }

    fn MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: abi::MPI_Count, blocklens: *const abi::MPI_Count, displs: *const abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_hindexed_c", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires both arrays to hold `count` values.
            let (b, d): (Narrowed, Narrowed<isize>) = unsafe { (Narrowed::new(blocklens, count, "blocklengths is NULL")?, Narrowed::new(displs, count, "displacements is NULL")?) };
            e.types_mut().indexed(b.get(), None, Some(d.get()), old)
        })
    }

    fn MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: abi::MPI_Count, blocklength: abi::MPI_Count, displs: *const abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_indexed_block_c", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires the array to hold `count` values.
            let d = unsafe { Narrowed::new(displs, count, "displacements is NULL")? };
            e.types_mut().indexed_block(blocklength, Some(d.get()), None, old)
        })
    }

    fn MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(count: abi::MPI_Count, blocklength: abi::MPI_Count, displs: *const abi::MPI_Count, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_hindexed_block_c", newtype, |e| {
            let old = datatype(oldtype)?;
            // SAFETY: MPI requires the array to hold `count` values.
            let d: Narrowed<isize> = unsafe { Narrowed::new(displs, count, "displacements is NULL")? };
            e.types_mut().indexed_block(blocklength, None, Some(d.get()), old)
        })
    }

    fn MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: abi::MPI_Count, blocklens: *const abi::MPI_Count, displs: *const abi::MPI_Count, types: *const abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        let n = match blocks(count) {
            Ok(n) => n,
            Err(e) => return super::errors::report("MPI_Type_create_struct_c", None, e),
        };
        // SAFETY: MPI requires the array to hold `count` values.
        let b = match unsafe { Narrowed::new(blocklens, count, "blocklengths is NULL") } {
            Ok(b) => b,
            Err(e) => return super::errors::report("MPI_Type_create_struct_c", None, e),
        };
        // SAFETY: MPI requires the array to hold `count` values.
        let d: Narrowed<isize> = match unsafe { Narrowed::new(displs, count, "displacements is NULL") } {
            Ok(d) => d,
            Err(e) => return super::errors::report("MPI_Type_create_struct_c", None, e),
        };
        // `isize` and `MPI_Aint` have one size (checked at compile time above).
        create_struct("MPI_Type_create_struct_c", n, b.get().as_ptr(), d.get().as_ptr().cast(), types, newtype)
    }

    fn MPI_Type_create_resized_c / PMPI_Type_create_resized_c(oldtype: abi::MPI_Datatype, lb: abi::MPI_Count, extent: abi::MPI_Count, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_resized_c", newtype, |e| {
            let old = datatype(oldtype)?;
            let big = || Error::new(ErrorClass::Count, Reason::CountTooLarge);
            e.types_mut().resized(old, isize::try_from(lb).map_err(|_| big())?, isize::try_from(extent).map_err(|_| big())?)
        })
    }

    fn MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const abi::MPI_Count, subsizes: *const abi::MPI_Count, starts: *const abi::MPI_Count, order_: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        construct("MPI_Type_create_subarray_c", newtype, |e| {
            let old = datatype(oldtype)?;
            let n = ndims.into();
            // SAFETY: MPI requires the arrays to hold `ndims` values.
            let (a, b, c) = unsafe { (Narrowed::new(sizes, n, "sizes is NULL")?, Narrowed::new(subsizes, n, "subsizes is NULL")?, Narrowed::new(starts, n, "starts is NULL")?) };
            e.types_mut().subarray(a.get(), b.get(), c.get(), order(order_)?, old)
        })
    }

    fn MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, gsizes: *const abi::MPI_Count, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order_: c_int, oldtype: abi::MPI_Datatype, newtype: *mut abi::MPI_Datatype) {
        // SAFETY: MPI requires the array to hold `ndims` values.
        let g = match unsafe { Narrowed::new(gsizes, ndims.into(), "gsizes is NULL") } {
            Ok(g) => g,
            Err(e) => return super::errors::report("MPI_Type_create_darray_c", None, e),
        };
        darray("MPI_Type_create_darray_c", size, rank, ndims, g.get().as_ptr(), distribs, dargs, psizes, order_, oldtype, newtype)
    }

    fn MPI_Type_size_c / PMPI_Type_size_c(datatype_: abi::MPI_Datatype, size: *mut abi::MPI_Count) {
        code(run("MPI_Type_size_c", None, |e| {
            let s = e.types().info(datatype(datatype_)?)?.size;
            // SAFETY: MPI requires `size` to point to an MPI_Count.
            unsafe { out(size, s as abi::MPI_Count) }
        }))
    }

    fn MPI_Type_get_extent_c / PMPI_Type_get_extent_c(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Count, extent: *mut abi::MPI_Count) {
        code(run("MPI_Type_get_extent_c", None, |e| {
            let v = extent_of(e, datatype_, false)?;
            // SAFETY: MPI requires both to point to an MPI_Count.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(datatype_: abi::MPI_Datatype, lb: *mut abi::MPI_Count, extent: *mut abi::MPI_Count) {
        code(run("MPI_Type_get_true_extent_c", None, |e| {
            let v = extent_of(e, datatype_, true)?;
            // SAFETY: MPI requires both to point to an MPI_Count.
            unsafe { put_extent(lb, extent, v) }
        }))
    }

    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(datatype_: abi::MPI_Datatype, num_integers: *mut abi::MPI_Count, num_addresses: *mut abi::MPI_Count, num_large_counts: *mut abi::MPI_Count, num_datatypes: *mut abi::MPI_Count, combiner: *mut c_int) {
        code(run("MPI_Type_get_envelope_c", None, |e| {
            let d = datatype(datatype_)?;
            let (c, ni, na, nt) = e.types().envelope(d)?;
            // The table keeps a constructor's counts as integers; where one does not fit an
            // `int` (a `_c` constructor's), they are all listed as large counts.
            let (ni, nl) = if e.types().wide_args(d)? { (0, ni) } else { (ni, 0) };
            // SAFETY: MPI requires each to point to its type.
            unsafe {
                out(num_integers, wide_out::<abi::MPI_Count>(ni)?)?;
                out(num_addresses, wide_out::<abi::MPI_Count>(na)?)?;
                out(num_large_counts, wide_out::<abi::MPI_Count>(nl)?)?;
                out(num_datatypes, wide_out::<abi::MPI_Count>(nt)?)?;
                out(combiner, combiner_code(c))
            }
        }))
    }

    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(datatype_: abi::MPI_Datatype, max_integers: abi::MPI_Count, max_addresses: abi::MPI_Count, max_large_counts: abi::MPI_Count, max_datatypes: abi::MPI_Count, integers: *mut c_int, addresses: *mut abi::MPI_Aint, large_counts: *mut abi::MPI_Count, datatypes: *mut abi::MPI_Datatype) {
        let big = |v: abi::MPI_Count| c_int::try_from(v.max(0)).unwrap_or(c_int::MAX);
        contents("MPI_Type_get_contents_c", datatype_, big(max_integers), big(max_addresses), big(max_datatypes), integers, addresses, datatypes, Some((max_large_counts, large_counts)))
    }

    fn MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, incount: abi::MPI_Count, datatype_: abi::MPI_Datatype, outbuf: *mut c_void, outsize: abi::MPI_Count, position: *mut abi::MPI_Count, comm: abi::MPI_Comm) {
        code(super::env::run_comm("MPI_Pack_c", comm, |e, c| {
            if position.is_null() || outsize < 0 {
                return Err(Error::bad_arg("position is NULL or outsize is negative"));
            }
            let repr = form(e, c)?;
            // SAFETY: checked non-null; MPI's rules for the buffers.
            unsafe {
                let p = pack(e, inbuf, incount, datatype_, outbuf, outsize as usize, start(*position)?, repr)?;
                *position = p as abi::MPI_Count;
            }
            Ok(())
        }))
    }

    fn MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: abi::MPI_Count, position: *mut abi::MPI_Count, outbuf: *mut c_void, outcount: abi::MPI_Count, datatype_: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(super::env::run_comm("MPI_Unpack_c", comm, |e, c| {
            if position.is_null() || insize < 0 {
                return Err(Error::bad_arg("position is NULL or insize is negative"));
            }
            let repr = form(e, c)?;
            // SAFETY: checked non-null; MPI's rules for the buffers.
            unsafe {
                let p = unpack(e, inbuf, insize as usize, start(*position)?, outbuf, outcount, datatype_, repr)?;
                *position = p as abi::MPI_Count;
            }
            Ok(())
        }))
    }

    fn MPI_Pack_size_c / PMPI_Pack_size_c(incount: abi::MPI_Count, datatype_: abi::MPI_Datatype, comm: abi::MPI_Comm, size: *mut abi::MPI_Count) {
        code(super::env::run_comm("MPI_Pack_size_c", comm, |e, c| {
            if incount < 0 {
                return Err(Error::new(ErrorClass::Count, Reason::NegativeCount { count: incount }));
            }
            let d = datatype(datatype_)?;
            let s = match form(e, c)? {
                None => e.types().info(d)?.size,
                Some(r) => e.types().stream_size(d, &r)?,
            }
            .checked_mul(incount as u64)
            .and_then(|s| abi::MPI_Count::try_from(s).ok())
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            // SAFETY: MPI requires `size` to point to an MPI_Count.
            unsafe { out(size, s) }
        }))
    }

    fn MPI_Pack_external_c / PMPI_Pack_external_c(datarep: *const c_char, inbuf: *const c_void, incount: abi::MPI_Count, datatype_: abi::MPI_Datatype, outbuf: *mut c_void, outsize: abi::MPI_Count, position: *mut abi::MPI_Count) {
        code(run("MPI_Pack_external_c", None, |e| {
            if position.is_null() || outsize < 0 {
                return Err(Error::bad_arg("position is NULL or outsize is negative"));
            }
            // SAFETY: checked non-null; MPI's rules for the buffers and the string.
            unsafe {
                let r = external32(datarep)?;
                let p = pack(e, inbuf, incount, datatype_, outbuf, outsize as usize, start(*position)?, Some(r))?;
                *position = p as abi::MPI_Count;
            }
            Ok(())
        }))
    }

    fn MPI_Unpack_external_c / PMPI_Unpack_external_c(datarep: *const c_char, inbuf: *const c_void, insize: abi::MPI_Count, position: *mut abi::MPI_Count, outbuf: *mut c_void, outcount: abi::MPI_Count, datatype_: abi::MPI_Datatype) {
        code(run("MPI_Unpack_external_c", None, |e| {
            if position.is_null() || insize < 0 {
                return Err(Error::bad_arg("position is NULL or insize is negative"));
            }
            // SAFETY: checked non-null; MPI's rules for the buffers and the string.
            unsafe {
                let r = external32(datarep)?;
                let p = unpack(e, inbuf, insize as usize, start(*position)?, outbuf, outcount, datatype_, Some(r))?;
                *position = p as abi::MPI_Count;
            }
            Ok(())
        }))
    }

    fn MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const c_char, incount: abi::MPI_Count, datatype_: abi::MPI_Datatype, size: *mut abi::MPI_Count) {
        code(run("MPI_Pack_external_size_c", None, |e| {
            // SAFETY: MPI requires a NUL-terminated string.
            let r = unsafe { external32(datarep)? };
            if incount < 0 {
                return Err(Error::new(ErrorClass::Count, Reason::NegativeCount { count: incount }));
            }
            let s = e.types().stream_size(datatype(datatype_)?, &r)?
                .checked_mul(incount as u64)
                .and_then(|s| abi::MPI_Count::try_from(s).ok())
                .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            // SAFETY: MPI requires `size` to point to an MPI_Count.
            unsafe { out(size, s) }
        }))
    }

    fn MPI_Get_count_c / PMPI_Get_count_c(status: *const abi::MPI_Status, datatype_: abi::MPI_Datatype, count: *mut abi::MPI_Count) {
        get_count_x("MPI_Get_count_c", status, datatype_, count, false)
    }

    fn MPI_Get_elements_c / PMPI_Get_elements_c(status: *const abi::MPI_Status, datatype_: abi::MPI_Datatype, count: *mut abi::MPI_Count) {
        get_count_x("MPI_Get_elements_c", status, datatype_, count, true)
    }
}
