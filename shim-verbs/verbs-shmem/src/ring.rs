//! The wire between processes: one shared-memory segment per port (per process), holding one
//! inbound ring per source LID.
//!
//! A segment is the file `/dev/shm/stormpi-verbs-<fabric>-<lid>` (mode 0600). It is built under a
//! temporary name and hard-linked into place, which fails if the name exists: so two processes
//! never take one LID, and a peer never maps a half-initialised segment. A segment left behind by
//! a dead process (its owner pid is gone) is removed and the LID taken again.
//!
//! A ring has one producer (the process with that source LID) and one consumer (the owner) and no
//! lock, in the manner of the software Portals NI's rings: 64-byte aligned records, a 64-byte
//! [`Pkt`] header whose first word announces the record (kind and payload length, zero = nothing
//! yet), then the payload. The producer zeroes the word where the next record will start before
//! it publishes the current one (Release), so the consumer (Acquire) never takes stale bytes of
//! an earlier lap for a record; a record that does not fit before the end of the ring is preceded
//! by a `WRAP` record. The consumer publishes its position (`head`) when done with a record.

use std::ffi::CString;
use std::io;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a record header.
pub const HDR: usize = 64;
const MAGIC: u64 = 0x7374_6f72_6d56_5242; // "stormVRB"
const VERSION: u64 = 1;
const HEADER_BYTES: usize = 4096;
const CTRL_STRIDE: usize = 128;

/// Record kinds (the low byte of the first word; never zero).
pub mod kind {
    /// A request (send, RDMA write, RDMA read) of a requester QP.
    pub const REQ: u8 = 1;
    /// A responder's answer: `op` is a [`super::syndrome`].
    pub const RESP: u8 = 2;
    /// The rest of the ring up to its end is unused; continue at offset 0.
    pub const WRAP: u8 = 3;
}

/// Request flags (second byte of the first word).
pub mod flag {
    /// The payload is the message itself; without it the payload is a list of the requester's
    /// `(address, length)` pairs the responder copies from or to by cross-memory attach.
    pub const BYTES: u8 = 1;
    /// The request carries immediate data (`imm`).
    pub const IMM: u8 = 2;
}

/// What a responder answers (`Pkt::op` of a `RESP`).
pub mod syndrome {
    /// Done.
    pub const ACK: u32 = 0;
    /// No receive was posted: try again after `aux` (the encoded RNR timer).
    pub const RNR: u32 = 1;
    /// Bad rkey, bounds or access rights.
    pub const REM_ACCESS: u32 = 2;
    /// The message does not fit the receive buffers (or a malformed request).
    pub const REM_INV_REQ: u32 = 3;
    /// The responder failed to carry the request out (its receive buffers were bad).
    pub const REM_OP: u32 = 4;
    /// The responder QP does not exist, is not connected to us or not ready: the requester
    /// retries as it would after a transport timeout.
    pub const NOT_READY: u32 = 5;
}

/// A record header as it lies in a ring (native byte order: both ends are one machine).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Pkt {
    /// kind | flags << 8 | payload bytes << 32 (written last).
    pub word: u64,
    pub src_qpn: u32,
    pub dst_qpn: u32,
    pub psn: u32,
    /// Requests: the `IBV_WR_*` opcode. Responses: the [`syndrome`].
    pub op: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// Immediate data (big-endian, as the application gave it).
    pub imm: u32,
    /// Requests: the message's length in bytes.
    pub length: u64,
    /// Responses to `RNR`: the responder's encoded minimum RNR timer.
    pub aux: u32,
    pub _reserved: u32,
    pub _pad: u64,
}

const _: () = assert!(std::mem::size_of::<Pkt>() == HDR);

impl Pkt {
    pub fn kind(&self) -> u8 {
        self.word as u8
    }
    pub fn flags(&self) -> u8 {
        (self.word >> 8) as u8
    }
    pub fn payload(&self) -> usize {
        (self.word >> 32) as usize
    }
}

/// Bytes a record with `payload` bytes takes.
pub fn record_bytes(payload: usize) -> usize {
    (HDR + payload + 63) & !63
}

struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap of exactly this length.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Segment geometry (the same for every process of a fabric).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// LIDs of the fabric: `1..lids` are usable (LID 0 is not a valid LID).
    pub lids: usize,
    /// Bytes of each ring (a power of two).
    pub ring_bytes: usize,
}

impl Geometry {
    fn bytes(&self) -> usize {
        self.data_start() + self.lids * self.ring_bytes
    }
    fn data_start(&self) -> usize {
        (HEADER_BYTES + self.lids * CTRL_STRIDE + 4095) & !4095
    }
    /// Largest payload one record may carry.
    pub fn max_payload(&self) -> usize {
        self.ring_bytes / 4 - HDR
    }
}

