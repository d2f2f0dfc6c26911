//! Process topologies: Cartesian grids, graphs and distributed graphs attached to
//! communicators, their queries, and the neighbourhood collectives that follow their edges.
//!
//! A topology is a description in a bounded store of ints (dims and periods; index and edges;
//! sources, destinations and weights), shared by reference between a communicator and its
//! duplicates. Making a topology communicator is a split of the old one (stormpi does not
//! reorder ranks) with the description attached.

use crate::arena::{Arena, Sizer};
use crate::comm::create::UNDEFINED;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef};
use crate::pml::request::PROC_NULL;
use crate::ranges::{Ranges, Store};

/// `topo_max`.
pub static TOPO_MAX: ParamDef = ParamDef {
    name: "topo_max",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(1 << 16),
    description: "Most topologies (Cartesian, graph, distributed graph) alive at once; the table \
                  starts at 16 and grows within mpi_memory_max; at most 2^16 (a topology's id is \
                  16 bits)",
};

/// `topo_max_ints`.
pub static TOPO_MAX_INTS: ParamDef = ParamDef {
    name: "topo_max_ints",
    kind: Kind::Int {
        min: 64,
        max: u32::MAX as i64,
    },
    default: Default::Int(u32::MAX as i64),
    description: "Most ints over all topology descriptions (dims, periods, graph edges, \
                  weights); the store starts at 1024 and grows within mpi_memory_max",
};

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 2] = [&TOPO_MAX, &TOPO_MAX_INTS];

/// A topology of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopoId(pub u16);

/// The kind of a topology, with the sizes of its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A grid: `ndims` dims then `ndims` periods (0/1).
    Cart {
        /// Number of dimensions.
        ndims: u32,
    },
    /// A graph: `nnodes` cumulative degrees then `nedges` neighbours.
    Graph {
        /// Number of nodes.
        nnodes: u32,
        /// Number of edge entries.
        nedges: u32,
    },
    /// This process's edges of a distributed graph: sources, their weights, destinations,
    /// their weights.
    DistGraph {
        /// Number of sources.
        indegree: u32,
        /// Number of destinations.
        outdegree: u32,
        /// Whether weights were given.
        weighted: bool,
    },
}

impl Shape {
    fn ints(&self) -> u32 {
        match *self {
            Shape::Cart { ndims } => 2 * ndims,
            Shape::Graph { nnodes, nedges } => nnodes + nedges,
            Shape::DistGraph {
                indegree,
                outdegree,
                ..
            } => 2 * (indegree + outdegree),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    shape: Shape,
    at: u32,
    refs: u32,
}

/// Topology entries carved at init (the table grows from there).
const ENTRIES_INITIAL: usize = 16;
/// Description ints carved at init.
const INTS_INITIAL: usize = 1024;

/// All topologies of the process.
pub struct TopoTable {
    entries: Store<Option<Entry>>,
    store: Store<i32>,
    ranges: Ranges,
}

fn topo_error(what: &'static str) -> Error {
    Error::new(ErrorClass::Topology, Reason::BadArgument { what })
}

impl TopoTable {
    /// Arena bytes (the initial sizes) for at most `entries` topologies of `ints` ints in all.
    pub fn size(sizer: &mut Sizer, entries: u32, ints: u32) {
        Store::<Option<Entry>>::size(sizer, ENTRIES_INITIAL, entries as usize);
        Store::<i32>::size(sizer, INTS_INITIAL, ints as usize);
    }

    /// An empty table, growing through `arena`'s memory account up to `entries` topologies of
    /// `ints` ints in all.
    pub fn new(arena: &mut Arena, entries: u32, ints: u32) -> Result<TopoTable> {
        let (entries, _) = Store::new(arena, ENTRIES_INITIAL, entries as usize, None)?;
        let (store, ranges) = Store::new(arena, INTS_INITIAL, ints as usize, 0)?;
        Ok(TopoTable {
            entries,
            store,
            ranges,
        })
    }

    /// A new topology (one reference) whose ints `fill` writes.
    pub fn create(&mut self, shape: Shape, fill: impl FnOnce(&mut [i32])) -> Result<TopoId> {
        let slot = match self.entries.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let i = self.entries.len();
                self.entries.extend(1, "topology table", TOPO_MAX.name)?;
                i
            }
        };
        let n = shape.ints();
        let at = self
            .store
            .alloc(&mut self.ranges, n, "topology store", TOPO_MAX_INTS.name)?;
        fill(&mut self.store[at as usize..(at + n) as usize]);
        self.entries[slot] = Some(Entry { shape, at, refs: 1 });
        Ok(TopoId(slot as u16))
    }

