//! The flattened description of a datatype: what the convertor walks.
//!
//! A type's description is a short program of [`Node`]s over its memory layout:
//! a [`Node::Run`] is `count` contiguous basic elements at a displacement, a [`Node::Loop`] repeats
//! the nodes after it (its body) at a stride. A vector of 4096 doubles is one loop around one
//! run; a struct is a run per field; nesting follows the constructors. Every description also
//! carries what the MPI queries answer (size, bounds, extent) and what the fast paths need
//! (whether the type is one dense run).

use super::repr::{Elem, Repr, Width};
use super::Datatype;

/// A basic element in native memory: its kind and its size here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Basic {
    /// Kind, for conversion.
    pub elem: Elem,
    /// Bytes in native memory.
    pub size: u8,
}

impl Basic {
    /// A basic element of kind `elem`, at its native size.
    pub const fn native(elem: Elem) -> Basic {
        Basic {
            elem,
            size: native_size(elem) as u8,
        }
    }

    /// Alignment this element has in C structs (for the struct extent rule).
    pub const fn align(&self) -> usize {
        let s = self.size as usize;
        if s > 8 {
            16
        } else if s == 0 {
            1
        } else {
            s
        }
    }
}

const fn native_size(elem: Elem) -> usize {
    let r = Repr::NATIVE;
    match elem {
        Elem::Byte => 1,
        Elem::Int(w) | Elem::Uint(w) => match w {
            Width::Fixed(n) => n as usize,
            Width::Long => r.long as usize,
            Width::Aint => r.aint as usize,
        },
        Elem::Float(n) => n as usize,
        Elem::LongDouble => r.long_double.storage_bytes as usize,
        Elem::Bool => r.bool_ as usize,
        Elem::Logical => r.logical as usize,
    }
}

/// One step of a description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// `count` contiguous elements of `basic`, starting `disp` bytes from the current base.
    Run {
        /// Displacement from the base.
        disp: isize,
        /// Number of elements.
        count: u64,
        /// The element.
        basic: Basic,
    },
    /// The `body` nodes that follow, `count` times; iteration `i` has its base at
    /// `base + disp + i * stride`.
    Loop {
        /// Displacement of the first iteration from the base.
        disp: isize,
        /// Iterations.
        count: u64,
        /// Bytes between iterations.
        stride: isize,
        /// Number of nodes in the body (they follow this one).
        body: u32,
        /// Native packed bytes of one iteration.
        packed: u64,
    },
}

impl Node {
    /// The same node with its displacement moved by `d`. Wrapping: a loop's displacement is the
    /// base of its body, which need not lie within the type's bounds (a loop at `isize::MIN`
    /// whose body starts 36 bytes up, moved 4 bytes down); the elements' addresses, which the
    /// constructors check, come out right modulo 2^64 all the same (found by fuzzing).
    pub fn shifted(self, d: isize) -> Node {
        match self {
            Node::Run { disp, count, basic } => Node::Run {
                disp: disp.wrapping_add(d),
                count,
                basic,
            },
            Node::Loop {
                disp,
                count,
                stride,
                body,
                packed,
            } => Node::Loop {
                disp: disp.wrapping_add(d),
                count,
                stride,
                body,
                packed,
            },
        }
    }

    /// Nodes this one spans, itself included.
    pub fn span(&self) -> usize {
        match self {
            Node::Run { .. } => 1,
            Node::Loop { body, .. } => 1 + *body as usize,
        }
    }
}

/// Packed bytes of the nodes `nodes` (one instance) in representation `repr`.
pub fn stream_size(nodes: &[Node], repr: &Repr) -> u64 {
    let mut total = 0u64;
    let mut i = 0;
    while i < nodes.len() {
        match nodes[i] {
            Node::Run { count, basic, .. } => total += count * repr.size(basic.elem) as u64,
            Node::Loop { count, body, .. } => {
                let b = body as usize;
                total += count * stream_size(&nodes[i + 1..i + 1 + b], repr);
            }
        }
        i += nodes[i].span();
    }
    total
}

/// How a type was made (`MPI_Type_get_envelope`'s combiner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combiner {
    /// A predefined type.
    Named,
    /// `MPI_Type_dup`.
    Dup,
    /// `MPI_Type_contiguous`.
    Contiguous,
    /// `MPI_Type_vector`.
    Vector,
    /// `MPI_Type_create_hvector`.
    Hvector,
    /// `MPI_Type_indexed`.
    Indexed,
    /// `MPI_Type_create_hindexed`.
    Hindexed,
    /// `MPI_Type_create_indexed_block`.
    IndexedBlock,
    /// `MPI_Type_create_hindexed_block`.
    HindexedBlock,
    /// `MPI_Type_create_struct`.
    Struct,
    /// `MPI_Type_create_subarray`.
    Subarray,
    /// `MPI_Type_create_darray`.
    Darray,
    /// `MPI_Type_create_resized`.
    Resized,
    /// `MPI_Type_create_f90_integer`.
    F90Integer,
    /// `MPI_Type_create_f90_real`.
    F90Real,
    /// `MPI_Type_create_f90_complex`.
    F90Complex,
}

