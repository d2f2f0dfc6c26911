//! From C handles and pointers to engine values, and back.

use core::ffi::{c_int, c_void};

use super::abi::{self, HandleKind, ObjectKind};
use super::errors;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::op::Op;
use crate::pml::request::{ReqId, Status};
use crate::pml::MsgId;
use crate::pool::Key;

const DIRECT_COMM: c_int = abi::make_handle(HandleKind::Direct, ObjectKind::Comm, 0);

/// The communicator a handle names (not checked for liveness: the engine does that).
pub(crate) fn comm(h: abi::MPI_Comm) -> Result<CommId> {
    match h {
        abi::MPI_COMM_WORLD => Ok(CommId::WORLD),
        abi::MPI_COMM_SELF => Ok(CommId::SELF),
        _ if abi::handle_kind(h) == HandleKind::Direct
            && abi::handle_object(h) == Some(ObjectKind::Comm) =>
        {
            match abi::handle_index(h) {
                i if i >= 2 => Ok(CommId(i)),
                _ => Err(Error::new(ErrorClass::Comm, Reason::InvalidComm)),
            }
        }
        _ => Err(Error::new(ErrorClass::Comm, Reason::InvalidComm)),
    }
}

/// The handle of communicator `c`.
pub(crate) fn comm_handle(c: CommId) -> abi::MPI_Comm {
    match c {
        CommId::WORLD => abi::MPI_COMM_WORLD,
        CommId::SELF => abi::MPI_COMM_SELF,
        CommId(i) => DIRECT_COMM | i as c_int,
    }
}

