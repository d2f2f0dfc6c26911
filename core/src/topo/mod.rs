//! Process topologies: Cartesian grids, graphs and distributed graphs attached to
//! communicators, their queries, and the neighbourhood collectives that follow their edges.
//!
//! A topology is a description in a bounded store of ints (dims and periods; index and edges;
//! sources, destinations and weights), shared by reference between a communicator and its
//! duplicates. Making a topology communicator is a split of the old one (stormpi does not
//! reorder ranks) with the description attached.

pub(crate) mod table;

pub use table::{
    dims_create, Cart, Shape, TopoId, TopoTable, MAX_DIMS, PARAMS, TOPO_MAX, TOPO_MAX_INTS,
};

use crate::comm::create::UNDEFINED;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::p2p::P2p;
use crate::pml::request::PROC_NULL;
use crate::shared::Inside;
use table::topo_error;

/// Internal tags of neighbourhood collectives: one per (dimension, direction) for grids, so
/// that a peer that is both neighbours of a dimension gets each block in its slot (-0x200 down
/// to -0x23f; outside the collectives' range, see `coll`).
const TAG_NEIGHBOR: i32 = -0x200;
/// Internal tags of `MPI_Dist_graph_create`.
const TAG_DIST_COUNT: i32 = -0x1f0;
const TAG_DIST_IN: i32 = -0x1f1;
const TAG_DIST_OUT: i32 = -0x1f2;

/// The topology attached to `comm`.
pub fn topology(p2p: &P2p, comm: CommId) -> Result<Option<(Shape, &[i32])>> {
    let c = p2p.comm(comm)?;
    Ok(c.topo.and_then(|t| p2p.comms.topos.get(t)))
}

/// The topology of `comm`, which must have one.
fn topo_of(p2p: &P2p, comm: CommId) -> Result<(Shape, &[i32])> {
    if p2p.comm(comm)?.is_inter() {
        return Err(Error::new(
            ErrorClass::Comm,
            Reason::BadArgument {
                what: "topologies and neighbourhood collectives are not defined on \
                       intercommunicators",
            },
        ));
    }
    topology(p2p, comm)?.ok_or(topo_error("the communicator has no topology"))
}

/// The Cartesian topology of `comm`.
pub fn cart(p2p: &P2p, comm: CommId) -> Result<Cart<'_>> {
    match topo_of(p2p, comm)? {
        (Shape::Cart { ndims }, ints) => Ok(Cart {
            dims: &ints[..ndims as usize],
            periods: &ints[ndims as usize..],
        }),
        _ => Err(topo_error("the communicator's topology is not Cartesian")),
    }
}

/// Splits `comm` into the first `nodes` ranks (others get none) and attaches a topology.
fn topo_split(
    cx: &mut Inside,
    comm: CommId,
    nodes: u64,
    shape: Shape,
    fill: impl FnOnce(&mut [i32]),
) -> Result<Option<CommId>> {
    let c = cx.e().check_comm(comm)?;
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
    let topo = cx.e().p2p.comms.topos.create(shape, fill);
    let new = crate::comm::create::split(cx, comm, if topo.is_ok() { color } else { UNDEFINED }, 0);
    match (topo, new) {
        (Ok(t), Ok(Some(n))) => {
            cx.e().p2p.comms.get_mut(n)?.topo = Some(t);
            Ok(Some(n))
        }
        (Ok(t), other) => {
            cx.e().p2p.comms.topos.release(t);
            other
        }
        (Err(e), Ok(Some(n))) => {
            let _ = crate::comm::create::free(cx, n);
            Err(e)
        }
        (Err(e), _) => Err(e),
    }
}

/// `MPI_Cart_create` (ranks are not reordered).
pub fn cart_create(
    cx: &mut Inside,
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
    topo_split(cx, comm, nodes, Shape::Cart { ndims: n as u32 }, |s| {
        s[..n].copy_from_slice(dims);
        for (o, &p) in s[n..].iter_mut().zip(periods) {
            *o = (p != 0) as i32;
        }
    })
}

