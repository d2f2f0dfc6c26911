//! On-the-wire form of the one-sided active messages.
//!
//! An origin's operation on a window travels to its target as one point-to-point message on the
//! window's hidden communicator: an [`AmHdr`], then `ndesc` [`WireNode`]s describing the target
//! datatype (its flattened description, which the target walks over its own memory: the target
//! never needs the origin's datatype table), then the operation's data in the packed stream of
//! that type. Replies (fetched data, lock grants, flush answers) are plain messages on the tag the
//! header names, whose receive the origin posted before it sent the request.
//!
//! Layout rules as in [`crate::wire`]: `#[repr(C)]` structs with explicit padding, sizes asserted
//! at compile time. Requests are written in the *target's* byte order, with the order in a flag
//! bit: an origin whose representation differs from its target's writes the header and nodes in
//! the target's order ([`AmHdr::in_order`], [`WireNode::in_order`]) and packs the data in the
//! target's representation, so the target applies every message as it is; a header of the other
//! order is refused. Replies go the other way as typed point-to-point data, which the origin's
//! receive converts (receiver makes right). [`Am::parse`] is the only way a peer's bytes enter
//! and never panics.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::arch::Endian;
use crate::datatype::desc::Node;

/// Active-message kinds (first byte of every header).
pub mod kind {
    /// Store the data into the target type's memory.
    pub const PUT: u8 = 1;
    /// Reply with the target type's memory.
    pub const GET: u8 = 2;
    /// Combine the data into the target memory with the header's operation.
    pub const ACC: u8 = 3;
    /// Reply with the target memory, then combine the data into it.
    pub const GET_ACC: u8 = 4;
    /// One element: reply with it, then store the first half of the data where it equals the
    /// second half.
    pub const CAS: u8 = 5;
    /// Ask for the window's lock (`lock` says which); granted by an empty reply.
    pub const LOCK: u8 = 6;
    /// Release the lock held by the sender; answered by an empty reply once released.
    pub const UNLOCK: u8 = 7;
    /// Answered by an empty reply: every earlier message from this origin has been applied.
    pub const FLUSH: u8 = 8;
    /// The sender completed its access epoch of post/start/complete/wait (`MPI_Win_complete`).
    pub const DONE: u8 = 9;
}

/// Bits of [`AmHdr::flags`].
pub mod flags {
    /// The header's multi-byte fields are big-endian.
    pub const BIG_ENDIAN: u8 = 0x01;
    /// The data is the memory image of `count` elements of the predefined pair type `basic`
    /// (with its padding), not a packed stream: `MPI_MINLOC`/`MPI_MAXLOC` accumulates.
    pub const IMAGE: u8 = 0x02;
    /// A put whose data comes as a message of its own, on the header's `reply_tag`, received
    /// straight into the window (large puts to one run of memory).
    pub const DATA_FOLLOWS: u8 = 0x04;
    /// Every flag this version knows.
    pub const KNOWN: u8 = BIG_ENDIAN | IMAGE | DATA_FOLLOWS;
}

/// Lock kinds in [`AmHdr::lock`].
pub mod lock {
    /// `MPI_LOCK_SHARED`.
    pub const SHARED: u8 = 1;
    /// `MPI_LOCK_EXCLUSIVE`.
    pub const EXCLUSIVE: u8 = 2;
}

const NATIVE_FLAGS: u8 = match Endian::NATIVE {
    Endian::Big => flags::BIG_ENDIAN,
    Endian::Little => 0,
};

/// The header of every active message. 48 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct AmHdr {
    /// [`kind`].
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Accumulate operation (the code of [`crate::op::Op`] in [`op_code`]), 0 otherwise.
    pub op: u8,
    /// [`lock`] kind for [`kind::LOCK`].
    pub lock: u8,
    /// Target-type nodes that follow the header.
    pub ndesc: u32,
    /// Tag of the reply the origin waits for (0: none).
    pub reply_tag: i32,
    /// Predefined datatype code of the elements an accumulate combines (0 otherwise).
    pub basic: u16,
    /// Zero.
    pub _pad: u16,
    /// Target displacement, in the target's displacement units.
    pub disp: i64,
    /// Instances of the target type.
    pub count: u64,
    /// Extent of one instance of the target type.
    pub extent: i64,
    /// Stream bytes of `count` instances of the target type.
    pub len: u64,
}

