//! The table of datatypes: predefined and derived, their descriptions and constructor arguments.
//!
//! Every type — the predefined ones at fixed codes, derived ones after them — has an entry with
//! its [`TypeInfo`] and a range of [`Node`]s in one node store, plus (for derived types) the
//! arguments it was made from, for `MPI_Type_get_contents`. A constructor flattens at once: it
//! copies the nodes of its old type(s) into a new range, wrapped in a loop where a loop is needed,
//! merges runs that touch, and computes the bounds by the standard's rules (sticky bounds set by
//! `MPI_LB`/`MPI_UB` or a resize; a struct's extent padded to its largest alignment).
//!
//! Storage starts small and grows within the engine's memory bound: the entries are a
//! [`Pool`] (a type's index never changes), the operation counters ([`TypeTable::hold`]) sit in
//! segments laid out like it (convertors keep `&'static` references to them), and the node and
//! argument stores are [`Store`]s that move to a larger grant when no range fits (nodes are
//! always reached through the table by index). The parameters are maxima; running out is a clear
//! `MPI_ERR_NO_MEM` naming the parameter, or `mpi_memory_max`.
//!
//! Freeing is reference counted: a derived type keeps the types it was made from alive (their
//! handles come back from `MPI_Type_get_contents`), and operations in flight keep theirs.

use core::sync::atomic::{AtomicU32, Ordering};

use heapless::Vec;

use super::desc::{predefined_elems, stream_size, Basic, Combiner, Node, TypeInfo};
use super::repr::Repr;
use super::Datatype;
use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::memory::Memory;
use crate::params::{Default, Kind, ParamDef, Params};
use crate::pool::{locate, Capacity, Pool, SEGMENTS};
use crate::ranges::{Ranges, Store};

/// Most derived types: a derived datatype handle of the C ABI carries its index in 26 bits.
const TYPES_LIMIT: i64 = (1 << 26) - PREDEFINED as i64;

/// `dt_max_types`.
pub static MAX_TYPES: ParamDef = ParamDef {
    name: "dt_max_types",
    kind: Kind::Int {
        min: 16,
        max: TYPES_LIMIT,
    },
    default: Default::Int(TYPES_LIMIT),
    description: "Most derived datatypes alive at once (types they were made from count too); \
                  the table starts at 192 and grows within mpi_memory_max; at most 2^26 - 64, \
                  what a C handle encodes",
};

/// `dt_max_nodes`.
pub static MAX_NODES: ParamDef = ParamDef {
    name: "dt_max_nodes",
    kind: Kind::Int {
        min: 256,
        max: u32::MAX as i64,
    },
    default: Default::Int(u32::MAX as i64),
    description: "Most nodes of flattened type descriptions over all types (an indexed type of n \
                  blocks takes up to n); the store starts at 2048 and grows within mpi_memory_max",
};

/// `dt_max_args`.
pub static MAX_ARGS: ParamDef = ParamDef {
    name: "dt_max_args",
    kind: Kind::Int {
        min: 256,
        max: u32::MAX as i64,
    },
    default: Default::Int(u32::MAX as i64),
    description: "Most words of constructor arguments kept for MPI_Type_get_contents, over all \
                  types; the store starts at 1024 and grows within mpi_memory_max",
};

/// Entries carved at init (the predefined types and 192 derived ones).
const TYPES_INITIAL: u32 = 256;
/// Description nodes carved at init.
const NODES_INITIAL: usize = 2048;
/// Argument words carved at init.
const ARGS_INITIAL: usize = 1024;

/// Parameters of the datatype engine.
pub static PARAMS: [&ParamDef; 3] = [&MAX_TYPES, &MAX_NODES, &MAX_ARGS];

/// Entries reserved for predefined types (codes below this).
pub const PREDEFINED: u32 = 64;
/// Deepest loop nesting a description may have.
pub const MAX_DEPTH: usize = 16;

/// Storage order of a multidimensional array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Last index fastest.
    C,
    /// First index fastest.
    Fortran,
}

/// How `MPI_Type_create_darray` distributes one dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distrib {
    /// Not distributed.
    None,
    /// Blocks of `darg` (or the default size) elements.
    Block,
    /// Round-robin blocks of `darg` (default 1) elements.
    Cyclic,
}

/// `MPI_DISTRIBUTE_DFLT_DARG`.
pub const DFLT_DARG: i32 = -49767;

/// Where in the args store a type's constructor arguments are: ints, addresses, types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Args {
    start: u32,
    ints: u32,
    aints: u32,
    types: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    info: TypeInfo,
    nodes: (u32, u32),
    combiner: Combiner,
    args: Args,
    committed: bool,
    /// The user's handle (until freed), derived types made from it, operations in flight.
    refs: u32,
}

/// Bytes between the instances of a block.
#[derive(Clone, Copy, Debug)]
enum Stride {
    /// The extent of the block's type (consecutive instances).
    Extent,
    /// A given number of bytes.
    Bytes(isize),
}

/// One block of a type being built: `count` instances of `ty`, the first at `disp`.
#[derive(Clone, Copy, Debug)]
struct Block {
    ty: Datatype,
    count: u64,
    disp: isize,
    stride: Stride,
}

/// Integer constructor arguments, as the caller has them.
#[derive(Clone, Copy)]
enum Ints<'a> {
    One(i64),
    Many(&'a [i32]),
}

/// Address-sized constructor arguments.
#[derive(Clone, Copy)]
enum Aints<'a> {
    One(isize),
    Many(&'a [isize]),
}

/// Intervals `(start, count)` of one dimension of a grid selection.
type Intervals = Vec<(i64, i64), 256>;

/// Operations in flight on each type, at addresses that never change (convertors keep
/// `&'static` references to them): segments laid out as the entries pool's, so index `i` of
/// the pool has counter `i` here. Never borrowed mutably once made.
struct Holds {
    first: &'static [AtomicU32],
    more: [&'static [AtomicU32]; SEGMENTS],
    grown: usize,
    shift: u32,
    /// Counters held.
    len: u32,
    account: Option<&'static Memory>,
}

impl Holds {
    fn new(arena: &mut Arena, first: u32) -> Result<Holds> {
        let counters: &'static [AtomicU32] = arena.slice(first as usize, |_| AtomicU32::new(0))?;
        Ok(Holds {
            first: counters,
            more: [&[]; SEGMENTS],
            grown: 0,
            shift: first.trailing_zeros(),
            len: first,
            account: arena.account(),
        })
    }

    fn get(&self, i: u32) -> Option<&'static AtomicU32> {
        if (i as usize) < self.first.len() {
            return self.first.get(i as usize);
        }
        let (k, off) = locate(i, self.shift);
        self.more.get(k.checked_sub(1)?)?.get(off)
    }

    /// Adds segments until counter `i` exists (the entries pool grew to hold index `i`).
    fn cover(&mut self, i: u32) -> Result<()> {
        while i >= self.len {
            let account = self
                .account
                .ok_or(no_mem("datatypes", self.len as usize, &MAX_TYPES))?;
            let n = 1usize << (self.shift as usize + self.grown);
            let mut sizer = Sizer::default();
            sizer.slice::<AtomicU32>(n);
            let region = account
                .take(sizer.bytes())
                .map_err(|why| account.refused("datatypes", why))?;
            let counters: &'static [AtomicU32] =
                Arena::new(region).slice(n, |_| AtomicU32::new(0))?;
            let slot = self.more.get_mut(self.grown).ok_or(no_mem(
                "datatypes",
                self.len as usize,
                &MAX_TYPES,
            ))?;
            *slot = counters;
            self.grown += 1;
            self.len += n as u32;
        }
        Ok(())
    }
}

