//! Raw FFI for the Portals 4 network programming interface, as the Portals 4.1 specification
//! (Sandia National Laboratories) defines it: handles, process ids, memory descriptors, list and
//! match list entries, portal table entries with priority and overflow lists, event queues,
//! counting events, puts, gets, atomics, triggered operations.
//!
//! Names and layouts are the C ones (`ptl_me_t`, `PTL_ME_USE_ONCE`, `PtlMEAppend`), so code reads
//! like the specification and Portals programs in C. The one rename: the event's `type` field is
//! `type_`.
//!
//! # Which library
//!
//! - By default (feature `shmem`) the functions resolve to `portals4-shmem`, a software network
//!   interface over shared memory that exports the same symbols, so Portals code runs and is
//!   tested on any Linux machine.
//! - With feature `vendor`, or when `STORMPI_PORTALS_LIB` is set at build time, they resolve to
//!   the vendor's `libportals` (see `build.rs`); the software NI is then not linked.
//!
//! The crate is `no_std`: the core engine can call Portals through it.
//!
//! # Safety
//!
//! Every function is `unsafe`: pointers must be valid as the specification says, and memory
//! bound to an MD or an ME must stay valid until Portals reports it is done with it (the send,
//! reply, put or unlink event the specification names).

#![no_std]
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]

#[cfg(all(feature = "shmem", not(portals_vendor)))]
use portals4_shmem as _;

mod types;
pub use types::*;

use core::ffi::{c_int, c_uint, c_void};