/// One node of a target type's flattened description. 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct WireNode {
    /// 0: a run of `count` elements of `size` bytes at `disp`; 1: a loop of `count` iterations
    /// `stride` apart, over the `body` nodes that follow, starting at `disp`.
    pub loop_: u8,
    /// Bytes of one element of a run.
    pub size: u8,
    /// Zero.
    pub _pad: u16,
    /// Nodes in a loop's body.
    pub body: u32,
    /// Displacement from the enclosing base.
    pub disp: i64,
    /// Elements of a run, iterations of a loop.
    pub count: u64,
    /// Bytes between a loop's iterations.
    pub stride: i64,
}

const _: () = assert!(core::mem::size_of::<AmHdr>() == 48);
const _: () = assert!(core::mem::size_of::<WireNode>() == 32);

/// Bytes of the header.
pub const HDR_LEN: usize = core::mem::size_of::<AmHdr>();
/// Bytes of one node.
pub const NODE_LEN: usize = core::mem::size_of::<WireNode>();

impl WireNode {
    /// The wire form of a description node.
    pub fn of(n: &Node) -> WireNode {
        match *n {
            Node::Run { disp, count, basic } => WireNode {
                loop_: 0,
                size: basic.size,
                _pad: 0,
                body: 0,
                disp: disp as i64,
                count,
                stride: 0,
            },
            Node::Loop {
                disp,
                count,
                stride,
                body,
                ..
            } => WireNode {
                loop_: 1,
                size: 0,
                _pad: 0,
                body,
                disp: disp as i64,
                count,
                stride: stride as i64,
            },
        }
    }

    /// The node as a peer of byte order `order` reads it.
    pub fn in_order(mut self, order: Endian) -> WireNode {
        if order == Endian::NATIVE {
            return self;
        }
        self.body = self.body.swap_bytes();
        self.disp = self.disp.swap_bytes();
        self.count = self.count.swap_bytes();
        self.stride = self.stride.swap_bytes();
        self
    }

    /// A run of `bytes` bytes at displacement 0 (a predefined or dense target type).
    pub fn bytes(bytes: u64) -> WireNode {
        WireNode {
            loop_: 0,
            size: 1,
            _pad: 0,
            body: 0,
            disp: 0,
            count: bytes,
            stride: 0,
        }
    }
}

/// Why a message could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its header, or than the nodes it announces.
    Short,
    /// An unknown kind or flag.
    Unknown,
    /// Written in the other byte order.
    ForeignOrder,
}

/// A parsed active message: its header, the target type's nodes and the data.
#[derive(Debug)]
pub struct Am<'a> {
    /// The header.
    pub hdr: AmHdr,
    /// The target type's description.
    pub nodes: &'a [WireNode],
    /// The data after them.
    pub data: &'a [u8],
}

impl<'a> Am<'a> {
    /// Parses `msg`; never panics.
    pub fn parse(msg: &'a [u8]) -> Result<Am<'a>, WireError> {
        let (hdr, rest) = AmHdr::read_from_prefix(msg).map_err(|_| WireError::Short)?;
        if hdr.flags & !flags::KNOWN != 0 || !(kind::PUT..=kind::DONE).contains(&hdr.kind) {
            return Err(WireError::Unknown);
        }
        if hdr.flags & flags::BIG_ENDIAN != NATIVE_FLAGS {
            return Err(WireError::ForeignOrder);
        }
        let n = hdr.ndesc as usize;
        let need = n.checked_mul(NODE_LEN).ok_or(WireError::Short)?;
        if rest.len() < need {
            return Err(WireError::Short);
        }
        let (desc, data) = rest.split_at(need);
        let nodes = <[WireNode]>::ref_from_bytes(desc).map_err(|_| WireError::Short)?;
        Ok(Am { hdr, nodes, data })
    }
}

impl AmHdr {
    /// A header of `kind` with every other field 0 but the byte-order flag.
    pub fn new(kind: u8) -> AmHdr {
        AmHdr {
            kind,
            flags: NATIVE_FLAGS,
            op: 0,
            lock: 0,
            ndesc: 0,
            reply_tag: 0,
            basic: 0,
            _pad: 0,
            disp: 0,
            count: 0,
            extent: 0,
            len: 0,
        }
    }

    /// The header as a peer of byte order `order` reads it (every multi-byte field swapped when
    /// that order is not this process's, and the order flag set to match).
    pub fn in_order(mut self, order: Endian) -> AmHdr {
        if order == Endian::NATIVE {
            return self;
        }
        self.flags ^= flags::BIG_ENDIAN;
        self.ndesc = self.ndesc.swap_bytes();
        self.reply_tag = self.reply_tag.swap_bytes();
        self.basic = self.basic.swap_bytes();
        self.disp = self.disp.swap_bytes();
        self.count = self.count.swap_bytes();
        self.extent = self.extent.swap_bytes();
        self.len = self.len.swap_bytes();
        self
    }

