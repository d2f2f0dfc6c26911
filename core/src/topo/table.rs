//! The topology table: the descriptions of Cartesian grids, graphs and distributed graphs in a
//! bounded store of ints, shared by reference between a communicator and its duplicates, and
//! the pure computations over them (grid coordinates and shifts, `MPI_Dims_create`).

use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef};
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
pub(super) struct Entry {
    shape: Shape,
    pub(super) at: u32,
    refs: u32,
}

/// Topology entries carved at init (the table grows from there).
const ENTRIES_INITIAL: usize = 16;
/// Description ints carved at init.
const INTS_INITIAL: usize = 1024;

/// All topologies of the process.
pub struct TopoTable {
    pub(super) entries: Store<Option<Entry>>,
    pub(super) store: Store<i32>,
    ranges: Ranges,
}

pub(crate) fn topo_error(what: &'static str) -> Error {
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

/// `MPI_PROC_NULL`, the rank a shift off a non-periodic edge gives (the same value as
/// [`crate::pml::request::PROC_NULL`], checked there; the table sits below the PML).
pub(crate) const PROC_NULL: i32 = -1;

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
        if let Some(d) = out.iter_mut().min() {
            *d *= f;
        }
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
