//! Process topologies and neighbourhood collectives.

use core::ffi::{c_int, c_void};

use super::abi;
use super::datatype::array;
use super::env::{code, run, run_comm, run_comm_inside, MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY};
use super::handles::{self, out};
use crate::comm::CommId;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::topo::{self, Shape, MAX_DIMS};

fn give_comm(c: Option<CommId>, newcomm: *mut abi::MPI_Comm) -> Result<()> {
    let h = c.map_or(abi::MPI_COMM_NULL, handles::comm_handle);
    // SAFETY: MPI requires `newcomm` to point to an MPI_Comm.
    unsafe { out(newcomm, h) }
}

/// Writes `vals` to the C array `p` of room `max` (the standard lets the caller pass less room
/// than there is; only `max` entries are written).
fn write_ints(p: *mut c_int, max: c_int, vals: impl Iterator<Item = i32>) -> Result<()> {
    for (i, v) in vals.take(max.max(0) as usize).enumerate() {
        if p.is_null() {
            return Err(Error::bad_arg("output array is NULL"));
        }
        // SAFETY: MPI requires `p` to hold `max` ints.
        unsafe { p.add(i).write(v) };
    }
    Ok(())
}

fn rank_error(rank: c_int, size: u32) -> Error {
    Error::new(ErrorClass::Rank, Reason::RankOutOfRange { rank, size })
}

/// Weights of a distributed graph: `None` for `MPI_UNWEIGHTED`.
///
/// # Safety
/// `p` is `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY` or holds `n` ints.
unsafe fn weights<'a>(p: *const c_int, n: c_int) -> Result<Option<&'a [i32]>> {
    if p as *const c_void == MPI_UNWEIGHTED.0 {
        return Ok(None);
    }
    if p as *const c_void == MPI_WEIGHTS_EMPTY.0 {
        return Ok(Some(&[]));
    }
    // SAFETY: the caller's contract.
    unsafe { array(p, n, "weights").map(Some) }
}

/// The element size of a neighbourhood buffer slot: `count` instances of `dt`, in bytes of
/// extent.
fn block_bytes(e: &Engine, count: c_int, dt: abi::MPI_Datatype) -> Result<isize> {
    let d = handles::datatype(dt)?;
    let ext = e.types().check_committed(d)?.extent;
    Ok(ext * count.max(0) as isize)
}

/// One block of a buffer at a byte displacement.
fn at(buf: *const c_void, bytes: isize) -> *mut c_void {
    buf.cast::<u8>().wrapping_offset(bytes) as *mut c_void
}

