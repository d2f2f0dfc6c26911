//! Every MPI function stormpi does not implement yet: it reports `MPI_ERR_UNSUPPORTED_OPERATION`
//! naming itself (through `MPI_COMM_WORLD`'s error handler; MPI-IO functions return the code, as
//! their error handling is by return value).
//!
//! The stubs take no arguments: on the C calling conventions stormpi targets the caller owns
//! the arguments, so a callee that ignores them is called correctly whatever was passed. A
//! function leaves this list when it is implemented (two definitions of a symbol do not link).

macro_rules! unsupported {
    ($($name:ident / $pname:ident),* $(,)?) => {$(
        #[doc = concat!("`", stringify!($name), "`: not supported yet.")]
        #[no_mangle]
        pub extern "C" fn $pname() -> core::ffi::c_int {
            super::errors::unsupported(stringify!($name))
        }
        #[doc = concat!("`", stringify!($name), "`: not supported yet.")]
        #[no_mangle]
        pub extern "C" fn $name() -> core::ffi::c_int {
            $pname()
        }
    )*};
}

unsupported! {}