const DATATYPES: &[(abi::MPI_Datatype, Datatype)] = &[
    (abi::MPI_CHAR, Datatype::CHAR),
    (abi::MPI_SIGNED_CHAR, Datatype::SIGNED_CHAR),
    (abi::MPI_UNSIGNED_CHAR, Datatype::UNSIGNED_CHAR),
    (abi::MPI_BYTE, Datatype::BYTE),
    (abi::MPI_WCHAR, Datatype::WCHAR),
    (abi::MPI_SHORT, Datatype::SHORT),
    (abi::MPI_UNSIGNED_SHORT, Datatype::UNSIGNED_SHORT),
    (abi::MPI_INT, Datatype::INT),
    (abi::MPI_UNSIGNED, Datatype::UNSIGNED),
    (abi::MPI_LONG, Datatype::LONG),
    (abi::MPI_UNSIGNED_LONG, Datatype::UNSIGNED_LONG),
    (abi::MPI_LONG_LONG_INT, Datatype::LONG_LONG),
    (abi::MPI_UNSIGNED_LONG_LONG, Datatype::UNSIGNED_LONG_LONG),
    (abi::MPI_FLOAT, Datatype::FLOAT),
    (abi::MPI_DOUBLE, Datatype::DOUBLE),
    (abi::MPI_LONG_DOUBLE, Datatype::LONG_DOUBLE),
    (abi::MPI_PACKED, Datatype::PACKED),
    (abi::MPI_LB, Datatype::LB),
    (abi::MPI_UB, Datatype::UB),
    (abi::MPI_FLOAT_INT, Datatype::FLOAT_INT),
    (abi::MPI_DOUBLE_INT, Datatype::DOUBLE_INT),
    (abi::MPI_LONG_INT, Datatype::LONG_INT),
    (abi::MPI_SHORT_INT, Datatype::SHORT_INT),
    (abi::MPI_2INT, Datatype::TWO_INT),
    (abi::MPI_LONG_DOUBLE_INT, Datatype::LONG_DOUBLE_INT),
    (abi::MPI_INTEGER, Datatype::INTEGER),
    (abi::MPI_REAL, Datatype::REAL),
    (abi::MPI_LOGICAL, Datatype::LOGICAL),
    (abi::MPI_COMPLEX, Datatype::COMPLEX),
    (abi::MPI_DOUBLE_PRECISION, Datatype::DOUBLE_PRECISION),
    (abi::MPI_2INTEGER, Datatype::TWO_INTEGER),
    (abi::MPI_2REAL, Datatype::TWO_REAL),
    (abi::MPI_DOUBLE_COMPLEX, Datatype::DOUBLE_COMPLEX),
    (abi::MPI_2DOUBLE_PRECISION, Datatype::TWO_DOUBLE_PRECISION),
    (abi::MPI_CHARACTER, Datatype::CHARACTER),
    (abi::MPI_REAL4, Datatype::REAL4),
    (abi::MPI_REAL8, Datatype::REAL8),
    (abi::MPI_REAL16, Datatype::REAL16),
    (abi::MPI_COMPLEX8, Datatype::COMPLEX8),
    (abi::MPI_COMPLEX16, Datatype::COMPLEX16),
    (abi::MPI_COMPLEX32, Datatype::COMPLEX32),
    (abi::MPI_INTEGER1, Datatype::INTEGER1),
    (abi::MPI_INTEGER2, Datatype::INTEGER2),
    (abi::MPI_INTEGER4, Datatype::INTEGER4),
    (abi::MPI_INTEGER8, Datatype::INTEGER8),
    (abi::MPI_INT8_T, Datatype::INT8_T),
    (abi::MPI_INT16_T, Datatype::INT16_T),
    (abi::MPI_INT32_T, Datatype::INT32_T),
    (abi::MPI_INT64_T, Datatype::INT64_T),
    (abi::MPI_UINT8_T, Datatype::UINT8_T),
    (abi::MPI_UINT16_T, Datatype::UINT16_T),
    (abi::MPI_UINT32_T, Datatype::UINT32_T),
    (abi::MPI_UINT64_T, Datatype::UINT64_T),
    (abi::MPI_C_BOOL, Datatype::C_BOOL),
    (abi::MPI_C_FLOAT_COMPLEX, Datatype::C_FLOAT_COMPLEX),
    (abi::MPI_C_DOUBLE_COMPLEX, Datatype::C_DOUBLE_COMPLEX),
    (
        abi::MPI_C_LONG_DOUBLE_COMPLEX,
        Datatype::C_LONG_DOUBLE_COMPLEX,
    ),
    (abi::MPI_AINT, Datatype::AINT),
    (abi::MPI_OFFSET, Datatype::OFFSET),
    (abi::MPI_COUNT, Datatype::COUNT),
    (abi::MPI_CXX_BOOL, Datatype::CXX_BOOL),
    (abi::MPI_CXX_FLOAT_COMPLEX, Datatype::CXX_FLOAT_COMPLEX),
    (abi::MPI_CXX_DOUBLE_COMPLEX, Datatype::CXX_DOUBLE_COMPLEX),
    (
        abi::MPI_CXX_LONG_DOUBLE_COMPLEX,
        Datatype::CXX_LONG_DOUBLE_COMPLEX,
    ),
];

/// Builtin datatype handles by their low byte (MPICH numbers its builtin types densely there).
const BUILTIN: [u8; 256] = {
    let mut t = [u8::MAX; 256];
    let mut i = 0;
    while i < DATATYPES.len() {
        let h = DATATYPES[i].0;
        if (h as u32) >> 30 == HandleKind::Builtin as u32 {
            t[(h & 0xff) as usize] = i as u8;
        }
        i += 1;
    }
    t
};

/// Builtin datatype handles of dense predefined types by their low byte: the handle, the type
/// and the bytes of one element (`(0, BYTE, 0)` where no such type has that byte). The
/// one-sided lean entries decode their operations' type by one look-up here.
const BUILTIN_DENSE: [(abi::MPI_Datatype, Datatype, u16); 256] = {
    let mut t = [(0, Datatype::BYTE, 0u16); 256];
    let mut i = 0;
    while i < DATATYPES.len() {
        let (h, d) = DATATYPES[i];
        let b = d.dense_bytes();
        if (h as u32) >> 30 == HandleKind::Builtin as u32 && b > 0 {
            t[(h & 0xff) as usize] = (h, d, b as u16);
        }
        i += 1;
    }
    t
};

/// The dense predefined type `h` names and the bytes of one element: by [`BUILTIN_DENSE`] for a
/// builtin handle, by [`datatype`] for another; `None` for a type that is not dense.
#[inline(always)]
pub(crate) fn dense_type(h: abi::MPI_Datatype) -> Option<(Datatype, usize)> {
    let (handle, d, b) = BUILTIN_DENSE[(h & 0xff) as usize];
    if handle == h && b != 0 {
        return Some((d, b as usize));
    }
    dense_type_slow(h)
}

