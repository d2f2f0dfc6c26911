// Portals 4 types and constants, as the Portals 4.1 specification defines them. Numeric values
// and widths that the specification leaves to the implementation follow the Sandia reference
// implementation's header, which vendor libraries (and Open MPI's portals4 MTL) are built
// against, so a program compiled with these declarations links against such a libportals.
//
// This file is shared: `portals4-shmem` includes it with `#[path]`, so the software NI and the
// FFI declarations cannot disagree on a layout.

#![allow(non_camel_case_types)]

use core::ffi::{c_int, c_uint, c_void};

/// Sizes and lengths (bytes).
pub type ptl_size_t = u64;
/// Index of a portal table entry.
pub type ptl_pt_index_t = u32;
/// Match bits (and ignore bits) of a message and a match list entry.
pub type ptl_match_bits_t = u64;
/// Out-of-band data carried in a message header.
pub type ptl_hdr_data_t = u64;
/// Timeouts, in milliseconds.
pub type ptl_time_t = c_uint;
/// A network interface of the node.
pub type ptl_interface_t = c_uint;
/// Node id (physical addressing).
pub type ptl_nid_t = u32;
/// Process id on a node (physical addressing).
pub type ptl_pid_t = u32;
/// Rank (logical addressing).
pub type ptl_rank_t = u32;
/// User id.
pub type ptl_uid_t = u32;
/// Index of a status register (`PTL_SR_*`).
pub type ptl_sr_index_t = c_int;
/// Value of a status register.
pub type ptl_sr_value_t = c_int;
/// Failure kind reported in an event (`PTL_NI_*`).
pub type ptl_ni_fail_t = u8;
/// Which list of a portal table entry (`PTL_PRIORITY_LIST`, `PTL_OVERFLOW_LIST`).
pub type ptl_list_t = u8;
/// `PTL_SEARCH_ONLY` or `PTL_SEARCH_DELETE`.
pub type ptl_search_op_t = u8;
/// Acknowledgment request of a put or atomic (`PTL_*ACK_REQ`).
pub type ptl_ack_req_t = u8;
/// Atomic operation (`PTL_MIN` ...).
pub type ptl_op_t = u8;
/// Datatype of an atomic operation (`PTL_INT8_T` ...).
pub type ptl_datatype_t = u8;
/// Kind of a full event (`PTL_EVENT_*`).
pub type ptl_event_kind_t = u8;
/// Counting type (`PTL_CT_OPERATION`, `PTL_CT_BYTE`).
pub type ptl_ct_type_t = c_int;

/// Any handle.
pub type ptl_handle_any_t = u32;
/// Network interface handle.
pub type ptl_handle_ni_t = ptl_handle_any_t;
/// Event queue handle.
pub type ptl_handle_eq_t = ptl_handle_any_t;
/// Counting event handle.
pub type ptl_handle_ct_t = ptl_handle_any_t;
/// Memory descriptor handle.
pub type ptl_handle_md_t = ptl_handle_any_t;
/// List entry handle (non-matching interfaces).
pub type ptl_handle_le_t = ptl_handle_any_t;
/// Match list entry handle (matching interfaces).
pub type ptl_handle_me_t = ptl_handle_any_t;

// ---- return codes ----
pub const PTL_OK: c_int = 0;
pub const PTL_ARG_INVALID: c_int = 1;
pub const PTL_CT_NONE_REACHED: c_int = 2;
pub const PTL_EQ_DROPPED: c_int = 3;
pub const PTL_EQ_EMPTY: c_int = 4;
pub const PTL_FAIL: c_int = 5;
pub const PTL_IGNORED: c_int = 6;
pub const PTL_IN_USE: c_int = 7;
pub const PTL_INTERRUPTED: c_int = 8;
pub const PTL_LIST_TOO_LONG: c_int = 9;
pub const PTL_NO_INIT: c_int = 10;
pub const PTL_NO_SPACE: c_int = 11;
pub const PTL_PID_IN_USE: c_int = 12;
pub const PTL_PT_FULL: c_int = 13;
pub const PTL_PT_EQ_NEEDED: c_int = 14;
pub const PTL_PT_IN_USE: c_int = 15;
pub const PTL_STATUS_LAST: c_int = 16;

