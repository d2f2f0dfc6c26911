//! Raw Portals and MPI over the matching offload path, timed in the same two processes.
//!
//! `lwk-pingpong-pair [--batches B] [--iters N]`, started as two ranks with environment
//! variables only (`STORMPI_RANK`/`STORMPI_SIZE`/`STORMPI_JOBID`, as a vendor launcher does;
//! `pml` is the node default, `cm`). For 0 and 1 bytes it alternates batches of `N` round trips
//! of a raw Portals put ping-pong (a physical matching interface of its own: a persistent match
//! entry, noticed through its counting event, as `lwk-ptl-pingpong` does) with batches of an
//! `MPI_Send`/`MPI_Recv` ping-pong, `B` of each. A virtual machine's speed moves between runs
//! by more than the difference measured (its two cores are near each other or not), so
//! separate programs run a second apart compare different machines; batches milliseconds apart
//! in one pair of processes compare like with like. Prints, per size, the best batch of each
//! and the median over the batch pairs of MPI / raw.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::time::Instant;

use portals4_sys::*;
use stormpi_core::capi::abi::{
    MPI_Comm, MPI_Datatype, MPI_Status, MPI_BYTE, MPI_COMM_WORLD, MPI_STATUS_IGNORE,
};

extern "C" {
    fn MPI_Finalize() -> c_int;
    fn MPI_Comm_rank(comm: MPI_Comm, rank: *mut c_int) -> c_int;
    fn MPI_Barrier(comm: MPI_Comm) -> c_int;
    fn MPI_Send(
        buf: *const c_void,
        count: c_int,
        dt: MPI_Datatype,
        dest: c_int,
        tag: c_int,
        comm: MPI_Comm,
    ) -> c_int;
    fn MPI_Recv(
        buf: *mut c_void,
        count: c_int,
        dt: MPI_Datatype,
        src: c_int,
        tag: c_int,
        comm: MPI_Comm,
        status: *mut MPI_Status,
    ) -> c_int;
}

/// Portal table index of the raw ping-pong on its own interface.
const PT: u32 = 7;

fn ok(what: &str, rc: c_int) {
    if rc != PTL_OK {
        eprintln!("lwk-pingpong-pair: {what} failed ({rc})");
        std::process::exit(1);
    }
}

fn mpi(what: &str, rc: c_int) {
    if rc != 0 {
        eprintln!("lwk-pingpong-pair: {what} failed ({rc})");
        std::process::exit(1);
    }
}

/// The raw side: an interface, its counting event, the send descriptor.
struct Raw {
    ct: ptl_handle_ct_t,
    md: ptl_handle_md_t,
    peer: ptl_process_t,
    seen: u64,
}

impl Raw {
    /// A physical matching interface (the MPI library has the logical one) with a persistent
    /// entry over `rbuf` counted by a counting event, and `sbuf` bound for puts.
    fn new(rank: u32, rbuf: &mut [u8], sbuf: &[u8]) -> Raw {
        let mut ni = PTL_INVALID_HANDLE;
        let mut lim = ptl_ni_limits_t::default();
        // SAFETY: valid out-pointers; the buffers outlive the interface (the program's end).
        unsafe {
            ok("PtlInit", PtlInit());
            ok(
                "PtlNIInit",
                PtlNIInit(
                    PTL_IFACE_DEFAULT,
                    PTL_NI_MATCHING | PTL_NI_PHYSICAL,
                    PTL_PID_ANY,
                    ptr::null(),
                    &mut lim,
                    &mut ni,
                ),
            );
            let mut ct = PTL_INVALID_HANDLE;
            ok("PtlCTAlloc", PtlCTAlloc(ni, &mut ct));
            let mut pt = 0;
            ok("PtlPTAlloc", PtlPTAlloc(ni, 0, PTL_EQ_NONE, PT, &mut pt));
            let me = ptl_me_t {
                start: rbuf.as_mut_ptr().cast(),
                length: rbuf.len() as u64,
                ct_handle: ct,
                uid: PTL_UID_ANY,
                options: PTL_ME_OP_PUT
                    | PTL_ME_EVENT_CT_COMM
                    | PTL_ME_EVENT_COMM_DISABLE
                    | PTL_ME_EVENT_LINK_DISABLE,
                match_id: ptl_process_t::from_phys(PTL_NID_ANY, PTL_PID_ANY),
                match_bits: 0,
                ignore_bits: 0,
                min_free: 0,
            };
            let mut h = PTL_INVALID_HANDLE;
            ok(
                "PtlMEAppend",
                PtlMEAppend(ni, PT, &me, PTL_PRIORITY_LIST, ptr::null_mut(), &mut h),
            );
            let md = ptl_md_t {
                start: sbuf.as_ptr() as *mut c_void,
                length: sbuf.len() as u64,
                options: 0,
                eq_handle: PTL_EQ_NONE,
                ct_handle: PTL_CT_NONE,
            };
            let mut mdh = PTL_INVALID_HANDLE;
            ok("PtlMDBind", PtlMDBind(ni, &md, &mut mdh));
            Raw {
                ct,
                md: mdh,
                peer: ptl_process_t::from_phys(0, 1 - rank),
                seen: 0,
            }
        }
    }