    /// Takes a reference on `t`.
    pub fn retain(&mut self, t: TopoId) {
        if let Some(Some(e)) = self.entries.get_mut(t.0 as usize) {
            e.refs += 1;
        }
    }

    /// Drops a reference on `t`.
    pub fn release(&mut self, t: TopoId) {
        let Some(slot) = self.entries.get_mut(t.0 as usize) else {
            return;
        };
        if let Some(e) = slot {
            e.refs -= 1;
            if e.refs == 0 {
                self.ranges.release(e.at, e.shape.ints());
                *slot = None;
            }
        }
    }

    /// The shape of `t` and its ints.
    pub fn get(&self, t: TopoId) -> Option<(Shape, &[i32])> {
        let e = self.entries.get(t.0 as usize).copied().flatten()?;
        Some((
            e.shape,
            &self.store[e.at as usize..(e.at + e.shape.ints()) as usize],
        ))
    }

    /// Topologies alive (for leak checks).
    pub fn count(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }
}

/// A Cartesian grid's dims and periods.
#[derive(Clone, Copy, Debug)]
pub struct Cart<'a> {
    /// Extent of each dimension.
    pub dims: &'a [i32],
    /// Whether each dimension wraps around (0/1).
    pub periods: &'a [i32],
}

impl Cart<'_> {
    /// Number of grid points.
    pub fn nodes(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }

    /// The coordinates of `rank` (row-major), written to `out`.
    pub fn coords(&self, rank: u32, out: &mut [i32]) {
        let mut r = rank as i64;
        for i in (0..self.dims.len()).rev() {
            let d = self.dims[i].max(1) as i64;
            out[i] = (r % d) as i32;
            r /= d;
        }
    }

    /// The rank at `coords` (periodic dimensions wrap; others must be in range).
    pub fn rank(&self, coords: &[i32]) -> Result<u32> {
        let mut r: i64 = 0;
        for (i, &c) in coords.iter().enumerate() {
            let d = self.dims[i] as i64;
            let mut c = c as i64;
            if self.periods[i] != 0 {
                c = c.rem_euclid(d);
            } else if c < 0 || c >= d {
                return Err(Error::new(
                    ErrorClass::Arg,
                    Reason::BadArgument {
                        what: "a coordinate is outside a non-periodic dimension",
                    },
                ));
            }
            r = r * d + c;
        }
        Ok(r as u32)
    }

    /// The ranks `disp` steps down and up dimension `dim` from `rank` (`MPI_Cart_shift`):
    /// (source, destination), `PROC_NULL` off a non-periodic edge.
    pub fn shift(&self, rank: u32, dim: usize, disp: i32) -> (i32, i32) {
        let mut c = [0i32; MAX_DIMS];
        let n = self.dims.len();
        self.coords(rank, &mut c[..n]);
        let at = |delta: i64| -> i32 {
            let mut cc = c;
            let d = self.dims[dim] as i64;
            let v = c[dim] as i64 + delta;
            if self.periods[dim] == 0 && (v < 0 || v >= d) {
                return PROC_NULL;
            }
            cc[dim] = v.rem_euclid(d) as i32;
            self.rank(&cc[..n]).map_or(PROC_NULL, |r| r as i32)
        };
        (at(-(disp as i64)), at(disp as i64))
    }
}