// ---- status registers ----
pub const PTL_SR_DROP_COUNT: ptl_sr_index_t = 0;
pub const PTL_SR_PERMISSION_VIOLATIONS: ptl_sr_index_t = 1;
pub const PTL_SR_OPERATION_VIOLATIONS: ptl_sr_index_t = 2;
pub const PTL_SR_LAST: ptl_sr_index_t = 3;

// ---- special handles and wildcards ----
pub const PTL_EQ_NONE: ptl_handle_eq_t = 0x3fff_ffff;
pub const PTL_CT_NONE: ptl_handle_ct_t = 0x5fff_ffff;
pub const PTL_INVALID_HANDLE: ptl_handle_any_t = 0xffff_ffff;
pub const PTL_IFACE_DEFAULT: ptl_interface_t = 0xffff_ffff;
pub const PTL_PID_ANY: ptl_pid_t = 0xffff;
pub const PTL_PID_MAX: ptl_pid_t = 1024;
pub const PTL_NID_ANY: ptl_nid_t = 0xffff;
pub const PTL_UID_ANY: ptl_uid_t = 0xffff_ffff;
pub const PTL_PT_ANY: ptl_pt_index_t = 0xffff_ffff;
pub const PTL_RANK_ANY: ptl_rank_t = 0xffff_ffff;
pub const PTL_TIME_FOREVER: ptl_time_t = 0xffff_ffff;
pub const PTL_SIZE_MAX: ptl_size_t = u64::MAX;

/// Option shared by MDs, MEs and LEs: `start` points to an array of [`ptl_iovec_t`] and `length`
/// counts its elements.
pub const PTL_IOVEC: c_uint = 1;

// ---- network interface options and failure kinds ----
pub const PTL_NI_MATCHING: c_uint = 1 << 0;
pub const PTL_NI_NO_MATCHING: c_uint = 1 << 1;
pub const PTL_NI_LOGICAL: c_uint = 1 << 2;
pub const PTL_NI_PHYSICAL: c_uint = 1 << 3;
pub const PTL_NI_INIT_OPTIONS_MASK: c_uint = (1 << 4) - 1;

pub const PTL_NI_OK: ptl_ni_fail_t = 0;
pub const PTL_NI_UNDELIVERABLE: ptl_ni_fail_t = 1;
pub const PTL_NI_DROPPED: ptl_ni_fail_t = 2;
pub const PTL_NI_PT_DISABLED: ptl_ni_fail_t = 3;
pub const PTL_NI_PERM_VIOLATION: ptl_ni_fail_t = 4;
pub const PTL_NI_OP_VIOLATION: ptl_ni_fail_t = 5;
pub const PTL_NI_NO_MATCH: ptl_ni_fail_t = 6;
pub const PTL_NI_SEGV: ptl_ni_fail_t = 7;

/// `ptl_ni_limits_t::features`: entries may describe memory the process cannot access.
pub const PTL_TARGET_BIND_INACCESSIBLE: c_uint = 1 << 0;
/// `ptl_ni_limits_t::features`: total data ordering.
pub const PTL_TOTAL_DATA_ORDERING: c_uint = 1 << 1;
/// `ptl_ni_limits_t::features`: atomics coherent with the processor's.
pub const PTL_COHERENT_ATOMICS: c_uint = 1 << 2;

// ---- portal table entry options ----
pub const PTL_PT_ONLY_USE_ONCE: c_uint = 1 << 0;
pub const PTL_PT_FLOWCTRL: c_uint = 1 << 1;
pub const PTL_PT_ONLY_TRUNCATE: c_uint = 1 << 2;
pub const PTL_PT_MATCH_UNORDERED: c_uint = 1 << 3;
pub const PTL_PT_ALLOC_OPTIONS_MASK: c_uint = (1 << 4) - 1;