/// `MPI_Cart_sub`: the sub-grids keeping the dimensions where `remain` is true.
pub fn cart_sub(cx: &mut Inside, comm: CommId, remain: &[bool]) -> Result<CommId> {
    let rank = cx.e().check_comm(comm)?.rank;
    let cart = cart(&cx.e().p2p, comm)?;
    let n = cart.dims.len();
    if remain.len() != n {
        return Err(Error::bad_arg("remain_dims has the wrong length"));
    }
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
    let topo = cx.e().p2p.comms.topos.create(shape, |s| {
        s[..k].copy_from_slice(&dims[..k]);
        s[k..].copy_from_slice(&periods[..k]);
    });
    let color = if topo.is_ok() {
        color as i32
    } else {
        UNDEFINED
    };
    let new = crate::comm::create::split(cx, comm, color, key as i32);
    match (topo, new) {
        (Ok(t), Ok(Some(c))) => {
            cx.e().p2p.comms.get_mut(c)?.topo = Some(t);
            Ok(c)
        }
        (Ok(t), Ok(None)) => {
            cx.e().p2p.comms.topos.release(t);
            Err(topo_error("Cart_sub made no communicator"))
        }
        (Ok(t), Err(e)) => {
            cx.e().p2p.comms.topos.release(t);
            Err(e)
        }
        (Err(e), Ok(Some(c))) => {
            let _ = crate::comm::create::free(cx, c);
            Err(e)
        }
        (Err(e), _) => Err(e),
    }
}

/// `MPI_Graph_create` (ranks are not reordered): node `i`'s neighbours are
/// `edges[index[i-1]..index[i]]`.
pub fn graph_create(
    cx: &mut Inside,
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
    topo_split(cx, comm, nnodes as u64, shape, |s| {
        s[..nnodes].copy_from_slice(index);
        s[nnodes..].copy_from_slice(edges);
    })
}

