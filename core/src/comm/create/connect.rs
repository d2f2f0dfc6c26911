//! `MPI_Comm_accept` and `MPI_Comm_connect`: an intercommunicator with the processes of another
//! job.
//!
//! The roots meet over a port ([`crate::dpm::Ports`]: the connecting side proves the port's
//! secret), then:
//!
//! 1. the root broadcasts the outcome and the port's secret to its members (a root that could
//!    not meet makes every member fail alike);
//! 2. every member writes its business card ([`crate::dpm::Card`]), announcing the first of
//!    the free slots of its process table the other side's processes will take (the longest
//!    run, after giving back those no communicator reaches any more), and the root gathers
//!    them in member order;
//! 3. the roots swap their lists over the link (the accepting root sends first) and each
//!    broadcasts the other side's to its members;
//! 4. every member adds the other side's processes to its engine
//!    ([`Engine::add_procs`](crate::engine::Engine::add_procs)): slots from its announced base
//!    on, routes through the BTLs that reach them (tcp), the link's secret for their
//!    connections to prove;
//! 5. the members agree a context id free at both sides (the roots swap the sides' bitmaps over
//!    the link): since every member contributes after step 4, no process of either side returns
//!    before all have added the others, and no connection arrives at a process that does not
//!    know its sender yet.

use super::*;
use crate::dpm::{push_card, Cards, LinkId, Ports, MAX_CARD};

