//! The verbs BTL's run-time parameters (`STORMPI_MCA_<name>` or `--mca <name> <value>`).

use stormpi_core::params::{Default, Kind, ParamDef};

/// `btl_verbs_library`.
pub static LIBRARY: ParamDef = ParamDef {
    name: "btl_verbs_library",
    kind: Kind::Str,
    default: Default::Str("libibverbs.so.1"),
    description: "The libibverbs the verbs BTL loads at run time: a name the dynamic linker searches for, or a path (the software device: libverbs_shmem.so)",
};

/// `btl_verbs_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_verbs_eager_limit",
    kind: Kind::Int {
        min: 64,
        max: 1 << 20,
    },
    default: Default::Int(12 << 10),
    description: "Largest eager fragment of the verbs BTL, header included",
};

/// `btl_verbs_max_send_size`.
pub static MAX_SEND_SIZE: ParamDef = ParamDef {
    name: "btl_verbs_max_send_size",
    kind: Kind::Int {
        min: 256,
        max: 1 << 22,
    },
    default: Default::Int(64 << 10),
    description: "Largest fragment of the verbs BTL, header included: the size of each receive buffer and send slot",
};

/// `btl_verbs_receive_buffers`.
pub static RECEIVE_BUFFERS: ParamDef = ParamDef {
    name: "btl_verbs_receive_buffers",
    kind: Kind::Int {
        min: 0,
        max: 1 << 20,
    },
    default: Default::Int(0),
    description: "Receive buffers of the verbs BTL's shared receive queue (0: btl_verbs_credits for every peer); at least btl_verbs_credits per peer",
};

/// `btl_verbs_credits`.
pub static CREDITS: ParamDef = ParamDef {
    name: "btl_verbs_credits",
    kind: Kind::Int {
        min: 1,
        max: 1 << 14,
    },
    default: Default::Int(32),
    description: "Receive buffers the verbs BTL grants each peer: fragments a peer may have sent and not had returned",
};

/// `btl_verbs_send_slots`.
pub static SEND_SLOTS: ParamDef = ParamDef {
    name: "btl_verbs_send_slots",
    kind: Kind::Int {
        min: 2,
        max: 1 << 14,
    },
    default: Default::Int(64),
    description:
        "Registered send slots of the verbs BTL (fragments in flight at once, to all peers)",
};

/// `btl_verbs_get_min`.
pub static GET_MIN: ParamDef = ParamDef {
    name: "btl_verbs_get_min",
    kind: Kind::Int {
        min: 0,
        max: 1 << 40,
    },
    default: Default::Int(64 << 10),
    description: "Messages of at least this many bytes are read by the receiver with RDMA read (the RGET protocol) instead of sent in fragments; 0 turns reads off",
};

/// `btl_verbs_max_gets`.
pub static MAX_GETS: ParamDef = ParamDef {
    name: "btl_verbs_max_gets",
    kind: Kind::Int { min: 1, max: 4096 },
    default: Default::Int(32),
    description: "RDMA reads the verbs BTL has under way at once",
};

/// `btl_verbs_timeout`.
pub static TIMEOUT: ParamDef = ParamDef {
    name: "btl_verbs_timeout",
    kind: Kind::Int { min: 1, max: 31 },
    default: Default::Int(20),
    description: "Local ACK timeout of the verbs BTL's queue pairs: 4.096 us * 2^value per try (20: 4.3 s); a peer silent for btl_verbs_retry_count tries is reported failed",
};

/// `btl_verbs_retry_count`.
pub static RETRY_COUNT: ParamDef = ParamDef {
    name: "btl_verbs_retry_count",
    kind: Kind::Int { min: 1, max: 7 },
    default: Default::Int(7),
    description: "Times the verbs BTL's queue pairs send again after an ACK timeout before the connection fails",
};

/// `btl_verbs_gid_index`.
pub static GID_INDEX: ParamDef = ParamDef {
    name: "btl_verbs_gid_index",
    kind: Kind::Int { min: 0, max: 255 },
    default: Default::Int(0),
    description: "Index in the port's GID table of the address the verbs BTL uses on RoCE (and publishes on InfiniBand)",
};

/// `btl_verbs_device`.
pub static DEVICE: ParamDef = ParamDef {
    name: "btl_verbs_device",
    kind: Kind::Str,
    default: Default::Str(""),
    description:
        "The device the verbs BTL uses, by name (e.g. mlx5_0; empty: the first with an active port)",
};