    /// Writes the header and `nodes` at the start of `out` (which must hold them); returns the
    /// bytes written.
    pub fn emit(&self, nodes: &[WireNode], out: &mut [u8]) -> Option<usize> {
        let total = HDR_LEN + nodes.len() * NODE_LEN;
        let out = out.get_mut(..total)?;
        out[..HDR_LEN].copy_from_slice(self.as_bytes());
        out[HDR_LEN..].copy_from_slice(nodes.as_bytes());
        Some(total)
    }
}

/// The wire code of a predefined operation (0 for none or a user-defined one).
pub fn op_code(op: crate::op::Op) -> u8 {
    use crate::op::Op::*;
    match op {
        Max => 1,
        Min => 2,
        Sum => 3,
        Prod => 4,
        Land => 5,
        Band => 6,
        Lor => 7,
        Bor => 8,
        Lxor => 9,
        Bxor => 10,
        Minloc => 11,
        Maxloc => 12,
        Replace => 13,
        NoOp => 14,
        User(_) => 0,
    }
}

/// The operation of a wire code.
pub fn op_of(code: u8) -> Option<crate::op::Op> {
    use crate::op::Op::*;
    Some(match code {
        1 => Max,
        2 => Min,
        3 => Sum,
        4 => Prod,
        5 => Land,
        6 => Band,
        7 => Lor,
        8 => Bor,
        9 => Lxor,
        10 => Bxor,
        11 => Minloc,
        12 => Maxloc,
        13 => Replace,
        14 => NoOp,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_round_trips() {
        let mut h = AmHdr::new(kind::PUT);
        h.disp = 7;
        h.count = 3;
        h.len = 12;
        h.ndesc = 1;
        let nodes = [WireNode::bytes(4)];
        let mut buf = [0u8; 128];
        let n = h.emit(&nodes, &mut buf).unwrap();
        buf[n..n + 12].copy_from_slice(&[9; 12]);
        let am = Am::parse(&buf[..n + 12]).unwrap();
        assert_eq!(am.hdr, h);
        assert_eq!(am.nodes, &nodes);
        assert_eq!(am.data, &[9; 12]);
    }

    #[test]
    fn every_truncation_and_corruption_is_refused_without_panic() {
        let mut h = AmHdr::new(kind::ACC);
        h.ndesc = 2;
        let nodes = [WireNode::bytes(4), WireNode::bytes(8)];
        let mut buf = [0u8; 128];
        let n = h.emit(&nodes, &mut buf).unwrap();
        for cut in 0..n {
            assert!(Am::parse(&buf[..cut]).is_err());
        }
        for i in 0..n {
            for v in [0u8, 0x55, 0xff] {
                let mut b = buf;
                b[i] = v;
                let _ = Am::parse(&b[..n]);
            }
        }
        let mut b = buf;
        b[0] = 99;
        assert_eq!(Am::parse(&b[..n]).unwrap_err(), WireError::Unknown);
        b = buf;
        b[1] ^= flags::BIG_ENDIAN;
        assert_eq!(Am::parse(&b[..n]).unwrap_err(), WireError::ForeignOrder);
    }

    #[test]
    fn a_header_in_the_other_order_reads_back_after_a_second_swap() {
        let other = match Endian::NATIVE {
            Endian::Big => Endian::Little,
            Endian::Little => Endian::Big,
        };
        let mut h = AmHdr::new(kind::ACC);
        h.ndesc = 1;
        h.reply_tag = 77;
        h.basic = 0x1234;
        h.disp = -5;
        h.count = 3;
        h.extent = 12;
        h.len = 36;
        let f = h.in_order(other);
        assert_ne!(f, h);
        let mut buf = [0u8; 128];
        let node = WireNode::bytes(36).in_order(other);
        let n = f.emit(&[node], &mut buf).unwrap();
        assert_eq!(Am::parse(&buf[..n]).unwrap_err(), WireError::ForeignOrder);
        assert_eq!(f.in_order(other), h);
        assert_eq!(node.in_order(other), WireNode::bytes(36));
        assert_eq!(h.in_order(Endian::NATIVE), h);
    }

    #[test]
    fn op_codes_are_a_bijection_on_the_predefined_ops() {
        for c in 1..=14u8 {
            assert_eq!(op_code(op_of(c).unwrap()), c);
        }
        assert!(op_of(0).is_none() && op_of(15).is_none());
    }
}