extern "C" {
    pub fn PtlInit() -> c_int;
    pub fn PtlFini();

    pub fn PtlNIInit(
        iface: ptl_interface_t,
        options: c_uint,
        pid: ptl_pid_t,
        desired: *const ptl_ni_limits_t,
        actual: *mut ptl_ni_limits_t,
        ni_handle: *mut ptl_handle_ni_t,
    ) -> c_int;
    pub fn PtlNIFini(ni_handle: ptl_handle_ni_t) -> c_int;
    pub fn PtlNIStatus(
        ni_handle: ptl_handle_ni_t,
        status_register: ptl_sr_index_t,
        status: *mut ptl_sr_value_t,
    ) -> c_int;
    pub fn PtlNIHandle(handle: ptl_handle_any_t, ni_handle: *mut ptl_handle_ni_t) -> c_int;
    pub fn PtlSetMap(
        ni_handle: ptl_handle_ni_t,
        map_size: ptl_size_t,
        mapping: *const ptl_process_t,
    ) -> c_int;
    pub fn PtlGetMap(
        ni_handle: ptl_handle_ni_t,
        map_size: ptl_size_t,
        mapping: *mut ptl_process_t,
        actual_map_size: *mut ptl_size_t,
    ) -> c_int;

    pub fn PtlPTAlloc(
        ni_handle: ptl_handle_ni_t,
        options: c_uint,
        eq_handle: ptl_handle_eq_t,
        pt_index_req: ptl_pt_index_t,
        pt_index: *mut ptl_pt_index_t,
    ) -> c_int;
    pub fn PtlPTFree(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int;
    pub fn PtlPTDisable(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int;
    pub fn PtlPTEnable(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int;

    pub fn PtlGetUid(ni_handle: ptl_handle_ni_t, uid: *mut ptl_uid_t) -> c_int;
    pub fn PtlGetId(ni_handle: ptl_handle_ni_t, id: *mut ptl_process_t) -> c_int;
    pub fn PtlGetPhysId(ni_handle: ptl_handle_ni_t, id: *mut ptl_process_t) -> c_int;

    pub fn PtlMDBind(
        ni_handle: ptl_handle_ni_t,
        md: *const ptl_md_t,
        md_handle: *mut ptl_handle_md_t,
    ) -> c_int;
    pub fn PtlMDRelease(md_handle: ptl_handle_md_t) -> c_int;

    pub fn PtlLEAppend(
        ni_handle: ptl_handle_ni_t,
        pt_index: ptl_pt_index_t,
        le: *const ptl_le_t,
        ptl_list: ptl_list_t,
        user_ptr: *mut c_void,
        le_handle: *mut ptl_handle_le_t,
    ) -> c_int;
    pub fn PtlLEUnlink(le_handle: ptl_handle_le_t) -> c_int;
    pub fn PtlLESearch(
        ni_handle: ptl_handle_ni_t,
        pt_index: ptl_pt_index_t,
        le: *const ptl_le_t,
        ptl_search_op: ptl_search_op_t,
        user_ptr: *mut c_void,
    ) -> c_int;

    pub fn PtlMEAppend(
        ni_handle: ptl_handle_ni_t,
        pt_index: ptl_pt_index_t,
        me: *const ptl_me_t,
        ptl_list: ptl_list_t,
        user_ptr: *mut c_void,
        me_handle: *mut ptl_handle_me_t,
    ) -> c_int;
    pub fn PtlMEUnlink(me_handle: ptl_handle_me_t) -> c_int;
    pub fn PtlMESearch(
        ni_handle: ptl_handle_ni_t,
        pt_index: ptl_pt_index_t,
        me: *const ptl_me_t,
        ptl_search_op: ptl_search_op_t,
        user_ptr: *mut c_void,
    ) -> c_int;

    pub fn PtlCTAlloc(ni_handle: ptl_handle_ni_t, ct_handle: *mut ptl_handle_ct_t) -> c_int;
    pub fn PtlCTFree(ct_handle: ptl_handle_ct_t) -> c_int;
    pub fn PtlCTCancelTriggered(ct_handle: ptl_handle_ct_t) -> c_int;
    pub fn PtlCTGet(ct_handle: ptl_handle_ct_t, event: *mut ptl_ct_event_t) -> c_int;
    pub fn PtlCTWait(
        ct_handle: ptl_handle_ct_t,
        test: ptl_size_t,
        event: *mut ptl_ct_event_t,
    ) -> c_int;
    pub fn PtlCTPoll(
        ct_handles: *const ptl_handle_ct_t,
        tests: *const ptl_size_t,
        size: c_uint,
        timeout: ptl_time_t,
        event: *mut ptl_ct_event_t,
        which: *mut c_uint,
    ) -> c_int;
    pub fn PtlCTSet(ct_handle: ptl_handle_ct_t, new_ct: ptl_ct_event_t) -> c_int;
    pub fn PtlCTInc(ct_handle: ptl_handle_ct_t, increment: ptl_ct_event_t) -> c_int;

    pub fn PtlPut(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        ack_req: ptl_ack_req_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
    ) -> c_int;
    pub fn PtlGet(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
    ) -> c_int;
    pub fn PtlAtomic(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        ack_req: ptl_ack_req_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
        operation: ptl_op_t,
        datatype: ptl_datatype_t,
    ) -> c_int;
    pub fn PtlFetchAtomic(
        get_md_handle: ptl_handle_md_t,
        local_get_offset: ptl_size_t,
        put_md_handle: ptl_handle_md_t,
        local_put_offset: ptl_size_t,
        length: ptl_size_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
        operation: ptl_op_t,
        datatype: ptl_datatype_t,
    ) -> c_int;
    pub fn PtlSwap(
        get_md_handle: ptl_handle_md_t,
        local_get_offset: ptl_size_t,
        put_md_handle: ptl_handle_md_t,
        local_put_offset: ptl_size_t,
        length: ptl_size_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
        operand: *const c_void,
        operation: ptl_op_t,
        datatype: ptl_datatype_t,
    ) -> c_int;
    pub fn PtlAtomicSync() -> c_int;

    pub fn PtlEQAlloc(
        ni_handle: ptl_handle_ni_t,
        count: ptl_size_t,
        eq_handle: *mut ptl_handle_eq_t,
    ) -> c_int;
    pub fn PtlEQFree(eq_handle: ptl_handle_eq_t) -> c_int;
    pub fn PtlEQGet(eq_handle: ptl_handle_eq_t, event: *mut ptl_event_t) -> c_int;
    pub fn PtlEQWait(eq_handle: ptl_handle_eq_t, event: *mut ptl_event_t) -> c_int;
    pub fn PtlEQPoll(
        eq_handles: *const ptl_handle_eq_t,
        size: c_uint,
        timeout: ptl_time_t,
        event: *mut ptl_event_t,
        which: *mut c_uint,
    ) -> c_int;

    pub fn PtlTriggeredPut(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        ack_req: ptl_ack_req_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
        trig_ct_handle: ptl_handle_ct_t,
        threshold: ptl_size_t,
    ) -> c_int;
    pub fn PtlTriggeredGet(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        trig_ct_handle: ptl_handle_ct_t,
        threshold: ptl_size_t,
    ) -> c_int;
    pub fn PtlTriggeredAtomic(
        md_handle: ptl_handle_md_t,
        local_offset: ptl_size_t,
        length: ptl_size_t,
        ack_req: ptl_ack_req_t,
        target_id: ptl_process_t,
        pt_index: ptl_pt_index_t,
        match_bits: ptl_match_bits_t,
        remote_offset: ptl_size_t,
        user_ptr: *mut c_void,
        hdr_data: ptl_hdr_data_t,
        operation: ptl_op_t,
        datatype: ptl_datatype_t,
        trig_ct_handle: ptl_handle_ct_t,
        threshold: ptl_size_t,
    ) -> c_int;
    pub fn PtlTriggeredCTInc(
        ct_handle: ptl_handle_ct_t,
        increment: ptl_ct_event_t,
        trig_ct_handle: ptl_handle_ct_t,
        threshold: ptl_size_t,
    ) -> c_int;
    pub fn PtlTriggeredCTSet(
        ct_handle: ptl_handle_ct_t,
        new_ct: ptl_ct_event_t,
        trig_ct_handle: ptl_handle_ct_t,
        threshold: ptl_size_t,
    ) -> c_int;

    pub fn PtlStartBundle(ni_handle: ptl_handle_ni_t) -> c_int;
    pub fn PtlEndBundle(ni_handle: ptl_handle_ni_t) -> c_int;

    /// Non-zero when both handles name the same object.
    pub fn PtlHandleIsEqual(handle1: ptl_handle_any_t, handle2: ptl_handle_any_t) -> c_int;
}

/// The name of a return code (`"PTL_EQ_EMPTY"`), for messages.
pub fn ptl_rc_name(rc: c_int) -> &'static str {
    const NAMES: [&str; 16] = [
        "PTL_OK",
        "PTL_ARG_INVALID",
        "PTL_CT_NONE_REACHED",
        "PTL_EQ_DROPPED",
        "PTL_EQ_EMPTY",
        "PTL_FAIL",
        "PTL_IGNORED",
        "PTL_IN_USE",
        "PTL_INTERRUPTED",
        "PTL_LIST_TOO_LONG",
        "PTL_NO_INIT",
        "PTL_NO_SPACE",
        "PTL_PID_IN_USE",
        "PTL_PT_FULL",
        "PTL_PT_EQ_NEEDED",
        "PTL_PT_IN_USE",
    ];
    usize::try_from(rc)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("(unknown Portals return code)")
}

/// The name of an event kind (`"PTL_EVENT_PUT_OVERFLOW"`).
pub fn ptl_event_name(kind: ptl_event_kind_t) -> &'static str {
    const NAMES: [&str; 16] = [
        "PTL_EVENT_GET",
        "PTL_EVENT_GET_OVERFLOW",
        "PTL_EVENT_PUT",
        "PTL_EVENT_PUT_OVERFLOW",
        "PTL_EVENT_ATOMIC",
        "PTL_EVENT_ATOMIC_OVERFLOW",
        "PTL_EVENT_FETCH_ATOMIC",
        "PTL_EVENT_FETCH_ATOMIC_OVERFLOW",
        "PTL_EVENT_REPLY",
        "PTL_EVENT_SEND",
        "PTL_EVENT_ACK",
        "PTL_EVENT_PT_DISABLED",
        "PTL_EVENT_LINK",
        "PTL_EVENT_AUTO_UNLINK",
        "PTL_EVENT_AUTO_FREE",
        "PTL_EVENT_SEARCH",
    ];
    NAMES
        .get(kind as usize)
        .copied()
        .unwrap_or("(unknown event kind)")
}

/// The name of a failure kind (`"PTL_NI_PT_DISABLED"`).
pub fn ptl_ni_fail_name(fail: ptl_ni_fail_t) -> &'static str {
    const NAMES: [&str; 8] = [
        "PTL_NI_OK",
        "PTL_NI_UNDELIVERABLE",
        "PTL_NI_DROPPED",
        "PTL_NI_PT_DISABLED",
        "PTL_NI_PERM_VIOLATION",
        "PTL_NI_OP_VIOLATION",
        "PTL_NI_NO_MATCH",
        "PTL_NI_SEGV",
    ];
    NAMES
        .get(fail as usize)
        .copied()
        .unwrap_or("(unknown failure kind)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwk_sys_names() {
        assert_eq!(ptl_rc_name(PTL_EQ_EMPTY), "PTL_EQ_EMPTY");
        assert_eq!(ptl_rc_name(-1), "(unknown Portals return code)");
        assert_eq!(
            ptl_event_name(PTL_EVENT_PUT_OVERFLOW),
            "PTL_EVENT_PUT_OVERFLOW"
        );
        assert_eq!(ptl_event_name(PTL_EVENT_SEARCH), "PTL_EVENT_SEARCH");
        assert_eq!(ptl_ni_fail_name(PTL_NI_PT_DISABLED), "PTL_NI_PT_DISABLED");
    }

    #[test]
    fn lwk_sys_process_views() {
        let p = ptl_process_t::from_phys(3, 9);
        assert_eq!(p.phys(), ptl_process_phys_t { nid: 3, pid: 9 });
        assert_eq!(p.rank(), 3);
        assert_eq!(ptl_process_t::from_rank(7).rank(), 7);
    }

    #[test]
    fn lwk_sys_option_bits_are_distinct() {
        let me = [
            PTL_IOVEC,
            PTL_ME_OP_PUT,
            PTL_ME_OP_GET,
            PTL_ME_USE_ONCE,
            PTL_ME_ACK_DISABLE,
            PTL_ME_UNEXPECTED_HDR_DISABLE,
            PTL_ME_IS_ACCESSIBLE,
            PTL_ME_EVENT_LINK_DISABLE,
            PTL_ME_EVENT_COMM_DISABLE,
            PTL_ME_EVENT_FLOWCTRL_DISABLE,
            PTL_ME_EVENT_SUCCESS_DISABLE,
            PTL_ME_EVENT_OVER_DISABLE,
            PTL_ME_EVENT_UNLINK_DISABLE,
            PTL_ME_EVENT_CT_COMM,
            PTL_ME_EVENT_CT_OVERFLOW,
            PTL_ME_EVENT_CT_BYTES,
            PTL_ME_MANAGE_LOCAL,
            PTL_ME_NO_TRUNCATE,
            PTL_ME_MAY_ALIGN,
        ];
        let all = me.iter().fold(0, |acc, b| {
            assert_eq!(acc & b, 0);
            acc | b
        });
        assert_eq!(all, PTL_ME_APPEND_OPTIONS_MASK);
        assert_eq!(PTL_LE_APPEND_OPTIONS_MASK & PTL_ME_MANAGE_LOCAL, 0);
    }

    /// The default build resolves the functions to the software NI: a job of one puts to itself.
    #[cfg(all(feature = "shmem", not(portals_vendor)))]
    #[test]
    fn lwk_sys_links_software_ni_loopback() {
        use core::ptr::{null, null_mut};
        unsafe {
            assert_eq!(PtlInit(), PTL_OK);
            let mut ni = 0;
            let opts = PTL_NI_MATCHING | PTL_NI_LOGICAL;
            assert_eq!(
                PtlNIInit(
                    PTL_IFACE_DEFAULT,
                    opts,
                    PTL_PID_ANY,
                    null(),
                    null_mut(),
                    &mut ni
                ),
                PTL_OK
            );
            let mut me_id = ptl_process_t::default();
            assert_eq!(PtlGetId(ni, &mut me_id), PTL_OK);
            let mut eq = 0;
            assert_eq!(PtlEQAlloc(ni, 16, &mut eq), PTL_OK);
            let mut pt = 0;
            assert_eq!(PtlPTAlloc(ni, 0, eq, PTL_PT_ANY, &mut pt), PTL_OK);
            let mut dst = [0u8; 8];
            let me = ptl_me_t {
                start: dst.as_mut_ptr().cast(),
                length: 8,
                ct_handle: PTL_CT_NONE,
                uid: PTL_UID_ANY,
                options: PTL_ME_OP_PUT | PTL_ME_USE_ONCE | PTL_ME_EVENT_LINK_DISABLE,
                match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
                match_bits: 42,
                ignore_bits: 0,
                min_free: 0,
            };
            let mut meh = 0;
            assert_eq!(
                PtlMEAppend(ni, pt, &me, PTL_PRIORITY_LIST, null_mut(), &mut meh),
                PTL_OK
            );
            let src = *b"portals4";
            let md = ptl_md_t {
                start: src.as_ptr() as *mut c_void,
                length: 8,
                options: PTL_MD_EVENT_SUCCESS_DISABLE,
                eq_handle: PTL_EQ_NONE,
                ct_handle: PTL_CT_NONE,
            };
            let mut mdh = 0;
            assert_eq!(PtlMDBind(ni, &md, &mut mdh), PTL_OK);
            let rc = PtlPut(mdh, 0, 8, PTL_NO_ACK_REQ, me_id, pt, 42, 0, null_mut(), 7);
            assert_eq!(rc, PTL_OK);
            let mut ev = ptl_event_t::default();
            assert_eq!(PtlEQWait(eq, &mut ev), PTL_OK);
            assert_eq!((ev.type_, ev.mlength, ev.hdr_data), (PTL_EVENT_PUT, 8, 7));
            assert_eq!(&dst, b"portals4");
            assert_eq!(PtlMDRelease(mdh), PTL_OK);
            assert_ne!(PtlHandleIsEqual(mdh, mdh), 0);
            assert_eq!(PtlNIFini(ni), PTL_OK);
            PtlFini();
        }
    }
}
