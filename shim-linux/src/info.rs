//! What this build of the library contains, for `stormpi-info`: its version, its ABI, its
//! components and how each is chosen.

use stormpi_core::capi::abi;

/// One component of the build.
pub struct Component {
    /// Framework (Open MPI's word: the kind of part), e.g. `btl`.
    pub framework: &'static str,
    /// Component name, e.g. `sm`.
    pub name: &'static str,
    /// Its priority among the framework's components, where one applies (BTLs: exclusivity).
    pub priority: Option<u32>,
    /// What it does and when it is used.
    pub about: &'static str,
}

/// The components of the Linux library.
pub const COMPONENTS: &[Component] = &[
    Component {
        framework: "pml",
        name: "ob1",
        priority: None,
        about: "point-to-point over the BTLs: eager, rendezvous, per-peer ordering",
    },
    Component {
        framework: "bml",
        name: "r2",
        priority: None,
        about: "per-peer BTL routes: those of highest exclusivity; large messages striped by \
                bandwidth (bml_stripe)",
    },
    Component {
        framework: "btl",
        name: "self",
        priority: Some(u32::MAX),
        about: "messages to the process itself",
    },
    Component {
        framework: "btl",
        name: "sm",
        priority: Some(crate::sm::EXCLUSIVITY),
        about: "node-local peers through lock-free rings in shared memory",
    },
    Component {
        framework: "btl",
        name: "tcp",
        priority: Some(crate::tcp::EXCLUSIVITY),
        about: "peers on other nodes, one module per interface, authenticated connections",
    },
    Component {
        framework: "btl",
        name: "verbs",
        priority: Some(stormpi_verbs::EXCLUSIVITY),
        about: "InfiniBand/RoCE through libibverbs loaded at run time (btl_verbs_library): RC queue pairs, shared receive queue with credits, RDMA read",
    },
    Component {
        framework: "coll",
        name: "tuned",
        priority: None,
        about: "flat algorithms over point-to-point, chosen by size (coll_<name>_algorithm)",
    },
    Component {
        framework: "coll",
        name: "hier",
        priority: None,
        about: "node-aware collectives on communicators spanning nodes (coll_hier)",
    },
    Component {
        framework: "coll",
        name: "sm",
        priority: None,
        about: "small collectives through shared-memory slots within a node (coll_sm)",
    },
];

/// `major.minor` of the MPI standard the library reports (`MPI_Get_version`).
pub fn mpi_version() -> (i32, i32) {
    (abi::MPI_VERSION, abi::MPI_SUBVERSION)
}