/// Most dimensions of a Cartesian topology.
pub const MAX_DIMS: usize = 32;

/// `MPI_Dims_create`: fills the zero entries of `dims` so that the product is `nnodes`, as
/// close to each other as possible, in non-increasing order.
pub fn dims_create(nnodes: i32, dims: &mut [i32]) -> Result<()> {
    if nnodes < 0 {
        return Err(Error::bad_arg("nnodes is negative"));
    }
    let mut fixed: i64 = 1;
    for &d in dims.iter() {
        if d < 0 {
            return Err(Error::new(
                ErrorClass::Dims,
                Reason::BadArgument {
                    what: "a dimension is negative",
                },
            ));
        }
        if d > 0 {
            fixed *= d as i64;
        }
    }
    let free = dims.iter().filter(|&&d| d == 0).count();
    if free == 0 {
        if fixed != nnodes as i64 {
            return Err(Error::new(
                ErrorClass::Dims,
                Reason::BadArgument {
                    what: "the given dimensions do not multiply to nnodes",
                },
            ));
        }
        return Ok(());
    }
    if nnodes == 0 || fixed == 0 || nnodes as i64 % fixed != 0 {
        return Err(Error::new(
            ErrorClass::Dims,
            Reason::BadArgument {
                what: "nnodes is not a multiple of the product of the given dimensions",
            },
        ));
    }
    let mut rest = nnodes as i64 / fixed;
    let mut out = [1i64; MAX_DIMS];
    let out = &mut out[..free.min(MAX_DIMS)];
    // Prime factors, largest first, each to the currently smallest dimension.
    let mut factors: heapless::Vec<i64, 64> = heapless::Vec::new();
    let mut p = 2;
    while p * p <= rest {
        while rest % p == 0 {
            let _ = factors.push(p);
            rest /= p;
        }
        p += 1;
    }
    if rest > 1 {
        let _ = factors.push(rest);
    }
    for &f in factors.iter().rev() {
        let i = (0..out.len()).min_by_key(|&i| out[i]).expect("free dims");
        out[i] *= f;
    }
    out.sort_unstable_by(|a, b| b.cmp(a));
    let mut k = 0;
    for d in dims.iter_mut() {
        if *d == 0 {
            *d = out[k] as i32;
            k += 1;
        }
    }
    Ok(())
}

/// Internal tags of neighbourhood collectives: one per (dimension, direction) for grids, so
/// that a peer that is both neighbours of a dimension gets each block in its slot (-0x200 down
/// to -0x23f; outside the collectives' range, see `coll`).
const TAG_NEIGHBOR: i32 = -0x200;
/// Internal tags of `MPI_Dist_graph_create`.
const TAG_DIST_COUNT: i32 = -0x1f0;
const TAG_DIST_IN: i32 = -0x1f1;
const TAG_DIST_OUT: i32 = -0x1f2;

impl Engine {
    /// The topology attached to `comm`.
    pub fn topology(&self, comm: CommId) -> Result<Option<(Shape, &[i32])>> {
        let c = self.check_comm(comm)?;
        Ok(c.topo.and_then(|t| self.comms.topos.get(t)))
    }

