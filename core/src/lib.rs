//! stormpi-core: the whole MPI engine, `no_std` and allocation-free after init.
//!
//! Layers, bottom up (after Open MPI): [`btl`] byte movers, [`bml`] per-peer BTL selection,
//! [`pml`] MPI point-to-point semantics (matching, ordering, eager and rendezvous protocols),
//! [`comm`] communicators, [`coll`] collectives, [`engine`] tying them together with the progress
//! loop, and [`api`] — the Rust API. A platform shim supplies memory, clock, runtime and its BTL
//! modules through [`platform`] and [`rte`].
#![no_std]
#![warn(missing_docs)]

pub mod api;
pub mod arch;
pub mod arena;
pub mod array;
pub mod attr;
pub mod bml;
pub mod btl;
#[cfg(feature = "capi")]
pub mod capi;
pub mod coll;
pub mod comm;
pub mod datatype;
pub mod dpm;
pub mod engine;
pub mod errhandler;
pub mod error;
pub mod group;
pub mod info;
pub mod io;
pub mod list;
pub mod memory;
pub mod mtl;
pub mod objects;
pub mod op;
pub mod osc;
pub mod p2p;
pub mod params;
pub mod part;
pub mod platform;
pub mod pml;
pub mod pool;
pub mod ranges;
pub mod rte;
pub mod shared;
pub mod topo;
pub mod wire;

pub use error::{Error, ErrorClass, Result};
