//! stormpi-bootstrap: the `stormrun` launcher, its PMI server, the PMI
//! client the MPI library uses to start up inside a job, and the `stormcc`
//! compiler wrapper.
//!
//! The contract between a launcher and the ranks it starts (environment,
//! shared-memory file names) is described in [`launch`].

#![warn(missing_docs)]

pub mod auth;
pub mod cc;
pub mod launch;
pub mod pmi;
mod sys;