    /// The topology of `comm`, which must have one.
    fn topo_of(&self, comm: CommId) -> Result<(Shape, &[i32])> {
        if self.check_comm(comm)?.is_inter() {
            return Err(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument {
                    what: "topologies and neighbourhood collectives are not defined on \
                           intercommunicators",
                },
            ));
        }
        self.topology(comm)?
            .ok_or(topo_error("the communicator has no topology"))
    }

    /// The Cartesian topology of `comm`.
    pub fn cart(&self, comm: CommId) -> Result<Cart<'_>> {
        match self.topo_of(comm)? {
            (Shape::Cart { ndims }, ints) => Ok(Cart {
                dims: &ints[..ndims as usize],
                periods: &ints[ndims as usize..],
            }),
            _ => Err(topo_error("the communicator's topology is not Cartesian")),
        }
    }

    /// Splits `comm` into the first `nodes` ranks (others get none) and attaches a topology.
    fn topo_split(
        &mut self,
        comm: CommId,
        nodes: u64,
        shape: Shape,
        fill: impl FnOnce(&mut [i32]),
    ) -> Result<Option<CommId>> {
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            return Err(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument {
                    what: "topologies need an intracommunicator",
                },
            ));
        }
        if nodes > c.size() as u64 {
            return Err(topo_error(
                "the topology has more nodes than the communicator",
            ));
        }
        let rank = c.rank;
        let color = if (rank as u64) < nodes { 0 } else { UNDEFINED };
        // Checked for room before the collective step, so that all members fail alike.
        let topo = self.comms.topos.create(shape, fill);
        let new = self.comm_split(comm, if topo.is_ok() { color } else { UNDEFINED }, 0);
        match (topo, new) {
            (Ok(t), Ok(Some(n))) => {
                self.comms.get_mut(n)?.topo = Some(t);
                Ok(Some(n))
            }
            (Ok(t), other) => {
                self.comms.topos.release(t);
                other
            }
            (Err(e), Ok(Some(n))) => {
                let _ = self.comm_free(n);
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// `MPI_Cart_create` (ranks are not reordered).
    pub fn cart_create(
        &mut self,
        comm: CommId,
        dims: &[i32],
        periods: &[i32],
    ) -> Result<Option<CommId>> {
        if dims.len() > MAX_DIMS {
            return Err(Error::new(
                ErrorClass::Dims,
                Reason::BadArgument {
                    what: "more than 32 dimensions",
                },
            ));
        }
        if dims.iter().any(|&d| d <= 0) {
            return Err(Error::new(
                ErrorClass::Dims,
                Reason::BadArgument {
                    what: "a dimension is not positive",
                },
            ));
        }
        let nodes: u64 = dims.iter().map(|&d| d as u64).product();
        let n = dims.len();
        self.topo_split(comm, nodes, Shape::Cart { ndims: n as u32 }, |s| {
            s[..n].copy_from_slice(dims);
            for (o, &p) in s[n..].iter_mut().zip(periods) {
                *o = (p != 0) as i32;
            }
        })
    }

    /// `MPI_Cart_sub`: the sub-grids keeping the dimensions where `remain` is true.
    pub fn cart_sub(&mut self, comm: CommId, remain: &[bool]) -> Result<CommId> {
        let cart = self.cart(comm)?;
        let n = cart.dims.len();
        if remain.len() != n {
            return Err(Error::bad_arg("remain_dims has the wrong length"));
        }
        let rank = self.check_comm(comm)?.rank;
        let mut coords = [0i32; MAX_DIMS];
        cart.coords(rank, &mut coords[..n]);
        // Color: position among the dropped dims; key: position among the kept dims.
        let (mut color, mut key) = (0i64, 0i64);
        let mut dims = [0i32; MAX_DIMS];
        let mut periods = [0i32; MAX_DIMS];
        let mut k = 0;
        for i in 0..n {
            let d = cart.dims[i] as i64;
            if remain[i] {
                key = key * d + coords[i] as i64;
                dims[k] = cart.dims[i];
                periods[k] = cart.periods[i];
                k += 1;
            } else {
                color = color * d + coords[i] as i64;
            }
        }
        let shape = Shape::Cart { ndims: k as u32 };
        let topo = self.comms.topos.create(shape, |s| {
            s[..k].copy_from_slice(&dims[..k]);
            s[k..].copy_from_slice(&periods[..k]);
        });
        let color = if topo.is_ok() {
            color as i32
        } else {
            UNDEFINED
        };
        let new = self.comm_split(comm, color, key as i32);
        match (topo, new) {
            (Ok(t), Ok(Some(c))) => {
                self.comms.get_mut(c)?.topo = Some(t);
                Ok(c)
            }
            (Ok(t), Ok(None)) => {
                self.comms.topos.release(t);
                Err(topo_error("Cart_sub made no communicator"))
            }
            (Ok(t), Err(e)) => {
                self.comms.topos.release(t);
                Err(e)
            }
            (Err(e), Ok(Some(c))) => {
                let _ = self.comm_free(c);
                Err(e)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// `MPI_Graph_create` (ranks are not reordered): node `i`'s neighbours are
    /// `edges[index[i-1]..index[i]]`.
    pub fn graph_create(
        &mut self,
        comm: CommId,
        index: &[i32],
        edges: &[i32],
    ) -> Result<Option<CommId>> {
        let nnodes = index.len();
        let mut prev = 0;
        for &x in index {
            if x < prev {
                return Err(topo_error("index is not non-decreasing"));
            }
            prev = x;
        }
        if prev as usize != edges.len() {
            return Err(topo_error("index[nnodes-1] is not the number of edges"));
        }
        if edges.iter().any(|&e| e < 0 || e as usize >= nnodes) {
            return Err(topo_error("an edge names a node outside the graph"));
        }
        let shape = Shape::Graph {
            nnodes: nnodes as u32,
            nedges: edges.len() as u32,
        };
        self.topo_split(comm, nnodes as u64, shape, |s| {
            s[..nnodes].copy_from_slice(index);
            s[nnodes..].copy_from_slice(edges);
        })
    }

    /// `MPI_Dist_graph_create_adjacent`: this process's sources and destinations (with weights,
    /// if any) on a duplicate of `comm`.
    pub fn dist_graph_create_adjacent(
        &mut self,
        comm: CommId,
        sources: &[i32],
        sweights: Option<&[i32]>,
        dests: &[i32],
        dweights: Option<&[i32]>,
    ) -> Result<CommId> {
        let size = self.check_comm(comm)?.size() as i32;
        if sources.iter().chain(dests).any(|&r| r < 0 || r >= size) {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::BadArgument {
                    what: "a neighbour is not a rank of the communicator",
                },
            ));
        }
        let (ni, no) = (sources.len(), dests.len());
        let shape = Shape::DistGraph {
            indegree: ni as u32,
            outdegree: no as u32,
            weighted: sweights.is_some() || dweights.is_some(),
        };
        let topo = self.comms.topos.create(shape, |s| {
            s[..ni].copy_from_slice(sources);
            s[2 * ni..2 * ni + no].copy_from_slice(dests);
            if let Some(w) = sweights {
                s[ni..2 * ni].copy_from_slice(&w[..ni]);
            }
            if let Some(w) = dweights {
                s[2 * ni + no..].copy_from_slice(&w[..no]);
            }
        });
        // The duplicate is collective: made even when this member has no room, then undone.
        let new = self.comm_dup(comm);
        match (topo, new) {
            (Ok(t), Ok(c)) => {
                self.comms.get_mut(c)?.topo = Some(t);
                Ok(c)
            }
            (Ok(t), Err(e)) => {
                self.comms.topos.release(t);
                Err(e)
            }
            (Err(e), Ok(c)) => {
                let _ = self.comm_free(c);
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// `MPI_Dist_graph_create`: each process names edges (source, destination, weight) of
    /// any processes (`edges(i)` gives the `i`-th of `n`); each process learns its own in- and
    /// out-edges. Members first swap, pairwise, how many edges each tells the other about, then
    /// send each edge to its two ends.
    pub fn dist_graph_create(
        &mut self,
        comm: CommId,
        n: usize,
        edges: &dyn Fn(usize) -> [i32; 3],
        weighted: bool,
    ) -> Result<CommId> {
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            return Err(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument {
                    what: "topologies need an intracommunicator",
                },
            ));
        }
        let (me, size) = (c.rank as i32, c.size() as i32);
        let bad = (0..n).any(|i| {
            let e = edges(i);
            e[0] < 0 || e[0] >= size || e[1] < 0 || e[1] >= size
        });
        // A bad edge is reported after the collective steps, so that no member is left waiting.
        let count = |q: i32| -> [i32; 2] {
            let mut c = [0, 0];
            for i in 0..n {
                let e = edges(i);
                c[0] += (e[1] == q) as i32;
                c[1] += (e[0] == q) as i32;
            }
            c
        };
        let (mut indeg, mut outdeg) = (0usize, 0usize);
        for k in 0..size {
            let to = (me + k) % size;
            let from = (me - k).rem_euclid(size);
            let mine = if bad { [0, 0] } else { count(to) };
            let mut theirs = [0i32; 2];
            if k == 0 {
                theirs = mine;
            } else {
                // SAFETY: `theirs` is borrowed until the receive completes.
                let conv =
                    unsafe { Unpacker::elements(theirs.as_mut_ptr().cast(), 2, Datatype::INT) };
                let r = self.irecv_internal(conv, from as u32, TAG_DIST_COUNT, comm)?;
                // SAFETY: `mine` lives until the send completes.
                let conv = unsafe { Packer::elements(mine.as_ptr().cast(), 2, Datatype::INT) };
                self.send_internal(conv, to as u32, TAG_DIST_COUNT, comm)?;
                self.wait(r)?;
            }
            indeg += theirs[0].max(0) as usize;
            outdeg += theirs[1].max(0) as usize;
        }
        let shape = Shape::DistGraph {
            indegree: indeg as u32,
            outdegree: outdeg as u32,
            weighted,
        };
        let topo = self.comms.topos.create(shape, |_| ());
        // Every edge goes to its destination (as an in-edge) and its source (as an out-edge).
        let (ni, no) = (indeg, outdeg);
        let (mut got_in, mut got_out) = (0usize, 0usize);
        let mut place = |t: &mut TopoTable, id: Option<TopoId>, e: [i32; 3], inward: bool| {
            if let Some(id) = id {
                let at = t.entries[id.0 as usize].expect("live").at as usize;
                let s = &mut t.store[at..at + 2 * (ni + no)];
                if inward && got_in < ni {
                    s[got_in] = e[0];
                    s[ni + got_in] = e[2];
                    got_in += 1;
                } else if !inward && got_out < no {
                    s[2 * ni + got_out] = e[1];
                    s[2 * ni + no + got_out] = e[2];
                    got_out += 1;
                }
            }
        };
        let topo_id = topo.as_ref().ok().copied();
        if !bad {
            for i in 0..n {
                let e = edges(i);
                for (end, tag, inward) in [(e[1], TAG_DIST_IN, true), (e[0], TAG_DIST_OUT, false)] {
                    if end == me {
                        place(&mut self.comms.topos, topo_id, e, inward);
                    } else {
                        // SAFETY: `e` lives until the send completes.
                        let conv = unsafe { Packer::elements(e.as_ptr().cast(), 3, Datatype::INT) };
                        self.send_internal(conv, end as u32, tag, comm)?;
                    }
                }
            }
        }
        let own = (0..n).filter(|&i| edges(i)[1] == me).count();
        let own_out = (0..n).filter(|&i| edges(i)[0] == me).count();
        let own = if bad { (0, 0) } else { (own, own_out) };
        for (tag, inward, k) in [
            (TAG_DIST_IN, true, ni - own.0.min(ni)),
            (TAG_DIST_OUT, false, no - own.1.min(no)),
        ] {
            for _ in 0..k {
                let mut e = [0i32; 3];
                // SAFETY: `e` is borrowed until the receive completes.
                let conv = unsafe { Unpacker::elements(e.as_mut_ptr().cast(), 3, Datatype::INT) };
                let r = self.irecv_internal_any(conv, tag, comm)?;
                self.wait(r)?;
                place(&mut self.comms.topos, topo_id, e, inward);
            }
        }
        let new = self.comm_dup(comm);
        match (topo, new) {
            (Ok(t), Ok(c)) if !bad => {
                self.comms.get_mut(c)?.topo = Some(t);
                Ok(c)
            }
            (t, c) => {
                let mut err = bad.then_some(Error::new(
                    ErrorClass::Rank,
                    Reason::BadArgument {
                        what: "an edge names a rank outside the communicator",
                    },
                ));
                match t {
                    Ok(t) => self.comms.topos.release(t),
                    Err(e) => err = err.or(Some(e)),
                }
                match c {
                    Ok(c) => {
                        let _ = self.comm_free(c);
                    }
                    Err(e) => err = err.or(Some(e)),
                }
                Err(err.expect("some step failed"))
            }
        }
    }

    /// The neighbours of this process in `comm`'s topology: (sources, destinations), with the
    /// tag each block travels under (sources: the tag to receive with; destinations: to send
    /// with). `PROC_NULL` entries stay in place.
    pub fn neighbors(
        &self,
        comm: CommId,
        mut each_in: impl FnMut(i32, i32),
        mut each_out: impl FnMut(i32, i32),
    ) -> Result<()> {
        let rank = self.check_comm(comm)?.rank;
        match self.topo_of(comm)? {
            (Shape::Cart { ndims }, ints) => {
                let cart = Cart {
                    dims: &ints[..ndims as usize],
                    periods: &ints[ndims as usize..],
                };
                for d in 0..ndims as usize {
                    let (lo, hi) = cart.shift(rank, d, 1);
                    let (up, down) = (TAG_NEIGHBOR - 2 * d as i32, TAG_NEIGHBOR - 2 * d as i32 - 1);
                    // The block from the lower neighbour travelled upward, and so on.
                    each_in(lo, up);
                    each_in(hi, down);
                    each_out(lo, down);
                    each_out(hi, up);
                }
            }
            (Shape::Graph { nnodes, .. }, ints) => {
                let index = &ints[..nnodes as usize];
                let edges = &ints[nnodes as usize..];
                let start = if rank == 0 {
                    0
                } else {
                    index[rank as usize - 1] as usize
                };
                for &n in &edges[start..index[rank as usize] as usize] {
                    each_in(n, TAG_NEIGHBOR);
                    each_out(n, TAG_NEIGHBOR);
                }
            }
            (
                Shape::DistGraph {
                    indegree,
                    outdegree,
                    ..
                },
                ints,
            ) => {
                let (ni, no) = (indegree as usize, outdegree as usize);
                ints[..ni].iter().for_each(|&s| each_in(s, TAG_NEIGHBOR));
                ints[2 * ni..2 * ni + no]
                    .iter()
                    .for_each(|&d| each_out(d, TAG_NEIGHBOR));
            }
        }
        Ok(())
    }

    /// A neighbourhood exchange: block `i` of the sends goes to out-neighbour `i`, block `j`
    /// of the receives comes from in-neighbour `j`. `send(i)` and `recv(j)` give each block's
    /// convertor (`MPI_Neighbor_allgather(v)` / `alltoall(v/w)` differ only in them).
    pub fn neighbor_exchange(
        &mut self,
        comm: CommId,
        mut send: impl FnMut(&Engine, usize) -> Result<Packer>,
        mut recv: impl FnMut(&Engine, usize) -> Result<Unpacker>,
    ) -> Result<()> {
        let mut ins: heapless::Vec<(i32, i32), 256> = heapless::Vec::new();
        let mut outs: heapless::Vec<(i32, i32), 256> = heapless::Vec::new();
        let (mut over_in, mut over_out) = (false, false);
        self.neighbors(
            comm,
            |r, t| over_in |= ins.push((r, t)).is_err(),
            |r, t| over_out |= outs.push((r, t)).is_err(),
        )?;
        if over_in || over_out {
            return Err(Error::unsupported(
                "neighbourhood collectives with more than 256 neighbours",
            ));
        }
        let mut reqs: heapless::Vec<crate::pml::request::ReqId, 256> = heapless::Vec::new();
        let mut first_err = None;
        for (j, &(r, t)) in ins.iter().enumerate() {
            if r == PROC_NULL {
                continue;
            }
            let conv = recv(self, j)?;
            match self.irecv_internal(conv, r as u32, t, comm) {
                Ok(id) => {
                    let _ = reqs.push(id);
                }
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            }
        }
        if first_err.is_none() {
            for (i, &(r, t)) in outs.iter().enumerate() {
                if r == PROC_NULL {
                    continue;
                }
                let conv = send(self, i)?;
                if let Err(e) = self.send_internal(conv, r as u32, t, comm) {
                    first_err = Some(e);
                    break;
                }
            }
        }
        for id in reqs {
            let st = self.wait(id);
            if first_err.is_none() {
                match st {
                    Ok(s) => first_err = s.error,
                    Err(e) => first_err = Some(e),
                }
            }
        }
        match first_err {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Numbers of in- and out-neighbours of this process in `comm`'s topology.
    pub fn neighbor_counts(&self, comm: CommId) -> Result<(usize, usize)> {
        let (mut i, mut o) = (0, 0);
        self.neighbors(comm, |_, _| i += 1, |_, _| o += 1)?;
        Ok((i, o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;

    #[test]
    fn the_topology_table_grows_past_its_initial_sizes() {
        let mut a = Arena::new(leak(1 << 16));
        a.set_account(crate::memory::tests::account(1 << 30));
        let mut t = TopoTable::new(&mut a, 1000, 1 << 20).unwrap();
        // 100 graphs of 50 nodes and 50 edges (100 ints each): past 16 entries and 1024 ints.
        let shape = Shape::Graph {
            nnodes: 50,
            nedges: 50,
        };
        let ids: [TopoId; 100] = core::array::from_fn(|k| {
            t.create(shape, |ints| {
                for (i, v) in ints.iter_mut().enumerate() {
                    *v = (k * 1000 + i) as i32;
                }
            })
            .unwrap()
        });
        assert_eq!(t.count(), 100);
        for (k, id) in ids.iter().enumerate() {
            let (s, ints) = t.get(*id).unwrap();
            assert_eq!(s, shape);
            assert!(ints
                .iter()
                .enumerate()
                .all(|(i, v)| *v == (k * 1000 + i) as i32));
        }
        for id in ids {
            t.release(id);
        }
        assert_eq!(t.count(), 0);
    }

    fn dims(n: i32, mut d: [i32; 3], k: usize) -> [i32; 3] {
        dims_create(n, &mut d[..k]).unwrap();
        d
    }

    #[test]
    fn dims_create_balances_in_non_increasing_order() {
        assert_eq!(dims(12, [0, 0, 0], 2)[..2], [4, 3]);
        assert_eq!(dims(16, [0, 0, 0], 3), [4, 2, 2]);
        assert_eq!(dims(7, [0, 0, 0], 2)[..2], [7, 1]);
        assert_eq!(dims(24, [0, 3, 0], 3), [4, 3, 2]);
        assert_eq!(dims(1, [0, 0, 0], 3), [1, 1, 1]);
        assert_eq!(dims(6, [2, 3, 0], 3), [2, 3, 1]);
        assert!(dims_create(10, &mut [3, 0]).is_err());
        assert!(dims_create(6, &mut [2, 2]).is_err());
    }

    #[test]
    fn cartesian_ranks_coordinates_and_shifts() {
        let c = Cart {
            dims: &[3, 4],
            periods: &[1, 0],
        };
        let mut xy = [0; 2];
        c.coords(7, &mut xy);
        assert_eq!(xy, [1, 3]);
        assert_eq!(c.rank(&[1, 3]).unwrap(), 7);
        assert_eq!(c.rank(&[-1, 3]).unwrap(), 11, "periodic dimension wraps");
        assert!(c.rank(&[0, 4]).is_err(), "non-periodic dimension does not");
        assert_eq!(c.shift(7, 0, 1), (3, 11));
        assert_eq!(c.shift(0, 0, 1), (8, 4));
        assert_eq!(c.shift(7, 1, 1), (6, PROC_NULL));
        assert_eq!(c.shift(4, 1, -1), (5, PROC_NULL));
    }
}