// ---- memory descriptor options ----
pub const PTL_MD_EVENT_CT_SEND: c_uint = 1 << 1;
pub const PTL_MD_EVENT_CT_REPLY: c_uint = 1 << 2;
pub const PTL_MD_EVENT_CT_ACK: c_uint = 1 << 3;
pub const PTL_MD_UNORDERED: c_uint = 1 << 4;
pub const PTL_MD_EVENT_SUCCESS_DISABLE: c_uint = 1 << 5;
pub const PTL_MD_VOLATILE: c_uint = 1 << 6;
pub const PTL_MD_EVENT_SEND_DISABLE: c_uint = 1 << 7;
pub const PTL_MD_EVENT_CT_BYTES: c_uint = 1 << 15;
pub const PTL_MD_OPTIONS_MASK: c_uint = ((1 << 8) - 1) | PTL_MD_EVENT_CT_BYTES;

// ---- lists and searches ----
pub const PTL_PRIORITY_LIST: ptl_list_t = 0;
pub const PTL_OVERFLOW_LIST: ptl_list_t = 1;
pub const PTL_SEARCH_ONLY: ptl_search_op_t = 0;
pub const PTL_SEARCH_DELETE: ptl_search_op_t = 1;

// ---- match list entry options (list entries share the low sixteen bits) ----
pub const PTL_ME_OP_PUT: c_uint = 1 << 1;
pub const PTL_ME_OP_GET: c_uint = 1 << 2;
pub const PTL_ME_USE_ONCE: c_uint = 1 << 3;
pub const PTL_ME_ACK_DISABLE: c_uint = 1 << 4;
pub const PTL_ME_UNEXPECTED_HDR_DISABLE: c_uint = 1 << 5;
pub const PTL_ME_IS_ACCESSIBLE: c_uint = 1 << 6;
pub const PTL_ME_EVENT_LINK_DISABLE: c_uint = 1 << 7;
pub const PTL_ME_EVENT_COMM_DISABLE: c_uint = 1 << 8;
pub const PTL_ME_EVENT_FLOWCTRL_DISABLE: c_uint = 1 << 9;
pub const PTL_ME_EVENT_SUCCESS_DISABLE: c_uint = 1 << 10;
pub const PTL_ME_EVENT_OVER_DISABLE: c_uint = 1 << 11;
pub const PTL_ME_EVENT_UNLINK_DISABLE: c_uint = 1 << 12;
pub const PTL_ME_EVENT_CT_COMM: c_uint = 1 << 13;
pub const PTL_ME_EVENT_CT_OVERFLOW: c_uint = 1 << 14;
pub const PTL_ME_EVENT_CT_BYTES: c_uint = 1 << 15;
pub const PTL_ME_MANAGE_LOCAL: c_uint = 1 << 16;
pub const PTL_ME_NO_TRUNCATE: c_uint = 1 << 17;
pub const PTL_ME_MAY_ALIGN: c_uint = 1 << 18;
pub const PTL_ME_APPEND_OPTIONS_MASK: c_uint = (1 << 19) - 1;