/// How the root meets the other job.
#[derive(Clone, Copy, Debug)]
pub enum Meet<'a> {
    /// Waits at the open port of this name (`MPI_Comm_accept`).
    Accept(&'a [u8]),
    /// Goes to the port of this name (`MPI_Comm_connect`).
    Connect(&'a [u8]),
    /// Over this connected socket (`MPI_Comm_join`).
    Join(i32),
}

/// Bytes of one member's card as gathered: a length, then up to [`MAX_CARD`] bytes.
const SLOT: usize = 2 + MAX_CARD;

/// Memory from the platform for the card lists, given back when dropped.
struct Buf {
    ptr: *mut u8,
    len: usize,
    platform: &'static dyn crate::platform::Platform,
}

impl Buf {
    fn new(e: &Engine, len: usize) -> Result<Buf> {
        let platform = e.platform;
        let ptr = platform.alloc_mem(len.max(8)).ok_or(Error::new(
            ErrorClass::NoMem,
            Reason::BadArgument {
                what: "no memory for the business cards of another job",
            },
        ))?;
        Ok(Buf { ptr, len, platform })
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes from alloc_mem, owned by this value.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: the pointer came from this platform's alloc_mem and is given back once.
        unsafe { self.platform.free_mem(self.ptr) };
    }
}

/// A link that ends when dropped.
struct Met {
    ports: &'static dyn Ports,
    link: LinkId,
}

impl Drop for Met {
    fn drop(&mut self) {
        self.ports.end(self.link);
    }
}

/// Broadcasts `buf`'s bytes from the root among `m`.
fn bcast_bytes(cx: &mut Inside, m: &Members, buf: &mut [u8]) -> Result<()> {
    // SAFETY: `buf` is borrowed for the call.
    unsafe { bcast_among(cx, m, buf.as_mut_ptr(), buf.len(), Datatype::BYTE) }
}

/// The roots' swap of their sides' card lists over `link` (the accepting root speaks first):
/// first the sizes and whether each side has room for the other's processes (`free` slots
/// here, of `max` = `dpm_max_procs`), so that a side without room says so before any list
/// moves; then the lists. The other side's list lands in `theirs` (its size, then its cards);
/// returns its length.
#[allow(clippy::too_many_arguments)]
fn swap_lists(
    link: &Met,
    accept: bool,
    list: &[u8],
    k: u32,
    free: usize,
    max: u32,
    theirs: &mut [u8],
    timeout_ms: u64,
) -> Result<usize> {
    let (ports, l) = (link.ports, link.link);
    let swap = |mine: &[u8], out: &mut [u8]| -> Result<usize> {
        if accept {
            ports.send(l, mine)?;
        }
        let n = ports.recv(l, out, timeout_ms)?;
        if !accept {
            ports.send(l, mine)?;
        }
        Ok(n)
    };
    let mut hdr = [0u8; 4];
    if swap(&k.to_be_bytes(), &mut hdr)? != 4 {
        return Err(Error::bad_arg("the other job's size is cut short"));
    }
    let their_k = be32(&hdr);
    let room = their_k >= 1 && their_k as usize <= free;
    let mut verdict = [0u8; 1];
    swap(&[room as u8], &mut verdict)?;
    if !room {
        return Err(Error::exhausted(
            "process slots for processes of other jobs",
            max,
            crate::engine::DPM_MAX_PROCS.name,
        ));
    }
    if verdict[0] != 1 {
        return Err(Error::new(
            ErrorClass::NoMem,
            Reason::BadArgument {
                what: "the other job has no process slots left for this job's processes \
                       (dpm_max_procs there)",
            },
        ));
    }
    let got = swap(list, theirs)?;
    if got < 4 || be32(&theirs[..4]) != their_k {
        return Err(Error::bad_arg("the other job's card list is cut short"));
    }
    Ok(got)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// `MPI_Comm_accept`, `MPI_Comm_connect` or `MPI_Comm_join` over communicator `comm`, whose
/// rank `root` meets the other job as `meet` says (which matters at the root only), waiting at
/// most `timeout_ms` for each step over the link. Collective over `comm`; the result is an
/// intercommunicator whose remote group is the other side's.
pub fn connect_accept(
    cx: &mut Inside,
    comm: CommId,
    root: i32,
    meet: Option<Meet<'_>>,
    timeout_ms: u64,
) -> Result<CommId> {
    let c = cx.e().check_comm(comm)?.clone();
    if c.is_inter() {
        return Err(not_intra());
    }
    let size = c.size();
    if root < 0 || root as u32 >= size {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange { rank: root, size },
        ));
    }
    let root = root as u32;
    let m = Members {
        comm,
        group: None,
        root,
        n: size,
        me: (c.rank + size - root) % size,
        tag: TAG_INTER,
    };

    // 1. The root meets the other side.
    let mut head = [0u8; 1 + 32];
    let mut met = None;
    let mut failed = None;
    let mut accept = false;
    if m.me == 0 {
        let r = match (cx.e().platform.ports(), meet) {
            (None, _) => Err(Error::unsupported(
                "connecting to other jobs on a platform without a network",
            )),
            (Some(_), None) => Err(Error::new(
                ErrorClass::Port,
                Reason::BadArgument {
                    what: "no port name at the root",
                },
            )),
            (Some(ports), Some(how)) => {
                let r = match how {
                    Meet::Accept(name) => ports.accept(name, timeout_ms).map(|(l, s)| (l, s, true)),
                    Meet::Connect(name) => {
                        ports.connect(name, timeout_ms).map(|(l, s)| (l, s, false))
                    }
                    Meet::Join(fd) => ports.join(fd, timeout_ms),
                };
                r.map(|(link, secret, acc)| {
                    accept = acc;
                    (Met { ports, link }, secret)
                })
            }
        };
        match r {
            Ok((link, secret)) => {
                head[0] = 1;
                head[1..].copy_from_slice(&secret);
                met = Some(link);
            }
            Err(e) => failed = Some(e),
        }
    }
    bcast_bytes(cx, &m, &mut head)?;
    if head[0] != 1 {
        return Err(failed.unwrap_or(Error::new(
            ErrorClass::Port,
            Reason::BadArgument {
                what: "the root could not meet the other job at the port",
            },
        )));
    }
    let mut secret = [0u8; 32];
    secret.copy_from_slice(&head[1..]);

    // 2. Cards, gathered at the root in member order.
    let mut mine = [0u8; SLOT];
    let (base, free) = cx.e().free_slots();
    let free = free as usize;
    let n = cx.e().write_card(base, &mut mine[2..])?;
    mine[..2].copy_from_slice(&(n as u16).to_be_bytes());
    let mut theirs_head = [0u8; 8];
    let mut theirs_buf;
    let mut root_failed = None;
    if let Some(link) = &met {
        let mut list = Buf::new(cx.e(), 4 + SLOT * size as usize)?;
        let list = list.bytes();
        list[..4].copy_from_slice(&size.to_be_bytes());
        let mut end = push_card(list, 4, &mine[2..2 + n])?;
        let mut slot = [0u8; SLOT];
        for i in 1..size {
            let from = member_rank(&cx.e().p2p, &m, i)?;
            // SAFETY: `slot` is borrowed until the receive completes.
            let conv = unsafe { Unpacker::elements(slot.as_mut_ptr(), SLOT, Datatype::BYTE) };
            cx.recv_internal(conv, from, m.tag, m.comm)?;
            let len = (u16::from_be_bytes([slot[0], slot[1]]) as usize).min(MAX_CARD);
            end = push_card(list, end, &slot[2..2 + len])?;
        }
        // 3. The roots swap their lists: the accepting root sends first.
        theirs_buf = Buf::new(cx.e(), 4 + SLOT * free.max(1))?;
        let max = cx.e().params().u32(&crate::engine::DPM_MAX_PROCS);
        let swapped = swap_lists(
            link,
            accept,
            &list[..end],
            size,
            free,
            max,
            theirs_buf.bytes(),
            timeout_ms,
        );
        match swapped {
            Ok(got) => {
                theirs_head[..4].copy_from_slice(&theirs_buf.bytes()[..4]);
                theirs_head[4..].copy_from_slice(&(got as u32 - 4).to_be_bytes());
            }
            Err(e) => {
                // Every member fails with the root, in the root's error class.
                theirs_head[..4].copy_from_slice(&u32::MAX.to_be_bytes());
                theirs_head[4..].copy_from_slice(&(e.class as u32).to_be_bytes());
                root_failed = Some(e);
            }
        }
    } else {
        let to = member_rank(&cx.e().p2p, &m, 0)?;
        // SAFETY: `mine` is borrowed until the send completes.
        let conv = unsafe { Packer::elements(mine.as_ptr(), SLOT, Datatype::BYTE) };
        cx.send_internal(conv, to, m.tag, m.comm)?;
        theirs_buf = Buf::new(cx.e(), 0)?;
    }
    bcast_bytes(cx, &m, &mut theirs_head)?;
    let k = be32(&theirs_head[..4]);
    if k == u32::MAX {
        let class =
            ErrorClass::from_code(be32(&theirs_head[4..]) as i32).unwrap_or(ErrorClass::Other);
        return Err(root_failed.unwrap_or(Error::new(
            class,
            Reason::BadArgument {
                what: "the root could not swap business cards with the other job",
            },
        )));
    }
    let len = be32(&theirs_head[4..]) as usize;
    if m.me != 0 {
        theirs_buf = Buf::new(cx.e(), 4 + len)?;
    }
    let cards_bytes = &mut theirs_buf.bytes()[4..4 + len];
    bcast_bytes(cx, &m, cards_bytes)?;

    // 4. The other side joins this engine.
    let added = Cards::parse(cards_bytes, k).and_then(|cards| {
        if cards.is_empty() {
            return Err(Error::bad_arg("the other job has no processes"));
        }
        cx.e().add_procs(base, cards, m.me, secret)
    });
    let remote = match added {
        Ok(first) => cx
            .e()
            .p2p
            .comms
            .groups
            .gather(k, |_, i| ProcId(first.0 + i)),
        Err(e) => Err(e),
    };

    // 5. A context id free at both sides.
    let leaders = met
        .as_ref()
        .map(|l| Leaders::Link(l.ports, l.link, timeout_ms));
    let cid = agree_cid_with(cx, &Members { tag: TAG_CID, ..m }, Some(leaders));
    let (remote, cid) = match (remote, cid) {
        (Ok(r), Ok(cid)) => (r, cid),
        (Ok(r), Err(e)) => {
            cx.e().p2p.comms.groups.release(r);
            return Err(e);
        }
        (Err(e), _) => return Err(e),
    };
    drop(met);
    install_inter(cx, &c, cid, remote, comm)
}