    fn put(&mut self, n: usize) {
        // SAFETY: the descriptor covers `n` bytes of the send buffer.
        let rc = unsafe {
            PtlPut(
                self.md,
                0,
                n as u64,
                PTL_NO_ACK_REQ,
                self.peer,
                PT,
                0,
                0,
                ptr::null_mut(),
                0,
            )
        };
        ok("PtlPut", rc);
    }

    fn wait(&mut self) {
        self.seen += 1;
        let mut ev = ptl_ct_event_t::default();
        // SAFETY: a valid counting event and out-pointer.
        ok("PtlCTWait", unsafe {
            PtlCTWait(self.ct, self.seen, &mut ev)
        });
        if ev.failure != 0 {
            eprintln!("lwk-pingpong-pair: a raw put failed");
            std::process::exit(1);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, def: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(def)
    };
    let batches = opt("--batches", 40).max(1);
    let iters = opt("--iters", 1000).max(1);
    let mut rank: c_int = 0;
    // SAFETY: the C API with valid arguments.
    unsafe {
        mpi(
            "MPI_Init",
            stormpi_lwk::init::MPI_Init(ptr::null_mut(), ptr::null_mut()),
        );
        mpi("MPI_Comm_rank", MPI_Comm_rank(MPI_COMM_WORLD, &mut rank));
    }
    let mut rbuf = vec![0u8; 8];
    let sbuf = vec![1u8; 8];
    let mut raw = Raw::new(rank as u32, &mut rbuf, &sbuf);
    let mut mbuf = vec![0u8; 8];
    let peer = 1 - rank;
    // Both raw entries are in place before the first raw put.
    // SAFETY: the C API with valid arguments.
    mpi("MPI_Barrier", unsafe { MPI_Barrier(MPI_COMM_WORLD) });

    let raw_round = |raw: &mut Raw, n: usize| {
        if rank == 0 {
            raw.put(n);
            raw.wait();
        } else {
            raw.wait();
            raw.put(n);
        }
    };
    let mut mpi_round = |n: usize| {
        let (sp, rp) = (sbuf.as_ptr().cast(), mbuf.as_mut_ptr().cast());
        // SAFETY: the C API over this program's buffers (8 bytes each).
        let send = || unsafe {
            let rc = MPI_Send(sp, n as c_int, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            mpi("MPI_Send", rc);
        };
        // SAFETY: as above.
        let recv = || unsafe {
            let rc = MPI_Recv(
                rp,
                n as c_int,
                MPI_BYTE,
                peer,
                1,
                MPI_COMM_WORLD,
                MPI_STATUS_IGNORE,
            );
            mpi("MPI_Recv", rc);
        };
        if rank == 0 {
            send();
            recv();
        } else {
            recv();
            send();
        }
    };
    if rank == 0 {
        println!(
            "# raw Portals and MPI (pml cm) ping-pong in the same two processes, alternating \
             batches of {iters} round trips, {batches} of each; one-way µs"
        );
        println!("# bytes raw_best mpi_best best_ratio median_ratio min_ratio max_ratio");
    }
    let warm = iters / 10 + 1;
    for n in [0usize, 1] {
        let mut pairs = Vec::with_capacity(batches);
        for _ in 0..batches {
            for _ in 0..warm {
                raw_round(&mut raw, n);
            }
            let t = Instant::now();
            for _ in 0..iters {
                raw_round(&mut raw, n);
            }
            let r = t.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64;
            for _ in 0..warm {
                mpi_round(n);
            }
            let t = Instant::now();
            for _ in 0..iters {
                mpi_round(n);
            }
            let m = t.elapsed().as_secs_f64() * 1e6 / (2 * iters) as f64;
            pairs.push((r, m));
        }
        if rank == 0 {
            let rb = pairs.iter().map(|p| p.0).fold(f64::MAX, f64::min);
            let mb = pairs.iter().map(|p| p.1).fold(f64::MAX, f64::min);
            let mut q: Vec<f64> = pairs.iter().map(|p| p.1 / p.0).collect();
            q.sort_by(f64::total_cmp);
            println!(
                "{n} {rb:.3} {mb:.3} {:.2} {:.2} {:.2} {:.2}",
                mb / rb,
                q[q.len() / 2],
                q[0],
                q[q.len() - 1]
            );
        }
    }
    // SAFETY: the C API.
    unsafe {
        mpi("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD));
        mpi("MPI_Finalize", MPI_Finalize());
    }
}
