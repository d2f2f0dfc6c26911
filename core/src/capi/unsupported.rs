//! Every MPI function stormpi does not implement yet: it reports `MPI_ERR_UNSUPPORTED_OPERATION`
//! naming itself (through `MPI_COMM_WORLD`'s error handler; MPI-IO and tool-interface functions
//! return the code, as their error handling is by return value).
//!
//! The stubs take no arguments: on the C calling conventions stormpi targets the caller owns
//! the arguments, so a callee that ignores them is called correctly whatever was passed. A
//! function leaves this list when it is implemented (two definitions of a symbol do not link).

use core::ffi::c_int;

macro_rules! unsupported {
    ($($name:ident / $pname:ident),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "`: not supported yet.")]
        #[no_mangle]
        pub extern "C" fn $pname() -> c_int {
            super::errors::unsupported(stringify!($name))
        }
        #[doc = concat!("`", stringify!($name), "`: not supported yet.")]
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            $pname()
        }
    )*};
}

unsupported! {
    MPI_Close_port / PMPI_Close_port,
    MPI_Comm_accept / PMPI_Comm_accept,
    MPI_Comm_connect / PMPI_Comm_connect,
    MPI_Comm_create_from_group / PMPI_Comm_create_from_group,
    MPI_Comm_disconnect / PMPI_Comm_disconnect,
    MPI_Comm_join / PMPI_Comm_join,
    MPI_Comm_spawn / PMPI_Comm_spawn,
    MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple,
    MPI_Group_from_session_pset / PMPI_Group_from_session_pset,
    MPI_Lookup_name / PMPI_Lookup_name,
    MPI_Open_port / PMPI_Open_port,
    MPI_Parrived / PMPI_Parrived,
    MPI_Pready / PMPI_Pready,
    MPI_Pready_list / PMPI_Pready_list,
    MPI_Pready_range / PMPI_Pready_range,
    MPI_Precv_init / PMPI_Precv_init,
    MPI_Psend_init / PMPI_Psend_init,
    MPI_Publish_name / PMPI_Publish_name,
    MPI_Register_datarep / PMPI_Register_datarep,
    MPI_Register_datarep_c / PMPI_Register_datarep_c,
    MPI_Session_call_errhandler / PMPI_Session_call_errhandler,
    MPI_Session_create_errhandler / PMPI_Session_create_errhandler,
    MPI_Session_finalize / PMPI_Session_finalize,
    MPI_Session_get_errhandler / PMPI_Session_get_errhandler,
    MPI_Session_get_info / PMPI_Session_get_info,
    MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset,
    MPI_Session_get_num_psets / PMPI_Session_get_num_psets,
    MPI_Session_get_pset_info / PMPI_Session_get_pset_info,
    MPI_Session_init / PMPI_Session_init,
    MPI_Session_set_errhandler / PMPI_Session_set_errhandler,
    MPI_T_category_changed / PMPI_T_category_changed,
    MPI_T_category_get_categories / PMPI_T_category_get_categories,
    MPI_T_category_get_cvars / PMPI_T_category_get_cvars,
    MPI_T_category_get_events / PMPI_T_category_get_events,
    MPI_T_category_get_index / PMPI_T_category_get_index,
    MPI_T_category_get_info / PMPI_T_category_get_info,
    MPI_T_category_get_num / PMPI_T_category_get_num,
    MPI_T_category_get_num_events / PMPI_T_category_get_num_events,
    MPI_T_category_get_pvars / PMPI_T_category_get_pvars,
    MPI_T_cvar_get_index / PMPI_T_cvar_get_index,
    MPI_T_cvar_get_info / PMPI_T_cvar_get_info,
    MPI_T_cvar_get_num / PMPI_T_cvar_get_num,
    MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc,
    MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free,
    MPI_T_cvar_read / PMPI_T_cvar_read,
    MPI_T_cvar_write / PMPI_T_cvar_write,
    MPI_T_enum_get_info / PMPI_T_enum_get_info,
    MPI_T_enum_get_item / PMPI_T_enum_get_item,
    MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info,
    MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info,
    MPI_T_event_copy / PMPI_T_event_copy,
    MPI_T_event_get_index / PMPI_T_event_get_index,
    MPI_T_event_get_info / PMPI_T_event_get_info,
    MPI_T_event_get_num / PMPI_T_event_get_num,
    MPI_T_event_get_source / PMPI_T_event_get_source,
    MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp,
    MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc,
    MPI_T_event_handle_free / PMPI_T_event_handle_free,
    MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info,
    MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info,
    MPI_T_event_read / PMPI_T_event_read,
    MPI_T_event_register_callback / PMPI_T_event_register_callback,
    MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler,
    MPI_T_finalize / PMPI_T_finalize,
    MPI_T_init_thread / PMPI_T_init_thread,
    MPI_T_pvar_get_index / PMPI_T_pvar_get_index,
    MPI_T_pvar_get_info / PMPI_T_pvar_get_info,
    MPI_T_pvar_get_num / PMPI_T_pvar_get_num,
    MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc,
    MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free,
    MPI_T_pvar_read / PMPI_T_pvar_read,
    MPI_T_pvar_readreset / PMPI_T_pvar_readreset,
    MPI_T_pvar_reset / PMPI_T_pvar_reset,
    MPI_T_pvar_session_create / PMPI_T_pvar_session_create,
    MPI_T_pvar_session_free / PMPI_T_pvar_session_free,
    MPI_T_pvar_start / PMPI_T_pvar_start,
    MPI_T_pvar_stop / PMPI_T_pvar_stop,
    MPI_T_pvar_write / PMPI_T_pvar_write,
    MPI_T_source_get_info / PMPI_T_source_get_info,
    MPI_T_source_get_num / PMPI_T_source_get_num,
    MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp,
    MPI_Unpublish_name / PMPI_Unpublish_name,
    MPI_Win_allocate_shared / PMPI_Win_allocate_shared,
    MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c,
    MPI_Win_shared_query / PMPI_Win_shared_query,
    MPI_Win_shared_query_c / PMPI_Win_shared_query_c,
}