/// The table of datatypes.
pub struct TypeTable {
    entries: Pool<Entry>,
    nodes: Store<Node>,
    node_ranges: Ranges,
    args: Store<i64>,
    arg_ranges: Ranges,
    /// Operations in flight on each type (convertors hold these; see [`TypeTable::hold`]).
    holds: Holds,
    /// Types let go of while operations still held them, to be dropped once idle (an upper
    /// bound: [`TypeTable::reclaim`] looks only when it is not 0).
    pending: u32,
    /// The types `MPI_Type_create_f90_*` made, by combiner and arguments (see
    /// [`TypeTable::f90`]).
    f90: heapless::Vec<(Combiner, [i64; 2], Datatype), F90_KEPT>,
}

/// How many `MPI_Type_create_f90_*` results are kept for reuse (more distinct argument sets
/// than this each make a type of their own).
const F90_KEPT: usize = 32;

/// A node of no meaning, filling unused store.
const BLANK: Node = Node::Run {
    disp: 0,
    count: 0,
    basic: Basic::native(super::repr::Elem::Byte),
};

/// Whether `c` is one of the Fortran 90 combiners (see [`TypeTable::f90`]).
fn is_f90(c: Combiner) -> bool {
    matches!(
        c,
        Combiner::F90Integer | Combiner::F90Real | Combiner::F90Complex
    )
}

impl TypeTable {
    /// Datatypes alive (predefined ones included), slots held now and most slots.
    pub fn usage(&self) -> (u32, u32, u32) {
        (
            self.entries.len(),
            self.entries.capacity(),
            self.entries.max(),
        )
    }
}

fn no_mem(what: &'static str, capacity: usize, param: &'static ParamDef) -> Error {
    Error::exhausted(what, capacity as u32, param.name)
}

fn bad_type() -> Error {
    Error::new(ErrorClass::Type, Reason::InvalidDatatype)
}

fn bad_count(count: impl Into<i64>) -> Error {
    Error::new(
        ErrorClass::Count,
        Reason::NegativeCount {
            count: count.into(),
        },
    )
}

fn bad_arg(what: &'static str) -> Error {
    Error::bad_arg(what)
}

impl TypeTable {
    fn capacity(params: &Params) -> Capacity {
        Capacity::growing(TYPES_INITIAL, PREDEFINED + params.u32(&MAX_TYPES))
    }