#[inline(never)]
fn dense_type_slow(h: abi::MPI_Datatype) -> Option<(Datatype, usize)> {
    let d = datatype(h).ok().filter(|d| d.is_contiguous())?;
    Some((d, d.size()))
}

/// Builtin datatype handles of integer types by their low byte: the handle and the bytes of
/// one element, 1, 2, 4 or 8 (`(0, 0)` where no such type has that byte). The one-sided lean
/// entries decode `MPI_Fetch_and_op`'s and `MPI_Compare_and_swap`'s type by one look-up here.
pub(crate) const BUILTIN_INT: [(abi::MPI_Datatype, u8); 256] = {
    let mut t = [(0, 0u8); 256];
    let mut i = 0;
    while i < DATATYPES.len() {
        let (h, d) = DATATYPES[i];
        let b = d.integer_bytes();
        if (h as u32) >> 30 == HandleKind::Builtin as u32 && matches!(b, 1 | 2 | 4 | 8) {
            t[(h & 0xff) as usize] = (h, b as u8);
        }
        i += 1;
    }
    t
};

/// The bytes of one element of the builtin integer type `h` names (1, 2, 4 or 8), `None` for
/// every other handle.
#[inline(always)]
pub(crate) fn builtin_int(h: abi::MPI_Datatype) -> Option<usize> {
    let (handle, b) = BUILTIN_INT[(h & 0xff) as usize];
    (handle == h && b != 0).then_some(b as usize)
}

const DERIVED: c_int = abi::make_handle(HandleKind::Indirect, ObjectKind::Datatype, 0);

/// The datatype a handle names (derived types are checked for liveness by the type table).
pub(crate) fn datatype(h: abi::MPI_Datatype) -> Result<Datatype> {
    let bad = Error::new(ErrorClass::Type, Reason::InvalidDatatype);
    if abi::handle_object(h) != Some(ObjectKind::Datatype) {
        return Err(bad);
    }
    let i = match abi::handle_kind(h) {
        HandleKind::Builtin => BUILTIN[(h & 0xff) as usize],
        HandleKind::Direct => match DATATYPES.iter().position(|(d, _)| *d == h) {
            Some(i) => i as u8,
            None => return Err(bad),
        },
        HandleKind::Indirect => {
            let i = abi::handle_index(h);
            return match i >= crate::datatype::table::PREDEFINED {
                true => Ok(Datatype::from_index(i)),
                false => Err(bad),
            };
        }
        _ => return Err(bad),
    };
    match DATATYPES.get(i as usize) {
        Some((handle, d)) if *handle == h => Ok(*d),
        _ => Err(bad),
    }
}

/// The handle of datatype `d`.
pub(crate) fn datatype_handle(d: Datatype) -> abi::MPI_Datatype {
    if d.is_predefined() {
        if let Some((h, _)) = DATATYPES.iter().find(|(_, x)| *x == d) {
            return *h;
        }
        return abi::MPI_DATATYPE_NULL;
    }
    DERIVED | d.index() as c_int
}

/// The predefined operation a handle names.
pub(crate) fn op(h: abi::MPI_Op) -> Result<Op> {
    Ok(match h {
        abi::MPI_MAX => Op::Max,
        abi::MPI_MIN => Op::Min,
        abi::MPI_SUM => Op::Sum,
        abi::MPI_PROD => Op::Prod,
        abi::MPI_LAND => Op::Land,
        abi::MPI_BAND => Op::Band,
        abi::MPI_LOR => Op::Lor,
        abi::MPI_BOR => Op::Bor,
        abi::MPI_LXOR => Op::Lxor,
        abi::MPI_BXOR => Op::Bxor,
        abi::MPI_MINLOC => Op::Minloc,
        abi::MPI_MAXLOC => Op::Maxloc,
        abi::MPI_REPLACE => Op::Replace,
        abi::MPI_NO_OP => Op::NoOp,
        _ if abi::handle_object(h) == Some(ObjectKind::Op)
            && abi::handle_kind(h) == HandleKind::Direct
            && abi::handle_index(h) <= u16::MAX as u32 =>
        {
            // Whether it is live is the engine's to say.
            Op::User(abi::handle_index(h) as u16)
        }
        _ => {
            return Err(Error::new(
                ErrorClass::Op,
                Reason::BadArgument {
                    what: "not a reduction operation",
                },
            ))
        }
    })
}