pub const PTL_LE_OP_PUT: c_uint = PTL_ME_OP_PUT;
pub const PTL_LE_OP_GET: c_uint = PTL_ME_OP_GET;
pub const PTL_LE_USE_ONCE: c_uint = PTL_ME_USE_ONCE;
pub const PTL_LE_ACK_DISABLE: c_uint = PTL_ME_ACK_DISABLE;
pub const PTL_LE_UNEXPECTED_HDR_DISABLE: c_uint = PTL_ME_UNEXPECTED_HDR_DISABLE;
pub const PTL_LE_IS_ACCESSIBLE: c_uint = PTL_ME_IS_ACCESSIBLE;
pub const PTL_LE_EVENT_LINK_DISABLE: c_uint = PTL_ME_EVENT_LINK_DISABLE;
pub const PTL_LE_EVENT_COMM_DISABLE: c_uint = PTL_ME_EVENT_COMM_DISABLE;
pub const PTL_LE_EVENT_FLOWCTRL_DISABLE: c_uint = PTL_ME_EVENT_FLOWCTRL_DISABLE;
pub const PTL_LE_EVENT_SUCCESS_DISABLE: c_uint = PTL_ME_EVENT_SUCCESS_DISABLE;
pub const PTL_LE_EVENT_OVER_DISABLE: c_uint = PTL_ME_EVENT_OVER_DISABLE;
pub const PTL_LE_EVENT_UNLINK_DISABLE: c_uint = PTL_ME_EVENT_UNLINK_DISABLE;
pub const PTL_LE_EVENT_CT_COMM: c_uint = PTL_ME_EVENT_CT_COMM;
pub const PTL_LE_EVENT_CT_OVERFLOW: c_uint = PTL_ME_EVENT_CT_OVERFLOW;
pub const PTL_LE_EVENT_CT_BYTES: c_uint = PTL_ME_EVENT_CT_BYTES;
pub const PTL_LE_APPEND_OPTIONS_MASK: c_uint = (1 << 16) - 1;

// ---- counting events ----
pub const PTL_CT_OPERATION: ptl_ct_type_t = 0;
pub const PTL_CT_BYTE: ptl_ct_type_t = 1;

// ---- acknowledgment requests ----
pub const PTL_NO_ACK_REQ: ptl_ack_req_t = 0;
pub const PTL_ACK_REQ: ptl_ack_req_t = 1;
pub const PTL_CT_ACK_REQ: ptl_ack_req_t = 2;
pub const PTL_OC_ACK_REQ: ptl_ack_req_t = 3;

// ---- atomic operations ----
pub const PTL_MIN: ptl_op_t = 0;
pub const PTL_MAX: ptl_op_t = 1;
pub const PTL_SUM: ptl_op_t = 2;
pub const PTL_PROD: ptl_op_t = 3;
pub const PTL_LOR: ptl_op_t = 4;
pub const PTL_LAND: ptl_op_t = 5;
pub const PTL_BOR: ptl_op_t = 6;
pub const PTL_BAND: ptl_op_t = 7;
pub const PTL_LXOR: ptl_op_t = 8;
pub const PTL_BXOR: ptl_op_t = 9;
pub const PTL_SWAP: ptl_op_t = 10;
pub const PTL_CSWAP: ptl_op_t = 11;
pub const PTL_CSWAP_NE: ptl_op_t = 12;
pub const PTL_CSWAP_LE: ptl_op_t = 13;
pub const PTL_CSWAP_LT: ptl_op_t = 14;
pub const PTL_CSWAP_GE: ptl_op_t = 15;
pub const PTL_CSWAP_GT: ptl_op_t = 16;
pub const PTL_MSWAP: ptl_op_t = 17;
pub const PTL_OP_LAST: ptl_op_t = 18;

// ---- atomic datatypes ----
pub const PTL_INT8_T: ptl_datatype_t = 0;
pub const PTL_UINT8_T: ptl_datatype_t = 1;
pub const PTL_INT16_T: ptl_datatype_t = 2;
pub const PTL_UINT16_T: ptl_datatype_t = 3;
pub const PTL_INT32_T: ptl_datatype_t = 4;
pub const PTL_UINT32_T: ptl_datatype_t = 5;
pub const PTL_FLOAT: ptl_datatype_t = 6;
pub const PTL_INT64_T: ptl_datatype_t = 7;
pub const PTL_UINT64_T: ptl_datatype_t = 8;
pub const PTL_DOUBLE: ptl_datatype_t = 9;
pub const PTL_FLOAT_COMPLEX: ptl_datatype_t = 10;
pub const PTL_DOUBLE_COMPLEX: ptl_datatype_t = 11;
pub const PTL_LONG_DOUBLE: ptl_datatype_t = 12;
pub const PTL_LONG_DOUBLE_COMPLEX: ptl_datatype_t = 13;
pub const PTL_DATATYPE_LAST: ptl_datatype_t = 14;