const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_PID: usize = 16;
const H_LIDS: usize = 24;
const H_RING: usize = 32;

/// A mapped segment: our own (we consume its rings) or a peer's (we produce into one of them).
pub struct Segment {
    map: Map,
    geo: Geometry,
}

// SAFETY: the mapping is plain shared memory; all access goes through atomics or through
// positions the ring protocol hands to exactly one side.
unsafe impl Send for Segment {}

fn path_of(fabric: &str, lid: u16) -> String {
    format!("/dev/shm/stormpi-verbs-{fabric}-{lid}")
}

fn word(base: *mut u8, off: usize) -> &'static AtomicU64 {
    // SAFETY: callers pass 8-aligned offsets inside a live mapping; the reference is used at
    // once, while the segment lives.
    unsafe { &*(base.add(off) as *const AtomicU64) }
}

fn map_fd(fd: libc::c_int, len: usize) -> io::Result<Map> {
    // SAFETY: a shared mapping of a file we opened; the result is checked.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Map { ptr: p.cast(), len })
}

/// Whether the process `pid` is gone.
fn dead(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let gone = unsafe { libc::kill(pid, 0) != 0 };
    gone && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Why a LID could not be taken.
#[derive(Debug)]
pub enum TakeError {
    /// A live process holds it.
    InUse,
    Io(io::Error),
}

impl Segment {
    /// Creates the segment of `lid`, taking the LID: [`TakeError::InUse`] if a live process has
    /// it (a dead one's segment is removed first).
    pub fn take(fabric: &str, lid: u16, geo: Geometry) -> Result<Segment, TakeError> {
        let path = path_of(fabric, lid);
        let tmp = format!("{path}.{}.tmp", std::process::id());
        let ctmp =
            CString::new(tmp).map_err(|_| TakeError::Io(io::ErrorKind::InvalidInput.into()))?;
        let cpath =
            CString::new(path).map_err(|_| TakeError::Io(io::ErrorKind::InvalidInput.into()))?;
        let len = geo.bytes();
        // SAFETY: plain libc calls on a path we own; errors are checked.
        let fd = unsafe {
            libc::open(
                ctmp.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(TakeError::Io(io::Error::last_os_error()));
        }
        // SAFETY: fd is ours.
        let map = if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            Err(io::Error::last_os_error())
        } else {
            map_fd(fd, len)
        };
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        let map = match map {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: valid C string.
                unsafe { libc::unlink(ctmp.as_ptr()) };
                return Err(TakeError::Io(e));
            }
        };
        let seg = Segment { map, geo };
        word(seg.map.ptr, H_VERSION).store(VERSION, Ordering::Relaxed);
        word(seg.map.ptr, H_PID).store(std::process::id() as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_LIDS).store(geo.lids as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_RING).store(geo.ring_bytes as u64, Ordering::Relaxed);
        word(seg.map.ptr, H_MAGIC).store(MAGIC, Ordering::Release);
        let mut result = Err(TakeError::InUse);
        for _ in 0..2 {
            // SAFETY: both are valid C strings; link fails if the name exists.
            if unsafe { libc::link(ctmp.as_ptr(), cpath.as_ptr()) } == 0 {
                result = Ok(());
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                result = Err(TakeError::Io(e));
                break;
            }
            match Self::owner_of(&cpath) {
                Some(pid) if !dead(pid) => break,
                // A dead owner's (or a broken) segment: remove it and try once more.
                // SAFETY: valid C string.
                _ => unsafe {
                    libc::unlink(cpath.as_ptr());
                },
            }
        }
        // SAFETY: valid C string.
        unsafe { libc::unlink(ctmp.as_ptr()) };
        result.map(|()| seg)
    }

    /// The owner pid recorded in the segment at `cpath`, if it is a complete segment.
    fn owner_of(cpath: &CString) -> Option<libc::pid_t> {
        // SAFETY: plain libc calls; the mapping covers the first page only.
        unsafe {
            let fd = libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let mut st: libc::stat = std::mem::zeroed();
            let ok = libc::fstat(fd, &mut st) == 0 && st.st_size as usize >= HEADER_BYTES;
            let p = if ok {
                libc::mmap(
                    ptr::null_mut(),
                    HEADER_BYTES,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            } else {
                libc::MAP_FAILED
            };
            libc::close(fd);
            if p == libc::MAP_FAILED {
                return None;
            }
            let base = p as *mut u8;
            let pid = (word(base, H_MAGIC).load(Ordering::Acquire) == MAGIC)
                .then(|| word(base, H_PID).load(Ordering::Relaxed) as libc::pid_t);
            libc::munmap(p, HEADER_BYTES);
            pid
        }
    }

    /// Maps the segment of a peer's `lid`. `Ok(None)`: nobody has the LID (or its owner died).
    pub fn attach(fabric: &str, lid: u16, geo: Geometry) -> io::Result<Option<Segment>> {
        let cpath = CString::new(path_of(fabric, lid)).map_err(|_| io::ErrorKind::InvalidInput)?;
        let len = geo.bytes();
        // SAFETY: plain libc calls; the mapping length is checked against the file size.
        let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            };
        }
        // SAFETY: fd is ours; st is plain data.
        let size_ok = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(fd, &mut st) == 0 && st.st_size as usize >= len
        };
        let map = if size_ok {
            map_fd(fd, len).map(Some)
        } else {
            Ok(None)
        };
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        let Some(map) = map? else {
            return Ok(None);
        };
        let seg = Segment { map, geo };
        if word(seg.map.ptr, H_MAGIC).load(Ordering::Acquire) != MAGIC
            || word(seg.map.ptr, H_VERSION).load(Ordering::Relaxed) != VERSION
        {
            return Ok(None);
        }
        if word(seg.map.ptr, H_LIDS).load(Ordering::Relaxed) != geo.lids as u64
            || word(seg.map.ptr, H_RING).load(Ordering::Relaxed) != geo.ring_bytes as u64
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "peer's segment has another geometry (STORMPI_VERBS_LIDS or \
                 STORMPI_VERBS_RING_BYTES differ between the processes)",
            ));
        }
        if dead(seg.owner_pid()) {
            return Ok(None);
        }
        Ok(Some(seg))
    }

    /// The OS process id of the segment's owner.
    pub fn owner_pid(&self) -> libc::pid_t {
        word(self.map.ptr, H_PID).load(Ordering::Relaxed) as libc::pid_t
    }

    /// Removes the segment's name (mappings stay valid).
    pub fn unlink(fabric: &str, lid: u16) {
        if let Ok(c) = CString::new(path_of(fabric, lid)) {
            // SAFETY: valid C string.
            unsafe { libc::unlink(c.as_ptr()) };
        }
    }

    fn head(&self, src: usize) -> &AtomicU64 {
        word(self.map.ptr, HEADER_BYTES + src * CTRL_STRIDE)
    }

    fn ring(&self, src: usize) -> *mut u8 {
        // SAFETY: inside the mapping by construction of the geometry (src < lids).
        unsafe {
            self.map
                .ptr
                .add(self.geo.data_start() + src * self.geo.ring_bytes)
        }
    }
}