/// A count from the C interface, refused if negative.
pub(crate) fn check_count(count: abi::MPI_Count) -> Result<u64> {
    if count < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            Reason::NegativeCount { count },
        ));
    }
    Ok(count as u64)
}

/// The datatype and count of a communication buffer, checked as the standard asks. A NULL
/// buffer is `MPI_BOTTOM`, valid with a derived type of absolute addresses. The count is an
/// `int` or, from the large-count `_c` forms, an `MPI_Count`: one path for both.
pub(crate) fn typed(
    types: &TypeTable,
    buf: *const c_void,
    count: impl Into<abi::MPI_Count>,
    dt: abi::MPI_Datatype,
) -> Result<(Datatype, u64)> {
    let count = check_count(count.into())?;
    let d = datatype(dt)?;
    let info = types.check_committed(d)?;
    if buf.is_null() && count > 0 && info.size > 0 && d.is_predefined() {
        return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer));
    }
    Ok((d, count))
}

/// A packer over a user's send buffer.
///
/// # Safety
/// MPI's rule: the buffer holds `count` instances of the type and stays untouched until the
/// operation using the packer completes.
pub(crate) unsafe fn packer(
    types: &TypeTable,
    buf: *const c_void,
    count: impl Into<abi::MPI_Count>,
    dt: abi::MPI_Datatype,
) -> Result<Packer> {
    let (d, n) = typed(types, buf, count, dt)?;
    // SAFETY: the caller's contract.
    unsafe { Packer::new(buf.cast(), n, d, types) }
}

/// An unpacker over a user's receive buffer.
///
/// # Safety
/// MPI's rule: the buffer holds `count` instances of the type and is not otherwise accessed
/// until the operation using the unpacker completes.
pub(crate) unsafe fn unpacker(
    types: &TypeTable,
    buf: *mut c_void,
    count: impl Into<abi::MPI_Count>,
    dt: abi::MPI_Datatype,
) -> Result<Unpacker> {
    let (d, n) = typed(types, buf, count, dt)?;
    // SAFETY: the caller's contract.
    unsafe { Unpacker::new(buf.cast(), n, d, types) }
}

// A direct request or message handle carries its pool slot and the low bits of the slot's
// generation in bits 0–24 (bit 25 tells a message from a request; MPICH's 26-bit index field),
// in one of two forms chosen by bit 24:
// - short (bit 24 clear): slot in bits 0–15, generation in bits 16–23 — the first 65,536 slots,
//   where every program's requests live;
// - long (bit 24 set): slot in bits 0–21 (the request and unexpected pools hold at most 2^22,
//   `pml::HANDLE_SLOTS`), generation in bits 22–23.
// A stale handle (a copy kept after MPI set the original to MPI_REQUEST_NULL) is recognised
// unless its slot was reused a multiple of 256 times since (4 in the long form).
const LONG_FORM: u32 = 1 << 24;
const SHORT_SLOTS: u32 = 1 << 16;
const LONG_SLOT_BITS: u32 = 22;
const MESSAGE_BIT: u32 = 1 << 25;

/// The slot bits of a handle for pool key `key`.
const fn slot_bits(key: Key) -> u32 {
    if key.index < SHORT_SLOTS {
        ((key.gen & 0xff) << 16) | key.index
    } else {
        LONG_FORM
            | ((key.gen & 0x3) << LONG_SLOT_BITS)
            | (key.index & (crate::pml::HANDLE_SLOTS - 1))
    }
}