/// `MPI_Dist_graph_create_adjacent`: this process's sources and destinations (with weights,
/// if any) on a duplicate of `comm`.
pub fn dist_graph_create_adjacent(
    cx: &mut Inside,
    comm: CommId,
    sources: &[i32],
    sweights: Option<&[i32]>,
    dests: &[i32],
    dweights: Option<&[i32]>,
) -> Result<CommId> {
    let size = cx.e().check_comm(comm)?.size() as i32;
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
    let topo = cx.e().p2p.comms.topos.create(shape, |s| {
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
    let new = crate::comm::create::dup(cx, comm);
    match (topo, new) {
        (Ok(t), Ok(c)) => {
            cx.e().p2p.comms.get_mut(c)?.topo = Some(t);
            Ok(c)
        }
        (Ok(t), Err(e)) => {
            cx.e().p2p.comms.topos.release(t);
            Err(e)
        }
        (Err(e), Ok(c)) => {
            let _ = crate::comm::create::free(cx, c);
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
    cx: &mut Inside,
    comm: CommId,
    n: usize,
    edges: &dyn Fn(usize) -> [i32; 3],
    weighted: bool,
) -> Result<CommId> {
    let c = cx.e().check_comm(comm)?;
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
            let conv = unsafe { Unpacker::elements(theirs.as_mut_ptr().cast(), 2, Datatype::INT) };
            let r = cx
                .e()
                .irecv_internal(conv, from as u32, TAG_DIST_COUNT, comm)?;
            // SAFETY: `mine` lives until the send completes.
            let conv = unsafe { Packer::elements(mine.as_ptr().cast(), 2, Datatype::INT) };
            cx.send_internal(conv, to as u32, TAG_DIST_COUNT, comm)?;
            cx.wait(r)?;
        }
        indeg += theirs[0].max(0) as usize;
        outdeg += theirs[1].max(0) as usize;
    }
    let shape = Shape::DistGraph {
        indegree: indeg as u32,
        outdegree: outdeg as u32,
        weighted,
    };
    let topo = cx.e().p2p.comms.topos.create(shape, |_| ());
    // Where the new topology's edges start in the store.
    let topo_at = match topo {
        Ok(id) => match cx.e().p2p.comms.topos.entries[id.0 as usize] {
            Some(e) => Some(e.at as usize),
            None => return Err(Error::internal("a topology just made is not in the table")),
        },
        Err(_) => None,
    };
    // Every edge goes to its destination (as an in-edge) and its source (as an out-edge).
    let (ni, no) = (indeg, outdeg);
    let (mut got_in, mut got_out) = (0usize, 0usize);
    let mut place = |t: &mut TopoTable, at: Option<usize>, e: [i32; 3], inward: bool| {
        if let Some(at) = at {
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
    if !bad {
        for i in 0..n {
            let e = edges(i);
            for (end, tag, inward) in [(e[1], TAG_DIST_IN, true), (e[0], TAG_DIST_OUT, false)] {
                if end == me {
                    place(&mut cx.e().p2p.comms.topos, topo_at, e, inward);
                } else {
                    // SAFETY: `e` lives until the send completes.
                    let conv = unsafe { Packer::elements(e.as_ptr().cast(), 3, Datatype::INT) };
                    cx.send_internal(conv, end as u32, tag, comm)?;
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
            let r = cx.e().irecv_internal_any(conv, tag, comm)?;
            cx.wait(r)?;
            place(&mut cx.e().p2p.comms.topos, topo_at, e, inward);
        }
    }
    let new = crate::comm::create::dup(cx, comm);
    // The first of: a bad edge, the topology's error, the new communicator's.
    let err = match (topo, new) {
        _ if bad => Error::new(
            ErrorClass::Rank,
            Reason::BadArgument {
                what: "an edge names a rank outside the communicator",
            },
        ),
        (Err(e), _) | (_, Err(e)) => e,
        (Ok(t), Ok(c)) => {
            cx.e().p2p.comms.get_mut(c)?.topo = Some(t);
            return Ok(c);
        }
    };
    if let Ok(t) = topo {
        cx.e().p2p.comms.topos.release(t);
    }
    if let Ok(c) = new {
        let _ = crate::comm::create::free(cx, c);
    }
    Err(err)
}

/// The neighbours of this process in `comm`'s topology: (sources, destinations), with the
/// tag each block travels under (sources: the tag to receive with; destinations: to send
/// with). `PROC_NULL` entries stay in place.
pub fn neighbors(
    p2p: &P2p,
    comm: CommId,
    mut each_in: impl FnMut(i32, i32),
    mut each_out: impl FnMut(i32, i32),
) -> Result<()> {
    let rank = p2p.comm(comm)?.rank;
    match topo_of(p2p, comm)? {
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
    cx: &mut Inside,
    comm: CommId,
    mut send: impl FnMut(&P2p, usize) -> Result<Packer>,
    mut recv: impl FnMut(&P2p, usize) -> Result<Unpacker>,
) -> Result<()> {
    let mut ins: heapless::Vec<(i32, i32), 256> = heapless::Vec::new();
    let mut outs: heapless::Vec<(i32, i32), 256> = heapless::Vec::new();
    let (mut over_in, mut over_out) = (false, false);
    neighbors(
        &cx.e().p2p,
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
        let conv = recv(&cx.e().p2p, j)?;
        match cx.e().irecv_internal(conv, r as u32, t, comm) {
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
            let conv = send(&cx.e().p2p, i)?;
            if let Err(e) = cx.send_internal(conv, r as u32, t, comm) {
                first_err = Some(e);
                break;
            }
        }
    }
    for id in reqs {
        let st = cx.wait(id);
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
pub fn neighbor_counts(p2p: &P2p, comm: CommId) -> Result<(usize, usize)> {
    let (mut i, mut o) = (0, 0);
    neighbors(p2p, comm, |_, _| i += 1, |_, _| o += 1)?;
    Ok((i, o))
}