// ---- full event kinds ----
pub const PTL_EVENT_GET: ptl_event_kind_t = 0;
pub const PTL_EVENT_GET_OVERFLOW: ptl_event_kind_t = 1;
pub const PTL_EVENT_PUT: ptl_event_kind_t = 2;
pub const PTL_EVENT_PUT_OVERFLOW: ptl_event_kind_t = 3;
pub const PTL_EVENT_ATOMIC: ptl_event_kind_t = 4;
pub const PTL_EVENT_ATOMIC_OVERFLOW: ptl_event_kind_t = 5;
pub const PTL_EVENT_FETCH_ATOMIC: ptl_event_kind_t = 6;
pub const PTL_EVENT_FETCH_ATOMIC_OVERFLOW: ptl_event_kind_t = 7;
pub const PTL_EVENT_REPLY: ptl_event_kind_t = 8;
pub const PTL_EVENT_SEND: ptl_event_kind_t = 9;
pub const PTL_EVENT_ACK: ptl_event_kind_t = 10;
pub const PTL_EVENT_PT_DISABLED: ptl_event_kind_t = 11;
pub const PTL_EVENT_LINK: ptl_event_kind_t = 12;
pub const PTL_EVENT_AUTO_UNLINK: ptl_event_kind_t = 13;
pub const PTL_EVENT_AUTO_FREE: ptl_event_kind_t = 14;
pub const PTL_EVENT_SEARCH: ptl_event_kind_t = 15;

/// The physical half of [`ptl_process_t`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ptl_process_phys_t {
    pub nid: ptl_nid_t,
    pub pid: ptl_pid_t,
}

/// A process: a rank on a logical interface, a (nid, pid) pair on a physical one.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ptl_process_t {
    pub rank: ptl_rank_t,
    pub phys: ptl_process_phys_t,
}

impl ptl_process_t {
    /// The process of logical rank `rank` (the other half zeroed).
    pub const fn from_rank(rank: ptl_rank_t) -> Self {
        ptl_process_t {
            phys: ptl_process_phys_t { nid: rank, pid: 0 },
        }
    }

    /// The process at `nid`, `pid`.
    pub const fn from_phys(nid: ptl_nid_t, pid: ptl_pid_t) -> Self {
        ptl_process_t {
            phys: ptl_process_phys_t { nid, pid },
        }
    }

    /// The rank view (the first word).
    pub fn rank(&self) -> ptl_rank_t {
        // SAFETY: both views are plain integers; the first word is initialised in every
        // constructor.
        unsafe { self.rank }
    }

    /// The physical view.
    pub fn phys(&self) -> ptl_process_phys_t {
        // SAFETY: plain integers; constructors initialise both words.
        unsafe { self.phys }
    }
}

impl Default for ptl_process_t {
    fn default() -> Self {
        ptl_process_t::from_phys(0, 0)
    }
}

impl core::fmt::Debug for ptl_process_t {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let p = self.phys();
        write!(f, "ptl_process_t {{ rank/nid: {}, pid: {} }}", p.nid, p.pid)
    }
}

/// Limits of a network interface (asked for and granted by `PtlNIInit`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ptl_ni_limits_t {
    pub max_entries: c_int,
    pub max_unexpected_headers: c_int,
    pub max_mds: c_int,
    pub max_cts: c_int,
    pub max_eqs: c_int,
    pub max_pt_index: c_int,
    pub max_iovecs: c_int,
    pub max_list_size: c_int,
    pub max_triggered_ops: c_int,
    pub max_msg_size: ptl_size_t,
    pub max_atomic_size: ptl_size_t,
    pub max_fetch_atomic_size: ptl_size_t,
    pub max_waw_ordered_size: ptl_size_t,
    pub max_war_ordered_size: ptl_size_t,
    pub max_volatile_size: ptl_size_t,
    pub features: c_uint,
}