/// The slot, the generation bits and their mask that handle bits `h` carry.
const fn slot_of(h: u32) -> (u32, u32, u32) {
    if h & LONG_FORM == 0 {
        (h & (SHORT_SLOTS - 1), (h >> 16) & 0xff, 0xff)
    } else {
        (
            h & (crate::pml::HANDLE_SLOTS - 1),
            (h >> LONG_SLOT_BITS) & 0x3,
            0x3,
        )
    }
}
const REQ_DIRECT: c_int = abi::make_handle(HandleKind::Direct, ObjectKind::Request, 0);

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, Reason::InvalidRequest)
}

/// The handle every non-blocking send that finished as it started gets (an eager message that
/// went at once): complete, with the empty status, and nothing behind it — waiting for it,
/// testing it or freeing it only makes the caller's handle `MPI_REQUEST_NULL`, cancelling it
/// does nothing. Sharing one handle keeps the request core out of the small-message path
/// (MPICH hands out one such predefined request too).
pub(crate) const REQUEST_SENT: abi::MPI_Request =
    abi::make_handle(HandleKind::Builtin, ObjectKind::Request, 0);

/// The handle of engine request `id` (of any kind: an operation, a persistent request, a
/// non-blocking collective's).
pub(crate) fn request_handle(id: ReqId) -> abi::MPI_Request {
    debug_assert!(id.0.index < crate::pml::HANDLE_SLOTS);
    REQ_DIRECT | slot_bits(id.0) as c_int
}

/// Decodes a request handle, checked against the live slot: `None` for `MPI_REQUEST_NULL`.
#[inline]
pub(crate) fn request(e: &crate::engine::Engine, h: abi::MPI_Request) -> Result<Option<ReqId>> {
    if h == abi::MPI_REQUEST_NULL {
        return Ok(None);
    }
    if abi::handle_object(h) != Some(ObjectKind::Request)
        || abi::handle_kind(h) != HandleKind::Direct
        || (h as u32) & MESSAGE_BIT != 0
    {
        return Err(bad_request());
    }
    let (index, gen, mask) = slot_of(h as u32);
    e.request_at(index)
        .filter(|id| id.0.gen & mask == gen)
        .map(Some)
        .ok_or(bad_request())
}

/// The handle of a matched-probe message (`None`: `MPI_MESSAGE_NO_PROC`).
pub(crate) fn message_handle(m: Option<MsgId>) -> abi::MPI_Message {
    match m {
        None => abi::MPI_MESSAGE_NO_PROC,
        Some(m) => {
            debug_assert!(m.0.index < crate::pml::HANDLE_SLOTS);
            REQ_DIRECT | MESSAGE_BIT as c_int | slot_bits(m.0) as c_int
        }
    }
}

/// Decodes a message handle.
pub(crate) fn message(e: &crate::engine::Engine, h: abi::MPI_Message) -> Result<Option<MsgId>> {
    if h == abi::MPI_MESSAGE_NO_PROC {
        return Ok(None);
    }
    let bad = Error::new(
        ErrorClass::Request,
        Reason::BadArgument {
            what: "not a matched-probe message",
        },
    );
    if abi::handle_kind(h) != HandleKind::Direct || (h as u32) & MESSAGE_BIT == 0 {
        return Err(bad);
    }
    let (index, gen, mask) = slot_of(h as u32);
    e.message_at(index)
        .filter(|m| m.0.gen & mask == gen)
        .map(Some)
        .ok_or(bad)
}

/// Whether a status pointer asks for nothing.
fn ignored(p: *const abi::MPI_Status) -> bool {
    p.is_null() || p == abi::MPI_STATUS_IGNORE
}

/// Fills a C status from an engine status, with `code` as its `MPI_ERROR`.
pub(crate) unsafe fn put_status(p: *mut abi::MPI_Status, st: &Status, code: c_int) {
    if ignored(p) {
        return;
    }
    let mut s = abi::MPI_Status {
        MPI_SOURCE: st.source,
        MPI_TAG: st.tag,
        MPI_ERROR: code,
        ..Default::default()
    };
    s.set_count_bytes(st.bytes as abi::MPI_Count);
    s.set_cancelled(st.cancelled);
    // SAFETY: MPI requires a non-ignored status pointer to point to an MPI_Status.
    unsafe { p.write(s) };
}