/// `mpi_leave_pinned`.
pub static LEAVE_PINNED: ParamDef = ParamDef {
    name: "mpi_leave_pinned",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "Keep the verbs BTL's memory registrations for reuse (the registration cache): on, off, or auto (on where the library sees the program's frees and unmaps: linked with libmpi.so, or with libmpi.a by stormcc without -static)",
};

/// `mpool_max_registrations`.
pub static MAX_REGISTRATIONS: ParamDef = ParamDef {
    name: "mpool_max_registrations",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(0),
    description: "Registrations the registration cache keeps at most (0: no bound); past it the least recently used unused one is deregistered",
};

/// `mpool_max_bytes`.
pub static MAX_BYTES: ParamDef = ParamDef {
    name: "mpool_max_bytes",
    kind: Kind::Int {
        min: 0,
        max: 1 << 50,
    },
    default: Default::Int(0),
    description: "Bytes the registration cache keeps registered at most (0: no bound); past it the least recently used unused registrations are deregistered",
};

/// `btl_verbs_large_protocol`.
pub static LARGE_PROTOCOL: ParamDef = ParamDef {
    name: "btl_verbs_large_protocol",
    kind: Kind::Str,
    default: Default::Str("rget"),
    description: "How the verbs BTL moves messages of btl_verbs_get_min bytes and more: rget (the receiver RDMA-reads the sender's registered buffer), pipeline (the receiver registers its buffer, the sender registers fragments and RDMA-writes them, registering the next while one is written) or send (fragments through the receive queue)",
};

/// `btl_verbs_rdma_pipeline_frag_length`.
pub static PIPELINE_FRAG_LENGTH: ParamDef = ParamDef {
    name: "btl_verbs_rdma_pipeline_frag_length",
    kind: Kind::Int {
        min: 4096,
        max: 1 << 30,
    },
    default: Default::Int(1 << 20),
    description: "Bytes of each RDMA write (and of each registration of the sender's buffer) of the pipeline protocol",
};

/// `btl_verbs_rdma_pipeline_depth`.
pub static PIPELINE_DEPTH: ParamDef = ParamDef {
    name: "btl_verbs_rdma_pipeline_depth",
    kind: Kind::Int { min: 1, max: 64 },
    default: Default::Int(4),
    description: "RDMA writes of the pipeline protocol under way at once (the next fragment is registered while they are written)",
};

/// `btl_verbs_min_rdma_pipeline_size`.
pub static MIN_PIPELINE_SIZE: ParamDef = ParamDef {
    name: "btl_verbs_min_rdma_pipeline_size",
    kind: Kind::Int {
        min: 0,
        max: 1 << 50,
    },
    default: Default::Int(0),
    description: "With btl_verbs_large_protocol=pipeline, messages smaller than this still go by RGET (one registration, one read); 0: every large message is pipelined",
};

/// `btl_verbs_rndv_eager_limit`.
pub static RNDV_EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_verbs_rndv_eager_limit",
    kind: Kind::Int {
        min: 0,
        max: 1 << 20,
    },
    default: Default::Int(0),
    description: "Bytes of a large message sent with its RGET offer (header and bytes within btl_verbs_eager_limit): the receiver copies them as it matches and reads only the rest; 0: the offer carries none",
};

/// `btl_verbs_rdma_pipeline_send_length`.
pub static PIPELINE_SEND_LENGTH: ParamDef = ParamDef {
    name: "btl_verbs_rdma_pipeline_send_length",
    kind: Kind::Int {
        min: 0,
        max: 1 << 40,
    },
    default: Default::Int(0),
    description: "Bytes at the start of each pipeline-protocol transfer the sender sends through the receive queue (copied in and out) while it registers the first fragment it RDMA-writes; 0: all of it by RDMA write",
};

/// Parameters of the verbs BTL.
pub static PARAMS: [&ParamDef; 22] = [
    &LIBRARY,
    &EAGER_LIMIT,
    &MAX_SEND_SIZE,
    &RECEIVE_BUFFERS,
    &CREDITS,
    &SEND_SLOTS,
    &GET_MIN,
    &MAX_GETS,
    &TIMEOUT,
    &RETRY_COUNT,
    &GID_INDEX,
    &DEVICE,
    &LEAVE_PINNED,
    &MAX_REGISTRATIONS,
    &MAX_BYTES,
    &LARGE_PROTOCOL,
    &PIPELINE_FRAG_LENGTH,
    &PIPELINE_DEPTH,
    &MIN_PIPELINE_SIZE,
    &RNDV_EAGER_LIMIT,
    &PIPELINE_SEND_LENGTH,
    &crate::osc::OSC_VERBS,
];