/// A memory descriptor (initiator side memory).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ptl_md_t {
    pub start: *mut c_void,
    pub length: ptl_size_t,
    pub options: c_uint,
    pub eq_handle: ptl_handle_eq_t,
    pub ct_handle: ptl_handle_ct_t,
}

/// One element of a scatter/gather list (`PTL_IOVEC`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ptl_iovec_t {
    pub iov_base: *mut c_void,
    pub iov_len: ptl_size_t,
}

/// A list entry (non-matching interfaces).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ptl_le_t {
    pub start: *mut c_void,
    pub length: ptl_size_t,
    pub ct_handle: ptl_handle_ct_t,
    pub uid: ptl_uid_t,
    pub options: c_uint,
}

/// A match list entry (matching interfaces).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ptl_me_t {
    pub start: *mut c_void,
    pub length: ptl_size_t,
    pub ct_handle: ptl_handle_ct_t,
    pub uid: ptl_uid_t,
    pub options: c_uint,
    pub match_id: ptl_process_t,
    pub match_bits: ptl_match_bits_t,
    pub ignore_bits: ptl_match_bits_t,
    pub min_free: ptl_size_t,
}

/// The value of a counting event.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ptl_ct_event_t {
    pub success: ptl_size_t,
    pub failure: ptl_size_t,
}

/// A full event.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ptl_event_t {
    pub start: *mut c_void,
    pub user_ptr: *mut c_void,
    pub hdr_data: ptl_hdr_data_t,
    pub match_bits: ptl_match_bits_t,
    pub rlength: ptl_size_t,
    pub mlength: ptl_size_t,
    pub remote_offset: ptl_size_t,
    pub initiator: ptl_process_t,
    pub uid: ptl_uid_t,
    pub pt_index: ptl_pt_index_t,
    pub type_: ptl_event_kind_t,
    pub ptl_list: ptl_list_t,
    pub ni_fail_type: ptl_ni_fail_t,
    pub atomic_operation: ptl_op_t,
    pub atomic_type: ptl_datatype_t,
}

macro_rules! zeroed_default {
    ($($t:ty),*) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: every field is an integer or a raw pointer; all zero bits are valid.
                unsafe { core::mem::zeroed() }
            }
        }
    )*};
}
zeroed_default!(ptl_md_t, ptl_iovec_t, ptl_le_t, ptl_me_t, ptl_event_t);

// The layouts C code compiled against the reference header sees (LP64 and ILP32).
const _: () = {
    use core::mem::{offset_of, size_of};
    const P: usize = size_of::<*mut c_void>();
    assert!(size_of::<ptl_process_t>() == 8);
    assert!(size_of::<ptl_ct_event_t>() == 16);
    assert!(
        size_of::<ptl_ni_limits_t>()
            == if core::mem::align_of::<u64>() == 8 {
                96
            } else {
                88
            }
    );
    assert!(offset_of!(ptl_me_t, options) == offset_of!(ptl_me_t, uid) + 4);
    assert!(offset_of!(ptl_me_t, match_id) == offset_of!(ptl_me_t, options) + 4);
    if P == 8 {
        assert!(size_of::<ptl_iovec_t>() == 16);
        assert!(size_of::<ptl_md_t>() == 32);
        assert!(size_of::<ptl_le_t>() == 32);
        assert!(size_of::<ptl_me_t>() == 64);
        assert!(offset_of!(ptl_me_t, match_bits) == 40);
        assert!(size_of::<ptl_event_t>() == 80);
        assert!(offset_of!(ptl_event_t, initiator) == 56);
        assert!(offset_of!(ptl_event_t, uid) == 64);
        assert!(offset_of!(ptl_event_t, pt_index) == 68);
        assert!(offset_of!(ptl_event_t, type_) == 72);
        assert!(offset_of!(ptl_event_t, ni_fail_type) == 74);
    }
};