/// What the MPI queries and the fast paths need to know of a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Packed bytes of one instance (`MPI_Type_size`).
    pub size: u64,
    /// Lower bound.
    pub lb: isize,
    /// Extent (`ub - lb`).
    pub extent: isize,
    /// Lower bound of the actual data.
    pub true_lb: isize,
    /// Extent of the actual data.
    pub true_extent: isize,
    /// Basic elements in one instance (`MPI_Get_elements`).
    pub elems: u64,
    /// The lower bound was set explicitly (`MPI_LB` marker or resize) and sticks.
    pub explicit_lb: bool,
    /// The upper bound was set explicitly and sticks.
    pub explicit_ub: bool,
    /// Largest alignment among the basic elements (the struct extent rule pads to it).
    pub align: u8,
    /// One instance is a single run of `size` bytes at displacement `dense_at`, and `extent ==
    /// size`: `count` instances are `count * size` contiguous bytes.
    pub dense_at: Option<isize>,
    /// Deepest loop nesting of the description.
    pub depth: u8,
    /// Every basic element has this kind (for reductions over derived types).
    pub uniform: Option<Basic>,
}

/// The basic elements of a predefined type, with their displacements.
pub fn predefined_elems(dt: Datatype) -> &'static [(Elem, u8)] {
    use Elem::*;
    use Width::*;
    const SHORT_INT_OFF: u8 = 4;
    match dt {
        Datatype::LONG => &[(Int(Long), 0)],
        Datatype::UNSIGNED_LONG => &[(Uint(Long), 0)],
        Datatype::AINT => &[(Int(Aint), 0)],
        Datatype::OFFSET | Datatype::COUNT => &[(Int(Fixed(8)), 0)],
        Datatype::WCHAR => &[(Uint(Fixed(4)), 0)],
        Datatype::C_BOOL | Datatype::CXX_BOOL => &[(Bool, 0)],
        Datatype::LOGICAL => &[(Logical, 0)],
        Datatype::LONG_DOUBLE => &[(LongDouble, 0)],
        Datatype::C_LONG_DOUBLE_COMPLEX | Datatype::CXX_LONG_DOUBLE_COMPLEX => {
            &[(LongDouble, 0), (LongDouble, LD_SIZE)]
        }
        Datatype::C_FLOAT_COMPLEX
        | Datatype::CXX_FLOAT_COMPLEX
        | Datatype::COMPLEX
        | Datatype::COMPLEX8 => &[(Float(4), 0), (Float(4), 4)],
        Datatype::C_DOUBLE_COMPLEX
        | Datatype::CXX_DOUBLE_COMPLEX
        | Datatype::DOUBLE_COMPLEX
        | Datatype::COMPLEX16 => &[(Float(8), 0), (Float(8), 8)],
        Datatype::COMPLEX32 => &[(Float(16), 0), (Float(16), 16)],
        Datatype::TWO_INT | Datatype::TWO_INTEGER => &[(Int(Fixed(4)), 0), (Int(Fixed(4)), 4)],
        Datatype::FLOAT_INT => &[(Float(4), 0), (Int(Fixed(4)), 4)],
        Datatype::TWO_REAL => &[(Float(4), 0), (Float(4), 4)],
        Datatype::TWO_DOUBLE_PRECISION => &[(Float(8), 0), (Float(8), 8)],
        Datatype::DOUBLE_INT => &[(Float(8), 0), (Int(Fixed(4)), 8)],
        Datatype::LONG_INT => &[(Int(Long), 0), (Int(Fixed(4)), LONG_SIZE)],
        Datatype::SHORT_INT => &[(Int(Fixed(2)), 0), (Int(Fixed(4)), SHORT_INT_OFF)],
        Datatype::LONG_DOUBLE_INT => &[(LongDouble, 0), (Int(Fixed(4)), LD_SIZE)],
        Datatype::LB | Datatype::UB => &[],
        Datatype::BYTE | Datatype::PACKED | Datatype::CHAR | Datatype::CHARACTER => &[(Byte, 0)],
        d => match d.scalar() {
            super::Scalar::Int(n) | super::Scalar::FortranInt(n) => match n {
                1 => &[(Int(Fixed(1)), 0)],
                2 => &[(Int(Fixed(2)), 0)],
                4 => &[(Int(Fixed(4)), 0)],
                _ => &[(Int(Fixed(8)), 0)],
            },
            super::Scalar::Uint(n) => match n {
                1 => &[(Uint(Fixed(1)), 0)],
                2 => &[(Uint(Fixed(2)), 0)],
                4 => &[(Uint(Fixed(4)), 0)],
                _ => &[(Uint(Fixed(8)), 0)],
            },
            super::Scalar::Float(n) => match n {
                4 => &[(Float(4), 0)],
                8 => &[(Float(8), 0)],
                _ => &[(Float(16), 0)],
            },
            _ => &[(Byte, 0)],
        },
    }
}

const LD_SIZE: u8 = Repr::NATIVE.long_double.storage_bytes;
const LONG_SIZE: u8 = Repr::NATIVE.long;