/// The producer side of one ring (kept by the source).
#[derive(Default)]
pub struct Producer {
    tail: u64,
    head: u64,
}

impl Producer {
    /// The producer of ring `src` of `seg`, starting where its consumer stands: a process that
    /// takes a LID an earlier process held continues that ring rather than writing where the
    /// consumer is not looking.
    pub fn attach(seg: &Segment, src: usize) -> Producer {
        let head = seg.head(src).load(Ordering::Acquire);
        Producer { tail: head, head }
    }

    /// Writes one record: header `h` (its `word` is replaced), `payload` bytes filled by `fill`.
    /// `false` when there is no room now. (The record's parts are separate arguments, as
    /// they lie in the ring.)
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        seg: &Segment,
        src: usize,
        h: &Pkt,
        kind: u8,
        flags: u8,
        payload: usize,
        fill: impl FnOnce(*mut u8),
    ) -> bool {
        let cap = seg.geo.ring_bytes as u64;
        let need = record_bytes(payload) as u64;
        debug_assert!(payload <= seg.geo.max_payload());
        let pos = self.tail & (cap - 1);
        let to_end = cap - pos;
        let total = if need > to_end { to_end + need } else { need };
        if self.tail - self.head + total + 64 > cap {
            self.head = seg.head(src).load(Ordering::Acquire);
            if self.tail - self.head + total + 64 > cap {
                return false;
            }
        }
        let ring = seg.ring(src);
        let mut at = pos;
        if need > to_end {
            word(ring, 0).store(0, Ordering::Relaxed);
            word(ring, pos as usize).store(kind::WRAP as u64, Ordering::Release);
            at = 0;
            self.tail += to_end;
        }
        let next = (at + need) & (cap - 1);
        word(ring, next as usize).store(0, Ordering::Relaxed);
        // SAFETY: [at, at + need) is free space of the ring (checked above), 64-aligned.
        unsafe {
            let p = ring.add(at as usize);
            let mut hh = *h;
            hh.word = 0;
            ptr::write(p as *mut Pkt, hh);
            if payload > 0 {
                fill(p.add(HDR));
            }
        }
        let w = kind as u64 | (flags as u64) << 8 | (payload as u64) << 32;
        word(ring, at as usize).store(w, Ordering::Release);
        self.tail += need;
        true
    }
}

