//! Groups, and the communicators made from groups, splits and intercommunicators.

use core::ffi::{c_char, c_int, CStr};

use super::abi::{self, HandleKind, ObjectKind};
use super::datatype::array;
use super::env::{code, run, run_comm, run_comm_inside, run_inside};
use super::errors::report;
use super::handles::{self, out};
use crate::comm::create::{self, SplitType};
use crate::comm::{CommId, CommSimilarity};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::{Group, GroupId, Similarity};

const GROUP_INDIRECT: c_int = abi::make_handle(HandleKind::Indirect, ObjectKind::Group, 0);

fn bad_group() -> Error {
    Error::new(
        ErrorClass::Group,
        Reason::BadArgument {
            what: "not a valid group",
        },
    )
}

/// The group a handle names.
/// MPICH's implementation split type (its `mpi.h` defines it beside the standard ones).
const MPIX_COMM_TYPE_NEIGHBORHOOD: c_int = 4;

/// What `MPI_COMM_TYPE_HW_GUIDED` with `info` asks for: the `mpi_hw_resource_type`
/// `mpi_shared_memory` (the standard's one name) is the node, and so is hwloc's `Machine`; any
/// other resource is one the library cannot see, and the standard then gives
/// `MPI_COMM_NULL` — as it does when the key is missing (MPICH does the same, and mpi4py's
/// tests expect it).
fn hw_guided(e: &Engine, info: abi::MPI_Info) -> Result<Option<SplitType>> {
    if info == abi::MPI_INFO_NULL {
        return Ok(None);
    }
    let id = super::info::info(info)?;
    let v = e.objects.infos.get(id, b"mpi_hw_resource_type")?;
    Ok(match v {
        Some(b"mpi_shared_memory" | b"Machine") => Some(SplitType::Shared),
        _ => None,
    })
}

