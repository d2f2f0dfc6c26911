//! stormpi's Fortran binding: `mpif.h`, the `mpi` module and the `mpi_f08` module, in MPICH's
//! Fortran ABI.
//!
//! The procedures are a layer over the C ABI, as MPICH's `libmpichfort` is over `libmpich`:
//! each Fortran procedure (`mpi_send_` and the other link names MPICH exports, see
//! [`bindings`]) converts its arguments and calls the C function (`MPI_Send`; the `pmpi_`
//! forms call `PMPI_Send`). Handles need no conversion: C handles are MPICH's `int`s, which are
//! the Fortran `INTEGER` handles (but `MPI_File`, a pointer in C: [`rt::file_in`]), and `MPI_Status` is five `int`s in the layout of the Fortran
//! `INTEGER(MPI_STATUS_SIZE)` array. What differs between the languages is converted in
//! [`rt`]: the sentinels (`MPI_BOTTOM`, `MPI_IN_PLACE`, `MPI_STATUS_IGNORE`, ... are Fortran
//! variables in MPICH's common blocks, which this crate defines, so their addresses are what
//! the library compares against), strings (blank-padded with a hidden length, no NUL),
//! `LOGICAL` values and 1-based indices. Procedures whose Fortran form differs beyond that are
//! in [`special`].
//!
//! The `mpi_f08` procedures (`bindings_f08`) are `BIND(C)`: they receive C descriptors for
//! choice buffers and strings, converted in [`f08`].
//!
//! `src/bindings.rs`, `src/bindings_f08.rs`, `include/mpif.h`, `include/mpi.f90` and
//! `include/mpi_f08.f90` are written by
//! `stormpi-fortran-gen` (`gen/main.rs`) from `core/include/mpi.h`; the tests check that they
//! are current.
#![cfg_attr(not(test), no_std)]

// Generated: formatted as the generator writes it.
#[doc(hidden)]
#[rustfmt::skip]
pub mod bindings;
#[doc(hidden)]
#[rustfmt::skip]
pub mod bindings_f08;
pub mod f08;
pub mod rt;
pub mod special;