/// The consumer side of one ring (kept by the owner). Nothing read from the ring is trusted: a
/// record that would run past the ring's end or a wrap at offset 0 marks the ring broken, and it
/// is not read again.
#[derive(Default)]
pub struct Consumer {
    head: u64,
    broken: bool,
}

impl Consumer {
    /// The next record: its header and payload (inside the ring, valid until
    /// [`Consumer::advance`]).
    pub fn peek(&mut self, seg: &Segment, src: usize) -> Option<(Pkt, *const u8)> {
        if self.broken {
            return None;
        }
        let ring = seg.ring(src);
        let mask = seg.geo.ring_bytes as u64 - 1;
        loop {
            let pos = (self.head & mask) as usize;
            let w = word(ring, pos).load(Ordering::Acquire);
            if w == 0 {
                return None;
            }
            if w as u8 == kind::WRAP {
                if pos == 0 {
                    self.broken = true;
                    return None;
                }
                self.head += mask + 1 - pos as u64;
                continue;
            }
            let payload = (w >> 32) as usize;
            if record_bytes(payload) as u64 > mask + 1 - pos as u64 {
                self.broken = true;
                return None;
            }
            // SAFETY: the record was published (Acquire above); its header lies inside the ring.
            let mut h = unsafe { ptr::read(ring.add(pos) as *const Pkt) };
            h.word = w;
            // SAFETY: the payload ends inside the ring (checked above).
            return Some((h, unsafe { ring.add(pos + HDR) as *const u8 }));
        }
    }

    /// Releases the record returned by the last [`Consumer::peek`].
    pub fn advance(&mut self, seg: &Segment, src: usize, h: &Pkt) {
        self.head += record_bytes(h.payload()) as u64;
        seg.head(src).store(self.head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_wraps_and_preserves_order() {
        let fabric = format!("unit-{}", std::process::id());
        let geo = Geometry {
            lids: 2,
            ring_bytes: 4096,
        };
        let seg = Segment::take(&fabric, 1, geo).unwrap();
        let peer = Segment::attach(&fabric, 1, geo).unwrap().unwrap();
        let mut p = Producer::default();
        let mut c = Consumer::default();
        let (mut sent, mut got) = (0u32, 0u32);
        for round in 0..2000usize {
            let len = (round * 37) % 700;
            let h = Pkt {
                psn: sent,
                ..Pkt::default()
            };
            let fill = sent as u8;
            if p.push(&peer, 1, &h, kind::REQ, 0, len, |d| unsafe {
                ptr::write_bytes(d, fill, len)
            }) {
                sent += 1;
            }
            if round % 3 != 0 {
                while let Some((h, d)) = c.peek(&seg, 1) {
                    assert_eq!(h.psn, got);
                    let s = unsafe { std::slice::from_raw_parts(d, h.payload()) };
                    assert!(s.iter().all(|&b| b == got as u8));
                    got += 1;
                    c.advance(&seg, 1, &h);
                }
            }
        }
        assert!(sent > 1000);
        Segment::unlink(&fabric, 1);
    }

    #[test]
    fn a_new_producer_continues_where_the_consumer_stands() {
        let fabric = format!("unit3-{}", std::process::id());
        let geo = Geometry {
            lids: 2,
            ring_bytes: 16384,
        };
        let seg = Segment::take(&fabric, 1, geo).unwrap();
        let peer = Segment::attach(&fabric, 1, geo).unwrap().unwrap();
        let mut c = Consumer::default();
        let mut old = Producer::default();
        for psn in 0..5 {
            let h = Pkt {
                psn,
                ..Pkt::default()
            };
            assert!(old.push(&peer, 1, &h, kind::REQ, 0, 100, |_| {}));
            let (got, _) = c.peek(&seg, 1).unwrap();
            assert_eq!(got.psn, psn);
            c.advance(&seg, 1, &got);
        }
        // The LID's next holder: its first record is the next one the consumer reads.
        let mut new = Producer::attach(&peer, 1);
        let h = Pkt {
            psn: 99,
            ..Pkt::default()
        };
        assert!(new.push(&peer, 1, &h, kind::REQ, 0, 0, |_| {}));
        assert_eq!(c.peek(&seg, 1).unwrap().0.psn, 99);
        Segment::unlink(&fabric, 1);
    }

    #[test]
    fn a_live_processes_lid_cannot_be_taken_twice() {
        let fabric = format!("unit2-{}", std::process::id());
        let geo = Geometry {
            lids: 2,
            ring_bytes: 4096,
        };
        let _seg = Segment::take(&fabric, 1, geo).unwrap();
        assert!(matches!(
            Segment::take(&fabric, 1, geo),
            Err(TakeError::InUse)
        ));
        Segment::unlink(&fabric, 1);
    }
}