/// A string tag folded to a number (FNV-1a): both groups pass the same string, so both
/// leaders meet under the same internal tag.
pub(super) fn tag_hash(tag: &[u8]) -> u32 {
    tag.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn group(e: &Engine, h: abi::MPI_Group) -> Result<Group> {
    if h == abi::MPI_GROUP_EMPTY {
        return Ok(Group::Empty);
    }
    if abi::handle_object(h) != Some(ObjectKind::Group)
        || abi::handle_kind(h) != HandleKind::Indirect
    {
        return Err(bad_group());
    }
    let i = abi::handle_index(h);
    let id = u16::try_from(i).map_err(|_| bad_group())?;
    e.groups().by_id(GroupId(id))
}

/// The handle of `g` (which carries the reference the handle owns).
fn group_handle(g: Group) -> abi::MPI_Group {
    match g {
        Group::Listed { id, .. } => GROUP_INDIRECT | id.0 as c_int,
        _ => abi::MPI_GROUP_EMPTY,
    }
}

/// Stores a new group (whose reference passes to the handle) through `newgroup`.
/// The group a handle names (for the window functions).
pub(super) fn group_of(e: &Engine, h: abi::MPI_Group) -> Result<Group> {
    group(e, h)
}

/// Writes the handle of `comm`'s group (`MPI_Win_get_group` over a window's communicator).
pub(super) fn comm_group_out(
    e: &mut Engine,
    comm: CommId,
    newgroup: *mut abi::MPI_Group,
) -> Result<()> {
    let g = create::group(&mut e.p2p, comm)?;
    give(e, g, newgroup)
}

pub(super) fn give(e: &mut Engine, g: Group, newgroup: *mut abi::MPI_Group) -> Result<()> {
    // Shapes get a stored entry so that the handle can name them.
    let h = match g {
        Group::Listed { .. } | Group::Empty => g,
        shape => e.groups_mut().handle_for(shape)?,
    };
    // SAFETY: MPI requires `newgroup` to point to an MPI_Group.
    let r = unsafe { out(newgroup, group_handle(h)) };
    if r.is_err() {
        e.groups_mut().release(h);
    }
    r
}

fn give_comm(c: Option<CommId>, newcomm: *mut abi::MPI_Comm) -> Result<()> {
    let h = c.map_or(abi::MPI_COMM_NULL, handles::comm_handle);
    // SAFETY: MPI requires `newcomm` to point to an MPI_Comm.
    unsafe { out(newcomm, h) }
}

/// Runs a group operation with two groups in and one out.
fn group_op(
    func: &'static str,
    a: abi::MPI_Group,
    b: abi::MPI_Group,
    newgroup: *mut abi::MPI_Group,
    f: fn(&mut crate::group::GroupTable, Group, Group) -> Result<Group>,
) -> c_int {
    code(run(func, None, |e| {
        let (ga, gb) = (group(e, a)?, group(e, b)?);
        let g = f(e.groups_mut(), ga, gb)?;
        give(e, g, newgroup)
    }))
}

/// The `n` rank triplets at `p`.
///
/// # Safety
/// `p` points to `n` triplets of ints (or `n` is 0).
unsafe fn triplets<'a>(p: *const [c_int; 3], n: c_int) -> Result<&'a [[i32; 3]]> {
    // SAFETY: the caller's contract.
    unsafe { array(p, n, "ranges") }
}

super::mpi! {
    fn MPI_Group_size / PMPI_Group_size(g: abi::MPI_Group, size: *mut c_int) {
        code(run("MPI_Group_size", None, |e| {
            let n = group(e, g)?.size() as c_int;
            // SAFETY: MPI requires `size` to point to an int.
            unsafe { out(size, n) }
        }))
    }

    fn MPI_Group_rank / PMPI_Group_rank(g: abi::MPI_Group, rank: *mut c_int) {
        code(run("MPI_Group_rank", None, |e| {
            let gr = group(e, g)?;
            let me = crate::rte::ProcId(e.rank());
            let r = e.groups().rank_of(gr, me).map_or(abi::MPI_UNDEFINED, |r| r as c_int);
            // SAFETY: MPI requires `rank` to point to an int.
            unsafe { out(rank, r) }
        }))
    }

    fn MPI_Group_free / PMPI_Group_free(g: *mut abi::MPI_Group) {
        if g.is_null() {
            return report("MPI_Group_free", None, Error::bad_arg("group is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Group.
        let h = unsafe { *g };
        let r = run("MPI_Group_free", None, |e| {
            let gr = group(e, h)?;
            e.groups_mut().release(gr);
            Ok(())
        });
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *g = abi::MPI_GROUP_NULL };
        }
        code(r)
    }

    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(g1: abi::MPI_Group, n: c_int, ranks1: *const c_int, g2: abi::MPI_Group, ranks2: *mut c_int) {
        code(run("MPI_Group_translate_ranks", None, |e| {
            let (a, b) = (group(e, g1)?, group(e, g2)?);
            // SAFETY: MPI requires `ranks1` to hold `n` ints.
            let r1 = unsafe { array(ranks1, n, "ranks1")? };
            if n > 0 && ranks2.is_null() {
                return Err(Error::bad_arg("ranks2 is NULL"));
            }
            for (i, &r) in r1.iter().enumerate() {
                let t = if r == abi::MPI_PROC_NULL {
                    abi::MPI_PROC_NULL
                } else {
                    e.groups().translate(a, r, b)?.map_or(abi::MPI_UNDEFINED, |x| x as c_int)
                };
                // SAFETY: MPI requires `ranks2` to hold `n` ints; checked non-null.
                unsafe { ranks2.add(i).write(t) };
            }
            Ok(())
        }))
    }

    fn MPI_Group_compare / PMPI_Group_compare(g1: abi::MPI_Group, g2: abi::MPI_Group, result: *mut c_int) {
        code(run("MPI_Group_compare", None, |e| {
            let (a, b) = (group(e, g1)?, group(e, g2)?);
            let r = match e.groups_mut().compare(a, b) {
                Similarity::Ident => abi::MPI_IDENT,
                Similarity::Similar => abi::MPI_SIMILAR,
                Similarity::Unequal => abi::MPI_UNEQUAL,
            };
            // SAFETY: MPI requires `result` to point to an int.
            unsafe { out(result, r) }
        }))
    }

    fn MPI_Group_union / PMPI_Group_union(g1: abi::MPI_Group, g2: abi::MPI_Group, newgroup: *mut abi::MPI_Group) {
        group_op("MPI_Group_union", g1, g2, newgroup, |t, a, b| t.union(a, b))
    }

    fn MPI_Group_intersection / PMPI_Group_intersection(g1: abi::MPI_Group, g2: abi::MPI_Group, newgroup: *mut abi::MPI_Group) {
        group_op("MPI_Group_intersection", g1, g2, newgroup, |t, a, b| t.intersection(a, b))
    }

    fn MPI_Group_difference / PMPI_Group_difference(g1: abi::MPI_Group, g2: abi::MPI_Group, newgroup: *mut abi::MPI_Group) {
        group_op("MPI_Group_difference", g1, g2, newgroup, |t, a, b| t.difference(a, b))
    }

    fn MPI_Group_incl / PMPI_Group_incl(g: abi::MPI_Group, n: c_int, ranks: *const c_int, newgroup: *mut abi::MPI_Group) {
        code(run("MPI_Group_incl", None, |e| {
            let gr = group(e, g)?;
            // SAFETY: MPI requires `ranks` to hold `n` ints.
            let r = unsafe { array(ranks, n, "ranks")? };
            let new = e.groups_mut().incl(gr, r)?;
            give(e, new, newgroup)
        }))
    }

    fn MPI_Group_excl / PMPI_Group_excl(g: abi::MPI_Group, n: c_int, ranks: *const c_int, newgroup: *mut abi::MPI_Group) {
        code(run("MPI_Group_excl", None, |e| {
            let gr = group(e, g)?;
            // SAFETY: MPI requires `ranks` to hold `n` ints.
            let r = unsafe { array(ranks, n, "ranks")? };
            let new = e.groups_mut().excl(gr, r)?;
            give(e, new, newgroup)
        }))
    }

    fn MPI_Group_range_incl / PMPI_Group_range_incl(g: abi::MPI_Group, n: c_int, ranges: *const [c_int; 3], newgroup: *mut abi::MPI_Group) {
        code(run("MPI_Group_range_incl", None, |e| {
            let gr = group(e, g)?;
            // SAFETY: MPI requires `ranges` to hold `n` triplets.
            let r = unsafe { triplets(ranges, n)? };
            let new = e.groups_mut().range_incl(gr, r)?;
            give(e, new, newgroup)
        }))
    }

    fn MPI_Group_range_excl / PMPI_Group_range_excl(g: abi::MPI_Group, n: c_int, ranges: *const [c_int; 3], newgroup: *mut abi::MPI_Group) {
        code(run("MPI_Group_range_excl", None, |e| {
            let gr = group(e, g)?;
            // SAFETY: MPI requires `ranges` to hold `n` triplets.
            let r = unsafe { triplets(ranges, n)? };
            let new = e.groups_mut().range_excl(gr, r)?;
            give(e, new, newgroup)
        }))
    }

    fn MPI_Comm_group / PMPI_Comm_group(comm: abi::MPI_Comm, newgroup: *mut abi::MPI_Group) {
        code(run_comm("MPI_Comm_group", comm, |e, c| {
            let g = create::group(&mut e.p2p, c)?;
            give(e, g, newgroup)
        }))
    }

    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: abi::MPI_Comm, newgroup: *mut abi::MPI_Group) {
        code(run_comm("MPI_Comm_remote_group", comm, |e, c| {
            let g = create::remote_group(&mut e.p2p, c)?;
            give(e, g, newgroup)
        }))
    }

    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: abi::MPI_Comm, size: *mut c_int) {
        code(run_comm("MPI_Comm_remote_size", comm, |e, c| {
            let r = e.comm(c)?.remote.ok_or(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument { what: "not an intercommunicator" },
            ))?;
            // SAFETY: MPI requires `size` to point to an int.
            unsafe { out(size, r.size() as c_int) }
        }))
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: abi::MPI_Comm, flag: *mut c_int) {
        code(run_comm("MPI_Comm_test_inter", comm, |e, c| {
            let inter = e.comm(c)?.is_inter();
            // SAFETY: MPI requires `flag` to point to an int.
            unsafe { out(flag, inter as c_int) }
        }))
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: abi::MPI_Comm, comm2: abi::MPI_Comm, result: *mut c_int) {
        code(run_comm("MPI_Comm_compare", comm1, |e, c1| {
            let c2 = handles::comm(comm2)?;
            let r = match e.comm_compare(c1, c2)? {
                CommSimilarity::Ident => abi::MPI_IDENT,
                CommSimilarity::Congruent => abi::MPI_CONGRUENT,
                CommSimilarity::Similar => abi::MPI_SIMILAR,
                CommSimilarity::Unequal => abi::MPI_UNEQUAL,
            };
            // SAFETY: MPI requires `result` to point to an int.
            unsafe { out(result, r) }
        }))
    }

    fn MPI_Comm_create / PMPI_Comm_create(comm: abi::MPI_Comm, g: abi::MPI_Group, newcomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Comm_create", comm, |cx, c| {
            let gr = group(cx.e(), g)?;
            let new = create::create(cx, c, gr)?;
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: abi::MPI_Comm, g: abi::MPI_Group, tag: c_int, newcomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Comm_create_group", comm, |cx, c| {
            let gr = group(cx.e(), g)?;
            let new = create::create_group(cx, c, gr, tag)?;
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Comm_split / PMPI_Comm_split(comm: abi::MPI_Comm, color: c_int, key: c_int, newcomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Comm_split", comm, |cx, c| {
            let new = create::split(cx, c, color, key)?;
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Comm_split_type / PMPI_Comm_split_type(comm: abi::MPI_Comm, split_type: c_int, key: c_int, info: abi::MPI_Info, newcomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Comm_split_type", comm, |cx, c| {
            let how = match split_type {
                abi::MPI_UNDEFINED => None,
                abi::MPI_COMM_TYPE_SHARED => Some(SplitType::Shared),
                abi::MPI_COMM_TYPE_HW_GUIDED => hw_guided(cx.e(), info)?,
                abi::MPI_COMM_TYPE_HW_UNGUIDED => Some(SplitType::Unguided),
                // MPICH's MPIX_COMM_TYPE_NEIGHBORHOOD: no neighbourhood hint is acted on, and
                // MPICH too gives MPI_COMM_NULL without one.
                MPIX_COMM_TYPE_NEIGHBORHOOD => None,
                _ => return Err(Error::bad_arg("unknown split type (MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_HW_GUIDED, MPI_COMM_TYPE_HW_UNGUIDED, MPIX_COMM_TYPE_NEIGHBORHOOD and MPI_UNDEFINED are known)")),
            };
            let new = create::split_type(cx, c, how, key)?;
            // The assertions `info` names hold on the new communicator (it starts with none).
            if let Some(n) = new {
                super::info::new_comm_hints(cx.e(), n, info)?;
            }
            give_comm(new, newcomm)
        }))
    }

    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: abi::MPI_Group, local_leader: c_int, remote_group: abi::MPI_Group, remote_leader: c_int, stringtag: *const c_char, info: abi::MPI_Info, errhandler: abi::MPI_Errhandler, newintercomm: *mut abi::MPI_Comm) {
        // Hints are not acted on (as for every communicator).
        let _ = info;
        code(run_inside("MPI_Intercomm_create_from_groups", None, |cx| {
            if stringtag.is_null() {
                return Err(Error::bad_arg("stringtag is NULL"));
            }
            // SAFETY: checked non-null; MPI requires a NUL-terminated string.
            let tag = unsafe { CStr::from_ptr(stringtag) }.to_bytes();
            let eh = super::errors::comm_handler(cx.e(), errhandler)?;
            let (lg, rg) = (group(cx.e(), local_group)?, group(cx.e(), remote_group)?);
            let new = create::intercomm_from_groups(cx, lg, local_leader, rg, remote_leader, tag_hash(tag))?;
            cx.e().set_errhandler(new, eh)?;
            give_comm(Some(new), newintercomm)
        }))
    }

    fn MPI_Intercomm_create / PMPI_Intercomm_create(local_comm: abi::MPI_Comm, local_leader: c_int, peer_comm: abi::MPI_Comm, remote_leader: c_int, tag: c_int, newintercomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Intercomm_create", local_comm, |cx, c| {
            // The peer communicator matters at the local leader only; elsewhere it may be
            // anything, including MPI_COMM_NULL.
            let peer = handles::comm(peer_comm).ok();
            let new = create::intercomm_create(cx, c, local_leader, peer, remote_leader, tag)?;
            give_comm(Some(new), newintercomm)
        }))
    }

    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: abi::MPI_Comm, high: c_int, newintracomm: *mut abi::MPI_Comm) {
        code(run_comm_inside("MPI_Intercomm_merge", intercomm, |cx, c| {
            let new = create::intercomm_merge(cx, c, high != 0)?;
            give_comm(Some(new), newintracomm)
        }))
    }
}