    /// Arena bytes for the initial capacities.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        let entries = TypeTable::capacity(params);
        Pool::<Entry>::size(sizer, entries);
        sizer.slice::<AtomicU32>(entries.first() as usize);
        Store::<Node>::size(sizer, NODES_INITIAL, params.usize(&MAX_NODES));
        Store::<i64>::size(sizer, ARGS_INITIAL, params.usize(&MAX_ARGS));
    }

    /// A table holding the predefined types; it grows through `arena`'s memory account.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<TypeTable> {
        let entries = TypeTable::capacity(params);
        let (nodes, node_ranges) =
            Store::new(arena, NODES_INITIAL, params.usize(&MAX_NODES), BLANK)?;
        let (args, arg_ranges) = Store::new(arena, ARGS_INITIAL, params.usize(&MAX_ARGS), 0i64)?;
        let mut t = TypeTable {
            holds: Holds::new(arena, entries.first())?,
            entries: Pool::new(arena, entries)?,
            nodes,
            node_ranges,
            args,
            arg_ranges,
            pending: 0,
            f90: heapless::Vec::new(),
        };
        for d in Datatype::predefined() {
            t.add_predefined(d)?;
        }
        Ok(t)
    }

    /// `n` nodes of the store, growing it if needed.
    fn alloc_nodes(&mut self, n: u32) -> Result<u32> {
        self.nodes
            .alloc(&mut self.node_ranges, n, "datatype nodes", MAX_NODES.name)
    }

    /// Stores a new entry; its type.
    fn insert(&mut self, entry: Entry) -> Result<Datatype> {
        let key = self
            .entries
            .insert(entry)
            .map_err(|_| self.entries.exhausted("datatypes", MAX_TYPES.name))?;
        if let Err(e) = self.holds.cover(key.index) {
            self.entries.remove(key);
            return Err(e);
        }
        Ok(Datatype(key.index))
    }

    fn add_predefined(&mut self, d: Datatype) -> Result<()> {
        let elems = predefined_elems(d);
        let start = self.alloc_nodes(elems.len() as u32)?;
        let mut uniform = None;
        for (i, (elem, at)) in elems.iter().enumerate() {
            let basic = Basic::native(*elem);
            uniform = match (i, uniform) {
                (0, _) => Some(basic),
                (_, Some(u)) if u == basic => Some(u),
                _ => None,
            };
            self.nodes[start as usize + i] = Node::Run {
                disp: *at as isize,
                count: 1,
                basic,
            };
        }
        let size: u64 = elems
            .iter()
            .map(|(e, _)| Basic::native(*e).size as u64)
            .sum();
        let info = TypeInfo {
            size,
            lb: 0,
            extent: d.extent() as isize,
            true_lb: 0,
            // The data alone: a pair's trailing padding (MPI_DOUBLE_INT: 12 of 16) is not in it.
            true_extent: elems
                .iter()
                .map(|(e, at)| *at as isize + Basic::native(*e).size as isize)
                .max()
                .unwrap_or(0),
            elems: elems.len() as u64,
            explicit_lb: d == Datatype::LB,
            explicit_ub: d == Datatype::UB,
            align: elems
                .iter()
                .map(|(e, _)| Basic::native(*e).align())
                .max()
                .unwrap_or(1) as u8,
            dense_at: (elems.len() == 1 && size == d.extent() as u64).then_some(0),
            depth: 0,
            uniform,
        };
        let made = self.insert(Entry {
            info,
            nodes: (start, elems.len() as u32),
            combiner: Combiner::Named,
            args: Args::default(),
            committed: true,
            refs: 1,
        })?;
        // A fresh pool hands out its slots in order, so each predefined type gets its code.
        if made != d {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "a predefined datatype did not get its code's table entry",
                },
            ));
        }
        Ok(())
    }

    fn entry(&self, t: Datatype) -> Result<&Entry> {
        self.entries.at(t.index()).ok_or_else(bad_type)
    }

    /// What the queries need to know of `t`.
    pub fn info(&self, t: Datatype) -> Result<&TypeInfo> {
        Ok(&self.entry(t)?.info)
    }

    /// The description of one instance of `t`.
    pub fn nodes(&self, t: Datatype) -> Result<&[Node]> {
        let e = self.entry(t)?;
        Ok(&self.nodes[e.nodes.0 as usize..(e.nodes.0 + e.nodes.1) as usize])
    }

    /// Whether `t` may be used to communicate (predefined, or derived and committed).
    pub fn check_committed(&self, t: Datatype) -> Result<&TypeInfo> {
        let e = self.entry(t)?;
        if !e.committed {
            return Err(Error::new(
                ErrorClass::Type,
                Reason::BadArgument {
                    what: "the datatype is not committed (MPI_Type_commit)",
                },
            ));
        }
        Ok(&e.info)
    }

    /// Packed bytes of one instance of `t` in representation `repr`.
    pub fn stream_size(&self, t: Datatype, repr: &Repr) -> Result<u64> {
        let info = self.info(t)?;
        if repr.same_as(&Repr::NATIVE) {
            return Ok(info.size);
        }
        Ok(stream_size(self.nodes(t)?, repr))
    }

    /// Derived types alive (for leak checks).
    pub fn derived_in_use(&self) -> usize {
        (self.entries.len() - PREDEFINED) as usize
    }

    // ---- life cycle ---------------------------------------------------------------------------

    /// `MPI_Type_commit`.
    pub fn commit(&mut self, t: Datatype) -> Result<()> {
        let e = self.entries.at_mut(t.index()).ok_or_else(bad_type)?;
        e.committed = true;
        Ok(())
    }

    /// Keeps `t` alive while an operation uses it.
    pub fn retain(&mut self, t: Datatype) {
        if t.index() >= PREDEFINED {
            if let Some(e) = self.entries.at_mut(t.index()) {
                e.refs += 1;
            }
        }
    }

    /// Counts an operation in flight on derived type `t` (a convertor over it): the type's
    /// description stays in place, even if the user frees the type, until the returned counter
    /// is decremented again. `None` for predefined types, which never go away.
    pub fn hold(&self, t: Datatype) -> Option<&'static AtomicU32> {
        if t.index() < PREDEFINED {
            return None;
        }
        let h: &'static AtomicU32 = self.holds.get(t.index())?;
        h.fetch_add(1, Ordering::Relaxed);
        Some(h)
    }

    fn held(&self, i: u32) -> bool {
        self.holds
            .get(i)
            .is_some_and(|h| h.load(Ordering::Relaxed) > 0)
    }

    /// Frees the types that were released while operations were using them and are now idle.
    fn reclaim(&mut self) {
        if self.pending == 0 {
            return;
        }
        self.pending = 0;
        for i in PREDEFINED..self.entries.capacity() {
            if matches!(self.entries.at(i), Some(Entry { refs: 0, .. })) {
                if self.held(i) {
                    self.pending += 1;
                } else {
                    self.drop_entry(i);
                }
            }
        }
    }

    /// Lets go of `t` (the user's handle, an operation, or a type made from it).
    pub fn release(&mut self, t: Datatype) {
        let i = t.index();
        if i < PREDEFINED {
            return;
        }
        let Some(e) = self.entries.at_mut(i) else {
            return;
        };
        if e.refs == 0 {
            return;
        }
        e.refs -= 1;
        if e.refs > 0 {
            return;
        }
        if self.held(i) {
            self.pending += 1;
            return;
        }
        self.drop_entry(i);
    }

    fn drop_entry(&mut self, i: u32) {
        let Some(e) = self.entries.key_at(i).and_then(|k| self.entries.remove(k)) else {
            return;
        };
        self.node_ranges.release(e.nodes.0, e.nodes.1);
        self.drop_args(e.args);
    }

    /// Lets go of the types recorded in `a` and of its range of the args store.
    fn drop_args(&mut self, a: Args) {
        let types = (a.start + a.ints + a.aints) as usize;
        for k in 0..a.types as usize {
            let inner = Datatype(self.args[types + k] as u32);
            self.release(inner);
        }
        self.arg_ranges.release(a.start, a.ints + a.aints + a.types);
    }

    /// `MPI_Type_free`: predefined types cannot be freed.
    pub fn free(&mut self, t: Datatype) -> Result<()> {
        let e = self.entry(t)?;
        if t.index() < PREDEFINED || is_f90(e.combiner) {
            return Err(Error::new(
                ErrorClass::Type,
                Reason::BadArgument {
                    what: "predefined datatypes cannot be freed",
                },
            ));
        }
        self.release(t);
        Ok(())
    }

    // ---- queries ------------------------------------------------------------------------------

    /// The types derived type `t` was made from, as `MPI_Type_get_contents` lists them (without
    /// retaining them), and for a Fortran 90 type the predefined type it copies (which the
    /// envelope does not list); nothing for a predefined type.
    pub fn old_types(&self, t: Datatype) -> Result<impl Iterator<Item = Datatype> + '_> {
        let e = self.entry(t)?;
        let a = e.args;
        let s = (a.start + a.ints + a.aints) as usize;
        let n = if e.combiner == Combiner::Named {
            0
        } else {
            a.types as usize
        };
        Ok(self.args[s..s + n].iter().map(|&v| Datatype(v as u32)))
    }

    /// `MPI_Type_get_envelope`: combiner and the numbers of ints, addresses and types.
    pub fn envelope(&self, t: Datatype) -> Result<(Combiner, usize, usize, usize)> {
        let e = self.entry(t)?;
        Ok((
            e.combiner,
            e.args.ints as usize,
            e.args.aints as usize,
            if is_f90(e.combiner) {
                0
            } else {
                e.args.types as usize
            },
        ))
    }

    /// Whether an integer argument of `t`'s constructor does not fit a C `int` (a count of a
    /// large-count `_c` constructor): `MPI_Type_get_envelope_c` then lists its integers as
    /// large counts, and the `int` queries cannot describe it.
    pub fn wide_args(&self, t: Datatype) -> Result<bool> {
        let a = self.entry(t)?.args;
        let s = a.start as usize;
        Ok(self.args[s..s + a.ints as usize]
            .iter()
            .any(|&v| i32::try_from(v).is_err()))
    }

    /// `MPI_Type_get_contents`: fills the two arrays, which must be at least as long as the
    /// envelope says, and hands each type to `types` with its position. The types are kept alive
    /// for the caller (who frees derived ones). A count beyond an `int` is `MPI_ERR_COUNT`
    /// ([`TypeTable::contents_large`] gives it).
    pub fn contents(
        &mut self,
        t: Datatype,
        ints: &mut [i32],
        aints: &mut [isize],
        types: impl FnMut(usize, Datatype),
    ) -> Result<()> {
        if self.wide_args(t)? {
            return Err(Error::new(
                ErrorClass::Count,
                Reason::BadArgument {
                    what: "a count of this datatype does not fit an int: MPI_Type_get_contents_c gives it",
                },
            ));
        }
        let n = ints.len();
        self.contents_into(t, n, &mut |k, v| ints[k] = v as i32, aints, types)
    }

    /// `MPI_Type_get_contents_c` for a type whose integers are large counts
    /// ([`TypeTable::wide_args`]): as [`TypeTable::contents`], the integers into `large`.
    pub fn contents_large(
        &mut self,
        t: Datatype,
        large: &mut [i64],
        aints: &mut [isize],
        types: impl FnMut(usize, Datatype),
    ) -> Result<()> {
        let n = large.len();
        self.contents_into(t, n, &mut |k, v| large[k] = v, aints, types)
    }

    fn contents_into(
        &mut self,
        t: Datatype,
        room: usize,
        ints: &mut dyn FnMut(usize, i64),
        aints: &mut [isize],
        mut types: impl FnMut(usize, Datatype),
    ) -> Result<()> {
        let e = *self.entry(t)?;
        if e.combiner == Combiner::Named {
            return Err(bad_arg(
                "MPI_Type_get_contents is not defined for predefined datatypes",
            ));
        }
        let a = e.args;
        if room < a.ints as usize || aints.len() < a.aints as usize {
            return Err(bad_arg("arrays shorter than MPI_Type_get_envelope says"));
        }
        let s = a.start as usize;
        for k in 0..a.ints as usize {
            ints(k, self.args[s + k]);
        }
        let s = s + a.ints as usize;
        for (k, v) in aints.iter_mut().take(a.aints as usize).enumerate() {
            *v = self.args[s + k] as isize;
        }
        let s = s + a.aints as usize;
        for k in 0..a.types as usize {
            if is_f90(e.combiner) {
                break;
            }
            let ty = Datatype(self.args[s + k] as u32);
            self.retain(ty);
            types(k, ty);
        }
        Ok(())
    }

    // ---- constructors -------------------------------------------------------------------------

    /// `MPI_Type_contiguous(_c)`.
    pub fn contiguous(&mut self, count: i64, old: Datatype) -> Result<Datatype> {
        if count < 0 {
            return Err(bad_count(count));
        }
        let block = |_| Block {
            ty: old,
            count: count as u64,
            disp: 0,
            stride: Stride::Extent,
        };
        self.make(
            Combiner::Contiguous,
            &[Ints::One(count)],
            &[],
            &[old],
            false,
            1,
            block,
        )
    }

    /// `MPI_Type_vector` (`stride` in extents of `old`) or `MPI_Type_create_hvector`
    /// (`stride_bytes`): exactly one of the two strides is given.
    pub fn vector(
        &mut self,
        count: i64,
        blocklen: i64,
        stride: Option<i64>,
        stride_bytes: Option<isize>,
        old: Datatype,
    ) -> Result<Datatype> {
        if count < 0 || blocklen < 0 {
            return Err(bad_count(count.min(blocklen)));
        }
        let ext = self.info(old)?.extent;
        let step = match (stride, stride_bytes) {
            (Some(s), None) => isize::try_from(s)
                .ok()
                .and_then(|s| s.checked_mul(ext))
                .ok_or_else(too_large)?,
            (None, Some(b)) => b,
            _ => return Err(bad_arg("a vector needs one stride")),
        };
        // A block of `blocklen` old types, then `count` blocks `step` bytes apart.
        let inner = |_| Block {
            ty: old,
            count: blocklen as u64,
            disp: 0,
            stride: Stride::Extent,
        };
        let block = self.build(Combiner::Contiguous, false, 1, inner)?;
        let outer = |_| Block {
            ty: block,
            count: count as u64,
            disp: 0,
            stride: Stride::Bytes(step),
        };
        let r = match stride {
            Some(s) => self.make(
                Combiner::Vector,
                &[Ints::One(count), Ints::One(blocklen), Ints::One(s)],
                &[],
                &[old],
                false,
                1,
                outer,
            ),
            None => self.make(
                Combiner::Hvector,
                &[Ints::One(count), Ints::One(blocklen)],
                &[Aints::One(step)],
                &[old],
                false,
                1,
                outer,
            ),
        };
        self.release(block);
        r
    }

    /// `MPI_Type_indexed` (`displs` in extents) or `MPI_Type_create_hindexed` (`displs_bytes`).
    pub fn indexed(
        &mut self,
        blocklens: &[i32],
        displs: Option<&[i32]>,
        displs_bytes: Option<&[isize]>,
        old: Datatype,
    ) -> Result<Datatype> {
        if let Some(&c) = blocklens.iter().find(|&&c| c < 0) {
            return Err(bad_count(c));
        }
        let ext = self.info(old)?.extent;
        let n = blocklens.len();
        check_scaled(displs.unwrap_or(&[]).iter().map(|&d| d as i64), ext)?;
        match (displs, displs_bytes) {
            (Some(d), None) if d.len() == n => self.make(
                Combiner::Indexed,
                &[Ints::One(n as i64), Ints::Many(blocklens), Ints::Many(d)],
                &[],
                &[old],
                false,
                n,
                |i| Block {
                    ty: old,
                    count: blocklens[i] as u64,
                    disp: d[i] as isize * ext,
                    stride: Stride::Extent,
                },
            ),
            (None, Some(d)) if d.len() == n => self.make(
                Combiner::Hindexed,
                &[Ints::One(n as i64), Ints::Many(blocklens)],
                &[Aints::Many(d)],
                &[old],
                false,
                n,
                |i| Block {
                    ty: old,
                    count: blocklens[i] as u64,
                    disp: d[i],
                    stride: Stride::Extent,
                },
            ),
            _ => Err(bad_arg("an indexed type needs one displacement per block")),
        }
    }

    /// `MPI_Type_create_indexed_block` (`displs` in extents) or `MPI_Type_create_hindexed_block`
    /// (`displs_bytes`).
    pub fn indexed_block(
        &mut self,
        blocklen: i64,
        displs: Option<&[i32]>,
        displs_bytes: Option<&[isize]>,
        old: Datatype,
    ) -> Result<Datatype> {
        if blocklen < 0 {
            return Err(bad_count(blocklen));
        }
        let ext = self.info(old)?.extent;
        check_scaled(displs.unwrap_or(&[]).iter().map(|&d| d as i64), ext)?;
        match (displs, displs_bytes) {
            (Some(d), None) => self.make(
                Combiner::IndexedBlock,
                &[
                    Ints::One(d.len() as i64),
                    Ints::One(blocklen),
                    Ints::Many(d),
                ],
                &[],
                &[old],
                false,
                d.len(),
                |i| Block {
                    ty: old,
                    count: blocklen as u64,
                    disp: d[i] as isize * ext,
                    stride: Stride::Extent,
                },
            ),
            (None, Some(d)) => self.make(
                Combiner::HindexedBlock,
                &[Ints::One(d.len() as i64), Ints::One(blocklen)],
                &[Aints::Many(d)],
                &[old],
                false,
                d.len(),
                |i| Block {
                    ty: old,
                    count: blocklen as u64,
                    disp: d[i],
                    stride: Stride::Extent,
                },
            ),
            _ => Err(bad_arg("an indexed-block type needs displacements")),
        }
    }

    /// `MPI_Type_create_struct`.
    pub fn create_struct(
        &mut self,
        blocklens: &[i32],
        displs: &[isize],
        types: &[Datatype],
    ) -> Result<Datatype> {
        let n = blocklens.len();
        if displs.len() != n || types.len() != n {
            return Err(bad_arg(
                "a struct needs a displacement and a type per block",
            ));
        }
        if let Some(&c) = blocklens.iter().find(|&&c| c < 0) {
            return Err(bad_count(c));
        }
        self.make(
            Combiner::Struct,
            &[Ints::One(n as i64), Ints::Many(blocklens)],
            &[Aints::Many(displs)],
            types,
            true,
            n,
            |i| Block {
                ty: types[i],
                count: blocklens[i] as u64,
                disp: displs[i],
                stride: Stride::Extent,
            },
        )
    }

    /// `MPI_Type_create_resized`.
    pub fn resized(&mut self, old: Datatype, lb: isize, extent: isize) -> Result<Datatype> {
        if lb.checked_add(extent).is_none() {
            return Err(too_large());
        }
        let t = self.copy_of(old, |e, nodes| {
            e.info.lb = lb;
            e.info.extent = extent;
            e.info.explicit_lb = true;
            e.info.explicit_ub = true;
            e.info.dense_at = dense_at(nodes, &e.info);
        })?;
        self.finish(
            t,
            Combiner::Resized,
            &[],
            &[Aints::One(lb), Aints::One(extent)],
            &[old],
        )
    }

    /// `MPI_Type_dup`.
    pub fn dup(&mut self, old: Datatype) -> Result<Datatype> {
        let committed = self.entry(old)?.committed;
        // A duplicate is committed if its original is.
        let t = self.copy_of(old, |e, _| e.committed = committed)?;
        self.finish(t, Combiner::Dup, &[], &[], &[old])
    }

    /// `MPI_Type_create_f90_integer` (`args` `[r]`), `_real` and `_complex` (`[p, r]`): a
    /// committed copy of predefined `base` whose envelope names `combiner` and `args`, as MPI
    /// describes these types. The standard calls them predefined (never freed), so one type is
    /// made per argument set and handed out again.
    pub fn f90(&mut self, combiner: Combiner, base: Datatype, args: &[i64]) -> Result<Datatype> {
        let key = [
            args.first().copied().unwrap_or(0),
            args.get(1).copied().unwrap_or(0),
        ];
        if let Some(&(.., t)) = self
            .f90
            .iter()
            .find(|(c, k, _)| *c == combiner && *k == key)
        {
            return Ok(t);
        }
        let t = self.copy_of(base, |e, _| e.committed = true)?;
        let ints: heapless::Vec<Ints<'_>, 2> = args.iter().map(|&v| Ints::One(v)).collect();
        // The base is kept as the type it was made from (for reductions), not listed by the
        // envelope.
        let t = self.finish(t, combiner, &ints, &[], &[base])?;
        // A full cache only costs a type per call.
        let _ = self.f90.push((combiner, key, t));
        Ok(t)
    }

    /// `MPI_Type_create_subarray`.
    pub fn subarray(
        &mut self,
        sizes: &[i32],
        subsizes: &[i32],
        starts: &[i32],
        order: Order,
        old: Datatype,
    ) -> Result<Datatype> {
        let nd = sizes.len();
        if nd == 0 || nd > MAX_DEPTH || subsizes.len() != nd || starts.len() != nd {
            return Err(bad_arg(
                "a subarray needs sizes, subsizes and starts for each of 1..=16 dimensions",
            ));
        }
        for d in 0..nd {
            // In i64: `start + subsize` of two i32s may not fit one (it wrapped, and a start
            // past the array's end was taken).
            if sizes[d] <= 0
                || subsizes[d] <= 0
                || starts[d] < 0
                || starts[d] as i64 + subsizes[d] as i64 > sizes[d] as i64
            {
                return Err(bad_arg(
                    "subarray dimension out of range (need 0 < subsize and start + subsize <= size)",
                ));
            }
        }
        let t = self.grid(nd, order, old, |d, iv| {
            let _ = iv.push((starts[d] as i64, subsizes[d] as i64));
            Ok(sizes[d])
        })?;
        let ord = order_code(order);
        self.finish(
            t,
            Combiner::Subarray,
            &[
                Ints::One(nd as i64),
                Ints::Many(sizes),
                Ints::Many(subsizes),
                Ints::Many(starts),
                Ints::One(ord),
            ],
            &[],
            &[old],
        )
    }

    /// `MPI_Type_create_darray`.
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        &mut self,
        size: i32,
        rank: i32,
        gsizes: &[i32],
        distribs: &[Distrib],
        dargs: &[i32],
        psizes: &[i32],
        order: Order,
        old: Datatype,
    ) -> Result<Datatype> {
        let nd = gsizes.len();
        if nd == 0
            || nd > MAX_DEPTH
            || distribs.len() != nd
            || dargs.len() != nd
            || psizes.len() != nd
        {
            return Err(bad_arg(
                "a darray needs gsizes, distribs, dargs and psizes for each of 1..=16 dimensions",
            ));
        }
        // Checked: sixteen i32 factors overflow an i64 (and a wrapped product could equal
        // `size`).
        let procs = psizes
            .iter()
            .try_fold(1i64, |a, &p| a.checked_mul(p as i64));
        if psizes.iter().any(|&p| p <= 0) || procs != Some(size as i64) || rank < 0 || rank >= size
        {
            return Err(bad_arg(
                "darray: the process grid does not have `size` processes, or rank is outside it",
            ));
        }
        for d in 0..nd {
            let (g, p, k) = (gsizes[d] as i64, psizes[d] as i64, dargs[d]);
            if g <= 0 {
                return Err(bad_arg("darray: global sizes must be positive"));
            }
            if distribs[d] == Distrib::None && p != 1 {
                return Err(bad_arg(
                    "darray: MPI_DISTRIBUTE_NONE needs a process grid size of 1",
                ));
            }
            if k != DFLT_DARG && k <= 0 {
                return Err(bad_arg("darray: a distribution argument must be positive"));
            }
            if distribs[d] == Distrib::Block && k != DFLT_DARG && k as i64 * p < g {
                return Err(bad_arg(
                    "darray: block size times processes does not cover the dimension",
                ));
            }
        }
        // Process coordinates: the grid is row-major whatever the array's order.
        let mut coords = [0i64; MAX_DEPTH];
        let mut r = rank as i64;
        for d in (0..nd).rev() {
            coords[d] = r % psizes[d] as i64;
            r /= psizes[d] as i64;
        }
        let t = self.grid(nd, order, old, |d, iv| {
            let (g, p, c) = (gsizes[d] as i64, psizes[d] as i64, coords[d]);
            match distribs[d] {
                Distrib::None => {
                    let _ = iv.push((0, g));
                }
                Distrib::Block => {
                    let b = if dargs[d] == DFLT_DARG {
                        (g + p - 1) / p
                    } else {
                        dargs[d] as i64
                    };
                    let (lo, hi) = ((c * b).min(g), ((c + 1) * b).min(g));
                    let _ = iv.push((lo, hi - lo));
                }
                Distrib::Cyclic => {
                    let k = if dargs[d] == DFLT_DARG {
                        1
                    } else {
                        dargs[d] as i64
                    };
                    let mut start = c * k;
                    while start < g {
                        iv.push((start, k.min(g - start))).map_err(|_| {
                            bad_arg("darray: more than 256 cyclic blocks in one dimension")
                        })?;
                        start += k * p;
                    }
                }
            }
            Ok(gsizes[d])
        })?;
        let mut dist: Vec<i64, MAX_DEPTH> = Vec::new();
        for x in distribs {
            let _ = dist.push(match x {
                Distrib::None => DISTRIBUTE_NONE,
                Distrib::Block => DISTRIBUTE_BLOCK,
                Distrib::Cyclic => DISTRIBUTE_CYCLIC,
            });
        }
        let mut di: Vec<i32, MAX_DEPTH> = Vec::new();
        for v in &dist {
            let _ = di.push(*v as i32);
        }
        self.finish(
            t,
            Combiner::Darray,
            &[
                Ints::One(size as i64),
                Ints::One(rank as i64),
                Ints::One(nd as i64),
                Ints::Many(gsizes),
                Ints::Many(&di),
                Ints::Many(dargs),
                Ints::Many(psizes),
                Ints::One(order_code(order)),
            ],
            &[],
            &[old],
        )
    }

    /// A selection in a multidimensional array of `old`: dimension by dimension from the fastest
    /// varying, `dim(d, intervals)` lists the selected `(start, count)` intervals of dimension `d`
    /// and returns its global size; each level is resized to its whole dimension (lb 0).
    fn grid(
        &mut self,
        nd: usize,
        order: Order,
        old: Datatype,
        mut dim: impl FnMut(usize, &mut Intervals) -> Result<i32>,
    ) -> Result<Datatype> {
        let mut t = old;
        self.retain(t);
        for step in 0..nd {
            let d = match order {
                Order::C => nd - 1 - step,
                Order::Fortran => step,
            };
            let mut iv = Intervals::new();
            let g = dim(d, &mut iv);
            let made = g.and_then(|g| {
                let ext = self.info(t)?.extent;
                check_scaled(iv.iter().map(|&(at, _)| at).chain([g as i64]), ext)?;
                let prev = t;
                let selected = self.build(Combiner::Hindexed, false, iv.len(), |i| Block {
                    ty: prev,
                    count: iv[i].1 as u64,
                    disp: iv[i].0 as isize * ext,
                    stride: Stride::Extent,
                })?;
                let whole = self.resized(selected, 0, g as isize * ext);
                self.release(selected);
                whole
            });
            self.release(t);
            t = made?;
        }
        Ok(t)
    }

    /// A new entry with the description and info of `old`, as `edit` (given the description)
    /// changes it.
    fn copy_of(
        &mut self,
        old: Datatype,
        edit: impl FnOnce(&mut Entry, &[Node]),
    ) -> Result<Datatype> {
        self.reclaim();
        let e = *self.entry(old)?;
        let start = self.alloc_nodes(e.nodes.1)?;
        let (from, len) = (e.nodes.0 as usize, e.nodes.1 as usize);
        self.nodes.copy_within(from..from + len, start as usize);
        let mut new = Entry {
            info: e.info,
            nodes: (start, e.nodes.1),
            combiner: Combiner::Dup,
            args: Args::default(),
            committed: false,
            refs: 1,
        };
        edit(&mut new, &self.nodes[start as usize..start as usize + len]);
        self.insert(new)
            .inspect_err(|_| self.node_ranges.release(start, e.nodes.1))
    }

    /// Builds a type from blocks and records its constructor arguments.
    #[allow(clippy::too_many_arguments)]
    fn make(
        &mut self,
        combiner: Combiner,
        ints: &[Ints<'_>],
        aints: &[Aints<'_>],
        types: &[Datatype],
        is_struct: bool,
        n: usize,
        block: impl Fn(usize) -> Block,
    ) -> Result<Datatype> {
        let t = self.build(combiner, is_struct, n, block)?;
        self.finish(t, combiner, ints, aints, types)
    }

    /// Records the constructor arguments of new type `t`, taking references on `types`; frees
    /// `t` if they do not fit.
    fn finish(
        &mut self,
        t: Datatype,
        combiner: Combiner,
        ints: &[Ints<'_>],
        aints: &[Aints<'_>],
        types: &[Datatype],
    ) -> Result<Datatype> {
        let count = |i: &Ints<'_>| match i {
            Ints::One(_) => 1,
            Ints::Many(s) => s.len(),
        };
        let ni: usize = ints.iter().map(count).sum();
        let na: usize = aints
            .iter()
            .map(|a| match a {
                Aints::One(_) => 1,
                Aints::Many(s) => s.len(),
            })
            .sum();
        let total = (ni + na + types.len()) as u32;
        let start = match self.args.alloc(
            &mut self.arg_ranges,
            total,
            "datatype constructor arguments",
            MAX_ARGS.name,
        ) {
            Ok(start) => start,
            Err(e) => {
                self.release(t);
                return Err(e);
            }
        };
        let mut k = start as usize;
        for i in ints {
            match i {
                Ints::One(v) => {
                    self.args[k] = *v;
                    k += 1;
                }
                Ints::Many(s) => {
                    for v in s.iter() {
                        self.args[k] = *v as i64;
                        k += 1;
                    }
                }
            }
        }
        for a in aints {
            match a {
                Aints::One(v) => {
                    self.args[k] = *v as i64;
                    k += 1;
                }
                Aints::Many(s) => {
                    for v in s.iter() {
                        self.args[k] = *v as i64;
                        k += 1;
                    }
                }
            }
        }
        for ty in types {
            self.args[k] = ty.0 as i64;
            k += 1;
            self.retain(*ty);
        }
        let Some(e) = self.entries.at_mut(t.index()) else {
            return Err(Error::internal("a type being made is not in the table"));
        };
        e.combiner = combiner;
        let made_from = core::mem::replace(
            &mut e.args,
            Args {
                start,
                ints: ni as u32,
                aints: na as u32,
                types: types.len() as u32,
            },
        );
        // A subarray or darray is the last level of its grid, a resize that held the level
        // below it: that reference goes with the resize's arguments.
        self.drop_args(made_from);
        Ok(t)
    }

    /// Builds a type from `n` blocks, flattening their types' descriptions.
    fn build(
        &mut self,
        combiner: Combiner,
        is_struct: bool,
        n: usize,
        block: impl Fn(usize) -> Block,
    ) -> Result<Datatype> {
        // Upper bound of the nodes: each block takes its type's nodes and maybe a loop.
        // The bounds first: a type whose size or bounds do not fit is refused before it costs
        // anything.
        let mut bound = 0usize;
        let mut acc = Bounds::new();
        for i in 0..n {
            let b = block(i);
            let e = self.entry(b.ty)?;
            if b.count > 0 {
                bound += 1 + e.nodes.1 as usize;
            }
            let stride = match b.stride {
                Stride::Extent => e.info.extent,
                Stride::Bytes(s) => s,
            };
            acc.add(&b, stride, &e.info);
        }
        let mut info = acc.finish(is_struct).ok_or_else(too_large)?;
        self.reclaim();
        let start = self.alloc_nodes(bound as u32)?;
        let mut w = start as usize;
        for i in 0..n {
            let b = block(i);
            let e = *self.entry(b.ty)?;
            let stride = match b.stride {
                Stride::Extent => e.info.extent,
                Stride::Bytes(s) => s,
            };
            if b.count == 0 || e.info.elems == 0 {
                continue;
            }
            w = self.emit(&b, stride, &e, w);
        }
        let len = merge_runs(&mut self.nodes[start as usize..w]);
        let used = len as u32;
        self.node_ranges.release(start + used, bound as u32 - used);
        let nodes = &self.nodes[start as usize..start as usize + len];
        info.depth = depth_of(nodes);
        if info.depth as usize > MAX_DEPTH {
            self.node_ranges.release(start, used);
            return Err(bad_arg("datatype nested more than 16 loop levels deep"));
        }
        info.uniform = uniform_of(nodes);
        info.dense_at = dense_at(nodes, &info);
        self.insert(Entry {
            info,
            nodes: (start, used),
            combiner,
            args: Args::default(),
            committed: false,
            refs: 1,
        })
        .inspect_err(|_| self.node_ranges.release(start, used))
    }

    /// Writes the nodes of one block at `w`; returns the new write position.
    fn emit(&mut self, b: &Block, stride: isize, e: &Entry, mut w: usize) -> usize {
        let (s, n) = (e.nodes.0 as usize, e.nodes.1 as usize);
        // A single run that fills the stride: the copies are one longer run.
        if let (1, Node::Run { disp, count, basic }) = (n, self.nodes[s]) {
            if (count * basic.size as u64) as isize == stride {
                self.nodes[w] = Node::Run {
                    disp: b.disp + disp,
                    count: count * b.count,
                    basic,
                };
                return w + 1;
            }
        }
        if b.count == 1 {
            // One copy: the nodes shifted (only the top level; loop bodies are relative).
            self.nodes.copy_within(s..s + n, w);
            let mut i = w;
            while i < w + n {
                self.nodes[i] = self.nodes[i].shifted(b.disp);
                i += self.nodes[i].span();
            }
            return w + n;
        }
        self.nodes[w] = Node::Loop {
            disp: b.disp,
            count: b.count,
            stride,
            body: n as u32,
            packed: e.info.size,
        };
        w += 1;
        self.nodes.copy_within(s..s + n, w);
        w + n
    }
}

/// `MPI_ORDER_C` and `MPI_ORDER_FORTRAN` as MPICH numbers them.
fn order_code(order: Order) -> i64 {
    match order {
        Order::C => 56,
        Order::Fortran => 57,
    }
}

/// `MPI_DISTRIBUTE_*` as MPICH numbers them (a darray's recorded arguments).
pub(crate) const DISTRIBUTE_BLOCK: i64 = 121;
/// `MPI_DISTRIBUTE_CYCLIC`.
pub(crate) const DISTRIBUTE_CYCLIC: i64 = 122;
/// `MPI_DISTRIBUTE_NONE`.
pub(crate) const DISTRIBUTE_NONE: i64 = 123;

/// The error of a type whose size, extent or displacements do not fit.
fn too_large() -> Error {
    Error::new(
        ErrorClass::Type,
        Reason::BadArgument {
            what: "the datatype's size, extent or bounds would not fit in an MPI_Count",
        },
    )
}

/// Displacements given in extents of `ext` bytes must fit in bytes.
fn check_scaled(displs: impl IntoIterator<Item = i64>, ext: isize) -> Result<()> {
    let fits = |d: i64| isize::try_from(d).ok().and_then(|d| d.checked_mul(ext));
    match displs.into_iter().all(|d| fits(d).is_some()) {
        true => Ok(()),
        false => Err(too_large()),
    }
}

/// Bounds of a type being built, by the standard's rules.
struct Bounds {
    lb: isize,
    ub: isize,
    slb: Option<isize>,
    sub: Option<isize>,
    tlb: isize,
    tub: isize,
    any_data: bool,
    any: bool,
    size: u64,
    elems: u64,
    align: u8,
    /// A block's size or bounds overflowed.
    overflow: bool,
}

impl Bounds {
    fn new() -> Bounds {
        Bounds {
            lb: isize::MAX,
            ub: isize::MIN,
            slb: None,
            sub: None,
            tlb: isize::MAX,
            tub: isize::MIN,
            any_data: false,
            any: false,
            size: 0,
            elems: 0,
            align: 1,
            overflow: false,
        }
    }

    /// Takes block `b` in; arithmetic that overflows marks the type as too large.
    fn add(&mut self, b: &Block, stride: isize, t: &TypeInfo) {
        if b.count == 0 {
            return;
        }
        if self.add_checked(b, stride, t).is_none() {
            self.overflow = true;
        }
    }

    fn add_checked(&mut self, b: &Block, stride: isize, t: &TypeInfo) -> Option<()> {
        let span = isize::try_from(b.count - 1).ok()?.checked_mul(stride)?;
        let (lo_s, hi_s) = (span.min(0), span.max(0));
        let lo = b.disp.checked_add(t.lb)?.checked_add(lo_s)?;
        let hi = b
            .disp
            .checked_add(t.lb)?
            .checked_add(t.extent)?
            .checked_add(hi_s)?;
        let tlo = b.disp.checked_add(t.true_lb)?.checked_add(lo_s)?;
        let thi = b
            .disp
            .checked_add(t.true_lb)?
            .checked_add(t.true_extent)?
            .checked_add(hi_s)?;
        let size = self.size.checked_add(b.count.checked_mul(t.size)?)?;
        let elems = self.elems.checked_add(b.count.checked_mul(t.elems)?)?;
        // Sizes are reported as an MPI_Count (64-bit signed).
        if size > i64::MAX as u64 {
            return None;
        }
        self.any = true;
        self.lb = self.lb.min(lo);
        self.ub = self.ub.max(hi);
        if t.explicit_lb {
            self.slb = Some(self.slb.map_or(lo, |s| s.min(lo)));
        }
        if t.explicit_ub {
            self.sub = Some(self.sub.map_or(hi, |s| s.max(hi)));
        }
        if t.elems > 0 {
            self.any_data = true;
            self.tlb = self.tlb.min(tlo);
            self.tub = self.tub.max(thi);
        }
        self.size = size;
        self.elems = elems;
        self.align = self.align.max(t.align);
        Some(())
    }

    /// The type's facts; `None` when its size, extent or bounds do not fit.
    fn finish(self, is_struct: bool) -> Option<TypeInfo> {
        if self.overflow {
            return None;
        }
        let (mut lb, mut ub) = if self.any { (self.lb, self.ub) } else { (0, 0) };
        if let Some(s) = self.slb {
            lb = s;
        }
        if let Some(s) = self.sub {
            ub = s;
        }
        if is_struct && self.sub.is_none() && self.any {
            // The C compiler pads a struct to its alignment; users expect MPI to agree.
            let a = self.align as isize;
            let ext = ub.checked_sub(lb)?;
            ub = lb.checked_add(ext.checked_add(a - 1)? / a * a)?;
        }
        let (tlb, tub) = if self.any_data {
            (self.tlb, self.tub)
        } else {
            (0, 0)
        };
        Some(TypeInfo {
            size: self.size,
            lb,
            extent: ub.checked_sub(lb)?,
            true_lb: tlb,
            true_extent: tub.checked_sub(tlb)?,
            elems: self.elems,
            explicit_lb: self.slb.is_some(),
            explicit_ub: self.sub.is_some(),
            align: self.align,
            dense_at: None,
            depth: 0,
            uniform: None,
        })
    }
}

/// Merges neighbouring top-level runs of one element kind that touch in memory; returns the new
/// length.
fn merge_runs(nodes: &mut [Node]) -> usize {
    let mut w: usize = 0;
    // Output position of the last top-level node when it is a run (loop bodies never merge).
    let mut last_run: Option<usize> = None;
    let mut i = 0;
    while i < nodes.len() {
        let span = nodes[i].span();
        if let (Some(prev), Node::Run { disp, count, basic }) = (last_run, nodes[i]) {
            if let Node::Run {
                disp: pd,
                count: pc,
                basic: pb,
            } = nodes[prev]
            {
                if pb == basic && pd + (pc * pb.size as u64) as isize == disp {
                    nodes[prev] = Node::Run {
                        disp: pd,
                        count: pc + count,
                        basic,
                    };
                    i += 1;
                    continue;
                }
            }
        }
        nodes.copy_within(i..i + span, w);
        last_run = (span == 1).then_some(w);
        w += span;
        i += span;
    }
    w
}

fn depth_of(nodes: &[Node]) -> u8 {
    let mut depth = 0u8;
    let mut i = 0;
    while i < nodes.len() {
        if let Node::Loop { body, .. } = nodes[i] {
            let inner = depth_of(&nodes[i + 1..i + 1 + body as usize]);
            depth = depth.max(inner.saturating_add(1));
        }
        i += nodes[i].span();
    }
    depth
}

fn uniform_of(nodes: &[Node]) -> Option<Basic> {
    let mut u = None;
    for n in nodes {
        if let Node::Run { basic, .. } = n {
            match u {
                None => u = Some(*basic),
                Some(b) if b == *basic => {}
                Some(_) => return None,
            }
        }
    }
    u
}

fn dense_at(nodes: &[Node], info: &TypeInfo) -> Option<isize> {
    match nodes {
        [Node::Run { disp, count, basic }]
            if count * basic.size as u64 == info.size && info.size as isize == info.extent =>
        {
            Some(*disp)
        }
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;

    /// A table with the default capacities.
    pub fn table() -> TypeTable {
        let params = Params::new(&[]);
        let mut s = Sizer::default();
        TypeTable::size(&params, &mut s);
        let mut arena = Arena::new(leak(s.bytes()));
        arena.set_account(crate::memory::tests::account(1 << 30));
        TypeTable::new(&params, &mut arena).unwrap()
    }

    /// Type `i` of a family nested 6 deep: struct, vector, resized, hvector, struct, resized.
    fn nested(t: &mut TypeTable, i: usize) -> Datatype {
        let k = 2 + 2 * (i % 2) as i32;
        let l1 = t
            .create_struct(
                &[1, 1, k],
                &[0, 8, 16],
                &[Datatype::INT, Datatype::DOUBLE, Datatype::INT],
            )
            .unwrap();
        let l2 = t.vector(2 + (i % 3) as i64, 1, Some(2), None, l1).unwrap();
        let e2 = t.info(l2).unwrap().extent;
        let l3 = t.resized(l2, 0, e2 + 8).unwrap();
        let l4 = t.vector(2, 1, None, Some(e2 + 16), l3).unwrap();
        let e4 = t.info(l4).unwrap().extent;
        let l5 = t
            .create_struct(&[1, 1], &[0, e2], &[l4, Datatype::DOUBLE])
            .unwrap();
        let l6 = t.resized(l5, 0, e4 + 16).unwrap();
        for made in [l1, l2, l3, l4, l5] {
            t.free(made).unwrap();
        }
        t.commit(l6).unwrap();
        l6
    }

    #[test]
    fn sizes_that_do_not_fit_are_refused_not_wrapped() {
        let mut t = table();
        // 2^33 bytes, then 2^62: still fine.
        let a = t.contiguous(1 << 30, Datatype::DOUBLE).unwrap();
        let b = t.contiguous(1 << 29, a).unwrap();
        assert_eq!(t.info(b).unwrap().size, 1 << 62);
        // 2^63 and 2^65 bytes do not fit an MPI_Count.
        for n in [2, 8] {
            let e = t.contiguous(n, b).unwrap_err();
            assert_eq!(e.class, ErrorClass::Type, "{n} x 2^62");
        }
        let e = t.vector(3, 1, Some(1 << 30), None, b).unwrap_err();
        assert_eq!(e.class, ErrorClass::Type);
        let e = t.indexed(&[1], Some(&[1 << 30]), None, b).unwrap_err();
        assert_eq!(e.class, ErrorClass::Type);
        let e = t.resized(Datatype::INT, isize::MAX, 8).unwrap_err();
        assert_eq!(e.class, ErrorClass::Type);
        // A negative stride that reaches below the address space is refused too.
        let e = t.vector(4, 1, Some(-(1 << 30)), None, b).unwrap_err();
        assert_eq!(e.class, ErrorClass::Type);
    }

    #[test]
    fn a_subarray_starting_past_its_array_is_refused_whatever_the_sum_of_i32s() {
        // Found by fuzzing (datatype_ctor): `start + subsize` wrapped to a negative i32, so a
        // start of i32::MAX in an array of 4 passed the check.
        let mut t = table();
        let e = t
            .subarray(&[4], &[1], &[i32::MAX], Order::C, Datatype::INT)
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
        let e = t
            .subarray(
                &[4, i32::MAX],
                &[1, i32::MAX],
                &[0, 1],
                Order::C,
                Datatype::INT,
            )
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
        // A process grid whose size overflows an i64 is refused, not multiplied with wrapping.
        let big = [i32::MAX; 3];
        let none = [Distrib::None; 3];
        let e = t
            .darray(
                6,
                0,
                &[1, 1, 1],
                &none,
                &[DFLT_DARG; 3],
                &big,
                Order::C,
                Datatype::INT,
            )
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Arg);
        assert_eq!(t.derived_in_use(), 0);
    }

    #[test]
    fn ten_thousand_nested_types_grow_the_table_and_all_go_back() {
        let mut t = table();
        let (entries, nodes, args) = (t.entries.capacity(), t.nodes.len(), t.args.len());
        let types: std::vec::Vec<Datatype> = (0..10_000).map(|i| nested(&mut t, i)).collect();
        // Every level lives on inside the top one: six entries a type.
        assert_eq!(t.derived_in_use(), 60_000);
        assert!(t.entries.capacity() > entries && t.nodes.len() > nodes && t.args.len() > args);
        for (i, ty) in types.iter().enumerate() {
            let info = t.info(*ty).unwrap();
            let k = 2 + 2 * (i % 2) as u64;
            let c2 = 2 + (i % 3) as u64;
            assert_eq!(info.size, (12 + 4 * k) * c2 * 2 + 8, "type {i}");
            assert_eq!(t.old_types(*ty).unwrap().count(), 1);
        }
        // A type in the grown part, held by an operation while its user frees it, stays until
        // the operation lets go (its counter did not move when the table grew).
        let last = types[9_999];
        let hold = t.hold(last).unwrap();
        for ty in &types {
            t.free(*ty).unwrap();
        }
        assert_eq!(t.derived_in_use(), 6, "the held type and the five below it");
        assert_eq!(t.info(last).unwrap().size, (12 + 4 * 4) * 2 * 2 + 8);
        hold.fetch_sub(1, Ordering::Relaxed);
        let again = nested(&mut t, 0);
        assert_eq!(
            t.derived_in_use(),
            6,
            "reclaimed when the next type was made"
        );
        t.free(again).unwrap();
        assert_eq!(t.derived_in_use(), 0);
    }

    #[test]
    fn the_type_table_s_maximum_is_named() {
        let mut params = Params::new(&[]);
        params.register(&MAX_TYPES).unwrap();
        params.set("dt_max_types", "16").unwrap();
        let mut s = Sizer::default();
        TypeTable::size(&params, &mut s);
        let mut arena = Arena::new(leak(s.bytes()));
        arena.set_account(crate::memory::tests::account(1 << 30));
        let mut t = TypeTable::new(&params, &mut arena).unwrap();
        for _ in 0..16 {
            t.contiguous(2, Datatype::INT).unwrap();
        }
        let e = t.contiguous(2, Datatype::INT).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "dt_max_types",
                ..
            }
        ));
    }
}