/// Writes a probe's status, leaving its `MPI_ERROR` as the caller had it: the standard sets
/// that field only in the statuses of the multiple-completion calls (`MPI_ERR_IN_STATUS`).
pub(crate) unsafe fn put_probe_status(p: *mut abi::MPI_Status, st: &Status) {
    if ignored(p) {
        return;
    }
    // SAFETY: MPI requires a non-ignored status pointer to point to an MPI_Status.
    let keep = unsafe { (*p).MPI_ERROR };
    // SAFETY: as above.
    unsafe { put_status(p, st, keep) };
}

/// The status of an inactive or null request.
pub(crate) const EMPTY_STATUS: Status = Status {
    source: abi::MPI_ANY_SOURCE,
    tag: abi::MPI_ANY_TAG,
    bytes: 0,
    message_bytes: 0,
    error: None,
    cancelled: false,
};

/// The `i`-th status of an array (or `MPI_STATUSES_IGNORE`).
pub(crate) fn status_at(p: *mut abi::MPI_Status, i: usize) -> *mut abi::MPI_Status {
    if ignored(p) {
        abi::MPI_STATUS_IGNORE
    } else {
        // SAFETY: MPI requires a non-ignored status array to have an entry per request.
        unsafe { p.add(i) }
    }
}

/// Writes `v` through an output pointer, which must not be NULL.
pub(crate) unsafe fn out<T>(p: *mut T, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::bad_arg("output argument is NULL"));
    }
    // SAFETY: checked non-null; MPI requires the pointer to point to a `T`.
    unsafe { p.write(v) };
    Ok(())
}

/// The error code a finished operation's status carries (0 when it succeeded).
pub(crate) fn status_code(func: &'static str, comm: Option<CommId>, st: &Status) -> c_int {
    match st.error {
        None => abi::MPI_SUCCESS,
        Some(e) => errors::report(func, comm, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u32, gen: u32) -> Key {
        Key { index, gen }
    }

    /// What a handle decodes to: slot, and whether it names generation `gen` of it.
    fn decodes(h: c_int, gen: u32) -> (u32, bool) {
        let (index, g, mask) = slot_of(h as u32);
        (index, gen & mask == g)
    }

    #[test]
    fn request_handles_round_trip_at_every_slot_size() {
        for index in [
            0,
            1,
            0xfffe,
            0xffff,
            0x1_0000,
            100_000,
            1_000_000,
            (1 << 22) - 1,
        ] {
            for gen in [0, 1, 2, 3, 255, 256, 0xdead_beef] {
                let h = request_handle(ReqId(key(index, gen)));
                assert_eq!(abi::handle_kind(h), HandleKind::Direct);
                assert_eq!(abi::handle_object(h), Some(ObjectKind::Request));
                assert_eq!((h as u32) & MESSAGE_BIT, 0, "not a message");
                assert_eq!(decodes(h, gen), (index, true), "slot {index} gen {gen}");
                assert_ne!(h, abi::MPI_REQUEST_NULL);
            }
        }
    }

    #[test]
    fn message_handles_round_trip_and_stay_messages() {
        for index in [0, 0xffff, 0x1_0000, 999_999, (1 << 22) - 1] {
            let h = message_handle(Some(MsgId(key(index, 7))));
            assert_ne!((h as u32) & MESSAGE_BIT, 0);
            assert_eq!(abi::handle_kind(h), HandleKind::Direct);
            assert_eq!(decodes(h, 7), (index, true));
            assert_ne!(h, abi::MPI_MESSAGE_NO_PROC);
            assert_ne!(h, abi::MPI_MESSAGE_NULL);
        }
    }

    #[test]
    fn a_reused_slot_s_old_handle_is_stale() {
        // The next occupant of a slot has the next generation: the old handle no longer names it.
        for index in [5, 70_000, 3_000_000] {
            let old = request_handle(ReqId(key(index, 41)));
            assert_eq!(decodes(old, 42), (index, false));
            assert_eq!(decodes(old, 43), (index, false));
        }
        // The short form tells 255 reuses apart; the long form 3.
        let short = request_handle(ReqId(key(9, 0)));
        assert!((1..256).all(|g| !decodes(short, g).1));
        let long = request_handle(ReqId(key(1 << 20, 0)));
        assert!((1..4).all(|g| !decodes(long, g).1));
    }
}