super::mpi! {
    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) {
        code(run("MPI_Dims_create", None, |_| {
            if !(0..=MAX_DIMS as c_int).contains(&ndims) {
                return Err(Error::new(ErrorClass::Dims, Reason::BadArgument { what: "ndims is negative or above 32" }));
            }
            if ndims > 0 && dims.is_null() {
                return Err(Error::bad_arg("dims is NULL"));
            }
            let mut d = [0i32; MAX_DIMS];
            let n = ndims as usize;
            // SAFETY: MPI requires `dims` to hold `ndims` ints (checked non-null above).
            unsafe { d[..n].copy_from_slice(array(dims, ndims, "dims")?) };
            topo::dims_create(nnodes, &mut d[..n])?;
            write_ints(dims, ndims, d[..n].iter().copied())
        }))
    }

    fn MPI_Cart_create / PMPI_Cart_create(comm: abi::MPI_Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, reorder: c_int, newcomm: *mut abi::MPI_Comm) {
        let _ = reorder;
        code(run_comm_inside("MPI_Cart_create", comm, |cx, c| {
            // SAFETY: MPI requires `dims` and `periods` to hold `ndims` ints.
            let (d, p) = unsafe { (array(dims, ndims, "dims")?, array(periods, ndims, "periods")?) };
            let new = topo::cart_create(cx, c, d, p)?;
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Cart_map / PMPI_Cart_map(comm: abi::MPI_Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, newrank: *mut c_int) {
        code(run_comm("MPI_Cart_map", comm, |e, c| {
            // SAFETY: MPI requires `dims` and `periods` to hold `ndims` ints.
            let (d, _) = unsafe { (array(dims, ndims, "dims")?, array(periods, ndims, "periods")?) };
            // A zero dimension is a grid of no processes: every rank is outside it (MPICH's
            // reading of the standard's "MPI_UNDEFINED if the process is not in the grid").
            if d.iter().any(|&x| x < 0) {
                return Err(Error::new(ErrorClass::Dims, Reason::BadArgument { what: "a dimension is negative" }));
            }
            let nodes: u64 = d.iter().map(|&x| x as u64).product();
            let rank = e.comm(c)?.rank;
            let r = if (rank as u64) < nodes { rank as c_int } else { abi::MPI_UNDEFINED };
            // SAFETY: MPI requires `newrank` to point to an int.
            unsafe { out(newrank, r) }
        }))
    }

    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: abi::MPI_Comm, ndims: *mut c_int) {
        code(run_comm("MPI_Cartdim_get", comm, |e, c| {
            let n = topo::cart(&e.p2p, c)?.dims.len() as c_int;
            // SAFETY: MPI requires `ndims` to point to an int.
            unsafe { out(ndims, n) }
        }))
    }

    fn MPI_Cart_get / PMPI_Cart_get(comm: abi::MPI_Comm, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) {
        code(run_comm("MPI_Cart_get", comm, |e, c| {
            let rank = e.comm(c)?.rank;
            let cart = topo::cart(&e.p2p, c)?;
            let n = cart.dims.len();
            let mut xy = [0i32; MAX_DIMS];
            cart.coords(rank, &mut xy[..n]);
            write_ints(dims, maxdims, cart.dims.iter().copied())?;
            write_ints(periods, maxdims, cart.periods.iter().copied())?;
            write_ints(coords, maxdims, xy[..n].iter().copied())
        }))
    }

    fn MPI_Cart_rank / PMPI_Cart_rank(comm: abi::MPI_Comm, coords: *const c_int, rank: *mut c_int) {
        code(run_comm("MPI_Cart_rank", comm, |e, c| {
            let cart = topo::cart(&e.p2p, c)?;
            // SAFETY: MPI requires `coords` to hold ndims ints.
            let xy = unsafe { array(coords, cart.dims.len() as c_int, "coords")? };
            let r = cart.rank(xy)?;
            // SAFETY: MPI requires `rank` to point to an int.
            unsafe { out(rank, r as c_int) }
        }))
    }

    fn MPI_Cart_coords / PMPI_Cart_coords(comm: abi::MPI_Comm, rank: c_int, maxdims: c_int, coords: *mut c_int) {
        code(run_comm("MPI_Cart_coords", comm, |e, c| {
            let cart = topo::cart(&e.p2p, c)?;
            if rank < 0 || rank as u64 >= cart.nodes() {
                return Err(rank_error(rank, cart.nodes() as u32));
            }
            let n = cart.dims.len();
            let mut xy = [0i32; MAX_DIMS];
            cart.coords(rank as u32, &mut xy[..n]);
            write_ints(coords, maxdims, xy[..n].iter().copied())
        }))
    }

    fn MPI_Cart_shift / PMPI_Cart_shift(comm: abi::MPI_Comm, direction: c_int, disp: c_int, source: *mut c_int, dest: *mut c_int) {
        code(run_comm("MPI_Cart_shift", comm, |e, c| {
            let rank = e.comm(c)?.rank;
            let cart = topo::cart(&e.p2p, c)?;
            if direction < 0 || direction as usize >= cart.dims.len() {
                return Err(Error::new(ErrorClass::Arg, Reason::BadArgument { what: "direction is not a dimension of the grid" }));
            }
            let (s, d) = cart.shift(rank, direction as usize, disp);
            // SAFETY: MPI requires `source` and `dest` to point to ints.
            unsafe {
                out(source, s)?;
                out(dest, d)
            }
        }))
    }

    fn MPI_Cart_sub / PMPI_Cart_sub(comm: abi::MPI_Comm, remain_dims: *const c_int, newcomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Cart_sub", comm, |cx, c| {
            let n = topo::cart(&cx.e().p2p, c)?.dims.len();
            // SAFETY: MPI requires `remain_dims` to hold ndims ints.
            let r = unsafe { array(remain_dims, n as c_int, "remain_dims")? };
            let mut keep = [false; MAX_DIMS];
            for (k, &x) in keep.iter_mut().zip(r) {
                *k = x != 0;
            }
            let new = topo::cart_sub(cx, c, &keep[..n])?;
            give_comm(Some(new), newcomm)
        }))
    }

    fn MPI_Graph_create / PMPI_Graph_create(comm: abi::MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, reorder: c_int, newcomm: *mut abi::MPI_Comm) {
        let _ = reorder;
        code(run_comm_inside("MPI_Graph_create", comm, |cx, c| {
            // SAFETY: MPI requires `index` to hold `nnodes` ints and `edges` index[nnodes-1].
            let idx = unsafe { array(index, nnodes, "index")? };
            let ne = idx.last().copied().unwrap_or(0);
            // SAFETY: as above.
            let ed = unsafe { array(edges, ne, "edges")? };
            let new = topo::graph_create(cx, c, idx, ed)?;
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Graph_map / PMPI_Graph_map(comm: abi::MPI_Comm, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) {
        let _ = (index, edges);
        code(run_comm("MPI_Graph_map", comm, |e, c| {
            let rank = e.comm(c)?.rank;
            let r = if (rank as i64) < nnodes as i64 { rank as c_int } else { abi::MPI_UNDEFINED };
            // SAFETY: MPI requires `newrank` to point to an int.
            unsafe { out(newrank, r) }
        }))
    }

    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: abi::MPI_Comm, nnodes: *mut c_int, nedges: *mut c_int) {
        code(run_comm("MPI_Graphdims_get", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::Graph { nnodes: n, nedges: m }, _)) => {
                // SAFETY: MPI requires both to point to ints.
                unsafe {
                    out(nnodes, n as c_int)?;
                    out(nedges, m as c_int)
                }
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no graph topology" })),
        }))
    }

    fn MPI_Graph_get / PMPI_Graph_get(comm: abi::MPI_Comm, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) {
        code(run_comm("MPI_Graph_get", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::Graph { nnodes, .. }, ints)) => {
                write_ints(index, maxindex, ints[..nnodes as usize].iter().copied())?;
                write_ints(edges, maxedges, ints[nnodes as usize..].iter().copied())
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no graph topology" })),
        }))
    }

    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: abi::MPI_Comm, rank: c_int, nneighbors: *mut c_int) {
        code(run_comm("MPI_Graph_neighbors_count", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::Graph { nnodes, .. }, ints)) => {
                if rank < 0 || rank as u32 >= nnodes {
                    return Err(rank_error(rank, nnodes));
                }
                let lo = if rank == 0 { 0 } else { ints[rank as usize - 1] };
                // SAFETY: MPI requires `nneighbors` to point to an int.
                unsafe { out(nneighbors, ints[rank as usize] - lo) }
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no graph topology" })),
        }))
    }

    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: abi::MPI_Comm, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) {
        code(run_comm("MPI_Graph_neighbors", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::Graph { nnodes, .. }, ints)) => {
                if rank < 0 || rank as u32 >= nnodes {
                    return Err(rank_error(rank, nnodes));
                }
                let lo = if rank == 0 { 0 } else { ints[rank as usize - 1] } as usize;
                let hi = ints[rank as usize] as usize;
                let edges = &ints[nnodes as usize..];
                write_ints(neighbors, maxneighbors, edges[lo..hi].iter().copied())
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no graph topology" })),
        }))
    }

    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm: abi::MPI_Comm, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, info: abi::MPI_Info, reorder: c_int, newcomm: *mut abi::MPI_Comm) {
        let _ = (info, reorder);
        code(run_comm_inside("MPI_Dist_graph_create_adjacent", comm, |cx, c| {
            // SAFETY: MPI requires the arrays to hold indegree / outdegree ints (weights may be
            // the MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY markers).
            let (s, sw, d, dw) = unsafe {
                (
                    array(sources, indegree, "sources")?,
                    weights(sourceweights, indegree)?,
                    array(destinations, outdegree, "destinations")?,
                    weights(destweights, outdegree)?,
                )
            };
            let sw = sw.filter(|w| w.len() == s.len());
            let dw = dw.filter(|w| w.len() == d.len());
            let new = topo::dist_graph_create_adjacent(cx, c, s, sw, d, dw)?;
            give_comm(Some(new), newcomm)
        }))
    }

    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(comm: abi::MPI_Comm, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights_: *const c_int, info: abi::MPI_Info, reorder: c_int, newcomm: *mut abi::MPI_Comm) {
        let _ = (info, reorder);
        code(run_comm_inside("MPI_Dist_graph_create", comm, |cx, c| {
            // SAFETY: MPI requires `sources` and `degrees` to hold `n` ints, `destinations`
            // and `weights` the sum of the degrees.
            let (src, deg) = unsafe { (array(sources, n, "sources")?, array(degrees, n, "degrees")?) };
            if deg.iter().any(|&d| d < 0) {
                return Err(Error::bad_arg("a degree is negative"));
            }
            let total: i64 = deg.iter().map(|&d| d as i64).sum();
            let total = c_int::try_from(total).map_err(|_| Error::bad_arg("too many edges"))?;
            // SAFETY: as above.
            let (dst, w) = unsafe { (array(destinations, total, "destinations")?, weights(weights_, total)?) };
            let w = w.filter(|w| w.len() == dst.len());
            // Edge i: the source whose degree range holds i.
            let edge = |i: usize| -> [i32; 3] {
                let mut k = i;
                let mut s = 0;
                for (j, &d) in deg.iter().enumerate() {
                    if k < d as usize {
                        s = src[j];
                        break;
                    }
                    k -= d as usize;
                }
                [s, dst[i], w.map_or(1, |w| w[i])]
            };
            let new = topo::dist_graph_create(cx, c, total as usize, &edge, w.is_some())?;
            give_comm(Some(new), newcomm)
        }))
    }

    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: abi::MPI_Comm, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) {
        code(run_comm("MPI_Dist_graph_neighbors_count", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::DistGraph { indegree: i, outdegree: o, weighted: w }, _)) => {
                // SAFETY: MPI requires the three to point to ints.
                unsafe {
                    out(indegree, i as c_int)?;
                    out(outdegree, o as c_int)?;
                    out(weighted, w as c_int)
                }
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no distributed graph topology" })),
        }))
    }

    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: abi::MPI_Comm, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) {
        code(run_comm("MPI_Dist_graph_neighbors", comm, |e, c| match topo::topology(&e.p2p, c)? {
            Some((Shape::DistGraph { indegree, outdegree, weighted }, ints)) => {
                let (ni, no) = (indegree as usize, outdegree as usize);
                write_ints(sources, maxindegree, ints[..ni].iter().copied())?;
                write_ints(destinations, maxoutdegree, ints[2 * ni..2 * ni + no].iter().copied())?;
                let marker = |p: *mut c_int| {
                    p as *const c_void == MPI_UNWEIGHTED.0 || p as *const c_void == MPI_WEIGHTS_EMPTY.0
                };
                if weighted && !marker(sourceweights) {
                    write_ints(sourceweights, maxindegree, ints[ni..2 * ni].iter().copied())?;
                }
                if weighted && !marker(destweights) {
                    write_ints(destweights, maxoutdegree, ints[2 * ni + no..].iter().copied())?;
                }
                Ok(())
            }
            _ => Err(Error::new(ErrorClass::Topology, Reason::BadArgument { what: "the communicator has no distributed graph topology" })),
        }))
    }

    fn MPI_Topo_test / PMPI_Topo_test(comm: abi::MPI_Comm, status: *mut c_int) {
        code(run_comm("MPI_Topo_test", comm, |e, c| {
            let t = match topo::topology(&e.p2p, c)? {
                None => abi::MPI_UNDEFINED,
                Some((Shape::Cart { .. }, _)) => abi::MPI_CART,
                Some((Shape::Graph { .. }, _)) => abi::MPI_GRAPH,
                Some((Shape::DistGraph { .. }, _)) => abi::MPI_DIST_GRAPH,
            };
            // SAFETY: MPI requires `status` to point to an int.
            unsafe { out(status, t) }
        }))
    }

    fn MPI_Neighbor_allgather / PMPI_Neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(run_comm_inside("MPI_Neighbor_allgather", comm, |cx, c| {
            let e = cx.e();
            let rb = block_bytes(e, recvcount, recvtype)?;
            topo::neighbor_exchange(
                cx,
                c,
                // SAFETY: MPI requires the send buffer to hold `sendcount` instances.
                |e, _| unsafe { handles::packer(e.types(), sendbuf, sendcount, sendtype) },
                // SAFETY: MPI requires the receive buffer to hold a block per in-neighbour.
                |e, j| unsafe { handles::unpacker(e.types(), at(recvbuf, rb * j as isize), recvcount, recvtype) },
            )
        }))
    }

    fn MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(run_comm_inside("MPI_Neighbor_allgatherv", comm, |cx, c| {
            let e = cx.e();
            let (ni, _) = topo::neighbor_counts(&e.p2p, c)?;
            // SAFETY: MPI requires both arrays to hold an entry per in-neighbour.
            let (counts, disp) = unsafe { (array(recvcounts, ni as c_int, "recvcounts")?, array(displs, ni as c_int, "displs")?) };
            let ext = block_bytes(e, 1, recvtype)?;
            topo::neighbor_exchange(
                cx,
                c,
                // SAFETY: MPI requires the send buffer to hold `sendcount` instances.
                |e, _| unsafe { handles::packer(e.types(), sendbuf, sendcount, sendtype) },
                // SAFETY: MPI requires the receive buffer to hold each block at its displacement.
                |e, j| unsafe { handles::unpacker(e.types(), at(recvbuf, ext * disp[j] as isize), counts[j], recvtype) },
            )
        }))
    }

    fn MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(run_comm_inside("MPI_Neighbor_alltoall", comm, |cx, c| {
            let e = cx.e();
            let sb = block_bytes(e, sendcount, sendtype)?;
            let rb = block_bytes(e, recvcount, recvtype)?;
            topo::neighbor_exchange(
                cx,
                c,
                // SAFETY: MPI requires a send block per out-neighbour.
                |e, i| unsafe { handles::packer(e.types(), at(sendbuf, sb * i as isize), sendcount, sendtype) },
                // SAFETY: MPI requires a receive block per in-neighbour.
                |e, j| unsafe { handles::unpacker(e.types(), at(recvbuf, rb * j as isize), recvcount, recvtype) },
            )
        }))
    }

    fn MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(run_comm_inside("MPI_Neighbor_alltoallv", comm, |cx, c| {
            let e = cx.e();
            let (ni, no) = topo::neighbor_counts(&e.p2p, c)?;
            // SAFETY: MPI requires an entry per neighbour in each array.
            let (sc, sd, rc, rd) = unsafe {
                (
                    array(sendcounts, no as c_int, "sendcounts")?,
                    array(sdispls, no as c_int, "sdispls")?,
                    array(recvcounts, ni as c_int, "recvcounts")?,
                    array(rdispls, ni as c_int, "rdispls")?,
                )
            };
            let (se, re) = (block_bytes(e, 1, sendtype)?, block_bytes(e, 1, recvtype)?);
            topo::neighbor_exchange(
                cx,
                c,
                // SAFETY: MPI requires each send block at its displacement.
                |e, i| unsafe { handles::packer(e.types(), at(sendbuf, se * sd[i] as isize), sc[i], sendtype) },
                // SAFETY: MPI requires each receive block at its displacement.
                |e, j| unsafe { handles::unpacker(e.types(), at(recvbuf, re * rd[j] as isize), rc[j], recvtype) },
            )
        }))
    }

    fn MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm) {
        code(run_comm_inside("MPI_Neighbor_alltoallw", comm, |cx, c| {
            let e = cx.e();
            let (ni, no) = topo::neighbor_counts(&e.p2p, c)?;
            // SAFETY: MPI requires an entry per neighbour in each array.
            let (sc, sd, st, rc, rd, rt) = unsafe {
                (
                    array(sendcounts, no as c_int, "sendcounts")?,
                    array(sdispls, no as c_int, "sdispls")?,
                    array(sendtypes, no as c_int, "sendtypes")?,
                    array(recvcounts, ni as c_int, "recvcounts")?,
                    array(rdispls, ni as c_int, "rdispls")?,
                    array(recvtypes, ni as c_int, "recvtypes")?,
                )
            };
            topo::neighbor_exchange(
                cx,
                c,
                // SAFETY: MPI requires each send block at its byte displacement.
                |e, i| unsafe { handles::packer(e.types(), at(sendbuf, sd[i] as isize), sc[i], st[i]) },
                // SAFETY: MPI requires each receive block at its byte displacement.
                |e, j| unsafe { handles::unpacker(e.types(), at(recvbuf, rd[j] as isize), rc[j], rt[j]) },
            )
        }))
    }
}
